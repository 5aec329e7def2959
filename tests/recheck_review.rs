//! Wrong deletions an adversarial review found in the re-check and in what an orphan prune looks
//! at, each reproduced on the real cluster:
//! - a kind installed after the plan (a CRD) is listed by the re-check too: its object that
//!   started to depend on a planned one keeps it;
//! - an ownerReference with `controller: true` set since the plan leaves the object to its
//!   controller, as the planner would have;
//! - an orphan prune with `-n` looks for what depends on the orphans in every namespace.

mod common;

use std::time::Duration;

use common::*;

const HOLD: &str = "stack-test.example.com/hold";

fn kustomizations(names: &[&str], namespace: &str) -> String {
    names
        .iter()
        .map(|name| {
            format!("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{}}\n---\n")
        })
        .collect()
}

/// Stack `a`: `holder` (held by a finalizer, so wave 1 waits) depends on `base`.
fn seed_holder_and_base(n: &str) {
    let la = flux_labels("a", n);
    apply(&format!(
        r#"{ks}apiVersion: v1
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
metadata: {{name: base, namespace: {n}, labels: {la}}}
"#,
        ks = kustomizations(&["a", "b"], n),
    ));
}

/// Starts the teardown of stack `a`, waits until wave 1 is held, runs `meanwhile`, lets wave 1 go.
fn teardown_a_while(n: &str, meanwhile: impl FnOnce()) -> Run {
    record_flux_inventories(n);
    let mut child = spawn_stack(&["prune", "-n", n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", n, "holder")
    });
    meanwhile();
    release_finalizers("configmap/holder", n);
    finish(child)
}

#[test]
fn an_object_of_a_kind_installed_since_the_plan_that_depends_on_a_planned_one_keeps_it() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newkind");
    let n = ns.0.clone();
    seed_holder_and_base(&n);
    let group = format!("{}.example.com", unique("k"));
    let run = teardown_a_while(&n, || {
        apply(&format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: latecomers.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: Latecomer, plural: latecomers, singular: latecomer, listKind: LatecomerList}}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"#
        ));
        wait_established(&[&format!("crd/latecomers.{group}")], &format!("latecomers.{group}"));
        apply(&format!(
            "apiVersion: {group}/v1\nkind: Latecomer\nmetadata:\n  name: w\n  namespace: {n}\n  labels: {}\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base}}\n",
            flux_labels("b", &n)
        ));
    })
    .expect_code(5);
    assert!(!exists("configmap", Some(&n), "holder"), "{}", run.stderr);
    assert!(
        exists("configmap", Some(&n), "base"),
        "the new kind's dependent keeps it:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "dropped: ConfigMap/{n}/base: needed by Latecomer.{group}/{n}/w"
        )),
        "{}",
        run.stderr
    );
    kubectl(&["delete", "crd", &format!("latecomers.{group}"), "--wait=false"]);
}

#[test]
fn an_object_a_controller_took_over_since_the_plan_is_left_to_it() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("adopted");
    let n = ns.0.clone();
    seed_holder_and_base(&n);
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: owner, namespace: {n}, labels: {}}}\n",
        flux_labels("b", &n)
    ));
    let owner = uid_of("configmap", Some(&n), "owner");
    let run = teardown_a_while(&n, || {
        let patch = format!(
            r#"{{"metadata":{{"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"{owner}","controller":true}}]}}}}"#
        );
        let patched = kubectl(&["patch", "configmap", "base", "-n", &n, "--type", "merge", "-p", &patch]);
        assert_eq!(patched.code, 0, "{}", patched.stderr);
    })
    .expect_code(5);
    assert!(exists("configmap", Some(&n), "base"), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "dropped: ConfigMap/{n}/base: its controller ConfigMap/owner was set"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn an_orphan_prune_in_one_namespace_sees_dependents_in_every_namespace() {
    let _logs = start();
    let ns = Namespace::new("orphanhere");
    let other = Namespace::new("dependentthere");
    let (n, o) = (ns.0.clone(), other.0.clone());
    apply_applyset(
        &n,
        "set1",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: old}\n",
    );
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: user\n  namespace: {o}\n  labels: {}\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/old}}\n",
        flux_labels("b", &o)
    ));
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\n",
    );
    let desired = desired.to_str().unwrap();
    let run = stack(&[
        "prune",
        "-n",
        &n,
        "--tracker",
        "applyset=secrets/set1",
        "-f",
        desired,
        "--yes",
    ]);
    assert!(
        exists("configmap", Some(&n), "old"),
        "a dependent in another namespace keeps it:\n{run:?}"
    );
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(all.contains(&format!("needed by ConfigMap/{o}/user")), "{all}");
}

fn set_inventory(name: &str, namespace: &str, names: &[&str]) {
    let ids: Vec<String> = names.iter().map(|n| format!("{namespace}_{n}__ConfigMap")).collect();
    set_flux_inventory(name, namespace, &ids);
}

/// An orphan of stack `a` that stack `b` adopts (relabelled, in b's inventory) while an earlier
/// wave waits is no longer a's to prune: the re-check drops it.
#[test]
fn an_orphan_adopted_by_another_stack_since_the_plan_is_dropped() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("adopt");
    let n = ns.0.clone();
    let la = flux_labels("a", &n);
    apply(&format!(
        r#"{ks}apiVersion: v1
kind: ConfigMap
metadata: {{name: stays, namespace: {n}, labels: {la}}}
---
apiVersion: v1
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
metadata: {{name: base, namespace: {n}, labels: {la}}}
"#,
        ks = kustomizations(&["a", "b"], &n),
    ));
    set_inventory("a", &n, &["stays", "holder", "base"]);
    set_inventory("b", &n, &[]);
    let desired = temp_file(
        "desired.yaml",
        // Its namespace written, as kustomize-controller needs without spec.targetNamespace.
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: stays, namespace: {n}}}\n"),
    );
    let desired = desired.to_str().unwrap();
    let tracker = format!("flux=a.{n}");
    let args = [
        "prune",
        "-n",
        &n,
        "--tracker",
        &tracker,
        "-f",
        desired,
        "--yes",
        "--timeout",
        "60s",
    ];
    let mut child = spawn_stack(&args);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "holder")
    });
    let relabel = kubectl(&[
        "label",
        "configmap",
        "base",
        "-n",
        &n,
        "--overwrite",
        "kustomize.toolkit.fluxcd.io/name=b",
    ]);
    assert_eq!(relabel.code, 0, "{}", relabel.stderr);
    set_inventory("b", &n, &["base"]);
    set_inventory("a", &n, &["stays", "holder"]);
    release_finalizers("configmap/holder", &n);
    let run = finish(child).expect_code(5);
    assert!(
        exists("configmap", Some(&n), "base"),
        "adopted by b, it stays:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "dropped: ConfigMap/{n}/base: its tracking marks changed since the plan"
        )),
        "{}",
        run.stderr
    );
}
