//! The re-check before each wave reuses the plan's discovery while no CRD or APIService changes
//! (a watch started before the plan's discovery says so), and discovers again when one does: a
//! kind installed mid-run is still listed by the re-check.

mod common;

use std::time::Duration;

use common::*;

const HOLD: &str = "stack-test.example.com/hold";

/// The tests of this file one at a time: one's new CRD is a change the other's watch sees.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The discovery requests in a `-v 6` log: GET of /api, /apis, or a group version's document
/// (`requesting [HTTP http.method=GET http.url=https://HOST/apis ...]`).
fn discovery_requests(log: &str) -> Vec<String> {
    log.lines()
        .filter(|line| line.contains("requesting"))
        .filter_map(|line| {
            let url = line.split_whitespace().find_map(|w| w.strip_prefix("http.url="))?;
            let path = url.split_once("//")?.1.split_once('/')?.1;
            let path = path.split('?').next()?.trim_end_matches(['"', ']', ',']);
            let segments: Vec<&str> = path.split('/').collect();
            let discovery = matches!(segments.as_slice(), ["api"] | ["apis"] | ["api", _] | ["apis", _, _]);
            discovery.then(|| format!("/{path}"))
        })
        .collect()
}

/// How many times the `-v 6` log asked for the list of API groups (one per discovery).
fn discoveries(log: &str) -> usize {
    discovery_requests(log).iter().filter(|p| *p == "/apis").count()
}

/// Stack `a` in namespace `n`: three ConfigMaps in a depends-on chain (three waves), `first`
/// held by a finalizer so that the run waits in wave 1 until released.
fn seed_chain(n: &str) {
    let la = flux_labels("a", n);
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: a, namespace: {n}}}
spec: {{}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: b, namespace: {n}}}
spec: {{}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/second}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: second
  namespace: {n}
  labels: {la}
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/third}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: third, namespace: {n}, labels: {la}}}
"#
    ));
    record_flux_inventories(n);
}

/// Tears down stack `a` with `-v 6`, runs `meanwhile` while wave 1 is held, then lets it go.
fn teardown_a_while(n: &str, meanwhile: impl FnOnce()) -> Run {
    let args = [
        "-v",
        "6",
        "prune",
        "-n",
        n,
        "kustomization/a",
        "--yes",
        "--timeout",
        "60s",
    ];
    let mut child = spawn_stack(&args);
    // The -v 6 log outgrows a pipe's buffer: read it while the run goes on.
    let mut stderr = child.stderr.take().expect("stderr piped");
    let log = std::thread::spawn(move || {
        let mut log = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut log);
        log
    });
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", n, "first")
    });
    meanwhile();
    release_finalizers("configmap/first", n);
    let mut run = finish(child);
    run.stderr = log.join().expect("the log reader");
    run
}

#[test]
fn the_recheck_reuses_the_plans_discovery_while_no_crd_or_apiservice_changes() {
    let _serial = one_at_a_time();
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("nodisco");
    let n = ns.0.clone();
    seed_chain(&n);
    let run = teardown_a_while(&n, || {}).expect_code(0);
    let log = &run.stderr;
    for name in ["first", "second", "third"] {
        assert!(!exists("configmap", Some(&n), name), "{name} is deleted\n{log}");
    }
    // Each wave's re-check reuses the plan's catalog, unless the watch saw a CRD or APIService
    // change (another test may make one meanwhile), or knows a CRD that discovery does not serve
    // yet (one such test just made: served a little after it is made): then, and only then, it
    // discovers again.
    let reused = log.matches("re-check: the served kinds are the plan's").count();
    let again = log.matches("re-check: discovering the served kinds again").count();
    let changed = log
        .matches("re-check: discovering the served kinds again: a CRD or APIService changed")
        .count()
        + log
            .matches("re-check: discovering the served kinds again: a CRD is not served yet")
            .count();
    let rechecks = log.matches("re-check: wave judged").count();
    assert!(rechecks >= 3, "3 ConfigMaps in a chain, then the Kustomization\n{log}");
    assert_eq!(reused + again, rechecks, "{log}");
    assert!(reused >= 1, "{log}");
    assert_eq!(again, changed, "the re-check discovers again only on a change\n{log}");
    // After the plan's discovery, only what a change seen asked for.
    let plan = discovery_requests(before_rechecks(log));
    let rechecks = discovery_requests(from_rechecks(log));
    assert!(plan.iter().any(|p| p == "/apis"), "the plan discovers: {plan:?}\n{log}");
    if again == 0 {
        assert_eq!(rechecks, Vec::<String>::new(), "{log}");
    }
    assert!(discoveries(from_rechecks(log)) >= again, "{rechecks:?}\n{log}");
}

/// The log up to the first re-check (the plan).
fn before_rechecks(log: &str) -> &str {
    &log[..log.find("re-check:").unwrap_or(log.len())]
}

/// The log from the first re-check on (the waves).
fn from_rechecks(log: &str) -> &str {
    &log[log.find("re-check:").unwrap_or(log.len())..]
}

#[test]
fn a_crd_installed_mid_run_is_discovered_and_its_objects_are_rechecked() {
    let _serial = one_at_a_time();
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("midcrd");
    let n = ns.0.clone();
    seed_chain(&n);
    let group = format!("{}.example.com", unique("mid"));
    let crd = format!("midcomers.{group}");
    let run = teardown_a_while(&n, || {
        apply(&format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: Midcomer, plural: midcomers, singular: midcomer, listKind: MidcomerList}}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"#
        ));
        wait_established(&[&format!("crd/{crd}")], &crd);
        apply(&format!(
            "apiVersion: {group}/v1\nkind: Midcomer\nmetadata:\n  name: w\n  namespace: {n}\n  labels: {}\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/second}}\n",
            flux_labels("b", &n)
        ));
    })
    .expect_code(5);
    let log = &run.stderr;
    kubectl(&["delete", "crd", &crd, "--wait=false"]);
    assert!(!exists("configmap", Some(&n), "first"), "{log}");
    for name in ["second", "third"] {
        assert!(exists("configmap", Some(&n), name), "{name} must survive\n{log}");
    }
    assert!(
        log.contains(&format!(
            "dropped: ConfigMap/{n}/second: needed by Midcomer.{group}/{n}/w"
        )),
        "{log}"
    );
    assert!(log.contains("re-check: discovering the served kinds again"), "{log}");
    assert!(discoveries(from_rechecks(log)) >= 1, "{log}");
}
