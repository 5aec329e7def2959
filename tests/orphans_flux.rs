//! End-to-end tests: orphans of a Flux Kustomization exactly as kustomize-controller decides
//! them (issue 16 F4 and F5): the manifests take the Kustomization's `spec.targetNamespace`,
//! and objects found by `-l` alone are judged by their Kustomization's inventory.

mod common;

use std::collections::BTreeSet;

use common::*;

/// A Kustomization `ks` in `n` (`spec.prune` as given) whose inventory holds ConfigMaps `kept`
/// and `dropped`; every name of `labelled` is a ConfigMap carrying `marks`. The repository
/// (returned) holds only `kept`.
fn seed_kept_and_dropped(n: &str, ks: &str, prune: bool, marks: &str, labelled: &[&str]) -> std::path::PathBuf {
    let mut yaml = format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {ks}, namespace: {n}}}\nspec: {{interval: 10m, prune: {prune}, path: ./apps, sourceRef: {{kind: GitRepository, name: repo}}}}\n"
    );
    for name in labelled {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {marks}}}\n"
        ));
    }
    apply(&yaml);
    set_flux_inventory(
        ks,
        n,
        &[format!("{n}_kept__ConfigMap"), format!("{n}_dropped__ConfigMap")],
    );
    temp_file(
        "apps.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {n}}}\n"),
    )
}

fn names(run: &Run, list: &str) -> BTreeSet<String> {
    run.json()[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {}", run.stdout))
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

fn reasons(run: &Run, list: &str) -> BTreeSet<(String, String)> {
    run.json()[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {}", run.stdout))
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                o["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The Flux labels of Kustomization `ks` in `flux_ns`, plus this test's own label.
fn labels(ks: &str, flux_ns: &str, run: &str) -> String {
    format!("{{kustomize.toolkit.fluxcd.io/name: {ks}, kustomize.toolkit.fluxcd.io/namespace: {flux_ns}, stack-test/run: {run}}}")
}

/// F4: kustomize-controller writes `spec.targetNamespace` as the `namespace:` of the
/// kustomization it builds (fluxcd/pkg `kustomize/kustomize_generator.go`), and kustomize sets
/// it on every namespaced object, over the namespace a manifest wrote. `-n other` must not move
/// the desired objects out of the target namespace, whichever way the stack is named; what is
/// really gone from git is still an orphan, and `prune` deletes that one alone.
#[test]
fn manifests_take_the_kustomizations_target_namespace() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("f4-flux");
    let target = Namespace::new("f4-target");
    let other = Namespace::new("f4-other");
    let (f, t, o) = (&flux.0, &target.0, &other.0);
    let run = unique("f4");
    let ks = unique("apps");
    let marks = labels(&ks, f, &run);
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: {ks}, namespace: {f}}}
spec: {{interval: 10m, prune: true, path: ./apps, targetNamespace: {t}, sourceRef: {{kind: GitRepository, name: repo}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: plain, namespace: {t}, labels: {marks}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: written, namespace: {t}, labels: {marks}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: gone, namespace: {t}, labels: {marks}}}
"#
    ));
    set_flux_inventory(
        &ks,
        f,
        &[
            format!("{t}_plain__ConfigMap"),
            format!("{t}_written__ConfigMap"),
            format!("{t}_gone__ConfigMap"),
        ],
    );
    // The repository: `plain` without a namespace, `written` with another one (Flux overrides
    // it), `gone` removed.
    let repo = temp_file(
        "apps.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: written, namespace: {o}}}\n"
        ),
    );
    let repo = repo.to_str().unwrap();
    let only_gone: BTreeSet<String> = [format!("ConfigMap/{t}/gone")].into_iter().collect();
    for selection in [
        ["--tracker", &format!("flux={ks}.{f}")],
        ["--inventory", &format!("flux={ks}.{f}")],
        ["-l", &format!("stack-test/run={run}")],
    ] {
        let found = stack(
            &[
                &["orphans", "-A", "-n", o, "-f", repo, "-o", "json"][..],
                &selection[..],
            ]
            .concat(),
        );
        let found = found.expect_code(1);
        assert_eq!(names(&found, "orphans"), only_gone, "{selection:?}: {}", found.stderr);
    }

    // prune agrees: only `gone` is deleted, nothing desired in the target namespace is touched.
    stack(&[
        "prune",
        "-A",
        "-n",
        o,
        "-f",
        repo,
        "--tracker",
        &format!("flux={ks}.{f}"),
        "--yes",
    ])
    .expect_code(0);
    assert!(!exists("configmap", Some(t), "gone"));
    assert!(exists("configmap", Some(t), "plain"));
    assert!(exists("configmap", Some(t), "written"));
}

/// F5: with `-l` alone, an object a Flux Kustomization marks is judged as `--tracker
/// flux=NAME.NS` judges it: what its inventory never held is not Flux's to delete. A
/// Kustomization that cannot be read makes its objects unknown (never orphans) under `-l`,
/// and refuses (exit 4) a `--tracker` that names it.
#[test]
fn a_label_selection_judges_flux_objects_by_their_kustomizations_inventory() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("f5");
    let n = &ns.0;
    let run = unique("f5");
    let ks = unique("apps");
    let marks = labels(&ks, n, &run);
    let repo = seed_kept_and_dropped(n, &ks, true, &marks, &["kept", "dropped", "never-recorded"]);
    let repo = repo.to_str().unwrap();
    let selector = format!("stack-test/run={run}");
    let only_dropped: BTreeSet<String> = [format!("ConfigMap/{n}/dropped")].into_iter().collect();

    let by_labels = stack(&[
        "orphans",
        "-n",
        n,
        "-l",
        &selector,
        "-f",
        repo,
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(1);
    assert_eq!(names(&by_labels, "orphans"), only_dropped, "{}", by_labels.stderr);
    assert_eq!(by_labels.json()["orphans"][0]["reason"], "goneFromDesiredSet");
    assert!(
        reasons(&by_labels, "skipped").contains(&("never-recorded".to_string(), "notInInventory".to_string())),
        "{}",
        by_labels.stdout
    );
    let by_tracker = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &format!("flux={ks}"),
        "-f",
        repo,
        "-o",
        "json",
    ])
    .expect_code(1);
    assert_eq!(
        names(&by_tracker, "orphans"),
        only_dropped,
        "the same verdict as --tracker"
    );
    // A preset without a name names no stack: each object is judged by its own Kustomization.
    let by_preset = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        "flux",
        "-l",
        &selector,
        "-f",
        repo,
        "-o",
        "json",
    ])
    .expect_code(1);
    assert_eq!(names(&by_preset, "orphans"), only_dropped, "{}", by_preset.stderr);

    // A user who may list ConfigMaps here but not read the Kustomization: a user of this test
    // alone, unlike the shared `limited` one other test binaries grant rights to.
    let reader = unique("configmap-reader");
    grant_user(
        &reader,
        n,
        "configmaps",
        r#"[{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]"#,
    );
    let as_reader = |args: &[&str]| stack(&[args, &["--as", &reader][..]].concat());
    let unknown = as_reader(&[
        "orphans",
        "-n",
        n,
        "-l",
        &selector,
        "-f",
        repo,
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(0);
    assert!(names(&unknown, "orphans").is_empty(), "{}", unknown.stdout);
    let expected: BTreeSet<(String, String)> = ["dropped", "never-recorded"]
        .into_iter()
        .map(|name| (name.to_string(), "recordUnreadable".to_string()))
        .collect();
    assert_eq!(reasons(&unknown, "skipped"), expected, "{}", unknown.stderr);
    let refused = as_reader(&["orphans", "-n", n, "--tracker", &format!("flux={ks}"), "-f", repo]).expect_code(4);
    assert!(refused.stderr.contains("cannot be read"), "{}", refused.stderr);

    // prune with `-l` alone deletes what Flux would, and nothing it never recorded.
    stack(&["prune", "-n", n, "-l", &selector, "-f", repo, "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "dropped"));
    assert!(exists("configmap", Some(n), "never-recorded"));
    assert!(exists("configmap", Some(n), "kept"));
}

/// F4, with kustomize as the oracle: kustomize-controller builds the Kustomization's path with
/// `namespace: <targetNamespace>` in the kustomization it generates (fluxcd/pkg
/// `kustomize/kustomize_generator.go`). `kubectl kustomize` of the same files with that
/// kustomization renders what Flux applies; applied and recorded as Flux records it, the raw
/// files given to `-f` with any `-n` make no orphan at all.
#[test]
fn what_kustomize_renders_with_the_target_namespace_is_exactly_the_desired_set() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("f4o-flux");
    let target = Namespace::new("f4o-target");
    let other = Namespace::new("f4o-other");
    let (f, t, o) = (&flux.0, &target.0, &other.0);
    let ks = unique("apps");
    let role = unique("reader");
    let objects = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: written, namespace: {o}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {role}}}\nrules: []\n"
    );
    let raw = temp_file("objects.yaml", &objects);
    let oracle = temp_file("objects.yaml", &objects);
    std::fs::write(
        oracle.parent().unwrap().join("kustomization.yaml"),
        format!(
            "namespace: {t}\nresources: [objects.yaml]\nlabels:\n- pairs: {{kustomize.toolkit.fluxcd.io/name: {ks}, kustomize.toolkit.fluxcd.io/namespace: {f}}}\n"
        ),
    )
    .unwrap();
    let rendered = kubectl(&["kustomize", oracle.parent().unwrap().to_str().unwrap()]).expect_code(0);
    let listed = kubectl_with_stdin(
        &["create", "--dry-run=client", "-o", "json", "-f", "-"],
        Some(&rendered.stdout),
    )
    .expect_code(0);
    // One JSON document per object.
    let items: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&listed.stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(items.len(), 3, "{}", listed.stdout);
    let inventory: Vec<String> = items
        .iter()
        .map(|item| {
            let group = item["apiVersion"]
                .as_str()
                .unwrap()
                .rsplit_once('/')
                .map_or("", |(g, _)| g);
            format!(
                "{}_{}_{}_{}",
                item["metadata"]["namespace"].as_str().unwrap_or(""),
                item["metadata"]["name"].as_str().unwrap(),
                group,
                item["kind"].as_str().unwrap()
            )
        })
        .collect();
    assert!(inventory.contains(&format!("{t}_written__ConfigMap")), "{inventory:?}");
    apply(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {ks}, namespace: {f}}}\nspec: {{interval: 10m, prune: true, path: ./apps, targetNamespace: {t}, sourceRef: {{kind: GitRepository, name: repo}}}}\n"
    ));
    apply(&rendered.stdout);
    set_flux_inventory(&ks, f, &inventory);

    let found = stack(&[
        "orphans",
        "-A",
        "-n",
        o,
        "-f",
        raw.to_str().unwrap(),
        "--tracker",
        &format!("flux={ks}.{f}"),
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(0);
    assert!(names(&found, "orphans").is_empty(), "{}", found.stdout);
    let _ = kubectl(&["delete", "clusterrole", &role]);
}

/// A Kustomization with `spec.prune: false`: Flux deletes nothing it applied
/// (fluxcd/kustomize-controller `kustomization_controller.go` `prune`: `if !obj.Spec.Prune`),
/// so nothing of it is an orphan: `--tracker` refuses (exit 4), `-l` reports none, and `prune`
/// deletes nothing.
#[test]
fn a_kustomization_that_does_not_prune_has_no_orphans() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("noprune");
    let n = &ns.0;
    let run = unique("noprune");
    let ks = unique("apps");
    let marks = labels(&ks, n, &run);
    let repo = seed_kept_and_dropped(n, &ks, false, &marks, &["kept", "dropped"]);
    let repo = repo.to_str().unwrap();
    let tracker = format!("flux={ks}.{n}");
    let named = stack(&["orphans", "-n", n, "--tracker", &tracker, "-f", repo]).expect_code(4);
    assert!(named.stderr.contains("spec.prune: false"), "{}", named.stderr);
    let selector = format!("stack-test/run={run}");
    let by_label = stack(&["orphans", "-n", n, "-l", &selector, "-f", repo, "-o", "json"]);
    assert!(names(&by_label, "orphans").is_empty(), "{}", by_label.stdout);
    stack(&["prune", "-n", n, "-l", &selector, "-f", repo, "--yes"]);
    assert!(exists("configmap", Some(n), "dropped"), "Flux would never delete it");
}

/// Issue 27 item 6: `--tracker flux=usage` where no Kustomization `usage` lives (the wrong
/// namespace) is not "no orphans among 0 tracked objects": it is not found, exit 3 as with
/// `--inventory`, and no hint to "name the stack" (it was named). Objects that still carry the
/// mark of a Kustomization that is gone are judged by their labels, and the warning says why.
#[test]
fn a_named_kustomization_that_does_not_exist_is_not_found() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("nf-flux");
    let other = Namespace::new("nf-other");
    let (f, o) = (&flux.0, &other.0);
    let run = unique("nf");
    let repo = seed_kept_and_dropped(f, "usage", true, &labels("usage", f, &run), &["kept", "dropped"]);
    let repo = repo.to_str().unwrap();

    // In the wrong namespace: not found, as `--inventory` says it.
    let wrong = stack(&["orphans", "-n", o, "--tracker", "flux=usage", "-f", repo]).expect_code(3);
    assert!(
        wrong
            .stderr
            .contains(&format!("error: Kustomization {o}/usage not found")),
        "{}",
        wrong.stderr
    );
    assert!(!wrong.stderr.contains("name the stack"), "{}", wrong.stderr);
    assert!(!wrong.stdout.contains("No orphans"), "{}", wrong.stdout);
    let inventory = stack(&["orphans", "-n", o, "--inventory", "flux=usage"]).expect_code(3);
    assert!(
        inventory.stderr.contains(&format!("Kustomization {o}/usage not found")),
        "{}",
        inventory.stderr
    );
    let prune = stack(&["prune", "-n", o, "--tracker", "flux=usage", "-f", repo, "--yes"]).expect_code(3);
    assert!(
        prune.stderr.contains(&format!("Kustomization {o}/usage not found")),
        "{}",
        prune.stderr
    );

    // Named right: found.
    stack(&["orphans", "-n", f, "--tracker", "flux=usage", "-f", repo]).expect_code(1);

    // Gone, its objects left: judged by their labels, and told why.
    assert_eq!(kubectl(&["delete", "kustomization", "usage", "-n", f]).code, 0);
    let gone = stack(&["orphans", "-n", f, "--tracker", "flux=usage", "-f", repo]);
    assert!(
        gone.stderr.contains(&format!(
            "Kustomization {f}/usage not found: the 2 object(s) that carry its mark in scope are judged by their labels"
        )),
        "{}",
        gone.stderr
    );
    assert!(!gone.stderr.contains("name the stack"), "{}", gone.stderr);
}
