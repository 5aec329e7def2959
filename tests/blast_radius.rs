//! Blast radius (issue 11), on the real cluster: what the API server's own cascades would take
//! with a Namespace or CRD the plan deletes is named in the plan and refused unless accepted.

mod common;

use common::*;

fn kustomization(name: &str, flux_ns: &str, extra_metadata: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {flux_ns}{extra_metadata}}}\nspec: {{}}\n---\n"
    )
}

/// Stack `br` in `f`: Namespace `app` with a ConfigMap, and a CRD `widgets.GROUP`. Beside it,
/// untracked: Secret `app/handmade`, a PVC a StatefulSet would leave (no ownerReference), and a
/// Widget in `f`. Returns the CRD's name and group.
fn seed_stack_with_victims(f: &str, app: &str, run: &str) -> (String, String) {
    let group = format!("{run}.example.com");
    let crd = format!("widgets.{group}");
    let s = flux_labels("br", f);
    apply(&format!(
        r#"{ks}apiVersion: v1
kind: Namespace
metadata: {{name: {app}, labels: {s}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {app}, labels: {s}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd}, labels: {s}}}
spec:
  group: {group}
  names: {{kind: Widget, plural: widgets}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"#,
        ks = kustomization("br", f, ""),
    ));
    wait_established(&[&format!("crd/{crd}")], &crd);
    apply(&format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: handmade, namespace: {app}}}
stringData: {{token: not-shown}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data-db-0, namespace: {app}, labels: {{app: db}}}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: {group}/v1
kind: Widget
metadata: {{name: foreign, namespace: {f}}}
"#
    ));
    (crd, group)
}

#[test]
fn cascade_victims_are_named_and_survive_a_plain_yes() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("br");
    let f = flux.0.clone();
    let run = unique("br");
    let app = format!("{run}-shop");
    let (crd, group) = seed_stack_with_victims(&f, &app, &run);

    record_flux_inventories(&f);
    let refused = stack(&["prune", "-n", &f, "kustomization/br", "--yes", "--timeout", "60s"]).expect_code(4);
    for line in [
        format!("Namespace/{app} would also delete 2 object(s) the plan does not delete:"),
        format!("  PersistentVolumeClaim/{app}/data-db-0 (untracked)"),
        format!("  Secret/{app}/handmade (untracked)"),
        format!("CustomResourceDefinition.apiextensions.k8s.io/{crd} would also delete 1 object(s) the plan does not delete:"),
        format!("  Widget.{group}/{f}/foreign (untracked)"),
    ] {
        assert!(
            refused.stdout.lines().any(|l| l == line),
            "missing {line:?}\nstdout:\n{}\nstderr:\n{}",
            refused.stdout,
            refused.stderr
        );
    }
    assert!(
        !refused.stdout.contains("not-shown"),
        "Secret data must never be printed"
    );
    assert!(refused.stderr.contains("--keep-cascading"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--allow-cascade"), "{}", refused.stderr);
    // Nothing at all was deleted.
    assert!(exists("secret", Some(&app), "handmade"));
    assert!(exists("pvc", Some(&app), "data-db-0"));
    assert!(exists(&crd, Some(&f), "foreign"));
    assert!(exists("configmap", Some(&app), "settings"));
    assert!(exists("kustomization", Some(&f), "br"));

    // A dry run, client or server, shows the same and says it would be refused.
    for dry in ["--dry-run=client", "--dry-run=server"] {
        let run = stack(&["prune", "-n", &f, "kustomization/br", dry]).expect_code(4);
        assert!(
            run.stdout.contains(&format!("Secret/{app}/handmade (untracked)")),
            "{dry}: {}",
            run.stdout
        );
    }
    let json = stack(&["prune", "-n", &f, "kustomization/br", "--dry-run", "-o", "json"]).expect_code(4);
    let plan: serde_json::Value = serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    let victims: Vec<&str> = plan["cascades"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["victims"].as_array().unwrap())
        .map(|v| v["id"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(victims, vec!["data-db-0", "handmade", "foreign"], "{}", json.stdout);

    // Keep the Namespace and the CRD, prune the rest.
    let kept = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/br",
        "--keep-cascading",
        "--yes",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    assert!(
        kept.stderr.contains(&format!(
            "kept: Namespace/{app} (--keep-cascading: its deletion would also take 2 object(s)"
        )),
        "{}",
        kept.stderr
    );
    assert!(!exists("configmap", Some(&app), "settings"), "the rest is pruned");
    assert!(!exists("kustomization", Some(&f), "br"));
    assert!(exists("namespace", None, &app));
    assert!(exists("crd", None, &crd));
    assert!(exists("secret", Some(&app), "handmade"));
    assert!(exists("pvc", Some(&app), "data-db-0"));
    assert!(exists(&crd, Some(&f), "foreign"));
    let _ = kubectl(&["delete", "namespace", &app, "--wait=false"]);
    let _ = kubectl(&["delete", "crd", &crd, "--wait=false"]);
}

#[test]
fn an_accepted_cascade_deletes_the_namespace_with_its_victims() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("bra");
    let f = flux.0.clone();
    let app = unique("bra-shop");
    let s = flux_labels("acc", &f);
    apply(&format!(
        "{ks}apiVersion: v1\nkind: Namespace\nmetadata: {{name: {app}, labels: {s}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {app}, labels: {s}}}\n",
        ks = kustomization("acc", &f, "")
    ));
    create(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: handmade, namespace: {app}}}\n"
    ));
    record_flux_inventories(&f);
    let run = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/acc",
        "--allow-cascade",
        "--yes",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    assert!(
        run.stdout.contains(&format!("Secret/{app}/handmade (untracked)")),
        "{}",
        run.stdout
    );
    wait_until(std::time::Duration::from_secs(60), || !exists("namespace", None, &app));
}

#[test]
fn an_orphan_prune_is_guarded_too() {
    let _logs = start();
    let run = unique("bro");
    let selector = format!("stack-test/run={run}");
    let app = format!("{run}-ns");
    apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {app}, labels: {{stack-test/run: {run}, kustomize.toolkit.fluxcd.io/name: gone, kustomize.toolkit.fluxcd.io/namespace: nowhere}}}}\n"
    ));
    create(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: handmade, namespace: {app}}}\n"
    ));
    let empty = std::env::temp_dir().join(unique("empty"));
    std::fs::create_dir_all(&empty).unwrap();
    let refused = stack(&[
        "prune",
        "-A",
        "-l",
        &selector,
        "-f",
        empty.to_str().unwrap(),
        "--allow-empty",
        "--yes",
    ])
    .expect_code(4);
    assert!(
        refused.stdout.contains(&format!("Secret/{app}/handmade (untracked)")),
        "{}\n{}",
        refused.stdout,
        refused.stderr
    );
    assert!(exists("namespace", None, &app));
    assert!(exists("secret", Some(&app), "handmade"));
    let _ = kubectl(&["delete", "namespace", &app, "--wait=false"]);
}

fn suspended(f: &str, name: &str) -> bool {
    kubectl(&["get", "kustomization", name, "-n", f, "-o", "jsonpath={.spec.suspend}"]).stdout == "true"
}

#[test]
fn a_parent_that_would_resurrect_is_named_and_refused_unless_held() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("brp");
    let f = flux.0.clone();
    apply(&format!(
        "{root}{apps}{shop}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shop-config, namespace: {f}, labels: {s}}}\n",
        root = kustomization("root", &f, ""),
        apps = kustomization("apps", &f, &format!(", labels: {}", flux_labels("root", &f))),
        shop = kustomization("shop", &f, &format!(", labels: {}", flux_labels("apps", &f))),
        s = flux_labels("shop", &f),
    ));
    let ks = |name: &str| format!("Kustomization.kustomize.toolkit.fluxcd.io/{f}/{name}");

    record_flux_inventories(&f);
    let refused = stack(&["prune", "-n", &f, "kustomization/shop", "--yes"]).expect_code(4);
    let named = format!("parent: {} (not suspended) applies {}", ks("apps"), ks("shop"));
    assert!(refused.stdout.lines().any(|l| l == named), "{}", refused.stdout);
    assert!(refused.stderr.contains("re-create"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--suspend-parents"), "{}", refused.stderr);
    assert!(exists("configmap", Some(&f), "shop-config"));

    // Suspending the parent alone does not hold: its own parent would revert the suspend.
    kubectl(&[
        "patch",
        "kustomization",
        "apps",
        "-n",
        &f,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ])
    .expect_code(0);
    let still = stack(&["prune", "-n", &f, "kustomization/shop", "--yes"]).expect_code(4);
    assert!(
        still.stdout.contains(&format!(
            "parent: {} (not suspended) applies {}",
            ks("root"),
            ks("apps")
        )),
        "{}",
        still.stdout
    );
    assert!(exists("kustomization", Some(&f), "shop"));

    // Tearing the parent down too is no resurrection: only root is a parent then.
    let both = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/shop",
        "kustomization/apps",
        "--dry-run",
    ])
    .expect_code(4);
    assert!(
        !both.stdout.contains(&format!("parent: {}", ks("apps"))),
        "{}",
        both.stdout
    );

    // --suspend-parents suspends the chain, tears down, and says how to resume.
    kubectl(&[
        "patch",
        "kustomization",
        "apps",
        "-n",
        &f,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ])
    .expect_code(0);
    let done = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/shop",
        "--suspend-parents",
        "--yes",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    assert!(!exists("kustomization", Some(&f), "shop"));
    assert!(!exists("configmap", Some(&f), "shop-config"));
    assert!(suspended(&f, "apps") && suspended(&f, "root"), "the chain is suspended");
    for name in ["apps", "root"] {
        let resume =
            format!("resume with: kubectl -n {f} patch kustomizations.kustomize.toolkit.fluxcd.io/{name} --type merge");
        assert!(done.stderr.contains(&resume), "{}", done.stderr);
    }
}

fn seed_small_stack(f: &str, name: &str) {
    let s = flux_labels(name, f);
    apply(&format!(
        "{ks}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}-a, namespace: {f}, labels: {s}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}-b, namespace: {f}, labels: {s}}}\n",
        ks = kustomization(name, f, "")
    ));
}

#[test]
fn a_saved_plan_runs_unchanged_and_is_refused_once_the_cluster_moved() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("brs");
    let f = flux.0.clone();
    seed_small_stack(&f, "same");
    seed_small_stack(&f, "moved");
    let dir = std::env::temp_dir().join(unique("plans"));
    std::fs::create_dir_all(&dir).unwrap();
    let same = dir.join("same.json");
    let moved = dir.join("moved.json");

    record_flux_inventories(&f);
    let saved = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/same",
        "--plan-out",
        same.to_str().unwrap(),
    ])
    .expect_code(0);
    assert!(saved.stderr.contains("nothing was deleted"), "{}", saved.stderr);
    assert!(
        saved
            .stderr
            .contains("Plan: 3 object(s) to delete in 2 wave(s)\n  wave 1: 2 ConfigMap\n  wave 2: 1 Kustomization\n"),
        "the summary ends the plan: {}",
        saved.stderr
    );
    assert!(exists("configmap", Some(&f), "same-a"), "--plan-out deletes nothing");
    let document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&same).unwrap()).unwrap();
    assert_eq!(document["kind"], "PrunePlan");
    assert!(
        document["server"].as_str().unwrap().starts_with("https://"),
        "{document}"
    );
    let objects = document["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 3, "{document}");
    let a = objects.iter().find(|o| o["id"]["name"] == "same-a").unwrap();
    assert_eq!(a["uid"], uid_of("configmap", Some(&f), "same-a"));
    assert_eq!(a["wave"], 1);

    // Run unchanged, from the file alone.
    stack(&["prune", "--plan", same.to_str().unwrap(), "--yes", "--timeout", "60s"]).expect_code(0);
    for name in ["same-a", "same-b"] {
        assert!(!exists("configmap", Some(&f), name));
    }
    assert!(!exists("kustomization", Some(&f), "same"));

    // One object re-created under the same name: refused, nothing deleted.
    stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/moved",
        "--plan-out",
        moved.to_str().unwrap(),
    ])
    .expect_code(0);
    kubectl(&["delete", "configmap", "moved-a", "-n", &f]).expect_code(0);
    seed_small_stack(&f, "moved");
    let refused = stack(&["prune", "--plan", moved.to_str().unwrap(), "--yes"]).expect_code(4);
    assert!(
        refused
            .stderr
            .contains(&format!("changed: ConfigMap/{f}/moved-a has UID"))
            && refused.stderr.contains("re-created under the same name"),
        "{}",
        refused.stderr
    );
    for name in ["moved-a", "moved-b"] {
        assert!(exists("configmap", Some(&f), name));
    }
    assert!(exists("kustomization", Some(&f), "moved"));
}

#[test]
fn an_untracked_newcomer_in_a_planned_namespace_stops_its_deletion_at_the_recheck() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("brn");
    let f = flux.0.clone();
    let app = unique("brn-shop");
    let s = flux_labels("nc", &f);
    apply(&format!(
        "{ks}apiVersion: v1\nkind: Namespace\nmetadata: {{name: {app}, labels: {s}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: holder, namespace: {app}, labels: {s}, finalizers: [stack-test.example.com/hold]}}\n",
        ks = kustomization("nc", &f, "")
    ));
    record_flux_inventories(&f);
    let mut command = stack_command(&cluster().admin);
    command
        .args([
            "prune",
            "-n",
            &f,
            "kustomization/nc",
            "--yes",
            "--timeout",
            "60s",
            "-o",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null());
    let child = command.spawn().unwrap();
    wait_until(std::time::Duration::from_secs(30), || {
        is_terminating("configmap", &app, "holder")
    });
    // After the plan, before the Namespace's wave: someone puts a Secret in it by hand.
    create(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: newcomer, namespace: {app}}}\n"
    ));
    release_finalizers("configmap/holder", &app);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(5),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dropped = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["change"] == "dropped" && e["id"]["name"] == app.as_str())
        .unwrap_or_else(|| panic!("the Namespace was not dropped: {stdout}"));
    let reason = dropped["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("Secret/{app}/newcomer (untracked)")),
        "{reason}"
    );
    assert!(exists("namespace", None, &app));
    assert!(exists("secret", Some(&app), "newcomer"));
    let _ = kubectl(&["delete", "namespace", &app, "--wait=false"]);
}

/// Deletes a cluster-scoped object when dropped (what a test made outside its Namespace).
struct ClusterObject(&'static str, String);

impl Drop for ClusterObject {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", self.0, &self.1, "--wait=false", "--ignore-not-found"]);
    }
}

/// Issue 25: stack `kyv` tracks Namespace `app`, a ClusterRole, and Service and Deployment
/// `app/kyverno`; an untracked webhook configuration owned by the ClusterRole calls the Service.
/// By default the webhook dies with its owner: a cascade victim, named. With `--cascade=orphan`
/// the garbage collector leaves it (its owner reference removed): it is no victim, and it keeps
/// its backend Service and Deployment (and so their Namespace).
#[test]
fn with_cascade_orphan_an_owned_webhook_stays_and_keeps_its_backend() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("orph");
    let f = flux.0.clone();
    let run = unique("orph");
    let app = format!("{run}-t13");
    let app_ns = ClusterObject("namespace", app.clone());
    let role = ClusterObject("clusterrole", format!("{run}-admission"));
    let hook = ClusterObject("validatingwebhookconfiguration", format!("{run}-validate"));
    let s = flux_labels("kyv", &f);
    apply(&format!(
        r#"{ks}apiVersion: v1
kind: Namespace
metadata: {{name: {app}, labels: {s}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {role}, labels: {s}}}
rules: []
---
apiVersion: v1
kind: Service
metadata: {{name: kyverno-svc, namespace: {app}, labels: {s}}}
spec:
  selector: {{app: {run}-kyverno}}
  ports: [{{port: 443, targetPort: 9443}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: kyverno, namespace: {app}, labels: {s}}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: {run}-kyverno}}}}
  template:
    metadata: {{labels: {{app: {run}-kyverno}}}}
    spec: {{containers: [{{name: kyverno, image: registry.invalid/kyverno:1}}]}}
"#,
        ks = kustomization("kyv", &f, ""),
        role = role.1,
    ));
    let role_uid = uid_of("clusterrole", None, &role.1);
    // Fails open and matches nothing the tests make: it breaks no other test while it stays.
    apply(&format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {name}
  ownerReferences: [{{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: {role}, uid: {role_uid}}}]
webhooks:
- name: validate.{run}.stack-test.example.com
  clientConfig: {{service: {{namespace: {app}, name: kyverno-svc, path: /validate}}}}
  rules: [{{apiGroups: [{run}.stack-test.example.com], apiVersions: [v1], operations: [CREATE, UPDATE, DELETE], resources: [things]}}]
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
        name = hook.1,
        role = role.1,
    ));
    record_flux_inventories(&f);
    let webhook = format!("ValidatingWebhookConfiguration.admissionregistration.k8s.io/{}", hook.1);

    // Background (the default): the webhook dies with its ClusterRole: named, refused.
    let taking = stack(&["prune", "-n", &f, "kustomization/kyv", "--dry-run=client"]).expect_code(4);
    assert!(
        taking.stdout.lines().any(|l| l.trim_start().starts_with(&webhook)),
        "the webhook must be named as a victim\nstdout:\n{}\nstderr:\n{}",
        taking.stdout,
        taking.stderr
    );

    // Orphan: it stays, and keeps its backend.
    let plan = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/kyv",
        "--cascade=orphan",
        "--dry-run=client",
    ]);
    let said = format!("stdout:\n{}\nstderr:\n{}", plan.stdout, plan.stderr);
    assert_eq!(plan.code, 0, "{said}");
    assert!(!plan.stdout.contains("would also delete"), "{said}");
    for backend in [
        format!("Service/{app}/kyverno-svc"),
        format!("Deployment.apps/{app}/kyverno"),
    ] {
        assert!(
            said.lines()
                .any(|l| l.contains(&format!("kept: {backend}")) && l.contains(&webhook)),
            "{backend} must be kept for the webhook\n{said}"
        );
    }
    let done = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/kyv",
        "--cascade=orphan",
        "--allow-cascade",
        "--yes",
        "--timeout",
        "60s",
    ]);
    let said = format!("stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    assert_eq!(done.code, 0, "{said}");
    assert!(exists("validatingwebhookconfiguration", None, &hook.1), "{said}");
    assert!(exists("service", Some(&app), "kyverno-svc"), "{said}");
    assert!(exists("deployment", Some(&app), "kyverno"), "{said}");
    assert!(exists("namespace", None, &app), "{said}");
    wait_until(std::time::Duration::from_secs(60), || {
        !exists("clusterrole", None, &role.1)
    });
    drop(app_ns);
}

/// A cluster-scoped `Tenant` of stack `ten` (its CRD untracked) that controls a Namespace and a
/// CRD it made (`controller: true`, no stack's labels), as a tenant operator or a Crossplane
/// ProviderRevision does. Returns the guards of what is made outside the test's Namespace, the
/// group, the Tenant's, the Namespace's and the owned CRD's names.
fn seed_tenant_owning_holders(f: &str, run: &str, extra: &str) -> (Vec<ClusterObject>, String, String, String, String) {
    let group = format!("{run}.example.com");
    let tenants = ClusterObject("crd", format!("tenants.{group}"));
    let crd = |plural: &str, kind: &str, scope: &str, owner: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {plural}.{group}{owner}}}\nspec:\n  group: {group}\n  names: {{kind: {kind}, plural: {plural}}}\n  scope: {scope}\n  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]\n"
        )
    };
    apply(&crd("tenants", "Tenant", "Cluster", ""));
    wait_established(&[&format!("crd/{}", tenants.1)], &tenants.1);
    let tenant = format!("{run}-acme");
    apply(&format!(
        "{ks}apiVersion: {group}/v1\nkind: Tenant\nmetadata: {{name: {tenant}, labels: {s}}}\n{extra}",
        ks = kustomization("ten", f, ""),
        s = flux_labels("ten", f),
    ));
    let owner = format!(
        ", ownerReferences: [{{apiVersion: {group}/v1, kind: Tenant, name: {tenant}, uid: {uid}, controller: true, blockOwnerDeletion: true}}]",
        uid = uid_of(&format!("tenant.{group}"), None, &tenant)
    );
    let made = ClusterObject("namespace", format!("{run}-acme"));
    let gadgets = ClusterObject("crd", format!("gadgets.{group}"));
    apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}{owner}}}\n---\n{}",
        made.1,
        crd("gadgets", "Gadget", "Namespaced", &owner)
    ));
    wait_established(&[&format!("crd/{}", gadgets.1)], &gadgets.1);
    let names = (group, tenant, made.1.clone(), gadgets.1.clone());
    (vec![tenants, made, gadgets], names.0, names.1, names.2, names.3)
}

/// Review 15, F1: a Namespace and a CRD a planned Tenant's controller made die with the Tenant;
/// what they hold (another stack's ConfigMap, an untracked Secret, an untracked custom resource)
/// is named under the Tenant and refused, and nothing is deleted. Red before the rule: the
/// teardown deleted the Tenant and took them all, exit 0.
#[test]
fn what_a_namespace_or_crd_made_by_a_planned_owner_holds_is_named_and_refused() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("dyh");
    let f = flux.0.clone();
    let run = unique("dyh");
    let (_guards, group, tenant, made, gadgets) = seed_tenant_owning_holders(&f, &run, "");
    apply(&format!(
        "{ks}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: theirs, namespace: {made}, labels: {s}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: handmade, namespace: {made}}}\nstringData: {{token: not-shown}}\n---\napiVersion: {group}/v1\nkind: Gadget\nmetadata: {{name: g, namespace: {f}}}\n",
        ks = kustomization("other", &f, ""),
        s = flux_labels("other", &f),
    ));
    record_flux_inventories(&f);
    let refused = stack(&["prune", "-n", &f, "kustomization/ten", "--yes", "--timeout", "60s"]).expect_code(4);
    let said = format!("stdout:\n{}\nstderr:\n{}", refused.stdout, refused.stderr);
    assert!(
        refused
            .stdout
            .lines()
            .any(|l| l == format!("Tenant.{group}/{tenant} would also delete 3 object(s) the plan does not delete:")),
        "{said}"
    );
    for line in [
        format!("  ConfigMap/{made}/theirs (in Namespace/{made}, which dies with it: tracked, not pruned"),
        format!("  Secret/{made}/handmade (in Namespace/{made}, which dies with it: untracked)"),
        format!("  Gadget.{group}/{f}/g (in CustomResourceDefinition.apiextensions.k8s.io/{gadgets}, which dies with it: untracked)"),
    ] {
        assert!(refused.stdout.lines().any(|l| l.starts_with(&line)), "missing {line:?}\n{said}");
    }
    assert!(!refused.stdout.contains("not-shown"), "{said}");
    for (kind, namespace, name) in [
        (format!("tenant.{group}"), None, tenant.as_str()),
        ("namespace".to_string(), None, made.as_str()),
        ("crd".to_string(), None, gadgets.as_str()),
        ("configmap".to_string(), Some(made.as_str()), "theirs"),
        ("secret".to_string(), Some(made.as_str()), "handmade"),
        (format!("gadget.{group}"), Some(f.as_str()), "g"),
        ("kustomization".to_string(), Some(f.as_str()), "ten"),
    ] {
        assert!(exists(&kind, namespace, name), "{kind} {name} must stay\n{said}");
    }
    // Kept whole with --keep-cascading: the Tenant and what it takes stay.
    let kept = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/ten",
        "--keep-cascading",
        "--dry-run=client",
    ])
    .expect_code(0);
    assert!(
        kept.stderr
            .contains(&format!("kept: Tenant.{group}/{tenant} (--keep-cascading")),
        "{}",
        kept.stderr
    );
}

/// Review 15, F1, at the re-check: a Namespace a planned Tenant made is empty at plan time and
/// gets an untracked Secret before the Tenant's wave; the re-check names it and keeps the Tenant
/// (exit 5), as the plan would have.
#[test]
fn a_newcomer_in_a_namespace_made_by_a_planned_owner_stops_it_at_the_recheck() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("dyr");
    let f = flux.0.clone();
    let run = unique("dyr");
    // The holder depends on the Tenant: it goes in an earlier wave and holds that wave up.
    let holder = format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: holder, namespace: {f}, labels: {s}, finalizers: [stack-test.example.com/hold], annotations: {{config.kubernetes.io/depends-on: {run}.example.com/Tenant/{run}-acme}}}}\n",
        s = flux_labels("ten", &f)
    );
    let (_guards, _group, tenant, made, _gadgets) = seed_tenant_owning_holders(&f, &run, &holder);
    record_flux_inventories(&f);
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/ten",
        "--yes",
        "--timeout",
        "60s",
        "-o",
        "json",
    ]);
    wait_while_running(&mut child, std::time::Duration::from_secs(30), || {
        is_terminating("configmap", &f, "holder")
    });
    create(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: newcomer, namespace: {made}}}\n"
    ));
    release_finalizers("configmap/holder", &f);
    let done = finish(child);
    let said = format!("stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    assert_eq!(done.code, 5, "{said}");
    let dropped = json_lines(&done.stdout)
        .into_iter()
        .find(|e| e["change"] == "dropped" && e["id"]["name"] == tenant.as_str())
        .unwrap_or_else(|| panic!("the Tenant was not dropped\n{said}"));
    let reason = dropped["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "Secret/{made}/newcomer (in Namespace/{made}, which dies with it: untracked)"
        )),
        "{reason}"
    );
    assert!(exists("namespace", None, &made), "{said}");
    assert!(exists("secret", Some(&made), "newcomer"), "{said}");
}

/// A CRD of stack `gz` (`things.GROUP`, cluster-scoped) and an untracked `Thing` of it: its
/// victim when the CRD goes. Returns the guards, the group and the Thing's UID.
fn seed_crd_with_owning_victim(f: &str, run: &str) -> (Vec<ClusterObject>, String, String) {
    let group = format!("{run}.example.com");
    let crd = ClusterObject("crd", format!("things.{group}"));
    apply(&format!(
        "{ks}apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {}, labels: {s}}}\nspec:\n  group: {group}\n  names: {{kind: Thing, plural: things}}\n  scope: Cluster\n  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]\n",
        crd.1,
        ks = kustomization("gz", f, ""),
        s = flux_labels("gz", f),
    ));
    wait_established(&[&format!("crd/{}", crd.1)], &crd.1);
    let thing = format!("{run}-thing");
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Thing\nmetadata: {{name: {thing}}}\n"
    ));
    let uid = uid_of(&format!("thing.{group}"), None, &thing);
    (vec![crd], group, uid)
}

/// Order review 16, F1: a victim takes what it owns. The untracked Thing a planned CRD takes
/// owns another stack's ClusterRole (a plain owner reference) and a Namespace it made, which
/// holds another stack's ConfigMap: the garbage collector takes them all, so all are named
/// under the CRD and refused. Red before: only the Thing was named, and `--allow-cascade`
/// accepted one object while four died.
#[test]
fn what_a_cascade_victim_owns_is_named_too() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("vdep");
    let f = flux.0.clone();
    let run = unique("vdep");
    let (_guards, group, thing_uid) = seed_crd_with_owning_victim(&f, &run);
    let owner = |controller: bool| {
        format!(
            "ownerReferences: [{{apiVersion: {group}/v1, kind: Thing, name: {run}-thing, uid: {thing_uid}, controller: {controller}}}]"
        )
    };
    let role = ClusterObject("clusterrole", format!("{run}-precious"));
    let made = ClusterObject("namespace", format!("{run}-made"));
    apply(&format!(
        "{ks}apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {}, labels: {s}, {}}}\nrules: []\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {}, {}}}\n",
        role.1,
        owner(false),
        made.1,
        owner(true),
        ks = kustomization("other", &f, ""),
        s = flux_labels("other", &f),
    ));
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: precious, namespace: {}, labels: {s}}}\n",
        made.1,
        s = flux_labels("other", &f),
    ));
    record_flux_inventories(&f);
    // With --cascade=orphan the CRD's clean-up still deletes its custom resources with the
    // default policy, so the garbage collector takes what they own all the same (review 17, F1).
    for cascade in ["--cascade=background", "--cascade=orphan"] {
        let refused = stack(&[
            "prune",
            "-n",
            &f,
            "kustomization/gz",
            "--dry-run=client",
            cascade,
            "-o",
            "json",
        ])
        .expect_code(4);
        let plan: serde_json::Value = serde_json::from_str(refused.stdout.lines().next().unwrap_or("{}")).unwrap();
        let victims: Vec<String> = plan["cascades"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["victims"].as_array().into_iter().flatten())
            .map(|v| {
                format!(
                    "{}/{}",
                    v["id"]["kind"].as_str().unwrap_or(""),
                    v["id"]["name"].as_str().unwrap_or("")
                )
            })
            .collect();
        for expected in [
            format!("Thing/{run}-thing"),
            format!("ClusterRole/{}", role.1),
            "ConfigMap/precious".to_string(),
        ] {
            assert!(
                victims.contains(&expected),
                "{cascade}: {expected} not named: {victims:?}\n{}",
                refused.stdout
            );
        }
    }
    assert!(exists("clusterrole", None, &role.1));
    assert!(exists("configmap", Some(&made.1), "precious"));
}

/// Order review 16, F2: content owned by an object the Namespace holds but that is never named
/// (the `default` ServiceAccount, made by the control plane) counts on its own: an untracked
/// ConfigMap owned by it is named and refused. Red before: nothing was named, exit 0.
#[test]
fn content_owned_by_an_unnamed_object_of_the_namespace_still_counts() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("sadep");
    let f = flux.0.clone();
    let app = ClusterObject("namespace", unique("sadep-app"));
    apply(&format!(
        "{ks}apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}, labels: {s}}}\n",
        app.1,
        ks = kustomization("ik", &f, ""),
        s = flux_labels("ik", &f),
    ));
    wait_until(std::time::Duration::from_secs(30), || {
        exists("serviceaccount", Some(&app.1), "default")
    });
    let account = uid_of("serviceaccount", Some(&app.1), "default");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: owned-by-account, namespace: {}, ownerReferences: [{{apiVersion: v1, kind: ServiceAccount, name: default, uid: {account}}}]}}\n",
        app.1
    ));
    record_flux_inventories(&f);
    let refused = stack(&["prune", "-n", &f, "kustomization/ik", "--dry-run=client"]).expect_code(4);
    assert!(
        refused
            .stdout
            .contains(&format!("ConfigMap/{}/owned-by-account (untracked)", app.1)),
        "{}\n{}",
        refused.stdout,
        refused.stderr
    );
}

/// Order review 16, F3: an operator in a Namespace that a planned Gadget made dies with the
/// Gadget, so the custom resource whose finalizer it serves goes before the Gadget, as before a
/// planned Namespace. Red before: the Doom and the Gadget were in one wave, and the operator was
/// gone before the Doom's finalizer could run.
#[test]
fn what_an_operator_in_a_namespace_dying_by_ownership_serves_goes_first() {
    let _logs = start();
    ensure_crds();
    ensure_flux_crds();
    let flux = Namespace::new("dyo");
    let f = flux.0.clone();
    let run = unique("dyo");
    let group = format!("{run}.example.com");
    let crd = ClusterObject("crd", format!("dooms.{group}"));
    let gadget = ClusterObject("gadget.stack-test.example.com", format!("{run}-tenant"));
    let s = flux_labels("tq", &f);
    apply(&format!(
        "{ks}apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {}, labels: {s}}}\nspec:\n  group: {group}\n  names: {{kind: Doom, plural: dooms}}\n  scope: Namespaced\n  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]\n---\napiVersion: stack-test.example.com/v1beta1\nkind: Gadget\nmetadata: {{name: {}, labels: {s}}}\n",
        crd.1,
        gadget.1,
        ks = kustomization("tq", &f, ""),
    ));
    wait_established(&[&format!("crd/{}", crd.1)], &crd.1);
    let made = ClusterObject("namespace", format!("{run}-qns"));
    let owner = uid_of("gadget.stack-test.example.com", None, &gadget.1);
    apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {}, ownerReferences: [{{apiVersion: stack-test.example.com/v1beta1, kind: Gadget, name: {}, uid: {owner}, controller: true, blockOwnerDeletion: true}}]}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: doom-operator, namespace: {}, labels: {s}}}\nspec:\n  replicas: 0\n  selector: {{matchLabels: {{app: doom}}}}\n  template: {{metadata: {{labels: {{app: doom}}}}, spec: {{containers: [{{name: c, image: registry.invalid/doom:1}}]}}}}\n---\napiVersion: {group}/v1\nkind: Doom\nmetadata: {{name: doom-1, namespace: {f}, labels: {s}, finalizers: [{group}/cleanup]}}\n",
        made.1,
        gadget.1,
        made.1,
    ));
    record_flux_inventories(&f);
    let plan = stack(&["prune", "-n", &f, "kustomization/tq", "--dry-run=client", "-o", "json"]).expect_code(0);
    let lines = json_lines(&plan.stdout);
    let doom = planned_wave(&lines, "Doom", "doom-1");
    let operator = planned_wave(&lines, "Deployment", "doom-operator");
    assert!(doom < operator, "the Doom must go before its operator\n{}", plan.stdout);
    assert!(
        doom < planned_wave(&lines, "Gadget", &gadget.1),
        "the Doom must go before the Gadget that takes its operator\n{}",
        plan.stdout
    );
    // `graph --order delete` orders as prune does (order review 17, F3).
    let tracker = format!("flux=tq.{f}");
    let graph = stack(&[
        "graph",
        "-A",
        "--tracker",
        &tracker,
        "--members",
        "--order",
        "delete",
        "-o",
        "json",
    ])
    .expect_code(0);
    let json = graph.json();
    let graph_wave = |kind: &str, name: &str| -> usize {
        let node = json["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|node| node["kind"] == kind && node["name"] == name)
            .unwrap_or_else(|| panic!("{kind}/{name} is no node: {}", graph.stdout))["index"]
            .clone();
        json["waves"]
            .as_array()
            .into_iter()
            .flatten()
            .position(|wave| wave.as_array().is_some_and(|members| members.contains(&node)))
            .unwrap_or_else(|| panic!("{kind}/{name} in no wave: {}", graph.stdout))
    };
    assert!(
        graph_wave("Doom", "doom-1") < graph_wave("Gadget", &gadget.1),
        "graph --order delete: the Doom must go before the Gadget\n{}",
        graph.stdout
    );
    let _ = kubectl(&[
        "patch",
        "doom",
        "doom-1",
        "-n",
        &f,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let _ = (made, crd);
}

/// Order review 17, F2: the re-check before a CRD's wave follows its accepted victims down: a
/// ClusterRole of another stack that an accepted victim came to own after the plan drops the
/// CRD (exit 5) and stays. Red before: the re-check listed the CRD's custom resources only, and
/// the ClusterRole died with the accepted victim, exit 0.
#[test]
fn the_recheck_follows_an_accepted_victim_to_what_it_owns_now() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("vrc");
    let f = flux.0.clone();
    let run = unique("vrc");
    let (_guards, group, thing_uid) = seed_crd_with_owning_victim(&f, &run);
    // A member that goes first (it depends on the CRD) and holds its wave with a finalizer.
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: holder\n  namespace: {f}\n  labels: {s}\n  finalizers: [stack-test.example.com/hold]\n  annotations: {{config.kubernetes.io/depends-on: apiextensions.k8s.io/CustomResourceDefinition/things.{group}}}\n",
        s = flux_labels("gz", &f)
    ));
    record_flux_inventories(&f);
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/gz",
        "--allow-cascade",
        "--yes",
        "--timeout",
        "60s",
        "-o",
        "json",
    ]);
    wait_while_running(&mut child, std::time::Duration::from_secs(30), || {
        is_terminating("configmap", &f, "holder")
    });
    let role = ClusterObject("clusterrole", format!("{run}-late"));
    apply(&format!(
        "{ks}apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {}, labels: {s}, ownerReferences: [{{apiVersion: {group}/v1, kind: Thing, name: {run}-thing, uid: {thing_uid}}}]}}\nrules: []\n",
        role.1,
        ks = kustomization("other", &f, ""),
        s = flux_labels("other", &f),
    ));
    release_finalizers("configmap/holder", &f);
    let done = finish(child);
    let said = format!("stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    assert_eq!(done.code, 5, "{said}");
    let dropped = json_lines(&done.stdout)
        .into_iter()
        .find(|e| e["change"] == "dropped" && e["id"]["kind"] == "CustomResourceDefinition")
        .unwrap_or_else(|| panic!("the CRD was not dropped\n{said}"));
    assert!(
        dropped["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("ClusterRole.rbac.authorization.k8s.io/{}", role.1)),
        "{said}"
    );
    assert!(exists("clusterrole", None, &role.1), "{said}");
}
