//! Real producers, end to end: what `kpt live apply` and `KUBECTL_APPLYSET=true kubectl apply
//! --prune --applyset` write is read by `list`, `orphans` and `graph`, and torn down in
//! depends-on order by naming the real inventory object or ApplySet parent. The producers'
//! own answers are the oracles: kubectl's `--dry-run=server` prune list for `orphans`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;

/// Runs kpt with the admin kubeconfig.
fn kpt(args: &[&str]) -> Run {
    let output = std::process::Command::new("kpt")
        .env("KUBECONFIG", &cluster().admin)
        .args(args)
        .output()
        .expect("kpt is installed");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Marks every field under `properties` as nullable, recursively.
fn make_nullable(schema: &mut serde_json::Value) {
    if let Some(properties) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for property in properties.values_mut() {
            property["nullable"] = serde_json::Value::Bool(true);
            make_nullable(property);
        }
    }
    if let Some(items) = schema.get_mut("items") {
        make_nullable(items);
    }
}

/// Installs kpt's ResourceGroup CRD once, past the 1.20 trap (/work/shared/trackers.md): kpt
/// writes explicit nulls, which a 1.20 server rejects in typed fields unless they are nullable.
fn ensure_resource_group() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let installed = kpt(&["live", "install-resource-group"]);
        assert_eq!(installed.code, 0, "{}", installed.stderr);
        let crd = kubectl(&["get", "crd", "resourcegroups.kpt.dev", "-o", "json"]).expect_code(0);
        let mut crd: serde_json::Value = serde_json::from_str(&crd.stdout).unwrap();
        for version in crd["spec"]["versions"].as_array_mut().unwrap() {
            let properties = &mut version["schema"]["openAPIV3Schema"]["properties"];
            for part in ["spec", "status"] {
                if properties.get(part).is_some() {
                    make_nullable(&mut properties[part]);
                }
            }
        }
        let replaced = kubectl_with_stdin(&["replace", "-f", "-"], Some(&crd.to_string()));
        assert_eq!(replaced.code, 0, "{}", replaced.stderr);
        wait_established(&["crd/resourcegroups.kpt.dev"], "resourcegroups.kpt.dev");
    });
}

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
                e["kind"].as_str().unwrap_or_default(),
                e["name"].as_str().unwrap_or_default()
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
    assert_eq!(kpt(&["pkg", "init", dir_text]).code, 0);
    let init = kpt(&[
        "live",
        "init",
        dir_text,
        "--namespace",
        n,
        "--inventory-id",
        &id,
        "--name",
        "inventory",
    ]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let applied = kpt(&[
        "live",
        "apply",
        dir_text,
        "--install-resource-group=false",
        "--reconcile-timeout=1m",
    ]);
    assert_eq!(applied.code, 0, "{}\n{}", applied.stdout, applied.stderr);

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
    assert_eq!(kpt(&["pkg", "init", dir_text]).code, 0);
    let init = kpt(&["live", "init", dir_text, "--namespace", n, "--inventory-id", &id]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let applied = kpt(&[
        "live",
        "apply",
        dir_text,
        "--install-resource-group=false",
        "--reconcile-timeout=1m",
    ]);
    assert_eq!(applied.code, 0, "{}\n{}", applied.stdout, applied.stderr);
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
