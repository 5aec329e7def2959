//! Diagnosis of objects stuck on finalizers: what each finalizer waits for (other objects, a
//! controller, an API), which stuck objects wait for which ([`chains`]), and the one finalizer
//! whose removal releases a whole chain.

pub mod chains;
mod controllers;
mod waits;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;

use crate::collect::{api_for, Collection, Listed};
use crate::discovery::Catalog;
use crate::error::{is_not_found, root_cause, LookupError};
use crate::identity::ObjectId;
use crate::retry::with_retries;
use crate::session::Session;
use crate::trackers::marks;

pub use chains::{explain, explain_blockers, Report};

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
        .any(|kind| crate::infer::finalizer_names_group(finalizer, &kind.group))
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

/// Whether a tracking object could be found.
#[derive(Debug, Clone)]
enum Lookup {
    /// It is there, with its body.
    Found(Box<(Listed, Value)>),
    /// It is not (404).
    Gone,
    /// It could not be read (403 or another failure): unknown, never "gone".
    Unknown(LookupError),
}

/// Shared facts for diagnosing many objects, fetched once, and what was looked up on the way.
pub struct DiagnosisContext {
    /// Flux Kustomizations and HelmReleases, with their whole body: listed everywhere, or read
    /// one by one where listing everywhere was not allowed.
    flux: HashMap<ObjectId, Lookup>,
    /// Unavailable APIServices: name and why.
    unavailable_api_services: Vec<(String, String)>,
    /// CustomResourceDefinitions, whole.
    crds: Vec<DynamicObject>,
    /// Every object in a namespace (metadata), by namespace.
    namespace_content: HashMap<String, Arc<Collection>>,
    /// Objects anywhere that refer to a cluster-scoped owner, by the owner's UID.
    cluster_dependents: HashMap<String, Arc<Collection>>,
    /// Pods by namespace, whole, or why they could not be listed.
    pods: HashMap<String, Result<Arc<Vec<DynamicObject>>, LookupError>>,
    /// Deployments, StatefulSets and DaemonSets everywhere, or why they could not be listed.
    workloads: Option<Result<Arc<Vec<controllers::Workload>>, LookupError>>,
}

impl DiagnosisContext {
    /// Fetches the Flux objects, APIService availability and CRDs.
    pub async fn load(session: &Session) -> Self {
        let everywhere = Session {
            scope: crate::collect::ListScope::AllNamespaces,
            ..session.clone()
        };
        let flux = crate::live::flux_objects(&everywhere).await.unwrap_or_default();
        let flux = flux
            .into_iter()
            .map(|(object, body)| (object.id(), Lookup::Found(Box::new((object, body)))))
            .collect();
        let unavailable_api_services = list_all(session, "apiregistration.k8s.io", "APIService")
            .await
            .into_iter()
            .filter_map(|service| {
                Some((
                    service.metadata.name.clone().unwrap_or_default(),
                    unavailable(&service.data)?,
                ))
            })
            .collect();
        let crds = list_all(session, "apiextensions.k8s.io", "CustomResourceDefinition").await;
        Self {
            flux,
            unavailable_api_services,
            crds,
            namespace_content: HashMap::new(),
            cluster_dependents: HashMap::new(),
            pods: HashMap::new(),
            workloads: None,
        }
    }

    /// The CRD whose group a finalizer's domain names (the object's own kind's when it is in
    /// that group), and who tracks it.
    fn crd_for_finalizer(&self, finalizer: &str, kind: &crate::discovery::KindInfo) -> Option<(String, String)> {
        let own = kind.crd_name();
        let name_of = |crd: &DynamicObject| crd.metadata.name.clone().unwrap_or_default();
        let in_group = |name: &str| {
            name.split_once('.')
                .is_some_and(|(_, group)| crate::infer::finalizer_names_group(finalizer, group))
        };
        let crd = self
            .crds
            .iter()
            .find(|crd| name_of(crd) == own && in_group(&own))
            .or_else(|| self.crds.iter().find(|crd| in_group(&name_of(crd))))?;
        let tracked: Vec<String> = marks(&crd.metadata).iter().map(ToString::to_string).collect();
        Some((name_of(crd), tracked.join(",")))
    }

    /// A Flux object: from the listing, else read on its own (the user may read its namespace
    /// without listing everywhere). Forbidden or failed reads are unknown, never gone.
    async fn flux_object(&mut self, session: &Session, id: &ObjectId) -> Lookup {
        if let Some(found) = self.flux.get(id) {
            return found.clone();
        }
        let lookup = match session.catalog.get(&id.group, &id.kind) {
            None => Lookup::Gone,
            Some(kind) => {
                let api = api_for(&session.connection.client, kind, id.namespace.as_deref());
                match with_retries("get", || api.get(&id.name)).await {
                    Ok(object) => Lookup::Found(Box::new((Listed::new(kind.clone(), object.metadata), object.data))),
                    Err(err) if is_not_found(&err) => Lookup::Gone,
                    Err(err) => Lookup::Unknown(LookupError::from_request(&err)),
                }
            }
        };
        self.flux.insert(id.clone(), lookup.clone());
        lookup
    }

    /// Every object in a namespace (metadata only), listed once.
    async fn namespace_content(&mut self, session: &Session, namespace: &str) -> Arc<Collection> {
        if let Some(found) = self.namespace_content.get(namespace) {
            return Arc::clone(found);
        }
        let kinds: Vec<_> = session.catalog.listable().filter(|k| k.namespaced).cloned().collect();
        let scope = crate::collect::ListScope::Namespace(namespace.to_string());
        let collection = crate::collect::collect_kinds(
            &session.connection.client,
            &kinds,
            &scope,
            &crate::trackers::Selection::everything(),
            Default::default(),
        )
        .await;
        let collection = Arc::new(collection);
        self.namespace_content
            .insert(namespace.to_string(), Arc::clone(&collection));
        collection
    }
}

/// Every object of a cluster-wide kind; nothing when it is not served or may not be listed
/// (a diagnosis then simply has less to say).
async fn list_all(session: &Session, group: &str, kind: &str) -> Vec<DynamicObject> {
    let Some(info) = session.catalog.get(group, kind) else {
        return Vec::new();
    };
    crate::collect::list_objects(&session.connection.client, info, None, None)
        .await
        .unwrap_or_default()
}

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
/// GitOps object that tracks it, and for Flux objects and Namespaces what they need.
pub async fn diagnose(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Diagnosis {
    let mut diagnosis = Diagnosis::default();
    for finalizer in object.finalizers() {
        diagnosis
            .findings
            .extend(finalizer_findings(session, context, object, finalizer).await);
    }
    if object.finalizers().is_empty() && object.kind.group.is_empty() && object.kind.kind == "Pod" {
        diagnosis
            .findings
            .extend(waits::pod_without_finalizers(session, object).await);
    }
    diagnosis
        .findings
        .extend(tracker_findings(session, context, object).await);
    let id = object.id();
    if crate::trackers::FLUX_KINDS.contains(&(id.group.as_str(), id.kind.as_str())) {
        if let Lookup::Found(found) = context.flux_object(session, &id).await {
            diagnosis
                .findings
                .extend(flux_findings(session, context, &id, &found.1).await);
        }
    }
    if id.group.is_empty() && id.kind == "Namespace" {
        let (findings, spec_finalizers) = namespace_findings(session, context, &id.name).await;
        diagnosis.findings.extend(findings);
        diagnosis.spec_finalizers = spec_finalizers;
    }
    diagnosis
}

/// What one finalizer waits for.
async fn finalizer_findings(
    session: &Session,
    context: &mut DiagnosisContext,
    object: &Listed,
    finalizer: &str,
) -> Vec<Finding> {
    if let Some(found) = waits::builtin(session, context, object, finalizer).await {
        return found;
    }
    if let Some(found) = controllers::explain(session, context, object, finalizer).await {
        return vec![found];
    }
    if !finalizer_accounted(finalizer, &session.catalog) {
        return vec![Finding::about(
            finalizer,
            format!(
                "finalizer {finalizer}: no installed API group or known controller accounts for it; nothing may ever \
                 remove it"
            ),
        )];
    }
    if let Some((crd, tracked)) = context.crd_for_finalizer(finalizer, &object.kind) {
        let owner = if tracked.is_empty() {
            String::new()
        } else {
            format!(", tracked by {tracked}")
        };
        let state = controllers::stack_workloads(session, context, &tracked).await;
        return vec![Finding::about(
            finalizer,
            format!("finalizer {finalizer} belongs to the controller of CRD {crd}{owner}: {state}"),
        )];
    }
    Vec::new()
}

/// The state of a Flux object in words, when it is not simply there: gone, being deleted, or
/// not known.
async fn state_of(session: &Session, context: &mut DiagnosisContext, id: &ObjectId) -> Option<String> {
    match context.flux_object(session, id).await {
        Lookup::Gone => Some("is gone".into()),
        Lookup::Found(found) if found.0.is_terminating() => Some("is itself being deleted".into()),
        Lookup::Found(_) => None,
        Lookup::Unknown(why) => Some(format!("could not be checked ({why})")),
    }
}

/// The GitOps object that tracks it, and that object's dependencies.
async fn tracker_findings(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Vec<Finding> {
    let mut found = Vec::new();
    for mark in marks(&object.meta) {
        let Some((group, kind)) = mark.preset.flux_kind() else {
            continue;
        };
        let tracker = ObjectId::new(group, kind, mark.value.namespace.as_deref(), &mark.value.name);
        if let Some(state) = state_of(session, context, &tracker).await {
            found.push(Finding::general(format!("tracked by {tracker}, which {state}")));
            continue;
        }
        let Lookup::Found(tracker_object) = context.flux_object(session, &tracker).await else {
            continue;
        };
        let suspended = tracker_object.1.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
        let recreating = (!suspended)
            .then(|| crate::parents::recreating_parent(&object.meta, [&tracker_object.0]))
            .flatten();
        if let Some((parent, mark)) = recreating {
            found.push(Finding::general(format!(
                "applied by {parent} ({mark}), which is live: it re-creates this object once it is gone; suspend it or tear it down first"
            )));
        }
        for dependency in crate::graph::NodeInput::flux_depends_on(&tracker, &tracker_object.1) {
            if let Some(state) = state_of(session, context, &dependency).await {
                found.push(Finding::general(format!(
                    "tracked by {tracker}, which dependsOn {dependency}, which {state}: the controller that would \
                     remove its finalizers may have gone with it"
                )));
            }
        }
    }
    found
}

async fn flux_findings(session: &Session, context: &mut DiagnosisContext, id: &ObjectId, body: &Value) -> Vec<Finding> {
    let mut found = Vec::new();
    for dependency in crate::graph::NodeInput::flux_depends_on(id, body) {
        if let Some(state) = state_of(session, context, &dependency).await {
            found.push(Finding::general(format!("dependsOn {dependency}, which {state}")));
        }
    }
    if let Some(secret) = body.pointer("/spec/kubeConfig/secretRef/name").and_then(Value::as_str) {
        let namespace = id.namespace.as_deref().unwrap_or("default");
        if let Some(secrets) = session.catalog.get("", "Secret") {
            let api = api_for(&session.connection.client, secrets, Some(namespace));
            if let Err(err) = with_retries("get kubeconfig secret", || api.get_metadata(secret)).await {
                if is_not_found(&err) {
                    found.push(Finding::general(format!(
                        "kubeConfig Secret {namespace}/{secret} is missing: the controller cannot reach the target \
                         cluster to clean up, so it never removes its finalizer"
                    )));
                }
            }
        }
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
async fn namespace_findings(
    session: &Session,
    context: &mut DiagnosisContext,
    name: &str,
) -> (Vec<Finding>, Vec<String>) {
    let mut found = Vec::new();
    let Some(namespaces) = session.catalog.get("", "Namespace") else {
        return (found, Vec::new());
    };
    let api = api_for(&session.connection.client, namespaces, None);
    let namespace = match with_retries("get namespace", || api.get(name)).await {
        Ok(namespace) => namespace,
        Err(err) => {
            found.push(Finding::general(format!(
                "the Namespace could not be read ({}): its conditions are not known",
                root_cause(&err)
            )));
            return (found, Vec::new());
        }
    };
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
    if discovery_failed || !context.unavailable_api_services.is_empty() {
        for (service, why) in &context.unavailable_api_services {
            found.push(Finding::about(
                "kubernetes",
                format!("APIService {service} is unavailable ({why}): the namespace controller cannot list its kinds"),
            ));
        }
    }
    let content = context.namespace_content(session, name).await;
    if let Some(remaining) = content_remaining(&content) {
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
    use super::*;
    use crate::discovery::{DiscoverySource, KindInfo};

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
}
