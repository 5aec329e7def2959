//! Faults caused for real: the API server paused (SIGSTOP) under a running command. In its own
//! test binary, since it stalls the whole cluster for a few seconds.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Pauses the API server now and resumes it after `pause`, in the background; resumes on drop
/// too, so a failing test never leaves the cluster frozen.
struct Paused(u32);

impl Paused {
    fn for_a_while(pause: Duration) -> Self {
        let pid: u32 = std::fs::read_to_string(cluster().admin.parent().unwrap().join("apiserver.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap()
            .success());
        std::thread::spawn(move || {
            std::thread::sleep(pause);
            let _ = Command::new("kill").args(["-CONT", &pid.to_string()]).status();
        });
        Self(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0.to_string()]).status();
    }
}

#[test]
fn requests_that_time_out_are_retried_until_the_server_answers_and_fail_clearly_when_it_does_not() {
    let _logs = start();
    let ns = Namespace::new("faults");
    let run = unique("f");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: here, namespace: {}, labels: {{stack-test/run: {run}}}}}\n",
        ns.0
    ));
    let selector = format!("stack-test/run={run}");

    // Paused for 3 s: with 1 s request timeouts the first tries fail, a retry gets through.
    let started = Instant::now();
    let paused = Paused::for_a_while(Duration::from_secs(3));
    let listed = stack(&[
        "list",
        "-n",
        &ns.0,
        "-l",
        &selector,
        "-o",
        "name",
        "--request-timeout",
        "1s",
        "-v",
        "2",
    ]);
    drop(paused);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.stdout, "configmap/here\n");
    assert!(
        listed.stderr.contains("transient failure"),
        "retries are logged at -v 2: {}",
        listed.stderr
    );
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());

    // Paused for longer than every retry: a clear error naming the server, not a hang.
    let paused = Paused::for_a_while(Duration::from_secs(30));
    let started = Instant::now();
    let failed = stack(&["list", "-n", &ns.0, "-l", &selector, "--request-timeout", "1s"]);
    drop(paused);
    assert_eq!(failed.code, 3, "{}", failed.stderr);
    assert!(
        failed
            .stderr
            .contains("cannot reach the API server at https://127.0.0.1:"),
        "{}",
        failed.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "gave up in bounded time: {:?}",
        started.elapsed()
    );
    wait_until(Duration::from_secs(30), || {
        kubectl(&["get", "--raw", "/readyz"]).code == 0
    });
}
