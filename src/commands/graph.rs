//! `kubectl stack graph`: the dependency graph, live or from manifests, and its waves.

use std::collections::{HashMap, HashSet};

use futures::{stream, StreamExt};

use crate::cli::{GlobalArgs, GraphArgs, GraphOutput, ListTuning, Order};
use crate::collect::{api_for, collect, list_objects, ListScope, Listed};
use crate::commands::list::{gaps as list_gaps, incomplete, warn_unlisted};
use crate::commands::orphans::read_manifests;
use crate::commands::{list_options, resolve_selection, Session};
use crate::desired::{resolve, Scopes};
use crate::error::{exit, is_forbidden, is_not_found, UserError};
use crate::graph::{build, tracked_by_any, BuildOptions, Graph, NodeInput};
use crate::graph_output;
use crate::identity::ObjectId;
use crate::manifest::Manifest;
use crate::plan::{plan_apply, plan_deletion, Cycle, Plan};
use crate::render;
use crate::retry::with_retries;
use crate::trackers::Selection;

pub use crate::trackers::FLUX_KINDS;

/// Runs `graph`.
pub async fn run(global: &GlobalArgs, args: GraphArgs) -> anyhow::Result<u8> {
    let manifests = read_manifests(&crate::cli::DesiredArgs {
        filenames: args.filenames.clone(),
        kustomize: args.kustomize.clone(),
        ..Default::default()
    })?;
    let infer = !args.no_infer;
    let mut gaps = Vec::new();
    let graph = match manifests {
        Some(manifests) => offline_graph(
            &manifests,
            global.namespace.as_deref().unwrap_or("default"),
            args.members,
            infer,
        )?,
        None => {
            let session = Session::open(global).await?;
            let mut selection = crate::commands::selection(&args.selection)?;
            resolve_selection(&mut selection, &session)?;
            let wanted = (selection.tracker.is_some() || selection.user_selector.is_some()).then_some(selection);
            let live = live_graph_with(&session, wanted, args.members, &args.tuning, infer).await?;
            gaps = live.gaps;
            live.graph
        }
    };
    report_references(&graph);
    let all: HashSet<usize> = graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.status == crate::graph::NodeStatus::Selected)
        .map(|(i, _)| i)
        .collect();
    let planned = match args.order {
        Some(Order::Apply) => plan_apply(&graph, &all),
        _ => plan_deletion(&graph, &all),
    };
    let (plan, cycle) = match planned {
        Ok(plan) => (Some(plan), None),
        Err(cycle) => (None, Some(cycle)),
    };
    render::emit(&render_graph(&graph, &args, plan.as_ref(), cycle.as_ref())?)?;
    if let Some(cycle) = &cycle {
        eprintln!("error: dependency cycle: {}", graph_output::cycle_path(&graph, cycle));
        return Ok(exit::CYCLE);
    }
    incomplete(&gaps)?;
    Ok(exit::OK)
}

fn render_graph(
    graph: &Graph,
    args: &GraphArgs,
    plan: Option<&Plan>,
    cycle: Option<&Cycle>,
) -> Result<String, UserError> {
    Ok(match (args.output, args.order, plan) {
        (GraphOutput::Json, order, _) => render::json(&graph_output::json(graph, order.and(plan), cycle))?,
        (GraphOutput::Tree, Some(_), Some(plan)) => graph_output::waves_table(graph, plan),
        (GraphOutput::Tree, _, _) => graph_output::tree(graph),
        (GraphOutput::Dot, _, _) => graph_output::dot(graph),
        (GraphOutput::Mermaid, _, _) => graph_output::mermaid(graph),
    })
}

fn report_references(graph: &Graph) {
    for node in graph.referenced() {
        match node.status {
            crate::graph::NodeStatus::Missing => tracing::warn!("dependency {} does not exist", node.id),
            _ => tracing::info!("dependency {} is outside the selection", node.id),
        }
    }
}

/// The graph of manifests, with no cluster: scopes from the built-in table, the manifests' CRDs
/// and the `depends-on` references (a reference without `namespaces/` names a cluster-scoped
/// object); a dependency that no manifest declares is marked missing. A malformed `depends-on`
/// or kapp change rule is a usage error naming the file and line.
pub fn offline_graph(manifests: &[Manifest], namespace: &str, members: bool, infer: bool) -> Result<Graph, UserError> {
    check_dependency_annotations(manifests)?;
    let scopes = Scopes::new(None, manifests);
    let cluster_scoped = cluster_scoped_by_reference(manifests);
    let mut crd_names = HashMap::new();
    let mut inputs = Vec::new();
    let mut sources = Vec::new();
    for manifest in manifests {
        let Ok(mut id) = resolve(manifest, &scopes, namespace) else {
            continue;
        };
        if cluster_scoped.contains(&(id.group.clone(), id.kind.clone())) {
            id.namespace = None;
        }
        sources.push(manifest);
        if manifest.kind == "CustomResourceDefinition" {
            if let (Some(group), Some(kind)) = (manifest.str_at("/spec/group"), manifest.str_at("/spec/names/kind")) {
                crd_names.insert((group.to_string(), kind.to_string()), manifest.name.clone());
            }
        }
        let map = |pointer: &str| {
            manifest
                .body
                .pointer(pointer)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default()
        };
        let body = crate::infer::needs_spec(&id.group, &id.kind).then(|| manifest.body.clone());
        inputs.push(NodeInput {
            depends_on: NodeInput::flux_depends_on(&id, &manifest.body),
            id,
            uid: None,
            labels: map("/metadata/labels"),
            annotations: map("/metadata/annotations"),
            finalizers: strings_at(&manifest.body, "/metadata/finalizers"),
            body,
            app: Some(crate::manifest::folder_of(&manifest.source)),
        });
    }
    note_conflicting_duplicates(&inputs.iter().zip(sources).collect::<Vec<_>>());
    let plurals = crd_plurals(manifests);
    let options = BuildOptions {
        members,
        crd_names,
        infer,
        plurals,
    };
    let mut graph = build(&inputs, &options);
    graph.mark_referenced(|_| false);
    Ok(graph)
}

/// Refuses manifests whose `depends-on` or kapp change rules their own tools would reject
/// (cli-utils: "failed to parse object metadata"), naming each file and line.
fn check_dependency_annotations(manifests: &[Manifest]) -> Result<(), UserError> {
    let mut problems = Vec::new();
    for manifest in manifests {
        let annotations: std::collections::BTreeMap<String, String> = manifest
            .body
            .pointer("/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        for (key, value, why) in crate::graph::malformed_annotations(&annotations) {
            problems.push(format!(
                "{}: {} {}: invalid {key} {value:?}: {why}",
                crate::manifest::locate(&manifest.source, &value),
                manifest.kind,
                manifest.name
            ));
        }
    }
    match problems.len() {
        0 => Ok(()),
        _ => Err(UserError::usage(problems.join("\n"))),
    }
}

/// Custom kinds that no manifest's CRD defines but that `depends-on` references name as
/// cluster-scoped (no `namespaces/` segment) and never as namespaced. Offline, nothing else
/// tells their scope: cli-utils writes a reference by the object's real scope.
fn cluster_scoped_by_reference(manifests: &[Manifest]) -> HashSet<(String, String)> {
    let defined: HashSet<(&str, &str)> = manifests
        .iter()
        .filter(|m| m.kind == "CustomResourceDefinition")
        .filter_map(|crd| Some((crd.str_at("/spec/group")?, crd.str_at("/spec/names/kind")?)))
        .collect();
    let mut cluster = HashSet::new();
    let mut namespaced = HashSet::new();
    for manifest in manifests {
        let Some(value) = manifest.annotation(crate::graph::KPT_DEPENDS_ON) else {
            continue;
        };
        for id in crate::graph::parse_depends_on(value).unwrap_or_default() {
            let custom = id.group.contains('.') && !id.group.ends_with(".k8s.io");
            if !custom || defined.contains(&(id.group.as_str(), id.kind.as_str())) {
                continue;
            }
            let key = (id.group.clone(), id.kind.clone());
            if id.namespace.is_some() {
                namespaced.insert(key);
            } else {
                cluster.insert(key);
            }
        }
    }
    cluster.retain(|key| !namespaced.contains(key));
    cluster
}

/// The strings of an array field (missing, or not strings: none).
fn strings_at(body: &serde_json::Value, pointer: &str) -> Vec<String> {
    body.pointer(pointer)
        .and_then(serde_json::Value::as_array)
        .map(|items| items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The resource (plural) of each kind the manifests' CRDs define.
fn crd_plurals(manifests: &[Manifest]) -> HashMap<(String, String), String> {
    manifests
        .iter()
        .filter(|m| m.kind == "CustomResourceDefinition")
        .filter_map(|crd| {
            let group = crd.str_at("/spec/group")?;
            let kind = crd.str_at("/spec/names/kind")?;
            let plural = crd.str_at("/spec/names/plural")?;
            Some(((group.to_string(), kind.to_string()), plural.to_string()))
        })
        .collect()
}

/// Two manifests that define the same object are merged into one node; when they define it
/// differently, says so (which files, and that the first one's labels and annotations win).
/// `defined` pairs each graph input with the manifest it was read from.
fn note_conflicting_duplicates(defined: &[(&NodeInput, &Manifest)]) {
    let mut first: HashMap<&ObjectId, &Manifest> = HashMap::new();
    for (input, manifest) in defined {
        match first.get(&input.id) {
            Some(earlier) if earlier.body != manifest.body => tracing::warn!(
                "{} is defined twice, differently: {} and {}; merged into one node (the dependencies of both; the first one's labels and annotations where they differ)",
                input.id,
                earlier.source,
                manifest.source
            ),
            Some(_) => {}
            None => {
                first.insert(&input.id, manifest);
            }
        }
    }
}

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
    /// What could not be listed for another reason than 403 (`commands::list::gaps`).
    pub gaps: Vec<String>,
}

/// The live graph: Flux Kustomizations and HelmReleases in scope (full objects, for
/// `spec.dependsOn`), plus the selected objects (metadata), plus, with `members`, the objects
/// that hang under a tracking object. Referred-to objects are looked up to tell missing from
/// external.
pub async fn live_graph(
    session: &Session,
    selection: Option<Selection>,
    members: bool,
    tuning: &ListTuning,
) -> Result<LiveGraph, UserError> {
    live_graph_with(session, selection, members, tuning, true).await
}

/// [`live_graph`], with inference on or off (`--no-infer`). With a selection, only the Flux
/// objects it holds are nodes; what they depend on outside it is marked external.
pub async fn live_graph_with(
    session: &Session,
    selection: Option<Selection>,
    members: bool,
    tuning: &ListTuning,
    infer: bool,
) -> Result<LiveGraph, UserError> {
    let mut listed = Vec::new();
    let mut unlisted = Vec::new();
    let mut gaps = Vec::new();
    let explicit = selection.is_some();
    // Only a real choice (a tracker, a selector) narrows the Flux objects shown.
    let narrowed = selection
        .as_ref()
        .is_some_and(|s| s.tracker.is_some() || s.user_selector.is_some());
    if explicit || members {
        let mut selection = selection.unwrap_or_default();
        selection.tracking_objects = members;
        let options = list_options(tuning);
        let collection = collect(
            &session.connection.client,
            &session.catalog,
            &session.scope,
            &selection,
            options,
        )
        .await;
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
    };
    let mut live = graph_of_with(session, listed, &options).await?;
    live.unlisted = unlisted;
    live.gaps = gaps;
    Ok(live)
}

/// The live graph of the given objects plus the Flux objects in scope. With `only_members`,
/// the given objects are kept only when they hang under a tracking object. Inference is on.
pub async fn graph_of(
    session: &Session,
    listed: Vec<Listed>,
    members: bool,
    only_members: bool,
) -> Result<LiveGraph, UserError> {
    let options = LiveOptions {
        members,
        only_members,
        infer: true,
        only_selected: false,
    };
    graph_of_with(session, listed, &options).await
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
}

/// [`graph_of`] with every option.
pub async fn graph_of_with(
    session: &Session,
    listed: Vec<Listed>,
    options: &LiveOptions,
) -> Result<LiveGraph, UserError> {
    let LiveOptions {
        members,
        only_members,
        infer,
        only_selected,
    } = *options;
    let mut flux = flux_objects(session).await?;
    if only_selected {
        let given: HashSet<ObjectId> = listed.iter().map(Listed::id).collect();
        flux.retain(|(object, _)| given.contains(&object.id()));
    }
    let mut objects: HashMap<ObjectId, Listed> = HashMap::new();
    let mut inputs = Vec::new();
    for (object, body) in flux {
        let mut input = input_from_listed(&object);
        input.depends_on = NodeInput::flux_depends_on(&input.id, &body);
        input.body = Some(body); // its deletion policy: see `graph::orphans_members`
        objects.insert(object.id(), object);
        inputs.push(input);
    }
    let tracked: Vec<ObjectId> = listed.iter().map(Listed::id).collect();
    let mut others: Vec<NodeInput> = Vec::new();
    for object in listed {
        if let std::collections::hash_map::Entry::Vacant(slot) = objects.entry(object.id()) {
            others.push(input_from_listed(&object));
            slot.insert(object);
        }
    }
    if only_members {
        others = tracked_by_any(&inputs, others);
        let kept: HashSet<&ObjectId> = inputs.iter().chain(others.iter()).map(|i| &i.id).collect();
        objects.retain(|id, _| kept.contains(id));
    }
    inputs.extend(others);
    for input in &inputs {
        for (key, value, why) in crate::graph::malformed_annotations(&input.annotations) {
            tracing::warn!("{}: {key} {value:?} ignored: {why}", input.id);
        }
    }
    if infer {
        attach_specs(session, &mut inputs).await?;
    }
    let kinds = session.catalog.kinds();
    let crd_names = kinds
        .iter()
        .filter(|k| !k.group.is_empty())
        .map(|k| ((k.group.clone(), k.kind.clone()), format!("{}.{}", k.plural, k.group)))
        .collect();
    let plurals = kinds
        .iter()
        .map(|k| ((k.group.clone(), k.kind.clone()), k.plural.clone()))
        .collect();
    let options = BuildOptions {
        members,
        crd_names,
        infer,
        plurals,
    };
    let mut graph = build(&inputs, &options);
    let existing = existing_references(session, &graph).await;
    graph.mark_referenced(|id| existing.contains(id));
    Ok(LiveGraph {
        graph,
        objects,
        tracked,
        unlisted: Vec::new(),
        gaps: Vec::new(),
    })
}

/// A graph input from listed metadata.
pub fn input_from_listed(object: &Listed) -> NodeInput {
    NodeInput {
        id: object.id(),
        uid: Some(object.uid().to_string()),
        labels: object.meta.labels.clone().unwrap_or_default(),
        annotations: object.meta.annotations.clone().unwrap_or_default(),
        depends_on: Vec::new(),
        finalizers: object.finalizers().to_vec(),
        body: None,
        app: None,
    }
}

/// Reads the whole objects inference needs (webhooks, APIServices, Services, workloads, volumes,
/// StorageClasses): one list per such kind that has nodes, in the session's scope. A kind the
/// user may not list is warned about; its edges are not inferred.
async fn attach_specs(session: &Session, inputs: &mut [NodeInput]) -> Result<(), UserError> {
    let namespace = match &session.scope {
        ListScope::Namespace(ns) => Some(ns.as_str()),
        ListScope::AllNamespaces => None,
    };
    let mut wanted: HashMap<ObjectId, usize> = HashMap::new();
    for (index, input) in inputs.iter().enumerate() {
        if crate::infer::needs_spec(&input.id.group, &input.id.kind) {
            wanted.insert(input.id.clone(), index);
        }
    }
    for (group, kind) in crate::infer::SPEC_KINDS {
        if !wanted.keys().any(|id| id.group == group && id.kind == kind) {
            continue;
        }
        let Some(info) = session.catalog.get(group, kind) else {
            continue;
        };
        let objects = match list_objects(&session.connection.client, info, namespace, None).await {
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
        for object in objects {
            let id = Listed::new(info.clone(), object.metadata.clone()).id();
            if let Some(&index) = wanted.get(&id) {
                let mut body = object.data;
                if let Some(fields) = body.as_object_mut() {
                    fields.insert("apiVersion".into(), info.api_version().into());
                }
                inputs[index].body = Some(body);
            }
        }
    }
    Ok(())
}

/// Every Flux Kustomization and HelmRelease in scope, as whole objects (their spec matters).
/// A kind the user may not list is warned about and left out.
pub async fn flux_objects(session: &Session) -> Result<Vec<(Listed, serde_json::Value)>, UserError> {
    let namespace = match &session.scope {
        ListScope::Namespace(ns) => Some(ns.as_str()),
        ListScope::AllNamespaces => None,
    };
    let mut found = Vec::new();
    for (group, kind) in FLUX_KINDS {
        let Some(info) = session.catalog.get(group, kind) else {
            continue;
        };
        match list_objects(&session.connection.client, info, namespace, None).await {
            Ok(objects) => {
                found.extend(
                    objects
                        .into_iter()
                        .map(|o| (Listed::new(info.clone(), o.metadata), o.data)),
                );
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

async fn existing_references(session: &Session, graph: &Graph) -> HashSet<ObjectId> {
    let references: Vec<ObjectId> = graph.referenced().map(|n| n.id.clone()).collect();
    let found: Vec<Option<ObjectId>> = stream::iter(references)
        .map(|id| async move {
            let kind = session.catalog.get(&id.group, &id.kind)?;
            let api = api_for(&session.connection.client, kind, id.namespace.as_deref());
            match with_retries("get dependency", || api.get_metadata(&id.name)).await {
                Ok(_) => Some(id),
                Err(err) if is_not_found(&err) => None,
                // Cannot tell (e.g. forbidden): do not call it missing.
                Err(_) => Some(id),
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    found.into_iter().flatten().collect()
}
