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
    record_flux_inventories(&n);
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
    record_flux_inventories(&n);
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

/// Deletes a cluster-scoped object when dropped (what a test made outside its Namespace).
struct ClusterObject(&'static str, String);

impl Drop for ClusterObject {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", self.0, &self.1, "--wait=false", "--ignore-not-found"]);
    }
}

/// Review finding R3 (issue 25): a webhook configuration made since the plan (as Kyverno makes
/// its own at run time) whose backend Service and Deployment the next wave deletes keeps them,
/// with the reason the plan gives: the re-check lists the webhook configurations whole and infers
/// their backends through the plan's builder.
#[test]
fn a_webhook_made_since_the_plan_keeps_its_backend() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newhook");
    let n = ns.0.clone();
    let la = flux_labels("a", &n);
    let hook = ClusterObject("validatingwebhookconfiguration", unique("r3-hook"));
    apply(&format!(
        r#"{a}apiVersion: v1
kind: ConfigMap
metadata:
  name: holder
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: "/namespaces/{n}/Service/hook,apps/namespaces/{n}/Deployment/hook"}}
---
apiVersion: v1
kind: Service
metadata: {{name: hook, namespace: {n}, labels: {la}}}
spec:
  selector: {{app: r3-hook}}
  ports: [{{port: 443, targetPort: 8443}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: hook, namespace: {n}, labels: {la}}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: r3-hook}}}}
  template:
    metadata: {{labels: {{app: r3-hook}}}}
    spec: {{containers: [{{name: hook, image: registry.invalid/hook:1}}]}}
"#,
        a = ks("a", &n),
    ));
    record_flux_inventories(&n);
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "holder")
    });
    // Fails open and matches nothing the tests make: it breaks no other test while it stays.
    apply(&format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {name}}}
webhooks:
- name: validate.r3.stack-test.example.com
  clientConfig: {{service: {{namespace: {n}, name: hook, path: /validate}}}}
  rules: [{{apiGroups: [r3.stack-test.example.com], apiVersions: [v1], operations: [CREATE], resources: [things]}}]
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
        name = hook.1
    ));
    release_finalizers("configmap/holder", &n);
    let run = finish(child).expect_code(5);
    let stderr = &run.stderr;
    assert!(!exists("configmap", Some(&n), "holder"), "{stderr}");
    assert!(
        exists("service", Some(&n), "hook"),
        "the backend Service must survive\n{stderr}"
    );
    assert!(
        exists("deployment", Some(&n), "hook"),
        "the backend Deployment must survive\n{stderr}"
    );
    let why = format!(
        "needed by ValidatingWebhookConfiguration.admissionregistration.k8s.io/{}, which is not pruned (inferred: webhook backend) (found by the re-check)",
        hook.1
    );
    for backend in ["Service", "Deployment.apps"] {
        assert!(
            stderr.contains(&format!("dropped: {backend}/{n}/hook: {why}")),
            "{backend}: {stderr}"
        );
    }
}

/// Review findings R3 and R7 (issue 25): a PersistentVolumeClaim made since the plan keeps the
/// StorageClass its `spec.storageClassName` names, which the next wave would delete.
#[test]
fn a_claim_made_since_the_plan_keeps_its_storage_class() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newclaim");
    let n = ns.0.clone();
    let la = flux_labels("a", &n);
    let class = ClusterObject("storageclass", unique("r7-class"));
    apply(&format!(
        r#"{a}apiVersion: v1
kind: ConfigMap
metadata:
  name: holder
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: "storage.k8s.io/StorageClass/{c}"}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {c}, labels: {la}}}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"#,
        a = ks("a", &n),
        c = class.1,
    ));
    record_flux_inventories(&n);
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "holder")
    });
    apply(&format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: claim, namespace: {n}}}\nspec:\n  storageClassName: {c}\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Mi}}}}\n",
        c = class.1
    ));
    release_finalizers("configmap/holder", &n);
    let run = finish(child).expect_code(5);
    let stderr = &run.stderr;
    assert!(!exists("configmap", Some(&n), "holder"), "{stderr}");
    assert!(
        exists("storageclass", None, &class.1),
        "the StorageClass must survive\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "dropped: StorageClass.storage.k8s.io/{}: needed by PersistentVolumeClaim/{n}/claim, which is not pruned (inferred: storage class) (found by the re-check)",
            class.1
        )),
        "{stderr}"
    );
}

/// Stack `a`: `holder` (held by a finalizer, so wave 1 waits) depends on `base`. While wave 1
/// waits, an untracked ConfigMap `precious` is given a plain owner reference to `base`: deleting
/// `base` would now make the garbage collector take `precious`. The re-check drops `base` (the
/// plan's own owner-cascade rule, `cascade::owners`), and `precious` survives.
#[test]
fn a_new_dependent_by_owner_reference_keeps_the_planned_owner() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newowned");
    let n = ns.0.clone();
    let la = flux_labels("a", &n);
    apply(&format!(
        r#"{a}apiVersion: v1
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
        a = ks("a", &n),
    ));
    set_flux_inventory(
        "a",
        &n,
        &[format!("{n}_holder__ConfigMap"), format!("{n}_base__ConfigMap")],
    );
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "holder")
    });
    let base_uid = uid_of("configmap", Some(&n), "base");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: precious\n  namespace: {n}\n  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: base, uid: {base_uid}}}]\n"
    ));
    release_finalizers("configmap/holder", &n);
    let run = finish(child).expect_code(5);
    let stderr = &run.stderr;
    assert!(!exists("configmap", Some(&n), "holder"), "{stderr}");
    for name in ["base", "precious"] {
        assert!(exists("configmap", Some(&n), name), "{name} must survive\n{stderr}");
    }
    assert!(
        stderr.contains(&format!(
            "dropped: ConfigMap/{n}/base: its deletion would take ConfigMap/{n}/precious"
        )) && stderr.contains("found by the re-check"),
        "{stderr}"
    );
}

/// Membership review 6, F2: the re-check tells the run's own suspension of a Flux stack from
/// anyone else's. Kustomization `pol` is already being deleted when the run starts (so the run
/// suspends nothing of it) and still carries the `kubectl-stack/suspended-by` annotation of an
/// earlier run that a `flux resume` left behind. While wave 1 waits, a user suspends it: a
/// suspended Kustomization's deletion deletes nothing (kustomize-controller
/// `finalizerShouldDeleteResources`: `!obj.Spec.Suspend`), so its member `kept` is dropped, and
/// the run says why.
#[test]
fn a_suspension_set_since_the_plan_keeps_the_stacks_members() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("usersuspend");
    let n = ns.0.clone();
    let labels = flux_labels("pol", &n);
    apply(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: pol\n  namespace: {n}\n  finalizers: [{HOLD}]\n  annotations: {{kubectl-stack/suspended-by: 'prune, pid 1, 2026-01-01T00:00:00Z'}}\nspec: {{prune: true, suspend: false}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {n}\n  labels: {labels}\n  finalizers: [{HOLD}]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/kept}}\n"
    ));
    record_flux_inventories(&n);
    kubectl(&["delete", "kustomization", "pol", "-n", &n, "--wait=false"]).expect_code(0);
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/pol", "--yes", "--timeout", "15s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "slow")
    });
    let patched = kubectl(&[
        "patch",
        "kustomization",
        "pol",
        "-n",
        &n,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    release_finalizers("configmap/slow", &n);
    let run = finish(child);
    release_finalizers("kustomization/pol", &n);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(exists("configmap", Some(&n), "kept"), "{}", run.stderr);
    assert!(
        run.stderr.contains("is suspended (spec.suspend=true)"),
        "{}",
        run.stderr
    );
    // The run suspended nothing: it never says a suspension of its own is left.
    assert!(!run.stderr.contains("still suspended"), "{}", run.stderr);
}
