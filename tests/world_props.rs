//! Issue 29: safety invariants over generated worlds, checked against a reference oracle written
//! apart from the production code.
//!
//! A world: Flux Kustomizations (each with `spec.prune`, `spec.deletionPolicy`, a
//! `status.inventory` or none, `dependsOn`), ConfigMaps carrying zero or one stack's labels,
//! copies of marks outside the records, a second tool's mark (a kpt `owning-inventory`), keep
//! markers, `depends-on` annotations, owners (controllers and plain second owners), and custom
//! resources whose finalizer names an operator's group. One stack is torn down; the plan must:
//! 1. delete nothing the oracle keeps (kustomize-controller's own garbage collection on deletion,
//!    fluxcd/kustomize-controller `internal/controller/kustomization_controller.go`
//!    `finalize` / `finalizerShouldDeleteResources`: only `status.inventory` entries, only when
//!    `deletionPolicy` (default `MirrorPrune` following `spec.prune`) says so, never an object
//!    with `kustomize.toolkit.fluxcd.io/prune: disabled`);
//! 3. order its waves by every edge among what it deletes (declared, structural, inferred);
//! 4. leave nothing that stays without what it needs (its `depends-on` target, the operator its
//!    finalizer names);
//!
//! and the garbage collector's rule (kubernetes `pkg/controller/garbagecollector`: an object goes
//! with its owners only when all of them go) decides what dies without being planned.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::core::ObjectMeta;
use proptest::prelude::*;
use serde_json::json;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kubectl_stack::collect::Listed;
use kubectl_stack::discovery::{Catalog, DiscoverySource, KindInfo};
use kubectl_stack::graph::{build, BuildOptions, NodeInput};
use kubectl_stack::identity::ObjectId;
use kubectl_stack::teardown::{plan, teardown_closure, Mode, PrunePlan, Snapshot};

const FLUX: &str = "kustomize.toolkit.fluxcd.io";
const FLUX_NS: &str = "flux-system";
const OPS: &str = "ops.example.com";

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
            kind("", "Namespace", false),
            kind(FLUX, "Kustomization", true),
            kind("apps", "Deployment", true),
            kind("apiextensions.k8s.io", "CustomResourceDefinition", false),
            kind(OPS, "Gizmo", true),
        ],
        vec![],
        DiscoverySource::PerGroup,
    )
}

/// One generated Kustomization.
#[derive(Debug, Clone)]
struct Stack {
    prune: bool,
    /// `None`: `MirrorPrune` (the default).
    policy: Option<&'static str>,
    /// Whether it records a `status.inventory` (of which objects: see `Object::in_inventory`).
    has_inventory: bool,
    /// Indices of lower stacks it depends on.
    depends_on: Vec<usize>,
}

/// One generated namespaced object.
#[derive(Debug, Clone)]
struct Object {
    /// Which stack's labels it carries, if any.
    stack: Option<usize>,
    /// Whether its stack's inventory lists it (a copy of the labels is not listed).
    in_inventory: bool,
    /// A kpt `owning-inventory` of an inventory that is not torn down.
    second_tool: bool,
    /// `kustomize.toolkit.fluxcd.io/prune: disabled`.
    keep: bool,
    /// A `depends-on` another object (by index).
    depends_on: Option<usize>,
    /// Owners (by index), and whether the first is its controller.
    owners: Vec<usize>,
    controller: bool,
    /// A custom resource (Gizmo) whose finalizer names `ops.example.com`, else a ConfigMap.
    custom: bool,
}

/// The operator: a CRD `gizmos.ops.example.com` and a Deployment, tracked by `stack`.
#[derive(Debug, Clone)]
struct World {
    stacks: Vec<Stack>,
    objects: Vec<Object>,
    operator_stack: Option<usize>,
    torn_down: usize,
}

fn stack() -> impl Strategy<Value = Stack> {
    (
        any::<bool>(),
        prop_oneof![
            Just(None),
            Just(Some("Orphan")),
            Just(Some("Delete")),
            Just(Some("MirrorPrune"))
        ],
        any::<bool>(),
        prop::collection::vec(0..4usize, 0..2),
    )
        .prop_map(|(prune, policy, has_inventory, depends_on)| Stack {
            prune: prune || policy.is_none() && has_inventory,
            policy,
            has_inventory,
            depends_on,
        })
}

fn object(objects: usize) -> impl Strategy<Value = Object> {
    (
        prop::option::of(0..4usize),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.15),
        prop::option::weighted(0.3, 0..objects),
        prop::collection::vec(0..objects, 0..3),
        any::<bool>(),
        prop::bool::weighted(0.25),
    )
        .prop_map(
            |(stack, in_inventory, second_tool, keep, depends_on, owners, controller, custom)| Object {
                stack,
                in_inventory,
                second_tool,
                keep,
                depends_on,
                owners,
                controller,
                custom,
            },
        )
}

fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec(stack(), 4),
        prop::collection::vec(object(12), 12),
        prop::option::of(0..4usize),
        0..4usize,
    )
        .prop_map(|(mut stacks, mut objects, operator_stack, torn_down)| {
            // dependsOn only on lower stacks: no cycle among stacks.
            for (index, stack) in stacks.iter_mut().enumerate() {
                stack.depends_on.retain(|d| *d < index);
                stack.depends_on.dedup();
            }
            // Owners and depends-on only point to other objects; owners to lower ones (no cycle).
            for (index, object) in objects.iter_mut().enumerate() {
                object.owners.retain(|o| *o < index);
                object.owners.dedup();
                if object.depends_on.is_some_and(|target| target >= index) {
                    object.depends_on = None; // only on lower objects: no cycle
                }
            }
            World {
                stacks,
                objects,
                operator_stack,
                torn_down,
            }
        })
}

fn stack_name(index: usize) -> String {
    format!("s{index}")
}

fn object_name(index: usize) -> String {
    format!("o{index}")
}

fn object_id(world: &World, index: usize) -> ObjectId {
    if world.objects[index].custom {
        ObjectId::new(OPS, "Gizmo", Some("app"), &object_name(index))
    } else {
        ObjectId::new("", "ConfigMap", Some("app"), &object_name(index))
    }
}

fn flux_labels(stack: usize) -> Vec<(String, String)> {
    vec![
        (format!("{FLUX}/name"), stack_name(stack)),
        (format!("{FLUX}/namespace"), FLUX_NS.to_string()),
    ]
}

/// The cluster the world describes: listed objects and graph inputs.
struct Cluster {
    objects: HashMap<ObjectId, Listed>,
    inputs: Vec<NodeInput>,
}

impl Cluster {
    fn add(&mut self, kind: KindInfo, meta: ObjectMeta, body: Option<serde_json::Value>) {
        let listed = Listed::new(Arc::new(kind), meta.clone());
        let id = listed.id();
        self.inputs.push(NodeInput {
            id: id.clone(),
            uid: meta.uid.clone(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            depends_on: Vec::new(),
            body,
            app: None,
        });
        self.objects.insert(id, listed);
    }
}

fn meta(
    name: &str,
    namespace: Option<&str>,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        uid: Some(format!("uid-{}-{name}", namespace.unwrap_or("-"))),
        labels: Some(labels.into_iter().collect::<BTreeMap<_, _>>()),
        annotations: Some(annotations.into_iter().collect::<BTreeMap<_, _>>()),
        ..Default::default()
    }
}

fn cluster(world: &World) -> Cluster {
    let mut cluster = Cluster {
        objects: HashMap::new(),
        inputs: Vec::new(),
    };
    for (index, stack) in world.stacks.iter().enumerate() {
        let inventory: Vec<serde_json::Value> = world
            .objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o.stack == Some(index) && o.in_inventory)
            .map(|(i, _)| {
                let id = object_id(world, i);
                json!({"id": format!("app_{}_{}_{}", id.name, id.group, id.kind), "v": "v1"})
            })
            .collect();
        let mut spec = json!({"prune": stack.prune});
        if let Some(policy) = stack.policy {
            spec["deletionPolicy"] = json!(policy);
        }
        let mut body = json!({"spec": spec});
        if stack.has_inventory {
            body["status"] = json!({"inventory": {"entries": inventory}});
        }
        let name = stack_name(index);
        cluster.add(
            kind(FLUX, "Kustomization", true),
            meta(&name, Some(FLUX_NS), vec![], vec![]),
            Some(body.clone()),
        );
        let input = cluster.inputs.last_mut().unwrap();
        input.depends_on = stack
            .depends_on
            .iter()
            .map(|d| ObjectId::new(FLUX, "Kustomization", Some(FLUX_NS), &stack_name(*d)))
            .collect();
    }
    if let Some(operator) = world.operator_stack {
        let labels = flux_labels(operator);
        cluster.add(
            kind("apiextensions.k8s.io", "CustomResourceDefinition", false),
            meta(&format!("gizmos.{OPS}"), None, labels.clone(), vec![]),
            None,
        );
        cluster.add(
            kind("apps", "Deployment", true),
            meta("operator", Some("ops"), labels, vec![]),
            None,
        );
    }
    for (index, object) in world.objects.iter().enumerate() {
        let mut labels = object.stack.map(flux_labels).unwrap_or_default();
        let mut annotations = Vec::new();
        if object.second_tool {
            annotations.push((
                "config.k8s.io/owning-inventory".to_string(),
                "other-inventory".to_string(),
            ));
        }
        if object.keep {
            labels.push((format!("{FLUX}/prune"), "disabled".to_string()));
            annotations.push((format!("{FLUX}/prune"), "disabled".to_string()));
        }
        if let Some(target) = object.depends_on {
            let id = object_id(world, target);
            annotations.push((
                "config.kubernetes.io/depends-on".to_string(),
                format!("{}/namespaces/app/{}/{}", id.group, id.kind, id.name),
            ));
        }
        let id = object_id(world, index);
        let mut meta = meta(&id.name, Some("app"), labels, annotations);
        meta.owner_references = Some(
            object
                .owners
                .iter()
                .enumerate()
                .map(|(position, owner)| OwnerReference {
                    api_version: "v1".into(),
                    kind: object_id(world, *owner).kind,
                    name: object_name(*owner),
                    uid: format!("uid-app-{}", object_name(*owner)),
                    controller: Some(position == 0 && object.controller),
                    ..Default::default()
                })
                .collect(),
        );
        if object.custom {
            meta.finalizers = Some(vec![format!("{OPS}/cleanup")]);
            cluster.add(kind(OPS, "Gizmo", true), meta, None);
        } else {
            cluster.add(kind("", "ConfigMap", true), meta, None);
        }
    }
    cluster
}

/// The stacks a teardown of `named` takes: it and whatever depends on it, transitively.
fn torn_down_stacks(world: &World) -> HashSet<usize> {
    let mut torn: HashSet<usize> = [world.torn_down].into();
    loop {
        let before = torn.len();
        for (index, stack) in world.stacks.iter().enumerate() {
            if stack.depends_on.iter().any(|d| torn.contains(d)) {
                torn.insert(index);
            }
        }
        if torn.len() == before {
            return torn;
        }
    }
}

/// The oracle: would kustomize-controller, deleting stack `stack`, delete this object?
/// (fluxcd/kustomize-controller `finalizerShouldDeleteResources` and `finalize`.)
fn flux_gc_deletes(world: &World, stack: usize, object: &Object) -> bool {
    let policy = &world.stacks[stack];
    let deletes = match policy.policy.unwrap_or("MirrorPrune") {
        "MirrorPrune" => policy.prune,
        "Delete" => true,
        _ => false,
    };
    // Without a status.inventory, kubectl-stack falls back to the labels (README, Known gaps):
    // the oracle allows that fallback and no more.
    let recorded = !policy.has_inventory || object.in_inventory;
    deletes && recorded && object.stack == Some(stack) && !object.keep
}

/// Whether the oracle allows the plan to delete this object: every tool that marks it would.
fn oracle_allows(world: &World, torn: &HashSet<usize>, object: &Object) -> bool {
    match object.stack {
        Some(stack) => torn.contains(&stack) && flux_gc_deletes(world, stack, object) && !object.second_tool,
        None => false,
    }
}

/// The plan of tearing down the world's named stack; `None` when it is refused because the
/// declared and structural order contradict each other (a cycle: exit 6, nothing deleted).
fn teardown(world: &World, cluster: &Cluster) -> Option<(PrunePlan, kubectl_stack::graph::Graph)> {
    let graph = build(
        &cluster.inputs,
        &BuildOptions {
            members: true,
            infer: true,
            crd_names: [((OPS.to_string(), "Gizmo".to_string()), format!("gizmos.{OPS}"))].into(),
            ..Default::default()
        },
    );
    let tracked: Vec<ObjectId> = cluster.objects.keys().cloned().collect();
    let snapshot = Snapshot {
        graph: &graph,
        objects: &cluster.objects,
        tracked: &tracked,
    };
    let named = graph
        .find(&ObjectId::new(
            FLUX,
            "Kustomization",
            Some(FLUX_NS),
            &stack_name(world.torn_down),
        ))
        .expect("the named stack is a node");
    let chosen = teardown_closure(&graph, &[named]);
    match plan(&snapshot, &catalog(), chosen, Vec::new(), Mode::Teardown(Vec::new())) {
        Ok(planned) => Some((planned, graph)),
        Err(err) if err.code == kubectl_stack::error::exit::CYCLE => None,
        Err(err) => panic!("{err:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn a_teardown_deletes_only_what_the_tools_would_in_an_order_every_edge_allows(world in world()) {
        let cluster = cluster(&world);
        let Some((planned, graph)) = teardown(&world, &cluster) else {
            return Ok(()); // refused as a whole: nothing deleted
        };
        let torn = torn_down_stacks(&world);
        let wave_of: HashMap<ObjectId, usize> = planned
            .waves
            .iter()
            .enumerate()
            .flat_map(|(wave, targets)| targets.iter().map(move |t| (t.id.clone(), wave)))
            .collect();
        // 1. Nothing the oracle keeps.
        for (index, object) in world.objects.iter().enumerate() {
            let id = object_id(&world, index);
            if wave_of.contains_key(&id) {
                prop_assert!(
                    oracle_allows(&world, &torn, object),
                    "{id} deleted, but its tool keeps it: {object:?}\nworld: {world:#?}"
                );
            }
        }
        // 3. Every edge among what is deleted orders the waves (a dependent goes first).
        for edge in graph.all_edges() {
            let (from, to) = (&graph.nodes[edge.from].id, &graph.nodes[edge.to].id);
            if let (Some(a), Some(b)) = (wave_of.get(from), wave_of.get(to)) {
                prop_assert!(a <= b, "{from} (wave {a}) needs {to} (wave {b}), {:?}", edge.kind);
            }
        }
        // 4. What stays keeps what it needs.
        let planned_uids: HashSet<String> = planned.waves.iter().flatten().map(|t| t.uid.clone()).collect();
        for edge in graph.all_edges().filter(|e| e.kind.is_need()) {
            let (from, to) = (&graph.nodes[edge.from].id, &graph.nodes[edge.to].id);
            let Some(dependent) = cluster.objects.get(from) else { continue };
            let stays = !wave_of.contains_key(from)
                && !dies_with(&dependent.meta, &planned_uids, &cluster);
            prop_assert!(
                !(stays && wave_of.contains_key(to)),
                "{from} stays, but {to}, which it needs ({:?}), is deleted\nworld: {world:#?}",
                edge.kind
            );
        }
    }
}

/// The garbage collector's rule, written apart: an object goes with its owners only when every
/// one of them goes (is planned, or goes in turn).
fn dies_with(meta: &ObjectMeta, planned: &HashSet<String>, cluster: &Cluster) -> bool {
    let owners: Vec<&OwnerReference> = meta.owner_references.iter().flatten().collect();
    !owners.is_empty()
        && owners.iter().all(|owner| {
            planned.contains(&owner.uid)
                || cluster
                    .objects
                    .values()
                    .find(|o| o.meta.uid.as_deref() == Some(owner.uid.as_str()))
                    .is_some_and(|o| dies_with(&o.meta, planned, cluster))
        })
}
