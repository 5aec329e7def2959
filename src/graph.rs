//! The dependency graph of a stack: objects and why one must outlive another.
//!
//! An edge `from -> to` means `from` depends on `to`: `to` is applied first and deleted last.
//! Sources: Flux `spec.dependsOn` (Kustomization, HelmRelease), cli-utils/kpt
//! `config.kubernetes.io/depends-on`, Argo CD sync waves, kapp change groups and rules, and the
//! implicit custom resource -> CRD and namespaced object -> Namespace edges. Membership (an
//! object a Kustomization, HelmRelease or inventory tracks) is kept apart from dependencies.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::identity::ObjectId;
use crate::trackers::{marks, Mark, MarkValue, Preset};

/// kpt / cli-utils explicit dependency annotation.
pub const KPT_DEPENDS_ON: &str = "config.kubernetes.io/depends-on";
/// Argo CD sync wave annotation.
pub const ARGO_SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// kapp change group annotation (also `kapp.k14s.io/change-group.<suffix>`).
pub const KAPP_CHANGE_GROUP: &str = "kapp.k14s.io/change-group";
/// kapp change rule annotation (also `kapp.k14s.io/change-rule.<suffix>`).
pub const KAPP_CHANGE_RULE: &str = "kapp.k14s.io/change-rule";

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
    /// Inferred: a volume depends on its CSI driver (CSIDriver, StorageClass, controller).
    InferredStorageDriver,
    /// Inferred: a PersistentVolumeClaim depends on the PersistentVolume it is bound to.
    InferredVolume,
}

impl EdgeKind {
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
            EdgeKind::InferredStorageDriver => "inferred: storage driver",
            EdgeKind::InferredVolume => "inferred: bound volume",
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
                | EdgeKind::InferredStorageDriver
                | EdgeKind::InferredVolume
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

/// An object as the graph builder needs it.
#[derive(Debug, Clone, Default)]
pub struct NodeInput {
    /// Identity.
    pub id: ObjectId,
    /// UID, when live.
    pub uid: Option<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// `spec.dependsOn` of Flux objects, already resolved.
    pub depends_on: Vec<ObjectId>,
    /// Finalizers (inference: a custom resource's finalizer names its controller).
    pub finalizers: Vec<String>,
    /// The whole object, for the kinds inference reads ([`crate::infer::SPEC_KINDS`]).
    pub body: Option<Value>,
    /// Offline: the folder the manifest was read from, which stands for the Argo CD application
    /// (sync waves) and the stack (inference) when the object carries no tracker's mark.
    pub app: Option<String>,
}

impl NodeInput {
    /// Reads Flux `spec.dependsOn` from a full object body; namespace defaults to the object's own.
    pub fn flux_depends_on(id: &ObjectId, body: &Value) -> Vec<ObjectId> {
        let is_flux = matches!(
            (id.group.as_str(), id.kind.as_str()),
            ("kustomize.toolkit.fluxcd.io", "Kustomization") | ("helm.toolkit.fluxcd.io", "HelmRelease")
        );
        if !is_flux {
            return Vec::new();
        }
        let entries = body
            .pointer("/spec/dependsOn")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        entries
            .iter()
            .filter_map(|entry| {
                // Older Flux versions also accepted plain names.
                let (name, namespace) = match entry {
                    Value::String(name) => (name.as_str(), None),
                    other => (
                        other.get("name")?.as_str()?,
                        other.get("namespace").and_then(Value::as_str),
                    ),
                };
                let namespace = namespace.or(id.namespace.as_deref());
                Some(ObjectId::new(&id.group, &id.kind, namespace, name))
            })
            .collect()
    }
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
    /// Inferred dependencies ([`crate::infer`]): they order, they never pull an object into a
    /// teardown.
    pub inferred: Vec<Edge>,
    /// Memberships (with `--members`).
    pub members: Vec<Membership>,
    /// Tracking objects whose controller leaves their members behind when they are deleted
    /// (see [`orphans_members`]), with why.
    #[serde(skip)]
    pub orphaning: HashMap<usize, String>,
    #[serde(skip)]
    index: HashMap<ObjectId, usize>,
}

impl Graph {
    /// The index of a node by identity.
    pub fn find(&self, id: &ObjectId) -> Option<usize> {
        self.index.get(id).copied()
    }

    fn add(&mut self, id: ObjectId, uid: Option<String>, status: NodeStatus) -> usize {
        if let Some(&existing) = self.index.get(&id) {
            return existing;
        }
        let index = self.nodes.len();
        self.index.insert(id.clone(), index);
        self.nodes.push(Node { id, uid, status });
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
    /// Infer the edges nobody declared ([`crate::infer`]).
    pub infer: bool,
    /// Resource (plural) of each (group, kind), for webhook rules (inference).
    pub plurals: HashMap<(String, String), String>,
}

/// Builds the graph of the selected objects. Explicit dependencies outside the selection become
/// referred-to nodes (status decided later by `mark_referenced`); implicit ones (CRD, Namespace)
/// are kept only when the target is selected.
pub fn build(inputs: &[NodeInput], options: &BuildOptions) -> Graph {
    // Edges are indexed by input position below: one input per identity makes it the node index.
    let inputs = merge_duplicates(inputs);
    let inputs = inputs.as_ref();
    let mut graph = Graph::default();
    for input in inputs {
        graph.add(input.id.clone(), input.uid.clone(), NodeStatus::Selected);
    }
    let mut edges = Vec::new();
    for (from, input) in inputs.iter().enumerate() {
        for target in &input.depends_on {
            edges.push((from, target.clone(), EdgeKind::DependsOn));
        }
        if let Some(list) = input.annotations.get(KPT_DEPENDS_ON) {
            for target in list.split(',').filter_map(ObjectId::from_depends_on_ref) {
                edges.push((from, target, EdgeKind::KptDependsOn));
            }
        }
        implicit_edges(&graph, input, options, from, &mut edges);
    }
    for (from, target, kind) in edges {
        let to = graph.add(target, None, NodeStatus::External);
        if from != to || kind != EdgeKind::Namespace {
            graph.edges.push(Edge { from, to, kind });
        }
    }
    graph.edges.extend(sync_wave_edges(inputs));
    graph.edges.extend(kapp_edges(inputs));
    if options.members {
        graph.members = memberships(inputs);
        graph.orphaning = inputs
            .iter()
            .enumerate()
            .filter_map(|(index, input)| orphans_members(input).map(|why| (index, why)))
            .collect();
    }
    graph.edges.sort_by_key(|e| (e.from, e.to, e.kind));
    graph.edges.dedup();
    if options.infer {
        add_inferred(&mut graph, inputs, options);
    }
    graph
}

/// Adds the inferred edges; one that would close a cycle is dropped with a warning naming it.
fn add_inferred(graph: &mut Graph, inputs: &[NodeInput], options: &BuildOptions) {
    let known = crate::infer::Known {
        crd_names: options.crd_names.clone(),
        plurals: options.plurals.clone(),
    };
    let candidates = crate::infer::candidates(inputs, &known);
    for dropped in crate::infer::add_acyclic(graph, candidates) {
        tracing::warn!(
            "inferred edge {} -> {} ({}) dropped: it would close a dependency cycle with declared ones, which win",
            graph.nodes[dropped.from].id,
            graph.nodes[dropped.to].id,
            dropped.kind.label()
        );
    }
}

/// One input per identity, in first-seen order. A later definition of the same object is merged
/// into the first: its dependencies (Flux `dependsOn`, `depends-on` references) are added, and its
/// labels and annotations fill in what the first does not set (the first wins where both do).
pub fn merge_duplicates(inputs: &[NodeInput]) -> Cow<'_, [NodeInput]> {
    let mut seen = HashSet::with_capacity(inputs.len());
    if inputs.iter().all(|input| seen.insert(&input.id)) {
        return Cow::Borrowed(inputs);
    }
    let mut merged: Vec<NodeInput> = Vec::with_capacity(seen.len());
    let mut position: HashMap<&ObjectId, usize> = HashMap::with_capacity(seen.len());
    for input in inputs {
        match position.get(&input.id) {
            Some(&first) => merge_into(&mut merged[first], input),
            None => {
                position.insert(&input.id, merged.len());
                merged.push(input.clone());
            }
        }
    }
    Cow::Owned(merged)
}

fn merge_into(first: &mut NodeInput, other: &NodeInput) {
    for (key, value) in &other.labels {
        first.labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    for (key, value) in &other.annotations {
        match first.annotations.get_mut(key) {
            Some(existing) if key == KPT_DEPENDS_ON && existing != value => {
                let mut references: Vec<String> = existing.split(',').map(|r| r.trim().to_string()).collect();
                for reference in value.split(',').map(str::trim) {
                    if !references.iter().any(|r| r == reference) {
                        references.push(reference.to_string());
                    }
                }
                *existing = references.join(",");
            }
            Some(_) => {}
            None => {
                first.annotations.insert(key.clone(), value.clone());
            }
        }
    }
    for dependency in &other.depends_on {
        if !first.depends_on.contains(dependency) {
            first.depends_on.push(dependency.clone());
        }
    }
    if first.uid.is_none() {
        first.uid.clone_from(&other.uid);
    }
}

fn implicit_edges(
    graph: &Graph,
    input: &NodeInput,
    options: &BuildOptions,
    from: usize,
    out: &mut Vec<(usize, ObjectId, EdgeKind)>,
) {
    if let Some(namespace) = &input.id.namespace {
        let target = ObjectId::new("", "Namespace", None, namespace);
        if graph.find(&target).is_some() {
            out.push((from, target, EdgeKind::Namespace));
        }
    }
    if let Some(crd) = options.crd_names.get(&(input.id.group.clone(), input.id.kind.clone())) {
        let target = ObjectId::new("apiextensions.k8s.io", "CustomResourceDefinition", None, crd);
        if graph.find(&target).is_some() {
            out.push((from, target, EdgeKind::Crd));
        }
    }
}

/// Argo CD: objects of one app in wave N depend on the objects of the nearest earlier wave
/// (earlier waves follow transitively). No annotation means wave 0.
fn sync_wave_edges(inputs: &[NodeInput]) -> Vec<Edge> {
    let mut by_app: BTreeMap<String, BTreeMap<i64, Vec<usize>>> = BTreeMap::new();
    for (index, input) in inputs.iter().enumerate() {
        let meta = object_meta(input);
        let marked = marks(&meta).into_iter().find(|m| m.preset == Preset::ArgoCd);
        // Offline, git has no Argo CD mark: a folder rendered as one application counts.
        let app = match (marked, &input.app) {
            (Some(mark), _) => format!("app {}", mark.value.name),
            (None, Some(folder)) => format!("folder {folder}"),
            (None, None) => continue,
        };
        let wave = input
            .annotations
            .get(ARGO_SYNC_WAVE)
            .and_then(|w| w.trim().parse::<i64>().ok())
            .unwrap_or(0);
        by_app.entry(app).or_default().entry(wave).or_default().push(index);
    }
    let mut edges = Vec::new();
    for waves in by_app.values() {
        let ordered: Vec<&Vec<usize>> = waves.values().collect();
        for pair in ordered.windows(2) {
            for &from in pair[1] {
                for &to in pair[0] {
                    edges.push(Edge {
                        from,
                        to,
                        kind: EdgeKind::SyncWave,
                    });
                }
            }
        }
    }
    edges
}

/// kapp: `change-rule: "<delete|upsert> <before|after> <deleting|upserting> <group>"`.
/// "delete before deleting G" and "upsert after upserting G" make the object depend on G's
/// members; "delete after deleting G" and "upsert before upserting G" the reverse.
fn kapp_edges(inputs: &[NodeInput]) -> Vec<Edge> {
    let prefixed = |annotations: &BTreeMap<String, String>, key: &str| -> Vec<String> {
        annotations
            .iter()
            .filter(|(k, _)| *k == key || k.starts_with(&format!("{key}.")))
            .map(|(_, v)| v.trim().to_string())
            .collect()
    };
    let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
    for (index, input) in inputs.iter().enumerate() {
        for group in prefixed(&input.annotations, KAPP_CHANGE_GROUP) {
            groups.entry(group).or_default().push(index);
        }
    }
    let mut edges = Vec::new();
    for (index, input) in inputs.iter().enumerate() {
        for rule in prefixed(&input.annotations, KAPP_CHANGE_RULE) {
            let Ok(rule) = KappRule::parse(&rule) else {
                continue;
            };
            // Only a rule between two deletions or two upserts orders the pair; "upsert after
            // deleting G" says nothing about which must outlive the other.
            let object_first = match (rule.action, rule.order, rule.target_action) {
                ("delete", "before", "deleting") | ("upsert", "after", "upserting") => true,
                ("delete", "after", "deleting") | ("upsert", "before", "upserting") => false,
                _ => continue,
            };
            for &other in groups.get(rule.group).map(Vec::as_slice).unwrap_or_default() {
                if other == index {
                    continue;
                }
                let (from, to) = if object_first { (index, other) } else { (other, index) };
                edges.push(Edge {
                    from,
                    to,
                    kind: EdgeKind::KappRule,
                });
            }
        }
    }
    edges
}

/// A kapp change rule: `(upsert|delete) (after|before) (upserting|deleting) GROUP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KappRule<'a> {
    /// `upsert` or `delete`: what happens to the object.
    pub action: &'a str,
    /// `before` or `after`.
    pub order: &'a str,
    /// `upserting` or `deleting`: what happens to the group.
    pub target_action: &'a str,
    /// The change group.
    pub group: &'a str,
}

impl<'a> KappRule<'a> {
    /// Parses a rule as kapp does (`pkg/kapp/diffgraph/change_rule.go`: four pieces separated
    /// by one space, each from its fixed set, and a non-empty group).
    pub fn parse(value: &'a str) -> Result<Self, String> {
        let expected = "expected \"(upsert|delete) (after|before) (upserting|deleting) GROUP\"";
        let pieces: Vec<&str> = value.trim().split(' ').collect();
        let [action, order, target_action, group] = pieces.as_slice() else {
            return Err(format!("{} piece(s), {expected}", pieces.len()));
        };
        let known = matches!(*action, "upsert" | "delete")
            && matches!(*order, "before" | "after")
            && matches!(*target_action, "upserting" | "deleting")
            && !group.is_empty();
        if !known {
            return Err(expected.to_string());
        }
        Ok(Self {
            action,
            order,
            target_action,
            group,
        })
    }
}

/// Parses a `config.kubernetes.io/depends-on` value as cli-utils does
/// (`pkg/object/dependson/strings.go`): references separated by `,`, each
/// `<group>/<kind>/<name>` (cluster-scoped) or `<group>/namespaces/<namespace>/<kind>/<name>`.
pub fn parse_depends_on(value: &str) -> Result<Vec<ObjectId>, String> {
    value
        .split(',')
        .map(|reference| {
            let fields = reference.trim().split('/').count();
            let expected = "expected <group>/<kind>/<name> or <group>/namespaces/<namespace>/<kind>/<name>";
            if fields == 5 && reference.trim().split('/').nth(1) != Some("namespaces") {
                return Err(format!(
                    "reference {:?}: missing \"namespaces\" field, {expected}",
                    reference.trim()
                ));
            }
            ObjectId::from_depends_on_ref(reference).ok_or_else(|| {
                format!(
                    "reference {:?}: {fields} field(s) or an empty kind or name, {expected}",
                    reference.trim()
                )
            })
        })
        .collect()
}

/// What is wrong with an object's dependency annotations (`depends-on`, kapp change rules),
/// each as (annotation, the text it holds, why).
pub fn malformed_annotations(annotations: &BTreeMap<String, String>) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for (key, value) in annotations {
        let problem = if key == KPT_DEPENDS_ON {
            parse_depends_on(value).err()
        } else if key == KAPP_CHANGE_RULE || key.starts_with(&format!("{KAPP_CHANGE_RULE}.")) {
            KappRule::parse(value).err()
        } else {
            None
        };
        if let Some(problem) = problem {
            found.push((key.clone(), value.clone(), problem));
        }
    }
    found
}

pub(crate) fn object_meta(input: &NodeInput) -> kube::core::ObjectMeta {
    kube::core::ObjectMeta {
        labels: Some(input.labels.clone()),
        annotations: Some(input.annotations.clone()),
        ..Default::default()
    }
}

/// A mark with the full identity of the stack it names, as [`owner_mark`] keys tracking objects.
/// Argo CD records an Application outside its control-plane namespace (apps in any namespace) as
/// `<namespace>_<name>`, and one in the control-plane namespace by its name alone (argo-cd
/// `util/argo/argo.go` `AppInstanceName`, v3; `_` occurs in neither a namespace nor a name): the
/// first names the Application in that namespace, the second names one by name only, as the
/// control-plane namespace is not known here. Other marks are unchanged.
pub fn full_mark(mark: Mark) -> Mark {
    if mark.preset != Preset::ArgoCd || mark.value.namespace.is_some() {
        return mark;
    }
    match mark.value.name.split_once('_') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => Mark {
            preset: mark.preset,
            value: MarkValue {
                name: name.to_string(),
                namespace: Some(namespace.to_string()),
            },
        },
        _ => mark,
    }
}

/// Every tracker's mark on an object, each with its stack's full identity ([`full_mark`]).
pub fn full_marks(meta: &kube::core::ObjectMeta) -> Vec<Mark> {
    marks(meta).into_iter().map(full_mark).collect()
}

/// The tracker identity an object stands for when it is a tracking object itself.
pub fn owner_mark(input: &NodeInput) -> Option<(Preset, MarkValue)> {
    let named = |preset| {
        Some((
            preset,
            MarkValue {
                name: input.id.name.clone(),
                namespace: input.id.namespace.clone(),
            },
        ))
    };
    match (input.id.group.as_str(), input.id.kind.as_str()) {
        ("kustomize.toolkit.fluxcd.io", "Kustomization") => named(Preset::Flux),
        ("helm.toolkit.fluxcd.io", "HelmRelease") => named(Preset::FluxHelm),
        // Its full identity (apps in any namespace): see [`full_mark`].
        ("argoproj.io", "Application") => named(Preset::ArgoCd),
        _ => {
            let id_label = |key: &str| {
                input.labels.get(key).map(|id| MarkValue {
                    name: id.clone(),
                    namespace: None,
                })
            };
            id_label("cli-utils.sigs.k8s.io/inventory-id")
                .map(|v| (Preset::Kpt, v))
                .or_else(|| id_label("applyset.kubernetes.io/id").map(|v| (Preset::ApplySet, v)))
        }
    }
}

/// Why a tracking object's controller would leave its members behind when it is deleted, read
/// from its whole object (`body`). A Flux Kustomization deletes its inventory on deletion only
/// when its deletion policy says so: `MirrorPrune` (the default, `spec.deletionPolicy` unset)
/// follows `spec.prune`; `Delete` and `WaitForTermination` delete; `Orphan` (and any other
/// value) leaves them (fluxcd/kustomize-controller `internal/controller/kustomization_controller.go`
/// `finalizerShouldDeleteResources`, v1.x, API `kustomize.toolkit.fluxcd.io/v1`). A HelmRelease
/// has no such field: helm-controller uninstalls its release on deletion unless it is suspended
/// (`reconcileDelete`), which prune lifts; `spec.uninstall.keepHistory` keeps only the release
/// history, and `helm.sh/resource-policy: keep` is a keep marker on the object itself.
pub fn orphans_members(input: &NodeInput) -> Option<String> {
    if (input.id.group.as_str(), input.id.kind.as_str()) != ("kustomize.toolkit.fluxcd.io", "Kustomization") {
        return None;
    }
    let spec = input.body.as_ref()?.get("spec")?;
    let policy = spec
        .get("deletionPolicy")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .unwrap_or("MirrorPrune");
    // `spec.prune` is required by Flux's own CRD schema; a Kustomization without it (a CRD with
    // no schema) states nothing, and its members go as before.
    let prune = spec.get("prune").and_then(Value::as_bool);
    match policy {
        "MirrorPrune" if prune != Some(false) => None,
        "MirrorPrune" => Some(format!("Flux would orphan it: {} has spec.prune=false", input.id)),
        "Delete" | "WaitForTermination" => None,
        other => Some(format!(
            "Flux would orphan it: {} has spec.deletionPolicy={other}",
            input.id
        )),
    }
}

/// Keeps the candidates that are tracking objects themselves or tracked by one of `owners` or of
/// the candidates: the objects `--members` hangs under something.
pub fn tracked_by_any(owners: &[NodeInput], candidates: Vec<NodeInput>) -> Vec<NodeInput> {
    let keys: HashSet<(Preset, MarkValue)> = owners.iter().chain(candidates.iter()).filter_map(owner_mark).collect();
    let names: HashSet<(Preset, String)> = keys.iter().map(|(p, v)| (*p, v.name.clone())).collect();
    candidates
        .into_iter()
        .filter(|input| {
            owner_mark(input).is_some()
                || full_marks(&object_meta(input)).into_iter().any(|m| {
                    keys.contains(&(m.preset, m.value.clone()))
                        || (m.value.namespace.is_none() && names.contains(&(m.preset, m.value.name.clone())))
                })
        })
        .collect()
}

fn memberships(inputs: &[NodeInput]) -> Vec<Membership> {
    let owners: HashMap<(Preset, MarkValue), usize> = inputs
        .iter()
        .enumerate()
        .filter_map(|(index, input)| owner_mark(input).map(|key| (key, index)))
        .collect();
    let mut found = Vec::new();
    for (member, input) in inputs.iter().enumerate() {
        for mark in full_marks(&object_meta(input)) {
            let exact = owners.get(&(mark.preset, mark.value.clone()));
            // A mark that records no namespace (kpt, ApplySet, Argo CD) names its owner by name
            // alone; when owners of that name live in several namespaces it is ambiguous and
            // hangs under none of them.
            let owner = exact.or_else(|| {
                mark.value.namespace.is_none().then(|| {
                    let mut candidates = owners
                        .iter()
                        .filter(|((p, v), _)| *p == mark.preset && v.name == mark.value.name)
                        .map(|(_, i)| i);
                    let first = candidates.next();
                    candidates.next().is_none().then_some(first).flatten()
                })?
            });
            if let Some(&owner) = owner {
                if owner != member {
                    found.push(Membership { owner, member });
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn node(group: &str, kind: &str, ns: Option<&str>, name: &str) -> NodeInput {
        NodeInput {
            id: ObjectId::new(group, kind, ns, name),
            ..Default::default()
        }
    }

    fn ks(name: &str, depends_on: &[(&str, Option<&str>)]) -> NodeInput {
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

    #[test]
    fn flux_depends_on_defaults_to_the_objects_namespace() {
        let graph = build(
            &[
                ks("usage", &[("operator", None), ("infra", Some("other"))]),
                ks("operator", &[]),
            ],
            &BuildOptions::default(),
        );
        let usage = graph
            .find(&ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("flux-system"),
                "usage",
            ))
            .unwrap();
        let operator = graph
            .find(&ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("flux-system"),
                "operator",
            ))
            .unwrap();
        let infra = graph
            .find(&ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("other"),
                "infra",
            ))
            .unwrap();
        assert!(graph.edges.contains(&Edge {
            from: usage,
            to: operator,
            kind: EdgeKind::DependsOn
        }));
        assert!(graph.edges.contains(&Edge {
            from: usage,
            to: infra,
            kind: EdgeKind::DependsOn
        }));
        assert_eq!(graph.nodes[infra].status, NodeStatus::External);
    }

    #[test]
    fn kpt_argo_kapp_and_implicit_edges() {
        let mut pod = node("", "Pod", Some("test"), "pod-a");
        pod.annotations.insert(
            KPT_DEPENDS_ON.into(),
            "/namespaces/test/ConfigMap/cm, apps/namespaces/test/Deployment/d".into(),
        );
        let cm = node("", "ConfigMap", Some("test"), "cm");
        let namespace = node("", "Namespace", None, "test");
        let crd = node(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        );
        let widget = node("example.com", "Widget", Some("test"), "w");
        let mut wave1 = node("", "ConfigMap", Some("test"), "wave1");
        wave1.annotations.insert(
            "argocd.argoproj.io/tracking-id".into(),
            "app:/ConfigMap:test/wave1".into(),
        );
        wave1.annotations.insert(ARGO_SYNC_WAVE.into(), "1".into());
        let mut wave0 = node("", "ConfigMap", Some("test"), "wave0");
        wave0.annotations.insert(
            "argocd.argoproj.io/tracking-id".into(),
            "app:/ConfigMap:test/wave0".into(),
        );
        let mut job = node("batch", "Job", Some("test"), "migrate");
        job.annotations.insert(KAPP_CHANGE_GROUP.into(), "db-migrations".into());
        let mut app = node("apps", "Deployment", Some("test"), "app");
        app.annotations.insert(
            format!("{KAPP_CHANGE_RULE}.0"),
            "upsert after upserting db-migrations".into(),
        );
        let inputs = vec![pod, cm, namespace, crd, widget, wave1, wave0, job, app];
        let mut options = BuildOptions::default();
        options
            .crd_names
            .insert(("example.com".into(), "Widget".into()), "widgets.example.com".into());
        let graph = build(&inputs, &options);
        let has = |from: usize, to: usize, kind| graph.edges.contains(&Edge { from, to, kind });
        assert!(has(0, 1, EdgeKind::KptDependsOn));
        let deployment = graph
            .find(&ObjectId::new("apps", "Deployment", Some("test"), "d"))
            .unwrap();
        assert!(has(0, deployment, EdgeKind::KptDependsOn));
        assert!(has(0, 2, EdgeKind::Namespace) && has(1, 2, EdgeKind::Namespace) && has(4, 2, EdgeKind::Namespace));
        assert!(has(4, 3, EdgeKind::Crd));
        assert!(has(5, 6, EdgeKind::SyncWave));
        assert!(!has(6, 5, EdgeKind::SyncWave));
        assert!(has(8, 7, EdgeKind::KappRule));
    }

    #[test]
    fn duplicates_are_merged_into_one_node_with_every_dependency() {
        // Two files (staging/, prod/) define the same ConfigMap; the second also depends on `b`.
        let mut first = node("", "ConfigMap", Some("t"), "app");
        first
            .annotations
            .insert(KPT_DEPENDS_ON.into(), "/namespaces/t/ConfigMap/a".into());
        first.labels.insert("tier".into(), "first".into());
        let mut second = first.clone();
        second
            .annotations
            .insert(KPT_DEPENDS_ON.into(), "/namespaces/t/ConfigMap/b".into());
        second.labels.insert("tier".into(), "second".into());
        second.labels.insert("extra".into(), "yes".into());
        let inputs = vec![
            first,
            node("", "ConfigMap", Some("t"), "a"),
            second,
            node("", "ConfigMap", Some("t"), "b"),
            node("", "ConfigMap", Some("t"), "a"),
        ];
        let merged = merge_duplicates(&inputs);
        assert_eq!(merged.len(), 3);
        assert_eq!(merged[0].labels["tier"], "first");
        assert_eq!(merged[0].labels["extra"], "yes");
        let graph = build(&inputs, &BuildOptions::default());
        assert_eq!(graph.nodes.len(), 3, "{:?}", graph.nodes);
        let id = |name: &str| graph.find(&ObjectId::new("", "ConfigMap", Some("t"), name)).unwrap();
        let edges: Vec<(usize, usize)> = graph.edges.iter().map(|e| (e.from, e.to)).collect();
        assert_eq!(edges, vec![(id("app"), id("a")), (id("app"), id("b"))]);
        let plan = crate::plan::plan_deletion(&graph, &(0..graph.nodes.len()).collect()).unwrap();
        assert_eq!(plan.waves, vec![vec![id("app")], vec![id("a"), id("b")]]);
    }

    #[test]
    fn kapp_rules_and_depends_on_parse_as_their_tools_do() {
        let rule = KappRule::parse("delete before deleting apps.big.co/db").unwrap();
        assert_eq!(
            (rule.action, rule.order, rule.target_action, rule.group),
            ("delete", "before", "deleting", "apps.big.co/db")
        );
        for bad in [
            "",
            "delete before db",
            "delete  before deleting g",
            "remove before deleting g",
            "delete before deleting g h",
        ] {
            assert!(KappRule::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_depends_on("cert-manager.io/ClusterIssuer/le, apps/namespaces/web/Deployment/api").unwrap(),
            vec![
                ObjectId::new("cert-manager.io", "ClusterIssuer", None, "le"),
                ObjectId::new("apps", "Deployment", Some("web"), "api")
            ]
        );
        let missing = parse_depends_on("apps/web/Deployment/api/x").unwrap_err();
        assert!(missing.contains("missing \"namespaces\" field"), "{missing}");
        for bad in ["", "a,", "apps/Deployment", "apps//x", "a/b/c/d"] {
            assert!(parse_depends_on(bad).is_err(), "{bad:?}");
        }
        let mut annotations = BTreeMap::new();
        annotations.insert(KPT_DEPENDS_ON.to_string(), "/ConfigMap".to_string());
        annotations.insert(format!("{KAPP_CHANGE_RULE}.1"), "upsert after deleting g".to_string());
        annotations.insert(format!("{KAPP_CHANGE_RULE}.2"), "upsert after".to_string());
        let found: Vec<String> = malformed_annotations(&annotations)
            .into_iter()
            .map(|(key, _, _)| key)
            .collect();
        assert_eq!(found, vec![KPT_DEPENDS_ON.to_string(), format!("{KAPP_CHANGE_RULE}.2")]);
    }

    #[test]
    fn argo_cd_applications_of_one_name_in_two_namespaces_keep_their_own_members() {
        let app = |ns: &str| node("argoproj.io", "Application", Some(ns), "shop");
        let member = |name: &str, instance: &str| {
            let mut input = node("", "ConfigMap", Some("web"), name);
            input.annotations.insert(
                "argocd.argoproj.io/tracking-id".into(),
                format!("{instance}:/ConfigMap:web/{name}"),
            );
            input
        };
        let inputs = vec![
            app("team-a"),
            app("team-b"),
            member("of-a", "team-a_shop"),
            member("of-b", "team-b_shop"),
            member("name-only", "shop"),
            node("argoproj.io", "Application", Some("argocd"), "solo"),
            member("of-solo", "solo"),
        ];
        let graph = build(
            &inputs,
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        let mut found: Vec<(usize, usize)> = graph.members.iter().map(|m| (m.owner, m.member)).collect();
        found.sort();
        // `shop` alone could be either Application: it hangs under neither.
        assert_eq!(found, vec![(0, 2), (1, 3), (5, 6)]);
        let team_a = owner_mark(&inputs[0]).unwrap();
        assert_eq!(team_a.1.namespace.as_deref(), Some("team-a"));
        let mark = full_marks(&object_meta(&inputs[2])).remove(0);
        assert_eq!(
            (mark.value.name.as_str(), mark.value.namespace.as_deref()),
            ("shop", Some("team-a"))
        );
    }

    #[test]
    fn members_hang_under_their_tracking_objects() {
        let usage = ks("usage", &[]);
        let mut cm = node("", "ConfigMap", Some("shop"), "settings");
        cm.labels
            .insert("kustomize.toolkit.fluxcd.io/name".into(), "usage".into());
        cm.labels
            .insert("kustomize.toolkit.fluxcd.io/namespace".into(), "flux-system".into());
        let stranger = node("", "ConfigMap", Some("shop"), "stranger");
        let graph = build(
            &[usage, cm, stranger],
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        assert_eq!(graph.members, vec![Membership { owner: 0, member: 1 }]);
    }
}
