//! End-to-end tests: every tracker's orphans are what its own garbage collector would delete,
//! judged by the record it keeps (an adversarial review's findings F1, F2, F5, F7): an
//! ApplySet by its parent (also when named by id or found by `-l`), kpt by its inventory,
//! Helm by its release (manifests in the release namespace), Flux's targetNamespace renaming
//! a Namespace.

mod common;

use std::collections::BTreeSet;

use common::*;

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
    set_flux_inventory(
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

/// `name -> reason` of every entry of `list` in `-o json` output.
fn reasons(run: &Run, list: &str) -> BTreeSet<(String, String)> {
    run.json()[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {}\n{}", run.stdout, run.stderr))
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                o["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A ConfigMap as a Helm release leaves it: Helm's annotations and the chart's labels (and the
/// test's own label: `stack-test/run` is the release namespace, so that a selection with `-A`
/// never takes in another test's Helm objects, see [`web_tier`]).
fn helm_config_map(namespace: &str, name: &str, release: &str, release_namespace: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{app.kubernetes.io/managed-by: Helm, tier: web, stack-test/run: {namespace}}}
  annotations: {{meta.helm.sh/release-name: {release}, meta.helm.sh/release-namespace: {release_namespace}}}
"#
    )
}

/// The label selection of the chart's `tier: web` objects in release namespace `namespace`
/// (several tests of this binary, run at once, have Helm objects labelled `tier: web`).
fn web_tier(namespace: &str) -> String {
    format!("tier=web,stack-test/run={namespace}")
}

/// `helm template` output: namespace-less ConfigMaps.
fn rendered(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| {
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels: {{app.kubernetes.io/managed-by: Helm}}\n")
        })
        .collect()
}

/// F5: Helm builds a namespace-less manifest into the release namespace (helm/helm
/// `pkg/kube/client.go` `Build`: `DefaultNamespace()`), so `-f rendered.yaml` is compared there
/// whatever `-n`/`-A` say: an unchanged chart has no orphans; what left the chart still is one.
#[test]
fn helm_manifests_take_the_release_namespace() {
    let _logs = start();
    let release_ns = Namespace::new("f5-prod");
    let p = &release_ns.0;
    let previous = rendered(&["web-settings", "web-db", "web-old"]);
    helm_release(p, "web", &previous);
    apply(
        &["web-settings", "web-db", "web-old"]
            .iter()
            .map(|name| helm_config_map(p, name, "web", p))
            .collect::<String>(),
    );
    let chart = temp_file("rendered.yaml", &rendered(&["web-settings", "web-db"]));
    let chart = chart.to_str().unwrap();
    let only_old = set(&[format!("ConfigMap/{p}/web-old")]);
    for selection in [
        vec!["-n", p, "--tracker", "helm=web"],
        vec!["-A", "--tracker", &format!("helm=web.{p}")],
        vec!["-A", "--inventory", &format!("helm={p}/web")],
    ] {
        let found = stack(&[&["orphans", "-f", chart, "-o", "json"][..], &selection[..]].concat()).expect_code(1);
        assert_eq!(names(&found, "orphans"), only_old, "{selection:?}: {}", found.stderr);
    }
    stack(&[
        "prune",
        "-A",
        "--tracker",
        &format!("helm=web.{p}"),
        "-f",
        chart,
        "--yes",
    ])
    .expect_code(0);
    assert!(!exists("configmap", Some(p), "web-old"));
    assert!(exists("configmap", Some(p), "web-settings"));
    assert!(exists("configmap", Some(p), "web-db"));
}

/// F2 (Helm): with `-l` alone, a Helm-marked object is judged by its release, as `--tracker
/// helm=NAME` judges it: a hand-made copy that carries the release's annotations but was never
/// in the release manifest is not Helm's to delete (an upgrade deletes only what the previous
/// manifest had: helm/helm `pkg/action/upgrade.go`).
#[test]
fn a_label_selection_judges_helm_objects_by_their_release() {
    let _logs = start();
    let release_ns = Namespace::new("f2-helm");
    let p = &release_ns.0;
    helm_release(p, "web", &rendered(&["web-settings", "web-old"]));
    apply(
        &["web-settings", "web-old", "handmade"]
            .iter()
            .map(|name| helm_config_map(p, name, "web", p))
            .collect::<String>(),
    );
    let chart = temp_file("rendered.yaml", &rendered(&["web-settings"]));
    let chart = chart.to_str().unwrap();
    let only_old = set(&[format!("ConfigMap/{p}/web-old")]);
    let web = web_tier(p);
    for selection in [
        vec!["-n", p, "-l", &web],
        vec!["-A", "-l", &web],
        vec!["-n", p, "--tracker", "helm"],
        vec!["-n", p, "--tracker", "helm=web"],
    ] {
        let found = stack(
            &[
                &["orphans", "-f", chart, "-o", "json", "--show-skipped"][..],
                &selection[..],
            ]
            .concat(),
        )
        .expect_code(1);
        assert_eq!(names(&found, "orphans"), only_old, "{selection:?}: {}", found.stderr);
        assert!(
            reasons(&found, "skipped").contains(&("handmade".to_string(), "notInInventory".to_string())),
            "{selection:?}: {}",
            found.stdout
        );
    }
    stack(&["prune", "-n", p, "-l", &web, "-f", chart, "--yes"]).expect_code(0);
    assert!(exists("configmap", Some(p), "handmade"), "the copy is not Helm's");
    assert!(!exists("configmap", Some(p), "web-old"));
}

/// F2: a stack whose record exists but cannot be used (a Helm release with no deployed
/// revision: Helm itself would not upgrade or prune it) makes its objects unknown under `-l`,
/// never orphans (`recordUnreadable`), and refuses `--tracker helm=NAME` (exit 4).
#[test]
fn a_label_selection_never_condemns_what_an_unusable_record_marks() {
    let _logs = start();
    let release_ns = Namespace::new("f2-failed");
    let p = &release_ns.0;
    helm_release_in_status(p, "web", &rendered(&["web-settings", "web-old"]), "failed");
    apply(
        &["web-settings", "web-old"]
            .iter()
            .map(|name| helm_config_map(p, name, "web", p))
            .collect::<String>(),
    );
    let chart = temp_file("rendered.yaml", &rendered(&["web-settings"]));
    let chart = chart.to_str().unwrap();
    let web = web_tier(p);
    let unknown = stack(&[
        "orphans",
        "-n",
        p,
        "-l",
        &web,
        "-f",
        chart,
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(0);
    assert!(names(&unknown, "orphans").is_empty(), "{}", unknown.stdout);
    assert!(
        reasons(&unknown, "skipped").contains(&("web-old".to_string(), "recordUnreadable".to_string())),
        "{}",
        unknown.stdout
    );
    let refused = stack(&["orphans", "-n", p, "--tracker", "helm=web", "-f", chart]).expect_code(4);
    assert!(refused.stderr.contains("no deployed revision"), "{}", refused.stderr);
    stack(&["prune", "-n", p, "-l", &web, "-f", chart, "--yes"]).expect_code(0);
    assert!(exists("configmap", Some(p), "web-old"));
}

/// F2 (Flux helm-controller): a HelmRelease's objects are judged by the Helm release it
/// manages, named as helm-controller names it (`[<targetNamespace>-]<name>`, in the target
/// namespace, stored in the HelmRelease's namespace: fluxcd/helm-controller
/// `api/v2/helmrelease_types.go` `GetReleaseName`, `GetReleaseNamespace`, `GetStorageNamespace`),
/// with `--tracker flux-helm=NAME` and with `-l`.
#[test]
fn flux_helm_objects_are_judged_by_the_helm_release() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("f2-hr");
    let target = Namespace::new("f2-hr-target");
    let (f, t) = (&flux.0, &target.0);
    let hr = unique("podinfo");
    let release = format!("{t}-{hr}");
    apply(&format!(
        r#"
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: {hr}, namespace: {f}}}
spec: {{interval: 10m, targetNamespace: {t}, chart: {{spec: {{chart: podinfo, sourceRef: {{kind: HelmRepository, name: repo}}}}}}}}
"#
    ));
    // helm-controller stores the release in the HelmRelease's namespace; its body names the
    // release namespace (the target).
    let body = serde_json::json!({
        "name": release, "namespace": t, "version": 1, "info": {"status": "deployed"},
        "manifest": rendered(&["settings", "old"]),
    });
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {
            "name": format!("sh.helm.release.v1.{release}.v1"), "namespace": f,
            "labels": {"owner": "helm", "name": release, "status": "deployed", "version": "1"},
        },
        "data": {"release": helm_release_data(&body)},
    });
    create(&secret.to_string());
    let objects: String = ["settings", "old", "handmade"]
        .iter()
        .map(|name| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {t}\n  labels: {{helm.toolkit.fluxcd.io/name: {hr}, helm.toolkit.fluxcd.io/namespace: {f}}}\n  annotations: {{meta.helm.sh/release-name: {release}, meta.helm.sh/release-namespace: {t}}}\n"
            )
        })
        .collect();
    apply(&objects);
    // helm-controller's status: the release, stored in the HelmRelease's namespace, installed in
    // the target (its history snapshot's `namespace`); Helm's marks name the target namespace
    // (helm/helm `pkg/action` `setMetadataVisitor(rel.Name, rel.Namespace)`). Review 19, M-F4:
    // the two marks are one stack, not "also tracked by" another.
    let status = format!(
        r#"{{"status":{{"storageNamespace":"{f}","history":[{{"name":"{release}","namespace":"{t}","version":1,"status":"deployed","chartName":"podinfo","chartVersion":"1.0.0","configDigest":"sha256:0","digest":"sha256:0","firstDeployed":"2026-01-01T00:00:00Z","lastDeployed":"2026-01-01T00:00:00Z"}}]}}}}"#
    );
    patch_status("helmrelease", &hr, f, &status);
    let chart = temp_file("rendered.yaml", &rendered(&["settings"]));
    let chart = chart.to_str().unwrap();
    let only_old = set(&[format!("ConfigMap/{t}/old")]);
    for selection in [
        vec!["-A", "--tracker", &format!("flux-helm={hr}.{f}")],
        vec!["-A", "-l", &format!("helm.toolkit.fluxcd.io/name={hr}")],
        vec!["-n", t, "--tracker", &format!("flux-helm={hr}.{f}")],
        vec!["-n", t, "--tracker", &format!("helm={release}.{t}")],
    ] {
        let found = stack(
            &[
                &["orphans", "-f", chart, "-o", "json", "--show-skipped"][..],
                &selection[..],
            ]
            .concat(),
        )
        .expect_code(1);
        assert_eq!(names(&found, "orphans"), only_old, "{selection:?}: {}", found.stderr);
        assert!(
            reasons(&found, "skipped").contains(&("handmade".to_string(), "notInInventory".to_string())),
            "{selection:?}: {}",
            found.stdout
        );
    }
}

/// F2 (kpt): `kpt live apply` manages `a` and `old`; `handmade` is a copy carrying
/// `config.k8s.io/owning-inventory` that the ResourceGroup never recorded. cli-utils prunes only
/// inventory objects (kubernetes-sigs/cli-utils `pkg/apply/prune/prune.go`): kpt's own dry run
/// prunes `old` alone, and so must `-l` alone and `--tracker kpt` without an id.
#[test]
fn a_label_selection_judges_kpt_objects_by_their_inventory() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("f2-kpt");
    let n = &ns.0;
    let run = unique("f2-kpt");
    let dir = std::env::temp_dir().join(unique("f2-pkg"));
    std::fs::create_dir_all(&dir).unwrap();
    let cm = |name: &str| {
        format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {{stack-test/run: {run}}}}}\ndata: {{a: \"1\"}}\n")
    };
    std::fs::write(dir.join("cm.yaml"), cm("a") + &cm("old")).unwrap();
    let dir_text = dir.to_str().unwrap();
    let id = unique("f2-inv");
    assert_eq!(kpt(&["pkg", "init", dir_text]).code, 0);
    let init = kpt(&["live", "init", dir_text, "--namespace", n, "--inventory-id", &id]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let applied = kpt(&[
        "live",
        "apply",
        dir_text,
        "--install-resource-group=false",
        "--reconcile-timeout=0s",
    ]);
    assert_eq!(applied.code, 0, "{}\n{}", applied.stdout, applied.stderr);
    // A hand copy of `a`, marks and all.
    let copy = kubectl(&["get", "configmap", "a", "-n", n, "-o", "json"]).expect_code(0);
    let mut copy: serde_json::Value = serde_json::from_str(&copy.stdout).unwrap();
    let meta = copy["metadata"].as_object_mut().unwrap();
    for field in ["uid", "resourceVersion", "creationTimestamp", "managedFields"] {
        meta.remove(field);
    }
    meta.insert("name".into(), "handmade".into());
    create(&copy.to_string());
    // The new package drops `old`: kpt's own dry run prunes `old` and never `handmade`.
    std::fs::write(dir.join("cm.yaml"), cm("a")).unwrap();
    let dry = kpt(&["live", "apply", dir_text, "--install-resource-group=false", "--dry-run"]);
    assert!(
        dry.stdout.contains("configmap/old prune successful"),
        "{}\n{}",
        dry.stdout,
        dry.stderr
    );
    assert!(!dry.stdout.contains("handmade"), "{}", dry.stdout);
    let manifest = dir.join("cm.yaml");
    let manifest = manifest.to_str().unwrap();
    let only_old = set(&[format!("ConfigMap/{n}/old")]);
    for selection in [
        vec!["-l", &format!("stack-test/run={run}")],
        // (`--tracker kpt` alone selects every kpt stack, other tests' cluster-scoped members
        // too: with several there, it is refused as several stacks' — see refusals.rs.)
        vec!["--tracker", &format!("kpt={id}")],
    ] {
        let found = stack(
            &[
                &["orphans", "-n", n, "-f", manifest, "-o", "json", "--show-skipped"][..],
                &selection[..],
            ]
            .concat(),
        )
        .expect_code(1);
        assert_eq!(names(&found, "orphans"), only_old, "{selection:?}: {}", found.stderr);
        assert!(
            reasons(&found, "skipped").contains(&("handmade".to_string(), "notInInventory".to_string())),
            "{selection:?}: {}",
            found.stdout
        );
    }
    stack(&[
        "prune",
        "-n",
        n,
        "-l",
        &format!("stack-test/run={run}"),
        "-f",
        manifest,
        "--yes",
    ])
    .expect_code(0);
    assert!(exists("configmap", Some(n), "handmade"), "the copy is not kpt's");
    assert!(!exists("configmap", Some(n), "old"));
    assert!(exists("configmap", Some(n), "a"));
}

/// F1: kubectl prunes only the members of the parent's `contains-group-kinds` in its namespace
/// and `additional-namespaces` (kubernetes/kubectl `pkg/cmd/apply/applyset_pruner.go`
/// `FindAllObjectsToPrune`). A ConfigMap in another namespace carrying the member label is not
/// the ApplySet's, whether the set is named by parent, by id (the parent is found by its
/// `applyset.kubernetes.io/id` label) or found by `-l`; kubectl's own server dry run is the oracle.
#[test]
fn an_applyset_named_by_id_or_label_is_bounded_by_its_parent() {
    let _logs = start();
    let home = Namespace::new("f1-a");
    let elsewhere = Namespace::new("f1-b");
    let (a, b) = (&home.0, &elsewhere.0);
    let dir = std::env::temp_dir().join(unique("f1-dir"));
    std::fs::create_dir_all(&dir).unwrap();
    let cm = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {a}}}\ndata: {{a: \"1\"}}\n"
        )
    };
    std::fs::write(dir.join("cm.yaml"), cm("keep") + &cm("old")).unwrap();
    let dir_text = dir.to_str().unwrap();
    kubectl(&["apply", "-n", a, "--prune", "--applyset", "set1", "-f", dir_text]).expect_code(0);
    let id = kubectl(&[
        "get",
        "secret",
        "set1",
        "-n",
        a,
        "-o",
        r"jsonpath={.metadata.labels.applyset\.kubernetes\.io/id}",
    ])
    .expect_code(0)
    .stdout;
    assert!(id.starts_with("applyset-"), "{id}");
    let part_of = format!("applyset.kubernetes.io/part-of={id}");
    kubectl(&["create", "configmap", "precious", "-n", b, "--from-literal=x=1"]).expect_code(0);
    kubectl(&["label", "configmap", "precious", "-n", b, &part_of]).expect_code(0);
    std::fs::write(dir.join("cm.yaml"), cm("keep")).unwrap();
    let oracle = kubectl(&[
        "apply",
        "-n",
        a,
        "--prune",
        "--applyset",
        "set1",
        "-f",
        dir_text,
        "--dry-run=server",
    ])
    .expect_code(0);
    assert!(oracle.stdout.contains("configmap/old pruned"), "{}", oracle.stdout);
    assert!(!oracle.stdout.contains("precious"), "{}", oracle.stdout);
    let only_old = set(&[format!("ConfigMap/{a}/old")]);
    for selection in [
        vec!["-n", a, "--tracker", "applyset=set1"],
        vec!["--tracker", &format!("applyset={id}")],
        vec!["-l", &part_of],
        // (`--tracker applyset` alone selects every ApplySet in the cluster: with other tests'
        // sets there, it is refused as several stacks' — see refusals.rs.)
    ] {
        let found = stack(
            &[
                &["orphans", "-A", "-f", dir_text, "-o", "json", "--show-skipped"][..],
                &selection[..],
            ]
            .concat(),
        )
        .expect_code(1);
        // Other tests' objects (in namespaces of their own) may be listed too: only this test's
        // namespaces count.
        let ours: BTreeSet<String> = names(&found, "orphans")
            .into_iter()
            .filter(|name| {
                name.split('/')
                    .nth(1)
                    .is_some_and(|ns| ns == a.as_str() || ns == b.as_str())
            })
            .collect();
        assert_eq!(ours, only_old, "{selection:?}: {}", found.stderr);
        assert!(
            reasons(&found, "skipped").contains(&("precious".to_string(), "notInInventory".to_string())),
            "{selection:?}: {}",
            found.stdout
        );
    }
    stack(&[
        "prune",
        "-A",
        "--tracker",
        &format!("applyset={id}"),
        "-f",
        dir_text,
        "--yes",
    ])
    .expect_code(0);
    assert!(exists("configmap", Some(b), "precious"), "not the ApplySet's member");
    assert!(!exists("configmap", Some(a), "old"));
    assert!(exists("configmap", Some(a), "keep"));
}

/// Membership review 12: kubectl gives a manifest written without a namespace the namespace of
/// its `-n`, where it finds a namespaced ApplySet parent (F2): read with `-A` (or another `-n`),
/// such manifests are still in the parent's namespace, and none of the live set is an orphan. A
/// document with a top-level `items` that is no `List` (F1: kubectl applies its items, kustomize
/// one object) refuses the desired set, naming the file, and prunes nothing.
#[test]
fn an_applysets_manifests_without_a_namespace_are_in_its_parents() {
    let _logs = start();
    let home = Namespace::new("r12-set");
    let a = &home.0;
    let dir = std::env::temp_dir().join(unique("r12-dir"));
    std::fs::create_dir_all(&dir).unwrap();
    let cm =
        |name: &str| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{a: \"1\"}}\n");
    std::fs::write(dir.join("cm.yaml"), cm("c4") + &cm("old")).unwrap();
    let dir_text = dir.to_str().unwrap();
    kubectl(&["apply", "-n", a, "--prune", "--applyset", "set4", "-f", dir_text]).expect_code(0);
    let id = kubectl(&[
        "get",
        "secret",
        "set4",
        "-n",
        a,
        "-o",
        r"jsonpath={.metadata.labels.applyset\.kubernetes\.io/id}",
    ])
    .expect_code(0)
    .stdout;
    let tracker = format!("applyset={id}");
    std::fs::write(dir.join("cm.yaml"), cm("c4")).unwrap();
    let oracle = kubectl(&[
        "apply",
        "-n",
        a,
        "--prune",
        "--applyset",
        "set4",
        "-f",
        dir_text,
        "--dry-run=server",
    ])
    .expect_code(0);
    assert!(oracle.stdout.contains("configmap/old pruned"), "{}", oracle.stdout);
    assert!(!oracle.stdout.contains("configmap/c4 pruned"), "{}", oracle.stdout);
    let found = stack(&["orphans", "-A", "--tracker", &tracker, "-f", dir_text, "-o", "json"]).expect_code(1);
    assert_eq!(
        names(&found, "orphans"),
        set(&[format!("ConfigMap/{a}/old")]),
        "{}",
        found.stderr
    );
    let bundle = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bundle}\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c4}}\n";
    std::fs::write(dir.join("cm.yaml"), bundle).unwrap();
    let refused = stack(&["prune", "-A", "--tracker", &tracker, "-f", dir_text, "--yes"]).expect_code(2);
    assert!(refused.stderr.contains("cm.yaml (document 1)"), "{}", refused.stderr);
    assert!(exists("configmap", Some(a), "c4") && exists("configmap", Some(a), "old"));
    std::fs::write(dir.join("cm.yaml"), cm("c4")).unwrap();
    let run = stack(&["prune", "-A", "--tracker", &tracker, "-f", dir_text, "--yes"]).expect_code(0);
    assert!(exists("configmap", Some(a), "c4"), "{}", run.stderr);
    assert!(!exists("configmap", Some(a), "old"), "{}", run.stderr);
}

/// A release Secret in Helm's own format (helm/helm `pkg/storage/driver/secrets.go`
/// `newSecretsObject`: labels `owner`, `name`, `status`, `version`; `data.release` the encoded
/// body), whose labels may disagree with its body, as a hand-edited or restored Secret's do.
fn helm_secret(namespace: &str, secret: &str, labels: (&str, &str), body: serde_json::Value) {
    let (status, version) = labels;
    let release = body["name"].as_str().unwrap().to_string();
    create(
        &serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {
                "name": secret, "namespace": namespace,
                "labels": {"owner": "helm", "name": release, "status": status, "version": version},
            },
            "data": {"release": helm_release_data(&body)},
        })
        .to_string(),
    );
}

/// Helm chooses a release's current revision by the Secrets' bodies (helm/helm
/// `pkg/storage/storage.go` `Deployed`, `Last`: sorted by the body's `version`;
/// `pkg/action/upgrade.go` `prepareUpgrade`: the last body when deployed). A v1 Secret restored
/// from a backup with the labels `status=deployed, version=9` is not the current release: v2
/// is, and an upgrade to a chart of `web-settings` alone deletes nothing of v1's `web-old`.
#[test]
fn a_restored_release_secret_whose_labels_lie_is_read_as_helm_reads_it() {
    let _logs = start();
    let ns = Namespace::new("helm-restored");
    let p = &ns.0;
    let body = |version: u32, status: &str, names: &[&str]| {
        serde_json::json!({
            "name": "web", "namespace": p, "version": version,
            "info": {"status": status}, "manifest": rendered(names),
        })
    };
    helm_secret(
        p,
        "sh.helm.release.v1.web.v1",
        ("deployed", "9"),
        body(1, "superseded", &["web-settings", "web-old"]),
    );
    helm_secret(
        p,
        "sh.helm.release.v1.web.v2",
        ("deployed", "2"),
        body(2, "deployed", &["web-settings"]),
    );
    apply(
        &["web-settings", "web-old"]
            .iter()
            .map(|name| helm_config_map(p, name, "web", p))
            .collect::<String>(),
    );
    let chart = temp_file("rendered.yaml", &rendered(&["web-settings"]));
    let chart = chart.to_str().unwrap();
    let found = stack(&[
        "orphans",
        "-n",
        p,
        "--tracker",
        "helm=web",
        "-f",
        chart,
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(0);
    assert!(names(&found, "orphans").is_empty(), "{}", found.stdout);
    assert!(
        reasons(&found, "skipped").contains(&("web-old".to_string(), "notInInventory".to_string())),
        "{}",
        found.stdout
    );
    assert!(
        found.stdout.contains(&format!("Helm release {p}/web v2")),
        "{}",
        found.stdout
    );
    stack(&["prune", "-n", p, "--tracker", "helm=web", "-f", chart, "--yes"]).expect_code(0);
    assert!(
        exists("configmap", Some(p), "web-old"),
        "Helm's current release v2 never had it"
    );
}

/// Membership review 6, F1 (kpt): after a finished `kpt live destroy` of a package whose
/// leftover copy still carries its `owning-inventory`, the inventory object is gone. A real
/// `kpt live apply` then prunes nothing (cli-utils prunes only what the cluster inventory lists,
/// and a new inventory lists nothing); `--tracker kpt=ID` says so and prunes nothing either,
/// never falling back to the labels.
#[test]
fn a_gone_kpt_inventory_prunes_nothing_as_kpt_does() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("f1r6-kpt");
    let n = &ns.0;
    let dir = std::env::temp_dir().join(unique("f1r6-pkg"));
    std::fs::create_dir_all(&dir).unwrap();
    let cm = |name: &str| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}}}\n");
    std::fs::write(dir.join("cm.yaml"), cm("a")).unwrap();
    let id = unique("f1r6-inv");
    kpt_live_apply(&dir, n, &id, false);
    // A leftover that carries the inventory's mark (a hand copy, kept by a finished destroy).
    create(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: leftover, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: {id}}}}}\n"
    ));
    let dir_text = dir.to_str().unwrap();
    let destroyed = kpt(&["live", "destroy", dir_text]);
    assert_eq!(destroyed.code, 0, "{}\n{}", destroyed.stdout, destroyed.stderr);
    assert!(exists("configmap", Some(n), "leftover"));
    // The oracle: kpt itself, applying the package again, prunes nothing.
    std::fs::write(dir.join("cm.yaml"), cm("a")).unwrap();
    let dry = kpt(&["live", "apply", dir_text, "--install-resource-group=false", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}\n{}", dry.stdout, dry.stderr);
    assert!(!dry.stdout.contains("prune successful"), "{}", dry.stdout);
    let manifest = dir.join("cm.yaml");
    let manifest = manifest.to_str().unwrap();
    let tracker = format!("kpt={id}");
    let found = stack(&["orphans", "-n", n, "--tracker", &tracker, "-f", manifest, "-o", "json"]).expect_code(0);
    assert!(names(&found, "orphans").is_empty(), "{}", found.stdout);
    assert!(
        found.stderr.contains(&format!("kpt inventory {id} is gone")),
        "{}",
        found.stderr
    );
    assert!(!found.stderr.contains("falling back to its labels"), "{}", found.stderr);
    stack(&["prune", "-n", n, "--tracker", &tracker, "-f", manifest, "--yes"]).expect_code(0);
    assert!(
        exists("configmap", Some(n), "leftover"),
        "kpt prunes nothing of a gone inventory"
    );
}

/// Membership review 6, F1 (ApplySet): with the parent gone, a real `kubectl apply --prune
/// --applyset` re-creates it and prunes nothing (it prunes only the kinds the live parent lists;
/// its own server dry run is the oracle); `--tracker applyset=PARENT` and `applyset=ID` prune
/// nothing either and say why, never falling back to the `part-of` labels.
#[test]
fn a_gone_applyset_parent_prunes_nothing_as_kubectl_does() {
    let _logs = start();
    let ns = Namespace::new("f1r6-as");
    let n = &ns.0;
    let cm = |name: &str| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}}}\n");
    apply_applyset(n, "set", &(cm("a") + &cm("b")));
    let id = kubectl(&[
        "get",
        "secret",
        "set",
        "-n",
        n,
        "-o",
        r"jsonpath={.metadata.labels.applyset\.kubernetes\.io/id}",
    ])
    .expect_code(0)
    .stdout;
    assert!(id.starts_with("applyset-"), "{id}");
    kubectl(&["delete", "secret", "set", "-n", n]).expect_code(0);
    let dir = std::env::temp_dir().join(unique("f1r6-as"));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("a.yaml");
    std::fs::write(&manifest, cm("a")).unwrap();
    let manifest = manifest.to_str().unwrap();
    // The oracle: kubectl's own server dry run prunes nothing with the parent gone.
    let dry = kubectl(&[
        "apply",
        "-n",
        n,
        "--prune",
        "--applyset=set",
        "-f",
        manifest,
        "--dry-run=server",
    ]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(!dry.stdout.contains("pruned"), "{}", dry.stdout);
    for tracker in ["applyset=set".to_string(), format!("applyset={id}")] {
        let found = stack(&["orphans", "-n", n, "--tracker", &tracker, "-f", manifest, "-o", "json"]).expect_code(0);
        assert!(names(&found, "orphans").is_empty(), "{tracker}: {}", found.stdout);
        assert!(
            found.stderr.contains("prunes nothing of it"),
            "{tracker}: {}",
            found.stderr
        );
        assert!(!found.stderr.contains("falling back to its labels"), "{}", found.stderr);
        stack(&["prune", "-n", n, "--tracker", &tracker, "-f", manifest, "--yes"]).expect_code(0);
        assert!(
            exists("configmap", Some(n), "b"),
            "{tracker}: kubectl prunes nothing without its parent"
        );
    }
}

/// Membership review 24, item 1: an ApplySet parent whose `contains-group-kinds` lists a kind
/// the cluster does not serve. A real kubectl refuses the whole prune ("could not find mapping
/// for kind") and prunes nothing: `orphans`, `prune --inventory` and a teardown of the parent
/// keep every member and say which kind is unserved.
#[test]
fn an_applyset_listing_an_unserved_kind_prunes_nothing_as_kubectl_does() {
    let _logs = start();
    let ns = Namespace::new("r24-as");
    let n = &ns.0;
    let cm = |name: &str| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}}}\n");
    apply_applyset(n, "myset", &(cm("a1") + &cm("a2")));
    kubectl(&[
        "annotate",
        "secret",
        "myset",
        "-n",
        n,
        "--overwrite",
        "applyset.kubernetes.io/contains-group-kinds=ConfigMap,Gadget.nope.io",
    ])
    .expect_code(0);
    let dir = std::env::temp_dir().join(unique("r24-as"));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("a.yaml");
    std::fs::write(&manifest, cm("a1")).unwrap();
    let manifest = manifest.to_str().unwrap();
    // The oracle: kubectl refuses to prune with this parent.
    let dry = kubectl(&[
        "apply",
        "-n",
        n,
        "--prune",
        "--applyset=myset",
        "-f",
        manifest,
        "--dry-run=server",
    ]);
    assert_ne!(dry.code, 0, "{}", dry.stdout);
    assert!(dry.stderr.contains("could not find mapping"), "{}", dry.stderr);
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--inventory",
        "applyset=secrets/myset",
        "-f",
        manifest,
        "-o",
        "json",
    ])
    .expect_code(0);
    assert!(names(&found, "orphans").is_empty(), "{}", found.stdout);
    assert!(found.stderr.contains("Gadget.nope.io"), "{}", found.stderr);
    stack(&[
        "prune",
        "-n",
        n,
        "--inventory",
        "applyset=secrets/myset",
        "-f",
        manifest,
        "--yes",
    ])
    .expect_code(0);
    assert!(
        exists("configmap", Some(n), "a2"),
        "kubectl prunes nothing with this parent"
    );
    let plan = stack(&["prune", "-n", n, "secret/myset", "--dry-run=client", "-o", "json"]);
    assert!(
        plan.stdout.contains("Gadget.nope.io"),
        "{}\n{}",
        plan.stdout,
        plan.stderr
    );
    stack(&["prune", "-n", n, "secret/myset", "--yes"]);
    for name in ["a1", "a2"] {
        assert!(
            exists("configmap", Some(n), name),
            "{name}: the teardown keeps every member"
        );
    }
}

/// Membership review 24, F1 and F2: a tool that refuses the new desired set prunes nothing.
/// kpt: a package object that depends on an object outside the package ("invalid object: …
/// external dependency", the real `kpt live apply` here is the oracle); Flux: two files of a
/// path without a kustomization define one object (kustomize-controller's generated
/// kustomization fails: "already registered id"). Both were compared, and `old` pruned.
#[test]
fn a_desired_set_its_tool_refuses_prunes_nothing() {
    let _logs = start();
    ensure_resource_group();
    ensure_flux_crds();
    let ns = Namespace::new("r24-refused");
    let n = &ns.0;
    let cm = |name: &str, annotations: &str| {
        format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  annotations: {{{annotations}}}\ndata: {{a: \"1\"}}\n")
    };
    // kpt
    let dir = std::env::temp_dir().join(unique("r24-pkg"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cm.yaml"), cm("a", "") + &cm("old", "")).unwrap();
    let id = unique("r24-inv");
    kpt_live_apply(&dir, n, &id, false);
    apply(&cm("ext", ""));
    std::fs::write(
        dir.join("cm.yaml"),
        cm(
            "a",
            &format!("config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/ext"),
        ),
    )
    .unwrap();
    let dir_text = dir.to_str().unwrap();
    let oracle = kpt(&["live", "apply", dir_text, "--install-resource-group=false", "--dry-run"]);
    assert!(
        format!("{}{}", oracle.stdout, oracle.stderr).contains("external dependency"),
        "kpt itself: {}\n{}",
        oracle.stdout,
        oracle.stderr
    );
    let manifest = dir.join("cm.yaml");
    let manifest = manifest.to_str().unwrap();
    let inventory = format!("kpt={id}");
    for command in [&["orphans"][..], &["prune", "--yes"][..]] {
        let run = stack(&[command, &["-n", n, "--inventory", &inventory, "-f", manifest]].concat());
        assert_eq!(run.code, 4, "kpt {command:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("external dependency"), "{}", run.stderr);
    }
    assert!(exists("configmap", Some(n), "old"));
    // Review 25, F1: a dependency on an object of the inventory that is gone from the cluster is
    // external too (kpt drops such an entry): refused, as the real kpt refuses it.
    std::fs::write(dir.join("cm.yaml"), cm("a", "") + &cm("gone", "")).unwrap();
    let oracle = kpt(&[
        "live",
        "apply",
        dir_text,
        "--install-resource-group=false",
        "--reconcile-timeout=0s",
    ]);
    assert_eq!(oracle.code, 0, "{}\n{}", oracle.stdout, oracle.stderr);
    kubectl_ok(&["delete", "configmap", "gone", "-n", n]);
    std::fs::write(
        dir.join("cm.yaml"),
        cm(
            "a",
            &format!("config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/gone"),
        ),
    )
    .unwrap();
    let oracle = kpt(&["live", "apply", dir_text, "--install-resource-group=false", "--dry-run"]);
    assert!(
        format!("{}{}", oracle.stdout, oracle.stderr).contains("external dependency"),
        "kpt itself: {}\n{}",
        oracle.stdout,
        oracle.stderr
    );
    let run = stack(&["orphans", "-n", n, "--inventory", &inventory, "-f", manifest]);
    assert_eq!(run.code, 4, "gone: {}\n{}", run.stdout, run.stderr);
    let _ = std::fs::remove_dir_all(&dir);

    // Flux
    let labels = flux_labels("twice", n);
    apply(&format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: twice, namespace: {n}}}\nspec: {{prune: true}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: fa, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: fold, namespace: {n}, labels: {labels}}}\n"
    ));
    set_flux_inventory(
        "twice",
        n,
        &[format!("{n}_fa__ConfigMap"), format!("{n}_fold__ConfigMap")],
    );
    let repo = std::env::temp_dir().join(unique("r24-repo"));
    std::fs::create_dir_all(&repo).unwrap();
    for file in ["one.yaml", "two.yaml"] {
        std::fs::write(repo.join(file), cm("fa", "")).unwrap();
    }
    let repo_text = repo.to_str().unwrap();
    let tracker = format!("flux=twice.{n}");
    for command in [&["orphans"][..], &["prune", "--yes"][..]] {
        let run = stack(&[command, &["-n", n, "--tracker", &tracker, "-f", repo_text]].concat());
        assert_eq!(run.code, 4, "flux {command:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("defined twice"), "{}", run.stderr);
    }
    assert!(exists("configmap", Some(n), "fold"));
    let _ = std::fs::remove_dir_all(&repo);
}

/// Membership review 30, F1 (wrong deletion): Argo CD never manages, so never prunes, the kinds
/// its core exclusions leave out (Leases, Events) and those its `argocd-cm`'s
/// `resource.exclusions` name (argo-cd `util/settings/resources_filter.go`). A tracked Secret of
/// an excluded kind and a tracked Lease were called orphans and deleted. Now they are kept
/// (`toolWouldKeep`), by name and under `-l`; the ConfigMap dropped from the set (the control) is
/// still an orphan and is pruned.
#[test]
fn argo_cd_never_prunes_the_kinds_it_never_manages() {
    let _logs = start();
    ensure_argo_crd();
    let live = Namespace::new("argo-excl");
    let d = &live.0;
    let plane = Namespace::new("argo-excl-cp");
    let p = &plane.0;
    let app = unique("excl");
    let case = unique("argo-excl");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: argocd-cm, namespace: {p}}}\ndata:\n  resource.exclusions: |\n    - apiGroups: ['']\n      kinds: [Secret]\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {app}, namespace: {p}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\n  source: {{repoURL: https://git.example.com/app, path: .}}\nstatus: {{sourceType: Directory}}\n"
    ));
    let tracked = |group: &str, kind: &str, name: &str| {
        format!("  name: {name}\n  namespace: {d}\n  labels: {{case: {case}}}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:{group}/{kind}:{d}/{name}\"}}\n")
    };
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n{}---\napiVersion: v1\nkind: Secret\nmetadata:\n{}---\napiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n{}",
        tracked("", "ConfigMap", "keep"),
        tracked("", "ConfigMap", "old"),
        tracked("", "Secret", "excluded"),
        tracked("coordination.k8s.io", "Lease", "leader"),
    ));
    let repo = std::env::temp_dir().join(unique("argo-excl-repo"));
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(
        repo.join("keep.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\n",
    )
    .unwrap();
    let repo_text = repo.to_str().unwrap();
    let tracker = format!("argocd={app}");
    let selector = format!("case={case}");
    let named: &[&str] = &["-n", d, "--tracker", &tracker, "-f", repo_text];
    let labelled: &[&str] = &["-n", d, "-l", &selector, "-f", repo_text];
    for how in [named, labelled] {
        let found = stack(&[&["orphans", "-o", "json"][..], how].concat());
        assert_eq!(found.code, 1, "{how:?}: {}\n{}", found.stdout, found.stderr);
        assert_eq!(
            names(&found, "orphans"),
            set(&[format!("ConfigMap/{d}/old")]),
            "{how:?}"
        );
    }
    let pruned = stack(&[&["prune", "--yes"][..], named].concat());
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
    assert!(!exists("configmap", Some(d), "old"));
    assert!(exists("secret", Some(d), "excluded"));
    assert!(exists("lease", Some(d), "leader"));
}

/// Membership review 26, F1 (wrong deletions). Which objects an Argo CD Application tracks is
/// decided by its control plane's `argocd-cm` (argo-cd `util/argo/resource_tracking.go`
/// `GetAppName` and `getAppInstanceValue`; keys from `util/settings/settings.go`): with
/// `installationID` set, only the objects annotated with that very id (an object synced before
/// the id was set is no longer the Application's); with `application.resourceTrackingMethod:
/// label`, the instance label alone; and two control planes that both hold an Application of
/// the name write the same name-only tracking id (the setup Argo CD's `installationID` exists
/// for). kubectl-stack read none of this and deleted what no Argo CD would prune. Each is refused
/// now (exit 4 by name; under `-l` its objects are not judged), nothing deleted; a control plane
/// that sets none of these (the control) compares as before.
#[test]
fn argo_cd_tracks_objects_as_its_control_planes_settings_say() {
    let _logs = start();
    ensure_argo_crd();
    let live = Namespace::new("argo-cm");
    let d = &live.0;
    // (case, the argocd-cm data of the Application's control plane, a second control plane
    // holding an Application of the same name, what the refusal says: none for the control).
    let cases: [(&str, &str, bool, Option<&str>); 4] = [
        (
            "installation",
            "{installationID: inst1}",
            false,
            Some("installationID inst1"),
        ),
        (
            "label",
            "{application.resourceTrackingMethod: label}",
            false,
            Some("tracks by the instance label alone"),
        ),
        ("twice", "{}", true, Some("2 Argo CD control planes")),
        (
            "control",
            "{application.resourceTrackingMethod: annotation}",
            false,
            None,
        ),
    ];
    let mut planes = Vec::new();
    for (case, data, twice, refused) in cases {
        let app = unique(case);
        let plane = Namespace::new(&format!("argo-cm-{case}"));
        let mut homes = vec![(plane.0.clone(), data)];
        planes.push(plane);
        if twice {
            let other = Namespace::new(&format!("argo-cm-{case}-b"));
            homes.push((other.0.clone(), "{installationID: inst-b}"));
            planes.push(other);
        }
        for (home, data) in &homes {
            apply(&format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: argocd-cm, namespace: {home}}}\ndata: {data}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {app}, namespace: {home}}}\nspec:\n  destination: {{server: https://kubernetes.default.svc, namespace: {d}}}\n  source: {{repoURL: https://git.example.com/app, path: .}}\nstatus: {{sourceType: Directory}}\n"
            ));
        }
        let object = |name: &str| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {d}\n  labels: {{case: {case}}}\n  annotations: {{argocd.argoproj.io/tracking-id: \"{app}:/ConfigMap:{d}/{name}\"}}\n"
            )
        };
        apply(&format!(
            "{}{}",
            object(&format!("{case}-keep")),
            object(&format!("{case}-old"))
        ));
        let repo = std::env::temp_dir().join(unique("argo-cm-repo"));
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(
            repo.join("keep.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {case}-keep}}\n"),
        )
        .unwrap();
        let repo_text = repo.to_str().unwrap();
        let tracker = format!("argocd={app}");
        let selector = format!("case={case}");
        let named: &[&str] = &["-n", d, "--tracker", &tracker, "-f", repo_text];
        let labelled: &[&str] = &["-n", d, "-l", &selector, "-f", repo_text];
        match refused {
            Some(said) => {
                // Named, the stack is refused; under `-l` its objects are left unjudged (each
                // stack there is judged by its own record), with the same words.
                for command in [&["orphans"][..], &["prune", "--yes"][..]] {
                    for (how, code) in [(named, 4), (labelled, 0)] {
                        let run = stack(&[command, how].concat());
                        assert_eq!(
                            run.code, code,
                            "{case} {command:?} {how:?}: {}\n{}",
                            run.stdout, run.stderr
                        );
                        assert!(run.stderr.contains(said), "{case} {command:?} {how:?}: {}", run.stderr);
                        assert!(
                            !run.stdout.contains(&format!("{case}-old")),
                            "{case} {command:?} {how:?}: {}",
                            run.stdout
                        );
                    }
                }
                assert!(
                    exists("configmap", Some(d), &format!("{case}-old")),
                    "{case}: old was deleted"
                );
            }
            None => {
                for how in [named, labelled] {
                    let found = stack(&[&["orphans", "-o", "json"][..], how].concat());
                    assert_eq!(found.code, 1, "{case} {how:?}: {}\n{}", found.stdout, found.stderr);
                    assert_eq!(
                        names(&found, "orphans"),
                        set(&[format!("ConfigMap/{d}/{case}-old")]),
                        "{case}"
                    );
                }
                stack(&[&["prune", "--yes"][..], named].concat()).expect_code(0);
                assert!(
                    !exists("configmap", Some(d), &format!("{case}-old")),
                    "{case}: old is left"
                );
            }
        }
        assert!(
            exists("configmap", Some(d), &format!("{case}-keep")),
            "{case}: keep was deleted"
        );
        let _ = std::fs::remove_dir_all(&repo);
    }
}
