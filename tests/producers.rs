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
