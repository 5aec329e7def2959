//! The token Secret of a ServiceAccount the plan deletes dies with it (the token controller,
//! kubernetes `pkg/controller/serviceaccount/tokens_controller.go`, deletes a
//! `kubernetes.io/service-account-token` Secret whose ServiceAccount is gone): it is no cascade
//! victim of the planned Namespace, so a teardown is not refused for it. An untracked Secret
//! beside it still is. The test cluster runs the token controller, so the token appears by itself.

mod common;

use std::time::Duration;

use common::*;

/// Stack `s` in Flux Namespace `f`: a Namespace `app` holding ServiceAccount `builder`, both
/// applied by `s`. Returns the name of `builder`'s token Secret once the token controller made it.
fn seed_stack_with_account(f: &str, app: &str) -> String {
    let s = flux_labels("s", f);
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: s, namespace: {f}}}
spec: {{}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {app}, labels: {s}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: builder, namespace: {app}, labels: {s}}}
"#
    ));
    let mut token = String::new();
    wait_until(Duration::from_secs(60), || {
        token = field("serviceaccount", app, "builder", ".secrets[0].name");
        !token.is_empty()
    });
    assert!(exists("secret", Some(app), &token), "token Secret {token} not made");
    token
}

#[test]
fn the_token_of_a_torn_down_service_account_does_not_refuse_the_teardown() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("tok");
    let f = &flux.0;
    let app = unique("tok-app");
    let token = seed_stack_with_account(f, &app);
    record_flux_inventories(f);
    let run = stack(&["prune", "-n", f, "kustomization/s", "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(
        !run.stdout.contains(&token) && !run.stderr.contains(&token),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    wait_until(Duration::from_secs(60), || !exists("namespace", None, &app));
    assert!(!exists("secret", Some(&app), &token));
    assert!(!exists("kustomization", Some(f), "s"));
}

#[test]
fn an_untracked_secret_beside_the_token_still_refuses_the_teardown() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("tokc");
    let f = &flux.0;
    let app = unique("tokc-app");
    let token = seed_stack_with_account(f, &app);
    create(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: handmade, namespace: {app}}}\n"
    ));
    record_flux_inventories(f);
    let refused = stack(&["prune", "-n", f, "kustomization/s", "--yes", "--timeout", "60s"]).expect_code(4);
    let shown = format!("{}\n{}", refused.stdout, refused.stderr);
    assert!(shown.contains(&format!("Secret/{app}/handmade (untracked)")), "{shown}");
    assert!(!shown.contains(&token), "{shown}");
    assert!(exists("namespace", None, &app));
    assert!(exists("secret", Some(&app), "handmade"));
    assert!(exists("secret", Some(&app), &token));
    assert!(exists("serviceaccount", Some(&app), "builder"));
    let _ = kubectl(&["delete", "namespace", &app, "--wait=false"]);
}

/// Order review 7, gap 4: an untracked Opaque Secret that carries the name and UID annotations
/// of the ServiceAccount the teardown deletes is no token Secret (the token controller neither
/// made it nor deletes it): the Namespace would take it, so it is named and the teardown refused.
#[test]
fn an_opaque_secret_with_a_service_accounts_annotations_still_refuses_the_teardown() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("tokf");
    let f = &flux.0;
    let app = unique("tokf-app");
    let token = seed_stack_with_account(f, &app);
    let uid = uid_of("serviceaccount", Some(&app), "builder");
    create(&format!(
        r#"apiVersion: v1
kind: Secret
type: Opaque
metadata:
  name: forged
  namespace: {app}
  annotations: {{kubernetes.io/service-account.name: builder, kubernetes.io/service-account.uid: "{uid}"}}
"#
    ));
    record_flux_inventories(f);
    let refused = stack(&["prune", "-n", f, "kustomization/s", "--yes", "--timeout", "60s"]);
    let shown = format!("{}\n{}", refused.stdout, refused.stderr);
    assert_eq!(refused.code, 4, "{shown}");
    assert!(shown.contains(&format!("Secret/{app}/forged (untracked)")), "{shown}");
    assert!(!shown.contains(&token), "{shown}");
    assert!(exists("namespace", None, &app));
    assert!(exists("secret", Some(&app), "forged"));
    let _ = kubectl(&["delete", "namespace", &app, "--wait=false"]);
}
