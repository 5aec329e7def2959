//! `kubectl stack stuck` and `unstick` on the real cluster.

mod common;

use std::time::Duration;

use common::*;

fn stuck_item<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["stuck"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} not stuck: {json}"))
}

fn diagnoses(item: &serde_json::Value) -> String {
    item["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_helmrelease_stuck_on_a_missing_kubeconfig_secret_is_diagnosed_then_unstuck_with_a_backup() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("hr");
    let n = &ns.0;
    apply(&format!(
        r#"
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: remote-app, namespace: {n}, finalizers: [finalizers.fluxcd.io]}}
spec:
  interval: 10m
  chart: {{spec: {{chart: podinfo, sourceRef: {{kind: HelmRepository, name: podinfo}}}}}}
  kubeConfig: {{secretRef: {{name: remote-kubeconfig}}}}
"#
    ));
    assert_eq!(
        kubectl(&["delete", "helmrelease", "remote-app", "-n", n, "--wait=false"]).code,
        0
    );

    let found = stack(&["stuck", "-n", n, "-o", "json"]).expect_code(1);
    let json = found.json();
    let item = stuck_item(&json, "remote-app");
    assert_eq!(item["finalizers"], serde_json::json!(["finalizers.fluxcd.io"]));
    let why = diagnoses(item);
    assert!(
        why.contains(&format!("kubeConfig Secret {n}/remote-kubeconfig is missing")),
        "{why}"
    );

    let text = stack(&["stuck", "-n", n, "helmreleases/remote-app"]).expect_code(1);
    assert!(
        text.stdout.contains("finalizers:   finalizers.fluxcd.io"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("kubeConfig Secret"), "{}", text.stdout);

    // No --yes without a terminal: refused, nothing changed.
    stack(&[
        "unstick",
        "-n",
        n,
        "helmrelease/remote-app",
        "--finalizer",
        "finalizers.fluxcd.io",
    ])
    .expect_code(4);
    assert!(exists("helmrelease", Some(n), "remote-app"));

    let backups = std::env::temp_dir().join(unique("backups"));
    let unstuck = stack(&[
        "unstick",
        "-n",
        n,
        "helmrelease/remote-app",
        "--finalizer",
        "finalizers.fluxcd.io",
        "--yes",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    assert!(
        unstuck.stderr.contains("Flux does not prune"),
        "what may be lost is shown: {}",
        unstuck.stderr
    );
    assert!(
        unstuck.stderr.contains(&backups.display().to_string()),
        "the backup path is printed: {}",
        unstuck.stderr
    );
    wait_until(Duration::from_secs(20), || {
        !exists("helmrelease", Some(n), "remote-app")
    });

    let runs: Vec<_> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "one directory per run: {runs:?}");
    let files: Vec<_> = std::fs::read_dir(&runs[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    assert!(
        unstuck.stderr.contains(&files[0].display().to_string()),
        "each backup's path is printed: {}",
        unstuck.stderr
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // The backup re-creates the object.
    let restored = kubectl(&["apply", "-f", files[0].to_str().unwrap()]);
    assert_eq!(restored.code, 0, "{}", restored.stderr);
    assert!(exists("helmrelease", Some(n), "remote-app"));
    let spec = kubectl(&[
        "get",
        "helmrelease",
        "remote-app",
        "-n",
        n,
        "-o",
        "jsonpath={.spec.kubeConfig.secretRef.name}",
    ]);
    assert_eq!(spec.stdout, "remote-kubeconfig");
    release_finalizers("helmrelease/remote-app", n);
}

#[test]
fn a_custom_resource_whose_operator_stack_is_gone_and_unknown_finalizers_are_diagnosed() {
    let _logs = start();
    ensure_flux_crds();
    ensure_crds();
    let ns = Namespace::new("orph");
    let n = &ns.0;
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {n}}}
spec: {{dependsOn: [{{name: operator}}]}}
---
apiVersion: stack-test.example.com/v1
kind: Widget
metadata:
  name: orders
  namespace: {n}
  labels: {{kustomize.toolkit.fluxcd.io/name: usage, kustomize.toolkit.fluxcd.io/namespace: {n}}}
  finalizers: [stack-test.example.com/cleanup, orphaned.example.org/cleanup]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: not-deleted, namespace: {n}}}
"#
    ));
    assert_eq!(
        kubectl(&["delete", "widget", "orders", "-n", n, "--wait=false"]).code,
        0
    );
    let found = stack(&["stuck", "-n", n, "-o", "json"]).expect_code(1);
    let json = found.json();
    let in_namespace = json["stuck"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["namespace"] == n.as_str())
        .count();
    assert_eq!(in_namespace, 1, "only what is being deleted: {json}");
    let why = diagnoses(stuck_item(&json, "orders"));
    assert!(
        why.contains(&format!(
            "dependsOn Kustomization.kustomize.toolkit.fluxcd.io/{n}/operator, which is gone"
        )),
        "{why}"
    );
    assert!(
        why.contains("finalizer orphaned.example.org/cleanup: no installed API group"),
        "{why}"
    );
    assert!(
        !why.contains("finalizer stack-test.example.com/cleanup: no installed"),
        "a served group accounts for it: {why}"
    );
    assert!(
        why.contains("belongs to the controller of CRD widgets.stack-test.example.com"),
        "{why}"
    );
    assert_eq!(stuck_item(&json, "orders")["trackedBy"], format!("flux:{n}/usage"));

    // Not being deleted: refused unless --force.
    let refused = stack(&["unstick", "-n", n, "configmap/not-deleted", "--all-finalizers", "--yes"]).expect_code(4);
    assert!(refused.stderr.contains("not being deleted"), "{}", refused.stderr);

    // Server dry run changes nothing.
    let backups = std::env::temp_dir().join(unique("dry"));
    stack(&[
        "unstick",
        "-n",
        n,
        "widget/orders",
        "--all-finalizers",
        "--dry-run=server",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    assert!(exists("widget", Some(n), "orders"));
    stack(&[
        "unstick",
        "-n",
        n,
        "widget/orders",
        "--all-finalizers",
        "--yes",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    wait_until(Duration::from_secs(20), || !exists("widget", Some(n), "orders"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_test_op_refuses_when_finalizers_changed_in_between() {
    let _logs = start();
    let ns = Namespace::new("race");
    let n = ns.0.clone();
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: raced, namespace: {n}, finalizers: [stack-test.example.com/a, stack-test.example.com/b]}}\n"
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "raced", "-n", &n, "--wait=false"]).code,
        0
    );

    let args = kubectl_stack::client::ConnectOptions {
        kubeconfig: Some(cluster().admin.clone()),
        ..Default::default()
    };
    let connection = kubectl_stack::client::connect(&args).await.unwrap();
    let catalog = kubectl_stack::discovery::discover(&connection.client).await.unwrap();
    let kind = catalog.get("", "ConfigMap").unwrap().clone();
    let api = kubectl_stack::collect::api_for(&connection.client, &kind, Some(&n));
    let read = api.get("raced").await.unwrap();
    let removal = kubectl_stack::finalize::Removal::Named(vec!["stack-test.example.com/a".into()]);
    let change = kubectl_stack::finalize::FinalizerChange::plan(&read, false, &removal);

    // A controller finishes its own work after we read, and removes its finalizer.
    let added = kubectl(&[
        "patch",
        "configmap",
        "raced",
        "-n",
        &n,
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers/1"}]"#,
    ]);
    assert_eq!(added.code, 0, "{}", added.stderr);

    let result = kubectl_stack::finalize::apply_change(&connection.client, &kind, &read, &change, false).await;
    match result {
        Err(stopped) => {
            assert!(
                matches!(stopped.error, kubectl_stack::finalize::UnstickError::Changed),
                "{stopped:?}"
            );
            assert_eq!(stopped.done, Default::default(), "nothing was changed");
        }
        Ok(done) => panic!("a stale change went through: {done:?}"),
    }
    let now = kubectl(&[
        "get",
        "configmap",
        "raced",
        "-n",
        &n,
        "-o",
        "jsonpath={.metadata.finalizers}",
    ]);
    assert_eq!(
        now.stdout, r#"["stack-test.example.com/a"]"#,
        "our stale change must not have been applied"
    );

    // Read again: now it goes through.
    let fresh = api.get("raced").await.unwrap();
    let change = kubectl_stack::finalize::FinalizerChange::plan(&fresh, false, &kubectl_stack::finalize::Removal::All);
    kubectl_stack::finalize::apply_change(&connection.client, &kind, &fresh, &change, false)
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), || !exists("configmap", Some(&n), "raced"));
}

/// An object named on the command line that does not exist is not "gone": `stuck` and `unstick`
/// say so in the API server's words, naming the namespace looked in, and exit 3 (as a stack
/// that is not found does); what was found is still diagnosed, and unstick changes nothing.
#[test]
fn a_named_object_not_found_is_an_error_naming_the_namespace() {
    let _logs = start();
    let ns = Namespace::new("nf");
    let n = &ns.0;
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {n}, finalizers: [stack-test.example.com/hold]}}\n"
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "held", "-n", n, "--wait=false"]).code,
        0
    );

    let missing = stack(&["stuck", "-n", n, "configmap/nope"]).expect_code(3);
    assert!(
        missing
            .stderr
            .contains(&format!("error: configmaps \"nope\" not found in namespace \"{n}\"")),
        "{}",
        missing.stderr
    );
    assert!(!missing.stderr.contains("gone"), "{}", missing.stderr);
    assert!(
        missing.stderr.contains("--field-selector metadata.name=nope"),
        "{}",
        missing.stderr
    );

    // With one that is there: it is diagnosed, then the error.
    let both = stack(&["stuck", "-n", n, "configmap/held", "configmap/nope"]).expect_code(3);
    assert!(both.stdout.contains("held"), "{}", both.stdout);
    assert!(both.stderr.contains("configmaps \"nope\" not found"), "{}", both.stderr);

    // unstick: nothing is changed, not even the one that is there.
    let unstick = stack(&[
        "unstick",
        "-n",
        n,
        "configmap/held",
        "configmap/nope",
        "--all-finalizers",
        "--yes",
    ])
    .expect_code(3);
    assert!(
        unstick.stderr.contains(&format!(
            "configmaps \"nope\" not found in namespace \"{n}\"; nothing was changed"
        )),
        "{}",
        unstick.stderr
    );
    assert!(!unstick.stderr.contains("already gone"), "{}", unstick.stderr);
    assert!(exists("configmap", Some(n), "held"));
    release_finalizers("configmap/held", n);
}
