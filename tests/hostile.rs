//! No panic can ship (#10 item 3): every subcommand on hostile input with no cluster — broken
//! kubeconfigs, malformed manifests, absurd flags — exits with a documented code and never
//! panics (a panic is exit 101).

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// The exit codes the README documents.
const DOCUMENTED: [i32; 8] = [0, 1, 2, 3, 4, 5, 6, 130];

fn hostile_files() -> PathBuf {
    let dir = std::env::temp_dir().join(unique("hostile"));
    std::fs::create_dir_all(dir.join("repo/staging")).unwrap();
    std::fs::create_dir_all(dir.join("repo/prod")).unwrap();
    let files: [(&str, String); 9] = [
        ("deep.yaml", format!("{}{}", "[".repeat(5000), "]".repeat(5000))),
        (
            "deep-block.yaml",
            (0..1000).map(|i| format!("{}- \n", "  ".repeat(i))).collect(),
        ),
        (
            "laughs.yaml",
            "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n".to_string(),
        ),
        (
            "list.yaml",
            "apiVersion: v1\nkind: List\nitems: [1, \"x\", null, {kind: ConfigMap}]\n".to_string(),
        ),
        (
            "types.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: [1], annotations: {config.kubernetes.io/depends-on: 7}, finalizers: 3, labels: [x]}\n".to_string(),
        ),
        (
            "refs.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"\u{1F4A5}\"\n  annotations:\n    config.kubernetes.io/depends-on: \"/,//,///,////,/namespaces//ConfigMap/,a/b/c/d/e/f\"\n    kapp.k14s.io/change-rule: \"   \"\n    argocd.argoproj.io/sync-wave: \"99999999999999999999999\"\n".to_string(),
        ),
        ("repo/staging/app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: t, annotations: {config.kubernetes.io/depends-on: /namespaces/t/ConfigMap/app}}\n".to_string()),
        ("repo/prod/app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: t, labels: {env: prod}}\n".to_string()),
        ("empty.json", "{}".to_string()),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn kubeconfigs(dir: &Path) -> Vec<PathBuf> {
    let garbage = dir.join("garbage.kubeconfig");
    std::fs::write(&garbage, "\u{0}\u{1}not: [yaml").unwrap();
    let empty = dir.join("empty.kubeconfig");
    std::fs::write(
        &empty,
        "apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\nusers: []\n",
    )
    .unwrap();
    let dangling = dir.join("dangling.kubeconfig");
    std::fs::write(
        &dangling,
        "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: nowhere, user: nobody}}]\nclusters: []\nusers: []\n",
    )
    .unwrap();
    vec![PathBuf::from("/nonexistent/kubeconfig"), garbage, empty, dangling]
}

#[test]
fn every_subcommand_on_hostile_input_exits_with_a_documented_code() {
    let dir = hostile_files();
    let d = dir.to_str().unwrap().to_string();
    let repo = format!("{d}/repo");
    let file = |name: &str| format!("{d}/{name}");
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut add = |args: &[&str]| runs.push(args.iter().map(|a| a.to_string()).collect());
    for name in [
        "deep.yaml",
        "deep-block.yaml",
        "laughs.yaml",
        "list.yaml",
        "types.yaml",
        "refs.yaml",
        "empty.json",
    ] {
        let path = file(name);
        add(&["graph", "-f", &path]);
        add(&["graph", "-f", &path, "--order", "delete", "-o", "json"]);
        add(&["orphans", "-A", "-f", &path]);
        add(&["prune", "-A", "-f", &path, "--dry-run"]);
    }
    for output in ["tree", "dot", "mermaid", "json"] {
        add(&["graph", "-f", &repo, "-o", output]);
        add(&["graph", "-f", &repo, "--members", "--order", "apply", "-o", output]);
    }
    add(&["graph", "-f", &repo, "--no-infer"]);
    add(&["graph", "-f", &d]);
    add(&["graph", "-k", &repo]);
    add(&["graph", "-f", "/nonexistent/dir"]);
    for selector in ["!!=,", "a in (", "=", "a==b==c", &"x".repeat(10_000)] {
        add(&["list", "-A", "-l", selector]);
        add(&["graph", "-A", "-l", selector]);
        add(&["stuck", "-A", "-l", selector]);
    }
    for tracker in [
        "nonsense",
        "flux=",
        "flux=a/b/c",
        "applyset=..//..",
        "kpt=\u{1F4A5}",
        "helm=.",
        "argocd=a=b",
    ] {
        add(&["list", "-A", "--tracker", tracker]);
        add(&["orphans", "-A", "--tracker", tracker, "-f", &repo]);
        add(&["graph", "-A", "--tracker", tracker]);
    }
    for duration in ["-1s", "99999999999999999h", "1x", "", "1.5.5m"] {
        add(&["prune", "-n", "x", "kustomization/a", "--timeout", duration]);
        add(&["list", "--request-timeout", duration]);
    }
    for target in [
        "",
        "/",
        "a/b/c",
        "kustomization/",
        "/name",
        "\u{1F4A5}/x",
        "secrets/../x",
    ] {
        add(&["prune", "-n", "x", target, "--yes"]);
        add(&["stuck", "-n", "x", target]);
        add(&["unstick", "-n", "x", target, "--all-finalizers", "--yes"]);
    }
    add(&["prune", "-n", "", "kustomizations", "--yes"]);
    add(&["prune", "-A", "--inventory", "flux=", "--yes"]);
    add(&["orphans", "-A", "--inventory", "kpt=a/b", "--checksum", "zz"]);
    add(&["unstick", "namespace/x", "--finalizer", "", "--yes"]);
    add(&["completion", "nosuchshell"]);
    add(&["__complete", "-n", ""]);
    add(&["__complete", "prune", "--context", "\u{1F4A5}", ""]);
    add(&["__complete", "graph", "-f", &repo, "-o", ""]);
    add(&["nosuchcommand"]);

    // Without a cluster, and with kubeconfigs that cannot be used: only what reads the
    // kubeconfig needs them all.
    let mut failures = Vec::new();
    let mut check = |kubeconfig: &Path, args: &[&str]| {
        let run = stack_as(kubeconfig, args);
        if !DOCUMENTED.contains(&run.code) || run.stderr.contains("panicked") {
            failures.push(format!(
                "{} {args:?}: exit {}\n{}",
                kubeconfig.display(),
                run.code,
                run.stderr.chars().take(600).collect::<String>()
            ));
        }
    };
    let kubeconfigs = kubeconfigs(&dir);
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let offline = args.contains(&"-f") || args.contains(&"-k") || args[0] == "completion";
        let used = if offline { &kubeconfigs[..1] } else { &kubeconfigs[..] };
        for kubeconfig in used {
            check(kubeconfig, &args);
        }
    }
    assert!(
        failures.is_empty(),
        "{} run(s) failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
