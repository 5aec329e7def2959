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

/// Tears stack `a` of namespace `n` down (`--timeout 60s`) and, while its wave 1 waits on
/// ConfigMap `holder` (held by [`HOLD`]), makes `change`; then lets `holder` go. The run as it
/// ended.
fn teardown_a_changing(n: &str, change: impl FnOnce()) -> Run {
    let mut child = spawn_stack(&["prune", "-n", n, "kustomization/a", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", n, "holder")
    });
    change();
    release_finalizers("configmap/holder", n);
    finish(child)
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
    let run = teardown_a_changing(&n, || {
        apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: newcomer\n  namespace: {n}\n  labels: {}\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base}}\n",
            flux_labels("b", &n)
        ));
    }).expect_code(5);
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
    let run = teardown_a_changing(&n, || {
        apply(&format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: late, namespace: {n}}}\nspec: {{dependsOn: [{{name: a}}]}}\n"
        ));
    }).expect_code(5);
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
    let run = teardown_a_changing(&n, || {
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
    })
    .expect_code(5);
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
    let run = teardown_a_changing(&n, || {
        apply(&format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: claim, namespace: {n}}}\nspec:\n  storageClassName: {c}\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Mi}}}}\n",
            c = class.1
        ));
    }).expect_code(5);
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
    let run = teardown_a_changing(&n, || {
        let base_uid = uid_of("configmap", Some(&n), "base");
        apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: precious\n  namespace: {n}\n  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: base, uid: {base_uid}}}]\n"
        ));
    }).expect_code(5);
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

/// Issue 24, membership review 6 (what was left), case (a): a user suspends mid-run the Flux
/// stacks the run already suspended itself. The run's suspension records the generation its PATCH
/// gave the object; the user's suspension shows: on `pol` the user removes the run's
/// `kubectl-stack/suspended-by` annotation (what the run tells them to do to keep a stack
/// suspended), on `pol2` the user's own write of its spec (`spec.suspend: true` with another
/// field, as `kubectl edit` or an apply of the repository's manifest sends it) increments its
/// generation. Either way the suspension is no longer provably the run's: the re-check before
/// the stacks' wave takes it as their policy (a suspended Kustomization deletes nothing of its
/// members), `kept` and `kept2` stay, and the run never lifts the user's suspension. (A write
/// that changes nothing — `suspend: true` alone on an object already suspended — is not recorded
/// by the API server and cannot be seen: README, Known gaps.)
#[test]
fn a_user_suspending_a_stack_the_run_suspended_keeps_its_members() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("mysuspend");
    let n = ns.0.clone();
    let stack_of = |name: &str, kept: &str, slow: &str| {
        let labels = flux_labels(name, &n);
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {n}, finalizers: [{HOLD}]}}\nspec: {{prune: true}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {kept}, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {slow}\n  namespace: {n}\n  labels: {labels}\n  finalizers: [{HOLD}]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/{kept}}}\n---\n"
        )
    };
    apply(&format!(
        "{}{}",
        stack_of("pol", "kept", "slow"),
        stack_of("pol2", "kept2", "slow2")
    ));
    record_flux_inventories(&n);
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/pol",
        "kustomization/pol2",
        "--yes",
        "--timeout",
        "30s",
    ]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "slow") && is_terminating("configmap", &n, "slow2")
    });
    for name in ["pol", "pol2"] {
        assert_eq!(field("kustomization", &n, name, ".spec.suspend"), "true");
    }
    let unannotated = kubectl(&[
        "annotate",
        "kustomization",
        "pol",
        "-n",
        &n,
        "kubectl-stack/suspended-by-",
    ]);
    assert_eq!(unannotated.code, 0, "{}", unannotated.stderr);
    let edited = kubectl(&[
        "patch",
        "kustomization",
        "pol2",
        "-n",
        &n,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":true,"interval":"1h"}}"#,
    ]);
    assert_eq!(edited.code, 0, "{}", edited.stderr);
    release_finalizers("configmap/slow", &n);
    release_finalizers("configmap/slow2", &n);
    let run = finish(child);
    assert_ne!(run.code, 0, "{}", run.stderr);
    for kept in ["kept", "kept2"] {
        assert!(exists("configmap", Some(&n), kept), "{kept}\n{}", run.stderr);
    }
    assert!(
        run.stderr.contains("is suspended (spec.suspend=true)"),
        "{}",
        run.stderr
    );
    // Deleted, if at all, still suspended: its controller's clean-up deletes nothing.
    for name in ["pol", "pol2"] {
        assert_eq!(
            field("kustomization", &n, name, ".spec.suspend"),
            "true",
            "{name}: the user's suspension stays\n{}",
            run.stderr
        );
        release_finalizers(&format!("kustomization/{name}"), &n);
    }
}

/// Issue 24, membership review 6 (what was left), case (b): an earlier run suspended stacks
/// `users` and `earlier` and stopped (its wave timed out), leaving both suspended with its
/// `kubectl-stack/suspended-by` annotation. The user then resumed `users` (`flux resume`: the
/// annotation stays) and suspended it again (`flux suspend`). The stale annotation proves
/// nothing: `users`' spec changed since the earlier run's PATCH (another generation), so its
/// suspension is the user's, the rerun keeps its member (Flux deletes nothing of a suspended
/// stack) and does not lift it. `earlier`, untouched since, is still the earlier run's
/// suspension: the rerun takes it over, lifts it before the delete and deletes its member.
#[test]
fn a_stale_suspended_by_annotation_does_not_hide_a_users_suspension() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("stalesusp");
    let n = ns.0.clone();
    let stack_of = |name: &str| {
        let labels = flux_labels(name, &n);
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {n}}}\nspec: {{prune: true}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}-cm, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-slow\n  namespace: {n}\n  labels: {labels}\n  finalizers: [{HOLD}]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/{name}-cm}}\n---\n"
        )
    };
    apply(&format!("{}{}", stack_of("users"), stack_of("earlier")));
    record_flux_inventories(&n);
    let targets = [
        "prune",
        "-n",
        &n,
        "kustomization/users",
        "kustomization/earlier",
        "--yes",
    ];
    // The earlier run: its first wave times out and leaves both stacks suspended.
    let earlier = stack(&[&targets[..], &["--timeout", "2s"]].concat()).expect_code(5);
    for name in ["users", "earlier"] {
        assert_eq!(
            field("kustomization", &n, name, ".spec.suspend"),
            "true",
            "{}",
            earlier.stderr
        );
    }
    let suspend = |value: bool| {
        let patch = format!(r#"{{"spec":{{"suspend":{value}}}}}"#);
        let patched = kubectl(&[
            "patch",
            "kustomization",
            "users",
            "-n",
            &n,
            "--type",
            "merge",
            "-p",
            &patch,
        ]);
        assert_eq!(patched.code, 0, "{}", patched.stderr);
    };
    suspend(false); // flux resume users
    suspend(true); // flux suspend users
    assert!(
        !field("kustomization", &n, "users", ".metadata.annotations").is_empty(),
        "the earlier run's annotation is still there"
    );
    for name in ["users", "earlier"] {
        release_finalizers(&format!("configmap/{name}-slow"), &n);
    }
    let run = stack(&targets);
    assert!(
        exists("configmap", Some(&n), "users-cm"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stderr.contains("is suspended (spec.suspend=true)"),
        "{}",
        run.stderr
    );
    assert!(
        !exists("configmap", Some(&n), "earlier-cm"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(!exists("kustomization", Some(&n), "earlier"), "{}", run.stderr);
}

/// Issue 24, membership review 8, finding A: members that are tracking objects themselves (a
/// HelmRelease, a kpt inventory ConfigMap) relabelled mid-run to another live Kustomization are
/// dropped by the re-check, as a plain ConfigMap is: kustomize-controller deletes only what still
/// carries its owner labels (fluxcd/pkg `ssa/manager_delete.go`, `DeleteOptions.Inclusions`).
#[test]
fn a_tracking_object_member_relabelled_since_the_plan_is_dropped() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("relabeltrk");
    let n = ns.0.clone();
    let labels = flux_labels("k5", &n);
    apply(&format!(
        "{}{}apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: child, namespace: {n}, labels: {labels}}}\nspec: {{interval: 10m, chart: {{spec: {{chart: c}}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inv\n  namespace: {n}\n  labels:\n    kustomize.toolkit.fluxcd.io/name: k5\n    kustomize.toolkit.fluxcd.io/namespace: {n}\n    cli-utils.sigs.k8s.io/inventory-id: inv5\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {n}\n  labels: {labels}\n  finalizers: [{HOLD}]\n  annotations: {{config.kubernetes.io/depends-on: 'helm.toolkit.fluxcd.io/namespaces/{n}/HelmRelease/child,/namespaces/{n}/ConfigMap/inv,/namespaces/{n}/ConfigMap/plain'}}\n",
        ks("k5", &n),
        ks("other", &n)
    ));
    record_flux_inventories(&n);
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/k5", "--yes", "--timeout", "15s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "slow")
    });
    for object in ["helmrelease/child", "configmap/inv", "configmap/plain"] {
        let relabelled = kubectl(&[
            "label",
            object,
            "-n",
            &n,
            "kustomize.toolkit.fluxcd.io/name=other",
            "--overwrite",
        ]);
        assert_eq!(relabelled.code, 0, "{}", relabelled.stderr);
    }
    release_finalizers("configmap/slow", &n);
    let run = finish(child);
    for (kind, name) in [("helmrelease", "child"), ("configmap", "inv"), ("configmap", "plain")] {
        assert!(exists(kind, Some(&n), name), "{kind}/{name} deleted: {}", run.stderr);
    }
    assert!(run.stderr.contains("changed since the plan"), "{}", run.stderr);
}

/// Issue 24, membership review 8, finding B: a version a Kustomization's inventory records
/// stops being served mid-run (its CRD's `served: false`). kustomize-controller then cannot map
/// that entry and leaves the object (fluxcd/pkg `ssa/manager_delete.go` `DeleteAll`), as the
/// plan says when the version is not served at plan time: the re-check reads the records again
/// with the versions served now, and the Widget stays.
#[test]
fn a_recorded_version_no_longer_served_since_the_plan_keeps_its_object() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("unserved");
    let n = ns.0.clone();
    let group = format!("{}.example.com", unique("unserved"));
    let crd = format!("widgets.{group}");
    let versions = |beta_served: bool| {
        format!("  versions:\n  - name: v1beta1\n    served: {beta_served}\n    storage: false\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n  - name: v1\n    served: true\n    storage: true\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n")
    };
    let definition = |beta_served: bool| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {crd}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}\n{}",
            versions(beta_served)
        )
    };
    apply(&definition(true));
    wait_established(&["crd", &crd], &crd);
    let labels = flux_labels("ks", &n);
    apply(&format!(
        "{}apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: w1, namespace: {n}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {n}\n  labels: {labels}\n  finalizers: [{HOLD}]\n  annotations: {{config.kubernetes.io/depends-on: '{group}/namespaces/{n}/Widget/w1'}}\n",
        ks("ks", &n)
    ));
    patch_status(
        "kustomization",
        "ks",
        &n,
        &format!(
            r#"{{"status":{{"inventory":{{"entries":[{{"id":"{n}_w1_{group}_Widget","v":"v1beta1"}},{{"id":"{n}_slow__ConfigMap","v":"v1"}}]}}}}}}"#
        ),
    );
    let mut child = spawn_stack(&["prune", "-n", &n, "kustomization/ks", "--yes", "--timeout", "20s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "slow")
    });
    apply(&definition(false));
    let gone = (0..60).any(|_| {
        let listed = kubectl(&["get", "--raw", &format!("/apis/{group}/v1beta1")]);
        let served = listed.code == 0 && listed.stdout.contains("widgets");
        if served {
            std::thread::sleep(Duration::from_millis(250));
        }
        !served
    });
    assert!(gone, "v1beta1 of {group} is still served");
    release_finalizers("configmap/slow", &n);
    let run = finish(child);
    let still = kubectl(&["get", &format!("widgets.{group}"), "w1", "-n", &n]);
    assert_eq!(still.code, 0, "the Widget was deleted: {}", run.stderr);
    kubectl(&["delete", "crd", &crd, "--wait=false"]);
}

/// Order review 19, P, at the re-check: stack `a`'s claim `data` (after `holder`, which a
/// finalizer holds, so wave 1 waits) is bound to a volume a provisioner made for it, with
/// reclaim policy `Delete`: at plan time the volume goes with its claim. While wave 1 waits, the
/// volume is given a keep marker: deleting the claim would now make the PV controller delete
/// it. The re-check drops the claim (the plan's own rule, `cascade::volumes`).
#[test]
fn a_volume_keep_marked_since_the_plan_keeps_its_claim() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newkeptpv");
    let n = ns.0.clone();
    let la = flux_labels("a", &n);
    let volume = ClusterObject("persistentvolume", unique("r19p-pv"));
    apply(&format!(
        r#"{a}apiVersion: v1
kind: ConfigMap
metadata:
  name: holder
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/PersistentVolumeClaim/data}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data, namespace: {n}, labels: {la}}}
spec: {{storageClassName: "", volumeName: {v}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}
"#,
        a = ks("a", &n),
        v = volume.1,
    ));
    let claim_uid = uid_of("persistentvolumeclaim", Some(&n), "data");
    apply(&format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {v}, annotations: {{pv.kubernetes.io/provisioned-by: csi.example.com}}}}\nspec: {{capacity: {{storage: 1Mi}}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Delete, storageClassName: \"\", hostPath: {{path: /tmp/{v}}}, claimRef: {{namespace: {n}, name: data, uid: {claim_uid}}}}}\n",
        v = volume.1
    ));
    record_flux_inventories(&n);
    let run = teardown_a_changing(&n, || {
        kubectl_ok(&[
            "annotate",
            "persistentvolume",
            &volume.1,
            "helm.sh/resource-policy=keep",
        ]);
    })
    .expect_code(5);
    let stderr = &run.stderr;
    assert!(!exists("configmap", Some(&n), "holder"), "{stderr}");
    assert!(exists("persistentvolumeclaim", Some(&n), "data"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "dropped: PersistentVolumeClaim/{n}/data: its deletion would make the PV controller delete PersistentVolume/{}",
            volume.1
        )) && stderr.contains("found by the re-check"),
        "{stderr}"
    );
}

/// Order review 22, F1, at the re-check: stack `a`'s Namespace `tenant` (after `holder`, so
/// wave 1 waits) holds an untracked claim, accepted as its victim (`--allow-cascade`), bound to
/// a volume a provisioner made for it. While wave 1 waits, the volume is given a keep marker:
/// deleting the Namespace would now take the claim and make the PV controller delete the
/// volume. The re-check drops the Namespace.
#[test]
fn a_volume_keep_marked_since_the_plan_keeps_the_namespace_of_its_claim() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("newkeptpvns");
    let n = ns.0.clone();
    let tenant = Namespace::new("newkeptpvns-tenant");
    let t = tenant.0.clone();
    let la = flux_labels("a", &n);
    let volume = ClusterObject("persistentvolume", unique("r22f1-pv"));
    kubectl_ok(&[
        "label",
        "namespace",
        &t,
        "kustomize.toolkit.fluxcd.io/name=a",
        &format!("kustomize.toolkit.fluxcd.io/namespace={n}"),
    ]);
    apply(&format!(
        r#"{a}apiVersion: v1
kind: ConfigMap
metadata:
  name: holder
  namespace: {n}
  labels: {la}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: /Namespace/{t}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data, namespace: {t}}}
spec: {{storageClassName: "", volumeName: {v}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}
"#,
        a = ks("a", &n),
        v = volume.1,
    ));
    let claim_uid = uid_of("persistentvolumeclaim", Some(&t), "data");
    apply(&format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {v}, annotations: {{pv.kubernetes.io/provisioned-by: csi.example.com}}}}\nspec: {{capacity: {{storage: 1Mi}}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Delete, storageClassName: \"\", hostPath: {{path: /tmp/{v}}}, claimRef: {{namespace: {t}, name: data, uid: {claim_uid}}}}}\n",
        v = volume.1
    ));
    record_flux_inventories(&n);
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/a",
        "--allow-cascade",
        "--yes",
        "--timeout",
        "60s",
    ]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "holder")
    });
    kubectl_ok(&[
        "annotate",
        "persistentvolume",
        &volume.1,
        "helm.sh/resource-policy=keep",
    ]);
    release_finalizers("configmap/holder", &n);
    let run = finish(child).expect_code(5);
    let stderr = &run.stderr;
    assert!(exists("namespace", None, &t), "{stderr}");
    assert!(exists("persistentvolumeclaim", Some(&t), "data"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "dropped: Namespace/{t}: its deletion would make the PV controller delete PersistentVolume/{}",
            volume.1
        )),
        "{stderr}"
    );
}
