//! First use as a kubectl user expects (issue 27): no silent "nothing found" (items 3, 4), every
//! stack a teardown pulled in named above the prompt (item 9).

mod common;

use common::*;

/// Item 4: `-l` on objects no tool tracks says how many matched and names `--untracked`; a
/// skipped object names `--show-skipped`; `prune` says the same after "Nothing to prune".
#[test]
fn a_selector_on_untracked_objects_is_not_a_silent_nothing() {
    let _logs = start();
    let n = Namespace::new("ux27-untracked");
    let app = unique("app");
    apply(&format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: plain-a, namespace: {n}, labels: {{app: {app}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: plain-b, namespace: {n}, labels: {{app: {app}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kept
  namespace: {n}
  labels: {{app: {app}, kapp.k14s.io/app: "{app}"}}
  annotations: {{kapp.k14s.io/delete-strategy: orphan}}
"#,
        n = n.0
    ));
    let desired = temp_file(
        "ux27-desired.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: wanted, namespace: {}}}\n",
            n.0
        ),
    );
    let selector = format!("app={app}");
    let file = desired.display().to_string();
    let orphans = stack(&["orphans", "-n", &n.0, "-l", &selector, "-f", &file]).expect_code(0);
    let said = &orphans.stderr;
    assert!(
        said.contains(&format!("No orphans among 1 tracked object(s) in namespace {}", n.0)),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "2 object(s) matched -l {selector} but no GitOps tool tracks them"
        )),
        "{said}"
    );
    assert!(said.contains("--untracked"), "{said}");
    assert!(said.contains("1 object(s) not desired were skipped"), "{said}");
    assert!(said.contains("--show-skipped"), "{said}");
    let prune = stack(&["prune", "-n", &n.0, "-l", &selector, "-f", &file, "--yes"]).expect_code(0);
    assert!(
        prune
            .stderr
            .contains("Nothing to prune: no orphans among 1 tracked object(s)"),
        "{}",
        prune.stderr
    );
    assert!(prune.stderr.contains("2 object(s) matched"), "{}", prune.stderr);
    assert!(prune.stderr.contains("--untracked"), "{}", prune.stderr);
    // With --untracked, they are compared: both are orphans.
    let untracked = stack(&["orphans", "-n", &n.0, "-l", &selector, "-f", &file, "--untracked"]);
    assert_eq!(untracked.code, 1, "{}", untracked.stderr);
    assert!(untracked.stdout.contains("plain-a") && untracked.stdout.contains("plain-b"));
}

/// Item 3: without `-A`, the namespaces checked are said, and the namespaces that the named
/// stack's record and the desired set name outside them are warned about.
#[test]
fn a_record_outside_the_namespace_checked_is_warned_about() {
    let _logs = start();
    ensure_flux_crds();
    let f = Namespace::new("ux27-flux");
    let shop = Namespace::new("ux27-shop");
    let here = Namespace::new("ux27-here");
    let labels = flux_labels("usage", &f.0);
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: storefront, namespace: {shop}, labels: {labels}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {shop}, labels: {labels}}}
"#,
        f = f.0,
        shop = shop.0
    ));
    let ids = [
        format!("{}_storefront__ConfigMap", shop.0),
        format!("{}_settings__ConfigMap", shop.0),
    ];
    set_flux_inventory("usage", &f.0, &ids);
    let next = temp_file(
        "ux27-next.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {}}}\n",
            shop.0
        ),
    );
    let tracker = format!("flux=usage.{}", f.0);
    let file = next.display().to_string();
    let run = stack(&["orphans", "-n", &here.0, "--tracker", &tracker, "-f", &file]).expect_code(0);
    let said = &run.stderr;
    assert!(
        said.contains(&format!("No orphans among 0 tracked object(s) in namespace {}", here.0)),
        "{said}"
    );
    assert!(
        said.contains(&format!("names objects in namespace(s) {}", shop.0))
            && said.contains(&format!("add -A, or -n {}", shop.0)),
        "{said}"
    );
    // With -A, the orphan is found and nothing is warned about.
    let all = stack(&["orphans", "-A", "--tracker", &tracker, "-f", &file]);
    assert_eq!(all.code, 1, "{}", all.stderr);
    assert!(all.stdout.contains("storefront"), "{}", all.stdout);
    assert!(!all.stderr.contains("names objects in namespace"), "{}", all.stderr);
}

/// Item 9: a teardown names every stack it pulled in (a dependent), and why, in the summary
/// right above the prompt.
#[test]
fn a_teardown_names_the_stacks_it_pulled_in() {
    let _logs = start();
    ensure_flux_crds();
    let f = Namespace::new("ux27-pull");
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: operator, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {f}}}
spec: {{prune: true, dependsOn: [{{name: operator}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {f}, labels: {labels}}}
"#,
        f = f.0,
        labels = flux_labels("usage", &f.0)
    ));
    let run = stack(&["prune", "-n", &f.0, "kustomization/operator", "--dry-run=client"]).expect_code(0);
    let said = &run.stderr;
    let pulled = said
        .find("Pulled in: 1 object(s) not named")
        .unwrap_or_else(|| panic!("{said}"));
    assert!(said.find("Plan: ").is_some_and(|plan| plan < pulled), "{said}");
    let line = said[pulled..].lines().nth(1).unwrap_or_default();
    assert!(
        line.contains(&format!("{}/usage", f.0)) && line.contains("depends on") && line.contains("operator"),
        "{said}"
    );
    // Nothing between the list and the end of the summary (where the prompt goes).
    assert!(said[pulled..].lines().count() <= 3, "{said}");
}
