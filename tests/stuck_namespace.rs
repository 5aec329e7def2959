//! A Namespace stuck because an APIService is unavailable: diagnosed with the
//! controller-manager running, then finalized. In its own test binary: the broken APIService
//! stalls every namespace deletion in the cluster while it exists.

mod common;

use std::time::Duration;

use common::*;

const API_SERVICE: &str = "v1beta1.broken.stack-test.example.com";

struct RemoveApiService;

impl Drop for RemoveApiService {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "apiservice", API_SERVICE, "--ignore-not-found"]);
    }
}

#[test]
fn a_namespace_stuck_on_an_unavailable_api_service_is_diagnosed_then_finalized() {
    let _logs = start();
    let _cleanup = RemoveApiService;
    // How long `stuck -A` takes on this machine with every API group healthy.
    let started = std::time::Instant::now();
    let _ = stack(&["stuck", "-A", "-o", "json"]);
    let healthy = started.elapsed();
    apply(&format!(
        r#"
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {API_SERVICE}}}
spec:
  group: broken.stack-test.example.com
  version: v1beta1
  service: {{namespace: default, name: does-not-exist}}
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
"#
    ));
    let name = unique("stuck-ns");
    assert_eq!(kubectl(&["create", "namespace", &name]).code, 0);
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: leftover, namespace: {name}}}\n"
    ));
    assert_eq!(kubectl(&["delete", "namespace", &name, "--wait=false"]).code, 0);
    // The namespace controller reports the discovery failure in the namespace's conditions.
    wait_until(Duration::from_secs(60), || {
        kubectl(&["get", "namespace", &name, "-o", "jsonpath={.status.conditions[*].type}"])
            .stdout
            .contains("NamespaceDeletionDiscoveryFailure")
    });

    let found = stack(&["stuck", &format!("namespace/{name}"), "-o", "json"]).expect_code(1);
    let json = found.json();
    let why: Vec<String> = json["stuck"][0]["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect();
    assert!(
        why.iter().any(|d| d.starts_with("NamespaceDeletionDiscoveryFailure")),
        "{why:?}"
    );
    assert!(
        why.iter()
            .any(|d| d.contains(&format!("APIService {API_SERVICE} is unavailable"))),
        "{why:?}"
    );
    // It also shows up when everything being deleted is listed, despite the broken group, and
    // discovery does not stall on it: the unavailable group answers 503 at once and is tried at
    // most twice, not retried with backoff (counted from `-v 6`'s request log: timing alone is
    // too noisy on a busy machine), and the whole run stays within seconds of a healthy one.
    let started = std::time::Instant::now();
    let all = stack(&["stuck", "-A", "-o", "json", "-v", "6"]);
    let took = started.elapsed();
    eprintln!("stuck -A took {took:?} with an unavailable APIService, {healthy:?} without");
    let broken_group = "/apis/broken.stack-test.example.com/v1beta1";
    let tries = all
        .stderr
        .lines()
        .filter(|l| l.starts_with("debug: requesting") && l.contains(broken_group))
        .count();
    assert!(
        (1..=2).contains(&tries),
        "{tries} discovery request(s) for {broken_group}:\n{}",
        all.stderr
    );
    assert!(
        took < healthy + Duration::from_secs(5),
        "discovery stalled on the unavailable group: {took:?}, {healthy:?} without it"
    );
    // Issue 10: a group version that could not be discovered is a gap in what was checked: the
    // stuck objects found are printed, and the exit code says the result is incomplete.
    assert_eq!(all.code, 3, "{}", all.stderr);
    assert!(all.stdout.contains(&name));
    assert!(
        all.stderr.contains("broken.stack-test.example.com"),
        "the undiscoverable group is named: {}",
        all.stderr
    );

    let backups = std::env::temp_dir().join(unique("ns-backup"));
    stack(&[
        "unstick",
        &format!("namespace/{name}"),
        "--finalizer",
        "kubernetes",
        "--yes",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    wait_until(Duration::from_secs(20), || !exists("namespace", None, &name));
}
