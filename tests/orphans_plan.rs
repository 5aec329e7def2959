//! End-to-end test: a saved orphan plan (`prune --plan-out` with `-f`) runs only against the
//! desired set it was made from (issue 11's limit: the saved plan did not record it).

mod common;

use common::*;

/// A plan saved from one repository and run with another: refused (exit 4), nothing deleted,
/// even when the orphans would be the same; run with the same repository, it deletes the orphan.
#[test]
fn a_saved_orphan_plan_runs_only_against_its_own_desired_set() {
    let _logs = start();
    let ns = Namespace::new("plan-desired");
    let n = &ns.0;
    let ks = unique("apps");
    let labels = flux_labels(&ks, n);
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: a, namespace: {n}, labels: {labels}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: b, namespace: {n}, labels: {labels}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: old, namespace: {n}, labels: {labels}}}
"#
    ));
    let reviewed = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
    );
    // Another commit: the same orphan (`old`), but a desired set nobody reviewed.
    let other = temp_file(
        "repo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    let plan = std::env::temp_dir().join(format!("{}.json", unique("orphan-plan")));
    let plan = plan.to_str().unwrap();
    let tracker = format!("flux={ks}");
    let prune = |repo: &std::path::Path, extra: &[&str]| {
        let args = [
            &["prune", "-n", n, "--tracker", &tracker, "-f", repo.to_str().unwrap()][..],
            extra,
        ]
        .concat();
        stack(&args)
    };
    prune(&reviewed, &["--plan-out", plan]).expect_code(0);
    let document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap();
    assert_eq!(
        document["request"]["desired"].as_str().map(str::len),
        Some(64),
        "the plan records the desired set's digest: {document}"
    );

    let refused = prune(&other, &["--plan", plan, "--yes"]).expect_code(4);
    assert!(
        refused.stderr.contains("changed: the desired set given now"),
        "{}",
        refused.stderr
    );
    assert!(exists("configmap", Some(n), "old"), "refused: nothing deleted");

    prune(&reviewed, &["--plan", plan, "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "old"));
    assert!(exists("configmap", Some(n), "a") && exists("configmap", Some(n), "b"));
}
