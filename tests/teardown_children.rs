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
