//! Issue 29: safety invariants over generated worlds (see `world/mod.rs`), checked against
//! reference oracles written apart from the production code (`world/oracle.rs`).
//!
//! Entry points: the teardown of a stack of every tracker that has one (Flux Kustomization,
//! Flux HelmRelease, kpt inventory, ApplySet parent, Argo CD Application — or a copy of an
//! ApplySet parent, which names no stack); an orphan prune of a stack of every tracker
//! (`--tracker PRESET=VALUE` with its record, if its tool keeps one, and a new desired set),
//! kapp apps and Flux v1 sync sets included (stacks of their own, orphans only) — the desired
//! set is the documents `-f` would read (objects missing, renamed, moved to the other
//! namespace, and a document of a kind the cluster does not serve), parsed by
//! `manifest::parse_text` and resolved through the catalog by `DesiredSet::resolved` as
//! `orphans::resolve_manifests` does, and refused as a whole when a document cannot be resolved
//! (`orphans::refuse_unresolved`) unless the world says `--allow-unresolved`; the re-check
//! before each wave of a teardown on a world changed between two waves (`world/recheck.rs`); and
//! a rerun on the world the first plan leaves. Each is planned with [`plan`] over the graph
//! production builds. The glue production runs against a cluster is emulated here, narrowly:
//! `live::planning_graph` (the tracked objects and the stayers: webhook configurations,
//! APIServices and claims, read whole with the other kinds inference reads, the untracked objects
//! that declare a need, and the Services the webhooks and APIServices call with what those
//! select), `pruning::teardown_planning` (the
//! closure; `read_member_records`: each torn-down stack's record bounds its members),
//! `pruning::plan_with_cascades` (what planned Namespaces and CRDs take, judged by
//! [`cascade_of`], becomes nodes, and the plan is made again), `orphans::find` with a named
//! tracker ([`classify`] against that stack's record) and `recheck::Recheck::judge`.
//!
//! Invariants, for every world and entry point:
//! 1. nothing deleted that the oracles keep (a teardown deletes only what every tool marking
//!    it would delete itself, of stacks torn down; an orphan only what its tool would prune,
//!    the desired set read by full identity: a renamed or moved object is pruned under its old
//!    identity, a document of an unserved kind keeps nothing; a desired set with such a document
//!    deletes nothing unless `--allow-unresolved`);
//!    after a change between waves, the waves after it delete nothing the oracles keep in the
//!    changed world (a keep marker added, a Flux policy flipped to `Orphan` or `prune: false`,
//!    an object re-marked or given a second mark);
//! 2. every object that dies without being planned (a Namespace's or CRD's cascade), unless it
//!    goes with all its owners anyway, is named as a victim;
//! 3. waves respect every edge of the graph among what is deleted, and the needs the oracle
//!    reads apart (`oracle_needs`: a custom resource before its operator, a webhook
//!    configuration or an APIService before its backend Service and the operator behind it, a
//!    claim before its StorageClass) order what dies;
//! 4. nothing that stays loses what it needs (its depends-on target, its operator, its webhook's
//!    or APIService's backend Service and the operator behind it, its claim's StorageClass);
//! 5. a rerun on the world after the plan plans nothing the first run kept.
//!
//! A failing case prints the shrunk world as YAML, to replay against a test cluster. The
//! mutants that each invariant catches are in `world/MUTANTS.md` (`scripts/mutants.sh`).
//!
//! Findings, each fixed and checked in the default run:
//! - F1 (fixed, always checked): an orphan prune under `--tracker PRESET=VALUE` with that stack's
//!   record deleted an object another stack or tool marks too; the keep chain's "other stacks"
//!   rule (`keep::marked_elsewhere`) keeps it now;
//! - F2 (fixed, always checked): a teardown's graph held tracked objects and stayers only: an
//!   untracked object lost what it depends on (`config.kubernetes.io/depends-on`) or the operator
//!   its finalizer names; an untracked object that declares a need is a stayer now
//!   (`stayers::declares_a_need`, listed by `stayers::list_finalized`);
//! - F3 (fixed, always checked): a need that died with a planned owner through an owner chain of
//!   untracked objects (a ReplicaSet between a Deployment and a Pod) was lost; the graph reads
//!   the owners that are no nodes (`Graph::outside_owners`) and keeps the planned owner;
//! - F4 (fixed, always checked): the same gap for webhooks: a teardown's graph listed every
//!   webhook configuration (a stayer) but not the untracked Service it calls, so the tracked
//!   operator Deployment behind that Service was deleted while the webhook (`failurePolicy:
//!   Fail`) stayed; the Services stayers call, and what they select, are nodes now
//!   (`stayers::backends`);
//! - F5 (fixed, always checked): `--tracker flux-v1=SET` deleted an operator whose custom
//!   resource stays with its finalizer: each Flux v1 gc mark hashes the object's own id, so
//!   inference put the operator and its CRD in no common stack; gc-marked objects are one stack
//!   for inference now (`infer::stack_keys`).
//!
//! Found with random seeds (`WORLD_CASES=8192`, no `PROPTEST_RNG_SEED`) on 2026-12-02, each
//! fixed in the shared model and replayed first from `world_props.proptest-regressions`:
//! - F6: a webhook kept by its stack's unreadable record lost its backend: the inferred need
//!   closed a cycle with the declared order (`dependsOn` between the two stacks) and was dropped
//!   from the graph; it now keeps, ordering nothing (`Graph::unordered`, `Graph::needs`);
//! - F7: an operator with a legacy `flux.weave.works/stack` label beside its gc mark fell out
//!   of the gc-marked stack (`infer::stack_keys`);
//! - F8: an object died by one route while the plan ordered only another (a planned owner of
//!   a planned owner; a victim its planned owners take too; a referenced object in a planned
//!   Namespace): every route takes it now (`graph::victims`, referenced nodes' Namespace edges);
//! - F9: a teardown member relabelled since the plan by a stack the run had already deleted was
//!   deleted by the re-check (`recheck::marks_changed`, one rule for orphans and teardowns);
//! - F10: needs no order of waves can satisfy (two victims' needs that cross, a declared order
//!   against an inferred need) were dropped silently; the plan now tells them before asking,
//!   and invariant 3 accepts a violated need only when the plan told it.
//!
//! Not emulated: new dependents and contents in the re-check (`Recheck::judge_dependents`,
//! `judge_content`, `judge_owned`), `--keep-cascading`, orphans under `-l` alone
//! (`orphans::classify_by_recorded_stack` reads records through the API), Helm revision choice
//! (the record of a HelmRelease here is what its latest and its last deployed revision both
//! hold), PersistentVolumes, `--allow-empty` (an empty desired set is compared, as with the
//! flag) and the named stack's namespace rule (`StackRecord::namespace_rule`: every namespaced
//! document here writes its namespace, so no rule changes what it resolves to).

mod world;

use kube::core::ObjectMeta;
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};

use kubectl_stack::cluster::collect::{Collection, Listed};
use kubectl_stack::cluster::discovery::{Catalog, DiscoverySource, KindInfo};
use kubectl_stack::graph::infer::SPEC_KINDS;
use kubectl_stack::graph::infer::{service_selects, services_called};
use kubectl_stack::graph::stayers::{declares_a_need, is_stayer_kind};
use kubectl_stack::graph::tracker_key;
use kubectl_stack::graph::{build, BuildOptions, Graph, MemberRecord, NodeInput};
use kubectl_stack::model::identity::ObjectId;
use kubectl_stack::model::trackers::{is_tracked, Mark, MarkValue, Preset, Tracker};
use kubectl_stack::prune::cascade::{cascade_of, is_holder, Planned};
use kubectl_stack::prune::teardown::{members_of_gone, plan, teardown_closure, Kept, Mode, PrunePlan, Snapshot};
use kubectl_stack::stack::classify::{classify, Desired, Recorded, Verdict};
use kubectl_stack::stack::desired::{DesiredSet, NamespaceRule, Origin, Scopes};
use kubectl_stack::stack::keep::{ComparedStack, KeepReason};
use kubectl_stack::stack::manifest::parse_text;

use world::oracle::{self, Death};
use world::{stack_name, Entry, Tool, World, APP, CRD, FLUX, FLUX_HR, FLUX_NS, OPS};

fn kind(group: &str, kind: &str, namespaced: bool) -> KindInfo {
    KindInfo {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
        singular: kind.to_lowercase(),
        short_names: vec![],
        namespaced,
        verbs: vec!["list".into(), "delete".into()],
    }
}

fn catalog() -> Catalog {
    Catalog::new(
        vec![
            kind("", "ConfigMap", true),
            kind("", "Secret", true),
            kind("", "Namespace", false),
            kind(FLUX, "Kustomization", true),
            kind(FLUX_HR, "HelmRelease", true),
            kind("kpt.dev", "ResourceGroup", true),
            kind("apps", "Deployment", true),
            kind(CRD, "CustomResourceDefinition", false),
            kind(OPS, "Gizmo", true),
            kind(world::ARGO, "Application", true),
            kind(world::ADMISSION, "ValidatingWebhookConfiguration", false),
            kind("", "Service", true),
            kind("", "PersistentVolumeClaim", true),
            kind(world::STORAGE, "StorageClass", false),
            kind(world::APIREG, "APIService", false),
        ],
        vec![],
        DiscoverySource::PerGroup,
    )
}

/// The world as listed: every object that exists, and the graph inputs of what a plan lists
/// (tracking objects and tracked objects: `live::planning_graph`).
struct Cluster {
    /// Every object of the world that exists.
    all: HashMap<ObjectId, Listed>,
    /// The node inputs of the tracking objects and tracked objects.
    inputs: Vec<NodeInput>,
    /// The node inputs of the untracked objects: nodes of an orphan prune's graph only (its
    /// bystanders are every object, `bystanders::list`).
    untracked: Vec<NodeInput>,
    /// The untracked stayers by what they carry (`stayers::declares_a_need`): a teardown's graph
    /// counts them as potential victims (`live::graph_of_with`, `would_die`).
    potential: Vec<ObjectId>,
    catalog: Catalog,
}

fn listed_of(catalog: &Catalog, id: &ObjectId, body: &serde_json::Value) -> Listed {
    let kind = catalog.get(&id.group, &id.kind).expect("a kind of the catalog").clone();
    let meta: ObjectMeta = serde_json::from_value(body["metadata"].clone()).expect("metadata");
    Listed::new(kind, meta)
}

fn input_of(listed: &Listed, body: Option<serde_json::Value>) -> NodeInput {
    NodeInput {
        id: listed.id(),
        uid: listed.meta.uid.clone(),
        labels: listed.meta.labels.clone().unwrap_or_default().into(),
        annotations: listed.meta.annotations.clone().unwrap_or_default().into(),
        finalizers: listed.meta.finalizers.clone().unwrap_or_default(),
        depends_on: Vec::new(),
        body,
        app: None,
        impersonation: Default::default(),
        unmapped: Default::default(),
        owners: listed
            .meta
            .owner_references
            .iter()
            .flatten()
            .map(|r| r.uid.clone())
            .collect(),
    }
}

/// The cluster of `world`, without the tracking objects of the stacks in `gone`.
fn cluster(world: &World, gone: &HashSet<usize>) -> Cluster {
    let catalog = catalog();
    let mut all = HashMap::new();
    let mut inputs = Vec::new();
    let mut untracked = Vec::new();
    let mut potential = Vec::new();
    for index in (0..world.stacks.len()).filter(|i| !gone.contains(i)) {
        let body = world.tracker_body(index);
        let id = world.tracker_id(index);
        let listed = listed_of(&catalog, &id, &body);
        let mut input = input_of(&listed, Some(body.clone()));
        if matches!(world.stacks[index].tool, Tool::Flux | Tool::FluxHelm) {
            input.depends_on = NodeInput::flux_depends_on(&id, &body);
        }
        inputs.push(input);
        all.insert(id.clone(), listed);
        if world.stacks[index].tool == Tool::ApplySet && world.stacks[index].copy {
            let mut copy = body;
            copy["metadata"]["name"] = serde_json::json!(format!("{}-copy", stack_name(index)));
            copy["metadata"]["uid"] = serde_json::json!(format!("uid-copy-{index}"));
            let id = ObjectId::new("", "Secret", Some(APP), &format!("{}-copy", stack_name(index)));
            let listed = listed_of(&catalog, &id, &copy);
            inputs.push(input_of(&listed, None));
            all.insert(id, listed);
        }
    }
    for index in world.present() {
        let id = world.id(index);
        let body = world.object_body(index);
        let listed = listed_of(&catalog, &id, &body);
        // `live::attach_specs`: inference reads the whole objects of its kinds.
        let spec = SPEC_KINDS.contains(&(id.group.as_str(), id.kind.as_str()));
        let input = input_of(&listed, spec.then_some(body));
        // `live::planning_graph`: the tracked objects, and the stayers (`stayers::list_whole`:
        // every webhook configuration, APIService and volume claim, untracked too;
        // `stayers::list_finalized`: every object that declares a need, by its finalizer or its
        // own depends-on).
        let tracked = is_tracked(&listed.meta);
        if !tracked && declares_a_need(&listed.meta) {
            potential.push(id.clone());
        }
        if tracked || is_stayer_kind(&id.group, &id.kind) || declares_a_need(&listed.meta) {
            inputs.push(input);
        } else {
            untracked.push(input);
        }
        all.insert(id, listed);
    }
    add_backends(&mut inputs, &mut untracked);
    Cluster {
        all,
        inputs,
        untracked,
        potential,
        catalog,
    }
}

/// `stayers::backends`: the untracked Services the webhook configurations among `inputs` call,
/// and what runs the pods those Services select, are nodes too.
fn add_backends(inputs: &mut Vec<NodeInput>, untracked: &mut Vec<NodeInput>) {
    let called: HashSet<(String, String)> = inputs.iter().flat_map(services_called).collect();
    let is_called = |input: &NodeInput| {
        input.id.kind == "Service"
            && input.id.group.is_empty()
            && called.contains(&(input.id.namespace.clone().unwrap_or_default(), input.id.name.clone()))
    };
    let (services, rest): (Vec<NodeInput>, Vec<NodeInput>) = std::mem::take(untracked).into_iter().partition(is_called);
    let services: Vec<NodeInput> = services
        .into_iter()
        .chain(inputs.iter().filter(|i| is_called(i)).cloned())
        .collect();
    let selected = |input: &NodeInput| {
        services.iter().any(|service| {
            let namespace = service.id.namespace.as_deref().unwrap_or_default();
            service
                .body
                .as_ref()
                .is_some_and(|body| service_selects(namespace, body, input))
        })
    };
    let (picked, rest): (Vec<NodeInput>, Vec<NodeInput>) = rest.into_iter().partition(|i| selected(i));
    *untracked = rest;
    let known: HashSet<ObjectId> = inputs.iter().map(|i| i.id.clone()).collect();
    inputs.extend(services.into_iter().chain(picked).filter(|i| !known.contains(&i.id)));
}

impl Cluster {
    /// The graph over the inputs and the victims found so far (`LiveGraph::add_victims`).
    fn graph(&self, victims: &HashSet<ObjectId>, members: bool) -> (Graph, HashMap<ObjectId, Listed>) {
        let mut inputs = self.inputs.clone();
        if !members {
            inputs.extend(self.untracked.iter().cloned());
        }
        let mut objects: HashMap<ObjectId, Listed> =
            inputs.iter().map(|i| (i.id.clone(), self.all[&i.id].clone())).collect();
        let mut fresh: Vec<&ObjectId> = victims.iter().filter(|id| !objects.contains_key(*id)).collect();
        fresh.sort();
        for id in &fresh {
            inputs.push(input_of(&self.all[*id], None));
            objects.insert((*id).clone(), self.all[*id].clone());
        }
        let kinds = self.catalog.kinds();
        let options = BuildOptions {
            members,
            infer: true,
            crd_names: kinds
                .iter()
                .filter(|k| !k.group.is_empty())
                .map(|k| ((k.group.clone(), k.kind.clone()), k.crd_name()))
                .collect(),
            plurals: kinds
                .iter()
                .map(|k| ((k.group.clone(), k.kind.clone()), k.plural.clone()))
                .collect(),
            orphan_dependents: false,
        };
        let mut graph = build(&inputs, &options);
        // `live::graph_of_with` counts the stayers by what they carry as potential victims;
        // `LiveGraph::add_victims` adds every victim found, a node already or not.
        graph.victims = victims
            .iter()
            .chain(self.potential.iter().filter(|_| members))
            .filter_map(|id| graph.find(id))
            .collect();
        // `live::settle_references`: a referenced object that exists gets its owners.
        let referenced: Vec<ObjectId> = graph.referenced().map(|n| n.id.clone()).collect();
        for id in referenced {
            if let (Some(index), Some(object)) = (graph.find(&id), self.all.get(&id)) {
                let owners: Vec<String> = object
                    .meta
                    .owner_references
                    .iter()
                    .flatten()
                    .map(|r| r.uid.clone())
                    .collect();
                graph.set_owners(index, &owners);
            }
        }
        // `live::settle_owner_chain`: the owners of the objects that are no nodes with a UID (a
        // referenced node has none), up the chain.
        let node_uids: HashSet<String> = graph.nodes.iter().filter_map(|n| n.uid.clone()).collect();
        let outside: Vec<(String, Vec<String>)> = self
            .all
            .values()
            .filter(|o| !node_uids.contains(o.uid()))
            .map(|o| {
                let owners = o.meta.owner_references.iter().flatten().map(|r| r.uid.clone());
                (o.uid().to_string(), owners.collect())
            })
            .collect();
        graph.outside_owners.extend(outside);
        (graph, objects)
    }
}

/// The record a stack's tool keeps beside its tracking object, as `inventory::record_of` reads
/// it (`uninstall`: a Helm release's latest revision, else its last deployed one). `Err`: the
/// record refuses (no release, no deployed revision, Flux `spec.prune: false`).
fn record_of(world: &World, stack: usize, uninstall: bool) -> Result<Option<Recorded>, ()> {
    let spec = &world.stacks[stack];
    let tracker = tracker_of(world, stack);
    let ids = || world.record(stack).into_iter().collect();
    // As `inventory::record_of` reads a Flux stack for an orphan prune: one that is suspended or
    // applies to another cluster prunes nothing here (refused). A teardown asks the stack's
    // policy instead (`graph::orphans_members`).
    let acts_elsewhere = kubectl_stack::graph::flux_acts_elsewhere(
        &world.tracker_id(stack),
        &world.tracker_body(stack),
        false,
        &Default::default(),
    );
    if !uninstall && acts_elsewhere.is_some() {
        return Err(());
    }
    match spec.tool {
        Tool::Flux if !spec.prune => Err(()),
        Tool::Flux if !spec.has_record => Ok(None),
        Tool::Flux => Ok(Some(Recorded::Ids {
            ids: ids(),
            inventory: format!("the inventory of {}", stack_name(stack)),
            owner: Some(tracker),
            denied: Default::default(),
        })),
        Tool::FluxHelm if spec.revisions.is_empty() => Err(()),
        Tool::FluxHelm if !uninstall && !spec.revisions.contains(&"deployed") => Err(()),
        Tool::FluxHelm => Ok(Some(Recorded::Ids {
            ids: ids(),
            inventory: format!("Helm release {APP}/{}", stack_name(stack)),
            owner: None,
            denied: Default::default(),
        })),
        Tool::Kpt => Ok(Some(Recorded::Ids {
            ids: ids(),
            inventory: format!("inventory {}", world::inventory_id(stack)),
            owner: Some(tracker),
            denied: Default::default(),
        })),
        // Argo CD keeps no record kubectl-stack reads: its marks decide.
        Tool::ArgoCd => Ok(None),
        // kapp and Flux v1 keep no record kubectl-stack reads: marks and the tools' rules decide.
        Tool::Kapp | Tool::FluxV1 => Ok(None),
        Tool::ApplySet => {
            let kinds = world::APPLYSET_KINDS
                .iter()
                .enumerate()
                .filter(|(bit, _)| spec.kinds & 1 << bit != 0)
                .map(|(_, (g, k))| (g.to_string(), k.to_string()))
                .collect();
            let namespaces = world
                .applyset_extra(stack)
                .into_iter()
                .chain([APP.to_string()])
                .collect();
            Ok(Some(Recorded::ApplySet {
                kinds,
                namespaces,
                inventory: format!("ApplySet parent Secret/{}", stack_name(stack)),
                owner: Some(tracker),
            }))
        }
    }
}

/// `--tracker` of a stack.
fn tracker_of(world: &World, stack: usize) -> Tracker {
    let (preset, name, namespace) = match world.stacks[stack].tool {
        Tool::Flux => (Preset::Flux, stack_name(stack), Some(FLUX_NS)),
        Tool::FluxHelm => (Preset::FluxHelm, stack_name(stack), Some(APP)),
        Tool::Kpt => (Preset::Kpt, world::inventory_id(stack), None),
        Tool::ApplySet => (Preset::ApplySet, world.applyset_id(stack), None),
        Tool::ArgoCd => (Preset::ArgoCd, stack_name(stack), None),
        Tool::Kapp => (Preset::Kapp, world::kapp_id(stack), None),
        Tool::FluxV1 => (Preset::FluxV1, stack_name(stack), None),
    };
    Tracker {
        preset,
        value: Some(MarkValue {
            name,
            namespace: namespace.map(str::to_string),
        }),
    }
}

/// `pruning::read_member_records`: each chosen kpt inventory, HelmRelease and ApplySet parent
/// is bounded by its record (one that cannot be read: by none).
fn read_member_records(world: &World, graph: &mut Graph, objects: &HashMap<ObjectId, Listed>, chosen: &HashSet<usize>) {
    for &index in chosen {
        if graph.inventories.contains_key(&index) {
            continue;
        }
        let Some(object) = objects.get(&graph.nodes[index].id) else {
            continue;
        };
        let Some((preset, _)) = tracker_key(object) else {
            continue;
        };
        if !kubectl_stack::prune::recheck::keeps_record_beside(preset) {
            continue;
        }
        let Some(stack) = (0..world.stacks.len()).find(|s| world.tracker_id(*s) == object.id()) else {
            continue;
        };
        // A HelmRelease's record names its Helm release (`uninstall_record_of`'s `helm_release`).
        let aliases = match world.stacks[stack].tool {
            Tool::FluxHelm => vec![(
                Preset::Helm,
                MarkValue {
                    name: stack_name(stack),
                    namespace: Some(APP.to_string()),
                },
            )],
            _ => Vec::new(),
        };
        let record = match record_of(world, stack, true) {
            Ok(Some(recorded)) => MemberRecord {
                aliases,
                ..recorded.members(objects.values())
            },
            Ok(None) => continue,
            Err(()) => MemberRecord {
                ids: HashSet::new(),
                name: "a record that cannot be read".into(),
                aliases: Vec::new(),
                no_inventory: None,
                denied: Default::default(),
            },
        };
        graph.inventories.insert(index, record);
    }
}

/// What a run starts from: the chosen objects (by id), what is kept already, the mode.
struct Start {
    chosen: HashMap<ObjectId, String>,
    kept: Vec<Kept>,
    mode: Mode,
    members: bool,
}

/// `pruning::plan_with_cascades`: plans, finds what the planned Namespaces and CRDs take beyond
/// the plan (every object of the world in them, judged by [`cascade_of`]), makes nodes of those
/// victims and plans again until there are no new ones. `None`: refused as a whole (a cycle).
fn plan_with_cascades(world: &World, cluster: &Cluster, start: &Start) -> Option<(PrunePlan, Graph)> {
    let mut victims: HashSet<ObjectId> = HashSet::new();
    loop {
        let (mut graph, objects) = cluster.graph(&victims, start.members);
        let chosen: HashMap<usize, String> = start
            .chosen
            .iter()
            .filter_map(|(id, why)| graph.find(id).map(|i| (i, why.clone())))
            .collect();
        if start.members {
            let indices: HashSet<usize> = chosen.keys().copied().collect();
            read_member_records(world, &mut graph, &objects, &indices);
        }
        let tracked: Vec<ObjectId> = objects.keys().cloned().collect();
        let snapshot = Snapshot {
            graph: &graph,
            objects: &objects,
            tracked: &tracked,
        };
        let mut planned = match plan(
            &snapshot,
            &cluster.catalog,
            chosen,
            start.kept.clone(),
            start.mode.clone(),
        ) {
            Ok(planned) => planned,
            Err(err) if err.code == kubectl_stack::error::exit::CYCLE => return None,
            Err(err) => panic!("{err:?}"),
        };
        let mut done = Planned::default();
        for target in planned.waves.iter().flatten() {
            done.uids.insert(target.uid.clone());
            done.ids.insert(target.id.clone());
        }
        let mut holders: Vec<&ObjectId> = done.ids.iter().filter(|id| is_holder(id)).collect();
        holders.sort();
        let before = victims.len();
        for holder in holders {
            let held: Vec<Listed> = cluster
                .all
                .values()
                .filter(|o| match holder.kind.as_str() {
                    "Namespace" => o.namespace() == Some(holder.name.as_str()),
                    _ => o.kind.crd_name() == holder.name && !o.kind.group.is_empty(),
                })
                .cloned()
                .collect();
            let collection = Collection {
                objects: held,
                failures: Vec::new(),
                listed_kinds: 1,
                not_served: Vec::new(),
                untracked_matches: 0,
                service_account_tokens: Default::default(),
            };
            let cascade = cascade_of(&cluster.catalog, holder, &collection, &done);
            victims.extend(cascade.victims.iter().map(|v| v.id.clone()));
            if !cascade.victims.is_empty() {
                planned.cascades.push(cascade);
            }
        }
        let fresh = victims.iter().any(|id| !objects.contains_key(id));
        if victims.len() == before || !fresh {
            return Some((planned, graph));
        }
    }
}

/// How a teardown of the named stack starts (`pruning::teardown_planning`), on `cluster`.
fn teardown_start(world: &World, cluster: &Cluster) -> Option<Start> {
    let named = if world.name_copy {
        ObjectId::new("", "Secret", Some(APP), &format!("{}-copy", stack_name(world.named)))
    } else {
        world.tracker_id(world.named)
    };
    let (graph, _) = cluster.graph(&HashSet::new(), true);
    let index = graph.find(&named)?;
    let mut chosen = teardown_closure(&graph, &[index]);
    chosen.insert(index, "named".into());
    Some(Start {
        chosen: chosen
            .into_iter()
            .map(|(i, why)| (graph.nodes[i].id.clone(), why))
            .collect(),
        kept: Vec::new(),
        mode: Mode::Teardown(Vec::new()),
        members: true,
    })
}

/// How an orphan prune of the named stack starts (`orphans::find` with `--tracker` and the
/// stack's record, then `pruning::orphan_planning`). `None`: refused.
fn orphans_start(world: &World, cluster: &Cluster) -> Option<Start> {
    let tracker = tracker_of(world, world.named);
    let recorded = record_of(world, world.named, false).ok()?;
    // `orphans::resolve_manifests`: the desired documents as `-f` reads them
    // (`manifest::parse_text`), resolved through the catalog (`DesiredSet::resolved`); a kpt
    // inventory's namespace is in use (`record_namespace`).
    let text: String = world
        .desired_documents()
        .iter()
        .map(|document| format!("---\n{document}\n"))
        .collect();
    let manifests = parse_text(&text, "desired.yaml").expect("the desired documents parse");
    let scopes = Scopes::new(Some(&cluster.catalog), &manifests);
    let mut set = DesiredSet::resolved(&manifests, &scopes, NamespaceRule::Default(APP), Origin::Manifests);
    if world.stacks[world.named].tool == Tool::Kpt {
        set.needs.add_namespace(APP);
    }
    // `orphans::refuse_unresolved`: a document the cluster cannot resolve makes the set
    // incomplete: refused as a whole unless `--allow-unresolved`.
    if !set.unresolved.is_empty() && !world.allow_unresolved {
        return None;
    }
    // The stack compared, as `orphans::compared_stack` makes it: the tracker, and a HelmRelease's
    // Helm release as its record names it.
    let aliases = match world.stacks[world.named].tool {
        Tool::FluxHelm => vec![Mark {
            preset: Preset::Helm,
            value: MarkValue {
                name: stack_name(world.named),
                namespace: Some(APP.to_string()),
            },
        }],
        _ => Vec::new(),
    };
    let desired = Desired {
        manifests: Some(set),
        recorded,
        tracker: Some(tracker.clone()),
        stack: Some(ComparedStack {
            tracker: tracker.clone(),
            aliases,
        }),
        live_versions: Default::default(),
    };
    let mut selected: Vec<Listed> = cluster
        .all
        .values()
        .filter(|o| tracker.matches(&o.meta))
        .cloned()
        .collect();
    selected.sort_by_key(Listed::id);
    let mut start = Start {
        chosen: HashMap::new(),
        kept: Vec::new(),
        // `pruning::orphan_planning`: the tracker named and what the desired set needs.
        mode: Mode::Orphans(
            Some(tracker.clone()),
            desired
                .manifests
                .as_ref()
                .map(|set| Box::new(set.needs.clone()))
                .unwrap_or_default(),
        ),
        members: false,
    };
    for classified in classify(&selected, &desired) {
        let id = classified.object.id();
        match classified.verdict {
            Verdict::Orphan(reason) => {
                start.chosen.insert(id, reason.to_string());
            }
            Verdict::Skipped(reason @ KeepReason::Keep { .. }) => start.kept.push(Kept { id, reason }),
            _ => {}
        }
    }
    Some(start)
}

/// The first run of the world's entry point: its plan and graph.
fn first_run(world: &World) -> Option<(PrunePlan, Graph, Cluster)> {
    let cluster = cluster(world, &HashSet::new());
    let start = match world.entry {
        Entry::Teardown => teardown_start(world, &cluster)?,
        Entry::Orphans => orphans_start(world, &cluster)?,
    };
    let (planned, graph) = plan_with_cascades(world, &cluster, &start)?;
    Some((planned, graph, cluster))
}

fn planned_ids(planned: &PrunePlan) -> HashSet<ObjectId> {
    planned.waves.iter().flatten().map(|t| t.id.clone()).collect()
}

/// Invariant 1: every planned object is one the oracles allow.
fn check_allowed(world: &World, planned: &HashSet<ObjectId>) -> Result<(), String> {
    let torn = oracle::torn_down(world);
    for id in planned {
        if let Some(index) = world.present().find(|&i| world.id(i) == *id) {
            let allowed = match world.entry {
                Entry::Teardown => oracle::teardown_allows(world, &torn, index),
                // F1 is fixed (keep chain, rule "other stacks"): always checked.
                Entry::Orphans => oracle::orphan_allows(world, index, true),
            };
            if !allowed {
                return Err(format!(
                    "{id} deleted, but a tool keeps it ({:?})",
                    world.objects[index]
                ));
            }
        } else if let Some(stack) = (0..world.stacks.len()).find(|&s| world.tracker_id(s) == *id) {
            if world.entry == Entry::Orphans || !torn.contains(&stack) {
                return Err(format!("{id}, the tracking object of a stack not torn down, deleted"));
            }
        } else {
            return Err(format!("{id} deleted: a copy of an ApplySet parent is no stack"));
        }
    }
    Ok(())
}

/// Invariant 2: every object a planned Namespace or CRD takes beyond the plan is named, unless
/// all of its owners die anyway.
fn check_victims(world: &World, planned: &PrunePlan, dead: &BTreeMap<usize, Death>) -> Result<(), String> {
    let named: HashSet<&ObjectId> = planned
        .cascades
        .iter()
        .flat_map(|c| c.victims.iter().map(|v| &v.id))
        .collect();
    for (&index, death) in dead {
        let id = world.id(index);
        if *death == Death::Cascade && !oracle::owners_die(world, index, dead) && !named.contains(&id) {
            return Err(format!(
                "{id} dies with a planned Namespace or CRD, but is named as no victim"
            ));
        }
    }
    Ok(())
}

/// Invariant 3: every edge among what is deleted orders the waves (a dependent goes in an
/// earlier wave).
fn check_waves(planned: &PrunePlan, graph: &Graph) -> Result<(), String> {
    let wave_of = waves_of(planned);
    for edge in graph.all_edges() {
        let (from, to) = (&graph.nodes[edge.from].id, &graph.nodes[edge.to].id);
        if let (Some(a), Some(b)) = (wave_of.get(from), wave_of.get(to)) {
            // Strictly: one wave is deleted at once, so a dependent in the wave of what it needs
            // may be gone after it.
            if a >= b {
                return Err(format!("{from} (wave {a}) needs {to} (wave {b}), {:?}", edge.kind));
            }
        }
    }
    Ok(())
}

/// The wave of each planned object.
fn waves_of(planned: &PrunePlan) -> HashMap<&ObjectId, usize> {
    planned
        .waves
        .iter()
        .enumerate()
        .flat_map(|(wave, targets)| targets.iter().map(move |t| (&t.id, wave)))
        .collect()
}

/// The operator of the Gizmos: the Deployment of a stack that holds their CRD (infer.rs rule
/// 1's definition, restated: a finalizer of the CRD's group is served by that stack).
fn gizmo_operator(world: &World) -> Option<usize> {
    let position = |shape| world.objects.iter().position(|o| o.shape == shape && o.present);
    let (crd, op) = (position(world::Shape::Crd)?, position(world::Shape::Operator)?);
    let (crd_stacks, op_stacks) = (oracle::marking(world, crd).stacks, oracle::marking(world, op).stacks);
    crd_stacks.iter().any(|s| op_stacks.contains(s)).then_some(op)
}

/// Invariant 3, from the oracle's side: the needs the world holds (written here, apart from
/// inference) order what dies, so that a need production's graph lacks is caught too. Who needs
/// what: an object its `depends-on` target; a Gizmo, whose finalizer only the operator removes,
/// that operator (the Deployment of a stack that holds their CRD); the webhook configuration
/// (`failurePolicy: Fail` on Gizmo deletes) its backend Service and the operator behind it; a
/// claim its StorageClass (its provisioner deletes the volume). When both die, the needing one
/// must start dying in an earlier wave: a planned object in its wave, a cascade victim with the
/// Namespace or CRD that takes it, an object whose owners all die after the last of them.
fn check_death_order(world: &World, planned: &PrunePlan, dead: &BTreeMap<usize, Death>) -> Result<(), String> {
    let waves = death_waves(world, planned, dead);
    for (who, what, why) in oracle_needs(world, dead) {
        // What dies because its need dies (the garbage collector takes an owned object after its
        // owner) cannot go first, and needs nothing of it while it goes.
        // Two objects the garbage collector takes go in its order, not the plan's.
        let by_owners = |index| dead.get(&index) == Some(&Death::Owners);
        if dies_through(world, dead, who, what) || by_owners(who) && by_owners(what) {
            continue;
        }
        // A need the stacks' declared order contradicts (the stack of `what` depends on the
        // stack of `who`, so it goes first, entirely) has no order; the plan must say so.
        if declared_first(world, what, who) {
            let planned_both = [who, what].iter().all(|i| dead.get(i) == Some(&Death::Planned));
            let (a, b) = (world.id(who).to_string(), world.id(what).to_string());
            if planned_both && !planned.warnings.iter().any(|w| w.contains(&a) && w.contains(&b)) {
                return Err(format!(
                    "{a} needs {b} ({why}) against the declared order, and the plan does not say so"
                ));
            }
            continue;
        }
        // No order of waves satisfies every need (the plan's victim orders closed a cycle): the
        // plan must tell which one it could not keep.
        let (who_id, what_id) = (world.id(who).to_string(), world.id(what).to_string());
        let told = planned
            .warnings
            .iter()
            .any(|w| w.contains(&who_id) && w.contains(&what_id));
        if let (Some(a), Some(b)) = (waves.get(&who), waves.get(&what)) {
            if a >= b && !told {
                return Err(format!(
                    "{} (dies in wave {a}) needs {} (dies in wave {b}): {why}",
                    world.id(who),
                    world.id(what)
                ));
            }
        }
    }
    Ok(())
}

/// Whether a stack that marks object `first` depends (Flux `dependsOn`, transitively) on a
/// stack that marks object `then`: its teardown deletes `first`'s stack, members included,
/// before `then`.
fn declared_first(world: &World, first: usize, then: usize) -> bool {
    let depends_on = |from: usize, to: usize| {
        let mut seen = HashSet::new();
        let mut stack = vec![from];
        while let Some(s) = stack.pop() {
            if !seen.insert(s) {
                continue;
            }
            for &next in &world.stacks[s].depends_on {
                if next == to {
                    return true;
                }
                stack.push(next);
            }
        }
        false
    };
    let (a, b) = (&world.objects[first].marks, &world.objects[then].marks);
    a.iter().any(|&x| b.iter().any(|&y| x != y && depends_on(x, y)))
}

/// Whether object `who` dies by the garbage collector through an owner chain that holds `what`.
fn dies_through(world: &World, dead: &BTreeMap<usize, Death>, who: usize, what: usize) -> bool {
    let mut seen = HashSet::new();
    let mut stack = vec![who];
    while let Some(index) = stack.pop() {
        if dead.get(&index) != Some(&Death::Owners) || !seen.insert(index) {
            continue;
        }
        for &owner in &world.objects[index].owners {
            if owner == what {
                return true;
            }
            stack.push(owner);
        }
    }
    false
}

/// The needs of the world, as (who, what, why), by the oracle's own reading.
fn oracle_needs(world: &World, dead: &BTreeMap<usize, Death>) -> Vec<(usize, usize, &'static str)> {
    use world::Shape::{Backend, Claim, Gizmo, Operator, StorageClass, Webhook};
    let position = |shape| world.objects.iter().position(|o| o.shape == shape && o.present);
    let operator = gizmo_operator(world);
    let mut needs = Vec::new();
    for index in world.present() {
        // A depends-on orders what is applied and deleted by the plan (kpt's `depends-on`), not
        // what a cascade takes with its owner or Namespace.
        let planned = dead.get(&index) == Some(&Death::Planned);
        if let Some(target) = world.objects[index].depends_on.filter(|_| planned) {
            needs.push((index, target, "its depends-on target"));
        }
        if let (Gizmo { .. }, Some(op)) = (world.objects[index].shape, operator) {
            needs.push((index, op, "the operator that removes its finalizer"));
        }
    }
    if let (Some(hook), Some(backend)) = (position(Webhook), position(Backend)) {
        needs.push((hook, backend, "the Service its webhook calls"));
        if let Some(op) = position(Operator) {
            needs.push((hook, op, "the operator behind its backend Service"));
        }
    }
    needs.extend(oracle::api_service_needs(world));
    if let (Some(claim), Some(class)) = (position(Claim), position(StorageClass)) {
        needs.push((claim, class, "the StorageClass whose provisioner deletes its volume"));
    }
    needs
}

/// The wave in which each dying object starts to die (see [`check_death_order`]): the earliest
/// of its own wave, the wave of the Namespace or CRD that takes it, and the wave after which
/// all its owners are gone (the garbage collector deletes it then, and the run waits for what a
/// planned owner controls).
fn death_waves(world: &World, planned: &PrunePlan, dead: &BTreeMap<usize, Death>) -> HashMap<usize, usize> {
    let wave_of = waves_of(planned);
    let team = wave_of.get(&ObjectId::new("", "Namespace", None, world::TEAM)).copied();
    let crd = wave_of
        .iter()
        .filter(|(id, _)| id.kind == "CustomResourceDefinition")
        .map(|(_, &w)| w)
        .min();
    let mut waves: HashMap<usize, usize> = HashMap::new();
    for &index in dead.keys() {
        let id = world.id(index);
        let in_team = id.namespace.as_deref() == Some(world::TEAM);
        let gizmo = matches!(world.objects[index].shape, world::Shape::Gizmo { .. });
        let earliest = [
            wave_of.get(&id).copied(),
            team.filter(|_| in_team),
            crd.filter(|_| gizmo),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(wave) = earliest {
            waves.insert(index, wave);
        }
    }
    // Owners: after the last of them, once every owner's wave is known (to a fixed point).
    loop {
        let mut changed = false;
        for &index in dead.keys() {
            let owners = &world.objects[index].owners;
            let last: Option<Vec<usize>> = owners.iter().map(|o| waves.get(o).copied()).collect();
            let Some(last) = last.and_then(|w| w.into_iter().max()) else {
                continue;
            };
            if waves.get(&index).is_none_or(|&wave| last < wave) {
                waves.insert(index, last);
                changed = true;
            }
        }
        if !changed {
            return waves;
        }
    }
}

/// Invariant 4: what stays keeps what it needs: its depends-on target, its operator (the
/// Deployment of the stack of the CRD its finalizer names), and every need edge of the graph.
fn check_needs(
    world: &World,
    planned: &PrunePlan,
    graph: &Graph,
    dead: &BTreeMap<usize, Death>,
    cluster: &Cluster,
) -> Result<(), String> {
    // A named victim goes only with `--allow-cascade` (refused without it): consented to.
    let named: HashSet<ObjectId> = planned
        .cascades
        .iter()
        .flat_map(|c| c.victims.iter().map(|v| v.id.clone()))
        .collect();
    let dead_ids: HashSet<ObjectId> = dead.keys().map(|&i| world.id(i)).collect();
    let dies = |id: &ObjectId| dead_ids.contains(id) || !cluster.all.contains_key(id);
    let operator = gizmo_operator(world);
    for index in world.present().filter(|i| !dead.contains_key(i)) {
        let id = world.id(index);
        // Finding F2 (fixed, always checked): an untracked object that declares a need (its own
        // depends-on, a finalizer naming an operator) is a stayer (`stayers::declares_a_need`).
        // Finding F3 (fixed, always checked): a need that dies with a planned owner through an
        // owner chain of untracked objects keeps that owner (`Graph::outside_owners`).
        if let Some(target) = world.objects[index].depends_on {
            if dead.contains_key(&target) && !named.contains(&world.id(target)) {
                return Err(format!("{id} stays, but {} it depends on is deleted", world.id(target)));
            }
        }
        let custom = matches!(world.objects[index].shape, world::Shape::Gizmo { .. });
        if let Some(op) = operator.filter(|op| custom && dead.contains_key(op)) {
            return Err(format!(
                "{id} stays with its finalizer, but its operator {} is deleted",
                world.id(op)
            ));
        }
    }
    check_backends(world, dead, &named)?;
    for edge in graph.needs() {
        let (from, to) = (&graph.nodes[edge.from].id, &graph.nodes[edge.to].id);
        if !dies(from) && dead_ids.contains(to) && !named.contains(to) && cluster.all.contains_key(to) {
            return Err(format!(
                "{from} stays, but {to}, which it needs ({:?}), is deleted",
                edge.kind
            ));
        }
    }
    Ok(())
}

/// Invariant 4, the backends: a webhook configuration that stays keeps the Service it calls
/// and the operator's pods that Service selects (kubernetes `admissionregistration/v1`
/// `clientConfig.service`; with `failurePolicy: Fail`, every Gizmo change fails without them); an
/// APIService that stays keeps the Service its `spec.service` names and the operator behind it
/// (see [`oracle_needs`]); a claim that stays keeps its StorageClass (and with it its
/// provisioner).
fn check_backends(world: &World, dead: &BTreeMap<usize, Death>, named: &HashSet<ObjectId>) -> Result<(), String> {
    use world::Shape::{Backend, Claim, Operator, StorageClass, Webhook};
    let position = |shape| world.objects.iter().position(|o| o.shape == shape && o.present);
    let backend = position(Backend);
    let api_service = oracle::api_service_needs(world)
        .into_iter()
        .map(|(who, what, _)| (Some(who), Some(what)));
    let needs = [
        (position(Webhook), backend),
        (position(Webhook), backend.and(position(Operator))),
        (position(Claim), position(StorageClass)),
    ]
    .into_iter()
    .chain(api_service);
    // Finding F4 (fixed, always checked): the untracked Service a webhook configuration calls,
    // and what its selector picks, are nodes of a teardown's graph (`stayers::backends`).
    for (who, what) in needs {
        let (Some(who), Some(what)) = (who, what) else {
            continue;
        };
        if !dead.contains_key(&who) && dead.contains_key(&what) && !named.contains(&world.id(what)) {
            return Err(format!(
                "{} stays, but {}, its backend, is deleted",
                world.id(who),
                world.id(what)
            ));
        }
    }
    Ok(())
}

/// The world after the plan: what died is gone, and so are the stacks whose tracking object
/// was deleted.
fn after(world: &World, planned: &HashSet<ObjectId>, dead: &BTreeMap<usize, Death>) -> (World, HashSet<usize>) {
    let mut next = world.clone();
    for &index in dead.keys() {
        next.objects[index].present = false;
    }
    let gone = (0..world.stacks.len())
        .filter(|&s| planned.contains(&world.tracker_id(s)))
        .collect();
    (next, gone)
}

/// Invariant 5: a teardown run again on the world after its plan — the named stack again when
/// it is still there, else its leftovers (`--leftovers`: what still carries its mark) — plans
/// nothing the first run kept for a keep marker or another stack's mark, and, when the named
/// stack is still there, nothing the first run kept at all.
fn check_rerun(
    world: &World,
    first: &PrunePlan,
    planned: &HashSet<ObjectId>,
    dead: &BTreeMap<usize, Death>,
) -> Result<(), String> {
    if world.entry != Entry::Teardown || world.name_copy {
        return Ok(());
    }
    let (next, gone) = after(world, planned, dead);
    let cluster = cluster(&next, &gone);
    let still_there = !gone.contains(&world.named);
    let start = if still_there {
        let Some(start) = teardown_start(&next, &cluster) else {
            return Ok(());
        };
        start
    } else {
        let (graph, objects) = cluster.graph(&HashSet::new(), true);
        let tracked: Vec<ObjectId> = objects.keys().cloned().collect();
        let snapshot = Snapshot {
            graph: &graph,
            objects: &objects,
            tracked: &tracked,
        };
        let id = world.tracker_id(world.named);
        let preset = match world.stacks[world.named].tool {
            Tool::Flux => Preset::Flux,
            Tool::FluxHelm => Preset::FluxHelm,
            _ => return Ok(()), // found again by its marks only for Flux kinds (`targets::find_named`)
        };
        let key = (
            preset,
            MarkValue {
                name: id.name.clone(),
                namespace: id.namespace.clone(),
            },
        );
        let left = members_of_gone(&snapshot, &key);
        Start {
            chosen: left
                .into_iter()
                .map(|i| (graph.nodes[i].id.clone(), "leftover".to_string()))
                .collect(),
            kept: Vec::new(),
            mode: Mode::Teardown(vec![key]),
            members: true,
        }
    };
    let Some((again, _)) = plan_with_cascades(&next, &cluster, &start) else {
        return Ok(());
    };
    let torn = oracle::torn_down(world);
    for id in planned_ids(&again) {
        let Some(kept) = first.kept.iter().find(|k| k.id == id) else {
            continue;
        };
        let index = world.present().find(|&i| world.id(i) == id);
        let by_marks = index.is_some_and(|i| {
            let marking = oracle::marking(world, i);
            oracle::keep_marked(world, i) || marking.other || marking.stacks.iter().any(|s| !torn.contains(s))
        });
        if still_there || by_marks {
            return Err(format!(
                "the rerun deletes {id}, which the first run kept: {}",
                kept.reason
            ));
        }
    }
    Ok(())
}

fn check(world: &World) -> Result<(), String> {
    let run = first_run(world);
    // A desired set with a document of an unserved kind is incomplete: refused as a whole,
    // nothing deleted, unless `--allow-unresolved` (README, Guards).
    if world.entry == Entry::Orphans && world.unserved.is_some() && !world.allow_unresolved && run.is_some() {
        return Err("invariant 1: a desired set with a document of an unserved kind is not refused".into());
    }
    let Some((planned, graph, cluster)) = run else {
        return Ok(()); // refused as a whole: nothing deleted
    };
    let ids = planned_ids(&planned);
    let dead = oracle::dead(world, &ids);
    if only(1) {
        check_allowed(world, &ids).map_err(|e| format!("invariant 1: {e}"))?;
    }
    if only(2) {
        check_victims(world, &planned, &dead).map_err(|e| format!("invariant 2: {e}"))?;
    }
    if only(3) {
        check_waves(&planned, &graph).map_err(|e| format!("invariant 3: {e}"))?;
        check_death_order(world, &planned, &dead).map_err(|e| format!("invariant 3 (the world's needs): {e}"))?;
    }
    if only(4) {
        check_needs(world, &planned, &graph, &dead, &cluster).map_err(|e| format!("invariant 4: {e}"))?;
    }
    if only(5) {
        check_rerun(world, &planned, &ids, &dead).map_err(|e| format!("invariant 5: {e}"))?;
    }
    // The re-check before each wave, on the world changed between two waves: what the change
    // made stay is dropped (invariant 1 on the changed world).
    if let Some((next, deleted, _)) = world::recheck::run_changed(world, &planned).filter(|_| only(1)) {
        check_allowed(&next, &deleted).map_err(|e| {
            let (after, change) = world
                .change
                .unwrap_or((0, world::Change::Keep { object: 0, marker: 0 }));
            let aimed = world::recheck::aim(world, &planned, after % (planned.waves.len() - 1), change);
            format!("invariant 1 after the change {aimed:?} (after wave {after}): {e}")
        })?;
    }
    Ok(())
}

/// Whether invariant `n` is checked: all are, unless `WORLD_ONLY=N` names one (to show which
/// invariant alone catches a mutant: `world/MUTANTS.md`).
fn only(n: u32) -> bool {
    std::env::var("WORLD_ONLY")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .is_none_or(|only| only == n)
}

/// The case count: `WORLD_CASES` (default 4096) keeps the binary well under two minutes in CI.
fn cases() -> u32 {
    std::env::var("WORLD_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4096)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_entry_point_deletes_only_what_the_tools_would_and_names_every_victim(world in world::world()) {
        if let Err(why) = check(&world) {
            let plan = first_run(&world).map(|(p, _, _)| {
                let waves: Vec<Vec<String>> = p.waves.iter().map(|w| w.iter().map(|t| t.id.to_string()).collect()).collect();
                let kept: Vec<String> = p.kept.iter().map(|k| format!("{}: {}", k.id, k.reason)).collect();
                format!("waves: {waves:?}\nkept: {kept:#?}")
            });
            prop_assert!(false, "{why}\n{}\nshrunk world (replay with kubectl apply -f):\n{}", plan.unwrap_or_default(), world.yaml());
        }
    }
}

#[test]
fn a_world_renders_as_replayable_yaml() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let world = world::world().new_tree(&mut runner).expect("a world").current();
    let yaml = world.yaml();
    assert!(yaml.starts_with("# run: kubectl stack prune"), "{yaml}");
    assert!(
        yaml.contains("kind: Namespace") || yaml.contains("kind: ConfigMap"),
        "{yaml}"
    );
}

/// How often the generated worlds reach each interesting case: `WORLD_STATS=1 ... world_stats
/// --nocapture` (`scripts/test.sh` runs ignored tests too, so this one waits for its variable).
#[test]
fn world_stats() {
    if std::env::var("WORLD_STATS").is_err() {
        return;
    }
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..1000 {
        let world = world::world().new_tree(&mut runner).expect("a world").current();
        let tool = format!("{:?} {:?}", world.entry, world.stacks[world.named].tool);
        *counts.entry(format!("{tool}: worlds")).or_default() += 1;
        let Some((planned, _, _)) = first_run(&world) else {
            *counts.entry(format!("{tool}: refused")).or_default() += 1;
            if world.unserved.is_some() {
                *counts.entry(format!("{tool}: refused, an unserved kind")).or_default() += 1;
            }
            continue;
        };
        let objects = planned_ids(&planned)
            .iter()
            .filter(|id| id.name.starts_with('o') || id.kind == "Namespace")
            .count();
        if objects > 0 {
            *counts.entry(format!("{tool}: plans objects")).or_default() += 1;
        }
        let ids = planned_ids(&planned);
        if ids.iter().any(|id| id.kind == "Gizmo") && ids.iter().any(|id| id.kind == "Deployment") {
            *counts
                .entry(format!("{tool}: plans a custom resource and its operator"))
                .or_default() += 1;
        }
        if ids.iter().any(|id| id.kind == "Deployment") {
            *counts.entry(format!("{tool}: plans the operator")).or_default() += 1;
        }
        if !planned.kept.is_empty() {
            *counts.entry(format!("{tool}: keeps some")).or_default() += 1;
        }
        if !planned.cascades.is_empty() {
            *counts.entry(format!("{tool}: names victims")).or_default() += 1;
        }
        if world.unserved.is_some() {
            *counts.entry(format!("{tool}: an unserved kind allowed")).or_default() += 1;
        }
        let renamed = world.present().any(|i| {
            matches!(
                world.objects[i].desired,
                world::DesiredAs::Renamed | world::DesiredAs::Moved
            ) && ids.contains(&world.id(i))
        });
        if world.entry == Entry::Orphans && renamed {
            *counts
                .entry(format!("{tool}: prunes a renamed or moved object"))
                .or_default() += 1;
        }
        if let Some((_, deleted, dropped)) = world::recheck::run_changed(&world, &planned) {
            *counts.entry(format!("{tool}: changed between waves")).or_default() += 1;
            if !dropped.is_empty() {
                *counts.entry(format!("{tool}: the re-check drops some")).or_default() += 1;
            }
            if !deleted.is_empty() {
                *counts.entry(format!("{tool}: deletes after the change")).or_default() += 1;
            }
        }
    }
    eprintln!("{counts:#?}");
}
