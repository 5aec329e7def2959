//! The re-check before a wave finds what changed since the plan beyond the wave's own objects:
//! an object of another stack that started to depend on a planned object keeps it, and keeps
//! what it needs, exactly as the planner's needed-by-staying rule would have.

mod common;

use std::time::Duration;

use common::*;

const HOLD: &str = "stack-test.example.com/hold";

fn ks(name: &str, namespace: &str) -> String {
    format!("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{}}\n---\n")
}

/// Stack `a`: `holder` (held by a finalizer, so wave 1 waits) depends on `base`, which depends
/// on `root`. While wave 1 waits, stack `b` gets an object that depends on `base`: `base` is
/// dropped and `root` withheld; the run exits 5 and says why.
#[test]
fn a_new_dependent_of_another_stack_keeps_the_planned_object_and_what_it_needs() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newdep");
    let n = ns.0.clone();
    let la = flux_labels("a", &n);
    apply(&format!(
        r#"{a}{b}apiVersion: v1
kind: ConfigMap
metadata:
  name: holder
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: base
  namespace: {n}
  labels: {la}
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/root}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: root, namespace: {n}, labels: {la}}}
"#,
        a = ks("a", &n),
        b = ks("b", &n),
    ));
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "holder")
    });
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: newcomer\n  namespace: {n}\n  labels: {}\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base}}\n",
        flux_labels("b", &n)
    ));
    release_finalizers("configmap/holder", &n);
    let run = finish(child).expect_code(5);
    let stderr = &run.stderr;
    assert!(!exists("configmap", Some(&n), "holder"), "{stderr}");
    for name in ["base", "root", "newcomer"] {
        assert!(exists("configmap", Some(&n), name), "{name} must survive\n{stderr}");
    }
    assert!(
        stderr.contains(&format!(
            "dropped: ConfigMap/{n}/base: needed by ConfigMap/{n}/newcomer, which is not pruned (depends-on)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "dropped: ConfigMap/{n}/root: needed by ConfigMap/{n}/base, which was not deleted"
        )),
        "{stderr}"
    );
}

/// A Flux Kustomization of another stack that starts to `dependsOn` a planned Kustomization
/// keeps it (Flux `spec.dependsOn` is read from the whole object again).
#[test]
fn a_new_flux_depends_on_keeps_the_planned_kustomization() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newfluxdep");
    let n = ns.0.clone();
    apply(&format!(
        r#"{a}apiVersion: v1
kind: ConfigMap
metadata:
  name: holder
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
"#,
        a = ks("a", &n),
        la = flux_labels("a", &n),
    ));
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "holder")
    });
    apply(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: late, namespace: {n}}}\nspec: {{dependsOn: [{{name: a}}]}}\n"
    ));
    release_finalizers("configmap/holder", &n);
    let run = finish(child).expect_code(5);
    assert!(exists("kustomization", Some(&n), "a"), "{}", run.stderr);
    // Review finding R5 (issue 25): the run suspended `a` before its waves; dropped, it stays
    // suspended, and the run says so (it deleted nothing of it).
    assert!(run.stderr.contains("still suspended"), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "needed by Kustomization.kustomize.toolkit.fluxcd.io/{n}/late, which is not pruned (dependsOn)"
        )),
        "{}",
        run.stderr
    );
}
