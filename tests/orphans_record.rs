//! End-to-end tests: every tracker's orphans are what its own garbage collector would delete,
//! judged by the record it keeps (an adversarial review's findings F1, F2, F5, F7): an
//! ApplySet by its parent (also when named by id or found by `-l`), kpt by its inventory,
//! Helm by its release (manifests in the release namespace), Flux's targetNamespace renaming
//! a Namespace.

mod common;

use std::collections::BTreeSet;

use common::*;

/// Sets a Kustomization's status (the Flux inventory lives there), as kustomize-controller does.
fn set_inventory(name: &str, namespace: &str, ids: &[String]) {
    let entries: Vec<String> = ids.iter().map(|id| format!(r#"{{"id":"{id}","v":"v1"}}"#)).collect();
    let status = format!(r#"{{"status":{{"inventory":{{"entries":[{}]}}}}}}"#, entries.join(","));
    let patched = kubectl(&[
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
        &status,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
}

/// `Kind/namespace/name` of every entry of `list` in `-o json` output.
fn names(run: &Run, list: &str) -> BTreeSet<String> {
    run.json()[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {}\n{}", run.stdout, run.stderr))
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

fn set(items: &[String]) -> BTreeSet<String> {
    items.iter().cloned().collect()
}

/// F7: Flux builds with `namespace: <targetNamespace>`, and kustomize's namespace transformer
/// renames every `kind: Namespace` to it (kubernetes-sigs/kustomize
/// `api/konfig/builtinpluginconsts/namespace.go`, fieldSpec `metadata/name` of kind Namespace).
/// The repository's Namespace `tenant-ns` is the Namespace Flux applied and recorded under
/// the target's name: it is desired, never an orphan; a recorded ClusterRole gone from the
/// repository still is one.
#[test]
fn a_target_namespace_renames_the_repositorys_namespace() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("f7-flux");
    let team = Namespace::new("f7-team");
    let (f, t) = (&flux.0, &team.0);
    let ks = unique("tenant");
    let reader = unique("f7-reader");
    let gone = unique("f7-gone");
    let marks = flux_labels(&ks, f);
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: {ks}, namespace: {f}}}
spec: {{interval: 10m, prune: true, path: ./repo, targetNamespace: {t}, sourceRef: {{kind: GitRepository, name: repo}}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {reader}, labels: {marks}}}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {gone}, labels: {marks}}}
rules: []
"#
    ));
    let labelled = kubectl(&[
        "label",
        "namespace",
        t,
        &format!("kustomize.toolkit.fluxcd.io/name={ks}"),
        &format!("kustomize.toolkit.fluxcd.io/namespace={f}"),
    ]);
    assert_eq!(labelled.code, 0, "{}", labelled.stderr);
    set_inventory(
        &ks,
        f,
        &[
            format!("_{t}__Namespace"),
            format!("_{reader}_rbac.authorization.k8s.io_ClusterRole"),
            format!("_{gone}_rbac.authorization.k8s.io_ClusterRole"),
        ],
    );
    let repo = temp_file(
        "ns.yaml",
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant-ns}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {reader}}}\nrules: []\n"
        ),
    );
    let repo = repo.to_str().unwrap();
    let only_gone = set(&[format!("ClusterRole//{gone}")]);
    for selection in [
        ["--tracker", &format!("flux={ks}.{f}")],
        ["-l", &format!("kustomize.toolkit.fluxcd.io/name={ks}")],
    ] {
        let found = stack(&[&["orphans", "-A", "-f", repo, "-o", "json"][..], &selection[..]].concat());
        let found = found.expect_code(1);
        assert_eq!(names(&found, "orphans"), only_gone, "{selection:?}: {}", found.stderr);
    }
    stack(&[
        "prune",
        "-A",
        "--tracker",
        &format!("flux={ks}.{f}"),
        "-f",
        repo,
        "--yes",
    ])
    .expect_code(0);
    assert!(!exists("clusterrole", None, &gone), "the real orphan is pruned");
    assert!(exists("clusterrole", None, &reader));
    let namespace = kubectl(&["get", "namespace", t, "-o", "jsonpath={.status.phase}"]);
    assert_eq!(
        namespace.stdout, "Active",
        "the renamed Namespace is desired: {}",
        namespace.stderr
    );
    let _ = kubectl(&["delete", "clusterrole", &reader, "--ignore-not-found"]);
}
