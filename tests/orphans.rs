//! End-to-end tests of `kubectl stack orphans` against the real test cluster.

mod common;

use std::collections::BTreeSet;

use common::*;

/// Sets a Kustomization's status (the Flux inventory lives there), as kustomize-controller does.
fn patch_status(name: &str, namespace: &str, status: &str) -> Run {
    kubectl(&[
        "patch",
        "kustomization",
        name,
        "-n",
        namespace,
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        status,
    ])
}

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

/// The seed's trap: manifests written without namespaces. Cluster-scoped objects must match
/// the cluster's (namespace-less) objects; a namespaced one takes the context's namespace.
#[test]
fn the_seeds_namespace_trap_is_not_fallen_into() {
    let _logs = start();
    let ns = Namespace::new("trap");
    let other = Namespace::new("trap-other");
    let run = unique("trap");
    let label = format!("stack-test/run: {run}");
    apply(&format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-reader, labels: {{{label}}}}}
rules: []
---
apiVersion: v1
kind: Namespace
metadata: {{name: {run}-ns, labels: {{{label}}}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: things{n}.trap.example.com, labels: {{{label}}}}}
spec:
  group: trap.example.com
  names: {{kind: Thing{n}, plural: things{n}}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {ns}, labels: {{{label}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {other}, labels: {{{label}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: removed-from-git, namespace: {ns}, labels: {{{label}}}}}
"#,
        n = std::process::id(),
        ns = ns.0,
        other = other.0
    ));
    // The repository: no namespaces anywhere (one wrongly set on the ClusterRole).
    let manifests = temp_file(
        "repo.yaml",
        &format!(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-reader, namespace: default}}
rules: []
---
apiVersion: v1
kind: Namespace
metadata: {{name: {run}-ns}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: things{n}.trap.example.com}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings}}
"#,
            n = std::process::id()
        ),
    );
    let kubeconfig = kubeconfig_with_namespace(&ns.0);
    let found = stack_as(
        &kubeconfig,
        &[
            "orphans",
            "-A",
            "-l",
            &format!("stack-test/run={run}"),
            "-f",
            manifests.to_str().unwrap(),
            "-o",
            "json",
        ],
    )
    .expect_code(1);
    let expected: BTreeSet<String> = [
        format!("ConfigMap/{}/removed-from-git", ns.0),
        format!("ConfigMap/{}/settings", other.0),
    ]
    .into_iter()
    .collect();
    assert_eq!(orphan_names(&found), expected);
    let orphan = &found.json()["orphans"][0];
    assert_eq!(orphan["reason"], "notInDesiredSet");
    assert!(!orphan["uid"].as_str().unwrap().is_empty());

    // The table says why.
    let table = stack_as(
        &kubeconfig,
        &[
            "orphans",
            "-A",
            "-l",
            &format!("stack-test/run={run}"),
            "-f",
            manifests.to_str().unwrap(),
        ],
    )
    .expect_code(1);
    assert!(table.stdout.lines().next().unwrap().ends_with("REASON"));
    assert!(table.stdout.contains("not in desired set"));
    assert_eq!(table.stdout.lines().count(), 3, "{}", table.stdout);
    let _ = kubectl(&["delete", "clusterrole", &format!("{run}-reader")]);
    let _ = kubectl(&["delete", "namespace", &format!("{run}-ns"), "--wait=false"]);
    let _ = kubectl(&[
        "delete",
        "crd",
        &format!("things{}.trap.example.com", std::process::id()),
    ]);
}

#[test]
fn controller_children_keep_markers_and_terminating_objects_are_never_orphans() {
    let _logs = start();
    let ns = Namespace::new("skip");
    let run = unique("skip");
    let n = &ns.0;
    let label = format!("stack-test/run: {run}");
    let keep_annotations = [
        ("kustomize.toolkit.fluxcd.io/prune", "disabled"),
        ("kustomize.toolkit.fluxcd.io/reconcile", "disabled"),
        ("kustomize.toolkit.fluxcd.io/ssa", "Ignore"),
        ("flux.weave.works/ignore", "true"),
        ("fluxcd.io/ignore", "sync_only"),
        ("cli-utils.sigs.k8s.io/on-remove", "keep"),
        ("client.lifecycle.config.k8s.io/deletion", "detach"),
        ("kapp.k14s.io/delete-strategy", "orphan"),
        ("argocd.argoproj.io/sync-options", "Prune=false"),
        ("argocd.argoproj.io/sync-options", "Delete=false"),
        ("helm.sh/resource-policy", "keep"),
    ];
    let mut yaml =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: parent, namespace: {n}, labels: {{{label}}}}}\n");
    for (i, (key, value)) in keep_annotations.iter().enumerate() {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept-{i}, namespace: {n}, labels: {{{label}}}, annotations: {{{key}: \"{value}\"}}}}\n"
        ));
    }
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept-by-label, namespace: {n}, labels: {{{label}, kustomize.toolkit.fluxcd.io/prune: disabled}}}}\n"
    ));
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: terminating, namespace: {n}, labels: {{{label}}}, finalizers: [stack-test.example.com/hold]}}\n"
    ));
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain-orphan, namespace: {n}, labels: {{{label}}}}}\n"
    ));
    apply(&yaml);
    let parent_uid = uid_of("configmap", Some(n), "parent");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: child
  namespace: {n}
  labels: {{{label}}}
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: parent, uid: {parent_uid}, controller: true}}]
"#
    ));
    let deleted = kubectl(&["delete", "configmap", "terminating", "-n", n, "--wait=false"]);
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);

    let manifests = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: parent}\n",
    );
    let args = [
        "orphans",
        "-n",
        n,
        "-l",
        &format!("stack-test/run={run}"),
        "-f",
        manifests.to_str().unwrap(),
    ];
    let found = stack(&[&args[..], &["-o", "json", "--show-skipped"]].concat()).expect_code(1);
    let json = found.json();
    assert_eq!(
        orphan_names(&found),
        [format!("ConfigMap/{n}/plain-orphan")].into_iter().collect()
    );
    let skipped = json["skipped"].as_array().unwrap();
    let reason_of = |name: &str| {
        skipped
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} not skipped"))["reason"]
            .clone()
    };
    assert_eq!(reason_of("child"), "controllerOwned");
    assert_eq!(reason_of("terminating"), "terminating");
    for i in 0..keep_annotations.len() {
        assert_eq!(reason_of(&format!("kept-{i}")), "keep", "kept-{i}");
    }
    assert_eq!(reason_of("kept-by-label"), "keep");
    assert_eq!(skipped.len(), keep_annotations.len() + 3);

    let table = stack(&[&args[..], &["--show-skipped"]].concat()).expect_code(1);
    assert!(
        table.stdout.contains("skipped: controlled by ConfigMap/parent"),
        "{}",
        table.stdout
    );
    assert!(
        table
            .stdout
            .contains("skipped: keep marker helm.sh/resource-policy=keep"),
        "{}",
        table.stdout
    );

    release_finalizers("configmap/terminating", n);
}

#[test]
fn a_flux_inventory_is_a_desired_set() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("inv");
    let n = &ns.0;
    let ks = unique("apps");
    let labels = format!("{{kustomize.toolkit.fluxcd.io/name: {ks}, kustomize.toolkit.fluxcd.io/namespace: {n}}}");
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: {ks}, namespace: {n}}}
spec: {{interval: 10m, prune: true, path: ./apps, sourceRef: {{kind: GitRepository, name: repo}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: still-listed, namespace: {n}, labels: {labels}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: dropped, namespace: {n}, labels: {labels}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ks}-role, labels: {labels}}}
rules: []
"#
    ));
    let status = format!(
        r#"{{"status":{{"inventory":{{"entries":[{{"id":"{n}_still-listed__ConfigMap","v":"v1"}},{{"id":"_{ks}-role_rbac.authorization.k8s.io_ClusterRole","v":"v1"}}]}}}}}}"#
    );
    let patched = patch_status(&ks, n, &status);
    assert_eq!(patched.code, 0, "{}", patched.stderr);

    let found = stack(&["orphans", "-A", "--inventory", &format!("flux={ks}.{n}"), "-o", "json"]).expect_code(1);
    assert_eq!(
        orphan_names(&found),
        [format!("ConfigMap/{n}/dropped")].into_iter().collect()
    );
    assert_eq!(found.json()["orphans"][0]["reason"], "goneFromInventory");
    assert_eq!(
        found.json()["orphans"][0]["inventory"],
        format!("Kustomization {n}/{ks}")
    );

    // An empty inventory is refused unless told.
    let empty = patch_status(&ks, n, r#"{"status":{"inventory":{"entries":[]}}}"#);
    assert_eq!(empty.code, 0, "{}", empty.stderr);
    let refused = stack(&["orphans", "-A", "--inventory", &format!("flux={ks}.{n}")]).expect_code(4);
    assert!(refused.stderr.contains("desired set is empty"), "{}", refused.stderr);
    let _ = kubectl(&["delete", "clusterrole", &format!("{ks}-role")]);
}

#[test]
fn stdin_bad_manifests_empty_directories_and_unknown_kinds() {
    let _logs = start();
    let ns = Namespace::new("io");
    let n = &ns.0;
    let run = unique("io");
    let label = format!("stack-test/run={run}");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));

    // stdin, JSON, with a kind the cluster does not serve, and a CRD defined alongside its resource.
    let input = format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[
  {{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"a","namespace":"{n}"}}}},
  {{"apiVersion":"nowhere.example.com/v1","kind":"Ghost","metadata":{{"name":"boo"}}}},
  {{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"news.later.example.com"}},
    "spec":{{"group":"later.example.com","scope":"Namespaced","names":{{"kind":"New","plural":"news"}}}}}},
  {{"apiVersion":"later.example.com/v1","kind":"New","metadata":{{"name":"n1"}}}}
]}}"#
    );
    let found = stack_with_stdin(&["orphans", "-n", n, "-l", &label, "-f", "-", "-o", "name"], &input).expect_code(1);
    assert_eq!(found.stdout, "configmap/b\n");
    assert!(
        found.stderr.contains("Ghost"),
        "unknown kind is reported: {}",
        found.stderr
    );
    assert!(
        !found.stderr.contains("later.example.com"),
        "a CRD in the manifests defines New: {}",
        found.stderr
    );

    // A manifest that does not parse stops everything, naming the file and line.
    let bad = temp_file(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n",
    );
    let failed = stack(&["orphans", "-n", n, "-l", &label, "-f", bad.to_str().unwrap()]).expect_code(2);
    assert!(failed.stderr.contains("bad.yaml:"), "{}", failed.stderr);
    assert!(failed.stdout.is_empty());

    // An empty directory is an empty desired set: refused unless --allow-empty.
    let empty = std::env::temp_dir().join(unique("empty"));
    std::fs::create_dir_all(&empty).unwrap();
    let refused = stack(&["orphans", "-n", n, "-l", &label, "-f", empty.to_str().unwrap()]).expect_code(4);
    assert!(refused.stderr.contains("--allow-empty"), "{}", refused.stderr);
    let all = stack(&[
        "orphans",
        "-n",
        n,
        "-l",
        &label,
        "-f",
        empty.to_str().unwrap(),
        "--allow-empty",
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(all.sorted_lines(), vec!["configmap/a", "configmap/b"]);

    // No orphans: exit 0.
    let both = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n";
    let clean = stack_with_stdin(&["orphans", "-n", n, "-l", &label, "-f", "-"], both).expect_code(0);
    assert!(clean.stdout.is_empty());

    // No stack named: refused as a usage error, never compared against everything.
    stack(&["orphans", "-n", n, "-f", empty.to_str().unwrap()]).expect_code(2);
}

#[test]
fn flux_v1_checksums_helm_releases_and_kpt_inventories() {
    let _logs = start();
    let ns = Namespace::new("tools");
    let n = &ns.0;
    let id = unique("t");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: current, namespace: {n}, labels: {{flux.weave.works/stack: s-{id}, flux.weave.works/stack-checksum: new}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: stale, namespace: {n}, labels: {{flux.weave.works/stack: s-{id}, flux.weave.works/stack-checksum: old}}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: in-chart
  namespace: {n}
  labels: {{app.kubernetes.io/managed-by: Helm}}
  annotations: {{meta.helm.sh/release-name: web-{id}, meta.helm.sh/release-namespace: {n}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: left-behind
  namespace: {n}
  labels: {{app.kubernetes.io/managed-by: Helm}}
  annotations: {{meta.helm.sh/release-name: web-{id}, meta.helm.sh/release-namespace: {n}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kpt-kept, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: inv-{id}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kpt-dropped, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: inv-{id}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: inventory, namespace: {n}, labels: {{cli-utils.sigs.k8s.io/inventory-id: inv-{id}}}}}
data: {{"{n}_kpt-kept__ConfigMap": ""}}
"#
    ));
    let checksum = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &format!("flux-v1=s-{id}"),
        "--checksum",
        "new",
        "-o",
        "json",
    ])
    .expect_code(1);
    assert_eq!(
        orphan_names(&checksum),
        [format!("ConfigMap/{n}/stale")].into_iter().collect()
    );
    assert_eq!(checksum.json()["orphans"][0]["reason"], "staleChecksum");

    // A Helm release Secret as Helm writes it: base64 of gzip of JSON with a manifest.
    let release = serde_json::json!({
        "name": format!("web-{id}"), "version": 3,
        "manifest": "---\n# Source: web/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: in-chart\n"
    });
    let secret = helm_release_secret(n, &format!("web-{id}"), 3, &release);
    create(&secret);
    let helm = stack(&[
        "orphans",
        "-n",
        n,
        "--inventory",
        &format!("helm=web-{id}"),
        "-o",
        "json",
    ])
    .expect_code(1);
    assert_eq!(
        orphan_names(&helm),
        [format!("ConfigMap/{n}/left-behind")].into_iter().collect()
    );
    // Release data is never printed: not as the API returns it (base64 of Helm's base64,
    // `SDRzSUFB...`), not as Helm wrote it (`H4sI...`, gzip), not gunzipped (the manifest).
    for leak in ["SDRzSUFB", "H4sI", "# Source: web/templates/cm.yaml"] {
        assert!(
            !helm.stdout.contains(leak) && !helm.stderr.contains(leak),
            "release data {leak:?} printed:\n{}\n{}",
            helm.stdout,
            helm.stderr
        );
    }

    let kpt = stack(&[
        "orphans",
        "-n",
        n,
        "--inventory",
        &format!("kpt=inv-{id}"),
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(kpt.stdout, "configmap/kpt-dropped\n");
}

fn helm_release_secret(namespace: &str, name: &str, version: u32, release: &serde_json::Value) -> String {
    use base64::Engine;
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(release.to_string().as_bytes()).unwrap();
    let engine = base64::engine::general_purpose::STANDARD;
    let helm_encoded = engine.encode(gz.finish().unwrap());
    format!(
        r#"
apiVersion: v1
kind: Secret
type: helm.sh/release.v1
metadata:
  name: sh.helm.release.v1.{name}.v{version}
  namespace: {namespace}
  labels: {{owner: helm, name: {name}, version: "{version}", status: deployed}}
data: {{release: {}}}
"#,
        engine.encode(helm_encoded)
    )
}

#[test]
fn a_kustomization_directory_is_a_desired_set() {
    let _logs = start();
    let ns = Namespace::new("kust");
    let n = &ns.0;
    let run = unique("k");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: dropped, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));
    let dir = temp_file(
        "kustomization.yaml",
        &format!("namespace: {n}\nresources: [kept.yaml]\n"),
    );
    let dir = dir.parent().unwrap();
    std::fs::write(
        dir.join("kept.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}\n",
    )
    .unwrap();
    let found = stack(&[
        "orphans",
        "-A",
        "-l",
        &format!("stack-test/run={run}"),
        "-k",
        dir.to_str().unwrap(),
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(found.stdout, "configmap/dropped\n");
}
