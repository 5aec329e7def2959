//! The dependency graph of a stack: objects and why one must outlive another.
//!
//! An edge `from -> to` means `from` depends on `to`: `to` is applied first and deleted last.
//! Sources: Flux `spec.dependsOn` (Kustomization, HelmRelease), cli-utils/kpt
//! `config.kubernetes.io/depends-on`, Argo CD sync waves, kapp change groups and rules, and the
//! implicit custom resource -> CRD and namespaced object -> Namespace edges. Membership (an
//! object a Kustomization, HelmRelease or inventory tracks) is kept apart from dependencies.
//! [`build`](build()) makes the graph, `declared` parses the annotations people write, and
//! `memberships` finds which tracking object tracks which object.

mod build;
mod declared;
mod memberships;
mod victims;

pub mod infer;
pub(crate) mod live;
pub(crate) mod offline;
pub mod output;
pub mod plan;
pub mod stayers;

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

use serde::Serialize;

use crate::model::identity::ObjectId;

pub use crate::model::annotations::{
    malformed_annotations, parse_depends_on, AnnotationError, KappRule, ARGO_SYNC_WAVE, KAPP_CHANGE_GROUP,
    KAPP_CHANGE_RULE, KPT_DEPENDS_ON,
};
pub(crate) use crate::stack::members::object_meta;
pub use crate::stack::members::{
    argocd_outside_namespaces, flux_acts_elsewhere, flux_controller, flux_inventory_entries, flux_inventory_of,
    full_mark, full_marks, name_only_may_name, orphans_members, owner_mark, service_account_named, tracked_by_any,
    tracker_key, Impersonation, MemberRecord, NodeInput,
};
pub use build::{build, merge_duplicates};
pub use victims::VictimOrder;

/// Why one object depends on another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub enum EdgeKind {
    /// Flux `spec.dependsOn`.
    DependsOn,
    /// cli-utils / kpt `config.kubernetes.io/depends-on`.
    KptDependsOn,
    /// Argo CD: a later sync wave depends on the earlier one.
    SyncWave,
    /// kapp change rule.
    KappRule,
    /// A custom resource depends on its CRD.
    Crd,
    /// A namespaced object depends on its Namespace.
    Namespace,
    /// Inferred: a custom resource depends on the controller behind its finalizer.
    InferredFinalizer,
    /// Inferred: a webhook configuration depends on the Service that serves it and its workloads.
    InferredWebhook,
    /// Inferred: an object a failing webhook intercepts (UPDATE, DELETE) depends on that webhook.
    InferredWebhookRule,
    /// Inferred: an APIService depends on the Service that serves it and its workloads.
    InferredApiService,
    /// Inferred: an object of an aggregated API depends on the APIService that serves it.
    InferredAggregatedApi,
    /// Inferred: a PersistentVolumeClaim or PersistentVolume depends on the StorageClass its
    /// `spec.storageClassName` names.
    InferredStorageClass,
    /// Inferred: a volume depends on its CSI driver (CSIDriver, StorageClass, controller).
    InferredStorageDriver,
    /// Inferred: a PersistentVolumeClaim depends on the PersistentVolume it is bound to.
    InferredVolume,
    /// Inferred: a webhook's or APIService's backend workload depends on what it runs with (its
    /// ServiceAccount, that account's bindings and their roles, the Secrets and ConfigMaps it
    /// mounts); an aggregated ClusterRole depends on the ClusterRoles its `aggregationRule`
    /// selects.
    InferredRunsWith,
}

impl EdgeKind {
    /// Whether the dependent needs the dependency while it exists, so that what stays keeps
    /// it: every edge but a webhook rule's (an object a webhook intercepts goes before the
    /// webhook, but does not need it to exist).
    pub fn is_need(self) -> bool {
        !matches!(self, EdgeKind::InferredWebhookRule)
    }

    /// A short label for rendering.
    pub fn label(self) -> &'static str {
        match self {
            EdgeKind::DependsOn => "dependsOn",
            EdgeKind::KptDependsOn => "depends-on",
            EdgeKind::SyncWave => "sync-wave",
            EdgeKind::KappRule => "change-rule",
            EdgeKind::Crd => "crd",
            EdgeKind::Namespace => "namespace",
            EdgeKind::InferredFinalizer => "inferred: finalizer",
            EdgeKind::InferredWebhook => "inferred: webhook backend",
            EdgeKind::InferredWebhookRule => "inferred: webhook rule",
            EdgeKind::InferredApiService => "inferred: apiservice backend",
            EdgeKind::InferredAggregatedApi => "inferred: aggregated api",
            EdgeKind::InferredStorageClass => "inferred: storage class",
            EdgeKind::InferredStorageDriver => "inferred: storage driver",
            EdgeKind::InferredVolume => "inferred: bound volume",
            EdgeKind::InferredRunsWith => "inferred: runs with",
        }
    }

    /// Whether the edge was inferred (it orders, it never pulls an object into a teardown).
    pub fn is_inferred(self) -> bool {
        matches!(
            self,
            EdgeKind::InferredFinalizer
                | EdgeKind::InferredWebhook
                | EdgeKind::InferredWebhookRule
                | EdgeKind::InferredApiService
                | EdgeKind::InferredAggregatedApi
                | EdgeKind::InferredStorageClass
                | EdgeKind::InferredStorageDriver
                | EdgeKind::InferredVolume
                | EdgeKind::InferredRunsWith
        )
    }
}

/// Whether a node is part of the selection, or only referred to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeStatus {
    /// In the selection.
    Selected,
    /// Referred to, exists, but outside the selection.
    External,
    /// Referred to, and does not exist.
    Missing,
}

/// A node of the graph.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    /// Identity.
    pub id: ObjectId,
    /// UID, when live and present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Selected, external or missing.
    pub status: NodeStatus,
}

/// A dependency: `from` depends on `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Edge {
    /// The dependent (index into nodes).
    pub from: usize,
    /// The dependency.
    pub to: usize,
    /// Why.
    pub kind: EdgeKind,
}

/// `owner` (a Kustomization, HelmRelease or inventory) tracks `member`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Membership {
    /// The tracking object.
    pub owner: usize,
    /// The tracked object.
    pub member: usize,
}

/// The dependency graph.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Graph {
    /// Nodes: selected first, then referred-to ones.
    pub nodes: Vec<Node>,
    /// Dependencies: declared, and implicit (CRD, Namespace).
    pub edges: Vec<Edge>,
    /// Inferred dependencies ([`crate::graph::infer`]): they order, they never pull an object into a
    /// teardown.
    pub inferred: Vec<Edge>,
    /// Inferred needs that order nothing: each would close a cycle with declared edges, which
    /// win the order ([`crate::graph::infer::add_acyclic`]). They still keep: what stays keeps what it
    /// needs whether or not the need can order a plan (a webhook of a stack that depends on
    /// its backend's stack).
    pub unordered: Vec<Edge>,
    /// Memberships (with `--members`).
    pub members: Vec<Membership>,
    /// Tracking objects whose controller leaves their members behind when they are deleted
    /// (see [`orphans_members`]), with why.
    #[serde(skip)]
    pub orphaning: HashMap<usize, String>,
    /// Tracking objects whose deletion alone deletes none of their members (see
    /// [`memberships::deletes_nothing_itself`]), with why: only a teardown that names them
    /// tears their members down (as their tool's destroy would); deleted as a member of
    /// another stack, they leave their members.
    #[serde(skip)]
    pub inert: HashMap<usize, String>,
    /// What each tracking object's tool records as its members (a Flux Kustomization's
    /// `status.inventory`, see [`flux_inventory_of`]; a teardown adds the records of its other
    /// stacks, read with [`crate::stack::inventory::record_of`]): on deletion, that tool deletes only
    /// these objects.
    #[serde(skip)]
    pub inventories: HashMap<usize, MemberRecord>,
    /// The cascade victims among the nodes: objects a planned Namespace or CRD would take with
    /// it although no plan deletes them (a prune makes them nodes once found, see
    /// [`crate::graph::live::LiveGraph::add_victims`]). Each dies when a planned Namespace or CRD it
    /// lives in is deleted and stays otherwise ([`Graph::dying_victims`]); what it needs orders
    /// that holder ([`Graph::victim_orders`]).
    #[serde(skip)]
    pub victims: HashSet<usize>,
    /// The owners of each node that has any (`metadata.ownerReferences`, by UID): the owner's
    /// node, or the UID of an owner that is no node.
    #[serde(skip)]
    pub owners: HashMap<usize, Vec<Owner>>,
    /// The owners (UIDs) of the objects that are no nodes but own a node, up the chain (a
    /// ReplicaSet between a planned Deployment and a Pod that is a node): read beside the graph
    /// ([`crate::graph::live`]), so that the garbage collector's all-owners rule sees through them. An
    /// owner that is no node and not here counts as live.
    #[serde(skip)]
    pub outside_owners: HashMap<String, Vec<String>>,
    /// The plan deletes with `--cascade=orphan` (propagation policy `Orphan`): the garbage
    /// collector removes a planned owner's reference from its dependents instead of deleting
    /// them, so a planned owner takes nothing by ownership ([`Graph::dying_by_owners`]); what
    /// it owns stays, and keeps what it needs. A Namespace or CRD still takes its content.
    #[serde(skip)]
    pub orphan_dependents: bool,
    /// Each node's index, found by hashing its identity where it lies in `nodes`: no second
    /// copy of every identity (issue 30: a plan of 50,000 objects held one more per object).
    #[serde(skip)]
    index: hashbrown::HashTable<usize>,
    #[serde(skip)]
    hasher: std::hash::RandomState,
}

/// An owner of a node (see [`Graph::owners`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A node of the graph.
    Node(usize),
    /// An object that is no node, by UID (see [`Graph::outside_owners`]).
    Outside(String),
}

impl Graph {
    /// The index of a node by identity.
    pub fn find(&self, id: &ObjectId) -> Option<usize> {
        let hash = self.hasher.hash_one(id);
        self.index.find(hash, |&index| self.nodes[index].id == *id).copied()
    }

    fn add(&mut self, id: ObjectId, uid: Option<String>, status: NodeStatus) -> usize {
        if let Some(existing) = self.find(&id) {
            return existing;
        }
        let index = self.nodes.len();
        let Graph {
            nodes,
            index: table,
            hasher,
            ..
        } = self;
        table.insert_unique(hasher.hash_one(&id), index, |&other| hasher.hash_one(&nodes[other].id));
        nodes.push(Node { id, uid, status });
        index
    }

    /// Marks referred-to nodes as missing or external, as `exists` says.
    pub fn mark_referenced(&mut self, exists: impl Fn(&ObjectId) -> bool) {
        for node in self.nodes.iter_mut().filter(|n| n.status != NodeStatus::Selected) {
            node.status = if exists(&node.id) {
                NodeStatus::External
            } else {
                NodeStatus::Missing
            };
        }
    }

    /// Nodes referred to but not selected.
    pub fn referenced(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.status != NodeStatus::Selected)
    }

    /// Every dependency, declared and inferred.
    pub fn all_edges(&self) -> impl Iterator<Item = &Edge> {
        self.edges.iter().chain(self.inferred.iter())
    }

    /// Every need (what the keep rules read): the needs among [`Graph::all_edges`] and the
    /// inferred needs that order nothing ([`Graph::unordered`]).
    pub fn needs(&self) -> impl Iterator<Item = &Edge> {
        self.all_edges()
            .chain(self.unordered.iter())
            .filter(|e| e.kind.is_need())
    }

    /// Why an object goes before others in a plan only because of inferred edges: the first of
    /// its inferred dependencies among `planned`, e.g. `before Deployment.apps/op/ctl (inferred:
    /// finalizer)`, with how many more there are.
    pub fn inferred_reason(&self, index: usize, planned: &HashSet<usize>) -> Option<String> {
        let mut found: Vec<&Edge> = self
            .inferred
            .iter()
            .filter(|e| e.from == index && planned.contains(&e.to))
            .collect();
        found.sort_by(|a, b| self.nodes[a.to].id.cmp(&self.nodes[b.to].id));
        let first = found.first()?;
        let more = match found.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        Some(format!(
            "before {} ({}){more}",
            self.nodes[first.to].id,
            first.kind.label()
        ))
    }

    /// The members of a node (with `--members`).
    pub fn members_of(&self, owner: usize) -> Vec<usize> {
        self.members
            .iter()
            .filter(|m| m.owner == owner)
            .map(|m| m.member)
            .collect()
    }
}

/// How to build the graph.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Attach members to the objects that track them.
    pub members: bool,
    /// CRD object name (`plural.group`) of each custom (group, kind), for the implicit CR -> CRD edge.
    pub crd_names: HashMap<(String, String), String>,
    /// Infer the edges nobody declared ([`crate::graph::infer`]).
    pub infer: bool,
    /// Resource (plural) of each (group, kind), for webhook rules (inference).
    pub plurals: HashMap<(String, String), String>,
    /// The plan deletes with `--cascade=orphan`: see [`Graph::orphan_dependents`].
    pub orphan_dependents: bool,
}

impl BuildOptions {
    /// The options of every live graph — the planning graph, `graph`, and the re-check's look
    /// for new dependents alike: the CRD name and the plural of every kind the catalog serves
    /// (a custom resource's edge to its CRD, its finalizer's to its operator, a webhook rule's
    /// resources), with members and inference as asked.
    pub fn for_catalog(catalog: &crate::cluster::discovery::Catalog, members: bool, infer: bool) -> Self {
        let kinds = catalog.kinds();
        Self {
            members,
            crd_names: kinds
                .iter()
                .filter(|k| !k.group.is_empty())
                .map(|k| ((k.group.clone(), k.kind.clone()), k.crd_name()))
                .collect(),
            infer,
            plurals: kinds
                .iter()
                .map(|k| ((k.group.clone(), k.kind.clone()), k.plural.clone()))
                .collect(),
            orphan_dependents: false,
        }
    }
}

#[cfg(test)]
pub(crate) mod test_inputs {
    //! Graph inputs for the graph modules' tests.
    use super::*;

    pub fn node(group: &str, kind: &str, ns: Option<&str>, name: &str) -> NodeInput {
        NodeInput {
            id: ObjectId::new(group, kind, ns, name),
            ..Default::default()
        }
    }

    pub fn ks(name: &str, depends_on: &[(&str, Option<&str>)]) -> NodeInput {
        let mut input = node(
            "kustomize.toolkit.fluxcd.io",
            "Kustomization",
            Some("flux-system"),
            name,
        );
        let body = serde_json::json!({"spec": {"dependsOn": depends_on.iter().map(|(n, ns)| match ns {
            Some(ns) => serde_json::json!({"name": n, "namespace": ns}),
            None => serde_json::json!({"name": n}),
        }).collect::<Vec<_>>()}});
        input.depends_on = NodeInput::flux_depends_on(&input.id, &body);
        input
    }
}
