//! The live dependency graph: the Flux objects in scope (whole, for `spec.dependsOn`), the
//! selected objects (metadata), their members, and the bodies inference needs; referenced objects
//! are looked up to tell missing from external. `graph`, `prune` and `stuck` build on it.

use std::collections::{HashMap, HashSet};

use futures::{stream, StreamExt};

use crate::cluster::collect::{api_for, collect, collect_kinds, collect_where, list_objects, ListOptions, Listed};
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_forbidden, is_not_found, UserError};
use crate::graph::{build, tracked_by_any, BuildOptions, Graph, NodeInput};
use crate::model::identity::ObjectId;
use crate::model::trackers::{Selection, FLUX_KINDS};
use crate::stack::listing::{gaps as list_gaps, warn_unlisted};
use crate::stack::members::Interner;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::sync::Arc;

/// A live graph and the listed objects behind its selected nodes.
pub struct LiveGraph {
    /// The graph.
    pub graph: Graph,
    /// The listed object of each selected node.
    pub objects: HashMap<ObjectId, Listed>,
    /// Every tracked object that was listed, in the graph or not.
    pub tracked: Vec<ObjectId>,
    /// Kinds that could not be listed (`Kind.group`): their objects are not in the graph.
    pub unlisted: Vec<String>,
    /// What could not be listed for another reason than 403 (`listing::gaps`).
    pub gaps: Vec<String>,
    /// The nodes that are in the graph only to be asked what they need while they stay (see
    /// [`LiveOptions::stayers`]), not chosen: none of them dies unless it is found to be a
    /// victim ([`LiveGraph::add_victims`] takes it out of here).
    pub stayers: HashSet<ObjectId>,
    /// What the graph was built from, and how: [`LiveGraph::add_victims`] builds it again.
    inputs: Vec<NodeInput>,
    build_options: BuildOptions,
}

impl LiveGraph {
    /// The plan deletes with `--cascade=orphan` (`on`): a planned owner takes nothing by
    /// ownership, in this graph and in every graph built again from it (see
    /// [`Graph::orphan_dependents`]).
    pub fn set_orphan_dependents(&mut self, on: bool) {
        self.build_options.orphan_dependents = on;
        self.graph.orphan_dependents = on;
    }

    /// Builds the graph again from its inputs, keeping what was read beside it (the records of a
    /// teardown, the victims, with `more_victims`); returns each earlier node's new index.
    async fn rebuild(&mut self, session: &Session, more_victims: &[ObjectId]) -> HashMap<usize, usize> {
        let earlier = std::mem::take(&mut self.graph);
        let mut graph = build(&self.inputs, &self.build_options);
        settle_references(session, &mut graph, &self.objects).await;
        let moved: HashMap<usize, usize> = earlier
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(index, node)| graph.find(&node.id).map(|now| (index, now)))
            .collect();
        // The records a teardown read beside the graph (see `pruning::read_member_records`).
        for (index, record) in earlier.inventories {
            if let Some(&now) = moved.get(&index) {
                graph.inventories.entry(now).or_insert(record);
            }
        }
        graph.victims = earlier
            .victims
            .iter()
            .filter_map(|index| moved.get(index).copied())
            .chain(more_victims.iter().filter_map(|id| graph.find(id)))
            .collect();
        self.graph = graph;
        moved
    }

    /// Drops the stayers that no path of edges ties to what the selection chose (the cluster's
    /// APIServices, other stacks' claims), and what only they refer to: they need nothing of it,
    /// so a graph shown to a person holds only the ones that order or keep something of it.
    pub async fn drop_unrelated_stayers(&mut self, session: &Session) {
        let graph = &self.graph;
        // What the selection chose, not what is in the graph only because something refers to it.
        let chosen = |index: usize| {
            graph.nodes[index].status == crate::graph::NodeStatus::Selected
                && !self.stayers.contains(&graph.nodes[index].id)
        };
        let mut related: HashSet<usize> = (0..graph.nodes.len()).filter(|&i| chosen(i)).collect();
        loop {
            let reached: Vec<usize> = graph
                .all_edges()
                .chain(graph.unordered.iter())
                .filter_map(
                    |edge| match (related.contains(&edge.from), related.contains(&edge.to)) {
                        (true, false) => Some(edge.to),
                        (false, true) => Some(edge.from),
                        _ => None,
                    },
                )
                .collect();
            if reached.is_empty() {
                break;
            }
            related.extend(reached);
        }
        let unrelated: HashSet<ObjectId> = (0..graph.nodes.len())
            .filter(|index| !related.contains(index))
            .map(|index| graph.nodes[index].id.clone())
            .collect();
        if unrelated.is_empty() {
            return;
        }
        self.inputs.retain(|input| !unrelated.contains(&input.id));
        self.objects.retain(|id, _| !unrelated.contains(id));
        self.stayers.retain(|id| !unrelated.contains(id));
        self.rebuild(session, &[]).await;
    }

    /// Makes nodes of cascade victims — what a planned Namespace or CRD would take with it
    /// (`prune::cascade::find_cascades`) — and builds the graph again with them, so that what
    /// they need is inferred by the same rules as for every other node (a custom resource's
    /// finalizer names its operator). They never join a plan; see [`Graph::victims`]. Returns
    /// each earlier node's new index, or `None` when every victim was a node already.
    pub async fn add_victims(
        &mut self,
        session: &Session,
        victims: Vec<Listed>,
    ) -> Result<Option<HashMap<usize, usize>>, UserError> {
        let victim_ids: Vec<ObjectId> = victims.iter().map(Listed::id).collect();
        for id in &victim_ids {
            self.stayers.remove(id);
        }
        let mut fresh: HashMap<ObjectId, Listed> = HashMap::new();
        for victim in victims {
            if !self.objects.contains_key(&victim.id()) {
                fresh.insert(victim.id(), victim);
            }
        }
        if fresh.is_empty() {
            // A node already (an untracked object listed as a stayer): now known to die.
            let marked: Vec<usize> = victim_ids
                .iter()
                .filter_map(|id| self.graph.find(id))
                .filter(|index| !self.graph.victims.contains(index))
                .collect();
            if marked.is_empty() {
                return Ok(None);
            }
            self.graph.victims.extend(marked);
            return Ok(Some((0..self.graph.nodes.len()).map(|i| (i, i)).collect()));
        }
        let mut inputs: Vec<NodeInput> = fresh.values().map(input_from_listed).collect();
        inputs.sort_by(|a, b| a.id.cmp(&b.id));
        if self.build_options.infer {
            attach_specs(session, &mut inputs).await?;
        }
        self.inputs.extend(inputs);
        self.objects.extend(fresh);
        let moved = self.rebuild(session, &victim_ids).await;
        Ok(Some(moved))
    }
}

/// The live graph: Flux Kustomizations and HelmReleases in scope (full objects, for
/// `spec.dependsOn`), plus the selected objects (metadata), plus, with `members`, the objects
/// that hang under a tracking object, with inference on or off (`--no-infer`). Referred-to
/// objects are looked up to tell missing from external. With a selection, only the Flux
/// objects it holds are nodes; what they depend on outside it is marked external.
pub async fn live_graph_with(
    session: &Session,
    selection: Option<Selection>,
    members: bool,
    options: ListOptions,
    infer: bool,
) -> Result<LiveGraph, UserError> {
    live_graph_inner(session, selection, members, options, infer, false).await
}

/// [`live_graph_with`] as a deletion is ordered (`graph --order delete`): with inference, the
/// untracked objects that may need what the selection deletes are nodes too (see
/// [`LiveOptions::stayers`]), as in the graph a prune plans over, so that the waves shown keep an
/// operator found through RBAC alive until what it finalizes is gone.
pub async fn deletion_graph(
    session: &Session,
    selection: Option<Selection>,
    members: bool,
    options: ListOptions,
    infer: bool,
) -> Result<LiveGraph, UserError> {
    live_graph_inner(session, selection, members, options, infer, infer).await
}

/// The live graph a teardown plans over: every tracked object, the tracking objects and their
/// members, and (with inference) the untracked objects that may need what the plan deletes
/// (see [`LiveOptions::stayers`]).
pub async fn planning_graph(session: &Session, options: ListOptions, infer: bool) -> Result<LiveGraph, UserError> {
    live_graph_inner(session, Some(Selection::default()), true, options, infer, infer).await
}

async fn live_graph_inner(
    session: &Session,
    selection: Option<Selection>,
    members: bool,
    options: ListOptions,
    infer: bool,
    stayers: bool,
) -> Result<LiveGraph, UserError> {
    let mut listed = Vec::new();
    let mut unlisted = Vec::new();
    let mut gaps = Vec::new();
    let explicit = selection.is_some();
    // Only a real choice (a tracker, a selector) narrows the Flux objects shown.
    let narrowed = selection
        .as_ref()
        .is_some_and(|s| s.tracker.is_some() || s.user_selector.is_some());
    let mut stayers_listed = None;
    if explicit || members {
        let mut selection = selection.unwrap_or_default();
        selection.tracking_objects = members;
        let client = &session.connection.client;
        let collection = if stayers && infer && selection.server_selector().is_none() {
            // Every kind in scope is listed whole for the selection: the stayers by what they
            // carry (`crate::graph::stayers::list_finalized`'s part in scope) are kept from the same
            // listing, not listed again.
            let (collection, stayers) = collect_with_stayers(session, &selection, options).await;
            stayers_listed = Some(stayers);
            collection
        } else {
            let mut collection = collect(client, &session.catalog, &session.scope, &selection, options).await;
            let relist = |again: Vec<Arc<KindInfo>>| {
                let selection = &selection;
                async move { collect_kinds(client, &again, &session.scope, selection, options).await }
            };
            session.settle_not_served(&mut collection, relist).await;
            collection
        };
        warn_unlisted(&collection, session)?;
        gaps = list_gaps(&collection, session);
        unlisted = collection.failures.iter().map(|f| f.kind.kind_with_group()).collect();
        unlisted.extend(
            session
                .catalog
                .failures
                .iter()
                .map(|f| format!("every kind of {}", f.group_version)),
        );
        listed = collection.objects;
    }
    let options = LiveOptions {
        members,
        only_members: !explicit,
        infer,
        only_selected: narrowed,
        stayers,
    };
    let mut live = graph_of_inner(session, listed, &options, stayers_listed).await?;
    live.unlisted.extend(unlisted);
    live.gaps = gaps;
    Ok(live)
}

/// Lists every kind in the session's scope once, without a label selector (`selection` has
/// none), split into what `selection` matches (as [`collect`] finds it, 404s settled as
/// [`Session::settle_not_served`] settles them) and the other objects that declare a need
/// ([`crate::graph::stayers::declares_a_need`]), each with the listing's failures: the latter is the
/// part in scope of [`crate::graph::stayers::list_finalized`], for [`graph_of_inner`].
pub(crate) async fn collect_with_stayers(
    session: &Session,
    selection: &Selection,
    options: ListOptions,
) -> (crate::cluster::collect::Collection, crate::cluster::collect::Collection) {
    let client = &session.connection.client;
    let kinds: Vec<Arc<KindInfo>> = session.catalog.listable().cloned().collect();
    // Told apart on the metadata as listed (before anything of it is dropped), by UID.
    let selected = std::sync::Mutex::new(HashSet::new());
    let keep = |meta: &kube::core::ObjectMeta| {
        if selection.matches(meta) {
            if let Ok(mut selected) = selected.lock() {
                selected.insert(meta.uid.clone().unwrap_or_default());
            }
            return true;
        }
        crate::graph::stayers::declares_a_need(meta)
    };
    let mut listed = collect_where(client, &kinds, &session.scope, &keep, options).await;
    let relist = |again: Vec<Arc<KindInfo>>| {
        let keep = &keep;
        async move { collect_where(client, &again, &session.scope, keep, options).await }
    };
    session.settle_not_served(&mut listed, relist).await;
    let selected = selected.into_inner().unwrap_or_default();
    let (chosen, others): (Vec<Listed>, Vec<Listed>) = std::mem::take(&mut listed.objects)
        .into_iter()
        .partition(|o| selected.contains(o.uid()));
    let stayers = crate::cluster::collect::Collection {
        objects: others,
        ..listed.clone()
    };
    listed.objects = chosen;
    (listed, stayers)
}

/// How to build a live graph.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveOptions {
    /// Hang members under the objects that track them.
    pub members: bool,
    /// Keep the given objects only when they hang under a tracking object.
    pub only_members: bool,
    /// Infer the edges nobody declared (`--no-infer` turns it off).
    pub infer: bool,
    /// Only the given objects are nodes: the Flux objects in scope that are not among them are
    /// left out (those they depend on show as external).
    pub only_selected: bool,
    /// Also make nodes of the untracked objects that need others to exist and that no stack
    /// names — webhook configurations and APIServices an operator made at run time (as
    /// Kyverno and cert-manager do), volumes, finalized objects: [`crate::graph::stayers`] — so that a
    /// plan keeps what they need while they stay, as the re-check before every wave does.
    pub stayers: bool,
}

/// Lists every object of [`crate::graph::stayers::STAYER_KINDS`], whole (see [`crate::graph::stayers`]). A
/// kind that cannot be listed is a gap the caller reports: what its objects need is unknown.
async fn list_stayers(session: &Session, gaps: &mut Vec<String>) -> crate::graph::stayers::Whole {
    let whole = crate::graph::stayers::list_whole(session).await;
    for unlisted in &whole.unlisted {
        tracing::warn!(
            "cannot list {}: what one of them needs may be deleted ({})",
            unlisted.kind,
            unlisted.why
        );
        gaps.push(unlisted.kind.clone());
    }
    whole
}

/// The finalized stayers not listed yet ([`crate::graph::stayers::list_finalized`]): the objects of
/// every kind in the session's scope, and the custom resources of the tracked CRDs among
/// `objects` in every namespace, that carry a finalizer naming an API group's controller. Tracked
/// or not (made by hand or by a controller), they need that operator for as long as they stay, as
/// the re-check before every wave finds them. A custom kind of a tracked CRD that cannot be listed
/// is a gap the caller reports; another kind the user may not list was reported with the plan's
/// own listing.
async fn finalized_stayers(
    session: &Session,
    objects: &HashMap<ObjectId, Listed>,
    gaps: &mut Vec<String>,
    in_scope: Option<crate::cluster::collect::Collection>,
) -> Vec<Listed> {
    let crds = crate::graph::stayers::tracked_crds(objects.values());
    let everywhere = crate::graph::stayers::kinds_of_crds(session, &crds);
    let of_crds: HashSet<String> = everywhere.iter().map(|k| k.kind_with_group()).collect();
    let found = match in_scope {
        // Listed with the plan's own listing of every kind in scope: only the custom resources
        // of the tracked CRDs elsewhere are left to list.
        Some(mut found) => {
            let elsewhere = crate::graph::stayers::list_finalized(session, &session.scope, false, everywhere).await;
            found.objects.extend(elsewhere.objects);
            found.failures.extend(elsewhere.failures);
            let mut seen = HashSet::new();
            found.objects.retain(|o| seen.insert(o.id()));
            found
        }
        None => crate::graph::stayers::list_finalized(session, &session.scope, true, everywhere).await,
    };
    for failure in &found.failures {
        let kind = failure.kind.kind_with_group();
        if failure.failure == crate::cluster::collect::ListFailure::Forbidden && !of_crds.contains(&kind) {
            continue;
        }
        tracing::warn!(
            "cannot list {kind}: the operator one of them needs may be deleted ({})",
            failure.failure
        );
        gaps.push(kind);
    }
    found
        .objects
        .into_iter()
        .filter(|o| !objects.contains_key(&o.id()))
        .collect()
}

/// The live graph of the given objects plus the Flux objects in scope, built as `options` say;
/// `stayers_listed`: the stayers by what they carry in the session's scope,
/// found by the caller's own listing of every kind there ([`collect_with_stayers`]), so not
/// listed again.
pub(crate) async fn graph_of_inner(
    session: &Session,
    listed: Vec<Listed>,
    options: &LiveOptions,
    stayers_listed: Option<crate::cluster::collect::Collection>,
) -> Result<LiveGraph, UserError> {
    let LiveOptions {
        members,
        only_members,
        infer,
        only_selected,
        stayers,
    } = *options;
    let mut unlisted_stayers = Vec::new();
    let stayers_wanted = stayers;
    let stayers = if stayers && infer {
        list_stayers(session, &mut unlisted_stayers).await
    } else {
        crate::graph::stayers::Whole::default()
    };
    let mut objects: HashMap<ObjectId, Listed> = HashMap::new();
    let mut inputs = stack_inputs(session, &listed, only_selected, &mut objects).await?;
    let tracked: Vec<ObjectId> = listed.iter().map(Listed::id).collect();
    add_listed(listed, only_members, &mut inputs, &mut objects);
    let chosen: HashSet<ObjectId> = objects.keys().cloned().collect();
    let finalized = if stayers_wanted && infer {
        finalized_stayers(session, &objects, &mut unlisted_stayers, stayers_listed).await
    } else {
        Vec::new()
    };
    // A finalized custom resource dies if its CRD or Namespace is deleted (a cascade victim, named
    // and guarded as any other); while they stay, it keeps what it needs.
    let would_die: Vec<ObjectId> = finalized.iter().map(Listed::id).collect();
    add_stayers(&mut inputs, &mut objects, stayers);
    for input in new_nodes(finalized, &mut objects) {
        push_input(&mut inputs, input);
    }
    for input in &inputs {
        for (key, value, why) in crate::graph::malformed_annotations(&input.annotations) {
            tracing::warn!("{}: {key} {value:?} ignored: {why}", input.id);
        }
    }
    if infer {
        attach_specs(session, &mut inputs).await?;
    }
    if stayers_wanted && infer {
        add_backends(session, &mut inputs, &mut objects, &mut unlisted_stayers).await;
    }
    let options = BuildOptions::for_catalog(&session.catalog, members, infer);
    let mut graph = build(&inputs, &options);
    settle_references(session, &mut graph, &objects).await;
    let potential_victims: Vec<usize> = would_die.iter().filter_map(|id| graph.find(id)).collect();
    graph.victims.extend(potential_victims);
    let stayers = objects.keys().filter(|id| !chosen.contains(*id)).cloned().collect();
    Ok(LiveGraph {
        graph,
        objects,
        tracked,
        unlisted: unlisted_stayers,
        gaps: Vec::new(),
        stayers,
        inputs,
        build_options: options,
    })
}

/// The Flux stacks as nodes, with their `dependsOn`, impersonation, unmapped inventory entries
/// and body (their deletion policy: see `graph::orphans_members`); with `only_selected`, only
/// those among `listed`.
async fn stack_inputs(
    session: &Session,
    listed: &[Listed],
    only_selected: bool,
    objects: &mut HashMap<ObjectId, Listed>,
) -> Result<Vec<NodeInput>, UserError> {
    let mut flux = flux_objects(session).await?;
    if only_selected {
        let given: HashSet<ObjectId> = listed.iter().map(Listed::id).collect();
        flux.retain(|(object, _)| given.contains(&object.id()));
    }
    let mut inputs = Vec::new();
    for (object, body) in flux {
        let mut input = input_from_listed(&object);
        input.depends_on = NodeInput::flux_depends_on(&input.id, &body);
        input.impersonation = crate::stack::inventory::impersonation_of(session, &input.id, &body).await;
        input.unmapped = crate::stack::inventory::unmapped_entries(&body, &session.catalog);
        input.body = Some(body);
        objects.insert(object.id(), object);
        inputs.push(input);
    }
    Ok(inputs)
}

/// Adds the listed objects that are no node yet; with `only_members`, only those a stack (a
/// node of `inputs` already) tracks.
fn add_listed(
    listed: Vec<Listed>,
    only_members: bool,
    inputs: &mut Vec<NodeInput>,
    objects: &mut HashMap<ObjectId, Listed>,
) {
    let mut others = new_nodes(listed, objects);
    if only_members {
        others = tracked_by_any(inputs, others);
        let kept: HashSet<&ObjectId> = inputs.iter().chain(others.iter()).map(|i| &i.id).collect();
        objects.retain(|id, _| kept.contains(id));
    }
    inputs.extend(others);
}

/// The nodes of the objects that are none yet, each now in `objects`.
fn new_nodes(listed: Vec<Listed>, objects: &mut HashMap<ObjectId, Listed>) -> Vec<NodeInput> {
    let mut inputs = Vec::new();
    let mut interner = Interner::default();
    for object in listed {
        if let std::collections::hash_map::Entry::Vacant(slot) = objects.entry(object.id()) {
            inputs.push(input_sharing(&object, &mut interner));
            slot.insert(object);
        }
    }
    inputs
}

/// Adds the stayers listed whole ([`crate::graph::stayers::list_whole`]) that are no nodes yet. A stayer
/// that is tracked too is a node already: its body is attached here, as is a CRD's trimmed body
/// ([`crate::graph::stayers::trimmed_crds`], read with the stayers: not read again).
fn add_stayers(
    inputs: &mut Vec<NodeInput>,
    objects: &mut HashMap<ObjectId, Listed>,
    stayers: crate::graph::stayers::Whole,
) {
    let mut bodies: HashMap<ObjectId, serde_json::Value> = stayers.crd_bodies;
    for (object, body) in stayers.objects {
        match objects.entry(object.id()) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                push_input(inputs, crate::graph::stayers::input_of_whole(&object, &body));
                slot.insert(object);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                bodies.insert(object.id(), body);
            }
        }
    }
    for input in inputs.iter_mut().filter(|i| i.body.is_none()) {
        if let Some(body) = bodies.remove(&input.id) {
            input.body = Some(body);
        }
    }
}

/// Adds the untracked Services the webhook configurations and APIServices among `inputs` call,
/// and the workloads those Services select ([`crate::graph::stayers::backends`]), whole: the chain from
/// a staying webhook to the tracked Deployment behind an untracked Service (order review 6, F4).
/// What could not be read is a gap the caller reports.
async fn add_backends(
    session: &Session,
    inputs: &mut Vec<NodeInput>,
    objects: &mut HashMap<ObjectId, Listed>,
    gaps: &mut Vec<String>,
) {
    let found = crate::graph::stayers::backends(session, inputs).await;
    for unlisted in &found.unlisted {
        tracing::warn!(
            "cannot read {}: what a webhook or APIService needs may be deleted ({})",
            unlisted.kind,
            unlisted.why
        );
        gaps.push(unlisted.kind.clone());
    }
    for (object, body) in found.objects {
        if let std::collections::hash_map::Entry::Vacant(slot) = objects.entry(object.id()) {
            push_input(inputs, crate::graph::stayers::input_of_whole(&object, &body));
            slot.insert(object);
        }
    }
}

/// Pushes an input onto the inputs of every tracked object, growing the vector by an eighth
/// when full rather than doubling it: the few stayers, finalized objects and backends added
/// after the tracked objects would otherwise double a vector of 50,000 inputs (issue 30).
fn push_input(inputs: &mut Vec<NodeInput>, input: NodeInput) {
    if inputs.len() == inputs.capacity() {
        inputs.reserve_exact(inputs.len() / 8 + 16);
    }
    inputs.push(input);
}

/// A graph input from listed metadata.
pub fn input_from_listed(object: &Listed) -> NodeInput {
    input_sharing(object, &mut Interner::default())
}

/// [`input_from_listed`], its labels and annotations shared with the inputs `interner` made
/// before that carry the same.
pub fn input_sharing(object: &Listed, interner: &mut Interner) -> NodeInput {
    NodeInput {
        id: object.id(),
        uid: Some(object.uid().to_string()),
        labels: interner.share(object.meta.labels.as_ref()),
        annotations: interner.share(object.meta.annotations.as_ref()),
        depends_on: Vec::new(),
        finalizers: object.finalizers().to_vec(),
        body: None,
        app: None,
        impersonation: Default::default(),
        unmapped: Default::default(),
        owners: object
            .meta
            .owner_references
            .iter()
            .flatten()
            .map(|r| r.uid.clone())
            .collect(),
    }
}

/// Reads the whole objects inference needs (webhooks, APIServices, Services, workloads, volumes,
/// StorageClasses, RBAC, Namespaces; CRDs trimmed to their conversion webhook,
/// [`crate::graph::stayers::trimmed_crds`]): one list per such kind that has nodes without a body, in the session's
/// scope. A kind the user may not list is warned about; its edges are not inferred. The plan and
/// the re-check before every wave read them so (see [`crate::graph::stayers`]).
pub async fn attach_specs(session: &Session, inputs: &mut [NodeInput]) -> Result<(), UserError> {
    let namespace = session.scope.namespace();
    let mut wanted: HashMap<ObjectId, usize> = HashMap::new();
    for (index, input) in inputs.iter().enumerate() {
        if input.body.is_none() && crate::graph::infer::needs_spec(&input.id.group, &input.id.kind) {
            wanted.insert(input.id.clone(), index);
        }
    }
    for (group, kind) in crate::graph::infer::SPEC_KINDS {
        if !wanted.keys().any(|id| id.group == group && id.kind == kind) {
            continue;
        }
        let Some(info) = session.catalog.get(group, kind) else {
            continue;
        };
        let listed = match (group, kind) {
            // Trimmed to what inference reads, as the plan reads them (order review 9, F3).
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                crate::graph::stayers::trimmed_crds(session, info).await
            }
            _ => list_objects(&session.connection.client, info, namespace, None)
                .await
                .map(|objects| {
                    let with_version = |object: kube::api::DynamicObject| {
                        let mut body = object.data;
                        if let Some(fields) = body.as_object_mut() {
                            fields.insert("apiVersion".into(), info.api_version().into());
                        }
                        (Listed::new(info.clone(), object.metadata), body)
                    };
                    objects.into_iter().map(with_version).collect()
                }),
        };
        let objects = match listed {
            Ok(objects) => objects,
            Err(err) if is_forbidden(&err) => {
                tracing::warn!(
                    "not allowed to list {}: the edges they imply are not inferred",
                    info.kind_with_group()
                );
                continue;
            }
            Err(err) => return Err(session.connection.explain(&err)),
        };
        for (object, body) in objects {
            if let Some(&index) = wanted.get(&object.id()) {
                inputs[index].body = Some(body);
            }
        }
    }
    Ok(())
}

/// Every Flux Kustomization and HelmRelease in scope, as whole objects (their spec matters).
/// A kind the user may not list is warned about and left out.
pub async fn flux_objects(session: &Session) -> Result<Vec<(Listed, serde_json::Value)>, UserError> {
    let namespace = session.scope.namespace();
    let mut found = Vec::new();
    for (group, kind) in FLUX_KINDS {
        let Some(info) = session.catalog.get(group, kind) else {
            continue;
        };
        match list_objects(&session.connection.client, info, namespace, None).await {
            Ok(objects) => {
                found.extend(objects.into_iter().map(|mut o| {
                    // A suspended-by annotation counts only where it proves the
                    // suspension is kubectl-stack's (read before managed fields go).
                    crate::stack::suspension::forget_unproven(&mut o.metadata, &o.data);
                    (Listed::new(info.clone(), o.metadata), o.data)
                }));
            }
            Err(err) if is_forbidden(&err) => {
                tracing::warn!(
                    "not allowed to list {}: their dependsOn edges are not shown",
                    info.kind_with_group()
                );
            }
            Err(err) => return Err(session.connection.explain(&err)),
        }
    }
    Ok(found)
}

/// Looks the referenced nodes up: one that does not exist is marked missing; one that does gets
/// the owners its metadata names (it dies with the plan when every one of them does, see
/// [`Graph::dying_by_owners`]), and the owners of every object of `objects` and of those that
/// are no nodes are read up the chain ([`Graph::outside_owners`]). The plan's graph and the
/// re-check's (`prune::recheck::dependents::GraphNow`) are settled by this one function.
pub(crate) async fn settle_references(session: &Session, graph: &mut Graph, objects: &HashMap<ObjectId, Listed>) {
    settle_references_known(session, graph, objects, &HashMap::new()).await;
}

/// [`settle_references`], with the referenced objects `known` already (from a watch at least as
/// fresh as a read made now: `Some(owners)` exists, `None` is gone) not read again.
pub(crate) async fn settle_references_known(
    session: &Session,
    graph: &mut Graph,
    objects: &HashMap<ObjectId, Listed>,
    known: &HashMap<ObjectId, Option<Vec<OwnerReference>>>,
) {
    let existing = existing_references(session, graph, known).await;
    graph.mark_referenced(|id| existing.contains_key(id));
    let mut refs: Vec<(Option<String>, OwnerReference)> = Vec::new();
    for (id, owners) in existing {
        if let Some(index) = graph.find(&id) {
            let uids: Vec<String> = owners.iter().map(|r| r.uid.clone()).collect();
            graph.set_owners(index, &uids);
        }
        refs.extend(owners.into_iter().map(|r| (id.namespace.clone(), r)));
    }
    for object in objects.values() {
        let owners = object.meta.owner_references.iter().flatten().cloned();
        refs.extend(owners.map(|r| (object.meta.namespace.clone(), r)));
    }
    settle_owner_chain(session, graph, refs).await;
}

/// At most this many owners outside the graph are read for one graph; past it, the rest count
/// as live (and a warning says so).
const OWNER_CHAIN_READS: usize = 2000;

/// Reads the owners that are no nodes, up the chain (`refs`: owner references with the
/// namespace of the object that holds them), into [`Graph::outside_owners`]: the garbage
/// collector's all-owners rule then sees through an untracked ReplicaSet between a planned
/// Deployment and a Pod that is a node. An owner that cannot be read (gone, forbidden, another
/// UID now) counts as live.
async fn settle_owner_chain(session: &Session, graph: &mut Graph, refs: Vec<(Option<String>, OwnerReference)>) {
    let node_uids: HashSet<String> = graph.nodes.iter().filter_map(|n| n.uid.clone()).collect();
    // An owner is read once per scope it is referenced from: a dependent in the wrong scope (a
    // cluster-scoped object naming a namespaced owner) must not stand in for a valid one, in
    // whichever order the references come.
    let mut seen: HashSet<(String, Option<String>)> = HashSet::new();
    let mut pending = refs;
    while !pending.is_empty() {
        pending.retain(|(namespace, r)| !node_uids.contains(&r.uid) && seen.insert((r.uid.clone(), namespace.clone())));
        if seen.len() > OWNER_CHAIN_READS {
            tracing::warn!("more than {OWNER_CHAIN_READS} owners outside the graph: the rest count as live");
            pending.truncate(OWNER_CHAIN_READS.saturating_sub(seen.len() - pending.len()));
        }
        let read: Vec<(String, Option<String>, Vec<OwnerReference>)> = stream::iter(std::mem::take(&mut pending))
            .map(|(namespace, owner)| read_owner(session, namespace, owner))
            .buffer_unordered(16)
            .filter_map(|found| async move { found })
            .collect()
            .await;
        for (uid, namespace, owners) in read {
            graph
                .outside_owners
                .insert(uid, owners.iter().map(|r| r.uid.clone()).collect());
            pending.extend(owners.into_iter().map(|r| (namespace.clone(), r)));
        }
    }
}

/// One owner, read by its reference: its UID, namespace and owner references, if it is there
/// with the UID the reference names.
async fn read_owner(
    session: &Session,
    namespace: Option<String>,
    owner: OwnerReference,
) -> Option<(String, Option<String>, Vec<OwnerReference>)> {
    let group = owner.api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = session.catalog.get(group, &owner.kind)?;
    let namespace = namespace.filter(|_| kind.namespaced);
    let api = api_for(&session.connection.client, kind, namespace.as_deref());
    let object = with_retries("get owner", || api.get_metadata(&owner.name)).await.ok()?;
    (object.metadata.uid.as_deref() == Some(owner.uid.as_str())).then(|| {
        let owners = object.metadata.owner_references.unwrap_or_default();
        (owner.uid, namespace, owners)
    })
}

/// The referenced objects that exist (or cannot be told missing), with their owners.
async fn existing_references(
    session: &Session,
    graph: &Graph,
    known: &HashMap<ObjectId, Option<Vec<OwnerReference>>>,
) -> HashMap<ObjectId, Vec<OwnerReference>> {
    let references: Vec<ObjectId> = graph.referenced().map(|n| n.id.clone()).collect();
    let found: Vec<Option<(ObjectId, Vec<OwnerReference>)>> = stream::iter(references)
        .map(|id| async move {
            if let Some(owners) = known.get(&id) {
                return owners.clone().map(|owners| (id, owners));
            }
            let kind = session.catalog.get(&id.group, &id.kind)?;
            let api = api_for(&session.connection.client, kind, id.namespace.as_deref());
            match with_retries("get dependency", || api.get_metadata(&id.name)).await {
                Ok(object) => Some((id, object.metadata.owner_references.unwrap_or_default())),
                Err(err) if is_not_found(&err) => None,
                // Cannot tell (e.g. forbidden): do not call it missing.
                Err(_) => Some((id, Vec::new())),
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    found.into_iter().flatten().collect()
}
