//! Real producers, end to end: what `kpt live apply` and `KUBECTL_APPLYSET=true kubectl apply
//! --prune --applyset` write is read by `list`, `orphans` and `graph`, and torn down in
//! depends-on order by naming the real inventory object or ApplySet parent. The producers'
//! own answers are the oracles: kubectl's `--dry-run=server` prune list for `orphans`.

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// A package of three ConfigMaps: `app` depends on `db` (kpt `depends-on`), `old` is removed later.
fn package(ns: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("pkg"));
    std::fs::create_dir_all(&dir).unwrap();
    write(
        &dir,
        "db.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: db, namespace: {ns}}}\ndata: {{url: postgres}}\n"),
    );
    write(
        &dir,
        "app.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{ns}/ConfigMap/db}}\ndata: {{mode: web}}\n"
        ),
    );
    write(
        &dir,
        "old.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: old, namespace: {ns}}}\n"),
    );
    dir
}

/// The order in which prune's `-o json` events say objects were deleted.
fn deleted_order(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["change"] == "deleted")
        .map(|e| {
            format!(
                "{}/{}",
                e["id"]["kind"].as_str().unwrap_or_default(),
                e["id"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[test]
fn kpt_live_apply_is_read_pruned_and_torn_down_in_order() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("kpt");
    let n = &ns.0;
    let dir = package(n);
    let dir_text = dir.to_str().unwrap();
    let id = unique("kpt-id");
    kpt_live_apply(&dir, n, &id, true);

    let tracker = format!("kpt={id}");
    let listed = stack(&["list", "-n", n, "--tracker", &tracker, "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout, "configmap/app\nconfigmap/db\nconfigmap/old\n");
    let graph = stack(&["graph", "-n", n, "--tracker", &tracker]).expect_code(0);
    assert!(
        graph.stdout.contains(&format!("ConfigMap/{n}/db (depends-on)")),
        "{}",
        graph.stdout
    );

    // `old` leaves the package: kpt's own dry run prunes it, and orphans names it alone.
    std::fs::remove_file(dir.join("old.yaml")).unwrap();
    let dry = kpt(&["live", "apply", dir_text, "--install-resource-group=false", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(dry.stdout.contains("configmap/old prune successful"), "{}", dry.stdout);
    let orphans = stack(&["orphans", "-n", n, "--tracker", &tracker, "-f", dir_text, "-o", "name"]).expect_code(1);
    assert_eq!(orphans.stdout, "configmap/old\n");

    // Teardown by naming the real inventory object: app before db, the inventory last.
    let pruned = stack(&["prune", "-n", n, "resourcegroup/inventory", "--yes", "-o", "json"]);
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
    let order = deleted_order(&pruned);
    let position = |name: &str| {
        order
            .iter()
            .position(|o| o == name)
            .unwrap_or_else(|| panic!("{name}: {order:?}"))
    };
    assert!(position("ConfigMap/app") < position("ConfigMap/db"), "{order:?}");
    assert_eq!(
        order.last().map(String::as_str),
        Some("ResourceGroup/inventory"),
        "{order:?}"
    );
    for name in ["app", "db", "old"] {
        assert!(!exists("configmap", Some(n), name), "{name}");
    }
}

#[test]
fn kpt_live_destroy_leaves_nothing_for_list() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("kptd");
    let n = &ns.0;
    let dir = package(n);
    let dir_text = dir.to_str().unwrap();
    let id = unique("kpt-id");
    kpt_live_apply(&dir, n, &id, false);
    let tracker = format!("kpt={id}");
    let listed = stack(&["list", "-n", n, "--tracker", &tracker, "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout.lines().count(), 3, "{}", listed.stdout);
    let destroyed = kpt(&["live", "destroy", dir_text]);
    assert_eq!(destroyed.code, 0, "{}", destroyed.stderr);
    let listed = stack(&["list", "-n", n, "--tracker", &tracker, "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout, "");
}

/// `kubectl apply --prune --applyset` with the ApplySet feature on (the `kubectl` helper sets
/// KUBECTL_APPLYSET=true), into a namespace.
fn applyset_apply(ns: &str, name: &str, dir: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "apply",
        "-n",
        ns,
        "--prune",
        "--applyset",
        name,
        "-f",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    kubectl(&args)
}

#[test]
fn a_kubectl_applyset_is_read_pruned_like_kubectl_and_torn_down_in_order() {
    let _logs = start();
    let ns = Namespace::new("applyset");
    let n = &ns.0;
    let dir = package(n);
    let set = "shop";
    applyset_apply(n, set, &dir, &[]).expect_code(0);

    let tracker = format!("applyset={set}");
    let listed = stack(&["list", "-n", n, "--tracker", &tracker, "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout, "configmap/app\nconfigmap/db\nconfigmap/old\n");
    let graph = stack(&["graph", "-n", n, "--tracker", &tracker]).expect_code(0);
    assert!(
        graph.stdout.contains(&format!("ConfigMap/{n}/db (depends-on)")),
        "{}",
        graph.stdout
    );

    // kubectl's server-side dry run says what it would prune: the oracle for orphans.
    std::fs::remove_file(dir.join("old.yaml")).unwrap();
    let dry = applyset_apply(n, set, &dir, &["--dry-run=server"]).expect_code(0);
    let mut kubectl_prunes: Vec<String> = dry
        .stdout
        .lines()
        .filter(|l| l.contains(" pruned"))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    kubectl_prunes.sort();
    assert_eq!(kubectl_prunes, ["configmap/old"], "{}", dry.stdout);
    let orphans = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        dir.to_str().unwrap(),
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(orphans.sorted_lines(), kubectl_prunes);

    // Teardown by naming the real ApplySet parent: app before db, the parent last.
    let pruned = stack(&["prune", "-n", n, &format!("secret/{set}"), "--yes", "-o", "json"]);
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
    let order = deleted_order(&pruned);
    let position = |name: &str| {
        order
            .iter()
            .position(|o| o == name)
            .unwrap_or_else(|| panic!("{name}: {order:?}"))
    };
    assert!(position("ConfigMap/app") < position("ConfigMap/db"), "{order:?}");
    assert_eq!(
        order.last().map(|s| s.as_str()),
        Some(format!("Secret/{set}").as_str()),
        "{order:?}"
    );
    assert!(!exists("secret", Some(n), set));
}

/// Membership review 27, F2: an ApplySet whose parent is a custom resource, applied by the real
/// kubectl while its CRD carried `applyset.kubernetes.io/is-parent-type: "true"`. Once the CRD
/// lost that label, kubectl refuses the set ("is not permitted as an ApplySet parent") and
/// prunes nothing: the oracle. kubectl-stack said `old` was an orphan (and only the re-check
/// stopped `prune --yes`); now naming that parent is refused on every path, and nothing goes.
#[test]
fn a_custom_resource_parent_whose_crd_lost_the_parent_label_prunes_nothing() {
    let _logs = start();
    let ns = Namespace::new("applyset-cr");
    let n = &ns.0;
    let group = format!("{}.producers.example.com", unique("cr"));
    let crd = format!("sets.{group}");
    let _crd = Leftover("crd", crd.clone());
    apply(&format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {crd}, labels: {{applyset.kubernetes.io/is-parent-type: \"true\"}}}}\nspec:\n  group: {group}\n  names: {{kind: Set, plural: sets, singular: set}}\n  scope: Namespaced\n  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]\n"
    ));
    wait_established(&[&format!("crd/{crd}")], &crd);
    // kubectl makes no custom resource parent: it must exist, with its id and kubectl's tooling.
    let id = kubectl_stack::model::trackers::applyset_id("shop", n, "Set", &group);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Set\nmetadata: {{name: shop, namespace: {n}, labels: {{applyset.kubernetes.io/id: {id}}}, annotations: {{applyset.kubernetes.io/tooling: kubectl/v1.32.0, applyset.kubernetes.io/contains-group-kinds: \"\"}}}}\n"
    ));
    let dir = package(n);
    let parent = format!("sets.{group}/shop");
    applyset_apply(n, &parent, &dir, &[]).expect_code(0);
    std::fs::remove_file(dir.join("old.yaml")).unwrap();
    // The control: with the label, kubectl and kubectl-stack both prune `old`.
    let inventory = format!("applyset={parent}");
    let dir_text = dir.to_str().unwrap();
    let orphans = |code: i32| {
        stack(&[
            "orphans",
            "-n",
            n,
            "--inventory",
            &inventory,
            "-f",
            dir_text,
            "-o",
            "name",
        ])
        .expect_code(code)
    };
    assert_eq!(orphans(1).stdout, "configmap/old\n");
    let unlabelled = kubectl(&["label", "crd", &crd, "applyset.kubernetes.io/is-parent-type-"]);
    assert_eq!(unlabelled.code, 0, "{}", unlabelled.stderr);
    let dry = applyset_apply(n, &parent, &dir, &["--dry-run=server"]);
    assert_ne!(dry.code, 0, "kubectl pruned with it:\n{}", dry.stdout);
    assert!(
        dry.stderr.contains("not permitted as an ApplySet parent"),
        "{}",
        dry.stderr
    );
    let refused = orphans(4);
    assert!(
        refused.stderr.contains("not permitted as an ApplySet parent"),
        "{}",
        refused.stderr
    );
    let pruned = stack(&["prune", "-n", n, "--inventory", &inventory, "-f", dir_text, "--yes"]);
    assert_eq!(pruned.code, 4, "{}\n{}", pruned.stdout, pruned.stderr);
    // Tearing the parent down deletes it, and keeps every member: it records none.
    let torn = stack(&["prune", "-n", n, &parent, "--yes"]);
    assert!(torn.stdout.contains("3 kept"), "{}\n{}", torn.stdout, torn.stderr);
    for name in ["app", "db", "old"] {
        assert!(exists("configmap", Some(n), name), "{name}");
    }
}

/// Membership review 29, F1: kubectl applied an Ingress as `extensions/v1beta1`, so its ApplySet
/// parent lists `Ingress.extensions`; the server serves the same object as `networking.k8s.io`
/// too, which is how kubectl-stack lists it. Dropped from the set, kubectl prunes it (the oracle:
/// it lists each group-kind the parent names and prunes by UID); kubectl-stack called it "not in
/// ApplySet parent", in `orphans` and in a teardown. Both now read the record's kinds by their
/// canonical group, as the kpt and Flux records are read.
#[test]
fn an_applyset_member_applied_under_another_group_of_its_kind_is_the_sets() {
    let _logs = start();
    let ns = Namespace::new("applyset-alias");
    let n = &ns.0;
    let set = "web";
    let full = files(&[
        (
            "ing.yaml",
            &format!("apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {{name: web, namespace: {n}}}\nspec:\n  backend: {{serviceName: web, servicePort: 80}}\n"),
        ),
        ("cm.yaml", &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm1, namespace: {n}}}\n")),
    ]);
    applyset_apply(n, set, &full, &[]).expect_code(0);
    let next = files(&[(
        "cm.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm1, namespace: {n}}}\n"),
    )]);
    let dry = applyset_apply(n, set, &next, &["--dry-run=server"]).expect_code(0);
    assert!(dry.stdout.contains("ingress.extensions/web pruned"), "{}", dry.stdout);
    let inventory = format!("applyset=secrets/{set}");
    let orphans = stack(&[
        "orphans",
        "-n",
        n,
        "--inventory",
        &inventory,
        "-f",
        next.to_str().unwrap(),
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(orphans.stdout, "ingress.networking.k8s.io/web\n");
    let plan = stack(&["prune", "-n", n, &format!("secret/{set}"), "--dry-run", "-o", "json"]);
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
    let planned: Vec<String> = json_lines(&plan.stdout)
        .iter()
        .filter(|line| line["type"] == "plan")
        .flat_map(|line| line["waves"].as_array().cloned().unwrap_or_default())
        .flat_map(|wave| wave.as_array().cloned().unwrap_or_default())
        .map(|target| format!("{}/{}", target["id"]["kind"], target["id"]["name"]))
        .collect();
    assert!(planned.contains(&r#""Ingress"/"web""#.to_string()), "{}", plan.stdout);
}

/// Membership review 31, F1 (wrong deletion): a record that names a kind under a group the
/// cluster no longer serves it under (`Deployment.extensions`, served as `apps` alone since
/// v1.16) was read as the kind's canonical group. kubectl cannot map it and refuses the whole
/// prune (the oracle); kubectl-stack pruned a Deployment and a ConfigMap. Now such a parent
/// records nothing (no orphan, nothing deleted, a warning), as for a kind the cluster does not serve.
#[test]
fn an_applyset_kind_recorded_under_a_group_that_no_longer_serves_it_prunes_nothing() {
    let _logs = start();
    let ns = Namespace::new("applyset-gone-group");
    let n = &ns.0;
    let set = "gone";
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}}}\n");
    let full = files(&[
        ("a.yaml", &cm("a")),
        ("b.yaml", &cm("b")),
        (
            "d1.yaml",
            &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d1, namespace: {n}}}\nspec:\n  selector: {{matchLabels: {{app: d1}}}}\n  template:\n    metadata: {{labels: {{app: d1}}}}\n    spec: {{containers: [{{name: c, image: example.invalid/d1}}]}}\n"),
        ),
    ]);
    applyset_apply(n, set, &full, &[]).expect_code(0);
    let annotated = kubectl(&[
        "annotate",
        "secret",
        set,
        "-n",
        n,
        "--overwrite",
        "applyset.kubernetes.io/contains-group-kinds=ConfigMap,Deployment.extensions",
    ]);
    assert_eq!(annotated.code, 0, "{}", annotated.stderr);
    let next = files(&[("b.yaml", &cm("b"))]);
    let dry = applyset_apply(n, set, &next, &["--dry-run=server"]);
    assert_ne!(dry.code, 0, "kubectl pruned with it:\n{}", dry.stdout);
    assert!(dry.stderr.contains("could not find mapping"), "{}", dry.stderr);
    let inventory = format!("applyset=secrets/{set}");
    let next_text = next.to_str().unwrap();
    let orphans = stack(&[
        "orphans",
        "-n",
        n,
        "--inventory",
        &inventory,
        "-f",
        next_text,
        "-o",
        "name",
    ]);
    assert_eq!(orphans.code, 0, "{}\n{}", orphans.stdout, orphans.stderr);
    assert_eq!(orphans.stdout, "");
    assert!(orphans.stderr.contains("Deployment.extensions"), "{}", orphans.stderr);
    let pruned = stack(&["prune", "-n", n, "--inventory", &inventory, "-f", next_text, "--yes"]);
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
    assert!(exists("configmap", Some(n), "a"));
    assert!(exists("deployment", Some(n), "d1"));
}

/// kpt's own answer for the next version of a package: `kpt live apply --dry-run` of `next`
/// with the package's inventory (its Kptfile and resourcegroup.yaml copied beside it).
fn kpt_dry_run(package: &Path, next: &Path) -> String {
    for file in ["Kptfile", "resourcegroup.yaml"] {
        std::fs::copy(package.join(file), next.join(file)).unwrap();
    }
    let dry = kpt(&[
        "live",
        "apply",
        next.to_str().unwrap(),
        "--install-resource-group=false",
        "--dry-run",
    ]);
    assert_eq!(dry.code, 0, "{}\n{}", dry.stdout, dry.stderr);
    dry.stdout
}

/// Deletes a cluster-scoped object a test made, when the test ends (passed or not) and before
/// the binary goes on: a kpt-marked Namespace or CRD left behind would join another test's
/// `--tracker kpt` selection.
struct Leftover(&'static str, String);

impl Drop for Leftover {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", self.0, &self.1, "--ignore-not-found", "--timeout=60s"]);
    }
}

/// A directory holding these files.
fn files(named: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("pkg"));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in named {
        write(&dir, name, text);
    }
    dir
}

/// `orphans -A` of the kpt inventory (`flag` is `--tracker` or `--inventory`) against `next`,
/// with the skipped objects: the orphans' names, and the skipped entry named `name`.
fn kpt_orphans(flag: &str, id: &str, next: &Path, name: &str) -> (Vec<String>, serde_json::Value) {
    let inventory = format!("kpt={id}");
    let next = next.to_str().unwrap();
    let args = [
        "orphans",
        "-A",
        flag,
        &inventory,
        "-f",
        next,
        "-o",
        "json",
        "--show-skipped",
    ];
    let report = stack(&args);
    assert!(
        report.code == 0 || report.code == 1,
        "{}\n{}",
        report.stdout,
        report.stderr
    );
    let document: serde_json::Value = serde_json::from_str(&report.stdout).expect("orphans -o json");
    let orphans = document["orphans"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}/{}",
                e["kind"].as_str().unwrap_or_default(),
                e["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let skipped = document["skipped"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == name)
        .cloned()
        .unwrap_or_default();
    (orphans, skipped)
}

/// An orphan prune of the kpt inventory against `next`, as the user runs it.
fn kpt_prune(flag: &str, id: &str, next: &Path) {
    let inventory = format!("kpt={id}");
    let pruned = stack(&["prune", "-A", flag, &inventory, "-f", next.to_str().unwrap(), "--yes"]);
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
}

/// Issue 24 (kpt prune filters), a: the package held Namespace `kns` and ConfigMap `kns/old`;
/// the next holds only ConfigMap `kns/new`. kpt prunes `old` and keeps `kns`: cli-utils
/// `pkg/apply/filter/local-namespaces-filter.go` ("namespace still in use"). So do `orphans`
/// and `prune`, naming the inventory either way.
#[test]
fn a_kpt_orphan_prune_keeps_the_namespace_the_next_package_lives_in() {
    let _logs = start();
    ensure_resource_group();
    let home = Namespace::new("kpt-home");
    let kns = unique("kns");
    let _kns = Leftover("namespace", kns.clone());
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {kns}}}\n");
    let package = files(&[
        (
            "ns.yaml",
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {kns}}}\n"),
        ),
        ("old.yaml", &cm("old")),
    ]);
    let id = unique("kpt-id");
    kpt_live_apply(&package, &home.0, &id, true);
    let next = files(&[("new.yaml", &cm("new"))]);
    let dry = kpt_dry_run(&package, &next);
    assert!(dry.contains(&format!("namespace/{kns} prune skipped")), "{dry}");
    assert!(dry.contains("configmap/old prune successful"), "{dry}");
    for flag in ["--tracker", "--inventory"] {
        let (orphans, skipped) = kpt_orphans(flag, &id, &next, &kns);
        assert_eq!(orphans, ["ConfigMap/old"], "{flag}");
        assert_eq!(skipped["reason"], "toolWouldKeep", "{flag}: {skipped}");
        let why = skipped["why"].as_str().unwrap_or_default();
        assert!(why.contains(&format!("namespace still in use: {kns}")), "{flag}: {why}");
    }
    kpt_prune("--inventory", &id, &next);
    assert!(!exists("configmap", Some(&kns), "old"));
    assert!(exists("namespace", None, &kns), "kpt keeps {kns}");
}

/// The order in which `kpt live destroy --dry-run` (cli-utils' destroyer) says it deletes
/// objects: `kind/name`, as kpt prints them.
fn kpt_destroy_order(package: &Path) -> Vec<String> {
    let dry = kpt(&["live", "destroy", package.to_str().unwrap(), "--dry-run"]);
    assert_eq!(dry.code, 0, "{}\n{}", dry.stdout, dry.stderr);
    dry.stdout
        .lines()
        .filter_map(|l| l.strip_suffix(" delete successful"))
        .map(str::to_string)
        .collect()
}

/// Issue 25, item 1b: a kpt package holds the Namespace its own inventory object lives in
/// (inventory → Namespace → inventory in the graph). `kpt live destroy` deletes the package's
/// objects, then that Namespace (which takes the inventory object), then finishes with the
/// inventory: so does the teardown that names the inventory, with no cycle. Everything lives in
/// Namespaces of this test's own, deleted when it ends: another binary's teardown meets the
/// package in its graph and plans all the same.
#[test]
fn a_kpt_package_that_holds_its_inventory_s_namespace_is_torn_down_as_kpt_destroys_it() {
    let _logs = start();
    ensure_resource_group();
    let home = unique("kpt-home");
    let _home = Leftover("namespace", home.clone());
    let package = files(&[
        (
            "ns.yaml",
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {home}}}\n"),
        ),
        (
            "a.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {home}}}\n"),
        ),
    ]);
    let id = unique("kpt-id");
    kpt_live_apply(&package, &home, &id, true);
    assert!(exists("resourcegroup", Some(&home), "inventory"));

    // kpt's own order: the ConfigMap, then its Namespace (the inventory's); the inventory last.
    let kpt_order = kpt_destroy_order(&package);
    assert_eq!(
        kpt_order,
        vec!["configmap/a".to_string(), format!("namespace/{home}")],
        "kpt live destroy --dry-run"
    );

    // The package's graph plans (no cycle).
    let tracker = format!("kpt={id}");
    let graph = stack(&["graph", "-A", "--tracker", &tracker, "--members", "--order", "delete"]);
    assert_eq!(graph.code, 0, "{}\n{}", graph.stdout, graph.stderr);

    let pruned = stack(&[
        "prune",
        "-n",
        &home,
        "resourcegroup/inventory",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "120s",
    ]);
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
    let lines = json_lines(&pruned.stdout);
    let wave = |kind: &str, name: &str| planned_wave(&lines, kind, name);
    assert!(wave("ConfigMap", "a") < wave("Namespace", &home), "{}", pruned.stdout);
    assert!(
        wave("Namespace", &home) < wave("ResourceGroup", "inventory"),
        "{}",
        pruned.stdout
    );
    assert_eq!(
        deleted_order(&pruned).first().map(String::as_str),
        Some("ConfigMap/a"),
        "{}",
        pruned.stdout
    );
    wait_until(std::time::Duration::from_secs(60), || !exists("namespace", None, &home));
    let listed = stack(&["list", "-A", "--tracker", &tracker, "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout, "", "nothing of the package is left");
}

/// Issue 24 (kpt prune filters), b: the package held ConfigMaps `dep-target` and `user`; the
/// next drops `dep-target` and gives `user` a `depends-on` naming it. kpt keeps `dep-target`:
/// cli-utils `pkg/apply/filter/dependency-filter.go` (a dependent scheduled for apply).
#[test]
fn a_kpt_orphan_prune_keeps_what_the_next_package_depends_on() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("kpt-dep");
    let n = &ns.0;
    let cm = |name: &str, annotations: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  annotations: {{{annotations}}}\n")
    };
    let package = files(&[
        ("target.yaml", &cm("dep-target", "")),
        ("user.yaml", &cm("user", "")),
        ("gone.yaml", &cm("gone", "")),
    ]);
    let id = unique("kpt-id");
    kpt_live_apply(&package, n, &id, true);
    let depends = format!("config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/dep-target");
    let next = files(&[("user.yaml", &cm("user", &depends))]);
    let dry = kpt_dry_run(&package, &next);
    assert!(dry.contains("configmap/dep-target prune skipped"), "{dry}");
    assert!(dry.contains("configmap/gone prune successful"), "{dry}");
    let (orphans, skipped) = kpt_orphans("--tracker", &id, &next, "dep-target");
    assert_eq!(orphans, ["ConfigMap/gone"]);
    assert_eq!(skipped["reason"], "toolWouldKeep", "{skipped}");
    let why = skipped["why"].as_str().unwrap_or_default();
    assert!(why.contains("dependent scheduled for apply"), "{why}");
    assert!(why.contains(&format!("ConfigMap/{n}/user")), "{why}");
    kpt_prune("--tracker", &id, &next);
    assert!(!exists("configmap", Some(n), "gone"));
    assert!(exists("configmap", Some(n), "dep-target"), "kpt keeps dep-target");
}

/// Membership review 5, finding 2: the next package drops `src` and `dst` reads a field of it
/// through `config.kubernetes.io/apply-time-mutation`. kpt keeps `src` (cli-utils
/// `pkg/object/graph/depends.go` `addApplyTimeMutationEdges`: a mutation's `sourceRef` is a
/// dependency, and `dependency-filter.go` skips its prune).
#[test]
fn a_kpt_orphan_prune_keeps_what_the_next_package_reads_at_apply_time() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("kpt-atm");
    let n = &ns.0;
    let cm = |name: &str, annotations: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  annotations: {{{annotations}}}\ndata: {{value: x, copied: x}}\n")
    };
    let package = files(&[
        ("src.yaml", &cm("src", "")),
        ("dst.yaml", &cm("dst", "")),
        ("gone.yaml", &cm("gone", "")),
    ]);
    let id = unique("kpt-id");
    kpt_live_apply(&package, n, &id, true);
    let mutation = format!(
        "config.kubernetes.io/apply-time-mutation: '[{{sourceRef: {{kind: ConfigMap, name: src, namespace: {n}}}, sourcePath: $.data.value, targetPath: $.data.copied}}]'"
    );
    let next = files(&[("dst.yaml", &cm("dst", &mutation))]);
    let dry = kpt_dry_run(&package, &next);
    assert!(dry.contains("configmap/src prune skipped"), "{dry}");
    let (orphans, skipped) = kpt_orphans("--tracker", &id, &next, "src");
    assert_eq!(orphans, ["ConfigMap/gone"]);
    assert_eq!(skipped["reason"], "toolWouldKeep", "{skipped}");
    let why = skipped["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("apply-time-mutation") && why.contains(&format!("ConfigMap/{n}/dst")),
        "{why}"
    );
    kpt_prune("--tracker", &id, &next);
    assert!(!exists("configmap", Some(n), "gone"));
    assert!(exists("configmap", Some(n), "src"), "kpt keeps src");
}

/// Issue 24 (kpt prune filters), c: the package held the CRD of `Thing`; the next holds only a
/// `Thing`. kpt keeps the CRD (cli-utils `pkg/object/graph/depends.go` `addCRDEdges`: the
/// custom resource depends on its definition; `dependency-filter.go` skips its prune).
#[test]
fn a_kpt_orphan_prune_keeps_the_crd_of_the_next_package_s_custom_resources() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("kpt-crd");
    let n = &ns.0;
    let group = format!("{}.example.com", unique("x"));
    let crd_name = format!("things.{group}");
    let _crd = Leftover("crd", crd_name.clone());
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {crd_name}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: things, singular: thing, kind: Thing, listKind: ThingList}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
    );
    let package = files(&[("crd.yaml", &crd)]);
    let id = unique("kpt-id");
    kpt_live_apply(&package, n, &id, true);
    wait_established(&[&format!("crd/{crd_name}")], &crd_name);
    let thing = format!("apiVersion: {group}/v1\nkind: Thing\nmetadata: {{name: t, namespace: {n}}}\n");
    let next = files(&[("thing.yaml", &thing)]);
    let dry = kpt_dry_run(&package, &next);
    assert!(dry.contains("prune skipped"), "{dry}");
    let (orphans, skipped) = kpt_orphans("--tracker", &id, &next, &crd_name);
    assert!(orphans.is_empty(), "{orphans:?}");
    assert_eq!(skipped["reason"], "toolWouldKeep", "{skipped}");
    let why = skipped["why"].as_str().unwrap_or_default();
    assert!(why.contains("dependent scheduled for apply"), "{why}");
    assert!(why.contains(&format!("Thing.{group}/{n}/t")), "{why}");
    let inventory = format!("kpt={id}");
    let next_text = next.to_str().unwrap();
    let pruned = stack(&["prune", "-A", "--tracker", &inventory, "-f", next_text, "--yes"]);
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
    assert!(
        exists("crd", None, &crd_name),
        "kpt keeps {crd_name}: {}",
        pruned.stderr
    );
    kubectl(&["delete", "crd", &crd_name, "--wait=false"]);
}
