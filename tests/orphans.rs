//! End-to-end tests of `kubectl stack orphans` against the real test cluster.

mod common;

use std::collections::BTreeSet;

use common::*;

/// Labels that make an object tracked by a Flux Kustomization (with its namespace), plus the
/// test run's own label: `-l stack-test/run=RUN` then selects tracked objects only.
fn flux_tracked(run: &str) -> String {
    format!("stack-test/run: {run}, kustomize.toolkit.fluxcd.io/name: ks-{run}, kustomize.toolkit.fluxcd.io/namespace: flux-system")
}

fn skipped_reasons(run: &Run) -> Vec<(String, String)> {
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
    let label = flux_tracked(&run);
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
    let label = flux_tracked(&run);
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
        // Confirmations are not consent; Helm trims and lowercases its policy.
        ("argocd.argoproj.io/sync-options", "Prune=confirm"),
        ("argocd.argoproj.io/sync-options", "Delete=confirm"),
        ("helm.sh/resource-policy", " Keep"),
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

/// Finding 2: Flux deletes only what was in the previous inventory and is not in the new one.
/// A labelled object Flux never recorded (a Namespace applied in the first stage of a failed
/// reconciliation) is never its orphan; the inventory alone prunes nothing.
#[test]
fn a_flux_inventory_bounds_the_orphans() {
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
apiVersion: v1
kind: Namespace
metadata: {{name: {ks}-first-stage, labels: {labels}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ks}-role, labels: {labels}}}
rules: []
"#
    ));
    let status = format!(
        r#"{{"status":{{"inventory":{{"entries":[{{"id":"{n}_still-listed__ConfigMap","v":"v1"}},{{"id":"{n}_dropped__ConfigMap","v":"v1"}},{{"id":"_{ks}-role_rbac.authorization.k8s.io_ClusterRole","v":"v1"}}]}}}}}}"#
    );
    patch_status("kustomization", &ks, n, &status);

    // The inventory alone: what Flux applied last; nothing in it is an orphan, and the
    // Namespace it never recorded is not Flux's to delete.
    let alone = stack(&[
        "orphans",
        "-A",
        "--inventory",
        &format!("flux={ks}.{n}"),
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(0);
    assert!(orphan_names(&alone).is_empty(), "{}", alone.stdout);
    assert!(
        skipped_reasons(&alone).contains(&(format!("{ks}-first-stage"), "notInInventory".to_string())),
        "{}",
        alone.stdout
    );

    // With the new desired set: the inventory minus the new set, as Flux computes it, whether
    // the inventory is named or found through the tracker.
    let repo = temp_file(
        "repo.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: still-listed, namespace: {n}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {ks}-role}}\n"
        ),
    );
    let repo = repo.to_str().unwrap();
    for selection in [
        ["--inventory", &format!("flux={ks}.{n}")],
        ["--tracker", &format!("flux={ks}.{n}")],
    ] {
        let found = stack(&[&["orphans", "-A", "-f", repo, "-o", "json"][..], &selection[..]].concat()).expect_code(1);
        assert_eq!(
            orphan_names(&found),
            [format!("ConfigMap/{n}/dropped")].into_iter().collect(),
            "{selection:?}"
        );
        assert_eq!(found.json()["orphans"][0]["reason"], "goneFromDesiredSet");
        assert_eq!(
            found.json()["orphans"][0]["inventory"],
            format!("the inventory of Kustomization {n}/{ks}")
        );
    }

    // An empty inventory is refused unless told.
    patch_status("kustomization", &ks, n, r#"{"status":{"inventory":{"entries":[]}}}"#);
    let refused = stack(&["orphans", "-A", "--inventory", &format!("flux={ks}.{n}")]).expect_code(4);
    assert!(refused.stderr.contains("desired set is empty"), "{}", refused.stderr);
    let _ = kubectl(&["delete", "clusterrole", &format!("{ks}-role")]);
    let _ = kubectl(&["delete", "namespace", &format!("{ks}-first-stage"), "--wait=false"]);
}

#[test]
fn stdin_bad_manifests_empty_directories_and_unknown_kinds() {
    let _logs = start();
    let ns = Namespace::new("io");
    let n = &ns.0;
    let run = unique("io");
    let label = format!("stack-test/run={run}");
    let tracked = flux_tracked(&run);
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {n}, labels: {{{tracked}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: {n}, labels: {{{tracked}}}}}\n"
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
    // A kind the cluster does not serve makes the desired set incomplete: refused unless accepted.
    let refused = stack_with_stdin(&["orphans", "-n", n, "-l", &label, "-f", "-", "-o", "name"], &input).expect_code(4);
    assert!(refused.stderr.contains("--allow-unresolved"), "{}", refused.stderr);
    assert!(refused.stdout.is_empty());
    let found = stack_with_stdin(
        &[
            "orphans",
            "-n",
            n,
            "-l",
            &label,
            "-f",
            "-",
            "-o",
            "name",
            "--allow-unresolved",
        ],
        &input,
    )
    .expect_code(1);
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

/// Finding 3: Flux v1 (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go`) deletes only objects
/// absent from git whose gc mark is the sync set's mark for themselves; a checksum that differs
/// means "not updated, skip", never "delete".
#[test]
fn flux_v1_collects_only_objects_absent_from_git_with_their_own_mark() {
    let _logs = start();
    let ns = Namespace::new("fluxv1");
    let n = &ns.0;
    let sync_set = unique("git");
    let mark = |name: &str| flux_v1_gc_mark(&sync_set, &format!("{n}:configmap/{name}"));
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: in-git-not-updated
  namespace: {n}
  labels: {{fluxcd.io/sync-gc-mark: "{}"}}
  annotations: {{fluxcd.io/sync-checksum: "0000000000000000000000000000000000000000"}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: removed-from-git
  namespace: {n}
  labels: {{fluxcd.io/sync-gc-mark: "{}"}}
  annotations: {{fluxcd.io/sync-checksum: "1111111111111111111111111111111111111111"}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: label-copy
  namespace: {n}
  labels: {{fluxcd.io/sync-gc-mark: "{}"}}
"#,
        mark("in-git-not-updated"),
        mark("removed-from-git"),
        mark("removed-from-git"),
    ));
    let repo = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: in-git-not-updated}\n",
    );
    let tracker = format!("flux-v1={sync_set}");
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        repo.to_str().unwrap(),
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(1);
    assert_eq!(
        orphan_names(&found),
        [format!("ConfigMap/{n}/removed-from-git")].into_iter().collect()
    );
    assert_eq!(
        skipped_reasons(&found),
        vec![("label-copy".to_string(), "toolWouldKeep".to_string())],
        "{}",
        found.stdout
    );
    // The tracker value is the sync set: it selects the set's objects (the marks are hashes).
    let listed = stack(&["list", "-n", n, "--tracker", &tracker, "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout.lines().count(), 3, "{}", listed.stdout);
    // A stack checksum is not a desired set.
    let refused = stack(&["orphans", "-n", n, "--tracker", &tracker, "--checksum", "1111"]).expect_code(2);
    assert!(refused.stderr.contains("never \"delete\""), "{}", refused.stderr);
}

/// Finding 7: Helm's current release is its last *deployed* revision; an upgrade deletes what
/// that manifest has and the new one lacks. Never what a pending revision dropped, never what
/// the release never rendered, never a hook.
#[test]
fn helm_compares_with_the_last_deployed_revision() {
    let _logs = start();
    let ns = Namespace::new("helm");
    let n = &ns.0;
    let release = unique("web");
    let annotated = |name: &str, rel: &str, extra: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  annotations: {{meta.helm.sh/release-name: {rel}, meta.helm.sh/release-namespace: {n}{extra}}}\n"
        )
    };
    let mut live = String::new();
    for name in ["in-chart", "dropped-by-v3", "only-in-v3", "never-rendered"] {
        live.push_str(&annotated(name, &release, ""));
    }
    live.push_str(&annotated("pre-upgrade-hook", &release, ", helm.sh/hook: pre-upgrade"));
    // A release with no record at all: its annotations alone decide, and hooks stay.
    let solo = format!("solo-{release}");
    live.push_str(&annotated("solo-gone", &solo, ""));
    live.push_str(&annotated("solo-hook", &solo, ", helm.sh/hook: post-install"));
    apply(&live);
    let manifest = |names: &[&str]| -> String {
        names
            .iter()
            .map(|name| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"))
            .collect()
    };
    let revision = |version: u32, status: &str, names: &[&str]| {
        let body = serde_json::json!({"name": release, "version": version, "manifest": manifest(names)});
        create(&helm_release_secret(n, &release, version, status, &body));
    };
    revision(1, "superseded", &["in-chart"]);
    revision(2, "deployed", &["in-chart", "dropped-by-v3"]);
    revision(3, "pending-upgrade", &["in-chart", "only-in-v3"]);
    let new_render = temp_file("render.yaml", &manifest(&["in-chart", "solo-kept"]));
    let new_render = new_render.to_str().unwrap();
    for selection in [
        ["--tracker", &format!("helm={release}")],
        ["--inventory", &format!("helm={release}")],
    ] {
        let found = stack(
            &[
                &["orphans", "-n", n, "-f", new_render, "-o", "json", "--show-skipped"][..],
                &selection[..],
            ]
            .concat(),
        )
        .expect_code(1);
        assert_eq!(
            orphan_names(&found),
            [format!("ConfigMap/{n}/dropped-by-v3")].into_iter().collect(),
            "{selection:?}"
        );
        assert_eq!(
            found.json()["orphans"][0]["inventory"],
            format!("Helm release {n}/{release} v2")
        );
        let skipped = skipped_reasons(&found);
        for name in ["only-in-v3", "never-rendered", "pre-upgrade-hook"] {
            assert!(
                skipped.contains(&(name.to_string(), "notInInventory".to_string())),
                "{name}: {skipped:?}"
            );
        }
        // Release data is never printed: not as the API returns it (base64 of Helm's base64,
        // `SDRzSUFB...`), not as Helm wrote it (`H4sI...`, gzip), not gunzipped (the manifest).
        for leak in ["SDRzSUFB", "H4sI", "\"manifest\""] {
            assert!(
                !found.stdout.contains(leak) && !found.stderr.contains(leak),
                "release data {leak:?} printed:\n{}\n{}",
                found.stdout,
                found.stderr
            );
        }
    }

    let labels_only = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &format!("helm={solo}"),
        "-f",
        new_render,
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(4);
    // No release to compare with: Helm deletes only what its release records, never by label.
    assert!(labels_only.stderr.contains("no Helm release"), "{}", labels_only.stderr);

    // No deployed revision: Helm itself would not touch it; neither do we.
    let pending = format!("pending-{release}");
    let body = serde_json::json!({"name": pending, "version": 1, "manifest": manifest(&["in-chart"])});
    create(&helm_release_secret(n, &pending, 1, "pending-install", &body));
    stack(&[
        "orphans",
        "-n",
        n,
        "--inventory",
        &format!("helm={pending}"),
        "-f",
        new_render,
    ])
    .expect_code(4);
}

/// cli-utils/kpt: the inventory's objects missing from the new set, and nothing it never held.
#[test]
fn a_kpt_inventory_bounds_the_orphans() {
    let _logs = start();
    let ns = Namespace::new("kpt");
    let n = &ns.0;
    let id = unique("inv");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: kpt-kept, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: {id}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kpt-dropped, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: {id}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kpt-never-recorded, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: {id}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: inventory, namespace: {n}, labels: {{cli-utils.sigs.k8s.io/inventory-id: {id}}}}}
data: {{"{n}_kpt-kept__ConfigMap": "", "{n}_kpt-dropped__ConfigMap": ""}}
"#
    ));
    let repo = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kpt-kept}\n",
    );
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--inventory",
        &format!("kpt={id}"),
        "-f",
        repo.to_str().unwrap(),
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(found.stdout, "configmap/kpt-dropped\n");
    stack(&["orphans", "-n", n, "--inventory", &format!("kpt={id}")]).expect_code(0);
}

fn flux_v1_gc_mark(sync_set: &str, resource_id: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(sync_set.as_bytes());
    hasher.update(resource_id.as_bytes());
    format!(
        "sha256.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hasher.finalize())
    )
}

fn helm_release_secret(namespace: &str, name: &str, version: u32, status: &str, release: &serde_json::Value) -> String {
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
  labels: {{owner: helm, name: {name}, version: "{version}", status: {status}}}
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
    let tracked = flux_tracked(&run);
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {n}, labels: {{{tracked}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: dropped, namespace: {n}, labels: {{{tracked}}}}}\n"
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
