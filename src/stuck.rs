//! Diagnosis of objects stuck on finalizers: why they hang and what they belong to.

use std::collections::{BTreeMap, HashMap, HashSet};

use kube::api::DynamicObject;
use serde_json::Value;

use crate::collect::{api_for, Listed};
use crate::commands::Session;
use crate::discovery::Catalog;
use crate::error::is_not_found;
use crate::identity::ObjectId;
use crate::retry::with_retries;
use crate::trackers::{marks, Preset};

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
];

/// Whether an installed API group or a known controller accounts for a finalizer: a Kubernetes
/// built-in, a well-known GitOps controller's, or one whose domain (the part before `/`) is or
/// shares a suffix with an API group the server serves.
pub fn finalizer_accounted(finalizer: &str, catalog: &Catalog) -> bool {
    if KNOWN_FINALIZERS.contains(&finalizer) || finalizer.starts_with("kubernetes.io/") || finalizer.contains(".k8s.io")
    {
        return true;
    }
    let domain = finalizer.split('/').next().unwrap_or(finalizer);
    let groups: HashSet<&str> = catalog
        .kinds()
        .iter()
        .map(|k| k.group.as_str())
        .filter(|g| !g.is_empty())
        .collect();
    groups.iter().any(|group| {
        domain == *group || domain.ends_with(&format!(".{group}")) || group.ends_with(&format!(".{domain}"))
    })
}

/// What may be lost by removing a finalizer: the cleanup its controller would have done.
pub fn what_may_be_lost(finalizer: &str) -> String {
    match finalizer {
        "kubernetes" => "objects still in the namespace are left behind in etcd, unmanaged".into(),
        "foregroundDeletion" => {
            "dependents are no longer waited for; they are deleted in the background or left".into()
        }
        "orphan" => "dependents are no longer orphaned as asked; the garbage collector may delete them".into(),
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

/// Shared facts for diagnosing many objects, fetched once.
pub struct DiagnosisContext {
    /// Flux Kustomizations and HelmReleases by identity, with their whole body.
    flux: HashMap<ObjectId, (Listed, Value)>,
    /// Unavailable APIServices: name and why.
    unavailable_api_services: Vec<(String, String)>,
    /// CustomResourceDefinitions: name (`plural.group`) and who tracks them.
    crds: Vec<(String, String)>,
}

impl DiagnosisContext {
    /// Fetches the Flux objects and APIService availability.
    pub async fn load(session: &Session) -> Self {
        let everywhere = Session {
            scope: crate::collect::ListScope::AllNamespaces,
            ..session.clone()
        };
        let flux = crate::commands::graph::flux_objects(&everywhere)
            .await
            .unwrap_or_default();
        let flux = flux
            .into_iter()
            .map(|(object, body)| (object.id(), (object, body)))
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
        let crds = list_all(session, "apiextensions.k8s.io", "CustomResourceDefinition")
            .await
            .into_iter()
            .map(|crd| {
                let tracked: Vec<String> = marks(&crd.metadata).iter().map(ToString::to_string).collect();
                (crd.metadata.name.unwrap_or_default(), tracked.join(","))
            })
            .collect();
        Self {
            flux,
            unavailable_api_services,
            crds,
        }
    }

    /// The CRD whose group a finalizer's domain names (the object's own kind's when it is in
    /// that group), and who tracks it.
    fn crd_for_finalizer(&self, finalizer: &str, kind: &crate::discovery::KindInfo) -> Option<&(String, String)> {
        let domain = finalizer.split('/').next().unwrap_or(finalizer);
        let own = format!("{}.{}", kind.plural, kind.group);
        let in_group = |name: &String| name.split_once('.').is_some_and(|(_, group)| group == domain);
        self.crds
            .iter()
            .find(|(name, _)| *name == own && in_group(name))
            .or_else(|| self.crds.iter().find(|(name, _)| in_group(name)))
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

/// Why an object is stuck, as far as can be told.
pub async fn diagnose(session: &Session, context: &DiagnosisContext, object: &Listed) -> Vec<String> {
    let mut found = Vec::new();
    for finalizer in object.finalizers() {
        if !finalizer_accounted(finalizer, &session.catalog) {
            found.push(format!(
                "finalizer {finalizer}: no installed API group or known controller accounts for it; nothing may ever remove it"
            ));
        } else if let Some((crd, tracked)) = context.crd_for_finalizer(finalizer, &object.kind) {
            let owner = if tracked.is_empty() {
                String::new()
            } else {
                format!(", tracked by {tracked}")
            };
            found.push(format!(
                "finalizer {finalizer} belongs to the controller of CRD {crd}{owner}: is that controller running?"
            ));
        }
    }
    found.extend(tracker_diagnoses(context, object));
    let id = object.id();
    if let Some((_, body)) = context.flux.get(&id) {
        found.extend(flux_diagnoses(session, context, &id, body).await);
    }
    if id.group.is_empty() && id.kind == "Namespace" {
        found.extend(namespace_diagnoses(session, context, &id.name).await);
    }
    found
}

fn state_of(context: &DiagnosisContext, id: &ObjectId) -> Option<&'static str> {
    match context.flux.get(id) {
        None => Some("is gone"),
        Some((object, _)) if object.is_terminating() => Some("is itself being deleted"),
        Some(_) => None,
    }
}

/// The GitOps object that tracks it, and that object's dependencies.
fn tracker_diagnoses(context: &DiagnosisContext, object: &Listed) -> Vec<String> {
    let mut found = Vec::new();
    for mark in marks(&object.meta) {
        let (group, kind) = match mark.preset {
            Preset::Flux => crate::commands::graph::FLUX_KINDS[0],
            Preset::FluxHelm => crate::commands::graph::FLUX_KINDS[1],
            _ => continue,
        };
        let tracker = ObjectId::new(group, kind, mark.value.namespace.as_deref(), &mark.value.name);
        if let Some(state) = state_of(context, &tracker) {
            found.push(format!("tracked by {tracker}, which {state}"));
            continue;
        }
        if let Some((_, body)) = context.flux.get(&tracker) {
            for dependency in crate::graph::NodeInput::flux_depends_on(&tracker, body) {
                if let Some(state) = state_of(context, &dependency) {
                    found.push(format!(
                        "tracked by {tracker}, which dependsOn {dependency}, which {state}: the controller that would \
                         remove its finalizers may have gone with it"
                    ));
                }
            }
        }
    }
    found
}

async fn flux_diagnoses(session: &Session, context: &DiagnosisContext, id: &ObjectId, body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for dependency in crate::graph::NodeInput::flux_depends_on(id, body) {
        if let Some(state) = state_of(context, &dependency) {
            found.push(format!("dependsOn {dependency}, which {state}"));
        }
    }
    if let Some(secret) = body.pointer("/spec/kubeConfig/secretRef/name").and_then(Value::as_str) {
        let namespace = id.namespace.as_deref().unwrap_or("default");
        if let Some(secrets) = session.catalog.get("", "Secret") {
            let api = api_for(&session.connection.client, secrets, Some(namespace));
            if let Err(err) = with_retries("get kubeconfig secret", || api.get_metadata(secret)).await {
                if is_not_found(&err) {
                    found.push(format!(
                        "kubeConfig Secret {namespace}/{secret} is missing: the controller cannot reach the target \
                         cluster to clean up, so it never removes its finalizer"
                    ));
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

async fn namespace_diagnoses(session: &Session, context: &DiagnosisContext, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Some(namespaces) = session.catalog.get("", "Namespace") else {
        return found;
    };
    let api = api_for(&session.connection.client, namespaces, None);
    let Ok(namespace) = with_retries("get namespace", || api.get(name)).await else {
        return found;
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
            found.push(format!("{}: {}", text("type"), text("message")));
        }
    }
    if discovery_failed || !context.unavailable_api_services.is_empty() {
        for (service, why) in &context.unavailable_api_services {
            found.push(format!(
                "APIService {service} is unavailable ({why}): the namespace controller cannot list its kinds"
            ));
        }
    }
    let remaining = content_remaining(session, name).await;
    if !remaining.is_empty() {
        found.push(format!("content remaining: {}", remaining.join(", ")));
    }
    let spec_finalizers: Vec<String> = namespace
        .data
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if !spec_finalizers.is_empty() && found.is_empty() {
        found.push(format!(
            "spec.finalizers {} not yet cleared by the namespace controller (is kube-controller-manager running?)",
            spec_finalizers.join(",")
        ));
    }
    found
}

/// Objects still in a namespace, counted by kind, with the finalizers that hold them.
async fn content_remaining(session: &Session, namespace: &str) -> Vec<String> {
    let kinds: Vec<_> = session.catalog.listable().filter(|k| k.namespaced).cloned().collect();
    let everything = crate::trackers::Selection::everything();
    let scope = crate::collect::ListScope::Namespace(namespace.to_string());
    let collection = crate::collect::collect_kinds(
        &session.connection.client,
        &kinds,
        &scope,
        &everything,
        Default::default(),
    )
    .await;
    let mut by_kind: BTreeMap<String, (usize, HashSet<String>)> = BTreeMap::new();
    for object in &collection.objects {
        // Events and the service account token machinery are the controller's to clean up.
        if object.kind.kind == "Event" {
            continue;
        }
        let entry = by_kind.entry(object.kind.kind_with_group()).or_default();
        entry.0 += 1;
        entry.1.extend(object.finalizers().iter().cloned());
    }
    by_kind
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
        .collect()
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
