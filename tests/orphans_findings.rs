//! End-to-end tests of issue 16's findings: `orphans` (and so `prune`) calls an object an orphan
//! only when the tool that tracks it would delete it too. Where the producer runs here (kubectl
//! ApplySet) it is the oracle; elsewhere the rule's source is named on the test.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;

fn orphan_names(run: &Run) -> BTreeSet<String> {
    run.json()["orphans"]
        .as_array()
        .expect("orphans")
        .iter()
        .map(|o| {
            format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap(),
                o["namespace"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// `name -> reason` of the skipped objects.
fn skipped(run: &Run) -> Vec<(String, String)> {
    run.json()["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                o["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn set(items: &[String]) -> BTreeSet<String> {
    items.iter().cloned().collect()
}

/// Flux labels for Kustomization `ks` in `flux-system`, plus the run label.
fn flux_labels(run: &str) -> String {
    format!("stack-test/run: {run}, kustomize.toolkit.fluxcd.io/name: ks-{run}, kustomize.toolkit.fluxcd.io/namespace: flux-system")
}

/// Finding 1: the endpoints controller copies a Service's labels onto its Endpoints, the
/// StatefulSet controller copies its selector labels onto its claims; neither sets an
/// ownerReference. They, and anything owned by a tracked object, go with their source.
#[test]
fn controller_copies_and_owned_objects_are_never_orphans() {
    let _logs = start();
    let ns = Namespace::new("copies");
    let n = &ns.0;
    let run = unique("cp");
    let labels = flux_labels(&run);
    apply(&format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: {n}, labels: {{{labels}}}}}
spec: {{selector: {{app: api}}, ports: [{{port: 80}}]}}
---
apiVersion: v1
kind: Endpoints
metadata: {{name: api, namespace: {n}, labels: {{{labels}}}}}
---
apiVersion: discovery.k8s.io/v1beta1
kind: EndpointSlice
metadata: {{name: api-x1, namespace: {n}, labels: {{{labels}, kubernetes.io/service-name: api}}}}
addressType: IPv4
endpoints: []
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: {n}, labels: {{{labels}}}}}
spec:
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec: {{containers: [{{name: db, image: db}}]}}
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data-db-0, namespace: {n}, labels: {{{labels}, app: db}}}}
spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: gone, namespace: {n}, labels: {{{labels}}}}}
"#
    ));
    let service_uid = uid_of("service", Some(n), "api");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: owned-by-service
  namespace: {n}
  labels: {{{labels}}}
  ownerReferences: [{{apiVersion: v1, kind: Service, name: api, uid: {service_uid}}}]
"#
    ));
    let repo = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: api}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\n",
    );
    let selector = format!("stack-test/run={run}");
    let args = ["-n", n, "-l", &selector, "-f", repo.to_str().unwrap()];
    let found = stack(&[&["orphans"][..], &args[..], &["-o", "json", "--show-skipped"]].concat()).expect_code(1);
    assert_eq!(orphan_names(&found), set(&[format!("ConfigMap/{n}/gone")]));
    let skipped = skipped(&found);
    for (name, reason) in [
        ("api", "derived"),
        ("api-x1", "derived"),
        ("data-db-0", "derived"),
        ("owned-by-service", "controllerOwned"),
    ] {
        assert!(
            skipped.contains(&(name.to_string(), reason.to_string())),
            "{name}: {skipped:?}"
        );
    }
    let table = stack(&[&["orphans"][..], &args[..], &["--show-skipped"]].concat()).expect_code(1);
    assert!(
        table.stdout.contains("derived from StatefulSet/db by its controller"),
        "{}",
        table.stdout
    );

    // prune deletes the one orphan and nothing a controller made.
    stack(&[&["prune"][..], &args[..], &["--yes", "--timeout", "30s"]].concat()).expect_code(0);
    assert!(!exists("configmap", Some(n), "gone"));
    assert!(exists("endpoints", Some(n), "api"));
    assert!(exists("persistentvolumeclaim", Some(n), "data-db-0"));
    assert!(exists("configmap", Some(n), "owned-by-service"));
}

/// Finding 2, ApplySet half, with kubectl itself as the oracle: `kubectl apply --prune
/// --applyset --dry-run=server` names exactly what kubectl would prune; `orphans` says the same,
/// and nothing of a kind or namespace the parent does not list.
#[test]
fn applyset_orphans_are_what_kubectl_would_prune() {
    let _logs = start();
    let ns = Namespace::new("aset");
    let other = Namespace::new("aset-other");
    let n = &ns.0;
    let first = temp_file(
        "a.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
    );
    let applied = kubectl(&[
        "apply",
        "-n",
        n,
        "--prune",
        "--applyset=set1",
        "-f",
        first.to_str().unwrap(),
    ]);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    let id = kubectl(&[
        "get",
        "secret",
        "set1",
        "-n",
        n,
        "-o",
        "jsonpath={.metadata.labels.applyset\\.kubernetes\\.io/id}",
    ])
    .stdout;
    assert!(id.starts_with("applyset-"), "{id}");
    // Objects carrying the member label that kubectl never prunes: a kind the parent does not
    // list, and a namespace it does not list.
    apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: stray, namespace: {n}, labels: {{applyset.kubernetes.io/part-of: {id}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: elsewhere, namespace: {}, labels: {{applyset.kubernetes.io/part-of: {id}}}}}\n",
        other.0
    ));
    let next = temp_file("a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n");
    let next = next.to_str().unwrap();
    let oracle = kubectl(&[
        "apply",
        "-n",
        n,
        "--prune",
        "--applyset=set1",
        "-f",
        next,
        "--dry-run=server",
    ]);
    assert_eq!(oracle.code, 0, "{}", oracle.stderr);
    let kubectl_prunes: Vec<String> = oracle
        .stdout
        .lines()
        .filter(|l| l.contains("pruned"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert_eq!(kubectl_prunes, vec!["configmap/b"], "{}", oracle.stdout);

    let kubeconfig = kubeconfig_with_namespace(n);
    for selection in [["--inventory", "applyset=set1"], ["--tracker", "applyset=set1"]] {
        let ours = stack_as(
            &kubeconfig,
            &[&["orphans", "-A", "-f", next, "-o", "name"][..], &selection[..]].concat(),
        )
        .expect_code(1);
        assert_eq!(ours.stdout.lines().collect::<Vec<_>>(), kubectl_prunes, "{selection:?}");
    }
    // The parent alone: what kubectl applied last; nothing is an orphan.
    stack_as(&kubeconfig, &["orphans", "-A", "--inventory", "applyset=set1"]).expect_code(0);
}

/// Finding 4: a tracker value without a namespace means the current namespace, as the Helm and
/// Flux CLIs take it; release `team-b/redis`'s cluster-scoped objects are not `-n team-a`'s.
/// Issue 19 item 9: `--tracker helm=NAME` finds objects by Helm's annotations even without the
/// chart's `app.kubernetes.io/managed-by` label.
#[test]
fn a_tracker_value_without_namespace_is_the_current_namespace() {
    let _logs = start();
    let team_a = Namespace::new("team-a");
    let team_b = Namespace::new("team-b");
    let (a, b) = (&team_a.0, &team_b.0);
    let release = unique("redis");
    let role = |team: &str| {
        format!(
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {release}-{team}\n  annotations: {{meta.helm.sh/release-name: {release}, meta.helm.sh/release-namespace: {team}}}\n  labels: {{kustomize.toolkit.fluxcd.io/name: {release}, kustomize.toolkit.fluxcd.io/namespace: {team}}}\nrules: []\n"
        )
    };
    apply(&format!("{}{}", role(a), role(b)));
    let repo = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unrelated}\n",
    );
    // No release Secret: Helm deletes only what its release records, so nothing is an orphan;
    // the release looked for is the one in the current namespace.
    let helm = stack(&[
        "orphans",
        "-n",
        a,
        "--tracker",
        &format!("helm={release}"),
        "-f",
        repo.to_str().unwrap(),
    ])
    .expect_code(4);
    assert!(
        helm.stderr.contains(&format!("Helm release {a}/{release}")),
        "{}",
        helm.stderr
    );
    // The Kustomization in the current namespace is the one meant: only its object is judged.
    // Helm's annotations mark it too, so it is no orphan of the Kustomization alone (issue 24,
    // finding F1: whether Helm would prune it is not known from this desired set).
    let found = stack(&[
        "orphans",
        "-n",
        a,
        "--tracker",
        &format!("flux={release}"),
        "-f",
        repo.to_str().unwrap(),
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(0);
    assert_eq!(
        skipped(&found),
        [(format!("{release}-{a}"), "trackedElsewhere".to_string())],
        "{}",
        found.stdout
    );
    // No managed-by label on these objects, yet Helm's annotations say what they are.
    let listed = stack(&["list", "--tracker", &format!("helm={release}.{b}"), "-o", "name"]).expect_code(0);
    assert_eq!(
        listed.stdout,
        format!("clusterrole.rbac.authorization.k8s.io/{release}-{b}\n")
    );
    for team in [a, b] {
        let _ = kubectl(&["delete", "clusterrole", &format!("{release}-{team}")]);
    }
}

/// Finding 5 (argo-cd `controller/state.go` `isSelfReferencedObj`,
/// `util/argo/resource_tracking.go` `getAppInstanceValue`): a tracking id naming another object,
/// another installation's id, an owned object, and the instance label alone (a Helm chart's) are
/// not Argo CD's to prune.
#[test]
fn argocd_orphans_pass_argocd_ownership_checks() {
    let _logs = start();
    let ns = Namespace::new("argo");
    let n = &ns.0;
    let app = unique("shop");
    let tracked = |name: &str, names: &str, extra: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{n}/{names}\"{extra}}}\n"
        )
    };
    let mut yaml = tracked("own", "own", "");
    yaml.push_str(&tracked("copy", "own", ""));
    yaml.push_str(&tracked(
        "other-installation",
        "other-installation",
        ", argocd.argoproj.io/installation-id: other-argo",
    ));
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: chart-object\n  namespace: {n}\n  labels: {{app.kubernetes.io/instance: {app}, app.kubernetes.io/managed-by: Helm}}\n  annotations: {{meta.helm.sh/release-name: {app}, meta.helm.sh/release-namespace: {n}}}\n"
    ));
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: label-only\n  namespace: {n}\n  labels: {{app.kubernetes.io/instance: {app}}}\n"
    ));
    apply(&yaml);
    let own_uid = uid_of("configmap", Some(n), "own");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\n  namespace: {n}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{n}/owned\"}}\n  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: own, uid: {own_uid}}}]\n"
    ));
    // With no Application to give it one, the manifest writes its namespace.
    let repo = temp_file(
        "repo.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {n}}}\n"),
    );
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &format!("argocd={app}"),
        "-f",
        repo.to_str().unwrap(),
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(1);
    assert_eq!(orphan_names(&found), set(&[format!("ConfigMap/{n}/own")]));
    let skipped = skipped(&found);
    for (name, reason) in [
        ("copy", "toolWouldKeep"),
        ("other-installation", "toolWouldKeep"),
        ("chart-object", "toolWouldKeep"),
        ("label-only", "toolWouldKeep"),
        ("owned", "controllerOwned"),
    ] {
        assert!(
            skipped.contains(&(name.to_string(), reason.to_string())),
            "{name}: {skipped:?}"
        );
    }
}

/// Finding 6: `-l` alone selects only objects some tool tracks (kubectl's own `--prune -l`
/// needs its last-applied annotation); `--untracked` says otherwise. Issue 17 item 7: a
/// name-only Flux mark is ambiguous, reported and never acted on.
#[test]
fn a_selector_alone_never_makes_untracked_or_ambiguous_objects_orphans() {
    let _logs = start();
    let ns = Namespace::new("sel");
    let n = &ns.0;
    let app = unique("shop");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: hand-made, namespace: {n}, labels: {{app: {app}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: tracked, namespace: {n}, labels: {{app: {app}, kustomize.toolkit.fluxcd.io/name: dup, kustomize.toolkit.fluxcd.io/namespace: flux-system}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: name-only-mark, namespace: {n}, labels: {{app: {app}, kustomize.toolkit.fluxcd.io/name: dup}}}}
"#
    ));
    let repo = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
    );
    let selector = format!("app={app}");
    let args = ["orphans", "-n", n, "-l", &selector, "-f", repo.to_str().unwrap()];
    let found = stack(&[&args[..], &["-o", "json", "--show-skipped"]].concat()).expect_code(1);
    assert_eq!(orphan_names(&found), set(&[format!("ConfigMap/{n}/tracked")]));
    assert_eq!(
        skipped(&found),
        vec![("name-only-mark".to_string(), "ambiguousMark".to_string())]
    );
    let untracked = stack(&[&args[..], &["--untracked", "-o", "name"]].concat()).expect_code(1);
    assert_eq!(
        untracked.sorted_lines(),
        vec!["configmap/hand-made", "configmap/tracked"]
    );
    // The same through prune: the hand-made object is not even planned.
    let plan = stack(&[
        "prune",
        "-n",
        n,
        "-l",
        &selector,
        "-f",
        repo.to_str().unwrap(),
        "--dry-run",
    ])
    .expect_code(0);
    assert!(
        plan.stdout.contains("tracked") && !plan.stdout.contains("hand-made"),
        "{}",
        plan.stdout
    );
    assert!(!plan.stdout.contains("name-only-mark"), "{}", plan.stdout);
}

/// Finding 8: a name the API server would reject (an unrendered Flux postBuild variable) is
/// refused before anything is compared or deleted, naming file and line.
#[test]
fn names_that_cannot_exist_are_refused_with_file_and_line() {
    let _logs = start();
    let ns = Namespace::new("names");
    let n = &ns.0;
    let run = unique("nm");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app-prod-settings, namespace: {n}, labels: {{{}}}}}\n",
        flux_labels(&run)
    ));
    let repo = temp_file(
        "settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-${cluster}-settings\ndata: {a: b}\n",
    );
    let selector = format!("stack-test/run={run}");
    for command in [&["orphans"][..], &["prune", "--yes"][..]] {
        let refused =
            stack(&[command, &["-n", n, "-l", &selector, "-f", repo.to_str().unwrap()][..]].concat()).expect_code(2);
        assert!(
            refused.stderr.contains(&format!(
                "{}:4: ConfigMap \"app-${{cluster}}-settings\"",
                repo.display()
            )),
            "{}",
            refused.stderr
        );
        assert!(refused.stderr.contains("unrendered variable"), "{}", refused.stderr);
    }
    assert!(exists("configmap", Some(n), "app-prod-settings"));
}

/// Finding 9: `-f` does not follow symlinked directories (kubectl's -R does not): a loop ends,
/// and a manifest reached only through a link is not read.
#[test]
fn symlinked_directories_are_not_followed() {
    let _logs = start();
    let ns = Namespace::new("links");
    let n = &ns.0;
    let run = unique("ln");
    let labels = flux_labels(&run);
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: in-dir, namespace: {n}, labels: {{{labels}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: via-link, namespace: {n}, labels: {{{labels}}}}}\n"
    ));
    let file = temp_file(
        "in-dir.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: in-dir}\n",
    );
    let dir = file.parent().unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop")).unwrap();
    let elsewhere = temp_file(
        "via-link.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: via-link}\n",
    );
    std::os::unix::fs::symlink(elsewhere.parent().unwrap(), dir.join("linked")).unwrap();

    let mut command = stack_command(&cluster().admin);
    command
        .args([
            "orphans",
            "-n",
            n,
            "-l",
            &format!("stack-test/run={run}"),
            "-o",
            "name",
            "-f",
        ])
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("orphans -f followed a symlinked directory loop for 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "configmap/via-link\n");
}

/// Finding 10: a desired set with entries the cluster cannot resolve (a CRD not installed yet)
/// is incomplete: refused (exit 4) by orphans and prune unless accepted.
#[test]
fn an_unresolvable_desired_set_is_refused() {
    let _logs = start();
    let ns = Namespace::new("unres");
    let n = &ns.0;
    let run = unique("un");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {n}, labels: {{{}}}}}\n",
        flux_labels(&run)
    ));
    let repo = temp_file(
        "db.yaml",
        "apiVersion: db.not-installed.example.com/v1\nkind: Database\nmetadata: {name: orders}\n",
    );
    let selector = format!("stack-test/run={run}");
    let args = ["-n", n, "-l", &selector, "-f", repo.to_str().unwrap()];
    let refused = stack(&[&["orphans"][..], &args[..]].concat()).expect_code(4);
    assert!(
        refused.stderr.contains("incomplete") && refused.stderr.contains("Database"),
        "{}",
        refused.stderr
    );
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    stack(&[&["prune"][..], &args[..], &["--yes"]].concat()).expect_code(4);
    assert!(exists("configmap", Some(n), "settings"));
    let accepted = stack(&[&["orphans"][..], &args[..], &["--allow-unresolved", "-o", "name"]].concat()).expect_code(1);
    assert_eq!(accepted.stdout, "configmap/settings\n");
}

/// kapp (carvel-dev/kapp `pkg/kapp/resources/identity_annotation.go`): an object with the app
/// label but no `kapp.k14s.io/identity` naming itself is transient (a controller copied the
/// label); kapp deletes only what it deployed.
#[test]
fn kapp_deletes_only_objects_with_their_own_identity() {
    let _logs = start();
    let ns = Namespace::new("kapp");
    let n = &ns.0;
    let app = format!("1{}", std::process::id());
    let object = |name: &str, identity_of: Option<&str>| {
        let identity = identity_of
            .map(|of| format!(", annotations: {{kapp.k14s.io/identity: \"v1;{n}//ConfigMap/{of};v1\"}}"))
            .unwrap_or_default();
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {{kapp.k14s.io/app: \"{app}\"}}{identity}}}\n"
        )
    };
    apply(&format!(
        "{}{}{}{}",
        object("deployed", Some("deployed")),
        object("copied-identity", Some("deployed")),
        object("transient", None),
        kapp_app_record(n, &app)
    ));
    let repo = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
    );
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &format!("kapp={app}"),
        "-f",
        repo.to_str().unwrap(),
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(1);
    assert_eq!(orphan_names(&found), set(&[format!("ConfigMap/{n}/deployed")]));
    let skipped = skipped(&found);
    for name in ["copied-identity", "transient"] {
        assert!(
            skipped.contains(&(name.to_string(), "toolWouldKeep".to_string())),
            "{name}: {skipped:?}"
        );
    }
}

/// Review 15: kapp versions a manifest annotated `kapp.k14s.io/versioned` as `NAME-ver-N` and,
/// on each deploy, keeps the newest `kapp.k14s.io/num-versions` live versions of a base name
/// still in the manifests, deleting the older ones and every version of a base name gone
/// (carvel-dev/kapp `pkg/kapp/diff/change_set_with_versioned_rs.go`, `noopAndDeleteChanges`;
/// the live objects as kapp writes them: the app label, the identity annotation naming the
/// versioned name). Red before: every live version was called an orphan.
#[test]
fn kapp_keeps_the_newest_versions_of_a_versioned_manifest() {
    let _logs = start();
    let ns = Namespace::new("kapp-ver");
    let n = &ns.0;
    let app = format!("2{}", std::process::id());
    let object = |name: &str, versioned: bool| {
        let versioned = if versioned {
            ", kapp.k14s.io/versioned: \"\""
        } else {
            ""
        };
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {{kapp.k14s.io/app: \"{app}\"}}, annotations: {{kapp.k14s.io/identity: \"v1;{n}//ConfigMap/{name};v1\"{versioned}}}}}\n"
        )
    };
    let live: String = (1..=4)
        .map(|v| object(&format!("settings-ver-{v}"), true))
        .chain([
            object("gone-ver-1", true),
            object("other", false),
            kapp_app_record(n, &app),
        ])
        .collect();
    apply(&live);
    let repo = temp_file(
        "kapp-ver.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations: {kapp.k14s.io/versioned: \"\", kapp.k14s.io/num-versions: \"2\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
    );
    let tracker = format!("kapp={app}");
    let args = ["-n", n, "--tracker", &tracker, "-f", repo.to_str().unwrap()];
    let found = stack(&[&["orphans"][..], &args[..], &["-o", "json"]].concat()).expect_code(1);
    let orphans = ["settings-ver-1", "settings-ver-2", "gone-ver-1"].map(|name| format!("ConfigMap/{n}/{name}"));
    assert_eq!(orphan_names(&found), set(&orphans));
    stack(&[&["prune"][..], &args[..], &["--yes", "--timeout", "60s"]].concat()).expect_code(0);
    for name in ["settings-ver-3", "settings-ver-4", "other"] {
        assert!(exists("configmap", Some(n), name), "{name} must stay");
    }
    for name in ["settings-ver-1", "settings-ver-2", "gone-ver-1"] {
        assert!(!exists("configmap", Some(n), name), "{name} must be pruned");
    }
}

/// Membership review 15: Argo CD places a namespaced manifest written without a namespace in
/// its Application's `spec.destination.namespace` (gitops-engine `pkg/sync/reconcile.go`
/// `Reconcile`, called with `app.Spec.Destination.Namespace` by argo-cd `controller/state.go`),
/// whatever `-n` or the context says. Red before: under `-A` the manifest took the context's
/// namespace and the live object in the destination was called an orphan, by `--tracker` and
/// by `-l` alike.
#[test]
fn an_argo_manifest_without_a_namespace_is_in_the_applications_destination() {
    let _logs = start();
    ensure_argo_crd();
    let control = Namespace::new("argo-ctl");
    let dest = Namespace::new("argo-dest");
    let (c, d) = (&control.0, &dest.0);
    argo_control_plane(c);
    let app = unique("shop");
    let object = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {d}\n  labels: {{stack-test/run: {app}}}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{d}/{name}\"}}\n"
        )
    };
    apply(&format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {app}, namespace: {c}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\nstatus: {{sourceType: Directory}}\n{}{}",
        object("app-config"),
        object("gone")
    ));
    let repo = temp_file(
        "argo-dest.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config}\n",
    );
    let repo = repo.to_str().unwrap();
    let expected = set(&[format!("ConfigMap/{d}/gone")]);
    let tracker = format!("argocd={app}");
    let named = stack(&["orphans", "-A", "--tracker", &tracker, "-f", repo, "-o", "json"]).expect_code(1);
    assert_eq!(orphan_names(&named), expected, "--tracker");
    let selector = format!("stack-test/run={app}");
    let labelled = stack(&["orphans", "-A", "-l", &selector, "-f", repo, "-o", "json"]).expect_code(1);
    assert_eq!(orphan_names(&labelled), expected, "-l");
    stack(&[
        "prune",
        "-A",
        "--tracker",
        &tracker,
        "-f",
        repo,
        "--yes",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    assert!(exists("configmap", Some(d), "app-config"));
    assert!(!exists("configmap", Some(d), "gone"));
}

/// Membership review 16, F1: an Application without `spec.destination.namespace` gives a
/// namespace-less manifest none, and Argo CD then syncs and prunes nothing of it (argo-cd
/// `controller/state.go`: "Namespace for %s %s is missing.", an `InvalidSpecError` that
/// `controller/sync.go` performs no operation under). Red before: the manifest took the context's
/// namespace and the live objects of the destination were pruned, exit 0.
#[test]
fn an_argo_application_without_a_destination_namespace_prunes_nothing() {
    let _logs = start();
    ensure_argo_crd();
    let control = Namespace::new("argo-nd-ctl");
    let live = Namespace::new("argo-nd");
    let (c, d) = (&control.0, &live.0);
    argo_control_plane(c);
    let app = unique("nodest");
    let object = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {d}\n  labels: {{stack-test/run: {app}}}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{d}/{name}\"}}\n"
        )
    };
    apply(&format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {app}, namespace: {c}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc}}\nstatus: {{sourceType: Directory}}\n{}{}",
        object("cfg"),
        object("old")
    ));
    let repo = temp_file(
        "argo-nd.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n",
    );
    let repo = repo.to_str().unwrap();
    let tracker = format!("argocd={app}");
    let refused = stack(&["prune", "-A", "--tracker", &tracker, "-f", repo, "--yes"]).expect_code(4);
    assert!(
        refused.stderr.contains("no spec.destination.namespace"),
        "{}",
        refused.stderr
    );
    let selector = format!("stack-test/run={app}");
    let labelled = stack(&["orphans", "-A", "-l", &selector, "-f", repo, "-o", "json"]).expect_code(0);
    assert!(orphan_names(&labelled).is_empty(), "{}", labelled.stdout);
    stack(&["prune", "-A", "-l", &selector, "-f", repo, "--yes"]).expect_code(0);
    for name in ["cfg", "old"] {
        assert!(exists("configmap", Some(d), name), "{name} must stay");
    }
}

/// Membership review 18, F2: the re-check before each wave reads every stack the plan judged
/// again, Argo CD's too, and holds it against how it placed its manifests then. An Application
/// set to `Prune=false`, given another destination namespace or cluster, or a kustomize
/// override of its build, while an earlier wave waits keeps the later wave's orphan. Red before:
/// Argo CD Applications were read at plan time only (review 18, F2), and the destination
/// cluster and source overrides not at all (review 19, F1 and F2): the later wave was deleted,
/// exit 0.
#[test]
fn the_recheck_reads_an_argo_application_again() {
    let _logs = start();
    ensure_argo_crd();
    let control = Namespace::new("argo-rc-ctl");
    argo_control_plane(&control.0);
    let changes = [
        (
            "prune",
            r#"{"spec":{"syncPolicy":{"syncOptions":["Prune=false"]}}}"#,
            "sets Prune=false",
        ),
        (
            "dest",
            r#"{"spec":{"destination":{"namespace":"elsewhere"}}}"#,
            "the namespace it gives a manifest without one is elsewhere",
        ),
        // Review 19, F1 and F2: another cluster, and a kustomize override of the build.
        (
            "server",
            r#"{"spec":{"destination":{"server":"https://prod.example.com:6443"}}}"#,
            "deploys to another cluster",
        ),
        (
            "prefix",
            r#"{"spec":{"source":{"repoURL":"https://git.example.com/app","path":".","kustomize":{"namePrefix":"p-"}}}}"#,
            "builds with spec.source.kustomize.namePrefix",
        ),
        // Review 26, F1: the control plane's settings (argocd-cm, patched instead of the
        // Application; last, as it changes what every later case's Application tracks).
        (
            "installation",
            r#"{"data":{"installationID":"inst1"}}"#,
            "sets installationID inst1",
        ),
    ];
    for (case, patch, said) in changes {
        let live = Namespace::new(&format!("argo-rc-{case}"));
        let (c, d) = (&control.0, &live.0);
        let app = unique("rc");
        // `slow` goes first (Argo CD deletes the higher sync wave first) and holds its wave.
        let object = |name: &str, wave: &str, extra: &str| argo_waved_config_map(&app, d, name, wave, extra);
        apply(&format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {app}, namespace: {c}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\nstatus: {{sourceType: Directory}}\n{}{}{}",
            object("desired", "0", ""),
            object("slow", "5", "  finalizers: [stack-test.example.com/hold]\n"),
            object("later", "1", ""),
        ));
        let repo = temp_file(
            &format!("{}.yaml", unique("argo-rc")),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
        );
        let tracker = format!("argocd={app}");
        let mut child = spawn_stack(&[
            "prune",
            "-A",
            "--tracker",
            &tracker,
            "-f",
            repo.to_str().unwrap(),
            "--yes",
            "--timeout",
            "60s",
        ]);
        wait_while_running(&mut child, Duration::from_secs(60), || {
            is_terminating("configmap", d, "slow")
        });
        let patched = match case {
            "installation" => kubectl(&[
                "patch",
                "configmap",
                "argocd-cm",
                "-n",
                c,
                "--type",
                "merge",
                "-p",
                patch,
            ]),
            _ => kubectl(&["patch", "application", &app, "-n", c, "--type", "merge", "-p", patch]),
        };
        assert_eq!(patched.code, 0, "{}", patched.stderr);
        release_finalizers("configmap/slow", d);
        let run = finish(child);
        assert_eq!(run.code, 5, "{case}: dropped by the re-check:\n{}", run.stderr);
        assert!(run.stderr.contains(said), "{case}: {}", run.stderr);
        assert!(exists("configmap", Some(d), "later"), "{case}: {}", run.stderr);
        assert!(exists("configmap", Some(d), "desired"), "{case}: {}", run.stderr);
    }
}

/// Membership review 26, F1, on the teardown path: which objects Argo CD deletes with an
/// Application (its cascade deletes what it tracks) is decided by its control plane's argocd-cm
/// as well (`installationID`: only objects annotated with that id). A teardown of the Application
/// (an app of apps' child) read its members by their tracking ids alone. Its members are now
/// bounded by the same record function orphans read: set before the plan, every member is kept;
/// set while the run waits on an earlier wave, the re-check drops the later wave (exit 5).
#[test]
fn an_argo_cd_teardown_reads_its_control_planes_settings() {
    let _logs = start();
    ensure_argo_crd();
    let control = Namespace::new("argo-td-ctl");
    let live = Namespace::new("argo-td");
    let (c, d) = (&control.0, &live.0);
    argo_control_plane(c);
    let app = unique("td");
    // `slow` goes first (Argo CD deletes the higher sync wave first) and holds its wave.
    let object = |name: &str, wave: &str, extra: &str| argo_waved_config_map(&app, d, name, wave, extra);
    apply(&format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {app}\n  namespace: {c}\n  annotations: {{argocd.argoproj.io/tracking-id: \"root:argoproj.io/Application:{c}/{app}\"}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\nstatus: {{sourceType: Directory}}\n{}{}",
        object("slow", "5", "  finalizers: [stack-test.example.com/hold]\n"),
        object("later", "1", ""),
    ));
    let target = format!("application/{app}");
    let planned = stack(&["prune", "-n", c, &target, "--dry-run=client", "-o", "json"]).expect_code(0);
    assert!(planned.stdout.contains("\"later\""), "{}", planned.stdout);
    let mut child = spawn_stack(&["prune", "-n", c, &target, "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", d, "slow")
    });
    let patched = kubectl(&[
        "patch",
        "configmap",
        "argocd-cm",
        "-n",
        c,
        "--type",
        "merge",
        "-p",
        r#"{"data":{"installationID":"inst1"}}"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    release_finalizers("configmap/slow", d);
    let run = finish(child);
    assert_eq!(run.code, 5, "dropped by the re-check:\n{}", run.stderr);
    assert!(run.stderr.contains("installationID inst1"), "{}", run.stderr);
    assert!(exists("configmap", Some(d), "later"), "{}", run.stderr);
    // The Application went in its own wave, as planned; its kept member is Argo CD's to judge.
    assert!(!exists("application", Some(c), &app), "{}", run.stderr);
    // Set before the plan, in another control plane: no member is planned, each is kept.
    let control = Namespace::new("argo-td-ctl2");
    let c = &control.0;
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: argocd-cm, namespace: {c}}}\ndata: {{installationID: inst1}}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {app}\n  namespace: {c}\n  annotations: {{argocd.argoproj.io/tracking-id: \"root:argoproj.io/Application:{c}/{app}\"}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\nstatus: {{sourceType: Directory}}\n"
    ));
    let again = stack(&["prune", "-n", c, &target, "--dry-run=client", "-o", "json"]).expect_code(0);
    let plan = json_lines(&again.stdout)
        .into_iter()
        .find(|line| line["type"] == "plan")
        .unwrap_or_else(|| panic!("{}", again.stdout));
    let names = |list: &str| -> Vec<String> {
        let entries = plan[list].as_array().cloned().unwrap_or_default();
        let flat = match list {
            "waves" => entries
                .iter()
                .flat_map(|w| w.as_array().cloned().unwrap_or_default())
                .collect(),
            _ => entries,
        };
        flat.iter()
            .map(|t| t["id"]["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names("waves"), vec![app.clone()], "{}", again.stdout);
    assert_eq!(names("kept"), vec!["later".to_string()], "{}", again.stdout);
    // An Application no stack tracks is no teardown's: said so, not "not found".
    kubectl(&[
        "annotate",
        "application",
        &app,
        "-n",
        c,
        "argocd.argoproj.io/tracking-id-",
    ])
    .expect_code(0);
    let untracked = stack(&["prune", "-n", c, &target, "--dry-run=client"]).expect_code(2);
    assert!(untracked.stderr.contains("tracked by no stack"), "{}", untracked.stderr);
    // Review 28, F1: an Application outside every control plane (its tracking ids name it
    // `NAMESPACE_NAME`) is read with the settings of every control plane too.
    let apps = Namespace::new("argo-td-apps");
    let n = &apps.0;
    let app = unique("td-out");
    let target = format!("application/{app}");
    apply(&format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {app}\n  namespace: {n}\n  annotations: {{argocd.argoproj.io/tracking-id: \"root:argoproj.io/Application:{n}/{app}\"}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\nstatus: {{sourceType: Directory}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: outside\n  namespace: {d}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{n}_{app}:/ConfigMap:{d}/outside\"}}\n"
    ));
    let outside = stack(&["prune", "-n", n, &target, "--dry-run=client", "-o", "json"]).expect_code(0);
    assert!(outside.stdout.contains("\"kept\":[{"), "{}", outside.stdout);
    assert!(!outside.stdout.contains("\"why\":\"member of"), "{}", outside.stdout);
}

/// Membership reviews 16 F2 and 17 F1: `kapp deploy -a APP -n NS` places a namespace-less
/// manifest in NS (carvel-dev/kapp `pkg/kapp/cmd/app/deploy.go` sets the preparation's
/// `DefaultNamespace` to `-n`; `pkg/kapp/app/preparation.go` `placeIntoNamespace`), which the
/// cluster does not record (the app record may live elsewhere with `--app-namespace`): the
/// user's `-n` says it, and without one nothing is compared. Red before: the context's (then the
/// app record's) namespace was taken and a still-wanted object was called an orphan.
#[test]
fn kapp_places_a_manifest_without_a_namespace_where_only_n_can_say() {
    let _logs = start();
    let ns = Namespace::new("kapp-ns");
    let n = &ns.0;
    let app = format!("3{}", std::process::id());
    let object = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {{kapp.k14s.io/app: \"{app}\"}}, annotations: {{kapp.k14s.io/identity: \"v1;{n}//ConfigMap/{name};v1\"}}}}\n"
        )
    };
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: myapp, namespace: {n}, labels: {{kapp.k14s.io/is-app: \"\"}}}}\ndata:\n  spec: '{{\"labelKey\":\"kapp.k14s.io/app\",\"labelValue\":\"{app}\"}}'\n{}{}",
        object("cfg"),
        object("gone")
    ));
    let repo = temp_file(
        "kapp-ns.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n",
    );
    let repo = repo.to_str().unwrap();
    let expected = set(&[format!("ConfigMap/{n}/gone")]);
    let tracker = format!("kapp={app}");
    let named = stack(&["orphans", "-n", n, "--tracker", &tracker, "-f", repo, "-o", "json"]).expect_code(1);
    assert_eq!(orphan_names(&named), expected, "--tracker");
    let selector = format!("kapp.k14s.io/app={app}");
    let labelled = stack(&["orphans", "-n", n, "-l", &selector, "-f", repo, "-o", "json"]).expect_code(1);
    assert_eq!(orphan_names(&labelled), expected, "-l");
    // Without -n, kapp's `deploy -n` is not known (the app record may live elsewhere: review 17).
    let unknown = stack(&["orphans", "-A", "--tracker", &tracker, "-f", repo]).expect_code(4);
    assert!(unknown.stderr.contains("kapp deploy -n"), "{}", unknown.stderr);
    let labelled = stack(&["orphans", "-A", "-l", &selector, "-f", repo, "-o", "json"]).expect_code(0);
    assert!(orphan_names(&labelled).is_empty(), "{}", labelled.stdout);
}

/// A kapp app record (a ConfigMap labelled `kapp.k14s.io/is-app`) in `namespace` for label
/// value `app`, its `usedGKs` the JSON list given (see `common::kapp_app_record` for one without).
fn kapp_scoped_record(namespace: &str, app: &str, used_gks: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: myapp, namespace: {namespace}, labels: {{kapp.k14s.io/is-app: \"\"}}}}\ndata:\n  spec: '{{\"labelKey\":\"kapp.k14s.io/app\",\"labelValue\":\"{app}\",\"usedGKs\":{used_gks}}}'\n"
    )
}

/// A core-group object `kind` `namespace/name` that kapp app `app` applied (its label and its own
/// `kapp.k14s.io/identity`), followed by `rest`.
fn kapp_core_object(namespace: &str, app: &str, kind: &str, name: &str, rest: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: {namespace}, labels: {{kapp.k14s.io/app: \"{app}\"}}, annotations: {{kapp.k14s.io/identity: \"v1;{namespace}//{kind}/{name};v1\"}}}}\n{rest}"
    )
}

/// Asserts that kapp app `app`'s orphans in `namespace` against `repo` are `expected`, named by
/// `--tracker` and by `-l`, then prunes them.
fn kapp_orphans_pruned(namespace: &str, app: &str, repo: &str, expected: &BTreeSet<String>) {
    let tracker = format!("kapp={app}");
    let selector = format!("kapp.k14s.io/app={app}");
    for how in [["--tracker", &tracker], ["-l", &selector]] {
        let found = stack(&[&["orphans", "-n", namespace, "-o", "json", "-f", repo][..], &how].concat()).expect_code(1);
        assert_eq!(orphan_names(&found), *expected, "{how:?}");
    }
    stack(&["prune", "-n", namespace, "--tracker", &tracker, "-f", repo, "--yes"]).expect_code(0);
}

/// Membership review 27, F1 (wrong deletion): `kapp deploy` lists an app's existing objects of
/// the kinds its app record's `usedGKs` and the new set hold only (carvel-dev/kapp
/// `pkg/kapp/cmd/app/deploy.go` `newAndUsedGKs`, `pkg/kapp/resources/identified_resources.go`
/// `List` with `GKsScope`): after a `kapp deploy --filter-kind ConfigMap`, the app's Secret is
/// never seen again, so never pruned. kubectl-stack called it an orphan and deleted it. It is
/// kept now, by name and by `-l`; the ConfigMap gone from the set is still an orphan.
#[test]
fn kapp_prunes_only_the_kinds_its_app_record_lists() {
    let _logs = start();
    let ns = Namespace::new("kapp-gk");
    let n = &ns.0;
    let app = format!("4{}", std::process::id());
    let object = |kind: &str, name: &str| kapp_core_object(n, &app, kind, name, "");
    apply(&format!(
        "{}{}{}{}",
        kapp_scoped_record(n, &app, r#"[{"Group":"","Kind":"ConfigMap"}]"#),
        object("ConfigMap", "a"),
        object("ConfigMap", "b"),
        object("Secret", "s"),
    ));
    let repo = temp_file("kapp-gk.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n");
    let repo = repo.to_str().unwrap();
    let expected = set(&[format!("ConfigMap/{n}/b")]);
    kapp_orphans_pruned(n, &app, repo, &expected);
    assert!(!exists("configmap", Some(n), "b"));
    assert!(exists("secret", Some(n), "s"), "kapp never lists the Secret");
    assert!(exists("configmap", Some(n), "a"));
}

/// Membership review 32, F1 (reported less), and the scope it read: kapp lists an app's object
/// once through each group and version that serves its kind in the app's scope, calls the copies
/// its `kapp.k14s.io/identity` does not name transient, and keeps the copy whose `apiVersion` is
/// the identity's (carvel-dev/kapp `pkg/kapp/resources/identified_resources_list.go` `List`,
/// `pickPreferredVersions`; `identity_annotation.go`), its scope the record's `usedGKs` and the
/// new manifests' group-kinds as written (`pkg/kapp/cmd/app/deploy.go` `newAndUsedGKs`). So an
/// Ingress applied as `extensions/v1beta1` and gone from the set is pruned: it was called
/// transient. One whose identity names `networking.k8s.io`, which this app never lists, is not:
/// the set's `extensions` Ingress had put `networking.k8s.io` in its scope, and it was deleted.
#[test]
fn kapp_lists_an_object_through_the_group_its_identity_names() {
    let _logs = start();
    let ns = Namespace::new("kapp-alias");
    let n = &ns.0;
    let app = format!("5{}", std::process::id());
    let ingress = |api_version: &str, name: &str| {
        let group = api_version.split('/').next().unwrap();
        let backend = match group {
            "extensions" => "{serviceName: web, servicePort: 80}",
            _ => "{service: {name: web, port: {number: 80}}}",
        };
        format!(
            "---\napiVersion: {api_version}\nkind: Ingress\nmetadata: {{name: {name}, namespace: {n}, labels: {{kapp.k14s.io/app: \"{app}\"}}, annotations: {{kapp.k14s.io/identity: \"v1;{n}/{group}/Ingress/{name};{api_version}\"}}}}\nspec:\n  {}: {backend}\n",
            if group == "extensions" { "backend" } else { "defaultBackend" }
        )
    };
    // Review 33: an identity at a version no group serves is taken through the first copy by
    // apiVersion (`pickPreferredVersions` sorts them), here its own `extensions/v1beta1`; kapp
    // never lists core Events (`List`: "eliminating events"), so one naming the core group stays.
    let unserved = ingress("extensions/v1beta1", "unserved").replace(";extensions/v1beta1", ";extensions/v1");
    let event = format!(
        "---\napiVersion: v1\nkind: Event\nmetadata: {{name: ev, namespace: {n}, labels: {{kapp.k14s.io/app: \"{app}\"}}, annotations: {{kapp.k14s.io/identity: \"v1;{n}//Event/ev;v1\"}}}}\ninvolvedObject: {{kind: ConfigMap, name: myapp, namespace: {n}}}\n"
    );
    apply(&format!(
        "{}{}{}{}{unserved}{event}",
        kapp_scoped_record(
            n,
            &app,
            r#"[{"Group":"extensions","Kind":"Ingress"},{"Group":"","Kind":"Event"}]"#
        ),
        ingress("extensions/v1beta1", "kept"),
        ingress("extensions/v1beta1", "old"),
        ingress("networking.k8s.io/v1", "net"),
    ));
    let repo = temp_file(
        "kapp-alias.yaml",
        "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: kept}\nspec:\n  backend: {serviceName: web, servicePort: 80}\n",
    );
    let repo = repo.to_str().unwrap();
    let expected = set(&[format!("Ingress/{n}/old"), format!("Ingress/{n}/unserved")]);
    kapp_orphans_pruned(n, &app, repo, &expected);
    assert!(!exists("ingress.networking.k8s.io", Some(n), "old"));
    assert!(!exists("ingress.networking.k8s.io", Some(n), "unserved"));
    assert!(exists("event", Some(n), "ev"), "kapp never lists core Events");
    assert!(
        exists("ingress.networking.k8s.io", Some(n), "net"),
        "kapp never lists it as its own"
    );
    assert!(exists("ingress.networking.k8s.io", Some(n), "kept"));
}

/// Review 33, F5 (wrong deletion): a kapp app record is created with an empty `usedGKs`
/// (carvel-dev/kapp `recorded_app.go`), and an empty new set then scopes a deploy to Pods (kapp
/// adds them for their logs; an empty scope lists every kind, Pods among them:
/// `deploy.go` `newAndUsedGKs`, `identified_resources_list.go` `List`). Every kind was taken:
/// `prune --allow-empty` planned the app's Secret. Only its Pod is kapp's to prune now.
#[test]
fn kapp_with_an_empty_used_kinds_and_an_empty_set_prunes_pods_only() {
    let _logs = start();
    let ns = Namespace::new("kapp-empty");
    let n = &ns.0;
    let app = format!("6{}", std::process::id());
    let object = |kind: &str, name: &str, rest: &str| kapp_core_object(n, &app, kind, name, rest);
    apply(&format!(
        "{}{}{}",
        kapp_scoped_record(n, &app, "[]"),
        object("Secret", "s", ""),
        object("Pod", "p", "spec: {containers: [{name: c, image: busybox}]}\n"),
    ));
    let empty = temp_file("kapp-empty.yaml", "");
    let empty = empty.to_str().unwrap();
    let tracker = format!("kapp={app}");
    let args = ["-n", n, "--tracker", &tracker, "-f", empty, "--allow-empty"];
    let found = stack(&[&["orphans"][..], &args, &["-o", "json"]].concat()).expect_code(1);
    assert_eq!(orphan_names(&found), set(&[format!("Pod/{n}/p")]), "{}", found.stderr);
    stack(&[&["prune"][..], &args, &["--yes"]].concat()).expect_code(0);
    assert!(exists("secret", Some(n), "s"), "kapp never lists the Secret");
}

/// A ConfigMap `namespace/name` Argo CD application `app` tracks in sync wave `wave` (labelled
/// `stack-test/run: APP`), with `extra` metadata lines.
fn argo_waved_config_map(app: &str, namespace: &str, name: &str, wave: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels: {{stack-test/run: {app}}}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{namespace}/{name}\", argocd.argoproj.io/sync-wave: \"{wave}\"}}\n{extra}"
    )
}

/// Marks `namespace` as an Argo CD control plane, as its install does: the `argocd-cm`
/// ConfigMap (a name-only tracking id names an Application there only).
fn argo_control_plane(namespace: &str) {
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: argocd-cm, namespace: {namespace}, labels: {{app.kubernetes.io/part-of: argocd}}}}\n"
    ));
}

/// Membership review 17, F2 and F3. A name-only tracking id names the Application of that name
/// in Argo CD's control-plane namespace only (argo-cd `util/argo/argo.go` `AppInstanceName`):
/// one of that name elsewhere gives its destination to nothing, and a namespace-less manifest is
/// then refused. An Application with `spec.syncPolicy.syncOptions: [Prune=false]` prunes none of
/// its resources (argo-cd `docs/user-guide/sync-options.md`): nothing of it is an orphan. Red
/// before: the other Application's destination was taken, and Prune=false was not read.
#[test]
fn argo_applications_are_told_and_read_as_argo_cd_does() {
    let _logs = start();
    ensure_argo_crd();
    let control = Namespace::new("argo-cp");
    let team = Namespace::new("argo-team");
    let live = Namespace::new("argo-live");
    let (c, t, l) = (&control.0, &team.0, &live.0);
    argo_control_plane(c);
    let elsewhere = unique("elsewhere");
    let keeping = unique("keeping");
    let object = |app: &str, name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {l}\n  labels: {{stack-test/run: {app}}}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{l}/{name}\"}}\n"
        )
    };
    apply(&format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {elsewhere}, namespace: {t}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {t}}}\nstatus: {{sourceType: Directory}}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {keeping}, namespace: {c}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {l}}}\n  syncPolicy: {{syncOptions: [Prune=false]}}\nstatus: {{sourceType: Directory}}\n{}{}{}{}",
        object(&elsewhere, "cfg"),
        object(&elsewhere, "old"),
        object(&keeping, "cfg-k"),
        object(&keeping, "old-k"),
    ));
    let repo = temp_file("argo-told.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg-k}\n");
    let repo = repo.to_str().unwrap();
    let tracker = format!("argocd={elsewhere}");
    let unknown = stack(&["orphans", "-A", "--tracker", &tracker, "-f", repo]).expect_code(4);
    assert!(unknown.stderr.contains("argocd-cm"), "{}", unknown.stderr);
    let tracker = format!("argocd={keeping}");
    let refused = stack(&["orphans", "-A", "--tracker", &tracker, "-f", repo]).expect_code(4);
    assert!(refused.stderr.contains("Prune=false"), "{}", refused.stderr);
    for app in [&elsewhere, &keeping] {
        let selector = format!("stack-test/run={app}");
        let labelled = stack(&["orphans", "-A", "-l", &selector, "-f", repo, "-o", "json"]).expect_code(0);
        assert!(orphan_names(&labelled).is_empty(), "{app}: {}", labelled.stdout);
    }
}

/// Membership review 19, F1, F2 and F5, at plan time: what a stack's own tool would never prune
/// is no orphan. An Argo CD Application that deploys to another cluster reads and prunes its
/// resources there (argo-cd `controller/state.go` `CompareAppState`); one whose source has a
/// kustomize `namePrefix` builds names `-f` does not hold (argo-cd `docs/user-guide/kustomize.md`),
/// so it is refused as a renaming Flux Kustomization is; kapp finds an app's resources only by the
/// label value its app record holds (carvel-dev/kapp `pkg/kapp/app/recorded_app.go`), so
/// without that record no kapp run prunes them. Each is refused (exit 4) and nothing is deleted;
/// red before: each was planned and pruned, exit 0.
#[test]
fn what_an_argo_or_kapp_stack_would_never_prune_is_no_orphan() {
    let _logs = start();
    ensure_argo_crd();
    let control = Namespace::new("argo-never-ctl");
    let live = Namespace::new("argo-never");
    let (c, d) = (&control.0, &live.0);
    argo_control_plane(c);
    let cases = [
        (
            "server",
            format!("destination: {{server: https://prod.example.com:6443, namespace: {d}}}"),
            "deploys to another cluster",
        ),
        (
            "prefix",
            format!("destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\n  source: {{repoURL: https://git.example.com/app, path: ., kustomize: {{namePrefix: p-}}}}"),
            "builds with spec.source.kustomize.namePrefix",
        ),
        // Review 20, G1: a Helm chart renders with the Application's release name and values.
        (
            "helm",
            format!("destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\n  source: {{repoURL: https://charts.example.com, chart: web, targetRevision: 1.0.0, helm: {{releaseName: prod}}}}"),
            "builds with spec.source.chart, spec.source.helm",
        ),
    ];
    for (case, spec, said) in cases {
        let app = unique(case);
        let object = |name: &str| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {d}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{d}/{name}\"}}\n"
            )
        };
        apply(&format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {app}, namespace: {c}}}\nspec:\n  {spec}\nstatus: {{sourceType: Directory}}\n{}{}",
            object(&format!("{case}-keep")),
            object(&format!("{case}-old")),
        ));
        let repo = temp_file(
            &format!("{}.yaml", unique("argo-never")),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {case}-keep}}\n"),
        );
        let tracker = format!("argocd={app}");
        for command in [&["orphans"][..], &["prune", "--yes"][..]] {
            let run = stack(&[command, &["-A", "--tracker", &tracker, "-f", repo.to_str().unwrap()]].concat());
            assert_eq!(run.code, 4, "{case} {command:?}: {}", run.stderr);
            assert!(run.stderr.contains(said), "{case} {command:?}: {}", run.stderr);
        }
        assert!(exists("configmap", Some(d), &format!("{case}-old")), "{case}");
    }

    let ns = Namespace::new("kapp-norecord");
    let n = &ns.0;
    let app = unique("kapp");
    let object = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {{kapp.k14s.io/app: \"{app}\"}}, annotations: {{kapp.k14s.io/identity: \"v1;{n}//ConfigMap/{name};v1\"}}}}\n"
        )
    };
    apply(&format!("{}{}", object("settings"), object("old")));
    let repo = temp_file(
        &format!("{}.yaml", unique("kapp-norecord")),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
    );
    let repo = repo.to_str().unwrap();
    let tracker = format!("kapp={app}");
    for command in [&["orphans"][..], &["prune", "--yes"][..]] {
        let run = stack(&[command, &["-n", n, "--tracker", &tracker, "-f", repo]].concat());
        assert_eq!(run.code, 4, "{command:?}: {}", run.stderr);
        assert!(run.stderr.contains("no kapp app record"), "{command:?}: {}", run.stderr);
    }
    assert!(exists("configmap", Some(n), "old"));
    // With its app record (in another namespace, as `--app-namespace` puts it), kapp would prune.
    apply(&kapp_app_record(c, &app));
    let named = stack(&["orphans", "-n", n, "--tracker", &tracker, "-f", repo, "-o", "json"]).expect_code(1);
    assert_eq!(orphan_names(&named), set(&[format!("ConfigMap/{n}/old")]));
}

/// Membership review 10, finding 1: a tracker's mark or option is read whatever its value looks
/// like. Argo CD splits `sync-options` on commas and trims each (gitops-engine
/// `pkg/utils/resource` `GetAnnotationCSVs`), so `Prune=false,\nkind: x` keeps; the value once
/// looked like a serialized object and was dropped as content, and the object was pruned.
#[test]
fn a_keep_option_that_looks_like_content_still_keeps() {
    let _logs = start();
    let ns = Namespace::new("argo-opt");
    let n = &ns.0;
    let app = unique("shop");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keepme\n  namespace: {n}\n  annotations:\n    argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{n}/keepme\"\n    argocd.argoproj.io/sync-options: \"Prune=false,\\nkind: x\"\n"
    ));
    let repo = temp_file(
        "argo-opt.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: stays, namespace: {n}}}\n"),
    );
    let run = stack(&[
        "prune",
        "-n",
        n,
        "--tracker",
        &format!("argocd={app}"),
        "-f",
        repo.to_str().unwrap(),
        "--allow-empty",
        "--yes",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(exists("configmap", Some(n), "keepme"), "{}\n{}", run.stdout, run.stderr);
}

/// Membership review 10, finding 2: an orphan prune with `-n` looks in every namespace for what
/// depends on its orphans, untracked objects that declare a need included (as `-A` does).
#[test]
fn an_orphan_prune_in_one_namespace_keeps_what_an_untracked_object_elsewhere_needs() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("orph-n");
    let elsewhere = Namespace::new("orph-n-other");
    let (n, o) = (&ns.0, &elsewhere.0);
    let flux_ns = Namespace::new("orph-n-flux");
    let f = &flux_ns.0;
    let stack_name = unique("orph");
    let labels = common::flux_labels(&stack_name, f);
    apply(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {stack_name}, namespace: {f}}}\nspec: {{prune: true, targetNamespace: {n}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: old, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cur, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: user\n  namespace: {o}\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/old}}\n"
    ));
    record_flux_inventory(&stack_name, f);
    let repo = temp_file(
        "orph-n.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cur, namespace: {n}}}\n"),
    );
    let run = stack(&[
        "prune",
        "-n",
        n,
        "--tracker",
        &format!("flux={stack_name}.{f}"),
        "-f",
        repo.to_str().unwrap(),
        "--yes",
    ]);
    // Kept by the plan itself (before, only the re-check before the wave caught it: exit 5).
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("dropped"), "{}", run.stderr);
    assert!(exists("configmap", Some(n), "old"), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(&format!("ConfigMap/{o}/user")), "{}", run.stderr);
}

/// Membership review 22, F1 and F2, and review 23: Argo CD reads a desired path as the source
/// type it detected, which its controller records in the Application's `status.sourceType`. A
/// Directory source reads every file as it is, a kustomization below its path (or at it: a
/// given `spec.source.directory`, or `kustomize.enable: "false"` in `argocd-cm`) included, which it
/// ignores (argo-cd `reposerver/repository/repository.go` `findManifests`); a discovered plugin
/// renders what it renders; and the repo-server merges `.argocd-source-<app>.yaml` into the source
/// before it builds (`mergeSourceParameters`). Built as Flux builds it, the desired set held other
/// names, and what Argo CD keeps was pruned. Each is refused (exit 4) unless `--as-built`, as is
/// an Application that records no source type; a Kustomize source given its kustomization is
/// built as Argo CD builds it, and compared.
#[test]
fn argo_cd_reads_a_desired_path_as_its_source_type_says() {
    let _logs = start();
    ensure_argo_crd();
    let control = Namespace::new("argo-path-ctl");
    let live = Namespace::new("argo-path");
    let (c, d) = (&control.0, &live.0);
    argo_control_plane(c);
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n");
    let prefixed = "namePrefix: p-\nresources: [keep.yaml]\n";
    let plain = "resources: [keep.yaml]\n";
    let at_root = |case: &str, kustomization: &str| {
        vec![
            ("kustomization.yaml".to_string(), kustomization.to_string()),
            ("keep.yaml".to_string(), cm(&format!("{case}-keep"))),
        ]
    };
    // (case, the source's type fields, its status.sourceType, the repository's files, what the
    // refusal says).
    type Case<'a> = (
        &'a str,
        &'a str,
        Option<&'a str>,
        Vec<(String, String)>,
        Option<&'a str>,
    );
    let mut params = at_root("params", plain);
    params.push((
        ".argocd-source-APP.yaml".into(),
        "kustomize:\n  namePrefix: p-\n".into(),
    ));
    let cases: [Case; 7] = [
        (
            "nested",
            "directory: {recurse: true}",
            Some("Directory"),
            vec![
                ("root.yaml".into(), cm("nested-root")),
                ("sub/kustomization.yaml".into(), prefixed.into()),
                ("sub/keep.yaml".into(), cm("nested-keep")),
            ],
            Some("as they are"),
        ),
        (
            "directory",
            "directory: {}",
            Some("Directory"),
            at_root("directory", prefixed),
            Some("as a Directory"),
        ),
        // argocd-cm's `kustomize.enable: "false"`: the status says Directory, the spec nothing.
        (
            "disabled",
            "",
            Some("Directory"),
            at_root("disabled", prefixed),
            Some("as a Directory"),
        ),
        (
            "plugin",
            "",
            Some("Plugin"),
            at_root("plugin", prefixed),
            Some("as Plugin"),
        ),
        (
            "unrecorded",
            "",
            None,
            at_root("unrecorded", plain),
            Some("records no status.sourceType"),
        ),
        ("params", "", Some("Kustomize"), params, Some("merges")),
        ("detected", "", Some("Kustomize"), at_root("detected", plain), None),
    ];
    for (case, source, built_as, files, refused) in cases {
        let app = unique(case);
        let object = |name: &str| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {d}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{d}/{name}\"}}\n"
            )
        };
        let source = if source.is_empty() {
            String::new()
        } else {
            format!(", {source}")
        };
        apply(&format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {app}, namespace: {c}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\n  source: {{repoURL: https://git.example.com/app, path: .{source}}}\n{}{}{}{}",
            built_as.map(|t| format!("status: {{sourceType: {t}}}\n")).unwrap_or_default(),
            object(&format!("{case}-keep")),
            object(&format!("p-{case}-keep")),
            object(&format!("{case}-old")),
        ));
        let repo = std::env::temp_dir().join(unique("argo-path-repo"));
        for (path, text) in &files {
            let path = repo.join(path.replace("APP", &app));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let repo_text = repo.to_str().unwrap();
        let tracker = format!("argocd={app}");
        match refused {
            Some(said) => {
                for command in [&["orphans"][..], &["prune", "--yes"][..]] {
                    let run = stack(&[command, &["-n", d, "--tracker", &tracker, "-f", repo_text]].concat());
                    assert_eq!(run.code, 4, "{case} {command:?}: {}\n{}", run.stdout, run.stderr);
                    assert!(run.stderr.contains(said), "{case} {command:?}: {}", run.stderr);
                }
                for name in [format!("{case}-keep"), format!("p-{case}-keep"), format!("{case}-old")] {
                    assert!(exists("configmap", Some(d), &name), "{case}: {name}");
                }
            }
            None => {
                let found = stack(&["orphans", "-n", d, "--tracker", &tracker, "-f", repo_text, "-o", "json"]);
                assert_eq!(found.code, 1, "{case}: {}\n{}", found.stdout, found.stderr);
                assert_eq!(
                    orphan_names(&found),
                    set(&[
                        format!("ConfigMap/{d}/p-{case}-keep"),
                        format!("ConfigMap/{d}/{case}-old")
                    ]),
                    "{case}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&repo);
    }
}
