//! Wrong deletions an adversarial review reproduced on the real cluster, each now a test: what
//! the review deleted must survive.

mod common;

use std::time::Duration;

use common::*;

const HOLD: &str = "stack-test.example.com/hold";

fn ks(name: &str, namespace: &str) -> String {
    format!("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{}}\n---\n")
}

/// A teardown of a Kustomization that does not exist (wrong namespace, or a rerun) must not take
/// objects whose name-only mark belongs to a live stack of that name elsewhere.
#[test]
fn a_gone_stack_never_claims_a_live_namesakes_objects() {
    let _logs = start();
    ensure_flux_crds();
    let team_b = Namespace::new("namesake");
    let flux = Namespace::new("namesake-flux");
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: nameonly, namespace: {}, labels: {{kustomize.toolkit.fluxcd.io/name: app}}}}\n",
        ks("app", &team_b.0),
        team_b.0
    ));
    let run = stack(&["prune", "-n", &flux.0, "kustomization/app", "--yes"]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(exists("configmap", Some(&team_b.0), "nameonly"), "{}", run.stderr);
}

/// In a HelmRelease teardown, an object of another Helm release stays.
#[test]
fn another_helm_release_keeps_its_object_in_a_helmrelease_teardown() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("helmrel");
    let n = &ns.0;
    apply(&format!(
        r#"apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: h, namespace: {n}}}
spec: {{}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: own
  namespace: {n}
  labels: {{helm.toolkit.fluxcd.io/name: h, helm.toolkit.fluxcd.io/namespace: {n}, app.kubernetes.io/managed-by: Helm}}
  annotations: {{meta.helm.sh/release-name: h, meta.helm.sh/release-namespace: {n}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: adopted
  namespace: {n}
  labels: {{helm.toolkit.fluxcd.io/name: h, helm.toolkit.fluxcd.io/namespace: {n}, app.kubernetes.io/managed-by: Helm}}
  annotations: {{meta.helm.sh/release-name: other-release, meta.helm.sh/release-namespace: {n}}}
"#
    ));
    // helm-controller uninstalls what the release records: `own` is in its manifest.
    helm_release(
        n,
        "h",
        &format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: own, namespace: {n}}}\n"),
    );
    set_helm_release_status("h", n, "h", n);
    let run = stack(&["prune", "-n", n, "helmrelease/h", "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "own"), "{}", run.stderr);
    assert!(exists("configmap", Some(n), "adopted"), "{}", run.stderr);
    // Kept by the first rule of the chain that holds: helm-controller's record has no `adopted`.
    assert!(
        run.stderr
            .contains(&format!("kept: ConfigMap/{n}/adopted (not in Helm release {n}/h")),
        "{}",
        run.stderr
    );
}

/// kustomize-controller#301 through a terminating dependent: another stack's custom resource
/// that is already being deleted, and waits for the operator, keeps the operator.
#[test]
fn a_terminating_dependent_keeps_what_it_depends_on() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("termdep");
    let n = &ns.0;
    apply(&format!(
        r#"{a}{b}apiVersion: v1
kind: ConfigMap
metadata: {{name: operator, namespace: {n}, labels: {la}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cr
  namespace: {n}
  labels: {lb}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/operator}}
"#,
        a = ks("a", n),
        b = ks("b", n),
        la = flux_labels("a", n),
        lb = flux_labels("b", n),
    ));
    assert_eq!(kubectl(&["delete", "configmap", "cr", "-n", n, "--wait=false"]).code, 0);
    record_flux_inventories(n);
    let run = stack(&["prune", "-n", n, "kustomization/a", "--yes", "--timeout", "30s"]).expect_code(0);
    assert!(exists("configmap", Some(n), "operator"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("kept: ConfigMap/{n}/operator (needed by ConfigMap/{n}/cr")),
        "{}",
        run.stderr
    );
    release_finalizers("configmap/cr", n);
}

/// An object whose stack's labels are removed while an earlier wave waits is no longer the
/// stack's: the re-check drops it.
#[test]
fn the_recheck_drops_an_object_no_longer_tracked() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("untracked");
    let n = ns.0.clone();
    apply(&format!(
        r#"{a}apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: base, namespace: {n}, labels: {la}}}
"#,
        a = ks("a", &n),
        la = flux_labels("a", &n),
    ));
    record_flux_inventories(&n);
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "held")
    });
    let unlabelled = kubectl(&[
        "label",
        "configmap",
        "base",
        "-n",
        &n,
        "kustomize.toolkit.fluxcd.io/name-",
        "kustomize.toolkit.fluxcd.io/namespace-",
    ]);
    assert_eq!(unlabelled.code, 0, "{}", unlabelled.stderr);
    release_finalizers("configmap/held", &n);
    let run = finish(child).expect_code(5);
    let stderr = run.stderr;
    assert!(exists("configmap", Some(&n), "base"), "{stderr}");
    assert!(stderr.contains("no tool tracks it any more"), "{stderr}");
}

/// A CRD none of whose versions is served hides its custom resources from discovery: it is kept,
/// never deleted with another stack's custom resources.
#[test]
fn a_crd_with_no_served_version_is_kept() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("unserved");
    let n = &ns.0;
    let group = format!("{}.example.com", unique("unsrv"));
    let crd = format!("gadgets.{group}");
    apply(&format!(
        r#"{op}{usage}apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd}, labels: {lop}}}
spec:
  group: {group}
  names: {{kind: Gadget, plural: gadgets}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"#,
        op = ks("op", n),
        usage = ks("usage", n),
        lop = flux_labels("op", n),
    ));
    wait_established(&[&format!("crd/{crd}")], &crd);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Gadget\nmetadata: {{name: precious, namespace: {n}, labels: {}}}\n",
        flux_labels("usage", n)
    ));
    let patched = kubectl(&[
        "patch",
        "crd",
        &crd,
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/versions/0/served","value":false}]"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    std::thread::sleep(Duration::from_secs(2));
    record_flux_inventories(n);
    let run = stack(&["prune", "-n", n, "kustomization/op", "--yes"]);
    assert!(exists("crd", None, &crd), "{}", run.stderr);
    assert!(run.stderr.contains("no version is served"), "{}", run.stderr);
    let _ = kubectl(&["delete", "crd", &crd, "--wait=false"]);
}
