//! The desired set: what git (or a tool's inventory) says should exist, as identities resolved
//! through discovery. A namespaced object written without a namespace takes the default
//! namespace; a cluster-scoped object has none, even when its manifest sets one.

use std::collections::{HashMap, HashSet};

use crate::cluster::discovery::Catalog;
use crate::error::UserError;
use crate::model::identity::ObjectId;
use crate::stack::kapp_versions::VersionedDesired;
use crate::stack::manifest::Manifest;

pub mod needs;
pub mod rejects;
pub use needs::{Need, Needs};

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

    /// The name of the CRD that defines a custom kind the cluster serves (`plural.group`);
    /// `None` for the core group and offline.
    pub fn crd_of(&self, group: &str, kind: &str) -> Option<String> {
        let known = self.catalog?.get(group, kind)?;
        (!group.is_empty()).then(|| known.crd_name())
    }

    /// Whether the kind is served by the cluster (always true offline).
    pub fn served(&self, group: &str, kind: &str) -> bool {
        self.catalog.is_none_or(|c| c.get(group, kind).is_some())
    }
}

/// How a namespaced manifest gets its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceRule<'a> {
    /// Its own, else this one (`-n` or the context's namespace, as kubectl resolves it).
    Default(&'a str),
    /// This one, whatever the manifest says: a Flux Kustomization's `spec.targetNamespace`
    /// becomes the `namespace:` of the kustomization kustomize-controller builds
    /// (fluxcd/pkg `kustomize/kustomize_generator.go` `WriteFile`: `kus.Namespace = tg`), and
    /// kustomize's namespace transformer then sets it on every namespaced object, replacing
    /// the namespace it had (kubernetes-sigs/kustomize `api/filters/namespace/namespace.go`,
    /// `UnsetOnly` false).
    Target(&'a str),
    /// Its own, which it must have: a Flux Kustomization without `spec.targetNamespace` applies
    /// each object as built, and a namespaced object built without a namespace fails the
    /// server-side dry-run of the whole apply ("namespace not specified": fluxcd/pkg
    /// `ssa/manager_apply.go` `ApplyAll` returns at the first dry-run error, `ssa/errors.go`
    /// `DryRunErr`), so kustomize-controller applies nothing and prunes nothing
    /// (`internal/controller/kustomization_controller.go`: `prune` runs after a successful
    /// apply). Such a manifest is [`Unplaced`], never given `-n`'s namespace. An Argo CD
    /// Application without `spec.destination.namespace` likewise ([`NoNamespace::ArgoCd`]).
    Required(NoNamespace),
}

/// The tool that gives a namespaced manifest written without a namespace none, and so applies
/// and prunes nothing of its stack ([`NamespaceRule::Required`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoNamespace {
    /// A Flux Kustomization without `spec.targetNamespace`: the whole apply fails its dry-run.
    Flux,
    /// An Argo CD Application without `spec.destination.namespace`: argo-cd
    /// `controller/state.go` `CompareAppState` adds an `InvalidSpecError` ("Namespace for %s %s
    /// is missing."), and `controller/sync.go` `SyncAppState` performs no operation while such
    /// a condition stands.
    ArgoCd,
    /// An Argo CD tracking id naming an Application that cannot be told (none of that name in
    /// the control-plane namespace, or that namespace unknown): its destination is unknown.
    ArgoCdUnknown,
    /// A kapp app, without `-n`: kapp places the manifest in its `deploy -n`, which the
    /// cluster does not record (see `stack::inventory::kapp`).
    Kapp,
}

impl NoNamespace {
    /// Why nothing of the stack is an orphan, for the first unplaced manifest (`all`: every one).
    pub fn why(self, first: &Unplaced, all: &str) -> String {
        match self {
            NoNamespace::Flux => format!(
                "{first} and the stack gives it no namespace (no spec.targetNamespace): kustomize-controller's apply fails on it (\"{}/{} namespace not specified\") and Flux prunes nothing, so nothing is an orphan ({all})",
                first.kind, first.name
            ),
            NoNamespace::ArgoCd => format!(
                "{first} and its Application gives it no namespace (no spec.destination.namespace): Argo CD refuses to sync it (\"Namespace for {} {} is missing.\") and prunes nothing, so nothing is an orphan ({all})",
                first.name, first.kind
            ),
            NoNamespace::ArgoCdUnknown => format!(
                "{first}: which Application the stack's name-only tracking id names is not known (none of that name in a namespace holding Argo CD's argocd-cm ConfigMap), so neither is the destination namespace it would take ({all})"
            ),
            NoNamespace::Kapp => format!(
                "{first}: kapp places it in the namespace `kapp deploy -n` was given, which the cluster does not record ({all})"
            ),
        }
    }

    /// What to do about it.
    pub fn hint(self) -> &'static str {
        match self {
            NoNamespace::Flux => "write metadata.namespace in each namespaced manifest (or give the stack a spec.targetNamespace), as Flux needs",
            NoNamespace::ArgoCd => "write metadata.namespace in each namespaced manifest (or give the Application a spec.destination.namespace), as Argo CD needs",
            NoNamespace::ArgoCdUnknown => "write metadata.namespace in each namespaced manifest, or name the stack as NAMESPACE_NAME",
            NoNamespace::Kapp => "give -n as `kapp deploy -n` was given, or write metadata.namespace in each namespaced manifest",
        }
    }
}

/// A namespaced manifest without a namespace where its tool gives it none
/// ([`NamespaceRule::Required`]): the tool's apply fails on it, and it prunes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {kind} {name} has no metadata.namespace")]
pub struct Unplaced {
    /// Where it is written (`file:line` when the file can be read again).
    pub location: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The tool that gives it none.
    pub by: NoNamespace,
}

/// A manifest whose identity the cluster cannot resolve: its kind is not served and no CRD
/// among the manifests defines it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {kind} {name}: kind {kind_with_group} is not served by the cluster and no CRD in the manifests defines it")]
pub struct Unresolved {
    /// Where it is written: `file:line` when the file can be read again, else the manifest's source.
    pub location: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// `Kind.group`.
    pub kind_with_group: String,
}

/// Resolves a manifest's identity: a namespaced object takes its namespace by `rule`, a
/// cluster-scoped one has none.
pub fn resolve(manifest: &Manifest, scopes: &Scopes, rule: NamespaceRule) -> Result<ObjectId, Unresolved> {
    let group = manifest.group();
    match scopes.namespaced(group, &manifest.kind) {
        Some(true) => {
            let namespace = match rule {
                NamespaceRule::Default(default) => manifest.namespace.as_deref().unwrap_or(default),
                NamespaceRule::Target(target) => target,
                // Callers ask [`unplaced`] first.
                NamespaceRule::Required(_) => manifest.namespace.as_deref().unwrap_or_default(),
            };
            Ok(ObjectId::new(group, &manifest.kind, Some(namespace), &manifest.name))
        }
        Some(false) => Ok(ObjectId::new(
            group,
            &manifest.kind,
            None,
            resolved_name(manifest, rule),
        )),
        None => Err(Unresolved {
            location: locate(&manifest.source, &format!("kind: {}", manifest.kind)),
            kind: manifest.kind.clone(),
            name: manifest.name.clone(),
            kind_with_group: crate::model::identity::kind_with_group(&manifest.kind, group),
        }),
    }
}

/// Whether a manifest is namespaced, has no namespace, and its tool gives it none
/// ([`NamespaceRule::Required`]).
pub fn unplaced(manifest: &Manifest, scopes: &Scopes, rule: NamespaceRule) -> Option<Unplaced> {
    let namespaced = scopes.namespaced(manifest.group(), &manifest.kind) == Some(true);
    let written = manifest.namespace.as_deref().is_some_and(|ns| !ns.is_empty());
    let NamespaceRule::Required(by) = rule else {
        return None;
    };
    (namespaced && !written).then(|| Unplaced {
        location: locate(&manifest.source, &format!("name: {}", manifest.name)),
        kind: manifest.kind.clone(),
        name: manifest.name.clone(),
        by,
    })
}

/// The name a manifest's object gets: its own, except a Namespace under a target namespace.
/// kustomize's namespace transformer also renames every `kind: Namespace` (core group) to the
/// kustomization's `namespace:` (kubernetes-sigs/kustomize `api/konfig/builtinpluginconsts/namespace.go`:
/// fieldSpec `path: metadata/name, kind: Namespace, create: true`), and Flux builds with
/// `namespace: <targetNamespace>`: a repository's Namespace `tenant-ns` is applied as the target.
fn resolved_name<'a>(manifest: &'a Manifest, rule: NamespaceRule<'a>) -> &'a str {
    match rule {
        NamespaceRule::Target(target) if manifest.group().is_empty() && manifest.kind == "Namespace" => target,
        _ => &manifest.name,
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
    /// Declared objects that could not be resolved (unknown kinds): reported, never fatal here.
    pub unresolved: Vec<Unresolved>,
    /// Namespaced objects without a namespace that their tool gives none (see [`Unplaced`]): the
    /// tool's apply fails, so the set is refused by its caller.
    pub unplaced: Vec<Unplaced>,
    /// Things worth telling (e.g. a namespace ignored on a cluster-scoped object).
    pub notes: Vec<String>,
    /// Where it came from.
    pub origin: Origin,
    /// What its objects need to exist (their Namespaces, CRDs and `depends-on` references):
    /// kpt prunes none of it ([`Needs`]).
    pub needs: Needs,
    /// The same identities as Flux v1 wrote them, `<namespace>:<kind>/<name>` (no group: see
    /// [`DesiredSet::holds_flux_v1`]).
    flux_v1_ids: HashSet<String>,
    /// The manifests kapp versions, by base name ([`crate::stack::kapp_versions`]).
    pub kapp_versioned: VersionedDesired,
    /// The identities as kustomize-controller reads them back from the inventory it writes of
    /// them (see [`DesiredSet::holds_as_flux`]).
    flux_ids: HashSet<ObjectId>,
    /// The identities kustomize-controller cannot read back from the inventory it writes of them
    /// (an RBAC name holding `_`): its diff of the old and new inventories then fails, and it
    /// prunes nothing.
    pub flux_unreadable: Vec<ObjectId>,
    /// What each desired object's dependency annotations name, for kpt's check of them
    /// ([`rejects::kpt_rejects`]: what they may name includes the inventory's objects).
    pub kpt_dependencies: Vec<(ObjectId, rejects::Dependencies)>,
    /// Why kustomize-controller cannot build the set, if it cannot ([`rejects::flux_rejects`]).
    pub flux_rejects: Option<String>,
}

impl DesiredSet {
    /// Resolves manifests into a desired set, a namespaced manifest without a namespace taking
    /// `default_namespace`.
    pub fn from_manifests(manifests: &[Manifest], scopes: &Scopes, default_namespace: &str, origin: Origin) -> Self {
        Self::resolved(manifests, scopes, NamespaceRule::Default(default_namespace), origin)
    }

    /// Resolves manifests into a desired set, each namespaced manifest taking its namespace by `rule`.
    pub fn resolved(manifests: &[Manifest], scopes: &Scopes, rule: NamespaceRule, origin: Origin) -> Self {
        let mut set = Self {
            ids: HashSet::new(),
            unresolved: Vec::new(),
            unplaced: Vec::new(),
            notes: Vec::new(),
            origin,
            needs: Needs::default(),
            flux_v1_ids: HashSet::new(),
            kapp_versioned: VersionedDesired::default(),
            flux_ids: HashSet::new(),
            flux_unreadable: Vec::new(),
            kpt_dependencies: Vec::new(),
            flux_rejects: None,
        };
        for manifest in manifests {
            if let Some(unplaced) = unplaced(manifest, scopes, rule) {
                set.unplaced.push(unplaced);
                continue;
            }
            match resolve(manifest, scopes, rule) {
                Ok(id) => {
                    let written = manifest.namespace.as_deref();
                    if id.name != manifest.name {
                        set.notes.push(format!(
                            "{id} ({}): Namespace {:?} is renamed to the target namespace, as kustomize's namespace transformer does",
                            manifest.source, manifest.name
                        ));
                    }
                    if id.namespace.is_none() && written.is_some() {
                        set.notes.push(format!(
                            "{id} ({}): cluster-scoped, its namespace {:?} is ignored",
                            manifest.source,
                            written.unwrap_or_default()
                        ));
                    } else if id.namespace.as_deref() != written && written.is_some() {
                        set.notes.push(format!(
                            "{id} ({}): its namespace {:?} is replaced by the target namespace",
                            manifest.source,
                            written.unwrap_or_default()
                        ));
                    }
                    set.needs.add(&id, manifest, scopes.crd_of(&id.group, &id.kind));
                    set.kapp_versioned.add(&id, manifest);
                    if let Some(dependencies) = rejects::dependencies_of(manifest) {
                        set.kpt_dependencies.push((id.clone(), dependencies));
                    }
                    set.insert(id);
                }
                Err(why) => set.unresolved.push(why),
            }
        }
        set.flux_rejects = rejects::flux_rejects(manifests);
        set
    }

    fn insert(&mut self, id: ObjectId) {
        self.flux_v1_ids.insert(flux_v1_id_of(&id));
        match ObjectId::from_flux_inventory_id(&id.to_flux_inventory_id()) {
            Some(read_back) => {
                self.flux_ids.insert(read_back);
            }
            None => self.flux_unreadable.push(id.clone()),
        }
        self.ids.insert(id);
    }

    /// A desired set of already resolved identities (from an inventory).
    pub fn from_ids(ids: impl IntoIterator<Item = ObjectId>, origin: Origin) -> Self {
        let mut set = Self {
            ids: HashSet::new(),
            unresolved: Vec::new(),
            unplaced: Vec::new(),
            notes: Vec::new(),
            origin,
            needs: Needs::default(),
            flux_v1_ids: HashSet::new(),
            kapp_versioned: VersionedDesired::default(),
            flux_ids: HashSet::new(),
            flux_unreadable: Vec::new(),
            kpt_dependencies: Vec::new(),
            flux_rejects: None,
        };
        for id in ids {
            set.insert(id);
        }
        set
    }

    /// Whether the set holds an object of this identity as Flux v1's garbage collector tells
    /// objects apart: by `<namespace>:<kind>/<name>` alone, the kind lowercased and `<cluster>`
    /// for a cluster-scoped object, with no group and no version (fluxcd/flux 1.x
    /// `pkg/cluster/kubernetes/sync.go` `collectGarbage`: a cluster object is kept when
    /// `checksums[resourceID]` has an entry, keyed by `res.ResourceID().String()`;
    /// `pkg/resource/id.go` `MakeID`). A `Certificate` of `cert-manager.io` in git keeps the live
    /// `Certificate` of `certmanager.k8s.io` of the same namespace and name.
    pub fn holds_flux_v1(&self, id: &ObjectId) -> bool {
        self.flux_v1_ids.contains(&flux_v1_id_of(id))
    }

    /// Whether the set holds an object of this identity as kustomize-controller compares: it
    /// writes each applied object into its new inventory as a cli-utils `ObjMetadata` string (`:`
    /// in an RBAC name written `__`) and diffs the old and new inventories as parsed back (`__`
    /// read as `:`: fluxcd/kustomize-controller `internal/inventory/inventory.go` `Diff`,
    /// `ListMetadata`; cli-utils `pkg/object/objmetadata.go` `String`, `ParseObjMetadata`). A
    /// desired ClusterRole `a__b` keeps the live `a:b` (membership review 21, F1a).
    pub fn holds_as_flux(&self, id: &ObjectId) -> bool {
        self.flux_ids.contains(id)
    }

    /// Whether nothing at all is desired.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.unresolved.is_empty()
    }
}

fn flux_v1_id_of(id: &ObjectId) -> String {
    crate::model::trackers::flux_v1_resource_id(id.namespace.as_deref(), &id.kind, &id.name)
}

/// How the API server validates a kind's names (kubernetes `pkg/apis/*/validation`,
/// apimachinery `pkg/api/validation`): most kinds take a DNS-1123 subdomain, Namespaces and
/// Services a DNS-1123 label, RBAC kinds any path segment (`system:controller:x`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NameRule {
    Subdomain,
    Label,
    PathSegment,
}

fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace" | "Service") => NameRule::Label,
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding") => {
            NameRule::PathSegment
        }
        _ => NameRule::Subdomain,
    }
}

/// Whether a text is a DNS-1123 label (a Namespace's name: lower-case alphanumerics and `-`,
/// at most 63, starting and ending alphanumeric).
pub fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let inner_ok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let edge_ok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(inner_ok)
        && bytes.first().is_some_and(edge_ok)
        && bytes.last().is_some_and(edge_ok)
}

fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

fn is_path_segment(text: &str) -> bool {
    !text.is_empty() && text != "." && text != ".." && !text.contains(['/', '%'])
}

/// Why the API server would reject this name for this kind, if it would.
fn invalid_name(group: &str, kind: &str, name: &str) -> Option<&'static str> {
    match name_rule(group, kind) {
        NameRule::Subdomain if !is_dns_subdomain(name) => Some(
            "not a lowercase RFC 1123 subdomain (lower case letters, digits, '-' and '.', starting and ending with a letter or digit)",
        ),
        NameRule::Label if !is_dns_label(name) => Some(
            "not a lowercase RFC 1123 label (at most 63 lower case letters, digits and '-', starting and ending with a letter or digit)",
        ),
        NameRule::PathSegment if !is_path_segment(name) => Some("may not be '.', '..' or contain '/' or '%'"),
        _ => None,
    }
}

/// Refuses (exit 2) a manifest whose name or namespace the API server would reject, naming the
/// file and line: such an identity can never exist, so it cannot stand for the live object it
/// was meant to be (`app-${cluster}-settings`, an unrendered Flux postBuild variable, would
/// make the live `app-prod-settings` an orphan).
pub fn validate_identities(manifests: &[Manifest]) -> Result<(), UserError> {
    for manifest in manifests {
        let name_problem = invalid_name(manifest.group(), &manifest.kind, &manifest.name)
            .map(|why| ("metadata.name", manifest.name.as_str(), why));
        let namespace_problem = manifest
            .namespace
            .as_deref()
            .filter(|ns| !is_dns_label(ns))
            .map(|ns| ("metadata.namespace", ns, "not a lowercase RFC 1123 label"));
        if let Some((field, value, why)) = name_problem.or(namespace_problem) {
            let hint = if value.contains("${") || value.contains("{{") {
                "it holds an unrendered variable: render the manifests first (flux build, kustomize, envsubst, helm template)"
            } else {
                "the API server would reject it: fix the manifest"
            };
            return Err(UserError::usage(format!(
                "{}: {} {value:?}: {field} is {why}",
                locate(&manifest.source, value),
                manifest.kind
            ))
            .hint(hint));
        }
    }
    Ok(())
}

/// `path:line` of `needle` in the document a manifest's source names (`path (document N)...`),
/// or the source itself when the file cannot be read again (stdin, kustomize output).
fn locate(source: &str, needle: &str) -> String {
    let (path, rest) = source.split_once(" (document ").unwrap_or((source, ""));
    let document: usize = rest.split(')').next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let Ok(text) = std::fs::read_to_string(path) else {
        return source.to_string();
    };
    let lines: Vec<&str> = text.lines().collect();
    let start = document_start(&lines, document);
    let line = lines
        .iter()
        .enumerate()
        .skip(start)
        .chain(lines.iter().enumerate())
        .find(|(_, line)| line.contains(needle))
        .map(|(index, _)| index + 1);
    match line {
        Some(line) => format!("{path}:{line}"),
        None => source.to_string(),
    }
}

/// The index of the first line of YAML document `document` (1-based), counting `---` separators.
fn document_start(lines: &[&str], document: usize) -> usize {
    let mut current = 1;
    let mut content_seen = false;
    for (index, line) in lines.iter().enumerate() {
        if line.starts_with("---") {
            if content_seen {
                current += 1;
                content_seen = false;
            }
            if current == document {
                return index;
            }
            continue;
        }
        if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            content_seen = true;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::manifest::parse_text;

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

    /// A Flux Kustomization without a target namespace gives a namespaced object written without
    /// one no namespace: kustomize-controller's apply fails ("namespace not specified", fluxcd/pkg
    /// `ssa/errors.go`), so the object is unplaced, never put in `-n`'s namespace.
    #[test]
    fn a_namespaced_object_without_namespace_is_unplaced_where_flux_gives_none() {
        let manifests = parse_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: web}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n",
            "x.yaml",
        )
        .unwrap();
        let scopes = Scopes::new(None, &manifests);
        let set = DesiredSet::resolved(
            &manifests,
            &scopes,
            NamespaceRule::Required(NoNamespace::Flux),
            Origin::Manifests,
        );
        assert_eq!(set.unplaced.len(), 1);
        assert_eq!(set.unplaced[0].name, "a");
        assert!(set.ids.contains(&ObjectId::new("", "ConfigMap", Some("web"), "b")));
        assert!(set.ids.contains(&ObjectId::new("", "Namespace", None, "web")));
        let defaulted = DesiredSet::resolved(&manifests, &scopes, NamespaceRule::Default("n"), Origin::Manifests);
        assert!(defaulted.unplaced.is_empty());
        assert!(defaulted.ids.contains(&ObjectId::new("", "ConfigMap", Some("n"), "a")));
    }

    #[test]
    fn a_target_namespace_replaces_every_namespaced_objects_namespace() {
        // Flux's targetNamespace: kustomize's namespace transformer overrides a namespace the
        // manifest wrote too, and leaves cluster-scoped objects alone.
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: written, namespace: elsewhere}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\n";
        let manifests = parse_text(text, "target.yaml").unwrap();
        let scopes = Scopes::new(None, &manifests);
        let target = DesiredSet::resolved(&manifests, &scopes, NamespaceRule::Target("t"), Origin::Manifests);
        let expected: HashSet<ObjectId> = [
            ObjectId::new("", "ConfigMap", Some("t"), "plain"),
            ObjectId::new("", "ConfigMap", Some("t"), "written"),
            ObjectId::new("rbac.authorization.k8s.io", "ClusterRole", None, "reader"),
        ]
        .into_iter()
        .collect();
        assert_eq!(target.ids, expected);
        assert!(
            target
                .notes
                .iter()
                .any(|n| n.contains("replaced by the target namespace")),
            "{:?}",
            target.notes
        );
        // The control: without a target, the written namespace stands and `-n` fills the rest.
        let default = DesiredSet::from_manifests(&manifests, &scopes, "n", Origin::Manifests);
        assert!(default
            .ids
            .contains(&ObjectId::new("", "ConfigMap", Some("elsewhere"), "written")));
        assert!(default
            .ids
            .contains(&ObjectId::new("", "ConfigMap", Some("n"), "plain")));
    }

    #[test]
    fn a_target_namespace_renames_every_namespace_object() {
        // kustomize's namespace fieldSpec `metadata/name` of kind Namespace: Flux's
        // targetNamespace renames the repository's Namespace; another group's kind is untouched.
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant-ns}\n---\napiVersion: example.com/v1\nkind: Namespace\nmetadata: {name: other}\n";
        let manifests = parse_text(text, "ns.yaml").unwrap();
        let scopes = Scopes::new(None, &manifests);
        let target = DesiredSet::resolved(&manifests, &scopes, NamespaceRule::Target("t"), Origin::Manifests);
        assert!(
            target.ids.contains(&ObjectId::new("", "Namespace", None, "t")),
            "{:?}",
            target.ids
        );
        assert!(!target.ids.contains(&ObjectId::new("", "Namespace", None, "tenant-ns")));
        assert!(target.notes.iter().any(|n| n.contains("renamed")), "{:?}", target.notes);
        let default = DesiredSet::from_manifests(&manifests, &scopes, "n", Origin::Manifests);
        assert!(default.ids.contains(&ObjectId::new("", "Namespace", None, "tenant-ns")));
    }

    #[test]
    fn an_unresolvable_manifest_is_a_typed_error_with_its_file_and_line() {
        let dir = std::env::temp_dir().join(format!("stack-unresolved-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("widgets.yaml");
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n";
        std::fs::write(&path, text).unwrap();
        let manifests = parse_text(text, &path.display().to_string()).unwrap();
        let catalog = Catalog::new(
            vec![crate::cluster::fixtures::kind("", "ConfigMap", true)],
            vec![],
            crate::cluster::discovery::DiscoverySource::PerGroup,
        );
        let scopes = Scopes::new(Some(&catalog), &manifests);
        let set = DesiredSet::from_manifests(&manifests, &scopes, "n", Origin::Manifests);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(set.ids.len(), 1);
        let unresolved = &set.unresolved[0];
        assert_eq!(unresolved.location, format!("{}:6", path.display()));
        assert_eq!(unresolved.kind_with_group, "Widget.example.com");
        assert_eq!(
            unresolved.to_string(),
            format!(
                "{}:6: Widget w: kind Widget.example.com is not served by the cluster and no CRD in the manifests defines it",
                path.display()
            )
        );
    }

    #[test]
    fn names_the_api_server_would_reject_are_refused_with_file_and_line() {
        let dir = std::env::temp_dir().join(format!("stack-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("app.yaml");
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n---\n# postBuild not run\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-${cluster}-settings\n";
        std::fs::write(&path, text).unwrap();
        let manifests = parse_text(text, &path.display().to_string()).unwrap();
        let err = validate_identities(&manifests).unwrap_err();
        assert_eq!(err.code, crate::error::exit::USAGE);
        assert!(
            err.message.starts_with(&format!("{}:9: ConfigMap", path.display())),
            "{}",
            err.message
        );
        assert!(err.hint.unwrap().contains("unrendered variable"));
        std::fs::remove_dir_all(&dir).unwrap();

        let ok = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: \"system:controller:x\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a.b-c, namespace: web}\n";
        assert!(validate_identities(&parse_text(ok, "ok.yaml").unwrap()).is_ok());
        for bad in [
            "apiVersion: v1\nkind: Service\nmetadata: {name: a.b}\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Upper}\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: a.b}\n",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: a/b}\n",
        ] {
            assert!(
                validate_identities(&parse_text(bad, "bad.yaml").unwrap()).is_err(),
                "{bad}"
            );
        }
    }

    /// Membership review 21, F1a/F1b: kustomize-controller compares identities as it reads its
    /// inventory back: `a__b` is `a:b` for every kind, and a name still holding `_` cannot be read.
    #[test]
    fn flux_compares_names_as_it_reads_its_inventory_back() {
        let role = |name: &str| ObjectId::new("rbac.authorization.k8s.io", "ClusterRole", None, name);
        let set = DesiredSet::from_ids([role("a__b"), role("c_d"), role("e:f")], Origin::Manifests);
        assert!(set.holds_as_flux(&role("a:b")));
        assert!(set.holds_as_flux(&role("e:f")));
        assert!(!set.holds_as_flux(&role("a__b")));
        assert!(!set.ids.contains(&role("a:b")));
        assert_eq!(set.flux_unreadable, [role("c_d")]);
    }
}
