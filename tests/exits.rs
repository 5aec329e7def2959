//! Issue 26: every exit is truthful and bounded — a closed stdout, hostile values.

mod common;
mod proxy;

use std::io::BufRead;
use std::process::Stdio;

use common::*;
use proxy::Proxy;

/// A Kustomization `s` in `f` whose members go in three waves: 40 ConfigMaps that depend on
/// `base`, which depends on `root`.
fn three_wave_stack(f: &str) {
    let labels = flux_labels("s", f);
    let mut yaml = format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: s, namespace: {f}}}\nspec: {{prune: true}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: root, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: base, namespace: {f}, labels: {labels}, annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/root}}}}\n"
    );
    for i in 0..40 {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: {f}, labels: {labels}, annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/base}}}}\n"
        ));
    }
    apply(&yaml);
}

/// Item 1: `prune -o json | head -n 1`: the reader goes away after the plan line; the prune still
/// runs every wave, and its exit code is its own.
#[test]
fn a_closed_stdout_never_cuts_a_prune_short() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("pipe");
    let f = &flux.0;
    three_wave_stack(f);
    let mut command = stack_command(&cluster().admin);
    command
        .args([
            "prune",
            "-n",
            f,
            "kustomization/s",
            "--yes",
            "-o",
            "json",
            "--timeout",
            "60s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut first = String::new();
    std::io::BufReader::new(stdout).read_line(&mut first).unwrap();
    // The reader is dropped here: every later write to stdout meets a closed pipe.
    let run = finish(child);
    assert!(first.contains("plan"), "{first}");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("stdout was closed"), "{}", run.stderr);
    for name in ["root", "base", "c0", "c39"] {
        assert!(!exists("configmap", Some(f), name), "{name} left:\n{}", run.stderr);
    }
    assert!(!exists("kustomization", Some(f), "s"), "{}", run.stderr);
}

/// Item 1: `prune --dry-run 2>&1 | head -3`: stderr closes too; no run panics.
#[test]
fn a_closed_stderr_never_panics() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("pipe-err");
    let f = &flux.0;
    three_wave_stack(f);
    let binary = env!("CARGO_BIN_EXE_kubectl-stack");
    let script = format!(
        "for i in 1 2 3 4 5 6; do \"{binary}\" prune -n {f} kustomization/s --dry-run -v 4 2>&1 | head -3 >/dev/null; echo \"${{PIPESTATUS[0]}}\"; done"
    );
    let output = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("KUBECONFIG", &cluster().admin)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let codes = String::from_utf8_lossy(&output.stdout);
    assert_eq!(codes.lines().count(), 6, "{codes}");
    assert!(codes.lines().all(|c| c != "101"), "a run panicked: {codes}");
    assert!(exists("configmap", Some(f), "root"), "a dry run deletes nothing");
}

/// Item 6: durations too large for the clock are refused before anything is done, never a
/// panic after the first wave.
#[test]
fn a_duration_past_the_clocks_end_is_refused() {
    for value in ["18446744073709551615", "18446744073709551615s", "999999999999h"] {
        let run = stack_as(
            std::path::Path::new("/nonexistent/kubeconfig"),
            &["prune", "kustomization/x", "--timeout", value, "--yes"],
        );
        assert_eq!(run.code, 2, "{value}: {}", run.stderr);
        assert!(run.stderr.contains("--timeout"), "{value}: {}", run.stderr);
    }
}

/// Item 7: a namespace the API could never have is a usage error (exit 2) before any request,
/// not "30 kinds could not be listed" with an RBAC hint.
#[test]
fn an_invalid_namespace_is_a_usage_error() {
    let _logs = start();
    for namespace in ["BAD NS", "../kube-system", "a/b", &"x".repeat(64)] {
        let run = stack(&["list", "-n", namespace]);
        assert_eq!(run.code, 2, "{namespace}: {}", run.stderr);
        assert!(run.stderr.contains("invalid namespace"), "{namespace}: {}", run.stderr);
    }
}

/// Item 7: a password in the server URL is never printed, whatever fails.
#[test]
fn a_password_in_the_server_url_is_never_printed() {
    for server in ["https://admin:SECRET@127.0.0.1:1", "https://admin:SECRET@"] {
        let run = stack_as(
            std::path::Path::new("/nonexistent/kubeconfig"),
            &[
                "list",
                "--server",
                server,
                "--token",
                "x",
                "--request-timeout",
                "3s",
                "-v",
                "9",
            ],
        );
        assert_ne!(run.code, 0);
        assert!(!run.stderr.contains("SECRET"), "{server}: {}", run.stderr);
        assert!(!run.stdout.contains("SECRET"), "{server}: {}", run.stdout);
    }
}

/// Item 4: the PATCH that removes a finalizer reaches the server, which acts; its answer is lost
/// (a reset). `unstick` reads the object again and reports what is true: removed, exit 0.
#[test]
fn unstick_reports_a_patch_whose_answer_was_lost_as_it_landed() {
    let _logs = start();
    let ns = Namespace::new("lost-patch");
    let n = &ns.0;
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {n}, finalizers: [example.com/hold, example.com/other]}}\n"
    ));
    let proxy = Proxy::start(&["--lose-first-patch-answer"]);
    let backups = std::env::temp_dir().join(unique("backups"));
    let run = stack_as(
        &proxy.kubeconfig,
        &[
            "unstick",
            "-n",
            n,
            "configmap/held",
            "--finalizer",
            "example.com/hold",
            "--yes",
            "--backup-dir",
            backups.to_str().unwrap(),
        ],
    );
    let patches: Vec<Option<u64>> = proxy
        .records()
        .iter()
        .filter(|r| r.method() == "PATCH")
        .map(|r| r.upstream())
        .collect();
    assert_eq!(patches.first(), Some(&Some(200)), "the server acted: {patches:?}");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("nothing was changed"), "{}", run.stderr);
    assert_eq!(
        field("configmap", n, "held", ".metadata.finalizers"),
        r#"["example.com/other"]"#
    );
    let _ = kubectl(&[
        "patch",
        "configmap",
        "held",
        "-n",
        n,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
}
