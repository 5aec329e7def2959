//! `kubectl stack prune` on the real cluster: the seed's operator/usage story, UID
//! preconditions, keep markers, dry runs, timeouts and resumption.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;

const FINALIZER: &str = "stack-test.example.com/cleanup";

/// A stack pair as in the seed: `operator` (a CRD and the operator's ConfigMap and Deployment)
/// and `usage` (a Namespace with custom resources that carry the operator's finalizer), usage
/// dependsOn operator.
struct Stacks {
    flux_ns: Namespace,
    app_ns: String,
    crd: String,
    plural: String,
    group: String,
}

impl Stacks {
    /// The fully qualified resource (other tests have a `gizmos` in another group).
    fn resource(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

fn seed_operator_and_usage(prefix: &str) -> Stacks {
    ensure_flux_crds();
    let flux_ns = Namespace::new(prefix);
    let f = flux_ns.0.clone();
    let run = unique(prefix);
    let app_ns = format!("{run}-app");
    let group = format!("{run}.example.com");
    let plural = "gizmos".to_string();
    let crd = format!("{plural}.{group}");
    let operator =
        format!("{{kustomize.toolkit.fluxcd.io/name: operator, kustomize.toolkit.fluxcd.io/namespace: {f}}}");
    let usage = format!("{{kustomize.toolkit.fluxcd.io/name: usage, kustomize.toolkit.fluxcd.io/namespace: {f}}}");
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: operator, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {f}}}
spec: {{prune: true, dependsOn: [{{name: operator}}]}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd}, labels: {operator}}}
spec:
  group: {group}
  names: {{kind: Gizmo, plural: {plural}, singular: gizmo}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: operator, namespace: {f}, labels: {operator}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: operator, namespace: {f}, labels: {operator}}}
spec:
  selector: {{matchLabels: {{app: operator}}}}
  template: {{metadata: {{labels: {{app: operator}}}}, spec: {{containers: [{{name: operator, image: example/operator}}]}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {app_ns}, labels: {usage}}}
"#
    ));
    wait_established(&[&format!("crd/{crd}")], &crd);
    let mut crs = String::new();
    for i in 0..3 {
        crs.push_str(&format!(
            "---\napiVersion: {group}/v1\nkind: Gizmo\nmetadata: {{name: g{i}, namespace: {app_ns}, labels: {usage}, finalizers: [{FINALIZER}]}}\n"
        ));
    }
    crs.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {app_ns}, labels: {usage}}}\n"
    ));
    apply(&crs);
    // Reconciled: kustomize-controller recorded what it applied (without an inventory it
    // deletes nothing).
    record_flux_inventories(&f);
    Stacks {
        flux_ns,
        app_ns,
        crd,
        plural,
        group,
    }
}

/// The test "operator": while the operator stack's ConfigMap or Deployment exists, it removes
/// its finalizer from custom resources that are being deleted. Returns how many it finalized.
struct TestOperator {
    stop: Arc<AtomicBool>,
    finalized: Arc<AtomicUsize>,
    rounds: Arc<AtomicUsize>,
    handle: Option<thread::JoinHandle<()>>,
}

impl TestOperator {
    fn start(stacks: &Stacks) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let finalized = Arc::new(AtomicUsize::new(0));
        let rounds = Arc::new(AtomicUsize::new(0));
        let (f, plural, group, app_ns) = (
            stacks.flux_ns.0.clone(),
            stacks.plural.clone(),
            stacks.group.clone(),
            stacks.app_ns.clone(),
        );
        let handle = {
            let (stop, finalized, rounds) = (stop.clone(), finalized.clone(), rounds.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let alive = exists("configmap", Some(&f), "operator") || exists("deployment", Some(&f), "operator");
                    if alive {
                        let resource = format!("{plural}.{group}");
                        let listed = kubectl(&[
                            "get",
                            &resource,
                            "-n",
                            &app_ns,
                            "-o",
                            "jsonpath={range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{\"\\n\"}{end}",
                        ]);
                        for name in listed.stdout.lines().filter(|l| !l.is_empty()) {
                            let patched = kubectl(&[
                                "patch",
                                &resource,
                                name,
                                "-n",
                                &app_ns,
                                "--type",
                                "json",
                                "-p",
                                r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
                            ]);
                            if patched.code == 0 {
                                finalized.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                    rounds.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(200));
                }
            })
        };
        Self {
            stop,
            finalized,
            rounds,
            handle: Some(handle),
        }
    }

    /// How many times it has looked for custom resources to finalize.
    fn rounds(&self) -> usize {
        self.rounds.load(Ordering::SeqCst)
    }

    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
        self.finalized.load(Ordering::SeqCst)
    }
}

fn events(run: &Run) -> Vec<serde_json::Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn the_seeds_story_ordered_teardown_completes_usage_before_operator() {
    let _logs = start();
    let stacks = seed_operator_and_usage("seed");
    let f = stacks.flux_ns.0.clone();
    let operator = TestOperator::start(&stacks);
    let started = Instant::now();
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/usage",
        "kustomization/operator",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 3, "the operator finalized every custom resource");

    // Everything is gone (the custom resources went before their CRD: see the events below).
    assert!(
        kubectl(&["get", &stacks.resource(), "-A"]).code != 0,
        "the CRD is gone too"
    );
    assert!(
        !exists("namespace", None, &stacks.app_ns),
        "the usage namespace is gone"
    );
    assert!(!exists("configmap", Some(&f), "operator"));
    assert!(!exists("deployment", Some(&f), "operator"));
    assert!(!exists("kustomization", Some(&f), "usage"));
    assert!(!exists("kustomization", Some(&f), "operator"));
    assert!(!exists("crd", None, &stacks.crd));

    // Observed order: every usage object gone before the operator's first delete.
    let events = events(&pruned);
    let position = |pred: &dyn Fn(&serde_json::Value) -> bool| events.iter().position(pred);
    let gizmos_gone = events
        .iter()
        .filter(|e| e["type"] == "event" && e["id"]["kind"] == "Gizmo" && e["change"] == "gone")
        .count();
    assert_eq!(gizmos_gone, 3, "every custom resource seen gone:\n{}", pruned.stdout);
    let last_usage_gone = events
        .iter()
        .rposition(|e| e["type"] == "event" && e["id"]["kind"] == "Gizmo" && e["change"] == "gone")
        .expect("custom resources seen gone");
    let first_operator_delete =
        position(&|e| e["type"] == "event" && e["id"]["name"] == "operator" && e["id"]["kind"] == "ConfigMap")
            .expect("operator deleted");
    assert!(
        last_usage_gone < first_operator_delete,
        "usage must be gone before the operator is deleted"
    );
    let summary = events.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["failed"], 0);
    eprintln!("ordered teardown took {:?}", started.elapsed());
}

/// The stand-in operator's control (kubectl-stack is not run): the same teardown as one unordered
/// `kubectl delete`, as Flux does it, leaves the custom resources stuck. It shows that the test
/// operator really finalizes only while it runs, so the ordered test above proves the order.
#[test]
fn control_the_stand_in_operator_cannot_finalize_after_an_unordered_delete() {
    let _logs = start();
    let stacks = seed_operator_and_usage("unordered");
    let f = stacks.flux_ns.0.clone();
    let operator = TestOperator::start(&stacks);
    // What Flux does today: everything deleted at once, the operator first among equals.
    let deleted = kubectl(&[
        "delete",
        "configmap/operator",
        "deployment/operator",
        "kustomization/usage",
        "kustomization/operator",
        "-n",
        &f,
        "--wait=false",
    ]);
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);
    // The operator dies first (as in an unordered teardown under load): gone, and the stand-in
    // has looked since, so no round that still saw it alive can finalize what is deleted next.
    wait_until(Duration::from_secs(30), || {
        !exists("configmap", Some(&f), "operator") && !exists("deployment", Some(&f), "operator")
    });
    let before = operator.rounds();
    wait_until(Duration::from_secs(30), || operator.rounds() >= before + 2);
    let crs = kubectl(&[
        "delete",
        &stacks.resource(),
        "--all",
        "-n",
        &stacks.app_ns,
        "--wait=false",
    ]);
    assert_eq!(crs.code, 0, "{}", crs.stderr);
    // Observed, not slept: every custom resource is terminating, the operator is gone, and the
    // operator has looked at least twice since.
    let terminating = || {
        kubectl(&[
            "get",
            &stacks.resource(),
            "-n",
            &stacks.app_ns,
            "-o",
            "jsonpath={range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{\"\\n\"}{end}",
        ])
        .stdout
        .lines()
        .count()
    };
    wait_until(Duration::from_secs(30), || {
        terminating() == 3 && !exists("configmap", Some(&f), "operator") && !exists("deployment", Some(&f), "operator")
    });
    let seen = operator.rounds();
    wait_until(Duration::from_secs(30), || operator.rounds() >= seen + 2);
    let finalized = operator.stop();
    assert_eq!(finalized, 0);
    assert_eq!(terminating(), 3, "the custom resources hang on their finalizer");
    release_finalizers(&stacks.resource(), &stacks.app_ns);
    let _ = kubectl(&["delete", "crd", &stacks.crd, "--wait=false"]);
    let _ = kubectl(&["delete", "namespace", &stacks.app_ns, "--wait=false"]);
}

/// Orphans mode with a kpt dependency: `first` (held by a finalizer) must be gone before
/// `second` is deleted.
fn seed_chain(ns: &str, run: &str, second_extra: &str) {
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  namespace: {ns}
  labels: {{stack-test/run: {run}}}
  finalizers: [stack-test.example.com/hold]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{ns}/ConfigMap/second}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: second
  namespace: {ns}
  labels: {{stack-test/run: {run}}}
  {second_extra}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: desired, namespace: {ns}, labels: {{stack-test/run: {run}}}}}
"#
    ));
}

fn prune_orphans_args<'a>(ns: &'a str, selector: &'a str, desired: &'a str) -> Vec<&'a str> {
    // The objects carry only a test label, no tool's mark: --untracked says so.
    vec!["prune", "-n", ns, "-l", selector, "--untracked", "-f", desired]
}

/// Starts `prune --yes --timeout 60s EXTRA` of the chain's orphans in the background and returns
/// once wave 1 is waiting on `first` (held by its finalizer).
fn spawn_prune_held_by_first(
    ns: &str,
    selector: &str,
    desired: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    let mut command = stack_command(&cluster().admin);
    command
        .args(prune_orphans_args(ns, selector, desired.to_str().unwrap()))
        .args(["--yes", "--timeout", "60s"])
        .args(extra);
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let child = command.spawn().unwrap();
    wait_until(Duration::from_secs(30), || {
        !kubectl(&[
            "get",
            "configmap",
            "first",
            "-n",
            ns,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .stdout
        .is_empty()
    });
    child
}

#[test]
fn a_timed_out_wave_stops_the_next_and_a_rerun_continues() {
    let _logs = start();
    let ns = Namespace::new("timeout");
    let n = &ns.0;
    let run = unique("to");
    seed_chain(n, &run, "");
    let selector = format!("stack-test/run={run}");
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    );
    let mut args = prune_orphans_args(n, &selector, desired.to_str().unwrap());
    args.extend(["--yes", "--timeout", "3s"]);

    let first = stack(&args).expect_code(5);
    assert!(exists("configmap", Some(n), "second"), "the next wave must not start");
    assert!(exists("configmap", Some(n), "desired"));
    assert!(first.stderr.contains("stack-test.example.com/hold"), "{}", first.stderr);
    assert!(
        first
            .stderr
            .contains(&format!("kubectl stack stuck -n {n} configmaps/first")),
        "{}",
        first.stderr
    );
    assert!(first.stdout.contains("1 deleted"), "{}", first.stdout);

    // The operator of the finalizer comes back; the same command continues where it stopped.
    release_finalizers("configmap/first", n);
    let second = stack(&args).expect_code(0);
    assert!(!exists("configmap", Some(n), "second"), "{}", second.stderr);
    assert!(exists("configmap", Some(n), "desired"));
}

/// The wave's watch sees a held object go as soon as its finalizer is released: the wave ends
/// then, not at its timeout (60 s) when a last read would also find it gone.
#[test]
fn a_wave_ends_when_its_watch_sees_the_last_object_go() {
    let _logs = start();
    let ns = Namespace::new("watchgone");
    let n = &ns.0;
    let run = unique("wg");
    seed_chain(n, &run, "");
    let selector = format!("stack-test/run={run}");
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    );
    let child = spawn_prune_held_by_first(n, &selector, &desired, &[]);
    let released = Instant::now();
    release_finalizers("configmap/first", n);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        released.elapsed() < Duration::from_secs(30),
        "took {:?} after the release: {stderr}",
        released.elapsed()
    );
    assert!(!exists("configmap", Some(n), "second"), "{stderr}");
    assert!(exists("configmap", Some(n), "desired"));
}

#[test]
fn an_object_recreated_between_plan_and_delete_survives() {
    let _logs = start();
    let ns = Namespace::new("uid");
    let n = ns.0.clone();
    let run = unique("uid");
    seed_chain(&n, &run, "");
    let selector = format!("stack-test/run={run}");
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    );
    let old_uid = uid_of("configmap", Some(&n), "second");

    // While wave 1 waits on `first`, `second` is deleted and re-created under the same name.
    let child = spawn_prune_held_by_first(&n, &selector, &desired, &["-o", "json"]);
    assert_eq!(kubectl(&["delete", "configmap", "second", "-n", &n]).code, 0);
    apply(&format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: second, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"));
    let new_uid = uid_of("configmap", Some(&n), "second");
    assert_ne!(old_uid, new_uid);
    release_finalizers("configmap/first", &n);

    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        uid_of("configmap", Some(&n), "second"),
        new_uid,
        "the new object must survive"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("\"change\":\"replaced\"") && l.contains("\"name\":\"second\"")),
        "{stdout}"
    );
}

#[test]
fn keep_markers_dry_runs_and_no_terminal_delete_nothing_they_should_not() {
    let _logs = start();
    let ns = Namespace::new("safe");
    let n = &ns.0;
    let run = unique("safe");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: orphan, namespace: {n}, labels: {{stack-test/run: {run}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kept, namespace: {n}, labels: {{stack-test/run: {run}}}, annotations: {{helm.sh/resource-policy: keep}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: desired, namespace: {n}, labels: {{stack-test/run: {run}}}}}
"#
    ));
    let selector = format!("stack-test/run={run}");
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    );
    let base = prune_orphans_args(n, &selector, desired.to_str().unwrap());

    // No terminal and no --yes: refused, nothing deleted.
    let refused = stack(&base).expect_code(4);
    assert!(
        refused.stdout.contains("orphan"),
        "the plan is shown first: {}",
        refused.stdout
    );
    assert!(refused.stderr.contains("--yes"), "{}", refused.stderr);
    assert!(exists("configmap", Some(n), "orphan"));

    // Client dry run prints the plan only.
    let client = stack(&[&base[..], &["--dry-run"]].concat()).expect_code(0);
    assert!(
        client.stdout.contains("orphan") && client.stdout.starts_with("WAVE"),
        "{}",
        client.stdout
    );
    assert!(exists("configmap", Some(n), "orphan"));

    // Server dry run sends the deletes with dryRun=All: nothing is deleted.
    let server = stack(&[&base[..], &["--dry-run=server"]].concat()).expect_code(0);
    assert!(server.stdout.contains("1 would be deleted"), "{}", server.stdout);
    assert!(exists("configmap", Some(n), "orphan"));

    // For real: the orphan goes, the keep-marked and the desired objects stay.
    let done = stack(&[&base[..], &["--yes"]].concat()).expect_code(0);
    assert!(
        done.stderr.contains("kept: ConfigMap/") && done.stderr.contains("helm.sh/resource-policy=keep"),
        "{}",
        done.stderr
    );
    assert!(
        done.stdout.contains("1 deleted") && done.stdout.contains("1 kept"),
        "{}",
        done.stdout
    );
    assert!(!exists("configmap", Some(n), "orphan"));
    assert!(exists("configmap", Some(n), "kept"));
    assert!(exists("configmap", Some(n), "desired"));

    // Nothing left to do.
    let again = stack(&[&base[..], &["--yes"]].concat()).expect_code(0);
    assert!(again.stderr.contains("Nothing to prune"), "{}", again.stderr);
    let _ = Command::new("true").status();
}

#[test]
fn ctrl_c_starts_no_new_deletes_and_exits_130() {
    let _logs = start();
    let ns = Namespace::new("sigint");
    let n = ns.0.clone();
    let run = unique("int");
    seed_chain(&n, &run, "");
    let selector = format!("stack-test/run={run}");
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    );
    let child = spawn_prune_held_by_first(&n, &selector, &desired, &[]);
    let signalled = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("interrupted")).collect();
    assert_eq!(
        said,
        ["interrupted: no new deletes will be started and nothing is retried (again to exit at once)"],
        "said once: {stderr}"
    );
    // As after a timeout: what the wave waited for, how to inspect it, and to run it again.
    assert!(
        stderr.contains("wave 1 was still waiting for 1 object(s)")
            && stderr.contains(&format!("kubectl stack stuck -n {n} configmaps/first"))
            && stderr.contains("run the same prune command again to continue"),
        "{stderr}"
    );
    assert!(exists("configmap", Some(&n), "second"), "the next wave must not start");
    release_finalizers("configmap/first", &n);
}

#[test]
fn kinds_that_cannot_be_listed_stop_a_prune_unless_accepted() {
    let _logs = start();
    let ns = Namespace::new("unlisted");
    let n = &ns.0;
    let run = unique("ul");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: orphan, namespace: {n}, labels: {{stack-test/run: {run}}}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: prune-configmaps, namespace: {n}}}
rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get, list, delete]}}]  # no watch: waiting polls
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: limited-prune-configmaps, namespace: {n}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: prune-configmaps}}
subjects: [{{kind: User, name: limited, apiGroup: rbac.authorization.k8s.io}}]
"#
    ));
    let selector = format!("stack-test/run={run}");
    let empty = std::env::temp_dir().join(unique("empty"));
    std::fs::create_dir_all(&empty).unwrap();
    let args = [
        "prune",
        "-n",
        n,
        "-l",
        &selector,
        "--untracked",
        "-f",
        empty.to_str().unwrap(),
        "--allow-empty",
        "--yes",
    ];
    let limited = &cluster().limited;
    wait_until(Duration::from_secs(10), || {
        stack_as(limited, &["list", "-n", n, "-l", &selector, "-o", "name"])
            .stdout
            .contains("orphan")
    });

    let refused = stack_as(limited, &args).expect_code(4);
    assert!(
        refused.stderr.contains("could not be listed") && refused.stderr.contains("--skip-unlisted"),
        "{}",
        refused.stderr
    );
    assert!(exists("configmap", Some(n), "orphan"));

    stack_as(limited, &[&args[..], &["--skip-unlisted"]].concat()).expect_code(0);
    assert!(!exists("configmap", Some(n), "orphan"));
}

/// An orphan prune lists every object of the cluster that could depend on an orphan; a user who
/// may list in its namespace only gets that scope instead, and a warning that says so
/// (`src/bystanders.rs`). What the warning warns of is real: another stack's object in the
/// namespace that depends on `needed` keeps it, but the one in another namespace that depends on
/// `free` is not seen, and `free` is deleted; an admin sees both, keeps both and gets no warning.
/// A user of this test alone (`--as`): the shared `limited` user gets rights from other test
/// binaries.
#[test]
fn an_orphan_prune_by_a_user_who_may_list_one_namespace_checks_it_and_says_so() {
    let _logs = start();
    let ns = Namespace::new("narrow");
    let elsewhere = Namespace::new("narrow-far");
    let (n, e) = (&ns.0, &elsewhere.0);
    let run = unique("nr");
    // `user` and `far` belong to another stack (Flux marks): bystanders that are graph nodes.
    let other = flux_labels("other", n);
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: needed, namespace: {n}, labels: {{stack-test/run: {run}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: free, namespace: {n}, labels: {{stack-test/run: {run}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: user
  namespace: {n}
  labels: {other}
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/needed}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: far
  namespace: {e}
  labels: {other}
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/free}}
"#
    ));
    let selector = format!("stack-test/run={run}");
    // Everything the selection tracks is an orphan (an empty desired set).
    let empty = std::env::temp_dir().join(unique("empty"));
    std::fs::create_dir_all(&empty).unwrap();
    let prune = [
        "prune",
        "-n",
        n,
        "-l",
        &selector,
        "--untracked",
        "-f",
        empty.to_str().unwrap(),
        "--allow-empty",
        "--skip-unlisted",
        "--yes",
    ];
    let warning = format!(
        "in every namespace: what depends on the orphans is checked in namespace {n} and cluster-scoped kinds only"
    );

    // An admin lists everywhere: no warning, both orphans kept by their dependents.
    let admin = stack(&[&prune[..], &["--dry-run=client"]].concat()).expect_code(0);
    assert!(!admin.stderr.contains(&warning), "{}", admin.stderr);
    for (name, by) in [("needed", format!("{n}/user")), ("free", format!("{e}/far"))] {
        let kept = format!("kept: ConfigMap/{n}/{name} (needed by ConfigMap/{by}");
        assert!(admin.stderr.contains(&kept), "{kept}:\n{}", admin.stderr);
    }

    // A user who may read everything in `n`, nothing elsewhere, and delete ConfigMaps.
    let user = unique("narrow-user");
    grant_user(
        &user,
        n,
        "read-all-delete-configmaps",
        r#"[{apiGroups: ["*"], resources: ["*"], verbs: [get, list, watch]}, {apiGroups: [""], resources: [configmaps], verbs: [delete]}]"#,
    );
    let as_user = |args: &[&str]| stack(&[args, &["--as", &user][..]].concat());
    wait_until(Duration::from_secs(10), || {
        as_user(&["list", "-n", n, "-l", &selector, "-o", "name"])
            .stdout
            .contains("free")
    });
    let pruned = as_user(&prune);
    let warned: Vec<&str> = pruned.stderr.lines().filter(|l| l.contains(&warning)).collect();
    assert_eq!(
        warned.len(),
        1,
        "one warning names the narrower check:\n{}",
        pruned.stderr
    );
    assert!(
        warned[0].starts_with("warning: not allowed to list ") && warned[0].contains(" ConfigMap,"),
        "{}",
        warned[0]
    );
    assert_eq!(pruned.code, 0, "{}\n{}", pruned.stdout, pruned.stderr);
    assert!(
        pruned
            .stderr
            .contains(&format!("kept: ConfigMap/{n}/needed (needed by ConfigMap/{n}/user")),
        "its dependent in the namespace keeps it:\n{}",
        pruned.stderr
    );
    assert!(exists("configmap", Some(n), "needed"));
    assert!(
        !exists("configmap", Some(n), "free"),
        "the dependent in another namespace was not seen: {}",
        pruned.stderr
    );
}

#[test]
fn a_teardown_never_takes_another_stacks_objects_with_it() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("holders");
    let f = &flux.0;
    let run = unique("hold");
    let app_ns = format!("{run}-shared");
    let group = format!("{run}.example.com");
    let crd = format!("parts.{group}");
    let label = |stack: &str| {
        format!("{{kustomize.toolkit.fluxcd.io/name: {stack}, kustomize.toolkit.fluxcd.io/namespace: {f}}}")
    };
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: a, namespace: {f}}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: b, namespace: {f}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {app_ns}, labels: {a}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd}, labels: {a}}}
spec:
  group: {group}
  names: {{kind: Part, plural: parts}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"#,
        a = label("a")
    ));
    wait_established(&[&format!("crd/{crd}")], &crd);
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: a-config, namespace: {app_ns}, labels: {a}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: b-config, namespace: {app_ns}, labels: {b}}}
---
apiVersion: {group}/v1
kind: Part
metadata: {{name: b-part, namespace: {f}, labels: {b}}}
"#,
        a = label("a"),
        b = label("b")
    ));

    record_flux_inventories(f);
    let pruned = stack(&["prune", "-n", f, "kustomization/a", "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(
        pruned
            .stderr
            .contains(&format!("kept: Namespace/{app_ns} (holds ConfigMap/{app_ns}/b-config")),
        "{}",
        pruned.stderr
    );
    assert!(
        pruned.stderr.contains(&format!(
            "kept: CustomResourceDefinition.apiextensions.k8s.io/{crd} (holds Part.{group}/{f}/b-part"
        )),
        "{}",
        pruned.stderr
    );
    assert!(!exists("configmap", Some(&app_ns), "a-config"));
    assert!(!exists("kustomization", Some(f), "a"));
    assert!(
        exists("configmap", Some(&app_ns), "b-config"),
        "another stack's object survives"
    );
    assert!(
        exists(&crd, Some(f), "b-part"),
        "another stack's custom resource survives"
    );
    assert!(exists("kustomization", Some(f), "b"));
    let _ = kubectl(&["delete", "namespace", &app_ns, "--wait=false"]);
    let _ = kubectl(&["delete", "crd", &crd, "--wait=false"]);
}
