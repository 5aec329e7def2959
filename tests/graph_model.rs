//! One graph for every plan (issue 25), on the real cluster: each numbered case of the issue as a
//! teardown, with a stand-in operator that finalizes its custom resources only while its
//! Deployment exists ([`StandIn`]).
//!
//! 1. An object with a second, live owner does not die with its owner: a Namespace that holds it
//!    is a cascade, refused or held back, and the garbage collector keeps the object.
//! 2. What stays keeps what it needs through inferred edges: another stack's custom resource
//!    keeps its operator.
//! 3. What dies goes before what it needs, victims included: with `--allow-cascade`, a CRD whose
//!    untracked custom resource needs the operator goes before the operator.
//! 4. A finalizer without a slash (Rook's `cephcluster.ceph.rook.io`) names its controller.
//! 5. An untracked webhook configuration keeps the backend Service and Deployment it calls.
//!
//! Every group, Namespace and cluster-scoped object here has a name of its own run.

mod common;
#[path = "proxy/mod.rs"]
mod proxy;

use std::time::Duration;

use common::*;
use serde_json::Value;

fn kustomization(name: &str, flux_ns: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {flux_ns}}}\nspec: {{prune: true{spec}}}\n"
    )
}

/// A group of this run's own: `<run>.graphmodel.example.com`.
fn own_group(run: &str) -> String {
    format!("{run}.graphmodel.example.com")
}

/// A namespaced CRD `plural.group` of kind `kind`, labelled `labels`.
fn crd(group: &str, kind: &str, plural: &str, labels: &str) -> String {
    format!(
        r#"---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}, labels: {labels}}}
spec:
  group: {group}
  names: {{kind: {kind}, plural: {plural}, singular: {singular}}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"#,
        singular = kind.to_ascii_lowercase()
    )
}

/// [`crd`] `gizmos.group` of kind `Gizmo`, which its stack keeps on a teardown
/// (`kustomize.toolkit.fluxcd.io/prune: disabled`).
fn kept_crd(group: &str, labels: &str) -> String {
    crd(group, "Gizmo", "gizmos", labels).replace(
        "metadata: {name: ",
        "metadata: {annotations: {kustomize.toolkit.fluxcd.io/prune: disabled}, name: ",
    )
}

/// A Namespace and, in it, the operator's Deployment `name`, labelled `labels`.
fn operator(namespace: &str, name: &str, labels: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Namespace
metadata: {{name: {namespace}, labels: {labels}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}, labels: {labels}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: manager, image: example.invalid/operator}}]}}
"#
    )
}

/// Deletes what a test leaves behind when it fails half-way (or keeps on purpose): custom
/// resources lose their finalizers first, so that their CRD and Namespace can go.
struct Leftovers {
    custom: Vec<(String, String)>,
    objects: Vec<(String, String)>,
}

impl Leftovers {
    fn new() -> Self {
        Self {
            custom: Vec::new(),
            objects: Vec::new(),
        }
    }

    /// Custom resources of `resource` in `namespace`.
    fn custom(&mut self, resource: &str, namespace: &str) {
        self.custom.push((resource.to_string(), namespace.to_string()));
    }

    /// A cluster-scoped object.
    fn object(&mut self, kind: &str, name: &str) {
        self.objects.push((kind.to_string(), name.to_string()));
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        for (resource, namespace) in &self.custom {
            release_finalizers(resource, namespace);
        }
        // One kubectl for all (each is a Go process and a discovery); one each if that fails (a
        // kind no longer served fails the whole command).
        let all: Vec<String> = self
            .objects
            .iter()
            .map(|(kind, name)| format!("{kind}/{name}"))
            .collect();
        let mut args: Vec<&str> = vec!["delete", "--wait=false", "--ignore-not-found"];
        args.extend(all.iter().map(String::as_str));
        if all.is_empty() || kubectl(&args).code == 0 {
            return;
        }
        for (kind, name) in &self.objects {
            let _ = kubectl(&["delete", kind, name, "--wait=false", "--ignore-not-found"]);
        }
    }
}

/// The kept entry of the plan for the object of `kind` named `name`: its reason as the table
/// prints it (the rule's name is beside it, as `orphans -o json` names it).
fn kept_reason(lines: &[Value], kind: &str, name: &str) -> Option<String> {
    plan_line(lines)["kept"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"]["kind"] == kind && k["id"]["name"] == name)
        .map(|k| {
            assert!(k["reason"].as_str().is_some_and(|rule| !rule.contains(' ')), "{k}");
            k["message"].as_str().unwrap().to_string()
        })
}

/// The warnings a plan (`-o json`) tells before asking.
fn plan_warnings(stdout: &str) -> Vec<String> {
    json_lines(stdout)
        .iter()
        .filter_map(|line| line.get("warnings"))
        .flat_map(|w| w.as_array().cloned().unwrap_or_default())
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect()
}

/// The `why` of the planned object of `kind` named `name`.
fn planned_why(lines: &[Value], kind: &str, name: &str) -> String {
    plan_line(lines)["waves"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w.as_array().unwrap())
        .find(|t| t["id"]["kind"] == kind && t["id"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind}/{name} not planned"))["why"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The kinds of the edges `graph -A --members -o json` shows from one object to another
/// (`(kind, namespace, name)`; an empty namespace for a cluster-scoped object).
fn graph_edges(from: (&str, &str, &str), to: (&str, &str, &str)) -> Vec<String> {
    let json = stack(&["graph", "-A", "--members", "-o", "json"]).expect_code(0).json();
    let node = |(kind, namespace, name): (&str, &str, &str)| {
        json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| {
                n["kind"] == kind && n["name"] == name && n["namespace"].as_str().unwrap_or_default() == namespace
            })
            .unwrap_or_else(|| panic!("{kind}/{namespace}/{name} is no node of the graph"))["index"]
            .clone()
    };
    let (from, to) = (node(from), node(to));
    json["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["from"] == from && e["to"] == to)
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

/// Case 1: Namespace `t4` and ConfigMap `p` are stack `s4`'s; the untracked ConfigMap `precious`
/// in `t4` is owned by `p` and by an untracked ClusterRole. The garbage collector keeps
/// `precious` when `p` goes (one owner lives): it does not die with the plan, so the Namespace
/// would take it — a cascade victim, named, refused, and held back with `--keep-cascading`.
#[test]
fn an_object_with_a_second_live_owner_is_a_cascade_victim_not_a_silent_loss() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm1");
    let f = flux.0.clone();
    let t4 = unique("gm1-t4");
    let role = unique("gm1-role");
    let mut leftovers = Leftovers::new();
    leftovers.object("clusterrole", &role);
    leftovers.object("namespace", &t4);
    let s4 = flux_labels("s4", &f);
    apply(&format!(
        r#"{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {t4}, labels: {s4}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: p, namespace: {t4}, labels: {s4}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {role}}}
rules: []
"#,
        kustomization("s4", &f, "")
    ));
    let (p_uid, role_uid) = (uid_of("configmap", Some(&t4), "p"), uid_of("clusterrole", None, &role));
    apply(&format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: precious
  namespace: {t4}
  ownerReferences:
  - {{apiVersion: v1, kind: ConfigMap, name: p, uid: {p_uid}}}
  - {{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: {role}, uid: {role_uid}}}
data: {{only: copy}}
"#
    ));

    // Named as a victim of the Namespace, and refused: nothing is deleted.
    record_flux_inventories(&f);
    let refused = stack(&["prune", "-n", &f, "kustomization/s4", "--yes", "-o", "json"]).expect_code(4);
    let lines = json_lines(&refused.stdout);
    let cascades = plan_line(&lines)["cascades"].as_array().unwrap().clone();
    assert_eq!(cascades.len(), 1, "{cascades:?}");
    assert_eq!(cascades[0]["holder"]["kind"], "Namespace");
    assert_eq!(cascades[0]["holder"]["name"], t4.as_str());
    let victims: Vec<(&str, &str)> = cascades[0]["victims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["id"]["name"].as_str().unwrap(), v["why"].as_str().unwrap()))
        .collect();
    assert_eq!(victims, [("precious", "untracked")]);
    assert!(
        refused.stderr.contains(&format!(
            "Namespace/{t4}: 1 object(s) the plan does not delete (ConfigMap/{t4}/precious)"
        )),
        "{}",
        refused.stderr
    );
    assert!(exists("configmap", Some(&t4), "p"));
    assert!(exists("configmap", Some(&t4), "precious"));

    // --keep-cascading: the Namespace stays (the plan says why), `p` goes, and the garbage
    // collector, seeing the ClusterRole alive, only drops `p` from `precious`'s owners.
    let held = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/s4",
        "--keep-cascading",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    let lines = json_lines(&held.stdout);
    let why = kept_reason(&lines, "Namespace", &t4).unwrap_or_else(|| panic!("Namespace kept: {}", held.stdout));
    assert!(
        why.starts_with("--keep-cascading") && why.contains(&format!("ConfigMap/{t4}/precious")),
        "{why}"
    );
    assert_eq!(wave_of(&lines, "Namespace", &t4), None);
    assert!(!exists("configmap", Some(&t4), "p"), "{}", held.stdout);
    let owners = || {
        kubectl(&[
            "get",
            "configmap",
            "precious",
            "-n",
            &t4,
            "-o",
            "jsonpath={.metadata.ownerReferences[*].uid}",
        ])
        .stdout
    };
    wait_until(Duration::from_secs(30), || owners() == role_uid);
    assert!(exists("namespace", None, &t4));
    assert_eq!(field("configmap", &t4, "precious", ".data.only"), "copy");
}

/// Case 2 (kustomize-controller#301): stack `op8` (CRD, operator), `use8` dependsOn it, `other8`
/// holds a custom resource with the operator's finalizer and no dependsOn. Tearing `op8` down
/// takes `use8` (its custom resource finalized by the live operator) and keeps the CRD and the
/// operator, which `other8`'s custom resource still needs — with `--keep-cascading` too. The
/// operator is still there to finalize it afterwards.
#[test]
fn another_stacks_custom_resource_keeps_its_operator_through_the_inferred_edge() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm2");
    let f = flux.0.clone();
    let run = unique("gm2");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let (op_ns, use_ns, other_ns) = (format!("{run}-op"), format!("{run}-use"), format!("{run}-other"));
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &use_ns);
    leftovers.custom(&resource, &other_ns);
    for namespace in [&op_ns, &use_ns, &other_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("crd", &resource);
    let (op8, use8, other8) = (
        flux_labels("op8", &f),
        flux_labels("use8", &f),
        flux_labels("other8", &f),
    );
    apply(&format!(
        "{}{}{}{}{}",
        kustomization("op8", &f, ""),
        kustomization("use8", &f, ", dependsOn: [{name: op8}]"),
        kustomization("other8", &f, ""),
        crd(&group, "Gizmo", "gizmos", &op8),
        operator(&op_ns, "controller", &op8),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        r#"---
apiVersion: v1
kind: Namespace
metadata: {{name: {use_ns}, labels: {use8}}}
---
apiVersion: {group}/v1
kind: Gizmo
metadata: {{name: u, namespace: {use_ns}, labels: {use8}, finalizers: [{finalizer}]}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {other_ns}, labels: {other8}}}
---
apiVersion: {group}/v1
kind: Gizmo
metadata: {{name: o, namespace: {other_ns}, labels: {other8}, finalizers: [{finalizer}]}}
"#
    ));
    record_flux_inventories(&f);
    let alive_ns = op_ns.clone();
    let operator = StandIn::start(&resource, None, "", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "controller")
    });

    // `graph` shows the edge the plan keeps the operator by.
    assert_eq!(
        graph_edges(("Gizmo", &other_ns, "o"), ("Deployment", &op_ns, "controller")),
        ["inferredFinalizer"]
    );
    let needed_by_o = format!("needed by Gizmo.{group}/{other_ns}/o, which is not pruned (inferred: finalizer)");
    for extra in [&[][..], &["--keep-cascading"][..]] {
        let mut args = vec!["prune", "-n", &f, "kustomization/op8", "--dry-run", "-o", "json"];
        args.extend_from_slice(extra);
        let planned = stack(&args).expect_code(0);
        let lines = json_lines(&planned.stdout);
        assert_eq!(wave_of(&lines, "Deployment", "controller"), None, "{extra:?}");
        assert_eq!(
            kept_reason(&lines, "Deployment", "controller").as_deref(),
            Some(needed_by_o.as_str()),
            "{extra:?}: {}",
            planned.stdout
        );
        assert_eq!(
            kept_reason(&lines, "CustomResourceDefinition", &resource),
            Some(format!("holds Gizmo.{group}/{other_ns}/o, which is not pruned")),
            "{extra:?}"
        );
        planned_wave(&lines, "Gizmo", "u");
    }

    record_flux_inventories(&f);
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op8",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert!(!exists(&resource, Some(&use_ns), "u"));
    assert!(!exists("kustomization", Some(&f), "use8"));
    assert!(exists("deployment", Some(&op_ns), "controller"));
    assert!(exists("crd", None, &resource));
    assert!(exists(&resource, Some(&other_ns), "o"));

    // The operator is there to finalize `other8`'s custom resource when its time comes.
    assert_eq!(
        kubectl(&["delete", &resource, "o", "-n", &other_ns, "--wait=false"]).code,
        0
    );
    wait_until(Duration::from_secs(30), || !exists(&resource, Some(&other_ns), "o"));
    assert_eq!(operator.stop(), 2, "the live operator finalized `u` and `o`");
}

/// Adversarial review, finding 7: the CRD in one stack (`crds7`), its operator in another
/// (`op7`: a Deployment whose ServiceAccount a ClusterRoleBinding binds to a ClusterRole that
/// may update the group's objects), a custom resource of a third (`other7`) with the operator's
/// finalizer. RBAC ties the finalizer to the operator: tearing `op7` down keeps the operator
/// (needed by the custom resource that stays), and `graph` shows the edge.
#[test]
fn an_operator_in_another_stack_than_its_crd_is_kept_for_the_custom_resources_that_stay() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm7");
    let f = flux.0.clone();
    let run = unique("gm7");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let (op_ns, other_ns) = (format!("{run}-op"), format!("{run}-other"));
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &other_ns);
    for namespace in [&op_ns, &other_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &format!("{run}-manager"));
    leftovers.object("clusterrolebinding", &format!("{run}-manager"));
    let (crds7, op7, other7) = (
        flux_labels("crds7", &f),
        flux_labels("op7", &f),
        flux_labels("other7", &f),
    );
    apply(&format!(
        r#"{}{}{}{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {op_ns}, labels: {op7}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: manager, namespace: {op_ns}, labels: {op7}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-manager, labels: {op7}}}
rules: [{{apiGroups: [{group}], resources: [gizmos, gizmos/finalizers], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {run}-manager, labels: {op7}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}-manager}}
subjects: [{{kind: ServiceAccount, name: manager, namespace: {op_ns}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: controller, namespace: {op_ns}, labels: {op7}}}
spec:
  selector: {{matchLabels: {{app: controller}}}}
  template:
    metadata: {{labels: {{app: controller}}}}
    spec: {{serviceAccountName: manager, containers: [{{name: manager, image: example.invalid/operator}}]}}
"#,
        kustomization("crds7", &f, ""),
        kustomization("op7", &f, ""),
        kustomization("other7", &f, ""),
        crd(&group, "Gizmo", "gizmos", &crds7),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        r#"---
apiVersion: v1
kind: Namespace
metadata: {{name: {other_ns}, labels: {other7}}}
---
apiVersion: {group}/v1
kind: Gizmo
metadata: {{name: o, namespace: {other_ns}, labels: {other7}, finalizers: [{finalizer}]}}
"#
    ));
    assert_eq!(
        graph_edges(("Gizmo", &other_ns, "o"), ("Deployment", &op_ns, "controller")),
        ["inferredFinalizer"]
    );
    record_flux_inventories(&f);
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op7",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    let lines = json_lines(&pruned.stdout);
    assert_eq!(
        kept_reason(&lines, "Deployment", "controller"),
        Some(format!(
            "needed by Gizmo.{group}/{other_ns}/o, which is not pruned (inferred: finalizer)"
        )),
        "{}",
        pruned.stdout
    );
    assert!(exists("deployment", Some(&op_ns), "controller"), "{}", pruned.stdout);
    assert!(exists(&resource, Some(&other_ns), "o"));
    assert!(!exists("kustomization", Some(&f), "op7"), "{}", pruned.stderr);
}

/// Review finding F5 (issue 25; property-test finding F2): stack `op5` keeps its CRD (keep
/// marker) and holds the operator; an untracked custom resource, made by hand, carries the
/// operator's finalizer. It stays, so it keeps the operator (what stays keeps what it needs):
/// deleting it later must not hang for good.
#[test]
fn an_untracked_custom_resource_that_stays_keeps_its_operator() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm5");
    let f = flux.0.clone();
    let app_ns = Namespace::new("gm5-app");
    let run = unique("gm5");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let op_ns = format!("{run}-op");
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &app_ns.0);
    leftovers.object("namespace", &op_ns);
    leftovers.object("crd", &resource);
    let op5 = flux_labels("op5", &f);
    let kept_crd = kept_crd(&group, &op5);
    apply(&format!(
        "{}{}{}",
        kustomization("op5", &f, ""),
        kept_crd,
        operator(&op_ns, "controller", &op5),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Gizmo\nmetadata: {{name: handmade, namespace: {}, finalizers: [{finalizer}]}}\n",
        app_ns.0
    ));
    // The planning graph lists the custom resources of the stack's CRDs everywhere; a LIST
    // answered 404 (as when the CRD changes or goes after discovery; CI caught one when another
    // test deleted its CRD) is settled as on every path: discovery runs afresh and the kind is
    // listed again, never a refusal for an "unlisted" kind, never taken as empty.
    let path = format!("/apis/{group}/v1/gizmos");
    let proxy = proxy::Proxy::start(&["--not-found-at", &format!("{path}=1")]);
    record_flux_inventories(&f);
    let planned = stack_as(
        &proxy.kubeconfig,
        &["prune", "-n", &f, "kustomization/op5", "--dry-run", "-o", "json"],
    );
    assert_eq!(
        planned.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        planned.stdout, planned.stderr
    );
    assert!(
        proxy.records().iter().any(|r| r.fault() == Some("not-found")),
        "the proxy answered the LIST 404"
    );
    assert!(
        kept_reason(&json_lines(&planned.stdout), "Deployment", "controller")
            .is_some_and(|why| why.contains("handmade")),
        "listed again, the custom resource keeps its operator\n{}",
        planned.stdout
    );
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op5",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    let lines = json_lines(&pruned.stdout);
    assert_eq!(
        kept_reason(&lines, "Deployment", "controller"),
        Some(format!(
            "needed by Gizmo.{group}/{}/handmade, which is not pruned (inferred: finalizer)",
            app_ns.0
        )),
        "{}",
        pruned.stdout
    );
    assert!(exists("deployment", Some(&op_ns), "controller"), "{}", pruned.stdout);
    assert!(exists("crd", None, &resource));
}

/// Case 3: stack `op3` holds a CRD and its operator; an untracked custom resource with the
/// operator's finalizer lives elsewhere. With `--allow-cascade` it dies with its CRD, so the CRD
/// (and through it the custom resource) must be gone before the operator is deleted: one wave for
/// both leaves them stuck for good.
#[test]
fn allow_cascade_deletes_a_crd_before_the_operator_its_victim_needs() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm3");
    let f = flux.0.clone();
    let stray_ns = Namespace::new("gm3-stray");
    let run = unique("gm3");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let op_ns = format!("{run}-op");
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &stray_ns.0);
    leftovers.object("namespace", &op_ns);
    leftovers.object("crd", &resource);
    let op3 = flux_labels("op3", &f);
    apply(&format!(
        "{}{}{}",
        kustomization("op3", &f, ""),
        crd(&group, "Gizmo", "gizmos", &op3),
        operator(&op_ns, "controller", &op3),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Gizmo\nmetadata: {{name: stray, namespace: {}, finalizers: [{finalizer}]}}\n",
        stray_ns.0
    ));

    // --keep-cascading keeps the CRD, so `stray` stays: it keeps its operator too.
    record_flux_inventories(&f);
    let held = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op3",
        "--keep-cascading",
        "--dry-run",
        "-o",
        "json",
    ])
    .expect_code(0);
    let lines = json_lines(&held.stdout);
    let why = kept_reason(&lines, "CustomResourceDefinition", &resource).unwrap_or_else(|| panic!("{}", held.stdout));
    assert!(why.starts_with("--keep-cascading"), "{why}");
    assert_eq!(
        kept_reason(&lines, "Deployment", "controller"),
        Some(format!(
            "needed by Gizmo.{group}/{}/stray, which is not pruned (inferred: finalizer)",
            stray_ns.0
        )),
        "{}",
        held.stdout
    );
    assert_eq!(wave_of(&lines, "Deployment", "controller"), None);

    let planned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op3",
        "--allow-cascade",
        "--dry-run",
        "-o",
        "json",
    ])
    .expect_code(0);
    let lines = json_lines(&planned.stdout);
    let cascades = plan_line(&lines)["cascades"].as_array().unwrap().clone();
    assert_eq!(cascades.len(), 1, "{cascades:?}");
    assert_eq!(cascades[0]["holder"]["name"], resource.as_str());
    assert_eq!(cascades[0]["victims"][0]["id"]["name"], "stray");
    let crd_wave = planned_wave(&lines, "CustomResourceDefinition", &resource);
    assert!(
        crd_wave < planned_wave(&lines, "Deployment", "controller"),
        "the CRD takes `stray`, which needs the operator: {}",
        planned.stdout
    );
    let why = planned_why(&lines, "CustomResourceDefinition", &resource);
    assert!(
        why.contains(&format!("Deployment.apps/{op_ns}/controller"))
            && why.contains(&format!("Gizmo.{group}/{}/stray", stray_ns.0)),
        "{why}"
    );

    let alive_ns = op_ns.clone();
    let operator = StandIn::start(&resource, Some(&stray_ns.0), "stray", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "controller")
    });
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op3",
        "--allow-cascade",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the live operator finalized the victim");
    let lines = json_lines(&pruned.stdout);
    assert!(
        event_at(&lines, "CustomResourceDefinition", &resource, "gone")
            < event_at(&lines, "Deployment", "controller", "deleted")
    );
    assert!(!exists("crd", None, &resource));
    assert!(!exists("deployment", Some(&op_ns), "controller"));
}

/// Case 4: Rook's finalizer `cephcluster.ceph.rook.io` has no slash. It names the CRD's group by
/// its domain all the same: the custom resource goes before the operator (one wave would leave
/// it stuck), `graph` shows the edge, and `stuck` names the controller of a stuck one.
#[test]
fn a_finalizer_without_a_slash_names_its_operator() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm4");
    let f = flux.0.clone();
    let stuck_ns = Namespace::new("gm4-stuck");
    let run = unique("gm4");
    let group = own_group(&run);
    let resource = format!("cephclusters.{group}");
    let op_ns = format!("{run}-rook");
    let finalizer = format!("cephcluster.{group}");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &op_ns);
    leftovers.custom(&resource, &stuck_ns.0);
    leftovers.object("namespace", &op_ns);
    leftovers.object("crd", &resource);
    let rook = flux_labels("rook", &f);
    apply(&format!(
        "{}{}{}",
        kustomization("rook", &f, ""),
        crd(&group, "CephCluster", "cephclusters", &rook),
        operator(&op_ns, "rook-ceph-operator", &rook),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        r#"---
apiVersion: {group}/v1
kind: CephCluster
metadata: {{name: ceph, namespace: {op_ns}, labels: {rook}, finalizers: [{finalizer}]}}
---
apiVersion: {group}/v1
kind: CephCluster
metadata: {{name: held, namespace: {stuck}, finalizers: [{finalizer}]}}
"#,
        stuck = stuck_ns.0
    ));

    assert_eq!(
        graph_edges(
            ("CephCluster", &op_ns, "ceph"),
            ("Deployment", &op_ns, "rook-ceph-operator")
        ),
        ["inferredFinalizer"]
    );

    // A custom resource stuck on the finalizer: `stuck` names the controller of its CRD (the
    // operator has no ready replica here: nothing runs pods).
    assert_eq!(
        kubectl(&["delete", &resource, "held", "-n", &stuck_ns.0, "--wait=false"]).code,
        0
    );
    record_flux_inventories(&f);
    let json = stack(&["stuck", "-n", &stuck_ns.0, "-o", "json"]).expect_code(1).json();
    let item = json["stuck"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "held")
        .unwrap_or_else(|| panic!("held not stuck: {json}"));
    let why: Vec<&str> = item["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    let why = why.join("\n");
    assert!(
        why.contains(&format!(
            "belongs to the controller of CRD {resource}, tracked by flux:{f}/rook: the stack's Deployment {op_ns}/rook-ceph-operator has 0/1 ready"
        )),
        "{why}"
    );
    release_finalizers(&format!("{resource}/held"), &stuck_ns.0);
    wait_until(Duration::from_secs(30), || {
        !exists(&resource, Some(&stuck_ns.0), "held")
    });

    let planned = stack(&["prune", "-n", &f, "kustomization/rook", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert!(
        planned_wave(&lines, "CephCluster", "ceph") < planned_wave(&lines, "Deployment", "rook-ceph-operator"),
        "{}",
        planned.stdout
    );
    assert!(
        planned_why(&lines, "CephCluster", "ceph").contains(&format!(
            "before Deployment.apps/{op_ns}/rook-ceph-operator (inferred: finalizer)"
        )),
        "{}",
        planned.stdout
    );

    let alive_ns = op_ns.clone();
    let operator = StandIn::start(&resource, Some(&op_ns), "ceph", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "rook-ceph-operator")
    });
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/rook",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the live operator finalized the CephCluster");
    let lines = json_lines(&pruned.stdout);
    assert!(
        event_at(&lines, "CephCluster", "ceph", "gone")
            < event_at(&lines, "Deployment", "rook-ceph-operator", "deleted")
    );
    assert!(!exists("crd", None, &resource));
}

/// Case 5: an operator made a ValidatingWebhookConfiguration at run time (as Kyverno does):
/// untracked, `failurePolicy: Fail` on configmap DELETE, served by Service `hook` of stack `s9`.
/// Tearing `s9` down keeps the Service and the Deployment behind it, and says why; the rest
/// goes. (Its namespaceSelector matches no namespace: no other test's DELETE is sent to it.)
#[test]
fn an_untracked_webhook_keeps_the_backend_it_calls() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm5");
    let f = flux.0.clone();
    let run = unique("gm5");
    let t9 = format!("{run}-t9");
    let webhook = format!("{run}-guard");
    let mut leftovers = Leftovers::new();
    leftovers.object("validatingwebhookconfiguration", &webhook);
    leftovers.object("namespace", &t9);
    let s9 = flux_labels("s9", &f);
    apply(&format!(
        r#"{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {t9}, labels: {s9}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: hook-server, namespace: {t9}, labels: {s9}}}
spec:
  selector: {{matchLabels: {{app: hook}}}}
  template: {{metadata: {{labels: {{app: hook}}}}, spec: {{containers: [{{name: hook, image: example.invalid/hook}}]}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: hook, namespace: {t9}, labels: {s9}}}
spec: {{selector: {{app: hook}}, ports: [{{port: 443, targetPort: 9443}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {t9}, labels: {s9}}}
"#,
        kustomization("s9", &f, "")
    ));
    apply(&format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {webhook}}}
webhooks:
- name: guard.{run}.example.com
  clientConfig: {{service: {{namespace: {t9}, name: hook, path: /validate}}}}
  rules: [{{apiGroups: [""], apiVersions: ["v1"], operations: ["DELETE"], resources: ["configmaps"]}}]
  namespaceSelector: {{matchLabels: {{graphmodel-guarded: "{run}"}}}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: ["v1"]
"#
    ));

    let needed = format!(
        "needed by ValidatingWebhookConfiguration.admissionregistration.k8s.io/{webhook}, which is not pruned (inferred: webhook backend)"
    );
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/s9", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    for (kind, name) in [("Service", "hook"), ("Deployment", "hook-server")] {
        assert_eq!(wave_of(&lines, kind, name), None, "{}", planned.stdout);
        assert_eq!(kept_reason(&lines, kind, name).as_deref(), Some(needed.as_str()));
    }
    planned_wave(&lines, "ConfigMap", "settings");

    // The table: what is kept, and why, on stderr above the prompt.
    let pruned = stack(&["prune", "-n", &f, "kustomization/s9", "--yes", "--timeout", "60s"]);
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    for kept in [
        format!("Service/{t9}/hook"),
        format!("Deployment.apps/{t9}/hook-server"),
    ] {
        assert!(
            pruned.stderr.contains(&format!("kept: {kept} ({needed})")),
            "{}",
            pruned.stderr
        );
    }
    assert!(
        pruned.stderr.contains(&format!("kept: Namespace/{t9} (holds ")),
        "{}",
        pruned.stderr
    );
    assert!(!exists("configmap", Some(&t9), "settings"), "{}", pruned.stdout);
    assert!(exists("service", Some(&t9), "hook"));
    assert!(exists("deployment", Some(&t9), "hook-server"));
    assert!(exists("validatingwebhookconfiguration", None, &webhook));
}

/// Case 2 on the re-check's path: a custom resource the re-check drops from its wave (a keep
/// marker added while an earlier wave waits) stays, so the operator its finalizer names is
/// withheld from the later waves like every other dependency it has — not deleted under it.
#[test]
fn the_recheck_withholds_the_operator_of_a_custom_resource_it_drops() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm2r");
    let f = flux.0.clone();
    let run = unique("gm2r");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let op_ns = format!("{run}-op");
    let finalizer = format!("{group}/cleanup");
    let hold = "graphmodel.example.com/hold";
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &op_ns);
    leftovers.object("namespace", &op_ns);
    leftovers.object("crd", &resource);
    let op = flux_labels("op", &f);
    apply(&format!(
        "{}{}{}",
        kustomization("op", &f, ""),
        crd(&group, "Gizmo", "gizmos", &op),
        operator(&op_ns, "controller", &op),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    // `first` (held by a finalizer, so its wave waits) goes before `late`.
    apply(&format!(
        r#"---
apiVersion: {group}/v1
kind: Gizmo
metadata: {{name: late, namespace: {op_ns}, labels: {op}, finalizers: [{finalizer}]}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  namespace: {op_ns}
  labels: {op}
  finalizers: [{hold}]
  annotations: {{config.kubernetes.io/depends-on: {group}/namespaces/{op_ns}/Gizmo/late}}
"#
    ));
    let alive_ns = op_ns.clone();
    let operator = StandIn::start(&resource, Some(&op_ns), "late", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "controller")
    });

    record_flux_inventories(&f);
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &op_ns, "first")
    });
    let kept = kubectl(&[
        "annotate",
        &resource,
        "late",
        "-n",
        &op_ns,
        "kustomize.toolkit.fluxcd.io/prune=disabled",
    ]);
    assert_eq!(kept.code, 0, "{}", kept.stderr);
    release_finalizers("configmap/first", &op_ns);
    let pruned = finish(child);
    assert_eq!(operator.stop(), 0, "`late` was never deleted");
    let lines = json_lines(&pruned.stdout);
    assert!(
        planned_wave(&lines, "Gizmo", "late") < planned_wave(&lines, "Deployment", "controller"),
        "{}",
        pruned.stdout
    );
    let dropped = |name: &str| {
        lines
            .iter()
            .find(|e| e["type"] == "event" && e["change"] == "dropped" && e["id"]["name"] == name)
            .and_then(|e| e["reason"].as_str())
            .unwrap_or_else(|| panic!("{name} not dropped:\n{}\n{}", pruned.stdout, pruned.stderr))
            .to_string()
    };
    assert!(dropped("late").contains("kustomize.toolkit.fluxcd.io/prune=disabled"));
    assert_eq!(
        dropped("controller"),
        format!("needed by Gizmo.{group}/{op_ns}/late, which was not deleted")
    );
    assert_eq!(pruned.code, 5, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert!(!exists("configmap", Some(&op_ns), "first"));
    assert!(exists(&resource, Some(&op_ns), "late"));
    assert!(exists("deployment", Some(&op_ns), "controller"), "{}", pruned.stdout);
    assert!(exists("crd", None, &resource));
}

/// Adversarial review, finding 7: a custom resource made after the plan (another team's, with
/// the operator's finalizer) keeps the operator at the re-check of the operator's wave, as the
/// plan would have: the re-check builds its graph as the plan does, inference included. The
/// CRD that now holds it is dropped, and so is the operator — not deleted under it.
#[test]
fn a_custom_resource_made_after_the_plan_keeps_its_operator_at_the_recheck() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm7r");
    let f = flux.0.clone();
    let run = unique("gm7r");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let (op_ns, other_ns) = (format!("{run}-op"), format!("{run}-other"));
    let finalizer = format!("{group}/cleanup");
    let hold = "graphmodel.example.com/hold";
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &other_ns);
    leftovers.object("namespace", &op_ns);
    leftovers.object("namespace", &other_ns);
    leftovers.object("crd", &resource);
    let op = flux_labels("op", &f);
    apply(&format!(
        "{}{}{}",
        kustomization("op", &f, ""),
        crd(&group, "Gizmo", "gizmos", &op),
        operator(&op_ns, "controller", &op),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    // `first` (held by a finalizer, so its wave waits) goes before the operator and the CRD.
    apply(&format!(
        r#"---
apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  namespace: {op_ns}
  labels: {op}
  finalizers: [{hold}]
  annotations:
    config.kubernetes.io/depends-on: apps/namespaces/{op_ns}/Deployment/controller,apiextensions.k8s.io/CustomResourceDefinition/{resource}
"#
    ));
    let alive_ns = op_ns.clone();
    let operator = StandIn::start(&resource, Some(&other_ns), "late", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "controller")
    });

    record_flux_inventories(&f);
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &op_ns, "first")
    });
    apply(&format!(
        r#"---
apiVersion: v1
kind: Namespace
metadata: {{name: {other_ns}}}
---
apiVersion: {group}/v1
kind: Gizmo
metadata: {{name: late, namespace: {other_ns}, finalizers: [{finalizer}]}}
"#
    ));
    release_finalizers("configmap/first", &op_ns);
    let pruned = finish(child);
    let lines = json_lines(&pruned.stdout);
    let dropped = |name: &str| {
        lines
            .iter()
            .find(|e| e["type"] == "event" && e["change"] == "dropped" && e["id"]["name"] == name)
            .and_then(|e| e["reason"].as_str())
            .unwrap_or_else(|| panic!("{name} not dropped:\n{}\n{}", pruned.stdout, pruned.stderr))
            .to_string()
    };
    let controller = dropped("controller");
    assert!(
        controller.contains(&format!("needed by Gizmo.{group}/{other_ns}/late")) && controller.contains("finalizer"),
        "{controller}"
    );
    assert!(controller.contains("found by the re-check"), "{controller}");
    assert!(dropped(&resource).contains("late"));
    assert_eq!(pruned.code, 5, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert!(!exists("configmap", Some(&op_ns), "first"));
    assert!(exists("deployment", Some(&op_ns), "controller"), "{}", pruned.stdout);
    assert!(exists("crd", None, &resource));

    // The operator is there to finalize the newcomer when its time comes.
    assert_eq!(
        kubectl(&["delete", &resource, "late", "-n", &other_ns, "--wait=false"]).code,
        0
    );
    wait_until(Duration::from_secs(30), || !exists(&resource, Some(&other_ns), "late"));
    assert_eq!(operator.stop(), 1, "the live operator finalized `late`");
}

/// Adversarial review, findings 3 and 4: a custom resource that dies with a planned owner (the
/// garbage collector deletes it once its only owner is gone) is a node of the plan like any
/// victim: what it needs orders the waves. Stack `op` holds the operator, a ConfigMap `parent`
/// and the CRD (kept: `prune: disabled`); an untracked Gizmo `child` owned by `parent` carries
/// the operator's finalizer. `parent` goes before the operator, so the operator is there to
/// finalize `child`; one wave for both would leave `child` stuck for good.
#[test]
fn an_object_that_dies_with_a_planned_owner_goes_before_the_operator_it_needs() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm34");
    let f = flux.0.clone();
    let run = unique("gm34");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let (op_ns, data_ns) = (format!("{run}-op"), format!("{run}-data"));
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &data_ns);
    leftovers.object("namespace", &op_ns);
    leftovers.object("namespace", &data_ns);
    leftovers.object("crd", &resource);
    let op = flux_labels("op", &f);
    let kept_crd = kept_crd(&group, &op);
    apply(&format!(
        "{}{kept_crd}{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {data_ns}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: parent, namespace: {data_ns}, labels: {op}}}\n",
        kustomization("op", &f, ""),
        operator(&op_ns, "controller", &op),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    let parent_uid = uid_of("configmap", Some(&data_ns), "parent");
    apply(&format!(
        r#"apiVersion: {group}/v1
kind: Gizmo
metadata:
  name: child
  namespace: {data_ns}
  finalizers: [{finalizer}]
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: parent, uid: {parent_uid}, controller: true, blockOwnerDeletion: true}}]
"#
    ));
    let alive_ns = op_ns.clone();
    let operator = StandIn::start(&resource, Some(&data_ns), "child", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "controller")
    });

    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert!(
        planned_wave(&lines, "ConfigMap", "parent") < planned_wave(&lines, "Deployment", "controller"),
        "`child` dies with `parent` and needs the operator: {}",
        planned.stdout
    );
    let why = planned_why(&lines, "ConfigMap", "parent");
    assert!(
        why.contains(&format!("Deployment.apps/{op_ns}/controller"))
            && why.contains(&format!("Gizmo.{group}/{data_ns}/child")),
        "{why}"
    );

    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the live operator finalized `child`");
    assert!(!exists(&resource, Some(&data_ns), "child"));
    assert!(!exists("deployment", Some(&op_ns), "controller"));
    assert!(exists("crd", None, &resource));
}

/// Issue 29's finding F3 on the cluster: ConfigMap `p` is stack `s`'s; an untracked `mid` is owned
/// by `p`, and an untracked `need` by `mid`; stack `other`'s ConfigMap `user` depends on `need`.
/// The garbage collector takes `mid` and then `need` once `p` goes, so `user` would lose what it
/// depends on: `p` is kept, and the plan says why — through the owner in between, which is no
/// node of the graph (`Graph::outside_owners`).
#[test]
fn what_stays_keeps_an_owner_whose_chain_through_untracked_objects_takes_its_need() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("gmchain");
    let n = ns.0.clone();
    let (s, other) = (flux_labels("s", &n), flux_labels("other", &n));
    apply(&format!(
        r#"{}---
{}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: p, namespace: {n}, labels: {s}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: user, namespace: {n}, labels: {other}, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/need}}}}
"#,
        kustomization("s", &n, ""),
        kustomization("other", &n, "")
    ));
    let p_uid = uid_of("configmap", Some(&n), "p");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: mid, namespace: {n}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: p, uid: {p_uid}}}]}}\n"
    ));
    let mid_uid = uid_of("configmap", Some(&n), "mid");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: need, namespace: {n}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: mid, uid: {mid_uid}}}]}}\n"
    ));
    record_flux_inventories(&n);
    let run = stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/s",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let lines = json_lines(&run.stdout);
    let why = kept_reason(&lines, "ConfigMap", "p").unwrap_or_else(|| panic!("p kept: {}\n{}", run.stdout, run.stderr));
    assert!(
        why.contains(&format!("needed by ConfigMap/{n}/user"))
            && why.contains(&format!("ConfigMap/{n}/need dies with it")),
        "{why}"
    );
    assert_eq!(wave_of(&lines, "ConfigMap", "p"), None);
    assert!(exists("configmap", Some(&n), "p"), "{}", run.stderr);
    assert!(exists("configmap", Some(&n), "need"), "{}", run.stderr);
    assert!(exists("configmap", Some(&n), "user"), "{}", run.stderr);
}

/// Order review 4, finding 1: deleting an owner takes what the garbage collector deletes with it.
/// Stack `sa` owns ConfigMap `owner-y` and ClusterRole `owner`; stack `sb`'s ConfigMap, a
/// keep-marked member of `sa` and an untracked keep-marked ConfigMap hang from them by plain
/// owner references. Each is a named victim of its owner: refused without `--allow-cascade`, and
/// `--keep-cascading` keeps the owners, so that nothing is lost.
#[test]
fn what_a_planned_owner_takes_beyond_the_plan_is_a_named_victim() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("gmowner");
    let n = ns.0.clone();
    let role = format!("{n}-owner");
    let mut leftovers = Leftovers::new();
    leftovers.object("clusterrole", &role);
    let (sa, sb) = (flux_labels("sa", &n), flux_labels("sb", &n));
    apply(&format!(
        r#"{}---
{}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: owner-y, namespace: {n}, labels: {sa}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {role}, labels: {sa}}}
rules: []
"#,
        kustomization("sa", &n, ""),
        kustomization("sb", &n, "")
    ));
    let (y, r) = (
        uid_of("configmap", Some(&n), "owner-y"),
        uid_of("clusterrole", None, &role),
    );
    let by_y = format!("[{{apiVersion: v1, kind: ConfigMap, name: owner-y, uid: {y}}}]");
    // Order review 5, finding 1: a controller's reference exempts only an unmarked child.
    let by_y_ctl = format!("[{{apiVersion: v1, kind: ConfigMap, name: owner-y, uid: {y}, controller: true}}]");
    let by_role = format!("[{{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: {role}, uid: {r}}}]");
    let sa_kept = "{kustomize.toolkit.fluxcd.io/name: sa, kustomize.toolkit.fluxcd.io/namespace: NS}".replace("NS", &n);
    apply(&format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: x-otherstack, namespace: {n}, labels: {sb}, ownerReferences: {by_y}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: x-keep, namespace: {n}, labels: {sa_kept}, annotations: {{kustomize.toolkit.fluxcd.io/prune: disabled}}, ownerReferences: {by_y}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: x-keep-untracked, namespace: {n}, annotations: {{helm.sh/resource-policy: keep}}, ownerReferences: {by_y}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: x-cluster-owner, namespace: {n}, labels: {sb}, ownerReferences: {by_role}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: x-ctl-otherstack, namespace: {n}, labels: {sb}, ownerReferences: {by_y_ctl}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: x-ctl-keep, namespace: {n}, annotations: {{kustomize.toolkit.fluxcd.io/prune: disabled}}, ownerReferences: {by_y_ctl}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: x-ctl-made, namespace: {n}, ownerReferences: {by_y_ctl}}}
"#
    ));
    record_flux_inventories(&n);
    let refused = stack(&["prune", "-n", &n, "kustomization/sa", "--yes", "-o", "json"]).expect_code(4);
    let lines = json_lines(&refused.stdout);
    let cascades = plan_line(&lines)["cascades"].as_array().unwrap().clone();
    let mut victims: Vec<String> = cascades
        .iter()
        .flat_map(|c| c["victims"].as_array().unwrap().clone())
        .map(|v| v["id"]["name"].as_str().unwrap().to_string())
        .collect();
    victims.sort();
    assert_eq!(
        victims,
        [
            "x-cluster-owner",
            "x-ctl-keep",
            "x-ctl-otherstack",
            "x-keep",
            "x-keep-untracked",
            "x-otherstack"
        ],
        "{}",
        refused.stderr
    );
    for name in [
        "owner-y",
        "x-otherstack",
        "x-keep",
        "x-keep-untracked",
        "x-cluster-owner",
    ] {
        assert!(exists("configmap", Some(&n), name), "{name}: {}", refused.stderr);
    }
    let held = stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/sa",
        "--keep-cascading",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    let lines = json_lines(&held.stdout);
    let why = kept_reason(&lines, "ConfigMap", "owner-y").unwrap_or_else(|| panic!("owner-y kept: {}", held.stdout));
    assert!(
        why.starts_with("--keep-cascading") && why.contains("x-ctl-keep"),
        "{why}"
    );
    assert!(kept_reason(&lines, "ClusterRole", &role).is_some(), "{}", held.stdout);
    std::thread::sleep(Duration::from_secs(2));
    for name in [
        "owner-y",
        "x-otherstack",
        "x-keep",
        "x-keep-untracked",
        "x-cluster-owner",
    ] {
        assert!(exists("configmap", Some(&n), name), "{name}: {}", held.stderr);
    }
}

/// Review finding F2 (issue 25): the CRD is tracked by no stack (installed from a Helm chart's
/// `crds/`, by an operator, or by a Kustomization out of scope). Stack `op` holds the operator:
/// its Deployment, ServiceAccount, and a ClusterRole on the group's `dbs` and `dbs/finalizers`
/// bound to that account. Stack `other` holds a Db with the operator's finalizer and stays: it
/// keeps the operator, found through RBAC, though its CRD is no node of the graph.
#[test]
fn an_operator_of_an_untracked_crd_is_kept_for_the_custom_resource_that_stays() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm10");
    let f = flux.0.clone();
    let run = unique("gm10");
    let group = own_group(&run);
    let resource = format!("dbs.{group}");
    let (op_ns, other_ns) = (Namespace::new("gm10-op"), Namespace::new("gm10-y"));
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &other_ns.0);
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &format!("{run}-db"));
    leftovers.object("clusterrolebinding", &format!("{run}-db"));
    let (op, other) = (flux_labels("op", &f), flux_labels("other", &f));
    apply(&crd(&group, "Db", "dbs", "{}"));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        r#"{}{}---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: op, namespace: {op_ns}, labels: {op}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-db, labels: {op}}}
rules: [{{apiGroups: [{group}], resources: [dbs, dbs/finalizers], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {run}-db, labels: {op}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}-db}}
subjects: [{{kind: ServiceAccount, name: op, namespace: {op_ns}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: op, namespace: {op_ns}, labels: {op}}}
spec:
  selector: {{matchLabels: {{app: op}}}}
  template:
    metadata: {{labels: {{app: op}}}}
    spec: {{serviceAccountName: op, containers: [{{name: manager, image: example.invalid/operator}}]}}
---
apiVersion: {group}/v1
kind: Db
metadata: {{name: stays, namespace: {other_ns}, labels: {other}, finalizers: [{group}/cleanup]}}
"#,
        kustomization("op", &f, ""),
        kustomization("other", &f, ""),
        op_ns = op_ns.0,
        other_ns = other_ns.0,
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert_eq!(wave_of(&lines, "Deployment", "op"), None, "{}", planned.stdout);
    assert_eq!(
        kept_reason(&lines, "Deployment", "op"),
        Some(format!(
            "needed by Db.{group}/{}/stays, which is not pruned (inferred: finalizer)",
            other_ns.0
        )),
        "{}",
        planned.stdout
    );
}

/// Review findings F3 and F4 (issue 25): an untracked webhook's Service selects a bare Pod of
/// stack `s11`, whose container takes its environment from a ConfigMap and whose image comes
/// with a pull Secret; its second webhook calls a Service without a selector, served by the
/// Endpoints written for it (as an APIService's may be: one is not made here, as an APIService
/// without a live backend breaks discovery for every test). What stays keeps them all: the Pod
/// and the Endpoints as backends, the ConfigMap and the Secret as what the Pod reads.
#[test]
fn an_untracked_webhook_keeps_a_bare_pod_what_it_reads_and_hand_written_endpoints() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm11");
    let f = flux.0.clone();
    let run = unique("gm11");
    let t = Namespace::new("gm11-t");
    let webhook = format!("{run}-guard");
    let mut leftovers = Leftovers::new();
    leftovers.object("validatingwebhookconfiguration", &webhook);
    let s11 = flux_labels("s11", &f);
    apply(&format!(
        r#"{}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: hook-env, namespace: {t}, labels: {s11}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: pull, namespace: {t}, labels: {s11}}}
type: kubernetes.io/dockerconfigjson
data: {{.dockerconfigjson: eyJhdXRocyI6e319}}
---
apiVersion: v1
kind: Pod
metadata: {{name: hook-pod, namespace: {t}, labels: {{app: hook, {inner}}}}}
spec:
  imagePullSecrets: [{{name: pull}}]
  containers: [{{name: hook, image: example.invalid/hook, envFrom: [{{configMapRef: {{name: hook-env}}}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: hook, namespace: {t}, labels: {s11}}}
spec: {{selector: {{app: hook}}, ports: [{{port: 443, targetPort: 9443}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: metrics, namespace: {t}, labels: {s11}}}
spec: {{ports: [{{port: 443, targetPort: 6443}}]}}
---
apiVersion: v1
kind: Endpoints
metadata: {{name: metrics, namespace: {t}, labels: {s11}}}
subsets: [{{addresses: [{{ip: 10.0.0.1}}], ports: [{{port: 6443}}]}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {t}, labels: {s11}}}
"#,
        kustomization("s11", &f, ""),
        t = t.0,
        inner = s11.trim_start_matches('{').trim_end_matches('}'),
    ));
    apply(&format!(
        r#"---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {webhook}}}
webhooks:
- name: guard.{run}.example.com
  clientConfig: {{service: {{namespace: {t}, name: hook, path: /validate}}}}
  rules: [{{apiGroups: [""], apiVersions: ["v1"], operations: ["DELETE"], resources: ["configmaps"]}}]
  namespaceSelector: {{matchLabels: {{graphmodel-guarded: "{run}"}}}}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: ["v1"]
- name: direct.{run}.example.com
  clientConfig: {{service: {{namespace: {t}, name: metrics, path: /validate}}}}
  rules: [{{apiGroups: [""], apiVersions: ["v1"], operations: ["DELETE"], resources: ["configmaps"]}}]
  namespaceSelector: {{matchLabels: {{graphmodel-guarded: "{run}"}}}}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: ["v1"]
"#,
        t = t.0,
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/s11", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    let webhook_id = format!("ValidatingWebhookConfiguration.admissionregistration.k8s.io/{webhook}");
    let pod_id = format!("Pod/{}/hook-pod", t.0);
    for (kind, name, why) in [
        (
            "Pod",
            "hook-pod",
            format!("needed by {webhook_id}, which is not pruned (inferred: webhook backend)"),
        ),
        (
            "ConfigMap",
            "hook-env",
            format!("needed by {pod_id}, which is not pruned (inferred: runs with)"),
        ),
        (
            "Secret",
            "pull",
            format!("needed by {pod_id}, which is not pruned (inferred: runs with)"),
        ),
        (
            "Endpoints",
            "metrics",
            format!("needed by {webhook_id}, which is not pruned (inferred: webhook backend)"),
        ),
    ] {
        assert_eq!(wave_of(&lines, kind, name), None, "{kind}/{name}\n{}", planned.stdout);
        assert_eq!(kept_reason(&lines, kind, name), Some(why), "{}", planned.stdout);
    }
    planned_wave(&lines, "ConfigMap", "settings");
}

/// Issue 25, item 3: an untracked operator Deployment that a planned object controls (an
/// OLM-like ClusterServiceVersion, here stack `op`'s ConfigMap `csv`) is a node of the plan's
/// graph: it dies with `csv`, and stack `op`'s Gizmo `g`, whose finalizer RBAC ties to that
/// Deployment, goes before `csv`. In one wave, the garbage collector would take the operator
/// while `g` waits for it, and `g` would hang for good.
#[test]
fn a_custom_resource_goes_before_the_owner_that_takes_its_untracked_operator() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmcsv");
    let f = flux.0.clone();
    let op_ns = Namespace::new("gmcsv-op");
    let o = op_ns.0.clone();
    let run = unique("gmcsv");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &o);
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &run);
    leftovers.object("clusterrolebinding", &run);
    let op = flux_labels("op", &f);
    let kept_crd = kept_crd(&group, &op);
    apply(&format!(
        r#"{}{kept_crd}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: csv, namespace: {o}, labels: {op}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: controller, namespace: {o}, labels: {op}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}, labels: {op}}}
rules: [{{apiGroups: [{group}], resources: [gizmos], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {run}, labels: {op}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}}}
subjects: [{{kind: ServiceAccount, name: controller, namespace: {o}}}]
"#,
        kustomization("op", &f, ""),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    let csv_uid = uid_of("configmap", Some(&o), "csv");
    apply(&format!(
        r#"---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller
  namespace: {o}
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: csv, uid: {csv_uid}, controller: true, blockOwnerDeletion: true}}]
spec:
  selector: {{matchLabels: {{app: controller}}}}
  template:
    metadata: {{labels: {{app: controller}}}}
    spec: {{serviceAccountName: controller, containers: [{{name: manager, image: example.invalid/operator}}]}}
---
apiVersion: {group}/v1
kind: Gizmo
metadata: {{name: g, namespace: {o}, labels: {op}, finalizers: [{finalizer}]}}
"#
    ));
    record_flux_inventories(&f);
    let alive_ns = o.clone();
    let operator = StandIn::start(&resource, Some(&o), "g", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "controller")
    });

    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert!(
        planned_wave(&lines, "Gizmo", "g") < planned_wave(&lines, "ConfigMap", "csv"),
        "`csv` takes the operator `g` needs: {}",
        planned.stdout
    );
    let why = planned_why(&lines, "Gizmo", "g");
    assert!(why.contains(&format!("Deployment.apps/{o}/controller")), "{why}");
    assert_eq!(
        wave_of(&lines, "Deployment", "controller"),
        None,
        "no target: {}",
        planned.stdout
    );

    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/op",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the live operator finalized `g`");
    assert!(!exists(&resource, Some(&o), "g"));
    assert!(!exists("configmap", Some(&o), "csv"));
    wait_until(Duration::from_secs(60), || {
        !exists("deployment", Some(&o), "controller")
    });
}

/// Issue 25, item 2: the re-check before a wave reads owners outside its graph, as the plan
/// does. Stack `s` holds ConfigMaps `first` (held by a finalizer, before `p`) and `p`; the
/// untracked `mid` is controlled by `p`, and the untracked `need` by `mid`. Once `first` is
/// being deleted, stack `other`'s `user` starts to depend on `need`: the garbage collector would
/// take `need` with `p`, so the re-check of `p`'s wave keeps `p`, saying why.
#[test]
fn the_recheck_keeps_an_owner_whose_untracked_chain_takes_a_new_need() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("gmrechain");
    let n = ns.0.clone();
    let hold = "graphmodel.example.com/hold";
    let (s, other) = (flux_labels("s", &n), flux_labels("other", &n));
    apply(&format!(
        r#"{}{}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: p, namespace: {n}, labels: {s}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  namespace: {n}
  labels: {s}
  finalizers: [{hold}]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/p}}
"#,
        kustomization("s", &n, ""),
        kustomization("other", &n, "")
    ));
    let controlled = |name: &str, owner: &str, uid: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: {owner}, uid: {uid}, controller: true}}]}}\n"
        )
    };
    apply(&controlled("mid", "p", &uid_of("configmap", Some(&n), "p")));
    apply(&controlled("need", "mid", &uid_of("configmap", Some(&n), "mid")));
    record_flux_inventories(&n);

    let mut child = spawn_stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/s",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", &n, "first")
    });
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: user, namespace: {n}, labels: {other}, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/need}}}}\n"
    ));
    record_flux_inventory("other", &n);
    release_finalizers("configmap/first", &n);
    let pruned = finish(child);
    let lines = json_lines(&pruned.stdout);
    let dropped = lines
        .iter()
        .find(|e| e["type"] == "event" && e["change"] == "dropped" && e["id"]["name"] == "p")
        .and_then(|e| e["reason"].as_str())
        .unwrap_or_else(|| panic!("p not dropped:\n{}\n{}", pruned.stdout, pruned.stderr))
        .to_string();
    assert!(
        dropped.contains(&format!("needed by ConfigMap/{n}/user"))
            && dropped.contains(&format!("ConfigMap/{n}/need dies with it"))
            && dropped.contains("found by the re-check"),
        "{dropped}"
    );
    assert!(!exists("configmap", Some(&n), "first"));
    assert!(exists("configmap", Some(&n), "p"), "{}", pruned.stdout);
    assert!(exists("configmap", Some(&n), "need"), "{}", pruned.stdout);
}

/// Order review 6, F2 (property-test finding F2): an untracked object that stays is a stayer, and
/// its own `config.kubernetes.io/depends-on` keeps the member it names. Stack `s` tracks
/// ConfigMaps `need` and `plain`; the untracked ConfigMap `user` depends on `need`. The teardown
/// deletes `plain` and keeps `need`, naming `user` as the reason.
#[test]
fn an_untracked_objects_own_depends_on_keeps_the_member_it_names() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("gmf2");
    let n = ns.0.clone();
    let s = flux_labels("s", &n);
    apply(&format!(
        r#"{}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: need, namespace: {n}, labels: {s}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: plain, namespace: {n}, labels: {s}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: user, namespace: {n}, annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/need}}}}
"#,
        kustomization("s", &n, "")
    ));
    record_flux_inventories(&n);
    let run = stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/s",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let lines = json_lines(&run.stdout);
    let why =
        kept_reason(&lines, "ConfigMap", "need").unwrap_or_else(|| panic!("need kept: {}\n{}", run.stdout, run.stderr));
    assert!(why.contains(&format!("needed by ConfigMap/{n}/user")), "{why}");
    assert_eq!(wave_of(&lines, "ConfigMap", "need"), None);
    planned_wave(&lines, "ConfigMap", "plain");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(exists("configmap", Some(&n), "need"), "{}", run.stderr);
    assert!(exists("configmap", Some(&n), "user"), "{}", run.stderr);
    assert!(!exists("configmap", Some(&n), "plain"), "{}", run.stderr);
}

/// Order review 6, F4 (property-test finding F4): an untracked Service between a staying webhook
/// configuration (`failurePolicy: Fail`) and a tracked operator Deployment is read, so the
/// Deployment it selects is kept while the webhook stays. Stack `s` tracks Deployment
/// `hook-server` and ConfigMap `settings`; the Service `hook` and the webhook are untracked.
#[test]
fn an_untracked_service_between_a_staying_webhook_and_a_tracked_deployment_keeps_the_deployment() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("gmf4");
    let n = ns.0.clone();
    let run = unique("gmf4");
    let webhook = format!("{run}-guard");
    let mut leftovers = Leftovers::new();
    leftovers.object("validatingwebhookconfiguration", &webhook);
    let s = flux_labels("s", &n);
    apply(&format!(
        r#"{}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: hook-server, namespace: {n}, labels: {s}}}
spec:
  selector: {{matchLabels: {{app: hook}}}}
  template: {{metadata: {{labels: {{app: hook}}}}, spec: {{containers: [{{name: hook, image: example.invalid/hook}}]}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {n}, labels: {s}}}
---
apiVersion: v1
kind: Service
metadata: {{name: hook, namespace: {n}}}
spec: {{selector: {{app: hook}}, ports: [{{port: 443, targetPort: 9443}}]}}
"#,
        kustomization("s", &n, "")
    ));
    apply(&format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {webhook}}}
webhooks:
- name: guard.{run}.example.com
  clientConfig: {{service: {{namespace: {n}, name: hook, path: /validate}}}}
  rules: [{{apiGroups: [""], apiVersions: ["v1"], operations: ["DELETE"], resources: ["configmaps"]}}]
  namespaceSelector: {{matchLabels: {{graphmodel-guarded: "{run}"}}}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: ["v1"]
"#
    ));
    record_flux_inventories(&n);
    let pruned = stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/s",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let lines = json_lines(&pruned.stdout);
    let needed = format!(
        "needed by ValidatingWebhookConfiguration.admissionregistration.k8s.io/{webhook}, which is not pruned (inferred: webhook backend)"
    );
    assert_eq!(wave_of(&lines, "Deployment", "hook-server"), None, "{}", pruned.stdout);
    assert_eq!(
        kept_reason(&lines, "Deployment", "hook-server").as_deref(),
        Some(needed.as_str())
    );
    planned_wave(&lines, "ConfigMap", "settings");
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(exists("deployment", Some(&n), "hook-server"), "{}", pruned.stderr);
    assert!(exists("service", Some(&n), "hook"));
    assert!(!exists("configmap", Some(&n), "settings"));
}

/// Order review 6, F-D: a CRD's conversion webhook (`spec.conversion.webhook.clientConfig`) keeps
/// its backend while the CRD stays, as an admission webhook does. Stack `s` tracks Service `conv`,
/// Deployment `conv-server` behind it and ConfigMap `settings`; the CRD, made by hand (as an
/// operator or Helm's `crds/` makes one), is untracked. The teardown deletes `settings` only.
#[test]
fn a_crds_conversion_webhook_keeps_its_backend_while_the_crd_stays() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("gmfd");
    let n = ns.0.clone();
    let run = unique("gmfd");
    let group = own_group(&run);
    let crd_name = format!("widgets.{group}");
    let mut leftovers = Leftovers::new();
    leftovers.object("customresourcedefinition", &crd_name);
    let s = flux_labels("s", &n);
    apply(&format!(
        r#"{}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: conv-server, namespace: {n}, labels: {s}}}
spec:
  selector: {{matchLabels: {{app: conv}}}}
  template: {{metadata: {{labels: {{app: conv}}}}, spec: {{containers: [{{name: conv, image: example.invalid/conv}}]}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: conv, namespace: {n}, labels: {s}}}
spec: {{selector: {{app: conv}}, ports: [{{port: 443, targetPort: 9443}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {n}, labels: {s}}}
"#,
        kustomization("s", &n, "")
    ));
    apply(&format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd_name}}}
spec:
  group: {group}
  names: {{kind: Widget, plural: widgets, singular: widget}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig: {{service: {{namespace: {n}, name: conv, path: /convert}}}}
"#
    ));
    record_flux_inventories(&n);
    let pruned = stack(&[
        "prune",
        "-n",
        &n,
        "kustomization/s",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let lines = json_lines(&pruned.stdout);
    let needed = format!(
        "needed by CustomResourceDefinition.apiextensions.k8s.io/{crd_name}, which is not pruned (inferred: webhook backend)"
    );
    for (kind, name) in [("Service", "conv"), ("Deployment", "conv-server")] {
        assert_eq!(wave_of(&lines, kind, name), None, "{}", pruned.stdout);
        assert_eq!(
            kept_reason(&lines, kind, name).as_deref(),
            Some(needed.as_str()),
            "{}",
            pruned.stdout
        );
    }
    planned_wave(&lines, "ConfigMap", "settings");
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(exists("deployment", Some(&n), "conv-server"), "{}", pruned.stderr);
    assert!(exists("service", Some(&n), "conv"));
    assert!(!exists("configmap", Some(&n), "settings"));
}

/// Order review 6, F-B: RBAC that no stack tracks (a ClusterRole granting the CR's group, bound
/// to the operator's ServiceAccount, made by hand or by an installer) still ties another stack's
/// custom resource to the tracked operator Deployment: the teardown of `op` keeps it while the
/// custom resource stays with its finalizer. The CRD is untracked too.
#[test]
fn untracked_rbac_ties_a_custom_resource_to_its_tracked_operator() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmfb");
    let f = flux.0.clone();
    let run = unique("gmfb");
    let group = own_group(&run);
    let resource = format!("dbs.{group}");
    let (op_ns, other_ns) = (Namespace::new("gmfb-op"), Namespace::new("gmfb-y"));
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &other_ns.0);
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &format!("{run}-db"));
    leftovers.object("clusterrolebinding", &format!("{run}-db"));
    let (op, other) = (flux_labels("op", &f), flux_labels("other", &f));
    apply(&crd(&group, "Db", "dbs", "{}"));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        r#"{}{}---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: op, namespace: {op_ns}, labels: {op}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-db}}
rules: [{{apiGroups: [{group}], resources: [dbs, dbs/finalizers], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {run}-db}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}-db}}
subjects: [{{kind: ServiceAccount, name: op, namespace: {op_ns}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: op, namespace: {op_ns}, labels: {op}}}
spec:
  selector: {{matchLabels: {{app: op}}}}
  template:
    metadata: {{labels: {{app: op}}}}
    spec: {{serviceAccountName: op, containers: [{{name: manager, image: example.invalid/operator}}]}}
---
apiVersion: {group}/v1
kind: Db
metadata: {{name: stays, namespace: {other_ns}, labels: {other}, finalizers: [{group}/cleanup]}}
"#,
        kustomization("op", &f, ""),
        kustomization("other", &f, ""),
        op_ns = op_ns.0,
        other_ns = other_ns.0,
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert_eq!(wave_of(&lines, "Deployment", "op"), None, "{}", planned.stdout);
    assert_eq!(
        kept_reason(&lines, "Deployment", "op"),
        Some(format!(
            "needed by Db.{group}/{}/stays, which is not pruned (inferred: finalizer)",
            other_ns.0
        )),
        "{}",
        planned.stdout
    );
}

/// Order review 6, F-A: the RBAC an operator finalizes with goes after the custom resources it
/// finalizes, whichever stack tracks it. Stack `op` holds the CRD, the operator Deployment and
/// its ServiceAccount; stack `rbac` the ClusterRole and ClusterRoleBinding of that account;
/// stack `use` a Gizmo with the operator's finalizer. Torn down together, the Gizmo goes
/// first, then the operator, then its binding and role: the stand-in operator finalizes only
/// while its Deployment and its binding exist. Torn down without `op`, the operator stays and
/// keeps its binding and role.
#[test]
fn an_operators_rbac_from_another_stack_goes_after_the_custom_resources_it_finalizes() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmfa");
    let f = flux.0.clone();
    let op_ns = Namespace::new("gmfa-op");
    let o = op_ns.0.clone();
    let run = unique("gmfa");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &o);
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &run);
    leftovers.object("clusterrolebinding", &run);
    let (op, rbac, usage) = (flux_labels("op", &f), flux_labels("rbac", &f), flux_labels("use", &f));
    apply(&format!(
        r#"{}{}{}{}---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: controller, namespace: {o}, labels: {op}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: controller, namespace: {o}, labels: {op}}}
spec:
  selector: {{matchLabels: {{app: controller}}}}
  template:
    metadata: {{labels: {{app: controller}}}}
    spec: {{serviceAccountName: controller, containers: [{{name: manager, image: example.invalid/operator}}]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}, labels: {rbac}}}
rules: [{{apiGroups: [{group}], resources: [gizmos], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {run}, labels: {rbac}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}}}
subjects: [{{kind: ServiceAccount, name: controller, namespace: {o}}}]
"#,
        kustomization("op", &f, ""),
        kustomization("rbac", &f, ""),
        kustomization("use", &f, ""),
        crd(&group, "Gizmo", "gizmos", &op),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Gizmo\nmetadata: {{name: g, namespace: {o}, labels: {usage}, finalizers: [{finalizer}]}}\n"
    ));
    record_flux_inventories(&f);

    // Without `op`: the operator stays, and keeps what it finalizes with.
    let kept = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/use",
        "kustomization/rbac",
        "--dry-run",
        "-o",
        "json",
    ])
    .expect_code(0);
    let lines = json_lines(&kept.stdout);
    assert_eq!(wave_of(&lines, "ClusterRoleBinding", &run), None, "{}", kept.stdout);
    let why = kept_reason(&lines, "ClusterRoleBinding", &run).unwrap_or_default();
    assert!(
        why.contains(&format!("Deployment.apps/{o}/controller")),
        "{why}\n{}",
        kept.stdout
    );

    // All three: the Gizmo, then the operator, then its binding and role.
    let all = [
        "prune",
        "-n",
        &f,
        "kustomization/use",
        "kustomization/rbac",
        "kustomization/op",
    ];
    let planned = stack(&[&all[..], &["--dry-run", "-o", "json"]].concat()).expect_code(0);
    let lines = json_lines(&planned.stdout);
    let wave = |kind: &str, name: &str| planned_wave(&lines, kind, name);
    assert!(
        wave("Gizmo", "g") < wave("Deployment", "controller"),
        "{}",
        planned.stdout
    );
    assert!(
        wave("Deployment", "controller") < wave("ClusterRoleBinding", &run),
        "{}",
        planned.stdout
    );
    assert!(
        wave("ClusterRoleBinding", &run) < wave("ClusterRole", &run),
        "{}",
        planned.stdout
    );

    let (alive_ns, binding) = (o.clone(), run.clone());
    let operator = StandIn::start(&resource, Some(&o), "g", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "controller") && exists("clusterrolebinding", None, &binding)
    });
    let pruned = stack(&[&all[..], &["--yes", "-o", "json", "--timeout", "60s"]].concat());
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the operator finalized `g` with its RBAC");
    assert!(!exists("crd", None, &resource), "the CRD went after its Gizmo");
    assert!(!exists("clusterrolebinding", None, &run));
}

/// The ServiceAccount, a ClusterRole with `rules` bound to it, and the Deployment `name` running
/// as it (with `pod` as its pod spec's containers), in `namespace`, all labelled `labels`.
fn operator_with_rbac(namespace: &str, name: &str, role: &str, rules: &str, containers: &str, labels: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {name}, namespace: {namespace}, labels: {labels}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {role}, labels: {labels}}}
rules: {rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {role}, labels: {labels}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}
subjects: [{{kind: ServiceAccount, name: {name}, namespace: {namespace}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}, labels: {labels}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{serviceAccountName: {name}, containers: {containers}}}
"#
    )
}

const ONE_CONTAINER: &str = "[{name: manager, image: example.invalid/operator}]";

/// Order review 7, gap 1: Crossplane's real finalizer `finalizer.managedresource.crossplane.io`
/// sits on a provider's managed resource (here a Bucket of this run's group, as
/// `s3.aws.upbound.io` Buckets carry it), and a second Bucket carries a finalizer without a dot.
/// Neither names the Bucket's group; RBAC names the provider (its ClusterRole may write every
/// resource of the group, as Crossplane's RBAC manager grants). The CRD is tracked by no stack.
/// Stack `prov` holds the provider, `use` the Buckets: `graph` shows the edges, a teardown of
/// `prov` alone keeps the provider for the Buckets that stay, and tearing both down deletes the
/// Buckets first, while the provider finalizes them.
#[test]
fn a_finalizer_that_names_no_group_of_its_object_ties_it_to_the_operator_rbac_names() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm71");
    let f = flux.0.clone();
    let run = unique("gm71");
    let group = own_group(&run);
    let resource = format!("buckets.{group}");
    let (op_ns, use_ns) = (format!("{run}-prov"), format!("{run}-use"));
    let crossplane = "finalizer.managedresource.crossplane.io";
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &use_ns);
    for namespace in [&op_ns, &use_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &format!("{run}-provider"));
    leftovers.object("clusterrolebinding", &format!("{run}-provider"));
    let (prov, usage) = (flux_labels("prov", &f), flux_labels("use", &f));
    apply(&crd(&group, "Bucket", "buckets", "{}"));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        "{}{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {op_ns}, labels: {prov}}}\n{}",
        kustomization("prov", &f, ""),
        kustomization("use", &f, ""),
        operator_with_rbac(
            &op_ns,
            "provider",
            &format!("{run}-provider"),
            &format!("[{{apiGroups: [{group}], resources: ['*'], verbs: ['*']}}]"),
            ONE_CONTAINER,
            &prov
        ),
    ));
    apply(&format!(
        r#"---
apiVersion: v1
kind: Namespace
metadata: {{name: {use_ns}, labels: {usage}}}
---
apiVersion: {group}/v1
kind: Bucket
metadata: {{name: b-crossplane, namespace: {use_ns}, labels: {usage}, finalizers: [{crossplane}]}}
---
apiVersion: {group}/v1
kind: Bucket
metadata: {{name: b-dotless, namespace: {use_ns}, labels: {usage}, finalizers: [cleanup]}}
"#
    ));
    for bucket in ["b-crossplane", "b-dotless"] {
        assert_eq!(
            graph_edges(("Bucket", &use_ns, bucket), ("Deployment", &op_ns, "provider")),
            ["inferredFinalizer"],
            "{bucket}"
        );
    }
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/prov", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert_eq!(wave_of(&lines, "Deployment", "provider"), None, "{}", planned.stdout);
    let kept = kept_reason(&lines, "Deployment", "provider").unwrap_or_default();
    assert!(
        kept.contains(&format!("needed by Bucket.{group}/{use_ns}/b-")),
        "{kept}"
    );

    let alive = |namespace: &str| {
        let namespace = namespace.to_string();
        move || exists("deployment", Some(&namespace), "provider")
    };
    let provider = StandIn::start(&resource, Some(&use_ns), "b-", crossplane, alive(&op_ns));
    let dotless = StandIn::start(&resource, Some(&use_ns), "b-", "cleanup", alive(&op_ns));
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/use",
        "kustomization/prov",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = provider.stop() + dotless.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 2, "the live provider finalized both Buckets");
    let lines = json_lines(&pruned.stdout);
    let provider_deleted = event_at(&lines, "Deployment", "provider", "deleted");
    for bucket in ["b-crossplane", "b-dotless"] {
        assert!(planned_wave(&lines, "Bucket", bucket) < planned_wave(&lines, "Deployment", "provider"));
        assert!(
            event_at(&lines, "Bucket", bucket, "gone") < provider_deleted,
            "{bucket}"
        );
    }
}

/// Order review 7, gap 2: a built-in object (a Secret) carries the finalizer of an operator whose
/// CRD is no node of the graph (none exists here): RBAC names the operator, whose ClusterRole
/// may update objects of the finalizer's group. Stack `op` holds the operator, stack `use` a
/// Secret with its finalizer; an untracked Secret with it waits in the Flux Namespace. While the
/// untracked one stays it keeps the operator; once it is gone, tearing both stacks down deletes
/// the tracked Secret first, while the operator finalizes it.
#[test]
fn a_built_in_object_finalized_by_an_operator_without_its_crd_is_tied_by_rbac() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm72");
    let f = flux.0.clone();
    let run = unique("gm72");
    let group = own_group(&run);
    let (op_ns, use_ns) = (format!("{run}-op"), format!("{run}-use"));
    let finalizer = format!("{group}/protect");
    let mut leftovers = Leftovers::new();
    for namespace in [&op_ns, &use_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("clusterrole", &format!("{run}-operator"));
    leftovers.object("clusterrolebinding", &format!("{run}-operator"));
    let (op, usage) = (flux_labels("op", &f), flux_labels("use", &f));
    apply(&format!(
        r#"{}{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {op_ns}, labels: {op}}}
{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {use_ns}, labels: {usage}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: s-tracked, namespace: {use_ns}, labels: {usage}, finalizers: [{finalizer}]}}
---
apiVersion: v1
kind: Secret
metadata: {{name: s-loose, namespace: {f}, finalizers: [{finalizer}]}}
"#,
        kustomization("op", &f, ""),
        kustomization("use", &f, ""),
        operator_with_rbac(
            &op_ns,
            "operator",
            &format!("{run}-operator"),
            &format!("[{{apiGroups: [{group}], resources: [gizmos, gizmos/finalizers], verbs: [get, list, watch, update, patch]}}]"),
            ONE_CONTAINER,
            &op
        ),
    ));
    let release_loose = || {
        let _ = kubectl(&[
            "patch",
            "secret",
            "s-loose",
            "-n",
            &f,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ]);
    };
    assert_eq!(
        graph_edges(("Secret", &use_ns, "s-tracked"), ("Deployment", &op_ns, "operator")),
        ["inferredFinalizer"]
    );
    record_flux_inventories(&f);
    let planned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/use",
        "kustomization/op",
        "--dry-run",
        "-o",
        "json",
    ]);
    let lines = json_lines(&planned.stdout);
    let kept = kept_reason(&lines, "Deployment", "operator");
    release_loose();
    assert_eq!(
        planned.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        planned.stdout, planned.stderr
    );
    assert_eq!(
        kept,
        Some(format!(
            "needed by Secret/{f}/s-loose, which is not pruned (inferred: finalizer)"
        )),
        "{}",
        planned.stdout
    );
    assert!(
        wave_of(&lines, "Secret", "s-tracked") < wave_of(&lines, "Deployment", "operator")
            || wave_of(&lines, "Deployment", "operator").is_none()
    );
    kubectl_ok(&["delete", "secret", "s-loose", "-n", &f, "--ignore-not-found"]);
    wait_until(Duration::from_secs(30), || !exists("secret", Some(&f), "s-loose"));

    let alive_ns = op_ns.clone();
    let operator = StandIn::start("secrets", Some(&use_ns), "s-", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "operator")
    });
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/use",
        "kustomization/op",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the live operator finalized the Secret");
    let lines = json_lines(&pruned.stdout);
    assert!(planned_wave(&lines, "Secret", "s-tracked") < planned_wave(&lines, "Deployment", "operator"));
    assert!(event_at(&lines, "Secret", "s-tracked", "gone") < event_at(&lines, "Deployment", "operator", "deleted"));
}

/// Order review 7, gap 3: a CSI driver's controller in another stack (`ctrl`) than its CSIDriver
/// and StorageClass (`storage`): its Deployment runs the `csi-provisioner` sidecar and names the
/// driver (`--drivername=...`, as csi-driver-host-path's plugin does). Stack `data` holds a bound
/// volume and claim, released by a stand-in driver only while that Deployment exists. `graph`
/// shows the edge; tearing `ctrl` down alone keeps the controller for the volume that stays
/// (it would be stranded); tearing all three down releases the volume before the controller goes.
#[test]
fn a_csi_controller_in_another_stack_than_its_driver_serves_the_volumes_to_the_end() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm73");
    let f = flux.0.clone();
    let run = unique("gm73");
    let (csi_ns, data_ns) = (format!("{run}-csi"), format!("{run}-data"));
    let driver = format!("{run}.csi.example.com");
    let (class, volume) = (format!("{run}-fast"), format!("{run}-pv0"));
    let mut leftovers = Leftovers::new();
    for namespace in [&csi_ns, &data_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("csidriver", &driver);
    leftovers.object("storageclass", &class);
    leftovers.object("pv", &volume);
    leftovers.object("clusterrole", &format!("{run}-provisioner"));
    leftovers.object("clusterrolebinding", &format!("{run}-provisioner"));
    let (storage, ctrl, data) = (
        flux_labels("storage", &f),
        flux_labels("ctrl", &f),
        flux_labels("data", &f),
    );
    let containers = format!(
        "[{{name: plugin, image: example.invalid/csi-plugin, args: ['--drivername={driver}', '--endpoint=unix:///csi/csi.sock']}}, \
          {{name: csi-provisioner, image: 'registry.k8s.io/sig-storage/csi-provisioner:v3.6.0', args: ['--csi-address=/csi/csi.sock']}}]"
    );
    apply(&format!(
        r#"{}{}{}---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {{name: {driver}, labels: {storage}}}
spec: {{attachRequired: false}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {class}, labels: {storage}}}
provisioner: {driver}
reclaimPolicy: Retain
---
apiVersion: v1
kind: Namespace
metadata: {{name: {csi_ns}, labels: {ctrl}}}
{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {data_ns}, labels: {data}}}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {volume}
  labels: {data}
  annotations: {{pv.kubernetes.io/provisioned-by: {driver}}}
  finalizers: [external-provisioner.volume.kubernetes.io/finalizer]
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: {class}
  csi: {{driver: {driver}, volumeHandle: vol-0}}
  claimRef: {{namespace: {data_ns}, name: claim0}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: claim0, namespace: {data_ns}, labels: {data}}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {class}
  volumeName: {volume}
  resources: {{requests: {{storage: 1Gi}}}}
"#,
        kustomization("storage", &f, ""),
        kustomization("ctrl", &f, ""),
        kustomization("data", &f, ""),
        operator_with_rbac(
            &csi_ns,
            "csi-controller",
            &format!("{run}-provisioner"),
            "[{apiGroups: [''], resources: [persistentvolumes], verbs: [get, list, watch, create, delete]}]",
            &containers,
            &ctrl
        ),
    ));
    assert_eq!(
        graph_edges(
            ("PersistentVolume", "", &volume),
            ("Deployment", &csi_ns, "csi-controller")
        ),
        ["inferredStorageDriver"]
    );
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/ctrl", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert_eq!(
        wave_of(&lines, "Deployment", "csi-controller"),
        None,
        "{}",
        planned.stdout
    );
    let kept = kept_reason(&lines, "Deployment", "csi-controller").unwrap_or_default();
    assert!(kept.contains("needed by Persistent"), "{kept}\n{}", planned.stdout);

    // kube-controller-manager's protection controllers do not run on the test cluster.
    let pvc_protection = StandIn::start(
        "persistentvolumeclaims",
        Some(&data_ns),
        "claim",
        "kubernetes.io/pvc-protection",
        || true,
    );
    let pv_protection = StandIn::start("persistentvolumes", None, &run, "kubernetes.io/pv-protection", || true);
    let driver_ns = csi_ns.clone();
    let csi = StandIn::start(
        "persistentvolumes",
        None,
        &run,
        "external-provisioner.volume.kubernetes.io/finalizer",
        move || exists("deployment", Some(&driver_ns), "csi-controller"),
    );
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/data",
        "kustomization/ctrl",
        "kustomization/storage",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let released = csi.stop();
    pvc_protection.stop();
    pv_protection.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(released, 1, "the live controller released the volume");
    let lines = json_lines(&pruned.stdout);
    assert!(planned_wave(&lines, "PersistentVolume", &volume) < planned_wave(&lines, "Deployment", "csi-controller"));
    assert!(
        planned_wave(&lines, "PersistentVolumeClaim", "claim0") < planned_wave(&lines, "Deployment", "csi-controller")
    );
    assert!(
        event_at(&lines, "PersistentVolume", &volume, "gone")
            < event_at(&lines, "Deployment", "csi-controller", "deleted")
    );
    assert!(!exists("pv", None, &volume));
}

/// Order review 8, F5 (Crossplane's layout): stack `prov` tracks Provider `aws`; an untracked
/// ProviderRevision it controls controls in turn the provider's ServiceAccount, Deployment and
/// RBAC (which may write Buckets); stack `use` holds a Bucket with Crossplane's finalizer. Tearing
/// down `prov` would take the provider by the garbage collector two controllers down, while the
/// Bucket stays with a finalizer nothing removes: the operator two levels down is a node, and
/// the Provider is kept for the Bucket.
#[test]
fn an_operator_two_controllers_down_from_the_plan_keeps_its_root() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm81");
    let f = flux.0.clone();
    let run = unique("gm81");
    let group = own_group(&run);
    let bucket_group = format!("s3.{group}");
    let (op_ns, use_ns) = (format!("{run}-xp"), format!("{run}-use"));
    let mut leftovers = Leftovers::new();
    leftovers.custom(&format!("buckets.{bucket_group}"), &use_ns);
    for namespace in [&op_ns, &use_ns] {
        leftovers.object("namespace", namespace);
    }
    for resource in [
        format!("buckets.{bucket_group}"),
        format!("providers.{group}"),
        format!("providerrevisions.{group}"),
    ] {
        leftovers.object("crd", &resource);
    }
    leftovers.object("clusterrole", &format!("{run}-provider"));
    leftovers.object("clusterrolebinding", &format!("{run}-provider"));
    let (prov, usage) = (flux_labels("prov", &f), flux_labels("use", &f));
    // Crossplane's package kinds are cluster-scoped (a namespaced owner of a ClusterRole would
    // be an invalid owner reference).
    let cluster_crd =
        |kind: &str, plural: &str| crd(&group, kind, plural, "{}").replace("scope: Namespaced", "scope: Cluster");
    apply(&format!(
        "{}{}{}",
        cluster_crd("Provider", "providers"),
        cluster_crd("ProviderRevision", "providerrevisions"),
        crd(&bucket_group, "Bucket", "buckets", "{}")
    ));
    for resource in [
        format!("providers.{group}"),
        format!("providerrevisions.{group}"),
        format!("buckets.{bucket_group}"),
    ] {
        wait_established(&[&format!("crd/{resource}")], &resource);
    }
    apply(&format!(
        "{}{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {op_ns}}}\n---\napiVersion: {group}/v1\nkind: Provider\nmetadata: {{name: {run}-aws, labels: {prov}}}\n",
        kustomization("prov", &f, ""),
        kustomization("use", &f, ""),
    ));
    let provider = uid_of(&format!("providers.{group}"), None, &format!("{run}-aws"));
    apply(&format!(
        "apiVersion: {group}/v1\nkind: ProviderRevision\nmetadata: {{name: {run}-aws-rev, ownerReferences: [{{apiVersion: {group}/v1, kind: Provider, name: {run}-aws, uid: {provider}, controller: true}}]}}\n"
    ));
    let revision = uid_of(&format!("providerrevisions.{group}"), None, &format!("{run}-aws-rev"));
    let owned = format!("ownerReferences: [{{apiVersion: {group}/v1, kind: ProviderRevision, name: {run}-aws-rev, uid: {revision}, controller: true}}]");
    apply(&format!(
        r#"---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: provider, namespace: {op_ns}, {owned}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-provider, {owned}}}
rules: [{{apiGroups: [{bucket_group}], resources: [buckets, buckets/status], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {run}-provider, {owned}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}-provider}}
subjects: [{{kind: ServiceAccount, name: provider, namespace: {op_ns}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: provider, namespace: {op_ns}, {owned}}}
spec:
  selector: {{matchLabels: {{app: provider}}}}
  template:
    metadata: {{labels: {{app: provider}}}}
    spec: {{serviceAccountName: provider, containers: [{{name: provider, image: example.invalid/provider}}]}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {use_ns}, labels: {usage}}}
---
apiVersion: {bucket_group}/v1
kind: Bucket
metadata: {{name: data-lake, namespace: {use_ns}, labels: {usage}, finalizers: [finalizer.managedresource.crossplane.io]}}
"#
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/prov", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    let provider = format!("{run}-aws");
    assert_eq!(
        wave_of(&lines, "Provider", &provider),
        None,
        "{}\n{}",
        planned.stdout,
        planned.stderr
    );
    let kept = kept_reason(&lines, "Provider", &provider).unwrap_or_default();
    assert!(kept.contains("needed by Bucket"), "{kept}\n{}", planned.stdout);
    kubectl(&[
        "patch",
        &format!("buckets.{bucket_group}"),
        "data-lake",
        "-n",
        &use_ns,
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
}

/// Order review 9, F1: an operator bound to an aggregated ClusterRole (`aggregationRule`, no
/// rules of its own) finalizes with the ClusterRole its rules come from, labelled for it by
/// another stack. Stack `op` holds the operator, its ServiceAccount, the aggregated ClusterRole
/// and its binding; stack `rbac` the piece that grants the Gizmos; stack `use` a Gizmo with the
/// operator's finalizer; the CRD is untracked, so only RBAC names the operator. `graph` shows the
/// role's need of its piece; a teardown of `rbac` alone keeps the piece; tearing all three down
/// deletes the Gizmo first, while the operator finalizes it with its piece still there.
#[test]
fn an_operator_bound_to_an_aggregated_cluster_role_keeps_its_pieces() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm91");
    let f = flux.0.clone();
    let run = unique("gm91");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let finalizer = format!("{group}/cleanup");
    let (op_ns, use_ns) = (format!("{run}-op"), format!("{run}-use"));
    let (role, piece) = (format!("{run}-op"), format!("{run}-op-gizmos"));
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &use_ns);
    for namespace in [&op_ns, &use_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("crd", &resource);
    for name in [&role, &piece] {
        leftovers.object("clusterrole", name);
    }
    leftovers.object("clusterrolebinding", &role);
    let (op, usage) = (flux_labels("op", &f), flux_labels("use", &f));
    apply(&crd(&group, "Gizmo", "gizmos", "{}"));
    wait_established(&[&format!("crd/{resource}")], &resource);
    let aggregate_label = format!("{group}/aggregate-to-op");
    apply(&format!(
        r#"{}{}{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {op_ns}, labels: {op}}}
{}---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {piece}
  labels: {{kustomize.toolkit.fluxcd.io/name: rbac, kustomize.toolkit.fluxcd.io/namespace: {f}, {aggregate_label}: "true"}}
rules: [{{apiGroups: [{group}], resources: [gizmos], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: v1
kind: Namespace
metadata: {{name: {use_ns}, labels: {usage}}}
"#,
        kustomization("op", &f, ""),
        kustomization("rbac", &f, ""),
        kustomization("use", &f, ""),
        operator_with_rbac(&op_ns, "operator", &role, "[]", ONE_CONTAINER, &op).replace(
            "rules: []",
            &format!(
                "aggregationRule: {{clusterRoleSelectors: [{{matchExpressions: [{{key: {aggregate_label}, operator: In, values: [\"true\"]}}]}}]}}\nrules: []"
            )
        ),
    ));
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Gizmo\nmetadata: {{name: g, namespace: {use_ns}, labels: {usage}, finalizers: [{finalizer}]}}\n"
    ));
    assert_eq!(
        graph_edges(("ClusterRole", "", &role), ("ClusterRole", "", &piece)),
        ["inferredRunsWith"]
    );
    assert_eq!(
        graph_edges(("Gizmo", &use_ns, "g"), ("Deployment", &op_ns, "operator")),
        ["inferredFinalizer"]
    );
    record_flux_inventories(&f);

    // Without `op` and `use`: the operator stays, and keeps the piece of its role.
    let kept = stack(&["prune", "-n", &f, "kustomization/rbac", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&kept.stdout);
    assert_eq!(wave_of(&lines, "ClusterRole", &piece), None, "{}", kept.stdout);
    let why = kept_reason(&lines, "ClusterRole", &piece).unwrap_or_default();
    assert!(
        why.contains(&format!("ClusterRole.rbac.authorization.k8s.io/{role}")),
        "{why}"
    );

    // All three: the Gizmo, then the operator, then its role and the piece.
    let all = [
        "prune",
        "-n",
        &f,
        "kustomization/use",
        "kustomization/rbac",
        "kustomization/op",
    ];
    let (alive_ns, alive_piece) = (op_ns.clone(), piece.clone());
    let operator = StandIn::start(&resource, Some(&use_ns), "g", &finalizer, move || {
        exists("deployment", Some(&alive_ns), "operator") && exists("clusterrole", None, &alive_piece)
    });
    let pruned = stack(&[&all[..], &["--yes", "-o", "json", "--timeout", "60s"]].concat());
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the operator finalized `g` with its role's piece");
    let lines = json_lines(&pruned.stdout);
    assert!(planned_wave(&lines, "Gizmo", "g") < planned_wave(&lines, "Deployment", "operator"));
    assert!(planned_wave(&lines, "Deployment", "operator") < planned_wave(&lines, "ClusterRole", &piece));
    assert!(!exists("clusterrole", None, &piece));
}

/// Removes `finalizer` from `spec.finalizers` of Namespace `name` once it is terminating, as its
/// operator does (`PUT /api/v1/namespaces/NAME/finalize`), while `alive()` holds; counts it.
fn namespace_stand_in(name: &str, finalizer: &str, alive: impl Fn() -> bool + Send + 'static) -> StandInNs {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let finalized = Arc::new(AtomicUsize::new(0));
    let (name, finalizer) = (name.to_string(), finalizer.to_string());
    let handle = {
        let (stop, finalized) = (stop.clone(), finalized.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let read = kubectl(&["get", "namespace", &name, "-o", "json"]);
                if let Ok(mut namespace) = serde_json::from_str::<Value>(&read.stdout) {
                    let listed: Vec<Value> = namespace["spec"]["finalizers"].as_array().cloned().unwrap_or_default();
                    // `alive()` (a kubectl or two) is asked only once there is something to do.
                    let due =
                        !namespace["metadata"]["deletionTimestamp"].is_null() && listed.iter().any(|v| v == &finalizer);
                    if due && alive() {
                        let rest: Vec<Value> = listed.into_iter().filter(|v| v != &finalizer).collect();
                        namespace["spec"]["finalizers"] = Value::Array(rest);
                        let path = format!("/api/v1/namespaces/{name}/finalize");
                        let body = namespace.to_string();
                        if kubectl_with_stdin(&["replace", "--raw", &path, "-f", "-"], Some(&body)).code == 0 {
                            finalized.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    StandInNs {
        stop,
        finalized,
        handle: Some(handle),
    }
}

/// A running [`namespace_stand_in`].
struct StandInNs {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    finalized: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl StandInNs {
    fn stop(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
        self.finalized.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for StandInNs {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Order review 9, F2: a Namespace's `spec.finalizers` (`[kubernetes, GROUP/ns-cleanup]`) need
/// their operator as `metadata.finalizers` do. Stack `op` holds the CRD of the group and its
/// operator; stack `nsf` a Namespace with the operator's spec finalizer and a ConfigMap in it; an
/// untracked Namespace carries it too. While the untracked one stays, a teardown of `op` keeps
/// the operator, and `stuck` names that operator for it once it terminates; once it is gone, tearing `nsf` and `op` down deletes the Namespace first, while
/// the operator finalizes it.
#[test]
fn a_namespaces_spec_finalizer_keeps_its_operator_and_goes_first() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm92");
    let f = flux.0.clone();
    let run = unique("gm92");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let finalizer = format!("{group}/ns-cleanup");
    let (op_ns, tracked, untracked) = (format!("{run}-op"), format!("{run}-nsf"), format!("{run}-hand"));
    let mut leftovers = Leftovers::new();
    leftovers.object("crd", &resource);
    for namespace in [&op_ns, &tracked, &untracked] {
        leftovers.object("namespace", namespace);
    }
    let (op, nsf) = (flux_labels("op", &f), flux_labels("nsf", &f));
    apply(&format!(
        "{}{}{}{}",
        kustomization("op", &f, ""),
        kustomization("nsf", &f, ""),
        crd(&group, "Gizmo", "gizmos", &op),
        operator(&op_ns, "operator", &op),
    ));
    let namespace = |name: &str, labels: &str| {
        format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {labels}}}\nspec: {{finalizers: [kubernetes, {finalizer}]}}\n"
        )
    };
    apply(&format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: {tracked}, labels: {nsf}}}\n{}",
        namespace(&tracked, &nsf),
        namespace(&untracked, "{}")
    ));
    record_flux_inventories(&f);

    // The untracked Namespace stays: it keeps the operator.
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert_eq!(wave_of(&lines, "Deployment", "operator"), None, "{}", planned.stdout);
    let why = kept_reason(&lines, "Deployment", "operator").unwrap_or_default();
    assert!(why.contains("Namespace/"), "{why}\n{}", planned.stdout);
    assert!(why.contains("inferred: finalizer"), "{why}");

    // Gone (its operator's entry taken out by hand): `nsf` and `op` go, the Namespace first.
    kubectl(&["delete", "namespace", &untracked, "--wait=false"]);
    // `stuck` names the operator the spec finalizer waits for.
    let stuck = stack(&["stuck", &format!("namespace/{untracked}")]);
    assert!(
        stuck.stdout.contains(&format!(
            "finalizer {finalizer} belongs to the controller of CRD {resource}"
        )),
        "{}\n{}",
        stuck.stdout,
        stuck.stderr
    );
    let hand = namespace_stand_in(&untracked, &finalizer, || true);
    wait_until(Duration::from_secs(60), || !exists("namespace", None, &untracked));
    hand.stop();
    let both = ["prune", "-n", &f, "kustomization/nsf", "kustomization/op"];
    let planned = stack(&[&both[..], &["--dry-run", "-o", "json"]].concat()).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert!(
        planned_wave(&lines, "Namespace", &tracked) < planned_wave(&lines, "Deployment", "operator"),
        "{}",
        planned.stdout
    );
    let alive_ns = op_ns.clone();
    let stand_in = namespace_stand_in(&tracked, &finalizer, move || {
        exists("deployment", Some(&alive_ns), "operator")
    });
    let pruned = stack(&[&both[..], &["--yes", "-o", "json", "--timeout", "60s"]].concat());
    let finalized = stand_in.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, 1, "the live operator finalized the Namespace");
    assert!(!exists("namespace", None, &tracked));
}

/// Order review 9, F3: `graph` shows the edge from a CRD to the backend of its conversion
/// webhook, read as the plan reads it, and `graph --order delete` orders by it: the CRD goes
/// before the Service and the Deployment that serve its conversions. Stack `s` tracks all three.
#[test]
fn graph_shows_and_orders_by_a_crds_conversion_webhook() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("gm93");
    let n = ns.0.clone();
    let run = unique("gm93");
    let group = own_group(&run);
    let crd_name = format!("widgets.{group}");
    let mut leftovers = Leftovers::new();
    leftovers.object("customresourcedefinition", &crd_name);
    let s = flux_labels("s", &n);
    apply(&format!(
        r#"{}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: conv-server, namespace: {n}, labels: {s}}}
spec:
  selector: {{matchLabels: {{app: conv}}}}
  template: {{metadata: {{labels: {{app: conv}}}}, spec: {{containers: [{{name: conv, image: example.invalid/conv}}]}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: conv, namespace: {n}, labels: {s}}}
spec: {{selector: {{app: conv}}, ports: [{{port: 443, targetPort: 9443}}]}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd_name}, labels: {s}}}
spec:
  group: {group}
  names: {{kind: Widget, plural: widgets, singular: widget}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig: {{service: {{namespace: {n}, name: conv, path: /convert}}}}
"#,
        kustomization("s", &n, "")
    ));
    record_flux_inventories(&n);
    assert_eq!(
        graph_edges(("CustomResourceDefinition", "", &crd_name), ("Service", &n, "conv")),
        ["inferredWebhook"]
    );
    let ordered = stack(&["graph", "-n", &n, "--members", "-o", "json", "--order", "delete"]).expect_code(0);
    let json = ordered.json();
    let text = json.to_string();
    let wave_of_node = |kind: &str, name: &str| -> usize {
        let node = json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|node| node["kind"] == kind && node["name"] == name)
            .unwrap_or_else(|| panic!("{kind}/{name} is no node of {text}"))["index"]
            .clone();
        json["waves"]
            .as_array()
            .unwrap_or_else(|| panic!("no waves in {text}"))
            .iter()
            .position(|wave| wave.as_array().is_some_and(|members| members.contains(&node)))
            .unwrap_or_else(|| panic!("{kind}/{name} in no wave of {text}"))
    };
    assert!(
        wave_of_node("CustomResourceDefinition", &crd_name) < wave_of_node("Service", "conv"),
        "{text}"
    );
    assert!(
        wave_of_node("CustomResourceDefinition", &crd_name) < wave_of_node("Deployment", "conv-server"),
        "{text}"
    );
}

/// Order review 10, finding 2: an operator installed by hand (its Deployment, ServiceAccount and
/// ClusterRoleBinding tracked by no stack) runs with a ClusterRole that stack `gapp` tracks,
/// beside a custom resource the operator must finalize (the CRD is tracked by no stack either).
/// The operator stays: the teardown keeps the ClusterRole it runs with (before, the ClusterRole
/// and the resource went in one wave, and the operator could not finalize it).
#[test]
fn an_untracked_operator_keeps_the_tracked_role_it_runs_with() {
    untracked_operator_keeps_its_role(|op_ns| format!("{{kind: ServiceAccount, name: operator, namespace: {op_ns}}}"));
}

/// Review 11, finding 1: the operator's account bound as the RBAC authorizer also binds it, by
/// the `Group` `system:serviceaccounts:NS` or the `User` `system:serviceaccount:NS:NAME`.
#[test]
fn an_untracked_operator_bound_by_group_or_user_keeps_its_role() {
    untracked_operator_keeps_its_role(|op_ns| {
        format!("{{kind: Group, name: \"system:serviceaccounts:{op_ns}\", apiGroup: rbac.authorization.k8s.io}}")
    });
    untracked_operator_keeps_its_role(|op_ns| {
        format!("{{kind: User, name: \"system:serviceaccount:{op_ns}:operator\", apiGroup: rbac.authorization.k8s.io}}")
    });
}

fn untracked_operator_keeps_its_role(subject_of: impl Fn(&str) -> String) {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm10");
    let f = flux.0.clone();
    let run = unique("gm10");
    let group = own_group(&run);
    let resource = format!("gadgets.{group}");
    let (op_ns, use_ns) = (format!("{run}-op"), format!("{run}-use"));
    let role = format!("{run}-editor");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &use_ns);
    for namespace in [&op_ns, &use_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &role);
    leftovers.object("clusterrolebinding", &role);
    let usage = flux_labels("gapp", &f);
    apply(&crd(&group, "Gadget", "gadgets", "{}"));
    wait_established(&[&format!("crd/{resource}")], &resource);
    let untracked = operator_with_rbac(&op_ns, "operator", &role, "[]", ONE_CONTAINER, "{}").replace(
        &format!("subjects: [{{kind: ServiceAccount, name: operator, namespace: {op_ns}}}]"),
        &format!("subjects: [{}]", subject_of(&op_ns)),
    );
    assert!(untracked.contains(&subject_of(&op_ns)), "{untracked}");
    // The ClusterRole is `gapp`'s; the rest of the operator is nobody's.
    let tracked_role = format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {role}, labels: {usage}}}\nrules: [{{apiGroups: [{group}], resources: [gadgets], verbs: [get, list, watch, update, patch]}}]\n"
    );
    let untracked: String = untracked
        .split("---\n")
        .filter(|doc| !doc.contains("kind: ClusterRole\n"))
        .map(|doc| format!("---\n{doc}"))
        .collect();
    apply(&format!(
        "{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {op_ns}}}\n{untracked}{tracked_role}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {use_ns}, labels: {usage}}}\n",
        kustomization("gapp", &f, "")
    ));
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Gadget\nmetadata: {{name: g1, namespace: {use_ns}, labels: {usage}, finalizers: [{group}/cleanup]}}\n"
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/gapp", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    assert_eq!(wave_of(&lines, "ClusterRole", &role), None, "{}", planned.stdout);
    let why = kept_reason(&lines, "ClusterRole", &role).unwrap_or_default();
    assert!(why.contains("runs with"), "{why}\n{}", planned.stdout);
    assert!(wave_of(&lines, "Gadget", "g1").is_some(), "{}", planned.stdout);
}

/// Order review 12: three add-ons that a teardown of their stacks must keep while what
/// they serve stays, each named by RBAC alone —
/// - F1: a cloud controller manager (may update Services) and an untracked LoadBalancer Service
///   with `service.kubernetes.io/load-balancer-cleanup`, a finalizer of a Kubernetes domain that
///   the control plane does not remove when the cloud provider runs out of tree;
/// - F2: a namespace operator allowed `update` on `namespaces/finalize` (the only way to remove
///   a Namespace's `spec.finalizers`) and an untracked Namespace with its spec finalizer;
/// - F3: an external provisioner granted `create` and `delete` on PersistentVolumes by two
///   ClusterRoles, and an untracked claim of its StorageClass (another stack's).
#[test]
fn add_ons_named_by_rbac_alone_stay_for_what_they_serve() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm12");
    let f = flux.0.clone();
    let run = unique("gm12");
    let (infra_ns, app_ns, tenant) = (format!("{run}-infra"), format!("{run}-app"), format!("{run}-tenant"));
    let mut leftovers = Leftovers::new();
    for namespace in [&infra_ns, &app_ns] {
        leftovers.object("namespace", namespace);
    }
    for role in ["ccm", "nsop", "nfs", "nfs-delete"] {
        leftovers.object("clusterrole", &format!("{run}-{role}"));
        leftovers.object("clusterrolebinding", &format!("{run}-{role}"));
    }
    leftovers.object("storageclass", &format!("{run}-nfs"));
    let labels = |stack: &str| flux_labels(stack, &f);
    let (ccm, nsop, nfs, sc) = (labels("ccm"), labels("nsop"), labels("nfs"), labels("sc"));
    let provisioner = format!("{run}.example.com/nfs");
    let nfs_containers =
        format!("[{{name: nfs, image: example.invalid/nfs, env: [{{name: PROVISIONER_NAME, value: {provisioner}}}]}}]");
    apply(&format!(
        "{}{}{}{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {infra_ns}, labels: {ccm}}}\n{}{}{}\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {run}-nfs-delete, labels: {nfs}}}\n\
rules: [{{apiGroups: [''], resources: [persistentvolumes], verbs: [delete]}}]\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {run}-nfs-delete, labels: {nfs}}}\n\
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}-nfs-delete}}\n\
subjects: [{{kind: ServiceAccount, name: nfs-provisioner, namespace: {infra_ns}}}]\n\
---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {run}-nfs, labels: {sc}}}\nprovisioner: {provisioner}\n",
        kustomization("ccm", &f, ""),
        kustomization("nsop", &f, ""),
        kustomization("nfs", &f, ""),
        kustomization("sc", &f, ""),
        operator_with_rbac(
            &infra_ns,
            "cloud-controller-manager",
            &format!("{run}-ccm"),
            "[{apiGroups: [''], resources: [services], verbs: [list, patch, update, watch]}]",
            ONE_CONTAINER,
            &ccm
        ),
        operator_with_rbac(
            &infra_ns,
            "nsop",
            &format!("{run}-nsop"),
            "[{apiGroups: [''], resources: [namespaces], verbs: [get, list, watch]}, {apiGroups: [''], resources: [namespaces/finalize], verbs: [update]}]",
            ONE_CONTAINER,
            &nsop
        ),
        operator_with_rbac(
            &infra_ns,
            "nfs-provisioner",
            &format!("{run}-nfs"),
            "[{apiGroups: [''], resources: [persistentvolumes], verbs: [get, list, watch, create]}]",
            &nfs_containers,
            &nfs
        ),
    ));
    apply(&format!(
        r#"---
apiVersion: v1
kind: Namespace
metadata: {{name: {app_ns}}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {app_ns}, finalizers: [service.kubernetes.io/load-balancer-cleanup]}}
spec: {{type: LoadBalancer, ports: [{{port: 80}}], selector: {{app: web}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: vol, namespace: {app_ns}, annotations: {{volume.kubernetes.io/storage-provisioner: {provisioner}}}}}
spec: {{storageClassName: {run}-nfs, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {tenant}}}
spec: {{finalizers: [kubernetes, cleanup.nsop.example.org/tenant]}}
"#
    ));
    record_flux_inventories(&f);
    let planned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/ccm",
        "kustomization/nsop",
        "kustomization/nfs",
        "--dry-run",
        "-o",
        "json",
    ]);
    let lines = json_lines(&planned.stdout);
    let kept = |name: &str| kept_reason(&lines, "Deployment", name).unwrap_or_default();
    let result = [
        ("cloud-controller-manager", format!("needed by Service/{app_ns}/web")),
        // Any terminating Namespace of the shared cluster needs it (another test's may come
        // first in the reason): what is asserted is that a Namespace's finalizer keeps it.
        ("nsop", "needed by Namespace/".to_string()),
        (
            "nfs-provisioner",
            format!("needed by PersistentVolumeClaim/{app_ns}/vol"),
        ),
    ]
    .into_iter()
    .filter(|(name, why)| !kept(name).contains(why.as_str()))
    .map(|(name, why)| format!("{name}: kept {:?}, want {why:?}", kept(name)))
    .collect::<Vec<_>>();
    // Released before asserting: the Service's and the Namespace's finalizers have no controller.
    let _ = kubectl(&[
        "patch",
        "service",
        "web",
        "-n",
        &app_ns,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{tenant}"}},"spec":{{"finalizers":[]}}}}"#
    );
    let _ = kubectl_with_stdin(
        &[
            "replace",
            "--raw",
            &format!("/api/v1/namespaces/{tenant}/finalize"),
            "-f",
            "-",
        ],
        Some(&body),
    );
    let _ = kubectl(&["delete", "namespace", &tenant, "--wait=false"]);
    assert_eq!(planned.code, 0, "{}", planned.stderr);
    assert!(result.is_empty(), "{result:#?}\n{}", planned.stdout);
}

/// Order review 13: an operator run as a bare Pod. Stack `crds` holds the CRD, `ops` the
/// operator's Namespace, ServiceAccount and RBAC, `use` a Gizmo with the operator's finalizer.
/// While the Pod is untracked and stays (`--keep-cascading` keeps its Namespace), a teardown of
/// `ops` keeps the ServiceAccount and RBAC it runs with (F2); once `ops` tracks the Pod, tearing
/// down `use` and `ops` deletes the Gizmo before the Pod (F1).
#[test]
fn an_operator_run_as_a_bare_pod_is_ordered_and_kept_as_any_operator() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm13");
    let f = flux.0.clone();
    let run = unique("gm13");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let (op_ns, use_ns) = (format!("{run}-ops"), format!("{run}-use"));
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &use_ns);
    for namespace in [&op_ns, &use_ns] {
        leftovers.object("namespace", namespace);
    }
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &format!("{run}-op"));
    leftovers.object("clusterrolebinding", &format!("{run}-op"));
    let (crds, ops, usage) = (flux_labels("crds", &f), flux_labels("ops", &f), flux_labels("use", &f));
    apply(&crd(&group, "Gizmo", "gizmos", &crds));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        r#"{}{}{}---
apiVersion: v1
kind: Namespace
metadata: {{name: {op_ns}, labels: {ops}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: op, namespace: {op_ns}, labels: {ops}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-op, labels: {ops}}}
rules: [{{apiGroups: [{group}], resources: [gizmos], verbs: [get, list, watch, update, patch]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {run}-op, labels: {ops}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {run}-op}}
subjects: [{{kind: ServiceAccount, name: op, namespace: {op_ns}}}]
---
apiVersion: v1
kind: Namespace
metadata: {{name: {use_ns}, labels: {usage}}}
---
apiVersion: {group}/v1
kind: Gizmo
metadata: {{name: g, namespace: {use_ns}, labels: {usage}, finalizers: [{group}/cleanup]}}
"#,
        kustomization("crds", &f, ""),
        kustomization("ops", &f, ""),
        kustomization("use", &f, ""),
    ));
    apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: op, namespace: {op_ns}}}\nspec: {{serviceAccountName: op, containers: [{{name: op, image: example.invalid/op}}]}}\n"
    ));
    record_flux_inventories(&f);
    let kept = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/ops",
        "--keep-cascading",
        "--dry-run",
        "-o",
        "json",
    ]);
    let lines = json_lines(&kept.stdout);
    assert_eq!(kept.code, 0, "{}", kept.stderr);
    for (kind, name) in [
        ("ServiceAccount", "op".to_string()),
        ("ClusterRole", format!("{run}-op")),
        ("ClusterRoleBinding", format!("{run}-op")),
    ] {
        assert_eq!(wave_of(&lines, kind, &name), None, "{kind}/{name}: {}", kept.stdout);
    }
    let (name_label, namespace_label) = (
        "kustomize.toolkit.fluxcd.io/name=ops".to_string(),
        format!("kustomize.toolkit.fluxcd.io/namespace={f}"),
    );
    kubectl(&["label", "pod", "op", "-n", &op_ns, &name_label, &namespace_label]).expect_code(0);
    record_flux_inventory("ops", &f);
    let planned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/use",
        "kustomization/ops",
        "--dry-run",
        "-o",
        "json",
    ]);
    assert_eq!(planned.code, 0, "{}", planned.stderr);
    let lines = json_lines(&planned.stdout);
    assert!(
        planned_wave(&lines, "Gizmo", "g") < planned_wave(&lines, "Pod", "op"),
        "{}",
        planned.stdout
    );
}

/// Order review 18, G: `graph --order delete` asks what `prune` asks of the untracked objects
/// that need something. Stack `g18` tracks a CRD, a custom resource `d` with a finalizer, and the
/// Namespace that holds an untracked operator: its Deployment runs as a ServiceAccount that an
/// untracked ClusterRole grants the kind's `finalizers` (the RBAC fallback). Deleting the
/// Namespace takes the operator, so `d` goes in an earlier wave than the operator, as `prune`
/// orders it; the untracked objects asked (the RBAC objects, the cluster's APIServices) are
/// outside the selection and in no wave. Red before: the operator was no node, and went in `d`'s
/// wave.
#[test]
fn graph_order_delete_keeps_an_operator_rbac_names_alive_for_what_it_finalizes() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm18");
    let f = flux.0.clone();
    let run = unique("gm18");
    let group = own_group(&run);
    let resource = format!("dooms.{group}");
    let op_ns = format!("{run}-op");
    let role = format!("{run}-op");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &f);
    leftovers.object("namespace", &op_ns);
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &role);
    leftovers.object("clusterrolebinding", &role);
    let labels = flux_labels("g18", &f);
    apply(&format!(
        "{}{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {op_ns}, labels: {labels}}}\n{}",
        kustomization("g18", &f, ""),
        crd(&group, "Doom", "dooms", &labels),
        operator_with_rbac(
            &op_ns,
            "op",
            &role,
            &format!("[{{apiGroups: [{group}], resources: [dooms, dooms/finalizers], verbs: [get, list, watch, update, patch]}}]"),
            ONE_CONTAINER,
            "{}"
        ),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Doom\nmetadata: {{name: d, namespace: {f}, labels: {labels}, finalizers: [{group}/cleanup]}}\n"
    ));
    record_flux_inventories(&f);
    let tracker = format!("flux=g18.{f}");
    let ordered = stack(&[
        "graph",
        "-A",
        "--tracker",
        &tracker,
        "--members",
        "-o",
        "json",
        "--order",
        "delete",
    ])
    .expect_code(0);
    let json = ordered.json();
    let text = json.to_string();
    let node_of = |kind: &str, name: &str| -> Value {
        json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|node| node["kind"] == kind && node["name"] == name)
            .unwrap_or_else(|| panic!("{kind}/{name} is no node of {text}"))
            .clone()
    };
    let wave_of = |kind: &str, name: &str| -> Option<usize> {
        let index = node_of(kind, name)["index"].clone();
        json["waves"]
            .as_array()
            .unwrap_or_else(|| panic!("no waves in {text}"))
            .iter()
            .position(|wave| wave.as_array().is_some_and(|members| members.contains(&index)))
    };
    let doom = wave_of("Doom", "d").unwrap_or_else(|| panic!("d in no wave of {text}"));
    let operator = wave_of("Deployment", "op").unwrap_or_else(|| panic!("the operator in no wave of {text}"));
    assert!(
        doom < operator,
        "d must go before the operator its Namespace takes: {text}"
    );
    assert!(
        wave_of("Namespace", &op_ns).is_some_and(|namespace| namespace > doom),
        "{text}"
    );
    assert_eq!(node_of("ClusterRole", &role)["status"], "external", "{text}");
    assert_eq!(wave_of("ClusterRole", &role), None, "{text}");
    let deleted_apiservices = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|node| node["kind"] == "APIService" && node["status"] == "selected")
        .count();
    assert_eq!(deleted_apiservices, 0, "{text}");
}

/// Order review 19, R: the re-check before a wave orders what the plan could not see. Stack
/// `r19` deletes Gadget `gr` and the operator `opr` (found through RBAC for the kind's
/// finalizers) in one wave; while the first wave waits, `gr`'s controller makes the custom
/// resource `c1` with a finalizer. Deleting `gr` takes `c1`, which needs `opr`: the re-check
/// keeps `opr` (exit 5, named), so that `c1` can still be finalized. Red before: `opr` went
/// with `gr`, and `c1` could never be finalized.
#[test]
fn the_recheck_keeps_an_operator_a_child_made_since_the_plan_needs() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm19r");
    let f = flux.0.clone();
    let run = unique("gm19r");
    let group = own_group(&run);
    let resource = format!("dooms.{group}");
    let role = format!("{run}-op");
    let gadget = format!("{run}-gr");
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &f);
    leftovers.object("crd", &resource);
    leftovers.object("gadget.stack-test.example.com", &gadget);
    leftovers.object("clusterrole", &role);
    leftovers.object("clusterrolebinding", &role);
    let labels = flux_labels("r19", &f);
    apply(&format!(
        "{}{}{}---\napiVersion: stack-test.example.com/v1beta1\nkind: Gadget\nmetadata: {{name: {gadget}, labels: {labels}}}\n\
---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cmr, namespace: {f}, labels: {labels}, annotations: {{config.kubernetes.io/depends-on: stack-test.example.com/Gadget/{gadget}}}}}\n",
        kustomization("r19", &f, ""),
        crd(&group, "Doom", "dooms", "{}"),
        operator_with_rbac(
            &f,
            "opr",
            &role,
            &format!("[{{apiGroups: [{group}], resources: [dooms, dooms/finalizers], verbs: [get, list, watch, update, patch]}}]"),
            ONE_CONTAINER,
            &labels
        ),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Doom\nmetadata: {{name: d1, namespace: {f}, labels: {labels}, finalizers: [{finalizer}]}}\n"
    ));
    record_flux_inventories(&f);
    let mut child = spawn_stack(&["prune", "-n", &f, "kustomization/r19", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating(&resource, &f, "d1")
    });
    let owner = uid_of("gadget.stack-test.example.com", None, &gadget);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Doom\nmetadata:\n  name: c1\n  namespace: {f}\n  finalizers: [{finalizer}]\n  ownerReferences: [{{apiVersion: stack-test.example.com/v1beta1, kind: Gadget, name: {gadget}, uid: {owner}, controller: true, blockOwnerDeletion: true}}]\n"
    ));
    // The operator finalizes d1, and then c1, while it runs.
    release_finalizers(&format!("{resource}/d1"), &f);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating(&resource, &f, "c1")
    });
    if exists("deployment", Some(&f), "opr") {
        release_finalizers(&format!("{resource}/c1"), &f);
    }
    let done = finish(child);
    assert_eq!(done.code, 5, "{}", done.stderr);
    assert!(exists("deployment", Some(&f), "opr"), "{}", done.stderr);
    assert!(
        done.stderr.contains("it dies with the plan, not before this wave"),
        "{}",
        done.stderr
    );
}

/// Order review 27, F2 (wrong deletion): while the first wave waits, a staying operator's
/// ServiceAccount is taken under a planned Gadget's control (a controller adopting it). The
/// re-check before the Gadget's wave did not see that the Gadget's deletion now takes what the
/// operator runs with: the Gadget went, and the garbage collector took the account. The re-check
/// adds what a still-planned object controls now, as the plan does: the Gadget is kept (exit 5).
#[test]
fn the_recheck_keeps_an_owner_that_adopted_an_operators_account_mid_run() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm27r");
    let f = flux.0.clone();
    let held = GadgetAndOperator::new(&f, "r27");
    let owner = uid_of("gadget.stack-test.example.com", None, &held.gadget);
    let adopter = format!(
        r#"{{"apiVersion":"stack-test.example.com/v1beta1","kind":"Gadget","name":"{}","uid":"{owner}","controller":true}}"#,
        held.gadget
    );
    held.adopt_account_mid_run(&adopter);
}

/// Order review 20, V: the operator's Deployment controller-owns a custom resource carrying the
/// operator's own finalizer (operators that make their own default resource). Deleting the
/// Deployment takes the resource only once the Deployment is gone, and nothing finalizes it
/// then: no order of waves helps, so the plan says so before asking (it named nothing, and the
/// run hung).
#[test]
fn a_plan_tells_of_a_custom_resource_its_own_operator_owns_and_finalizes() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmv");
    let f = flux.0.clone();
    let run = unique("gmv");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let op_ns = format!("{run}-op");
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &op_ns);
    leftovers.object("namespace", &op_ns);
    leftovers.object("crd", &resource);
    let op = flux_labels("op", &f);
    let kept_crd = kept_crd(&group, &op);
    apply(&format!(
        "{}{kept_crd}{}",
        kustomization("op", &f, ""),
        operator(&op_ns, "controller", &op),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    let controller_uid = uid_of("deployment", Some(&op_ns), "controller");
    apply(&format!(
        r#"apiVersion: {group}/v1
kind: Gizmo
metadata:
  name: default
  namespace: {op_ns}
  finalizers: [{finalizer}]
  ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: controller, uid: {controller_uid}, controller: true, blockOwnerDeletion: true}}]
"#
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let told = plan_warnings(&planned.stdout);
    let expected =
        format!("Gizmo.{group}/{op_ns}/default dies with Deployment.apps/{op_ns}/controller, which finalizes it");
    assert!(
        told.iter().any(|t| t.contains(&expected)),
        "{told:?}\n{}",
        planned.stdout
    );
}

/// Order review 8's gap, met again by review 21 (T2): an operator that RBAC names (its role
/// may update an operator's API group) goes before the ServiceAccount and RBAC it runs with even
/// when nothing it finalizes exists at plan time, so a custom resource made mid-run still finds
/// it able to finalize (before, all four went in one wave).
#[test]
fn an_operator_goes_before_its_rbac_with_nothing_to_finalize_yet() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmt2");
    let f = flux.0.clone();
    let op_ns = Namespace::new("gmt2-op");
    let o = op_ns.0.clone();
    let run = unique("gmt2");
    let group = own_group(&run);
    let mut leftovers = Leftovers::new();
    leftovers.object("clusterrole", &run);
    leftovers.object("clusterrolebinding", &run);
    let op = flux_labels("op", &f);
    let rules =
        format!("[{{apiGroups: [{group}], resources: [dooms, dooms/finalizers], verbs: [get, list, watch, update]}}]");
    apply(&format!(
        "{}{}",
        kustomization("op", &f, ""),
        operator_with_rbac(&o, "controller", &run, &rules, ONE_CONTAINER, &op)
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let lines = json_lines(&planned.stdout);
    let operator = planned_wave(&lines, "Deployment", "controller");
    for (kind, name) in [
        ("ServiceAccount", "controller"),
        ("ClusterRoleBinding", run.as_str()),
        ("ClusterRole", run.as_str()),
    ] {
        assert!(
            operator < planned_wave(&lines, kind, name),
            "the operator goes before {kind}/{name}: {}",
            planned.stdout
        );
    }
}

/// Order review 19, P: a planned claim bound to a volume whose reclaim policy is `Delete` takes
/// that volume (the PV controller deletes it, and its data, once the claim is gone). A volume
/// that another stack tracks and keep-marks is named as the claim's victim; one a provisioner
/// made for its claim goes with it; a `Retain` volume stays. Review 22, F1: so does a claim that
/// dies with the plan unplanned — an unmarked child a planned ConfigMap controls, one in a
/// planned Namespace — its volume named as a victim of that owner or Namespace. (Plan only:
/// this cluster runs no PV controller.)
#[test]
fn a_planned_claim_names_the_volume_it_would_reclaim() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmpv");
    let f = flux.0.clone();
    let app = Namespace::new("gmpv-app");
    let a = app.0.clone();
    let run = unique("gmpv");
    let tenant = format!("{run}-tenant");
    let mut leftovers = Leftovers::new();
    leftovers.object("namespace", &tenant);
    let app_labels = flux_labels("app", &f);
    let storage = flux_labels("storage", &f);
    let claim = |name: &str, namespace: &str, meta: &str| {
        format!(
            "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: {namespace}, {meta}}}\nspec: {{storageClassName: \"\", volumeName: {run}-{name}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n"
        )
    };
    let tracked = format!("labels: {app_labels}");
    apply(&format!(
        "{}{}{}{}{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: owner, namespace: {a}, {tracked}}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {tenant}, {tracked}}}\n",
        kustomization("app", &f, ""),
        kustomization("storage", &f, ""),
        claim("kept", &a, &tracked),
        claim("dynamic", &a, &tracked),
        claim("retained", &a, &tracked),
    ));
    let owner = uid_of("configmap", Some(&a), "owner");
    apply(&format!(
        "{}{}",
        claim(
            "owned",
            &a,
            &format!(
                "ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: {owner}, controller: true}}]"
            )
        ),
        claim("held", &tenant, "labels: {}"),
    ));
    let mut volume = |name: &str, namespace: &str, policy: &str, meta: &str| {
        leftovers.object("persistentvolume", &format!("{run}-{name}"));
        let uid = uid_of("persistentvolumeclaim", Some(namespace), name);
        format!(
            "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {run}-{name}, {meta}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: {policy}, storageClassName: \"\", hostPath: {{path: /tmp/{run}-{name}}}, claimRef: {{namespace: {namespace}, name: {name}, uid: {uid}}}}}\n"
        )
    };
    let keep = format!("labels: {storage}, annotations: {{helm.sh/resource-policy: keep}}");
    let volumes = [
        volume("kept", &a, "Delete", &keep),
        volume(
            "dynamic",
            &a,
            "Delete",
            "annotations: {pv.kubernetes.io/provisioned-by: csi.example.com}",
        ),
        volume("retained", &a, "Retain", &format!("labels: {storage}")),
        volume("owned", &a, "Delete", &keep),
        volume("held", &tenant, "Delete", &format!("labels: {storage}")),
    ];
    apply(&volumes.concat());
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/app", "--dry-run", "-o", "json"]);
    let lines = json_lines(&planned.stdout);
    let cascades = plan_line(&lines)["cascades"].as_array().unwrap().clone();
    let mut victims: Vec<(String, String)> = cascades
        .iter()
        .flat_map(|c| {
            let holder = c["holder"]["name"].as_str().unwrap().to_string();
            c["victims"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |v| (holder.clone(), v["id"]["name"].as_str().unwrap().to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    victims.sort();
    let pair = |holder: &str, victim: String| (holder.to_string(), victim);
    let mut expected = vec![
        pair("kept", format!("{run}-kept")),
        pair("owner", format!("{run}-owned")),
        pair(&tenant, "held".to_string()),
        pair(&tenant, format!("{run}-held")),
    ];
    expected.sort();
    assert_eq!(victims, expected, "{}\n{}", planned.stdout, planned.stderr);
}

/// Order review 22, F2: as above, but the operator is no member: a planned ConfigMap (as OLM's
/// ClusterServiceVersion does) controller-owns the untracked operator Deployment, which RBAC
/// names and which owns its own custom resource. Deleting the ConfigMap takes both; the plan
/// says so before asking (it said nothing, and the run hung).
#[test]
fn a_plan_tells_of_an_operator_and_its_resource_that_die_with_one_owner() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmk");
    let f = flux.0.clone();
    let op_ns = Namespace::new("gmk-op");
    let o = op_ns.0.clone();
    let run = unique("gmk");
    let group = own_group(&run);
    let resource = format!("gizmos.{group}");
    let finalizer = format!("{group}/cleanup");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&resource, &o);
    leftovers.object("crd", &resource);
    leftovers.object("clusterrole", &run);
    leftovers.object("clusterrolebinding", &run);
    let op = flux_labels("op", &f);
    apply(&format!(
        "{}{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: csv, namespace: {o}, labels: {op}}}\n",
        kustomization("op", &f, ""),
        kept_crd(&group, &op),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    let rules = format!(
        "[{{apiGroups: [{group}], resources: [gizmos, gizmos/finalizers], verbs: [get, list, watch, update]}}]"
    );
    apply(&operator_with_rbac(&o, "controller", &run, &rules, ONE_CONTAINER, "{}"));
    let csv_uid = uid_of("configmap", Some(&o), "csv");
    kubectl_ok(&[
        "patch",
        "deployment",
        "controller",
        "-n",
        &o,
        "--type",
        "merge",
        "-p",
        &format!(
            r#"{{"metadata":{{"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"csv","uid":"{csv_uid}","controller":true}}]}}}}"#
        ),
    ]);
    let controller_uid = uid_of("deployment", Some(&o), "controller");
    apply(&format!(
        r#"apiVersion: {group}/v1
kind: Gizmo
metadata:
  name: default
  namespace: {o}
  finalizers: [{finalizer}]
  ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: controller, uid: {controller_uid}, controller: true, blockOwnerDeletion: true}}]
"#
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/op", "--dry-run", "-o", "json"]).expect_code(0);
    let told = plan_warnings(&planned.stdout);
    let expected = format!(
        "Gizmo.{group}/{o}/default and Deployment.apps/{o}/controller, which finalizes it (inferred: finalizer), both die with ConfigMap/{o}/csv"
    );
    assert!(
        told.iter().any(|t| t.contains(&expected)),
        "{told:?}\n{}",
        planned.stdout
    );
}

/// Order review 23, F1: a claim that dies as the unmarked child of a cascade victim — a
/// cluster-scoped custom resource its planned CRD takes controls it — takes its volume as well:
/// the keep-marked volume is named as the CRD's victim beside the resource.
#[test]
fn a_claim_a_victim_controls_names_its_volume() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmpvc");
    let f = flux.0.clone();
    let app = Namespace::new("gmpvc-app");
    let a = app.0.clone();
    let run = unique("gmpvc");
    let group = own_group(&run);
    let resource = format!("boxes.{group}");
    let mut leftovers = Leftovers::new();
    leftovers.object("crd", &resource);
    leftovers.object("persistentvolume", &format!("{run}-pe1"));
    leftovers.object(&resource, "bx1");
    let tracked = flux_labels("app", &f);
    apply(&format!(
        r#"{}---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {resource}, labels: {tracked}}}
spec:
  group: {group}
  names: {{kind: Box, plural: boxes, singular: box}}
  scope: Cluster
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"#,
        kustomization("app", &f, ""),
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!("apiVersion: {group}/v1\nkind: Box\nmetadata: {{name: bx1}}\n"));
    let box_uid = uid_of(&resource, None, "bx1");
    apply(&format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: pe1, namespace: {a}, ownerReferences: [{{apiVersion: {group}/v1, kind: Box, name: bx1, uid: {box_uid}, controller: true}}]}}\nspec: {{storageClassName: \"\", volumeName: {run}-pe1, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n"
    ));
    let claim_uid = uid_of("persistentvolumeclaim", Some(&a), "pe1");
    apply(&format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {run}-pe1, annotations: {{helm.sh/resource-policy: keep}}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Delete, storageClassName: \"\", hostPath: {{path: /tmp/{run}-pe1}}, claimRef: {{namespace: {a}, name: pe1, uid: {claim_uid}}}}}\n"
    ));
    record_flux_inventories(&f);
    let planned = stack(&["prune", "-n", &f, "kustomization/app", "--dry-run", "-o", "json"]);
    let lines = json_lines(&planned.stdout);
    let cascades = plan_line(&lines)["cascades"].as_array().unwrap().clone();
    let victims: Vec<String> = cascades
        .iter()
        .filter(|c| c["holder"]["name"] == resource.as_str())
        .flat_map(|c| c["victims"].as_array().unwrap().clone())
        .map(|v| v["id"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        victims.contains(&"bx1".to_string()) && victims.contains(&format!("{run}-pe1")),
        "{victims:?}\n{}\n{}",
        planned.stdout,
        planned.stderr
    );
}

/// A Deployment `backend` in `tenant`, and an untracked ConfigMap `user` in `user_ns` that
/// depends on it (`config.kubernetes.io/depends-on`): what stays and needs the backend.
fn backend_and_its_user(tenant: &str, user_ns: &str) -> String {
    format!(
        r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: backend, namespace: {tenant}}}
spec:
  selector: {{matchLabels: {{app: backend}}}}
  template:
    metadata: {{labels: {{app: backend}}}}
    spec: {{containers: [{{name: manager, image: example.invalid/operator}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: user, namespace: {user_ns}, annotations: {{config.kubernetes.io/depends-on: apps/namespaces/{tenant}/Deployment/backend}}}}
"#
    )
}

/// Asserts that the plan keeps `kind/name` because `user` needs the backend that dies with it
/// (see [`backend_and_its_user`]).
fn assert_kept_for_the_backend(planned: &Run, kind: &str, name: &str, tenant: &str, user_ns: &str) {
    let lines = json_lines(&planned.stdout);
    let why = kept_reason(&lines, kind, name).unwrap_or_else(|| panic!("{}\n{}", planned.stdout, planned.stderr));
    assert!(
        why.contains(&format!("ConfigMap/{user_ns}/user"))
            && why.contains(&format!("Deployment.apps/{tenant}/backend dies with it")),
        "{why}"
    );
}

/// Order review 24: a planned ClusterRole controls a Namespace no stack tracks (as a tenant
/// operator makes one); a Deployment lives in it as plain content; an untracked ConfigMap
/// elsewhere depends on that Deployment. With `--allow-cascade` the Namespace and the Deployment
/// were accepted as victims and the ClusterRole deleted, although what stays still needs the
/// Deployment: the ClusterRole is kept, and the plan says why.
#[test]
fn a_need_in_a_namespace_a_planned_owner_takes_keeps_the_owner() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmns");
    let f = flux.0.clone();
    let other = Namespace::new("gmns-user");
    let u = other.0.clone();
    let run = unique("gmns");
    let tenant = format!("{run}-tenant");
    let mut leftovers = Leftovers::new();
    leftovers.object("namespace", &tenant);
    leftovers.object("clusterrole", &run);
    let labels = flux_labels("s", &f);
    apply(&format!(
        "{}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {run}, labels: {labels}}}\nrules: []\n",
        kustomization("s", &f, "")
    ));
    let owner = uid_of("clusterrole", None, &run);
    apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {tenant}, ownerReferences: [{{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: {run}, uid: {owner}, controller: true}}]}}\n"
    ));
    apply(&backend_and_its_user(&tenant, &u));
    record_flux_inventories(&f);
    let planned = plan_s_allowing_cascade(&f);
    assert_kept_for_the_backend(&planned, "ClusterRole", &run, &tenant, &u);
}

/// Order review 27, F1 (wrong deletion, unnamed): a planned claim takes its reclaim-Delete
/// volume (the PV controller deletes it once the claim is gone), and the garbage collector then
/// takes what the volume owns. What a dying volume owned was never looked at: a keep-marked
/// ConfigMap it owns went unnamed (no refusal without `--allow-cascade`), and the ClusterRoleBinding
/// it controls, a staying operator's only grant, kept nothing. Now the first is a named victim of
/// the claim and the second keeps the claim, whether the volume is provisioned (it goes with its
/// claim unnamed) or made by hand (a named victim itself). (Plan only: no PV controller runs here.)
#[test]
fn what_a_reclaimed_volume_owns_dies_with_its_claim() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmpvo");
    let f = flux.0.clone();
    let app = Namespace::new("gmpvo-app");
    let a = app.0.clone();
    let (run, group, mut leftovers) = stack_app_with_dooms(&f, &a, "gmpvo");
    let labels = flux_labels("app", &f);
    // (case, whether its volume was provisioned, whether its volume controls an operator's
    // binding rather than owning a keep-marked ConfigMap).
    let cases = [
        ("kd", true, false),
        ("kh", false, false),
        ("od", true, true),
        ("oh", false, true),
    ];
    for (case, provisioned, operator) in cases {
        let claim = format!("{case}-claim");
        let volume = format!("{run}-{case}");
        let role = format!("{run}-{case}-op");
        leftovers.object("persistentvolume", &volume);
        leftovers.object("clusterrole", &role);
        leftovers.object("clusterrolebinding", &role);
        apply(&bound_claim(&claim, &a, &volume, &format!(", labels: {labels}")));
        let claim_uid = uid_of("persistentvolumeclaim", Some(&a), &claim);
        let annotations = match provisioned {
            true => "{pv.kubernetes.io/provisioned-by: csi.example.com}",
            false => "{}",
        };
        apply(&reclaimed_volume(&volume, annotations, (&a, &claim, &claim_uid)));
        let pv = uid_of("persistentvolume", None, &volume);
        let owned_by = |controller: bool| {
            format!("ownerReferences: [{{apiVersion: v1, kind: PersistentVolume, name: {volume}, uid: {pv}, controller: {controller}}}]")
        };
        if !operator {
            apply(&format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {case}-keepme, namespace: {a}, annotations: {{helm.sh/resource-policy: keep}}, {}}}\n",
                owned_by(false)
            ));
            continue;
        }
        let rules = format!("[{{apiGroups: [{group}], resources: [dooms, dooms/finalizers], verbs: [get, list, watch, update, patch]}}]");
        let operator = operator_with_rbac(&a, &format!("{case}-op"), &role, &rules, ONE_CONTAINER, "{}");
        let binding = format!("metadata: {{name: {role}, labels: {{}}}}\nroleRef");
        assert!(operator.contains(&binding), "{operator}");
        let operator = operator.replacen(
            &binding,
            &format!("metadata: {{name: {role}, {}}}\nroleRef", owned_by(true)),
            1,
        );
        apply(&format!(
            "{operator}---\napiVersion: {group}/v1\nkind: Doom\nmetadata: {{name: {case}-d, namespace: {a}, finalizers: [{group}/cleanup]}}\n"
        ));
    }
    record_flux_inventories(&f);
    let refused = stack(&["prune", "-n", &f, "kustomization/app", "--dry-run"]);
    assert_eq!(refused.code, 4, "{}\n{}", refused.stdout, refused.stderr);
    let planned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/app",
        "--allow-cascade",
        "--dry-run",
        "-o",
        "json",
    ]);
    let lines = json_lines(&planned.stdout);
    let victims: Vec<String> = plan_line(&lines)["cascades"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["victims"].as_array().unwrap().clone())
        .map(|v| v["id"]["name"].as_str().unwrap().to_string())
        .collect();
    for case in ["kd", "kh"] {
        assert!(
            victims.contains(&format!("{case}-keepme")),
            "{case}: {}",
            planned.stdout
        );
    }
    assert_kept_for_operators(
        &lines,
        "PersistentVolumeClaim",
        |case| format!("{case}-claim"),
        &a,
        &["od", "oh"],
    );
}

/// Order review 28, F2 (wrong deletion): planned ConfigMap `holder` owns claim `data` (not
/// planned: it dies as `holder`'s child), so the PV controller reclaims its volume, and the
/// garbage collector then takes what the volume owns, two owners further: a plain ConfigMap,
/// and under it the ServiceAccount a staying operator runs with. The account was named (or, a
/// controller's child, went unnamed) but kept nothing: `holder` was deleted with
/// `--allow-cascade` and the operator lost its account. Now the need keeps `holder`, whether the
/// account is a plain dependent or a controller's. (Plan only: no PV controller runs here.)
#[test]
fn a_need_under_a_reclaimed_volume_of_a_planned_owners_claim_keeps_that_owner() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm28v");
    let f = flux.0.clone();
    let (run, group, mut leftovers) = stack_app_with_dooms(&f, &f, "gm28v");
    let labels = flux_labels("app", &f);
    for (case, controller) in [("cv", true), ("pl", false)] {
        let holder = format!("{case}-holder");
        let claim = format!("{case}-data");
        let volume = format!("{run}-{case}");
        let role = format!("{run}-{case}-op");
        leftovers.object("persistentvolume", &volume);
        leftovers.object("clusterrole", &role);
        leftovers.object("clusterrolebinding", &role);
        apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {holder}, namespace: {f}, labels: {labels}}}\n"
        ));
        let holder_uid = uid_of("configmap", Some(&f), &holder);
        let holder_ref = owned_by("v1", "ConfigMap", &holder, &holder_uid, true);
        apply(&bound_claim(&claim, &f, &volume, &holder_ref));
        let claim_uid = uid_of("persistentvolumeclaim", Some(&f), &claim);
        apply(&reclaimed_volume(&volume, PROVISIONED, (&f, &claim, &claim_uid)));
        let pv = uid_of("persistentvolume", None, &volume);
        let middle = format!("{case}-mid");
        apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {middle}, namespace: {f}, ownerReferences: [{{apiVersion: v1, kind: PersistentVolume, name: {volume}, uid: {pv}, controller: true}}]}}\n"
        ));
        let middle_uid = uid_of("configmap", Some(&f), &middle);
        let rules = format!("[{{apiGroups: [{group}], resources: [dooms, dooms/finalizers], verbs: [get, list, watch, update, patch]}}]");
        let operator = operator_with_rbac(&f, &format!("{case}-op"), &role, &rules, ONE_CONTAINER, "{}");
        let account = format!("kind: ServiceAccount\nmetadata: {{name: {case}-op, namespace: {f}, labels: {{}}}}");
        assert!(operator.contains(&account), "{operator}");
        let operator = operator.replacen(
            &account,
            &format!("kind: ServiceAccount\nmetadata: {{name: {case}-op, namespace: {f}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: {middle}, uid: {middle_uid}, controller: {controller}}}]}}"),
            1,
        );
        apply(&format!(
            "{operator}---\napiVersion: {group}/v1\nkind: Doom\nmetadata: {{name: {case}-d, namespace: {f}, finalizers: [{group}/cleanup]}}\n"
        ));
    }
    record_flux_inventories(&f);
    let planned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/app",
        "--allow-cascade",
        "--dry-run",
        "-o",
        "json",
    ]);
    let lines = json_lines(&planned.stdout);
    assert_kept_for_operators(&lines, "ConfigMap", |case| format!("{case}-holder"), &f, &["cv", "pl"]);
}

/// Order review 28, F3 (wrong deletion): planned Gadget controls claim `c3` (it dies as the
/// Gadget's child), whose volume the PV controller reclaims. While the first wave waits, a
/// staying operator's ServiceAccount is adopted by that volume. The re-check before the
/// Gadget's wave did not look at what a dying volume owns now: the Gadget went, and with the
/// volume the account would go. The re-check now walks the volumes the wave's claims take, as
/// the plan does: the Gadget is kept (exit 5).
#[test]
fn the_recheck_keeps_an_owner_whose_claims_volume_adopted_an_operators_account_mid_run() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm28r");
    let f = flux.0.clone();
    let volume = unique("gm28r-pv");
    let mut held = GadgetAndOperator::new(&f, "r28");
    held.leftovers.object("persistentvolume", &volume);
    let owner = uid_of("gadget.stack-test.example.com", None, &held.gadget);
    let gadget_ref = owned_by("stack-test.example.com/v1beta1", "Gadget", &held.gadget, &owner, true);
    apply(&bound_claim("c3", &f, &volume, &gadget_ref));
    let claim_uid = uid_of("persistentvolumeclaim", Some(&f), "c3");
    apply(&reclaimed_volume(&volume, PROVISIONED, (&f, "c3", &claim_uid)));
    let pv = uid_of("persistentvolume", None, &volume);
    let adopter =
        format!(r#"{{"apiVersion":"v1","kind":"PersistentVolume","name":"{volume}","uid":"{pv}","controller":true}}"#);
    held.adopt_account_mid_run(&adopter);
}

/// The victims a plan (`-o json`) names, as `Kind/name`.
fn named_victims(stdout: &str) -> Vec<String> {
    let lines = json_lines(stdout);
    plan_line(&lines)["cascades"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["victims"].as_array().unwrap().clone())
        .map(|v| {
            format!(
                "{}/{}",
                v["id"]["kind"].as_str().unwrap(),
                v["id"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// Order review 29, F1 and F3 (wrong deletions, exit 0): the token controller deletes every token
/// Secret of a ServiceAccount once it is gone, whatever the cascade policy, and the plan never
/// looked: stack `a`'s ServiceAccount took stack `b`'s token Secret, and stack `k`'s took the
/// token Secret `k` keeps (`prune: disabled`), which the run said it kept. A keep-marked token of
/// a ServiceAccount in a planned Namespace went unnamed too. Each is now a named victim of the
/// ServiceAccount (exit 4), also with `--cascade=orphan`; the token the controller made by itself
/// for a lone ServiceAccount is no loss (the control: it is torn down, exit 0).
#[test]
fn a_planned_service_account_names_the_token_secrets_the_token_controller_deletes() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm29t");
    let f = flux.0.clone();
    let app = Namespace::new("gm29t-app");
    let a = app.0.clone();
    let run = unique("gm29t");
    let tenant = format!("{run}-n");
    let mut leftovers = Leftovers::new();
    leftovers.object("namespace", &tenant);
    let token = |name: &str, account: &str, namespace: &str, labels: &str, annotations: &str| {
        format!("---\napiVersion: v1\nkind: Secret\ntype: kubernetes.io/service-account-token\nmetadata: {{name: {name}, namespace: {namespace}, labels: {labels}, annotations: {{kubernetes.io/service-account.name: {account}{annotations}}}}}\n")
    };
    let account = |name: &str, namespace: &str, labels: &str| {
        format!("---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {namespace}, labels: {labels}}}\n")
    };
    apply(&format!(
        "{}{}{}{}{}{}{}{}{}",
        kustomization("a", &f, ""),
        kustomization("b", &f, ""),
        kustomization("k", &f, ""),
        kustomization("c", &f, ""),
        account("builder", &a, &flux_labels("a", &f)),
        token("builder-token", "builder", &a, &flux_labels("b", &f), ""),
        account("deployer", &a, &flux_labels("k", &f)),
        token(
            "deployer-token",
            "deployer",
            &a,
            &flux_labels("k", &f),
            ", kustomize.toolkit.fluxcd.io/prune: disabled"
        ),
        account("plain", &a, &flux_labels("c", &f)),
    ));
    // Stack `tn`: a Namespace and a ServiceAccount in it, whose token someone keep-marked.
    apply(&format!(
        "{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {tenant}, labels: {}}}\n{}",
        kustomization("tn", &f, ""),
        flux_labels("tn", &f),
        account("ci", &tenant, &flux_labels("tn", &f)),
    ));
    let ci = uid_of("serviceaccount", Some(&tenant), "ci");
    apply(&token(
        "ci-keep",
        "ci",
        &tenant,
        "{}",
        &format!(", kubernetes.io/service-account.uid: {ci}, helm.sh/resource-policy: keep"),
    ));
    record_flux_inventories(&f);
    let plan = |stack_name: &str, extra: &[&str]| {
        let target = format!("kustomization/{stack_name}");
        let mut args = vec!["prune", "-n", &f, &target, "--dry-run", "-o", "json"];
        args.extend_from_slice(extra);
        stack(&args)
    };
    for (stack_name, victim, extra) in [
        ("a", "Secret/builder-token", &[][..]),
        ("a", "Secret/builder-token", &["--cascade=orphan"][..]),
        ("k", "Secret/deployer-token", &[][..]),
        ("tn", "Secret/ci-keep", &[][..]),
    ] {
        let refused = plan(stack_name, extra);
        assert_eq!(
            refused.code, 4,
            "{stack_name} {extra:?}: {}\n{}",
            refused.stdout, refused.stderr
        );
        let accepted = plan(stack_name, &[extra, &["--allow-cascade"][..]].concat());
        assert_eq!(accepted.code, 0, "{}", accepted.stderr);
        assert!(
            named_victims(&accepted.stdout).contains(&victim.to_string()),
            "{stack_name}: {}",
            accepted.stdout
        );
    }
    let refused = stack(&["prune", "-n", &f, "kustomization/a", "--yes"]);
    assert_eq!(refused.code, 4, "{}\n{}", refused.stdout, refused.stderr);
    assert!(exists("secret", Some(&a), "builder-token"));
    assert!(exists("serviceaccount", Some(&a), "builder"));
    let control = stack(&["prune", "-n", &f, "kustomization/c", "--yes"]);
    assert_eq!(control.code, 0, "{}\n{}", control.stdout, control.stderr);
    assert!(!exists("serviceaccount", Some(&a), "plain"));
}

/// Order review 29, F2 (wrong deletion): the endpoints controller deletes the Endpoints of a
/// Service's name once the Service is gone, selector or none. Stack `ea`'s selector-less Service
/// `db` took stack `eb`'s hand-written Endpoints `db`, unnamed. Now they are a named victim of
/// the Service (exit 4). (Plan only: no endpoints controller runs here.)
#[test]
fn a_planned_service_names_the_endpoints_of_its_name_another_stack_holds() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm29e");
    let f = flux.0.clone();
    let app = Namespace::new("gm29e-app");
    let a = app.0.clone();
    apply(&format!(
        "{}{}---\napiVersion: v1\nkind: Service\nmetadata: {{name: db, namespace: {a}, labels: {}}}\nspec: {{ports: [{{port: 5432}}]}}\n---\napiVersion: v1\nkind: Endpoints\nmetadata: {{name: db, namespace: {a}, labels: {}}}\nsubsets: [{{addresses: [{{ip: 10.0.0.5}}], ports: [{{port: 5432}}]}}]\n",
        kustomization("ea", &f, ""),
        kustomization("eb", &f, ""),
        flux_labels("ea", &f),
        flux_labels("eb", &f),
    ));
    record_flux_inventories(&f);
    let refused = stack(&["prune", "-n", &f, "kustomization/ea", "--dry-run", "-o", "json"]);
    assert_eq!(refused.code, 4, "{}\n{}", refused.stdout, refused.stderr);
    let accepted = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/ea",
        "--dry-run",
        "-o",
        "json",
        "--allow-cascade",
    ]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    assert!(
        named_victims(&accepted.stdout).contains(&"Endpoints/db".to_string()),
        "{}",
        accepted.stdout
    );
    let pruned = stack(&["prune", "-n", &f, "kustomization/ea", "--yes"]);
    assert_eq!(pruned.code, 4, "{}\n{}", pruned.stdout, pruned.stderr);
    assert!(exists("service", Some(&a), "db"));
}

/// Order review 30, F1 and F2 (wrong deletions, exit 0): another stack's EndpointSlice that a
/// planned Service owns was skipped as "the control plane's" before its mark was read, and the
/// garbage collector took it; a planned Node takes, through the pod garbage collector, every Pod
/// bound to it, and none was named. Both are now named victims (exit 4): the slice of its
/// Service, the Pods (a bare one, another stack's) of their Node. (The Node case is a plan: no
/// pod garbage collector runs here.)
#[test]
fn a_planned_service_or_node_names_the_slices_and_pods_it_takes() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm30");
    let f = flux.0.clone();
    let app = Namespace::new("gm30-app");
    let a = app.0.clone();
    let run = unique("gm30");
    let node = format!("{run}-node");
    let mut leftovers = Leftovers::new();
    leftovers.object("node", &node);
    apply(&format!(
        "{}{}{}{}---\napiVersion: v1\nkind: Service\nmetadata: {{name: ext, namespace: {a}, labels: {}}}\nspec: {{ports: [{{port: 80}}]}}\n---\napiVersion: v1\nkind: Node\nmetadata: {{name: {node}, labels: {}}}\n",
        kustomization("sa", &f, ""),
        kustomization("sb", &f, ""),
        kustomization("vnodes", &f, ""),
        kustomization("pods", &f, ""),
        flux_labels("sa", &f),
        flux_labels("vnodes", &f),
    ));
    let service = uid_of("service", Some(&a), "ext");
    apply(&format!(
        "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {{name: ext-1, namespace: {a}, labels: {{kubernetes.io/service-name: ext, kustomize.toolkit.fluxcd.io/name: sb, kustomize.toolkit.fluxcd.io/namespace: {f}}}, ownerReferences: [{{apiVersion: v1, kind: Service, name: ext, uid: {service}}}]}}\naddressType: IPv4\nendpoints: []\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: batch-1, namespace: {a}, labels: {}}}\nspec: {{nodeName: {node}, containers: [{{name: c, image: example.invalid/batch}}]}}\n",
        flux_labels("pods", &f),
    ));
    record_flux_inventories(&f);
    for (stack_name, victim) in [("sa", "EndpointSlice/ext-1"), ("vnodes", "Pod/batch-1")] {
        let target = format!("kustomization/{stack_name}");
        let refused = stack(&["prune", "-n", &f, &target, "--dry-run", "-o", "json"]);
        assert_eq!(refused.code, 4, "{stack_name}: {}\n{}", refused.stdout, refused.stderr);
        let accepted = stack(&["prune", "-n", &f, &target, "--dry-run", "-o", "json", "--allow-cascade"]);
        assert_eq!(accepted.code, 0, "{}", accepted.stderr);
        assert!(
            named_victims(&accepted.stdout).contains(&victim.to_string()),
            "{stack_name}: {}",
            accepted.stdout
        );
    }
    let refused = stack(&["prune", "-n", &f, "kustomization/sa", "--yes"]);
    assert_eq!(refused.code, 4, "{}\n{}", refused.stdout, refused.stderr);
    assert!(exists("endpointslice", Some(&a), "ext-1"));
}

/// Stack `stack` of Flux namespace `f`: a Gadget `gadget` and ConfigMap `hold`, which depends on it
/// (so goes in the wave before it) and carries a finalizer that holds the run there; beside it,
/// an untracked operator `op` (ServiceAccount, ClusterRole, binding, Deployment) and a Doom of a
/// CRD of its own whose finalizer it serves.
struct GadgetAndOperator {
    f: String,
    stack: String,
    gadget: String,
    leftovers: Leftovers,
}

impl GadgetAndOperator {
    fn new(f: &str, stack: &str) -> Self {
        let run = unique(&format!("gm{stack}"));
        let group = own_group(&run);
        let resource = format!("dooms.{group}");
        let role = format!("{run}-op");
        let gadget = format!("{run}-gm");
        let mut leftovers = Leftovers::new();
        leftovers.custom(&resource, f);
        leftovers.object("crd", &resource);
        leftovers.object("gadget.stack-test.example.com", &gadget);
        leftovers.object("clusterrole", &role);
        leftovers.object("clusterrolebinding", &role);
        let labels = flux_labels(stack, f);
        let rules = format!(
            "[{{apiGroups: [{group}], resources: [dooms, dooms/finalizers], verbs: [get, list, watch, update, patch]}}]"
        );
        apply(&format!(
            "{}{}{}---\napiVersion: stack-test.example.com/v1beta1\nkind: Gadget\nmetadata: {{name: {gadget}, labels: {labels}}}\n\
---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hold, namespace: {f}, labels: {labels}, finalizers: [stack-test.example.com/hold], annotations: {{config.kubernetes.io/depends-on: stack-test.example.com/Gadget/{gadget}}}}}\n",
            kustomization(stack, f, ""),
            crd(&group, "Doom", "dooms", "{}"),
            operator_with_rbac(f, "op", &role, &rules, ONE_CONTAINER, "{}"),
        ));
        wait_established(&[&format!("crd/{resource}")], &resource);
        apply(&format!(
            "apiVersion: {group}/v1\nkind: Doom\nmetadata: {{name: d1, namespace: {f}, finalizers: [{group}/cleanup]}}\n"
        ));
        Self {
            f: f.to_string(),
            stack: stack.to_string(),
            gadget,
            leftovers,
        }
    }

    /// Tears the stack down; while `hold`'s wave waits, the operator's ServiceAccount is given
    /// `owner` (an owner reference, JSON) as its controller. The re-check before the Gadget's
    /// wave must keep the Gadget (exit 5), and the account stays.
    fn adopt_account_mid_run(&self, owner: &str) {
        let f = &self.f;
        record_flux_inventories(f);
        let target = format!("kustomization/{}", self.stack);
        let mut child = spawn_stack(&["prune", "-n", f, &target, "--yes", "--timeout", "60s"]);
        wait_while_running(&mut child, Duration::from_secs(60), || {
            is_terminating("configmap", f, "hold")
        });
        let patch = format!(r#"{{"metadata":{{"ownerReferences":[{owner}]}}}}"#);
        let adopted = kubectl(&[
            "patch",
            "serviceaccount",
            "op",
            "-n",
            f,
            "--type",
            "merge",
            "-p",
            &patch,
        ]);
        assert_eq!(adopted.code, 0, "{}", adopted.stderr);
        release_finalizers("configmap/hold", f);
        let done = finish(child);
        assert_eq!(done.code, 5, "{}", done.stderr);
        assert!(
            exists("gadget.stack-test.example.com", None, &self.gadget),
            "{}",
            done.stderr
        );
        assert!(exists("serviceaccount", Some(f), "op"), "{}", done.stderr);
    }
}

/// Stack `app` of Flux namespace `f` holding a CRD of Doom, a group of a run of its own
/// (`prefix`): the run, the group, and the leftovers (Dooms in `dooms_in`, the CRD).
fn stack_app_with_dooms(f: &str, dooms_in: &str, prefix: &str) -> (String, String, Leftovers) {
    let run = unique(prefix);
    let group = own_group(&run);
    let dooms = format!("dooms.{group}");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&dooms, dooms_in);
    leftovers.object("crd", &dooms);
    apply(&format!(
        "{}{}",
        kustomization("app", f, ""),
        crd(&group, "Doom", "dooms", "{}")
    ));
    wait_established(&[&format!("crd/{dooms}")], &dooms);
    (run, group, leftovers)
}

/// A provisioned volume's annotations: it goes with its claim unnamed.
const PROVISIONED: &str = "{pv.kubernetes.io/provisioned-by: csi.example.com}";

/// A claim `name` in `namespace` bound to volume `volume`, with `meta` in its metadata (labels,
/// owner references: YAML flow entries, may be empty).
fn bound_claim(name: &str, namespace: &str, volume: &str, meta: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: {namespace}{meta}}}\nspec: {{storageClassName: \"\", volumeName: {volume}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n"
    )
}

/// A volume `name` the PV controller deletes once its claim (`namespace/claim`, UID `claim_uid`)
/// is gone (reclaim policy `Delete`), with `annotations` (a YAML flow mapping).
fn reclaimed_volume(name: &str, annotations: &str, (namespace, claim, claim_uid): (&str, &str, &str)) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}, annotations: {annotations}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Delete, storageClassName: \"\", hostPath: {{path: /tmp/{name}}}, claimRef: {{namespace: {namespace}, name: {claim}, uid: {claim_uid}}}}}\n"
    )
}

/// An owner reference (YAML flow) to `kind` `name` (`api_version`, UID `uid`).
fn owned_by(api_version: &str, kind: &str, name: &str, uid: &str, controller: bool) -> String {
    format!(", ownerReferences: [{{apiVersion: {api_version}, kind: {kind}, name: {name}, uid: {uid}, controller: {controller}}}]")
}

/// Asserts that the plan (`lines`) keeps `kind` `name` because each case's staying operator
/// (`Deployment` `<case>-op` of `namespace`) needs what dies with it.
fn assert_kept_for_operators(
    lines: &[Value],
    kind: &str,
    name_of: impl Fn(&str) -> String,
    namespace: &str,
    cases: &[&str],
) {
    for case in cases {
        let why = kept_reason(lines, kind, &name_of(case))
            .unwrap_or_else(|| panic!("{case}: {}", serde_json::to_string(lines).unwrap_or_default()));
        assert!(
            why.contains(&format!("Deployment.apps/{namespace}/{case}-op"))
                && why.contains(&format!("{case}-op dies with it")),
            "{case}: {why}"
        );
    }
}

/// Order review 31, F1 to F3 (wrong deletions, exit 0): what a controller deletes by name was
/// looked at only for planned objects, and only where it counted. The token controller's own
/// token Secret of a planned ServiceAccount owned another stack's ConfigMap (the garbage
/// collector took it after the token); a ServiceAccount dying as a planned ConfigMap's child took
/// another stack's token Secret; a controller's Pod on a planned Node owned another stack's
/// ConfigMap. Each is now a named victim (exit 4). (The Node case is a plan only: no pod garbage
/// collector runs here.)
#[test]
fn what_dies_by_name_is_walked_from_every_dying_object_and_for_what_it_owns() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gm31");
    let f = flux.0.clone();
    let app = Namespace::new("gm31-app");
    let a = app.0.clone();
    let node = unique("gm31-node");
    let mut leftovers = Leftovers::new();
    leftovers.object("node", &node);
    let stacks = ["sa1", "sb1", "pa3", "pb3", "vn1", "pb1"];
    let all: String = stacks.iter().map(|name| kustomization(name, &f, "")).collect();
    apply(&format!(
        "{all}---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: builder, namespace: {a}, labels: {}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: parent, namespace: {a}, labels: {}}}\n---\napiVersion: v1\nkind: Node\nmetadata: {{name: {node}, labels: {}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: rs, namespace: {a}}}\n",
        flux_labels("sa1", &f),
        flux_labels("pa3", &f),
        flux_labels("vn1", &f),
    ));
    // F1: the token the token controller made for `builder` owns stack sb1's ConfigMap.
    let token_name = || {
        let found = kubectl(&[
            "get",
            "serviceaccount",
            "builder",
            "-n",
            &a,
            "-o",
            "jsonpath={.secrets[0].name}",
        ]);
        found.stdout.trim().to_string()
    };
    wait_until(Duration::from_secs(30), || !token_name().is_empty());
    let token = token_name();
    let token_uid = uid_of("secret", Some(&a), &token);
    // F2: `parent` controls ServiceAccount `child`, whose token stack pb3 tracks.
    let parent = uid_of("configmap", Some(&a), "parent");
    // F3: a controller's Pod on the Node owns stack pb1's ConfigMap.
    let rs = uid_of("configmap", Some(&a), "rs");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-b, namespace: {a}, labels: {}{}}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: child, namespace: {a}{}}}\n---\napiVersion: v1\nkind: Secret\ntype: kubernetes.io/service-account-token\nmetadata: {{name: child-tok, namespace: {a}, labels: {}, annotations: {{kubernetes.io/service-account.name: child}}}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: driver, namespace: {a}{}}}\nspec: {{nodeName: {node}, containers: [{{name: c, image: example.invalid/driver}}]}}\n",
        flux_labels("sb1", &f),
        owned_by("v1", "Secret", &token, &token_uid, false),
        owned_by("v1", "ConfigMap", "parent", &parent, true),
        flux_labels("pb3", &f),
        owned_by("v1", "ConfigMap", "rs", &rs, true),
    ));
    let driver = uid_of("pod", Some(&a), "driver");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: exec-conf, namespace: {a}, labels: {}{}}}\n",
        flux_labels("pb1", &f),
        owned_by("v1", "Pod", "driver", &driver, false),
    ));
    record_flux_inventories(&f);
    for (stack_name, victim) in [
        ("sa1", "ConfigMap/cm-b"),
        ("pa3", "Secret/child-tok"),
        ("vn1", "ConfigMap/exec-conf"),
    ] {
        let target = format!("kustomization/{stack_name}");
        let refused = stack(&["prune", "-n", &f, &target, "--dry-run", "-o", "json"]);
        assert_eq!(refused.code, 4, "{stack_name}: {}\n{}", refused.stdout, refused.stderr);
        let accepted = stack(&["prune", "-n", &f, &target, "--dry-run", "-o", "json", "--allow-cascade"]);
        assert_eq!(accepted.code, 0, "{}", accepted.stderr);
        assert!(
            named_victims(&accepted.stdout).contains(&victim.to_string()),
            "{stack_name}: {}",
            accepted.stdout
        );
    }
    let refused = stack(&["prune", "-n", &f, "kustomization/sa1", "--yes"]);
    assert_eq!(refused.code, 4, "{}\n{}", refused.stdout, refused.stderr);
    assert!(exists("configmap", Some(&a), "cm-b"));
}

/// The plan (`-o json`, a client dry run) of tearing down stack `s` of `namespace`, its cascade
/// victims accepted.
fn plan_s_allowing_cascade(namespace: &str) -> Run {
    stack(&[
        "prune",
        "-n",
        namespace,
        "kustomization/s",
        "--allow-cascade",
        "--dry-run",
        "-o",
        "json",
    ])
}

/// A cluster-scoped CRD `zthings.GROUP` of kind ZThing, labelled `labels`.
fn zthing_crd(group: &str, labels: &str) -> String {
    let resource = format!("zthings.{group}");
    format!(
        r#"---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {resource}, labels: {labels}}}
spec:
  group: {group}
  names: {{kind: ZThing, plural: zthings, singular: zthing}}
  scope: Cluster
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"#
    )
}

/// Order review 25, F2: as above, but what takes the Namespace is a custom resource the
/// planned CRD takes (the resource controls the Namespace). The CRD is kept, and says why.
#[test]
fn a_need_in_a_namespace_a_planned_crds_resource_controls_keeps_the_crd() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmzns");
    let f = flux.0.clone();
    let other = Namespace::new("gmzns-user");
    let u = other.0.clone();
    let run = unique("gmzns");
    let group = own_group(&run);
    let resource = format!("zthings.{group}");
    let tenant = format!("{run}-tenant");
    let mut leftovers = Leftovers::new();
    leftovers.object("namespace", &tenant);
    leftovers.object("crd", &resource);
    let labels = flux_labels("s", &f);
    apply(&format!(
        "{}{}",
        kustomization("s", &f, ""),
        zthing_crd(&group, &labels)
    ));
    wait_established(&[&format!("crd/{resource}")], &resource);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: ZThing\nmetadata: {{name: z1}}\n"
    ));
    let owner = uid_of(&resource, None, "z1");
    apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {tenant}, ownerReferences: [{{apiVersion: {group}/v1, kind: ZThing, name: z1, uid: {owner}, controller: true}}]}}\n"
    ));
    apply(&backend_and_its_user(&tenant, &u));
    record_flux_inventories(&f);
    let planned = plan_s_allowing_cascade(&f);
    assert_kept_for_the_backend(&planned, "CustomResourceDefinition", &resource, &tenant, &u);
}

/// Order review 26, F1 (wrong deletion): the ServiceAccount a staying operator runs as is
/// controlled by a custom resource the planned CRD takes. The ServiceAccount is a controller's
/// child, so no victim, and it was not a node of the plan's graph: nothing kept the CRD, and the
/// garbage collector took the account (CRD, then its resource, then the account) while the
/// operator stayed with a finalizer left to remove. What dies so and a stayer may need is a node
/// now, by every route, as a planned controller's child always was: the CRD is kept, and says why.
#[test]
fn an_operators_account_a_planned_crds_resource_controls_keeps_the_crd() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gmzsa");
    let f = flux.0.clone();
    let other = Namespace::new("gmzsa-op");
    let u = other.0.clone();
    let run = unique("gmzsa");
    let group = own_group(&run);
    let finalized = own_group(&format!("{run}-d"));
    let resource = format!("zthings.{group}");
    let dooms = format!("dooms.{finalized}");
    let role = format!("{run}-op");
    let mut leftovers = Leftovers::new();
    leftovers.custom(&dooms, &u);
    leftovers.object("crd", &resource);
    leftovers.object("crd", &dooms);
    leftovers.object("clusterrole", &role);
    leftovers.object("clusterrolebinding", &role);
    let labels = flux_labels("s", &f);
    apply(&format!(
        "{}{}{}",
        kustomization("s", &f, ""),
        zthing_crd(&group, &labels),
        crd(&finalized, "Doom", "dooms", "{}")
    ));
    wait_established(&[&format!("crd/{resource}"), &format!("crd/{dooms}")], &resource);
    apply(&format!(
        "apiVersion: {group}/v1\nkind: ZThing\nmetadata: {{name: z1}}\n"
    ));
    let owner = uid_of(&resource, None, "z1");
    let rules = format!("[{{apiGroups: [{finalized}], resources: [dooms, dooms/finalizers], verbs: [get, list, watch, update, patch]}}]");
    let operator = operator_with_rbac(&u, "op", &role, &rules, ONE_CONTAINER, "{}");
    let account = format!("metadata: {{name: op, namespace: {u}, labels: {{}}}}");
    assert!(operator.contains(&account), "{operator}");
    let operator = operator.replacen(
        &account,
        &format!("metadata: {{name: op, namespace: {u}, ownerReferences: [{{apiVersion: {group}/v1, kind: ZThing, name: z1, uid: {owner}, controller: true}}]}}"),
        1,
    );
    apply(&format!(
        "{operator}---\napiVersion: {finalized}/v1\nkind: Doom\nmetadata: {{name: d, namespace: {u}, finalizers: [{finalized}/cleanup]}}\n"
    ));
    record_flux_inventories(&f);
    for cascade in [&["--allow-cascade"][..], &[][..]] {
        let planned = stack(
            &[
                &["prune", "-n", &f, "kustomization/s", "--dry-run", "-o", "json"][..],
                cascade,
            ]
            .concat(),
        );
        let lines = json_lines(&planned.stdout);
        let why = kept_reason(&lines, "CustomResourceDefinition", &resource)
            .unwrap_or_else(|| panic!("{cascade:?}: {}\n{}", planned.stdout, planned.stderr));
        assert!(
            why.contains(&format!("Deployment.apps/{u}/op"))
                && why.contains(&format!("ServiceAccount/{u}/op dies with it")),
            "{cascade:?}: {why}"
        );
    }
    assert!(exists("serviceaccount", Some(&u), "op"));
}
