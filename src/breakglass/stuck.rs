//! Diagnosis of objects stuck on finalizers: what each finalizer waits for (other objects, a
//! controller, an API), which stuck objects wait for which ([`chains`]), and the one finalizer
//! whose removal releases a whole chain.

pub mod chains;
mod controllers;
mod evidence;
mod waits;

use std::collections::{BTreeMap, HashSet};

use kube::api::DynamicObject;
use serde_json::Value;

use crate::cluster::collect::{Collection, Listed};
use crate::cluster::discovery::{Catalog, KindInfo};
use crate::cluster::session::Session;
use crate::model::trackers::marks;
use evidence::{Evidence, FinalizerEvidence, FluxEvidence, Lookup, NamespaceEvidence, Read, TrackerEvidence};

pub use chains::{explain, explain_blockers, Report};
pub use evidence::DiagnosisContext;

/// Finalizers that Kubernetes itself or well-known controllers own.
const KNOWN_FINALIZERS: &[&str] = &[
    "kubernetes",
    "orphan",
    "foregroundDeletion",
    "customresourcecleanup.apiextensions.k8s.io",
    "finalizers.fluxcd.io",
    "resources-finalizer.argocd.argoproj.io",
    "pre-delete-finalizer.argocd.argoproj.io",
    "post-delete-finalizer.argocd.argoproj.io",
    "finalizers.kapp-ctrl.k14s.io/delete",
];

/// Whether an installed API group or a known controller accounts for a finalizer: a Kubernetes
/// built-in, a well-known GitOps controller's, or one whose domain (the part before `/`) is or
/// shares a suffix with an API group the server serves.
pub fn finalizer_accounted(finalizer: &str, catalog: &Catalog) -> bool {
    if KNOWN_FINALIZERS.contains(&finalizer)
        || finalizer.starts_with("kubernetes.io/")
        || finalizer.contains(".k8s.io")
        || controllers::known(finalizer).is_some()
    {
        return true;
    }
    catalog
        .kinds()
        .iter()
        .any(|kind| crate::graph::infer::finalizer_names_group(finalizer, &kind.group))
}

/// What may be lost by removing a finalizer: the cleanup its controller would have done.
pub fn what_may_be_lost(finalizer: &str) -> String {
    match finalizer {
        "kubernetes" => "objects still in the namespace are left behind in etcd, unmanaged".into(),
        "foregroundDeletion" => {
            "dependents are no longer waited for; they are deleted in the background or left".into()
        }
        "orphan" => "dependents are no longer orphaned as asked; the garbage collector may delete them".into(),
        "customresourcecleanup.apiextensions.k8s.io" => {
            "the custom resources still stored are left in etcd, unreachable until the CRD is re-created".into()
        }
        "finalizers.fluxcd.io" => "Flux does not prune what this object applied: those objects stay, untracked".into(),
        f if f.starts_with("kubernetes.io/pv") => "the volume may still be in use; its data may be lost".into(),
        f if f.contains("argocd.argoproj.io") => {
            "Argo CD does not delete the application's resources (or run its hooks)".into()
        }
        f => format!(
            "the controller behind {f} does not run its cleanup: external resources it manages (cloud load balancers, \
             volumes, DNS records, databases) may leak"
        ),
    }
}

/// One thing a stuck object waits for.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The finalizer it explains; `None` when it concerns the object as a whole (its tracker).
    pub finalizer: Option<String>,
    /// The explanation, one line, naming what is waited for.
    pub text: String,
    /// The objects waited for (still there), as read.
    pub waits_for: Vec<Listed>,
}

impl Finding {
    fn about(finalizer: &str, text: String) -> Self {
        Self {
            finalizer: Some(finalizer.to_string()),
            text,
            waits_for: Vec::new(),
        }
    }

    fn general(text: String) -> Self {
        Self {
            finalizer: None,
            text,
            waits_for: Vec::new(),
        }
    }

    fn waiting(finalizer: &str, text: String, waits_for: Vec<Listed>) -> Self {
        Self {
            finalizer: Some(finalizer.to_string()),
            text,
            waits_for,
        }
    }
}

/// Why one object is stuck.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// What it waits for.
    pub findings: Vec<Finding>,
    /// A Namespace's `spec.finalizers` (empty for other kinds).
    pub spec_finalizers: Vec<String>,
}

/// The CRD whose group a finalizer's domain names (the object's own kind's when it is in that
/// group), and who tracks it (its marks, comma-separated).
fn crd_for_finalizer(crds: &[DynamicObject], finalizer: &str, kind: &KindInfo) -> Option<(String, String)> {
    let own = kind.crd_name();
    let name_of = |crd: &DynamicObject| crd.metadata.name.clone().unwrap_or_default();
    let in_group = |name: &str| {
        name.split_once('.')
            .is_some_and(|(_, group)| crate::graph::infer::finalizer_names_group(finalizer, group))
    };
    let crd = crds
        .iter()
        .find(|crd| name_of(crd) == own && in_group(&own))
        .or_else(|| crds.iter().find(|crd| in_group(&name_of(crd))))?;
    let tracked: Vec<String> = marks(&crd.metadata).iter().map(ToString::to_string).collect();
    Some((name_of(crd), tracked.join(",")))
}

/// Why an APIService is unavailable (`reason: message` of its `Available` condition); `None`
/// when it is available or says nothing.
fn unavailable(service: &Value) -> Option<String> {
    let conditions = service.pointer("/status/conditions")?.as_array()?;
    let available = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))?;
    if available.get("status").and_then(Value::as_str) == Some("True") {
        return None;
    }
    let text = |key: &str| available.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    Some(format!("{}: {}", text("reason"), text("message")))
}

/// Why an object is stuck, as far as can be told: each finalizer with what it waits for, the
/// GitOps object that tracks it, and for Flux objects and Namespaces what they need. Reads
/// everything first ([`evidence::gather`]), then judges it ([`judge`]).
pub async fn diagnose(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Diagnosis {
    let evidence = evidence::gather(session, context, object).await;
    judge(object, &evidence)
}

/// The diagnosis of an object from what was read about it.
fn judge(object: &Listed, evidence: &Evidence) -> Diagnosis {
    let mut diagnosis = Diagnosis::default();
    for (finalizer, found) in &evidence.finalizers {
        diagnosis.findings.extend(finalizer_findings(object, finalizer, found));
    }
    if let Some(pod) = &evidence.pod {
        diagnosis.findings.extend(waits::pod_without_finalizers(object, pod));
    }
    for tracker in &evidence.trackers {
        diagnosis.findings.extend(tracker_findings(object, tracker));
    }
    if let Some(flux) = &evidence.flux {
        diagnosis.findings.extend(flux_findings(flux));
    }
    if let Some(namespace) = &evidence.namespace {
        let (findings, spec_finalizers) = namespace_findings(namespace);
        diagnosis.findings.extend(findings);
        diagnosis.spec_finalizers = spec_finalizers;
    }
    diagnosis
}

/// What one finalizer waits for.
fn finalizer_findings(object: &Listed, finalizer: &str, evidence: &FinalizerEvidence) -> Vec<Finding> {
    match evidence {
        FinalizerEvidence::Foreground(among) => vec![waits::foreground(object, among)],
        FinalizerEvidence::Orphan(among) => vec![waits::orphan(object, among)],
        FinalizerEvidence::CrdCleanup(found) => vec![waits::crd_cleanup(found)],
        FinalizerEvidence::PvcProtection { pods, pod_kind } => {
            vec![waits::pvc_protection(object, pods, pod_kind.as_ref())]
        }
        FinalizerEvidence::PvProtection(found) => vec![waits::pv_protection(found)],
        FinalizerEvidence::Controller { controller, workloads } => {
            vec![controllers::explain(finalizer, controller, workloads)]
        }
        FinalizerEvidence::Unaccounted => vec![Finding::about(
            finalizer,
            format!(
                "finalizer {finalizer}: no installed API group or known controller accounts for it; nothing may ever \
                 remove it"
            ),
        )],
        FinalizerEvidence::CrdController {
            crd,
            tracked,
            workloads,
        } => {
            let owner = if tracked.is_empty() {
                String::new()
            } else {
                format!(", tracked by {tracked}")
            };
            let state = controllers::stack_workloads(tracked, workloads.as_ref());
            vec![Finding::about(
                finalizer,
                format!("finalizer {finalizer} belongs to the controller of CRD {crd}{owner}: {state}"),
            )]
        }
        FinalizerEvidence::Unexplained => Vec::new(),
    }
}

/// The state of a Flux object in words, when it is not simply there: gone, being deleted, or
/// not known.
fn state_of(lookup: &Lookup) -> Option<String> {
    match lookup {
        Lookup::Gone => Some("is gone".into()),
        Lookup::Found(found) if found.0.is_terminating() => Some("is itself being deleted".into()),
        Lookup::Found(_) => None,
        Lookup::Unknown(why) => Some(format!("could not be checked ({why})")),
    }
}

/// The GitOps object that tracks it, and that object's dependencies.
fn tracker_findings(object: &Listed, evidence: &TrackerEvidence) -> Vec<Finding> {
    let tracker = &evidence.tracker;
    if let Some(state) = state_of(&evidence.lookup) {
        return vec![Finding::general(format!("tracked by {tracker}, which {state}"))];
    }
    let Lookup::Found(tracker_object) = &evidence.lookup else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let suspended = tracker_object.1.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let recreating = (!suspended)
        .then(|| crate::stack::parents::recreating_parent(&object.meta, [&tracker_object.0]))
        .flatten();
    if let Some((parent, mark)) = recreating {
        found.push(Finding::general(format!(
            "applied by {parent} ({mark}), which is live: it re-creates this object once it is gone; suspend it or tear it down first"
        )));
    }
    for (dependency, lookup) in &evidence.dependencies {
        if let Some(state) = state_of(lookup) {
            found.push(Finding::general(format!(
                "tracked by {tracker}, which dependsOn {dependency}, which {state}: the controller that would \
                 remove its finalizers may have gone with it"
            )));
        }
    }
    found
}

/// A Flux object's missing dependencies and kubeConfig Secret.
fn flux_findings(evidence: &FluxEvidence) -> Vec<Finding> {
    let mut found = Vec::new();
    for (dependency, lookup) in &evidence.dependencies {
        if let Some(state) = state_of(lookup) {
            found.push(Finding::general(format!("dependsOn {dependency}, which {state}")));
        }
    }
    if let Some((namespace, secret, Read::Gone)) = &evidence.kubeconfig_secret {
        found.push(Finding::general(format!(
            "kubeConfig Secret {namespace}/{secret} is missing: the controller cannot reach the target \
             cluster to clean up, so it never removes its finalizer"
        )));
    }
    found
}

const NAMESPACE_CONDITIONS: &[&str] = &[
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
];

/// A Namespace: its conditions, the APIServices behind a discovery failure, the content that
/// remains (the objects it waits for), and its `spec.finalizers`.
fn namespace_findings(evidence: &NamespaceEvidence) -> (Vec<Finding>, Vec<String>) {
    let (namespace, unavailable_api_services, content) = match evidence {
        NamespaceEvidence::NotServed => return (Vec::new(), Vec::new()),
        NamespaceEvidence::Unreadable(why) => {
            let text = format!("the Namespace could not be read ({why}): its conditions are not known");
            return (vec![Finding::general(text)], Vec::new());
        }
        NamespaceEvidence::Read {
            namespace,
            unavailable_api_services,
            content,
        } => (namespace, unavailable_api_services, content),
    };
    let mut found = namespace_conditions(namespace, unavailable_api_services);
    if let Some(remaining) = content_remaining(content) {
        found.push(remaining);
    }
    let spec_finalizers: Vec<String> = namespace
        .data
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if !spec_finalizers.is_empty() && found.is_empty() {
        found.push(Finding::about(
            "kubernetes",
            format!(
                "spec.finalizers {} not yet cleared by the namespace controller (is kube-controller-manager running?)",
                spec_finalizers.join(",")
            ),
        ));
    }
    (found, spec_finalizers)
}

/// A Namespace's deletion conditions that are true, and the unavailable APIServices (when its
/// discovery failed, or whenever any is unavailable).
fn namespace_conditions(namespace: &DynamicObject, unavailable_api_services: &[(String, String)]) -> Vec<Finding> {
    let mut found = Vec::new();
    let conditions = namespace
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut discovery_failed = false;
    for condition in conditions {
        let text = |key: &str| condition.get(key).and_then(Value::as_str).unwrap_or("").to_string();
        if text("status") == "True" && NAMESPACE_CONDITIONS.contains(&text("type").as_str()) {
            discovery_failed |= text("type") == "NamespaceDeletionDiscoveryFailure";
            found.push(Finding::about(
                "kubernetes",
                format!("{}: {}", text("type"), text("message")),
            ));
        }
    }
    if discovery_failed || !unavailable_api_services.is_empty() {
        for (service, why) in unavailable_api_services {
            found.push(Finding::about(
                "kubernetes",
                format!("APIService {service} is unavailable ({why}): the namespace controller cannot list its kinds"),
            ));
        }
    }
    found
}

/// Objects still in a namespace, counted by kind, with the finalizers that hold them; the
/// objects held by finalizers are what the namespace waits for.
fn content_remaining(content: &Collection) -> Option<Finding> {
    let mut by_kind: BTreeMap<String, (usize, HashSet<String>)> = BTreeMap::new();
    let mut held = Vec::new();
    for object in &content.objects {
        // Events are the controller's to clean up.
        if object.kind.kind == "Event" {
            continue;
        }
        let entry = by_kind.entry(object.kind.kind_with_group()).or_default();
        entry.0 += 1;
        entry.1.extend(object.finalizers().iter().cloned());
        if !object.finalizers().is_empty() {
            held.push(object.clone());
        }
    }
    let mut parts: Vec<String> = by_kind
        .into_iter()
        .map(|(kind, (count, finalizers))| {
            if finalizers.is_empty() {
                format!("{count} {kind}")
            } else {
                let mut finalizers: Vec<String> = finalizers.into_iter().collect();
                finalizers.sort();
                format!("{count} {kind} (finalizers: {})", finalizers.join(", "))
            }
        })
        .collect();
    if !content.failures.is_empty() {
        parts.push(format!(
            "and {} kind(s) that could not be listed here ({})",
            content.failures.len(),
            waits::kind_names(content.failures.iter().map(|f| &f.kind))
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let mut text = format!("content remaining: {}", parts.join(", "));
    if !held.is_empty() {
        text.push_str(&format!(
            "; held by finalizers: {}",
            waits::describe_objects(&held, true)
        ));
    }
    Some(Finding::waiting("kubernetes", text, held))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::evidence::test_support::{kind, listed, object};
    use super::*;
    use crate::cluster::discovery::DiscoverySource;
    use crate::error::LookupError;
    use crate::model::identity::ObjectId;

    fn catalog(groups: &[&str]) -> Catalog {
        let kinds = groups
            .iter()
            .map(|g| KindInfo {
                group: g.to_string(),
                version: "v1".into(),
                kind: "Thing".into(),
                plural: "things".into(),
                singular: "thing".into(),
                short_names: vec![],
                namespaced: true,
                verbs: vec!["list".into()],
            })
            .collect();
        Catalog::new(kinds, vec![], DiscoverySource::PerGroup)
    }

    #[test]
    fn finalizers_are_accounted_for_by_groups_and_known_controllers() {
        let catalog = catalog(&["demo.kubectl-stack.dev", "cert-manager.io"]);
        assert!(finalizer_accounted("kubernetes", &catalog));
        assert!(finalizer_accounted("kubernetes.io/pvc-protection", &catalog));
        assert!(finalizer_accounted("finalizers.fluxcd.io", &catalog));
        assert!(finalizer_accounted("finalizers.kapp-ctrl.k14s.io/delete", &catalog));
        assert!(finalizer_accounted(
            "resources-finalizer.argocd.argoproj.io/foreground",
            &catalog
        ));
        assert!(finalizer_accounted("demo.kubectl-stack.dev/cleanup", &catalog));
        assert!(finalizer_accounted("acme.cert-manager.io/finalizer", &catalog));
        assert!(!finalizer_accounted("orphaned.example.org/cleanup", &catalog));
        assert!(!finalizer_accounted("some-finalizer", &catalog));
    }

    #[test]
    fn losses_are_explained() {
        assert!(what_may_be_lost("service.kubernetes.io/load-balancer-cleanup").contains("load balancers"));
        assert!(what_may_be_lost("finalizers.fluxcd.io").contains("Flux does not prune"));
        assert!(what_may_be_lost("kubernetes").contains("namespace"));
    }

    fn kustomization(name: &str, spec: serde_json::Value, deleting: bool) -> Lookup {
        let kinds = kind("kustomize.toolkit.fluxcd.io", "Kustomization", "kustomizations", true);
        let mut meta = json!({"name": name, "namespace": "flux-system", "uid": format!("u-{name}")});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        Lookup::Found(Box::new((listed(&kinds, meta), json!({ "spec": spec }))))
    }

    fn ks_id(name: &str) -> ObjectId {
        ObjectId::new(
            "kustomize.toolkit.fluxcd.io",
            "Kustomization",
            Some("flux-system"),
            name,
        )
    }

    fn config_map(meta: serde_json::Value) -> Listed {
        listed(&kind("", "ConfigMap", "configmaps", true), meta)
    }

    #[test]
    fn trackers_are_judged_by_their_state_and_dependencies() {
        let stuck = config_map(json!({"name": "c", "namespace": "ns", "uid": "u-c"}));
        let gone = TrackerEvidence {
            tracker: ks_id("apps"),
            lookup: Lookup::Gone,
            dependencies: Vec::new(),
        };
        let texts = |found: Vec<Finding>| found.into_iter().map(|f| f.text).collect::<Vec<_>>();
        assert_eq!(
            texts(tracker_findings(&stuck, &gone)),
            ["tracked by Kustomization.kustomize.toolkit.fluxcd.io/flux-system/apps, which is gone"]
        );
        let unknown = TrackerEvidence {
            lookup: Lookup::Unknown(LookupError::Forbidden),
            ..gone.clone()
        };
        assert!(texts(tracker_findings(&stuck, &unknown))[0].ends_with("which could not be checked (forbidden)"));
        let live = TrackerEvidence {
            lookup: kustomization("apps", json!({"suspend": true}), false),
            dependencies: vec![
                (ks_id("infra"), kustomization("infra", json!({}), true)),
                (ks_id("base"), kustomization("base", json!({}), false)),
            ],
            ..gone
        };
        let found = texts(tracker_findings(&stuck, &live));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("which dependsOn Kustomization.kustomize.toolkit.fluxcd.io/flux-system/infra, which is itself being deleted"), "{found:?}");
    }

    #[test]
    fn a_flux_object_misses_its_dependencies_and_kubeconfig() {
        let evidence = FluxEvidence {
            dependencies: vec![(ks_id("infra"), Lookup::Gone)],
            kubeconfig_secret: Some(("flux-system".into(), "remote".into(), Read::Gone)),
        };
        let found: Vec<String> = flux_findings(&evidence).into_iter().map(|f| f.text).collect();
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0],
            "dependsOn Kustomization.kustomize.toolkit.fluxcd.io/flux-system/infra, which is gone"
        );
        assert!(found[1].starts_with("kubeConfig Secret flux-system/remote is missing"));
        let fine = FluxEvidence {
            dependencies: vec![(ks_id("infra"), kustomization("infra", json!({}), false))],
            kubeconfig_secret: Some(("flux-system".into(), "remote".into(), Read::Found(()))),
        };
        assert!(flux_findings(&fine).is_empty());
    }

    fn namespace(status: serde_json::Value, spec_finalizers: &[&str]) -> Box<DynamicObject> {
        Box::new(object(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"},
            "spec": {"finalizers": spec_finalizers}, "status": status,
        })))
    }

    #[test]
    fn a_namespace_waits_for_its_content_and_names_unavailable_apis() {
        let held = config_map(
            json!({"name": "held", "namespace": "ns", "uid": "u-h", "finalizers": ["demo.example/x"],
                                     "deletionTimestamp": "2024-01-01T00:00:00Z"}),
        );
        let plain = config_map(json!({"name": "plain", "namespace": "ns", "uid": "u-p"}));
        let event = listed(
            &kind("", "Event", "events", true),
            json!({"name": "e", "namespace": "ns", "uid": "u-e"}),
        );
        let conditions = json!({"conditions": [
            {"type": "NamespaceDeletionDiscoveryFailure", "status": "True", "message": "metrics.example/v1: 503"},
            {"type": "NamespaceDeletionContentFailure", "status": "False", "message": "ignored"}]});
        let evidence = NamespaceEvidence::Read {
            namespace: namespace(conditions, &["kubernetes"]),
            unavailable_api_services: vec![("v1.metrics.example".into(), "FailedDiscoveryCheck: 503".into())],
            content: Arc::new(Collection {
                objects: vec![held, plain, event],
                ..Default::default()
            }),
        };
        let (found, spec_finalizers) = namespace_findings(&evidence);
        assert_eq!(spec_finalizers, ["kubernetes"]);
        let texts: Vec<&str> = found.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "NamespaceDeletionDiscoveryFailure: metrics.example/v1: 503",
                "APIService v1.metrics.example is unavailable (FailedDiscoveryCheck: 503): the namespace controller \
                 cannot list its kinds",
                "content remaining: 2 ConfigMap (finalizers: demo.example/x); held by finalizers: ConfigMap/ns/held \
                 (finalizer demo.example/x)",
            ]
        );
        assert_eq!(found[2].waits_for.len(), 1);
        assert!(found.iter().all(|f| f.finalizer.as_deref() == Some("kubernetes")));
    }

    #[test]
    fn an_empty_namespace_waits_for_its_controller() {
        let evidence = NamespaceEvidence::Read {
            namespace: namespace(json!({}), &["kubernetes"]),
            unavailable_api_services: Vec::new(),
            content: Arc::new(Collection::default()),
        };
        let (found, _) = namespace_findings(&evidence);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].text.starts_with("spec.finalizers kubernetes not yet cleared"),
            "{}",
            found[0].text
        );
        let (unread, spec) = namespace_findings(&NamespaceEvidence::Unreadable(LookupError::Forbidden));
        assert!(spec.is_empty());
        assert_eq!(
            unread[0].text,
            "the Namespace could not be read (forbidden): its conditions are not known"
        );
        assert_eq!(namespace_findings(&NamespaceEvidence::NotServed).0.len(), 0);
    }

    #[test]
    fn a_finalizer_in_a_crds_group_names_that_crd_and_its_stack() {
        let crd = object(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.demo.example", "labels": {
                "kustomize.toolkit.fluxcd.io/name": "operator", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        }));
        let other = object(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                                  "metadata": {"name": "gadgets.other.example"}}),
        );
        let widgets = kind("demo.example", "Widget", "widgets", true);
        let (name, tracked) = crd_for_finalizer(&[other.clone(), crd], "demo.example/cleanup", &widgets).unwrap();
        assert_eq!(name, "widgets.demo.example");
        assert!(tracked.contains("operator"), "{tracked}");
        assert!(crd_for_finalizer(&[other], "demo.example/cleanup", &widgets).is_none());
        let stuck = listed(&widgets, json!({"name": "w", "namespace": "ns", "uid": "u-w"}));
        let untracked = FinalizerEvidence::CrdController {
            crd: "widgets.demo.example".into(),
            tracked: String::new(),
            workloads: None,
        };
        assert_eq!(
            finalizer_findings(&stuck, "demo.example/cleanup", &untracked)[0].text,
            "finalizer demo.example/cleanup belongs to the controller of CRD widgets.demo.example: is that controller running?"
        );
        let unaccounted = finalizer_findings(&stuck, "orphaned.example.org/x", &FinalizerEvidence::Unaccounted);
        assert!(unaccounted[0]
            .text
            .contains("no installed API group or known controller accounts for it"));
        assert!(finalizer_findings(&stuck, "x", &FinalizerEvidence::Unexplained).is_empty());
    }

    #[test]
    fn unavailable_api_services_say_why() {
        let down = json!({"status": {"conditions": [{"type": "Available", "status": "False", "reason": "R", "message": "m"}]}});
        assert_eq!(unavailable(&down).as_deref(), Some("R: m"));
        let up = json!({"status": {"conditions": [{"type": "Available", "status": "True"}]}});
        assert_eq!(unavailable(&up), None);
    }
}
