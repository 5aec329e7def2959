//! `stuck` follows what waits for what, for the finalizers Kubernetes itself sets, down to the one
//! finalizer to remove; `unstick` reports exactly what it changed and keeps every backup. On the
//! real control plane (its garbage collector and namespace controller run; the pvc/pv-protection
//! controllers do not, and nothing runs Pods).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;

const HOLD: &str = "stack-test.example.com/hold";

fn item<'a>(json: &'a Value, kind: &str, name: &str) -> &'a Value {
    json["stuck"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == kind && i["name"] == name)
        .unwrap_or_else(|| panic!("{kind}/{name} not stuck: {json}"))
}

fn diagnoses(item: &Value) -> String {
    item["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn uid(kind: &str, namespace: &str, name: &str) -> String {
    uid_of(kind, Some(namespace), name)
}

/// A ConfigMap owned by another, with `blockOwnerDeletion`.
fn owned_config_map(namespace: &str, name: &str, owner: &str, finalizers: &[&str]) {
    let owner_uid = uid("configmap", namespace, owner);
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: {namespace}
  finalizers: {finalizers:?}
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: {owner}, uid: {owner_uid}, blockOwnerDeletion: true}}]
"#
    ));
}

/// a <- b <- c (each owned by the one before, blockOwnerDeletion), c holds a finalizer no one
/// serves; a is deleted in the foreground: the garbage collector marks b and c for deletion.
fn three_level_chain(n: &str) {
    assert_eq!(kubectl(&["create", "configmap", "a", "-n", n]).code, 0);
    owned_config_map(n, "b", "a", &[]);
    owned_config_map(n, "c", "b", &[HOLD]);
    assert_eq!(
        kubectl(&[
            "delete",
            "configmap",
            "a",
            "-n",
            n,
            "--cascade=foreground",
            "--wait=false"
        ])
        .code,
        0
    );
    wait_until(Duration::from_secs(30), || {
        kubectl(&[
            "get",
            "configmap",
            "c",
            "-n",
            n,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .stdout
        .len()
            > 1
    });
}

#[test]
fn a_three_level_foreground_chain_is_one_tree_with_one_leaf_and_its_unstick_command() {
    let _logs = start();
    let ns = Namespace::new("chain");
    let n = &ns.0;
    three_level_chain(n);

    // Named, the root shows its whole chain (and nothing else being deleted in the cluster).
    let text = stack(&["stuck", "-n", n, "configmap/a"]).expect_code(1);
    let command = format!("kubectl stack unstick -n {n} configmaps/c --finalizer {HOLD}");
    let expected_tree = format!("ConfigMap/{n}/a\n│   terminating:  ");
    assert!(text.stdout.starts_with(&expected_tree), "{}", text.stdout);
    assert!(
        text.stdout
            .contains(&format!("└── ConfigMap/{n}/b (foregroundDeletion)\n")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains(&format!("    └── ConfigMap/{n}/c (foregroundDeletion)\n")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!(
            "foregroundDeletion: waits for 1 dependent with blockOwnerDeletion: ConfigMap/{n}/b (finalizer foregroundDeletion)"
        )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!(
            "  cause: ConfigMap/{n}/c (finalizer {HOLD}); removing only that releases the chain of 3 objects:\n    {command}\n"
        )),
        "{}",
        text.stdout
    );
    assert_eq!(
        text.stdout.matches("kubectl stack unstick").count(),
        1,
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("--all-finalizers"), "{}", text.stdout);
    // One tree: the root is printed once at the top level, nothing else is.
    let top_level: Vec<&str> = text.stdout.lines().filter(|l| l.starts_with("ConfigMap/")).collect();
    assert_eq!(top_level, vec![format!("ConfigMap/{n}/a")], "{}", text.stdout);

    let json = stack(&["stuck", "-n", n, "configmap/a", "-o", "json"])
        .expect_code(1)
        .json();
    assert_eq!(json["stuck"].as_array().unwrap().len(), 3, "{json}");
    let edges: Vec<(String, String, String)> = json["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"]["name"].as_str().unwrap().to_string(),
                e["to"]["name"].as_str().unwrap().to_string(),
                e["finalizer"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        edges,
        vec![
            ("a".into(), "b".into(), "foregroundDeletion".into()),
            ("b".into(), "c".into(), "foregroundDeletion".into())
        ]
    );
    assert_eq!(json["chains"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json["chains"][0]["root"]["name"], "a");
    assert_eq!(json["chains"][0]["cut"][0]["object"]["name"], "c");
    assert_eq!(json["chains"][0]["cut"][0]["command"], command.as_str());
    assert_eq!(json["cycles"], serde_json::json!([]));

    // Everything being deleted in the namespace: the same chain, once.
    let listed = stack(&["stuck", "-n", n]).expect_code(1);
    assert_eq!(
        listed.stdout.matches(&format!("kubectl stack unstick -n {n} ")).count(),
        1,
        "{}",
        listed.stdout
    );
    assert!(
        listed.stdout.lines().any(|l| l == format!("ConfigMap/{n}/a")),
        "{}",
        listed.stdout
    );

    // unstick of a non-leaf warns and names the cause.
    let warned = stack(&[
        "unstick",
        "-n",
        n,
        "configmap/b",
        "--finalizer",
        "foregroundDeletion",
        "--dry-run",
    ])
    .expect_code(0);
    assert!(
        warned.stderr.contains(&format!(
            "warning: ConfigMap/{n}/b is not the cause: it waits for ConfigMap/{n}/c (foregroundDeletion)"
        )),
        "{}",
        warned.stderr
    );
    assert!(warned.stderr.contains(&command), "{}", warned.stderr);

    // The printed command, and only it, releases all three.
    let released = run_printed_unstick(&command).expect_code(0);
    assert!(
        !released.stderr.contains("is not the cause"),
        "the leaf is the cause: {}",
        released.stderr
    );
    wait_until(Duration::from_secs(30), || {
        ["a", "b", "c"].iter().all(|name| !exists("configmap", Some(n), name))
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_blockers_are_explained_with_the_same_chains() {
    let _logs = start();
    let ns = Namespace::new("blockers");
    let n = ns.0.clone();
    let setup = n.clone();
    tokio::task::spawn_blocking(move || three_level_chain(&setup))
        .await
        .unwrap();

    let global = kubectl_stack::cli::GlobalArgs {
        kubeconfig: Some(cluster().admin.clone()),
        namespace: Some(n.clone()),
        ..Default::default()
    };
    let session = kubectl_stack::cluster::session::Session::open(&global).await.unwrap();
    let kind = session.catalog.get("", "ConfigMap").unwrap().clone();
    // What a timed-out wave reports: the object it waited for.
    let blockers = vec![(
        kind,
        kubectl_stack::model::identity::ObjectId::new("", "ConfigMap", Some(&n), "a"),
    )];
    let report = kubectl_stack::breakglass::stuck::explain_blockers(&session, &blockers).await;
    assert_eq!(report.entries.len(), 3);
    assert_eq!(report.chains.len(), 1);
    let cut = &report.chains[0].cuts[0];
    assert_eq!(report.entries[cut.entry].object.name(), "c");
    assert_eq!(cut.finalizers, vec![HOLD.to_string()]);
    let text = kubectl_stack::breakglass::stuck::chains::render_text(&report);
    assert!(
        text.contains(&format!("kubectl stack unstick -n {n} configmaps/c --finalizer {HOLD}")),
        "{text}"
    );
    let release = n.clone();
    tokio::task::spawn_blocking(move || release_finalizers("configmap/c", &release))
        .await
        .unwrap();
}

/// A CRD of its own (cluster-scoped names must not collide), with a loose schema.
struct OwnCrd {
    group: String,
}

impl OwnCrd {
    fn new(prefix: &str) -> Self {
        let group = format!("{}.example.com", unique(prefix));
        apply(&format!(
            r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: things.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: Thing, plural: things, singular: thing}}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {{openAPIV3Schema: {{type: object, properties: {{spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}}}
"#
        ));
        wait_established(&[&format!("crd/things.{group}")], &format!("things.{group}"));
        Self { group }
    }

    fn resource(&self) -> String {
        format!("things.{}", self.group)
    }
}

impl Drop for OwnCrd {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "crd", &self.resource(), "--wait=false", "--ignore-not-found"]);
    }
}

#[test]
fn a_crd_waiting_for_its_instances_names_them_and_the_one_finalizer_to_remove() {
    let _logs = start();
    let ns = Namespace::new("crdclean");
    let n = &ns.0;
    let crd = OwnCrd::new("clean");
    let group = &crd.group;
    let finalizer = format!("{group}/cleanup");
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Thing\nmetadata: {{name: c1, namespace: {n}, finalizers: [{finalizer}]}}\nspec: {{size: 1}}\n"
    ));
    assert_eq!(kubectl(&["delete", "crd", &crd.resource(), "--wait=false"]).code, 0);
    wait_until(Duration::from_secs(30), || {
        kubectl(&[
            "get",
            &crd.resource(),
            "c1",
            "-n",
            n,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .stdout
        .len()
            > 1
    });

    let crd_name = format!("customresourcedefinitions/{}", crd.resource());
    let json = stack(&["stuck", &crd_name, "-o", "json"]).expect_code(1).json();
    let why = diagnoses(item(&json, "CustomResourceDefinition", &crd.resource()));
    assert!(
        why.contains(&format!(
            "customresourcecleanup.apiextensions.k8s.io: waits for 1 Thing still being deleted: {n}/c1 (finalizer {finalizer})"
        )),
        "{why}"
    );
    let command = format!(
        "kubectl stack unstick -n {n} {}/c1 --finalizer {finalizer}",
        crd.resource()
    );
    assert_eq!(json["chains"][0]["cut"][0]["command"], command.as_str(), "{json}");
    assert_eq!(
        json["edges"][0]["finalizer"],
        "customresourcecleanup.apiextensions.k8s.io"
    );

    let text = stack(&["stuck", &crd_name]).expect_code(1);
    assert!(
        text.stdout.contains(&format!(
            "└── Thing.{group}/{n}/c1 (customresourcecleanup.apiextensions.k8s.io)"
        )),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains(&command), "{}", text.stdout);

    run_printed_unstick(&command).expect_code(0);
    wait_until(Duration::from_secs(60), || {
        kubectl(&["get", "crd", &crd.resource()]).code != 0
    });
}

#[test]
fn an_owner_deleted_with_orphan_names_the_dependent_the_garbage_collector_cannot_update() {
    let _logs = start();
    let ns = Namespace::new("orphan");
    let n = &ns.0;
    let crd = OwnCrd::new("orph");
    let group = &crd.group;
    // The garbage collector picks new kinds up on its own schedule: wait until it collects a
    // probe whose owner does not exist, so that it knows Things before the real test.
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Thing\nmetadata: {{name: probe, namespace: {n}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: nobody, uid: 00000000-0000-0000-0000-000000000000}}]}}\n"
    ));
    wait_until(Duration::from_secs(90), || !exists(&crd.resource(), Some(n), "probe"));
    assert_eq!(kubectl(&["create", "configmap", "owner", "-n", n]).code, 0);
    let owner = uid("configmap", n, "owner");
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Thing\nmetadata: {{name: t1, namespace: {n}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: {owner}}}]}}\nspec: {{size: 3}}\n"
    ));
    // The schema changes under it: the garbage collector's update of t1 is now rejected.
    let patched = kubectl(&[
        "patch",
        "crd",
        &crd.resource(),
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema","value":{"type":"object","properties":{"spec":{"type":"object","properties":{"size":{"type":"string"}}}}}}]"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    assert_eq!(
        kubectl(&[
            "delete",
            "configmap",
            "owner",
            "-n",
            n,
            "--cascade=orphan",
            "--wait=false"
        ])
        .code,
        0
    );
    std::thread::sleep(Duration::from_secs(2));
    let json = stack(&["stuck", "-n", n, "configmap/owner", "-o", "json"])
        .expect_code(1)
        .json();
    let owner_item = item(&json, "ConfigMap", "owner");
    assert_eq!(owner_item["finalizers"], serde_json::json!(["orphan"]));
    let why = diagnoses(owner_item);
    assert!(
        why.contains(&format!(
            "orphan: the garbage collector still has to remove this owner from 1 dependent: Thing.{group}/{n}/t1 (not being deleted yet)"
        )),
        "{why}"
    );
    assert!(why.contains("remove the ownerReference yourself"), "{why}");
    // The dependent is not stuck: no chain, and no finalizer is offered for removal.
    assert_eq!(json["stuck"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json["chains"][0]["cut"][0]["command"], Value::Null, "{json}");
    // Release: the dependent no longer names the owner; the garbage collector finishes.
    let released = kubectl(&[
        "patch",
        &crd.resource(),
        "t1",
        "-n",
        n,
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/size","value":"3"},{"op":"remove","path":"/metadata/ownerReferences"}]"#,
    ]);
    assert_eq!(released.code, 0, "{}", released.stderr);
    wait_until(Duration::from_secs(60), || !exists("configmap", Some(n), "owner"));
    assert!(exists(&crd.resource(), Some(n), "t1"), "orphaned, not deleted");
}

/// A Pod bound to a node that does not exist (nothing schedules or runs it here).
fn pod_using(namespace: &str, name: &str, claim: &str) {
    let yaml = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  nodeName: node-that-is-not-there
  automountServiceAccountToken: false
  containers: [{{name: main, image: example.invalid/app}}]
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]
"#
    );
    // The service account controller creates `default` shortly after the namespace.
    wait_until(Duration::from_secs(30), || {
        kubectl_with_stdin(&["apply", "-f", "-"], Some(&yaml)).code == 0
    });
}

#[test]
fn volume_protection_names_the_claim_and_the_pods_then_the_kubelet_they_wait_for() {
    let _logs = start();
    let ns = Namespace::new("pvc");
    let n = &ns.0;
    let volume = unique("pv");
    apply(&format!(
        r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data, namespace: {n}}}
spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}, volumeName: {volume}, storageClassName: ""}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: {volume}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  hostPath: {{path: /tmp/{volume}}}
  claimRef: {{namespace: {n}, name: data}}
"#
    ));
    let bound = kubectl(&[
        "patch",
        "pv",
        &volume,
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"phase":"Bound"}}"#,
    ]);
    assert_eq!(bound.code, 0, "{}", bound.stderr);
    pod_using(n, "app", "data");
    assert_eq!(kubectl(&["delete", "pvc", "data", "-n", n, "--wait=false"]).code, 0);
    assert_eq!(kubectl(&["delete", "pv", &volume, "--wait=false"]).code, 0);

    // The claim waits for the Pod that uses it; the volume waits for the claim.
    let json = stack(&["stuck", &format!("persistentvolumes/{volume}"), "-o", "json"])
        .expect_code(1)
        .json();
    let pv_why = diagnoses(item(&json, "PersistentVolume", &volume));
    assert!(
        pv_why.contains(&format!(
            "kubernetes.io/pv-protection: the volume is Bound to claim {n}/data (finalizer kubernetes.io/pvc-protection)"
        )),
        "{pv_why}"
    );
    let pvc_why = diagnoses(item(&json, "PersistentVolumeClaim", "data"));
    assert!(
        pvc_why.contains(&format!(
            "kubernetes.io/pvc-protection: waits for 1 Pod using the claim: {n}/app (Pending on node node-that-is-not-there)"
        )),
        "{pvc_why}"
    );
    assert_eq!(json["edges"][0]["finalizer"], "kubernetes.io/pv-protection", "{json}");
    // The claim's finalizer waits for a live Pod: no finalizer to cut, the Pod is the cause.
    assert_eq!(json["chains"][0]["cut"][0]["object"]["name"], "data", "{json}");
    assert_eq!(json["chains"][0]["cut"][0]["command"], Value::Null, "{json}");

    // Deleting the Pod: it now waits for a kubelet that does not exist; the chain grows by one.
    assert_eq!(kubectl(&["delete", "pod", "app", "-n", n, "--wait=false"]).code, 0);
    let json = stack(&["stuck", &format!("persistentvolumes/{volume}"), "-o", "json"])
        .expect_code(1)
        .json();
    assert_eq!(json["chains"][0]["objects"].as_array().unwrap().len(), 3, "{json}");
    let pod_why = diagnoses(item(&json, "Pod", "app"));
    assert!(
        pod_why.contains("waits for the kubelet of node node-that-is-not-there, which does not exist"),
        "{pod_why}"
    );
    assert!(
        pod_why.contains(&format!("kubectl delete pod app -n {n} --grace-period=0 --force")),
        "{pod_why}"
    );
    assert_eq!(
        kubectl(&["delete", "pod", "app", "-n", n, "--grace-period=0", "--force"]).code,
        0
    );
    // No Pod left: the pvc-protection controller would remove the finalizer (it does not run here).
    let json = stack(&["stuck", "-n", n, "pvc/data", "-o", "json"])
        .expect_code(1)
        .json();
    let pvc_why = diagnoses(item(&json, "PersistentVolumeClaim", "data"));
    assert!(
        pvc_why.contains("kubernetes.io/pvc-protection: no scheduled Pod uses the claim"),
        "{pvc_why}"
    );
    assert_eq!(
        json["chains"][0]["cut"][0]["command"],
        format!("kubectl stack unstick -n {n} persistentvolumeclaims/data --finalizer kubernetes.io/pvc-protection")
            .as_str()
    );
    release_finalizers("pvc/data", n);
    let _ = kubectl(&[
        "patch",
        "pv",
        &volume,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
}

#[test]
fn a_terminating_namespace_shows_its_spec_finalizers_and_waits_for_its_content() {
    let _logs = start();
    let name = unique("nschain");
    assert_eq!(kubectl(&["create", "namespace", &name]).code, 0);
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {name}, finalizers: [{HOLD}]}}\n"
    ));
    assert_eq!(kubectl(&["delete", "namespace", &name, "--wait=false"]).code, 0);
    wait_until(Duration::from_secs(60), || {
        kubectl(&[
            "get",
            "configmap",
            "held",
            "-n",
            &name,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .stdout
        .len()
            > 1
    });
    let text = stack(&["stuck", &format!("namespace/{name}")]).expect_code(1);
    assert!(
        text.stdout.contains("finalizers:   kubernetes (spec.finalizers)"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!("└── ConfigMap/{name}/held (kubernetes)")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!(
            "kubectl stack unstick -n {name} configmaps/held --finalizer {HOLD}"
        )),
        "{}",
        text.stdout
    );
    let json = stack(&["stuck", &format!("namespace/{name}"), "-o", "json"])
        .expect_code(1)
        .json();
    let namespace = item(&json, "Namespace", &name);
    assert_eq!(namespace["specFinalizers"], serde_json::json!(["kubernetes"]));
    assert!(
        diagnoses(namespace).contains(&format!("held by finalizers: ConfigMap/{name}/held (finalizer {HOLD})")),
        "{json}"
    );

    // `-l ''` selects everything, as kubectl does: the untracked ConfigMap is listed.
    let everything = stack(&["stuck", "-n", &name, "-l", "", "-o", "json"])
        .expect_code(1)
        .json();
    item(&everything, "ConfigMap", "held");

    release_finalizers("configmap/held", &name);
    wait_until(Duration::from_secs(60), || !exists("namespace", None, &name));
}

#[test]
fn unstick_of_a_namespace_rereads_between_its_two_steps_and_says_what_it_changed() {
    let _logs = start();
    let name = unique("nsboth");
    apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, finalizers: [{HOLD}]}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {name}, finalizers: [{HOLD}]}}\n"
    ));
    assert_eq!(kubectl(&["delete", "namespace", &name, "--wait=false"]).code, 0);
    // The content keeps spec.finalizers in place; the metadata finalizer is ours.
    wait_until(Duration::from_secs(60), || {
        kubectl(&["get", "namespace", &name, "-o", "jsonpath={.status.conditions[*].type}"])
            .stdout
            .contains("NamespaceFinalizersRemaining")
    });
    let backups = std::env::temp_dir().join(unique("ns-both"));
    let done = stack(&[
        "unstick",
        &format!("namespace/{name}"),
        "--all-finalizers",
        "--yes",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    assert!(
        done.stdout.contains(&format!(
            "Namespace/{name}: removed {HOLD} from metadata.finalizers; removed kubernetes from spec.finalizers"
        )),
        "stdout:\n{}\nstderr:\n{}",
        done.stdout,
        done.stderr
    );
    wait_until(Duration::from_secs(30), || !exists("namespace", None, &name));
    release_finalizers("configmap/held", &name);
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found.sort();
    found
}

#[test]
fn backups_are_never_overwritten_and_never_readable_by_others() {
    let _logs = start();
    let ns = Namespace::new("backup");
    let n = &ns.0;
    apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: {n}, finalizers: [stack-test.example.com/a, stack-test.example.com/b]}}\nstringData: {{password: hunter2}}\n"
    ));
    assert_eq!(kubectl(&["delete", "secret", "s", "-n", n, "--wait=false"]).code, 0);
    let base = std::env::temp_dir().join(unique("backups"));
    std::fs::create_dir_all(&base).unwrap();
    // Something already there, readable by all: never written into.
    // Where earlier versions wrote this very backup.
    let existing = base.join(format!("secret.core_{n}_s.yaml"));
    std::fs::write(&existing, "keep me\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let mut runs = Vec::new();
    for finalizer in ["stack-test.example.com/a", "stack-test.example.com/b"] {
        let run = stack(&[
            "unstick",
            "-n",
            n,
            "secret/s",
            "--finalizer",
            finalizer,
            "--yes",
            "--backup-dir",
            base.to_str().unwrap(),
        ])
        .expect_code(0);
        runs.push(run);
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me\n");
    let files: Vec<PathBuf> = files_under(&base).into_iter().filter(|f| *f != existing).collect();
    assert_eq!(files.len(), 2, "one backup per run: {files:?}");
    for (run, file) in runs.iter().zip(&files) {
        assert!(
            run.stderr.contains(&format!("-> {} (mode 0600)", file.display())),
            "each path is said: {}",
            run.stderr
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(file), 0o600, "{}", file.display());
            assert_eq!(mode(file.parent().unwrap()), 0o700, "{}", file.display());
        }
    }
    // The first backup keeps the original finalizer list; the second the list it found.
    let first = std::fs::read_to_string(&files[0]).unwrap();
    let second = std::fs::read_to_string(&files[1]).unwrap();
    assert!(first.contains("stack-test.example.com/a"), "{first}");
    assert!(!second.contains("stack-test.example.com/a"), "{second}");
    assert!(
        !first.contains("last-applied-configuration"),
        "no second plaintext copy: {first}"
    );
    wait_until(Duration::from_secs(20), || !exists("secret", Some(n), "s"));
}

#[test]
fn a_flux_finalizer_names_its_controller_and_whether_it_runs() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("fluxctl");
    let n = &ns.0;
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: apps, namespace: {n}, finalizers: [finalizers.fluxcd.io]}}
spec: {{interval: 10m, path: ./apps, prune: true, sourceRef: {{kind: GitRepository, name: repo}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: kustomize-controller, namespace: {n}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: kustomize-controller}}}}
  template:
    metadata: {{labels: {{app: kustomize-controller}}}}
    spec: {{containers: [{{name: manager, image: ghcr.io/fluxcd/kustomize-controller}}]}}
"#
    ));
    assert_eq!(
        kubectl(&["delete", "kustomization", "apps", "-n", n, "--wait=false"]).code,
        0
    );
    let json = stack(&["stuck", "-n", n, "kustomizations/apps", "-o", "json"])
        .expect_code(1)
        .json();
    let why = diagnoses(item(&json, "Kustomization", "apps"));
    assert!(
        why.contains(&format!(
            "finalizer finalizers.fluxcd.io is removed by Flux's kustomize-controller: it is not running (Deployment {n}/kustomize-controller has 0/1 ready)"
        )),
        "{why}"
    );
    // As if its pod became ready: the same diagnosis says it runs.
    let ready = kubectl(&[
        "patch",
        "deployment",
        "kustomize-controller",
        "-n",
        n,
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"replicas":1,"readyReplicas":1}}"#,
    ]);
    assert_eq!(ready.code, 0, "{}", ready.stderr);
    let json = stack(&["stuck", "-n", n, "kustomizations/apps", "-o", "json"])
        .expect_code(1)
        .json();
    let why = diagnoses(item(&json, "Kustomization", "apps"));
    assert!(
        why.contains(&format!(
            "is removed by Flux's kustomize-controller: it runs (Deployment {n}/kustomize-controller has 1/1 ready)"
        )),
        "{why}"
    );
    release_finalizers("kustomization/apps", n);
}

#[test]
fn a_tracker_that_may_not_be_read_is_not_called_gone() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("forbid");
    let n = &ns.0;
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {n}}}
spec: {{interval: 10m, path: ./usage, prune: true, sourceRef: {{kind: GitRepository, name: repo}}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: member
  namespace: {n}
  labels: {{kustomize.toolkit.fluxcd.io/name: usage, kustomize.toolkit.fluxcd.io/namespace: {n}}}
  finalizers: [{HOLD}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: read-configmaps, namespace: {n}}}
rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: limited-reads, namespace: {n}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-configmaps}}
subjects: [{{kind: User, name: limited}}]
"#
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "member", "-n", n, "--wait=false"]).code,
        0
    );
    let limited = &cluster().limited;
    let unknown = stack_as(limited, &["stuck", "-n", n, "configmaps/member", "-o", "json"]).expect_code(1);
    let why = diagnoses(item(&unknown.json(), "ConfigMap", "member"));
    assert!(
        why.contains(&format!(
            "tracked by Kustomization.kustomize.toolkit.fluxcd.io/{n}/usage, which could not be checked (forbidden)"
        )),
        "{why}"
    );
    assert!(!why.contains("is gone"), "{why}");

    // Allowed to read it in its namespace (not to list it everywhere): it is there, and fine.
    apply(&format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: read-kustomizations, namespace: {n}}}
rules: [{{apiGroups: [kustomize.toolkit.fluxcd.io], resources: [kustomizations], verbs: [get]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: limited-kustomizations, namespace: {n}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-kustomizations}}
subjects: [{{kind: User, name: limited}}]
"#
    ));
    wait_until(Duration::from_secs(10), || {
        let run = stack_as(limited, &["stuck", "-n", n, "configmaps/member", "-o", "json"]);
        run.code == 1 && !diagnoses(item(&run.json(), "ConfigMap", "member")).contains("tracked by")
    });
    release_finalizers("configmap/member", n);
}

#[test]
fn a_load_balancer_finalizer_asks_for_a_cloud_controller_that_is_not_there() {
    let _logs = start();
    let ns = Namespace::new("lb");
    let n = &ns.0;
    apply(&format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {n}, finalizers: [service.kubernetes.io/load-balancer-cleanup]}}
spec: {{type: LoadBalancer, ports: [{{port: 80}}], selector: {{app: web}}}}
"#
    ));
    assert_eq!(kubectl(&["delete", "service", "web", "-n", n, "--wait=false"]).code, 0);
    let text = stack(&["stuck", "-n", n, "service/web"]).expect_code(1);
    assert!(
        text.stdout.contains(
            "finalizer service.kubernetes.io/load-balancer-cleanup is removed by the cloud provider's \
             cloud-controller-manager: no Deployment, StatefulSet or DaemonSet named cloud-controller-manager in any \
             namespace"
        ),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!(
            "kubectl stack unstick -n {n} services/web --finalizer service.kubernetes.io/load-balancer-cleanup"
        )),
        "{}",
        text.stdout
    );
    release_finalizers("service/web", n);
}

#[test]
fn a_custom_finalizer_names_the_workload_of_the_stack_that_installed_its_crd() {
    let _logs = start();
    let ns = Namespace::new("opstack");
    let n = &ns.0;
    let crd = OwnCrd::new("op");
    let group = &crd.group;
    let stack_labels = format!("kustomize.toolkit.fluxcd.io/name=operator-{n}");
    assert_eq!(
        kubectl(&[
            "label",
            "crd",
            &crd.resource(),
            &stack_labels,
            &format!("kustomize.toolkit.fluxcd.io/namespace={n}")
        ])
        .code,
        0
    );
    apply(&format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: operator
  namespace: {n}
  labels: {{kustomize.toolkit.fluxcd.io/name: operator-{n}, kustomize.toolkit.fluxcd.io/namespace: {n}}}
spec:
  selector: {{matchLabels: {{app: operator}}}}
  template:
    metadata: {{labels: {{app: operator}}}}
    spec: {{containers: [{{name: manager, image: example.invalid/operator}}]}}
---
apiVersion: {group}/v1
kind: Thing
metadata: {{name: db, namespace: {n}, finalizers: [{group}/cleanup]}}
"#
    ));
    assert_eq!(
        kubectl(&["delete", &crd.resource(), "db", "-n", n, "--wait=false"]).code,
        0
    );
    let json = stack(&["stuck", "-n", n, &format!("{}/db", crd.resource()), "-o", "json"])
        .expect_code(1)
        .json();
    let why = diagnoses(item(&json, "Thing", "db"));
    assert!(
        why.contains(&format!(
            "belongs to the controller of CRD {}, tracked by flux:{n}/operator-{n}: the stack's Deployment {n}/operator has 0/1 ready: its controller is not running",
            crd.resource()
        )),
        "{why}"
    );
    release_finalizers(&format!("{}/db", crd.resource()), n);
}

#[test]
fn a_cluster_scoped_owner_finds_its_dependents_in_any_namespace() {
    let _logs = start();
    let ns = Namespace::new("crowner");
    let n = &ns.0;
    let role = unique("owner-role");
    apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {role}}}\nrules: []\n"
    ));
    let owner_uid = uid_of("clusterrole", None, &role);
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: dep
  namespace: {n}
  finalizers: [{HOLD}]
  ownerReferences: [{{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: {role}, uid: {owner_uid}, blockOwnerDeletion: true}}]
"#
    ));
    assert_eq!(
        kubectl(&["delete", "clusterrole", &role, "--cascade=foreground", "--wait=false"]).code,
        0
    );
    wait_until(Duration::from_secs(30), || {
        kubectl(&[
            "get",
            "configmap",
            "dep",
            "-n",
            n,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .stdout
        .len()
            > 1
    });
    let json = stack(&[
        "stuck",
        &format!("clusterroles.rbac.authorization.k8s.io/{role}"),
        "-o",
        "json",
    ])
    .expect_code(1)
    .json();
    let why = diagnoses(item(&json, "ClusterRole", &role));
    assert!(
        why.contains(&format!(
            "foregroundDeletion: waits for 1 dependent with blockOwnerDeletion: ConfigMap/{n}/dep (finalizer {HOLD})"
        )),
        "{why}"
    );
    assert_eq!(
        json["chains"][0]["cut"][0]["command"],
        format!("kubectl stack unstick -n {n} configmaps/dep --finalizer {HOLD}").as_str()
    );
    release_finalizers("configmap/dep", n);
    wait_until(Duration::from_secs(30), || !exists("clusterrole", None, &role));
}
