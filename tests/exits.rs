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
    record_flux_inventories(f);
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
            "--force",
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
    assert_eq!(
        patches.first(),
        Some(&Some(200)),
        "the server acted: {patches:?}\n{}\n{}",
        run.stdout,
        run.stderr
    );
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

/// Runs `command` (output captured), killing it and failing if it has not ended within `limit`;
/// returns what it printed and how long it took.
fn bounded(mut command: std::process::Command, limit: std::time::Duration, what: &str) -> (Run, std::time::Duration) {
    let started = std::time::Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    use std::io::Read;
    let (out, err) = (read(Box::new(out)), read(Box::new(err)));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: still running after {limit:?}\n{}\n{}",
                out.join().unwrap(),
                err.join().unwrap()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    (run, started.elapsed())
}

/// `n` ConfigMaps `c0..` labelled `stack-test/run=RUN` (one wave of untracked orphans), and a
/// desired set that holds none of them.
fn flat_orphans(n_objects: usize, ns: &str, run: &str) -> std::path::PathBuf {
    let mut yaml = String::new();
    for i in 0..n_objects {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: {ns}, labels: {{stack-test/run: {run}}}}}\n"
        ));
    }
    apply(&yaml);
    temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    )
}

/// Sends SIGINT to `pid` once `ready` holds (checked every 50 ms, at most 30 s); when it was sent.
fn interrupt_when(pid: u32, mut ready: impl FnMut() -> bool) -> f64 {
    wait_until(std::time::Duration::from_secs(30), &mut ready);
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let signalled = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    at
}

/// Item 2: DELETEs that reach the server and are never answered (a hung connection). Ctrl-C ends
/// the run at once, and the report says per object which DELETEs were sent and may still land
/// (the server did act on them) and which were not sent.
#[test]
fn interrupted_deletes_with_no_answer_are_reported_as_may_still_land() {
    let _logs = start();
    let ns = Namespace::new("hung-del");
    let n = &ns.0;
    let run_label = unique("hd");
    let desired = flat_orphans(6, n, &run_label);
    let proxy = Proxy::start(&["--hang-deletes"]);
    let selector = format!("stack-test/run={run_label}");
    let mut command = stack_command(&proxy.kubeconfig);
    command.args(["prune", "-n", n, "-l", &selector, "--untracked", "-f"]);
    command.args([
        desired.to_str().unwrap(),
        "--yes",
        "-o",
        "json",
        "--delete-concurrency",
        "2",
    ]);
    let started = std::time::Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let hung = || proxy.records().iter().filter(|r| r.method() == "DELETE").count();
    interrupt_when(child.id(), || hung() >= 2);
    let interrupted = std::time::Instant::now();
    let deadline = interrupted + std::time::Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running 15 s after Ctrl-C: a DELETE with no answer hangs the run");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let exited_after = interrupted.elapsed();
    let run = finish(child);
    eprintln!(
        "figures: hung DELETEs: exit {} {:.1}s after Ctrl-C ({:.1}s in all)",
        run.code,
        exited_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(run.code, 130, "{}\n{}", run.stdout, run.stderr);
    let lines = json_lines(&run.stdout);
    let summary = lines.last().unwrap();
    assert_eq!(summary["status"], "interrupted", "{}", run.stdout);
    let report = &summary["interrupted"];
    let names = |key: &str| -> Vec<String> {
        let mut names: Vec<String> = report[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key}: {report}"))
            .iter()
            .map(|e| e["id"]["name"].as_str().unwrap_or_default().to_string())
            .collect();
        names.sort();
        names
    };
    let sent_to_server: Vec<String> = proxy
        .records()
        .iter()
        .filter(|r| r.method() == "DELETE")
        .map(|r| r.path().rsplit('/').next().unwrap().to_string())
        .collect();
    let may = names("mayStillLand");
    assert_eq!(may.len(), sent_to_server.len(), "{report}\n{sent_to_server:?}");
    assert_eq!(names("notSent").len(), 6 - sent_to_server.len(), "{report}");
    assert!(names("sent").is_empty(), "{report}");
    for name in &sent_to_server {
        assert!(may.contains(name), "{name}: {report}");
        // The server did act: "may still land" was the truth.
        assert!(!exists("configmap", Some(n), name), "{name} was deleted by the server");
    }
    assert!(summary["mayStillLand"].as_u64() == Some(may.len() as u64), "{summary}");
}

/// Item 2, the table: the same run without `-o json` prints one row per DELETE sent, saying it
/// may still land, and how many were not sent.
#[test]
fn the_interrupted_table_names_each_delete_that_may_still_land() {
    let _logs = start();
    let ns = Namespace::new("hung-tab");
    let n = &ns.0;
    let run_label = unique("ht");
    let desired = flat_orphans(4, n, &run_label);
    let proxy = Proxy::start(&["--hang-deletes"]);
    let selector = format!("stack-test/run={run_label}");
    let mut command = stack_command(&proxy.kubeconfig);
    command.args(["prune", "-n", n, "-l", &selector, "--untracked", "-f"]);
    command.args([desired.to_str().unwrap(), "--yes", "--delete-concurrency", "1"]);
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    interrupt_when(child.id(), || proxy.records().iter().any(|r| r.method() == "DELETE"));
    let interrupted = std::time::Instant::now();
    let run = finish(child);
    let took = interrupted.elapsed();
    assert!(took < std::time::Duration::from_secs(10), "{took:?} after Ctrl-C");
    assert_eq!(run.code, 130, "{}\n{}", run.stdout, run.stderr);
    let rows: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("may still land") && l.starts_with("ConfigMap"))
        .collect();
    assert_eq!(rows.len(), 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("1 DELETE(s) sent, 1 of them with no answer (they may still land), 3 not sent"),
        "{}",
        run.stderr
    );
}

/// Item 2, the issue's scenario: every DELETE answered 503. After Ctrl-C nothing is retried and
/// the run ends at once (it was: 359 more DELETEs over 255 s, exit about 5 min later).
#[test]
fn after_ctrl_c_a_delete_answered_503_is_not_retried() {
    let _logs = start();
    let ns = Namespace::new("int-503");
    let n = &ns.0;
    let run_label = unique("i5");
    let desired = flat_orphans(40, n, &run_label);
    let proxy = Proxy::start(&["--refuse-delete", "*=503"]);
    let selector = format!("stack-test/run={run_label}");
    let mut command = stack_command(&proxy.kubeconfig);
    command.args(["prune", "-n", n, "-l", &selector, "--untracked", "-f"]);
    command.args([desired.to_str().unwrap(), "--yes", "-o", "json", "--timeout", "5m"]);
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deletes = || proxy.records().iter().filter(|r| r.method() == "DELETE").count();
    let at = interrupt_when(child.id(), || deletes() >= 80);
    let interrupted = std::time::Instant::now();
    let run = finish(child);
    let seconds = interrupted.elapsed().as_secs_f64();
    let after = proxy
        .records()
        .iter()
        .filter(|r| r.method() == "DELETE" && r.start() > at)
        .count();
    eprintln!(
        "figures: every DELETE 503: {after} DELETE(s) after Ctrl-C, exit {} {seconds:.1}s after it",
        run.code
    );
    assert_eq!(run.code, 130, "{}", run.stderr);
    assert!(seconds < 5.0, "{seconds}s to exit after Ctrl-C");
    // Only a DELETE already on its way when the signal came may arrive after it.
    assert!(after <= 32, "{after} DELETEs after Ctrl-C");
    let summary = json_lines(&run.stdout).last().cloned().unwrap();
    assert_eq!(summary["deleted"], 0, "{summary}");
    assert_eq!(
        kubectl(&["get", "configmaps", "-n", n, "-l", &selector, "-o", "name"])
            .stdout
            .lines()
            .count(),
        40
    );
}

/// A kubeconfig for the test cluster whose user gets its token from the exec plugin `script`.
fn kubeconfig_with_exec(script: &str) -> std::path::PathBuf {
    let plugin = temp_file("plugin.sh", script);
    let admin = std::fs::read_to_string(&cluster().admin).unwrap();
    let user_line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("user: {token:"))
        .unwrap();
    let exec = format!(
        "  user: {{exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: sh, args: [{}], interactiveMode: Never}}}}",
        plugin.display()
    );
    temp_file("exec.kubeconfig", &admin.replace(user_line, &exec))
}

/// Item 6: an exec credential plugin that never returns: the tool stops waiting at
/// `--request-timeout` and says which plugin and what to do.
#[test]
fn an_exec_plugin_that_never_returns_is_bounded() {
    let kubeconfig = kubeconfig_with_exec("sleep 120\n");
    let mut command = stack_command(&kubeconfig);
    command.args(["list", "-n", "default", "--request-timeout", "2s"]);
    let (run, took) = bounded(command, std::time::Duration::from_secs(30), "a hung exec plugin");
    eprintln!(
        "figures: hung exec plugin: exit {} after {:.1}s",
        run.code,
        took.as_secs_f64()
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("did not return within 2s"), "{}", run.stderr);
    assert!(run.stderr.contains("exec plugin by hand"), "{}", run.stderr);
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
}

/// A local port nothing listens on.
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Item 7: a refused port fails at once, as kubectl does (it took 45 s of retries).
#[test]
fn a_refused_port_fails_at_once() {
    let port = dead_port();
    let server = format!("https://127.0.0.1:{port}");
    let mut command = stack_command(std::path::Path::new("/nonexistent"));
    command.env_remove("KUBECONFIG");
    command.args([
        "list",
        "--server",
        &server,
        "--token",
        "x",
        "--insecure-skip-tls-verify",
    ]);
    let (run, took) = bounded(command, std::time::Duration::from_secs(60), "a refused port");
    eprintln!(
        "figures: refused port: exit {} after {:.1}s",
        run.code,
        took.as_secs_f64()
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("connection refused"), "{}", run.stderr);
    assert!(run.stderr.contains(&server), "{}", run.stderr);
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}

/// Item 7: a dead `proxy-url` is named as the proxy that refuses, never as the API server.
#[test]
fn a_dead_proxy_is_named_as_the_proxy() {
    let proxy = format!("http://127.0.0.1:{}", dead_port());
    let admin = std::fs::read_to_string(&cluster().admin).unwrap();
    let server_line = admin.lines().find(|l| l.trim_start().starts_with("server:")).unwrap();
    let with_proxy = admin.replace(server_line, &format!("{server_line}\n    proxy-url: {proxy}"));
    let kubeconfig = temp_file("proxied.kubeconfig", &with_proxy);
    let mut command = stack_command(&kubeconfig);
    command.args(["list", "-n", "default"]);
    let (run, took) = bounded(command, std::time::Duration::from_secs(60), "a dead proxy");
    eprintln!(
        "figures: dead proxy-url: exit {} after {:.1}s",
        run.code,
        took.as_secs_f64()
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("cannot reach the proxy at {proxy}")),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("cannot reach the API server"), "{}", run.stderr);
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}

/// Item 7: `--timeout 0` does not wait: each wave is checked once right after its deletes. What is
/// gone is never listed as a blocker; an object held by a finalizer stops the run (exit 5) before
/// the next wave.
#[test]
fn timeout_zero_lists_only_what_is_still_there() {
    let _logs = start();
    let ns = Namespace::new("t0");
    let n = &ns.0;
    let run_label = unique("t0");
    let mut yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: base, namespace: {n}, labels: {{stack-test/run: {run_label}}}}}\n"
    );
    for i in 0..4 {
        let held = if i == 3 { ", finalizers: [example.com/hold]" } else { "" };
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: {n}, labels: {{stack-test/run: {run_label}}}, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base}}{held}}}\n"
        ));
    }
    apply(&yaml);
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    );
    let selector = format!("stack-test/run={run_label}");
    let run = stack(&[
        "prune",
        "-n",
        n,
        "-l",
        &selector,
        "--untracked",
        "-f",
        desired.to_str().unwrap(),
        "--yes",
        "-o",
        "json",
        "--timeout",
        "0",
    ]);
    release_finalizers("configmap/c3", n);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let summary = json_lines(&run.stdout).last().cloned().unwrap();
    let blockers: Vec<&str> = summary["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(blockers, ["c3"], "{summary}");
    assert!(exists("configmap", Some(n), "base"), "the next wave must not start");
}

/// Issue 30: the desired manifests are read while the session opens and the cluster is listed,
/// yet a manifest that does not parse still wins: exit 2 naming its file and line, at once,
/// although the server accepts connections and never answers, and when it cannot be reached.
#[test]
fn a_bad_manifest_wins_over_a_server_that_never_answers() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        // Accepts and holds every connection, answering nothing.
        let mut streams = Vec::new();
        for stream in silent.incoming().take(8) {
            streams.push(stream);
        }
    });
    drop(held);
    let dir = std::env::temp_dir().join(unique("bad-manifest"));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n").unwrap();
    let silent_server = format!("https://127.0.0.1:{port}");
    for server in [silent_server.as_str(), "https://127.0.0.1:1"] {
        for command in ["prune", "orphans"] {
            let started = std::time::Instant::now();
            let mut args = vec![
                command,
                "--server",
                server,
                "--token",
                "x",
                "--request-timeout",
                "60s",
                "-l",
                "app=a",
                "-f",
                bad.to_str().unwrap(),
            ];
            if command == "prune" {
                args.push("--dry-run=client");
            }
            let run = stack_as(std::path::Path::new("/nonexistent/kubeconfig"), &args);
            let took = started.elapsed();
            assert_eq!(run.code, 2, "{command} against {server}: {}", run.stderr);
            assert!(
                run.stderr.contains("bad.yaml:") && run.stderr.contains("invalid YAML"),
                "{command} against {server}: {}",
                run.stderr
            );
            assert!(
                took < std::time::Duration::from_secs(20),
                "{command} against {server} took {took:?}"
            );
        }
    }
}

/// Issue 30, adversarial review: `-f -` is read whole before any request. Opening the session
/// may run the kubeconfig's exec credential plugin, and kube hands it our standard input (an
/// MFA prompt reads a line from it): when standard input was read beside the session, the
/// plugin took the desired ConfigMap `b`'s line, and `b` was deleted as an orphan.
#[test]
fn an_exec_plugin_that_reads_stdin_takes_nothing_from_the_desired_set() {
    use std::io::Write;
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("stdin-exec");
    let f = &flux.0;
    let labels = flux_labels("app", f);
    let mut yaml = format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: app, namespace: {f}}}\nspec: {{prune: true}}\n"
    );
    for name in ["a", "b", "c"] {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {f}, labels: {labels}}}\n"
        ));
    }
    apply(&yaml);
    record_flux_inventories(f);

    let dir = std::env::temp_dir().join(unique("stdin-exec"));
    std::fs::create_dir_all(&dir).unwrap();
    let admin = std::fs::read_to_string(&cluster().admin).unwrap();
    let token = admin
        .split("token: ")
        .nth(1)
        .and_then(|rest| rest.split(['}', '\n']).next())
        .expect("a token in the admin kubeconfig")
        .trim()
        .to_string();
    let plugin = dir.join("mfa.py");
    let taken = dir.join("taken");
    std::fs::write(
        &plugin,
        format!(
            "#!/usr/bin/env python3\nimport sys, json\nline = sys.stdin.readline()\nopen({taken:?}, 'a').write(repr(line) + '\\n')\nprint(json.dumps({{'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential', 'status': {{'token': {token:?}}}}}))\n",
            taken = taken.to_str().unwrap(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let exec_user = format!(
        "user: {{exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: {}}}}}",
        plugin.to_str().unwrap()
    );
    let kubeconfig = dir.join("exec.kubeconfig");
    std::fs::write(
        &kubeconfig,
        admin.replace(&format!("user: {{token: {token}}}"), &exec_user),
    )
    .unwrap();
    assert!(std::fs::read_to_string(&kubeconfig).unwrap().contains("exec:"));

    let mut child = stack_command(&kubeconfig)
        .args([
            "prune",
            "-n",
            f,
            "--tracker",
            &format!("flux=app.{f}"),
            "-f",
            "-",
            "--yes",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let a = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {f}, labels: {labels}}}\n---\n");
    stdin.write_all(a.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The session would open now, while the rest is still to come: a comment line, then `b`.
    // (Two readers blocked on one pipe take its writes in turn.)
    std::thread::sleep(std::time::Duration::from_millis(1500));
    stdin.write_all(b"# more to come\n").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let b = format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {{\"name\": \"b\", \"namespace\": \"{f}\", \"labels\": {{\"kustomize.toolkit.fluxcd.io/name\": \"app\", \"kustomize.toolkit.fluxcd.io/namespace\": \"{f}\"}}}}}}\n"
    );
    stdin.write_all(b.as_bytes()).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    drop(stdin);
    let run = Run::from(child.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(exists("configmap", Some(f), "a"), "{}", run.stderr);
    assert!(
        exists("configmap", Some(f), "b"),
        "the desired b was deleted: {}",
        run.stderr
    );
    assert!(
        !exists("configmap", Some(f), "c"),
        "the orphan c was kept: {}",
        run.stderr
    );
    let plugin_read = std::fs::read_to_string(&taken).unwrap_or_default();
    assert!(
        !plugin_read.contains("name"),
        "the plugin read the desired set: {plugin_read}"
    );
}

/// Issue 30, adversarial review: a manifest that does not parse wins over a bad `--tracker`,
/// however long the manifests take to read (the selection is checked beside the read).
#[test]
fn a_bad_manifest_wins_over_a_bad_tracker_however_long_the_read() {
    let _logs = start();
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: n}}\n"
        ));
    }
    text.push_str("---\nmetadata: {name: broken\n");
    let file = temp_file("late-error.yaml", &text);
    for command in ["prune", "orphans"] {
        let mut args = vec![command, "--tracker", "bogus", "-f", file.to_str().unwrap()];
        if command == "prune" {
            args.push("--dry-run=client");
        }
        let run = stack(&args);
        assert_eq!(run.code, 2, "{command}: {}", run.stderr);
        assert!(
            run.stderr.contains("late-error.yaml:") && run.stderr.contains("invalid YAML"),
            "{command}: {}",
            run.stderr
        );
    }
}
