//! A teardown does exactly what its plan says (issue 17), on the real cluster: selectors that
//! would widen it are refused, the plan is re-checked before every wave, objects other stacks
//! track stay, a kept dependent keeps what it depends on, ambiguous marks are never acted on,
//! suspensions are lifted before their object's delete or reported, a re-run finishes a partial
//! teardown, and a real ApplySet parent can be named.

mod common;

use std::time::Duration;

use common::*;

const HOLD: &str = "stack-test.example.com/hold";

fn kustomization(name: &str, flux_ns: &str, extra_metadata: &str, spec: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {flux_ns}{extra_metadata}}}\nspec: {{{spec}}}\n---\n"
    )
}

#[test]
fn selectors_that_widen_a_teardown_are_usage_errors() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("sel");
    let f = &flux.0;
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: member, namespace: {f}, labels: {}}}\n",
        kustomization("s1", f, "", ""),
        flux_labels("s1", f)
    ));
    // kubectl refuses names with selectors, and `delete -l ""`: so do we, before any request.
    let named = stack(&["prune", "-n", f, "kustomization/s1", "-l", "app=web", "--yes"]).expect_code(2);
    assert!(named.stderr.contains("cannot be combined"), "{}", named.stderr);
    for empty in ["", " ", " , "] {
        let run = stack(&["prune", "-n", f, "kustomizations", "-l", empty, "--yes"]).expect_code(2);
        assert!(run.stderr.contains("empty selector"), "{}", run.stderr);
    }
    assert!(exists("kustomization", Some(f), "s1"));
    assert!(exists("configmap", Some(f), "member"));
}

/// Issue 27 item 7: a named object that exists but is no stack is refused as such (exit 2),
/// listing the kinds that are stacks, and naming the stack that tracks it, if any; `TYPE NAME`
/// (flux's and kubectl's habit) is answered with `TYPE/NAME`. Nothing is deleted.
#[test]
fn an_object_that_is_not_a_stack_and_type_name_in_two_words_are_explained() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("nas");
    let f = &flux.0;
    apply(&format!(
        "{}apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {f}}}\nspec: {{replicas: 0, selector: {{matchLabels: {{app: web}}}}, template: {{metadata: {{labels: {{app: web}}}}, spec: {{containers: [{{name: c, image: pause}}]}}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: member, namespace: {f}, labels: {}}}\n",
        kustomization("usage", f, "", ""),
        flux_labels("usage", f)
    ));

    let plain = stack(&["prune", "-n", f, "deploy/web", "--yes"]).expect_code(2);
    assert!(
        plain
            .stderr
            .contains(&format!("Deployment.apps/{f}/web is not a stack")),
        "{}",
        plain.stderr
    );
    for kind in [
        "Kustomization",
        "HelmRelease",
        "inventory",
        "ResourceGroup",
        "ApplySet parent",
    ] {
        assert!(plain.stderr.contains(kind), "{kind}: {}", plain.stderr);
    }
    assert!(!plain.stderr.contains("not found"), "{}", plain.stderr);
    assert!(
        plain.stderr.contains(&format!("kubectl delete deploy/web -n {f}")),
        "{}",
        plain.stderr
    );

    let member = stack(&["prune", "-n", f, "configmap/member", "--yes"]).expect_code(2);
    assert!(member.stderr.contains("is not a stack"), "{}", member.stderr);
    assert!(
        member
            .stderr
            .contains(&format!("kubectl stack prune -n {f} kustomization/usage")),
        "{}",
        member.stderr
    );

    let split = stack(&["prune", "-n", f, "kustomization", "usage", "--yes"]).expect_code(2);
    assert!(
        split.stderr.contains("hint: kubectl stack prune kustomization/usage"),
        "{}",
        split.stderr
    );
    assert!(exists("deployment", Some(f), "web"));
    assert!(exists("configmap", Some(f), "member"));
    assert!(exists("kustomization", Some(f), "usage"));
}

/// Stack `s`: a Namespace holding `holder` (held by a finalizer, so wave 1 waits), which
/// depends on `keepme` and `moveme`; stack `other` exists beside it.
fn seed_held_stack(f: &str, app: &str) {
    let s = flux_labels("s", f);
    apply(&format!(
        r#"{ks}{other}apiVersion: v1
kind: Namespace
metadata: {{name: {app}, labels: {s}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: holder
  namespace: {app}
  labels: {s}
  finalizers: [{HOLD}]
  annotations: {{config.kubernetes.io/depends-on: "/namespaces/{app}/ConfigMap/keepme,/namespaces/{app}/ConfigMap/moveme"}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: keepme, namespace: {app}, labels: {s}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: moveme, namespace: {app}, labels: {s}}}
"#,
        ks = kustomization("s", f, "", ""),
        other = kustomization("other", f, "", ""),
    ));
}

#[test]
fn the_plan_is_rechecked_before_every_wave() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("rechk");
    let f = flux.0.clone();
    let app = unique("rechk-app");
    seed_held_stack(&f, &app);

    record_flux_inventories(&f);
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/s",
        "--yes",
        "--timeout",
        "60s",
        "-o",
        "json",
    ]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &app, "holder")
    });
    // While wave 1 waits: a keep marker is added, a label moves to another stack, and another
    // stack's object appears in the Namespace the plan deletes.
    let keep = kubectl(&[
        "annotate",
        "configmap",
        "keepme",
        "-n",
        &app,
        "kustomize.toolkit.fluxcd.io/prune=disabled",
    ]);
    assert_eq!(keep.code, 0, "{}", keep.stderr);
    let moved = kubectl(&[
        "label",
        "--overwrite",
        "configmap",
        "moveme",
        "-n",
        &app,
        "kustomize.toolkit.fluxcd.io/name=other",
    ]);
    assert_eq!(moved.code, 0, "{}", moved.stderr);
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: newcomer, namespace: {app}, labels: {}}}\n",
        flux_labels("other", &f)
    ));
    release_finalizers("configmap/holder", &app);

    let run = finish(child).expect_code(5);
    let dropped: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["change"] == "dropped")
        .collect();
    let reason_of = |name: &str| {
        dropped
            .iter()
            .find(|e| e["id"]["name"] == name)
            .and_then(|e| e["reason"].as_str())
            .unwrap_or_else(|| panic!("{name} not dropped: {}", run.stdout))
            .to_string()
    };
    assert!(reason_of("keepme").contains("kustomize.toolkit.fluxcd.io/prune=disabled"));
    assert!(reason_of("moveme").contains(&format!("flux:{f}/other")));
    assert!(reason_of(&app).contains("newcomer") || reason_of(&app).contains("needed by"));
    assert!(
        !exists("configmap", Some(&app), "holder"),
        "the unchanged part of the plan ran"
    );
    for name in ["keepme", "moveme", "newcomer"] {
        assert!(
            exists("configmap", Some(&app), name),
            "{name} must survive\n{}",
            run.stderr
        );
    }
    assert!(exists("namespace", None, &app), "the Namespace holds objects that stay");
    let summary = run.stdout.lines().last().unwrap();
    assert!(summary.contains("\"status\":\"changed\""), "{summary}");
    let _ = kubectl(&["delete", "namespace", &app, "--wait=false"]);
}

#[test]
fn objects_other_stacks_track_stay_and_keep_what_they_need() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("share");
    let f = flux.0.clone();
    let a = flux_labels("a", &f);
    let b = flux_labels("b", &f);
    apply(&format!(
        r#"{ka}{kb}apiVersion: v1
kind: ConfigMap
metadata: {{name: a-only, namespace: {f}, labels: {a}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: a-base, namespace: {f}, labels: {a}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shared
  namespace: {f}
  labels: {a}
  annotations: {{config.k8s.io/owning-inventory: inv-elsewhere}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b-dependent
  namespace: {f}
  labels: {b}
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/a-base}}
"#,
        ka = kustomization("a", &f, "", ""),
        kb = kustomization("b", &f, "", ""),
    ));
    record_flux_inventories(&f);
    let run = stack(&["prune", "-n", &f, "kustomization/a", "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(!exists("configmap", Some(&f), "a-only"));
    assert!(!exists("kustomization", Some(&f), "a"));
    assert!(exists("configmap", Some(&f), "shared"), "{}", run.stderr);
    assert!(
        exists("configmap", Some(&f), "b-dependent"),
        "an untouched stack's member stays"
    );
    assert!(
        exists("configmap", Some(&f), "a-base"),
        "what a staying object depends on stays"
    );
    assert!(exists("kustomization", Some(&f), "b"));
    assert!(
        run.stderr.contains(&format!(
            "kept: ConfigMap/{f}/shared (also tracked by kpt:inv-elsewhere"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains(&format!("kept: ConfigMap/{f}/b-dependent (also tracked by flux:{f}/b")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "kept: ConfigMap/{f}/a-base (needed by ConfigMap/{f}/b-dependent"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn a_kept_dependent_keeps_what_it_depends_on() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("keepdep");
    let f = flux.0.clone();
    apply(&format!(
        "{}{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app-member, namespace: {f}, labels: {}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: base-member, namespace: {f}, labels: {}}}\n",
        kustomization("app", &f, ", labels: {kustomize.toolkit.fluxcd.io/prune: disabled}", "dependsOn: [{name: base}]"),
        kustomization("base", &f, "", ""),
        flux_labels("app", &f),
        flux_labels("base", &f),
    ));
    let run = stack(&["prune", "-n", &f, "kustomization/base", "--yes"]).expect_code(0);
    for (kind, name) in [
        ("kustomization", "app"),
        ("kustomization", "base"),
        ("configmap", "app-member"),
        ("configmap", "base-member"),
    ] {
        assert!(exists(kind, Some(&f), name), "{name} must stay\n{}", run.stderr);
    }
    assert!(run.stderr.contains("Nothing to prune."), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "kept: Kustomization.kustomize.toolkit.fluxcd.io/{f}/base (needed by Kustomization.kustomize.toolkit.fluxcd.io/{f}/app"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn ambiguous_name_only_marks_are_reported_and_never_acted_on() {
    let _logs = start();
    ensure_flux_crds();
    let one = Namespace::new("dup1");
    let two = Namespace::new("dup2");
    apply(&format!(
        "{}{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: which, namespace: {}, labels: {{kustomize.toolkit.fluxcd.io/name: dup}}}}\n",
        kustomization("dup", &one.0, "", ""),
        kustomization("dup", &two.0, "", ""),
        one.0
    ));
    for _ in 0..3 {
        let dry = stack(&["prune", "-n", &one.0, "kustomization/dup", "--dry-run=client"]).expect_code(0);
        assert!(!dry.stdout.contains("which"), "{}", dry.stdout);
        assert!(
            dry.stderr
                .contains(&format!("kept: ConfigMap/{}/which (ambiguous mark", one.0)),
            "{}",
            dry.stderr
        );
    }
    stack(&["prune", "-n", &one.0, "kustomization/dup", "--yes"]).expect_code(0);
    assert!(exists("configmap", Some(&one.0), "which"));
    assert!(!exists("kustomization", Some(&one.0), "dup"));
    assert!(exists("kustomization", Some(&two.0), "dup"));
}

#[test]
fn suspensions_are_lifted_before_the_delete_or_reported_with_the_resume_command() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("susp");
    let f = flux.0.clone();
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: slow, namespace: {f}, labels: {}, finalizers: [{HOLD}]}}\n",
        kustomization("s", &f, &format!(", finalizers: [{HOLD}]"), "prune: true"),
        flux_labels("s", &f),
    ));
    // The wave times out: the Kustomization stays suspended, and every output says how to resume.
    record_flux_inventories(&f);
    let table = stack(&["prune", "-n", &f, "kustomization/s", "--yes", "--timeout", "2s"]).expect_code(5);
    let resume = format!(
        "kubectl -n {f} patch kustomizations.kustomize.toolkit.fluxcd.io/s --type merge -p '{{\"spec\":{{\"suspend\":false}},\"metadata\":{{\"annotations\":{{\"kubectl-stack/suspended-by\":null}}}}}}'"
    );
    assert!(table.stderr.contains("still suspended"), "{}", table.stderr);
    assert!(table.stderr.contains(&resume), "{}", table.stderr);
    let suspend =
        |name: &str| kubectl(&["get", "kustomization", name, "-n", &f, "-o", "jsonpath={.spec.suspend}"]).stdout;
    assert_eq!(suspend("s"), "true");
    // A run suspends (and reports) only what it suspended itself: resume, then run again.
    kubectl(&[
        "patch",
        "kustomization",
        "s",
        "-n",
        &f,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    let json = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/s",
        "--yes",
        "--timeout",
        "2s",
        "-o",
        "json",
    ])
    .expect_code(5);
    let summary: serde_json::Value = serde_json::from_str(json.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["suspended"][0]["resume"], resume, "{summary}");
    assert_eq!(summary["blockers"][0]["id"]["name"], "slow", "{summary}");

    // Once the member goes, the Kustomization is deleted with its suspension lifted, so that its
    // controller's finalizer would clean up (the stand-in's finalizer keeps it to be looked at).
    kubectl(&[
        "patch",
        "kustomization",
        "s",
        "-n",
        &f,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    release_finalizers("configmap/slow", &f);
    let mut child = spawn_stack(&["prune", "-n", &f, "kustomization/s", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("kustomization", &f, "s")
    });
    assert_eq!(suspend("s"), "false", "the suspension is lifted before the delete");
    release_finalizers("kustomization/s", &f);
    finish(child).expect_code(0);
}

#[test]
fn a_rerun_finishes_a_teardown_whose_stack_is_already_gone_and_children_do_not_hold_namespaces() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("rerun");
    let f = flux.0.clone();
    let app = unique("rerun-app");
    let s = flux_labels("s", &f);
    apply(&format!(
        r#"{ks}apiVersion: v1
kind: Namespace
metadata: {{name: {app}, labels: {s}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {app}, labels: {s}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web, kustomize.toolkit.fluxcd.io/name: s, kustomize.toolkit.fluxcd.io/namespace: {f}}}}}
    spec: {{containers: [{{name: web, image: example.invalid/web}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {app}, labels: {s}}}
"#,
        ks = kustomization("s", &f, "", ""),
    ));
    // The test cluster runs no deployment controller: make the ReplicaSet as it would, with the
    // template's labels (the stack's) and the Deployment as its controller. It dies with the
    // Deployment (the garbage collector runs), so it must not keep the Namespace.
    let owner = uid_of("deployment", Some(&app), "web");
    apply(&format!(
        r#"apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-1
  namespace: {app}
  labels: {{app: web, kustomize.toolkit.fluxcd.io/name: s, kustomize.toolkit.fluxcd.io/namespace: {f}}}
  ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: web, uid: {owner}, controller: true, blockOwnerDeletion: true}}]
spec:
  replicas: 0
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: example.invalid/web}}]}}
"#
    ));
    // A first run that got as far as deleting the Kustomization (as after a crash): its members are left.
    assert_eq!(kubectl(&["delete", "kustomization", "s", "-n", &f]).code, 0);
    // Issue 24 item 3: what still carries a gone stack's mark was kept by the run that deleted
    // it, or left by other means: a rerun deletes none of it unless told (--leftovers).
    let rerun = stack(&["prune", "-n", &f, "kustomization/s", "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(rerun.stderr.contains("--leftovers"), "{}", rerun.stderr);
    assert!(rerun.stderr.contains("Nothing to prune"), "{}", rerun.stderr);
    assert!(exists("configmap", Some(&app), "settings"), "{}", rerun.stderr);
    assert!(exists("namespace", None, &app), "{}", rerun.stderr);
    let run = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/s",
        "--leftovers",
        "--yes",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    assert!(run.stderr.contains("is already gone"), "{}", run.stderr);
    wait_until(Duration::from_secs(60), || !exists("namespace", None, &app));
    assert!(!run.stderr.contains("kept: Namespace"), "{}", run.stderr);
}

#[test]
fn a_real_applyset_parent_can_be_named_and_its_members_go_first() {
    let _logs = start();
    let ns = Namespace::new("aset");
    let n = ns.0.clone();
    let dir = std::env::temp_dir().join(unique("aset-dir"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("objects.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: base}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base}}}}\n"
        ),
    )
    .unwrap();
    // kubectl 1.32 writes the real ApplySet parent Secret and the member labels.
    // (the harness's kubectl runs with KUBECTL_APPLYSET=true)
    let applied = kubectl(&[
        "apply",
        "-n",
        &n,
        "--prune",
        "--applyset=myset",
        "-f",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    let plan = stack(&["prune", "-n", &n, "secret/myset", "--dry-run=client"]).expect_code(0);
    let rows: Vec<&str> = plan.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{}", plan.stdout);
    assert!(
        rows[0].starts_with("1 ") && rows[0].contains(" app "),
        "{}",
        plan.stdout
    );
    assert!(
        rows[1].starts_with("2 ") && rows[1].contains(" base "),
        "{}",
        plan.stdout
    );
    assert!(
        rows[2].starts_with("3 ") && rows[2].contains(" myset "),
        "{}",
        plan.stdout
    );
    stack(&["prune", "-n", &n, "secret/myset", "--yes"]).expect_code(0);
    for (kind, name) in [("configmap", "app"), ("configmap", "base"), ("secret", "myset")] {
        assert!(!exists(kind, Some(&n), name), "{name}");
    }
}

/// `stuck` names the live parent that would re-create a stuck object once it goes; a suspended
/// one (as a teardown leaves it) re-creates nothing and is not named.
#[test]
fn stuck_names_the_live_stack_that_would_recreate_an_object() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("recreate");
    let f = flux.0.clone();
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {f}, labels: {}, finalizers: [{HOLD}]}}\n",
        kustomization("s", &f, "", ""),
        flux_labels("s", &f),
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "held", "-n", &f, "--wait=false"]).code,
        0
    );
    let live = stack(&["stuck", "-n", &f, "configmaps/held"]);
    assert!(
        live.stdout
            .contains(&format!("applied by Kustomization.kustomize.toolkit.fluxcd.io/{f}/s")),
        "{}\n{}",
        live.stdout,
        live.stderr
    );
    kubectl(&[
        "patch",
        "kustomization",
        "s",
        "-n",
        &f,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    let suspended = stack(&["stuck", "-n", &f, "configmaps/held"]);
    assert!(!suspended.stdout.contains("applied by"), "{}", suspended.stdout);
    release_finalizers("configmap/held", &f);
}
