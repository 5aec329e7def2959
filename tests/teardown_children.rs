//! What a controller made goes with its owner's wave (issue 14, rule 5): after a Deployment is
//! deleted, the next wave waits until its ReplicaSet (and Pods) are gone too, so that nothing
//! they use goes first.

mod common;

use std::time::Duration;

use common::*;

const HOLD: &str = "stack-test.example.com/hold";

#[test]
fn the_next_wave_waits_for_what_the_controller_of_a_deleted_owner_made() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("ctlchild");
    let n = &ns.0;
    let labels = flux_labels("a", n);
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: a, namespace: {n}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {n}, labels: {labels}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {n}
  labels: {labels}
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/settings}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: example.invalid/web:1}}]}}
"#
    ));
    // What the deployment controller would make (this cluster runs no deployment controller):
    // a ReplicaSet it controls, held by a finalizer once the garbage collector deletes it.
    let uid = uid_of("deployment", Some(n), "web");
    apply(&format!(
        r#"apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-1
  namespace: {n}
  finalizers: [{HOLD}]
  ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: web, uid: {uid}, controller: true, blockOwnerDeletion: true}}]
spec:
  replicas: 0
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: example.invalid/web:1}}]}}
"#
    ));
    let replica_set = "replicaset/web-1".to_string();
    record_flux_inventories(n);
    let run = stack(&["prune", "-n", n, "kustomization/a", "--yes", "--timeout", "10s"]).expect_code(5);
    let stderr = &run.stderr;
    assert!(!exists("deployment", Some(n), "web"), "{stderr}");
    assert!(
        exists("configmap", Some(n), "settings"),
        "the next wave must wait\n{stderr}"
    );
    assert!(exists("kustomization", Some(n), "a"), "{stderr}");
    let rs_name = "web-1";
    assert!(stderr.contains(rs_name), "the blocker is named\n{stderr}");
    release_finalizers(&replica_set, n);
    // Run again: the ReplicaSet is gone, the rest goes.
    wait_until(Duration::from_secs(30), || !exists("replicaset", Some(n), rs_name));
    stack(&["prune", "-n", n, "kustomization/a", "--yes", "--timeout", "30s"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "settings"));
}

/// Applies stack `a` in `n`: ConfigMap `settings`, and `first` (YAML of one object that depends on
/// `settings`, so it goes in the wave before it). Returns the stack's labels.
fn stack_with_first(n: &str, first: &str) -> String {
    ensure_flux_crds();
    let labels = flux_labels("a", n);
    let first = first.replace("LABELS", &labels);
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: a, namespace: {n}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {n}, labels: {labels}}}
---
{first}
"#
    ));
    labels
}

/// An untracked ConfigMap `held` in `n`, owned (not as its controller) by each of `owners`
/// (`kind`, `apiVersion`, `name`, `uid`), held by a finalizer once the garbage collector deletes it.
fn held_child(n: &str, owners: &[(&str, &str, &str, String)]) {
    let refs: Vec<String> = owners
        .iter()
        .map(|(kind, api_version, name, uid)| {
            format!("{{apiVersion: {api_version}, kind: {kind}, name: {name}, uid: {uid}}}")
        })
        .collect();
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {n}, finalizers: [{HOLD}], ownerReferences: [{}]}}\n",
        refs.join(", ")
    ));
}

/// Runs the teardown of `a` in `n` and asserts the garbage collector's cascade is named and
/// refused (an untracked `held` no controller made is a victim of its owner), then, with
/// `--allow-cascade`, waited for: `settings` (the next wave) stays while `held` hangs, and the
/// run says so (exit 5).
fn assert_next_wave_waits_for_held(n: &str) {
    record_flux_inventories(n);
    let refused = stack(&["prune", "-n", n, "kustomization/a", "--yes"]).expect_code(4);
    assert!(
        refused.stderr.contains(&format!("ConfigMap/{n}/held")),
        "the owner's victim is named\n{}",
        refused.stderr
    );
    assert!(exists("configmap", Some(n), "settings"));
    let run = stack(&[
        "prune",
        "-n",
        n,
        "kustomization/a",
        "--yes",
        "--allow-cascade",
        "--timeout",
        "10s",
    ])
    .expect_code(5);
    let stderr = &run.stderr;
    assert!(
        exists("configmap", Some(n), "settings"),
        "the next wave must wait for what the garbage collector deletes\n{stderr}"
    );
    assert!(stderr.contains("held"), "the blocker is named\n{stderr}");
    release_finalizers("configmap/held", n);
    wait_until(Duration::from_secs(30), || !exists("configmap", Some(n), "held"));
    stack(&[
        "prune",
        "-n",
        n,
        "kustomization/a",
        "--yes",
        "--allow-cascade",
        "--timeout",
        "30s",
    ])
    .expect_code(0);
    assert!(!exists("configmap", Some(n), "settings"));
}

/// Review 3, R1: the garbage collector deletes an object once every owner of it is gone, whether
/// or not an owner is its controller. A plain owner reference is waited for as a controller's.
#[test]
fn the_next_wave_waits_for_what_a_deleted_owner_owns_without_controlling_it() {
    let _logs = start();
    let ns = Namespace::new("plainowner");
    let n = &ns.0;
    stack_with_first(
        n,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: first, namespace: {n}, labels: LABELS, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/settings}}}}\n"
        ),
    );
    let owner = uid_of("secret", Some(n), "first");
    held_child(n, &[("Secret", "v1", "first", owner)]);
    assert_next_wave_waits_for_held(n);
}

/// Review 3, R1: a cluster-scoped owner's dependents can be in any namespace; a wave that deletes
/// a tracked ClusterRole waits for the namespaced object it owns.
#[test]
fn the_next_wave_waits_for_what_a_deleted_cluster_scoped_owner_owns() {
    let _logs = start();
    let ns = Namespace::new("clusterowner");
    let n = &ns.0;
    let role = format!("{n}-owner");
    stack_with_first(
        n,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {role}, labels: LABELS, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/settings}}}}\nrules: []\n"
        ),
    );
    let owner = uid_of("clusterrole", None, &role);
    held_child(n, &[("ClusterRole", "rbac.authorization.k8s.io/v1", &role, owner)]);
    assert_next_wave_waits_for_held(n);
}

/// The all-owners rule: an object with a second owner that stays is not deleted by the garbage
/// collector, so the next wave does not wait for it.
#[test]
fn an_object_with_a_live_second_owner_is_not_waited_for() {
    let _logs = start();
    let ns = Namespace::new("liveowner");
    let n = &ns.0;
    stack_with_first(
        n,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: first, namespace: {n}, labels: LABELS, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/settings}}}}\n"
        ),
    );
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: live, namespace: {n}}}\n"
    ));
    let owner = uid_of("secret", Some(n), "first");
    let live = uid_of("configmap", Some(n), "live");
    held_child(
        n,
        &[("Secret", "v1", "first", owner), ("ConfigMap", "v1", "live", live)],
    );
    record_flux_inventories(n);
    let run = stack(&["prune", "-n", n, "kustomization/a", "--yes", "--timeout", "20s"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "settings"), "{}", run.stderr);
    assert!(exists("configmap", Some(n), "held"), "{}", run.stderr);
    release_finalizers("configmap/held", n);
}

/// Order review 32, F1 (a teardown that could never finish): the garbage collector never deletes
/// a cluster-scoped object by an owner reference to a namespaced kind (kubernetes
/// `garbagecollector.go`, `namespacedOwnerOfClusterScopedObjectErr`: an `OwnerRefInvalidNamespace`
/// event, since v1.20). An untracked ClusterRole naming the planned ConfigMap as its owner was
/// counted by the re-check (and, with a cluster-scoped object planned, by the plan) as a new
/// victim, and the ConfigMap was dropped on every attempt (exit 5). It is no victim: the
/// teardown completes, and the ClusterRole stays, as the garbage collector leaves it.
#[test]
fn a_cluster_scoped_object_naming_a_namespaced_owner_is_no_victim() {
    let _logs = start();
    let ns = Namespace::new("invalidowner");
    let n = &ns.0;
    let first = format!("{n}-first");
    let ignored = format!("{n}-ignored");
    stack_with_first(
        n,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {first}, labels: LABELS, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/settings}}}}\nrules: []\n"
        ),
    );
    let owner = uid_of("configmap", Some(n), "settings");
    // Untracked, and another stack's: a node of the plan's graph, whose owner chain has the
    // same rule.
    let tracked = format!("{n}-tracked");
    let other = flux_labels("b", n);
    apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {ignored}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: settings, uid: {owner}}}]}}\nrules: []\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {tracked}, labels: {other}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: settings, uid: {owner}}}]}}\nrules: []\n"
    ));
    record_flux_inventories(n);
    let planned = stack(&["prune", "-n", n, "kustomization/a", "--dry-run", "-o", "json"]).expect_code(0);
    assert!(
        !planned.stdout.contains(&ignored) && !planned.stdout.contains(&tracked),
        "no victim named\n{}",
        planned.stdout
    );
    let run = stack(&["prune", "-n", n, "kustomization/a", "--yes", "--timeout", "30s"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "settings"), "{}", run.stderr);
    assert!(!exists("clusterrole", None, &first), "{}", run.stderr);
    // The garbage collector has had its chance (it deletes a dependent of a deleted owner in
    // well under a second here): the ClusterRole stays.
    std::thread::sleep(Duration::from_secs(3));
    assert!(exists("clusterrole", None, &ignored), "{}", run.stderr);
    assert!(exists("clusterrole", None, &tracked), "{}", run.stderr);
    kubectl(&["delete", "clusterrole", &ignored, &tracked, "--ignore-not-found"]);
}
