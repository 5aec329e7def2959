//! The desired set: what git (or a tool's inventory) says should exist, as identities resolved
//! through discovery. A namespaced object written without a namespace takes the default
//! namespace; a cluster-scoped object has none, even when its manifest sets one.

use std::collections::{HashMap, HashSet};

use crate::discovery::Catalog;
use crate::identity::ObjectId;
use crate::manifest::Manifest;

/// Kinds that are cluster-scoped in every Kubernetes release, for use without a cluster.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("networking.k8s.io", "IngressClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("policy", "PodSecurityPolicy"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
];

/// Knows whether a kind is namespaced: from the server's catalog, from CRDs declared in the
/// manifests, and, without a cluster, from the built-in table of cluster-scoped kinds.
pub struct Scopes<'a> {
    catalog: Option<&'a Catalog>,
    declared: HashMap<(String, String), bool>,
}

impl<'a> Scopes<'a> {
    /// Scopes from a catalog (if any) and the CRDs among the manifests.
    pub fn new(catalog: Option<&'a Catalog>, manifests: &[Manifest]) -> Self {
        let declared = manifests
            .iter()
            .filter(|m| m.kind == "CustomResourceDefinition" && m.group() == "apiextensions.k8s.io")
            .filter_map(|crd| {
                let group = crd.str_at("/spec/group")?.to_string();
                let kind = crd.str_at("/spec/names/kind")?.to_string();
                Some(((group, kind), crd.str_at("/spec/scope") != Some("Cluster")))
            })
            .collect();
        Self { catalog, declared }
    }

    /// `Some(true)` when namespaced, `Some(false)` when cluster-scoped, `None` when unknown.
    pub fn namespaced(&self, group: &str, kind: &str) -> Option<bool> {
        if let Some(known) = self.catalog.and_then(|c| c.get(group, kind)) {
            return Some(known.namespaced);
        }
        if let Some(&namespaced) = self.declared.get(&(group.to_string(), kind.to_string())) {
            return Some(namespaced);
        }
        if self.catalog.is_none() {
            return Some(!CLUSTER_SCOPED.contains(&(group, kind)));
        }
        None
    }

    /// Whether the kind is served by the cluster (always true offline).
    pub fn served(&self, group: &str, kind: &str) -> bool {
        self.catalog.is_none_or(|c| c.get(group, kind).is_some())
    }
}

/// Resolves a manifest's identity. Errors say why it cannot be resolved (unknown kind).
pub fn resolve(manifest: &Manifest, scopes: &Scopes, default_namespace: &str) -> Result<ObjectId, String> {
    let group = manifest.group();
    match scopes.namespaced(group, &manifest.kind) {
        Some(true) => {
            let namespace = manifest.namespace.as_deref().unwrap_or(default_namespace);
            Ok(ObjectId::new(group, &manifest.kind, Some(namespace), &manifest.name))
        }
        Some(false) => Ok(ObjectId::new(group, &manifest.kind, None, &manifest.name)),
        None => Err(format!(
            "{} {} ({}): kind {} is not served by the cluster and no CRD in the manifests defines it",
            manifest.kind,
            manifest.name,
            manifest.source,
            crate::discovery::kind_with_group(&manifest.kind, group)
        )),
    }
}

/// Where a desired set came from; it decides how an orphan's reason reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Manifests (`-f`, `-k`).
    Manifests,
    /// A tool's live inventory, described (e.g. `Kustomization flux-system/apps`).
    Inventory(String),
}

/// What should exist.
#[derive(Debug, Clone)]
pub struct DesiredSet {
    /// Identities that should exist.
    pub ids: HashSet<ObjectId>,
    /// Declared objects that could not be resolved (unknown kinds): reported, never fatal.
    pub unresolved: Vec<String>,
    /// Things worth telling (e.g. a namespace ignored on a cluster-scoped object).
    pub notes: Vec<String>,
    /// Where it came from.
    pub origin: Origin,
}

impl DesiredSet {
    /// Resolves manifests into a desired set.
    pub fn from_manifests(manifests: &[Manifest], scopes: &Scopes, default_namespace: &str, origin: Origin) -> Self {
        let mut set = Self {
            ids: HashSet::new(),
            unresolved: Vec::new(),
            notes: Vec::new(),
            origin,
        };
        for manifest in manifests {
            match resolve(manifest, scopes, default_namespace) {
                Ok(id) => {
                    if id.namespace.is_none() && manifest.namespace.is_some() {
                        set.notes.push(format!(
                            "{id} ({}): cluster-scoped, its namespace {:?} is ignored",
                            manifest.source,
                            manifest.namespace.as_deref().unwrap_or_default()
                        ));
                    }
                    set.ids.insert(id);
                }
                Err(why) => set.unresolved.push(why),
            }
        }
        set
    }

    /// A desired set of already resolved identities (from an inventory).
    pub fn from_ids(ids: impl IntoIterator<Item = ObjectId>, origin: Origin) -> Self {
        Self {
            ids: ids.into_iter().collect(),
            unresolved: Vec::new(),
            notes: Vec::new(),
            origin,
        }
    }

    /// Whether nothing at all is desired.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.unresolved.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_text;

    const SEED_TRAP: &str = "
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader, namespace: default}
---
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, scope: Cluster, names: {kind: Widget, plural: widgets}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: oops}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
";

    #[test]
    fn the_seeds_namespace_trap_offline() {
        let manifests = parse_text(SEED_TRAP, "trap.yaml").unwrap();
        let scopes = Scopes::new(None, &manifests);
        let set = DesiredSet::from_manifests(&manifests, &scopes, "team-a", Origin::Manifests);
        let expected: HashSet<ObjectId> = [
            ObjectId::new("rbac.authorization.k8s.io", "ClusterRole", None, "reader"),
            ObjectId::new("", "Namespace", None, "web"),
            ObjectId::new(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                None,
                "widgets.example.com",
            ),
            ObjectId::new("example.com", "Widget", None, "w"),
            ObjectId::new("", "ConfigMap", Some("team-a"), "settings"),
        ]
        .into_iter()
        .collect();
        assert_eq!(set.ids, expected);
        assert_eq!(set.notes.len(), 2, "{:?}", set.notes);
    }
}
