//! Planning a prune: which objects a teardown (named stacks) or an orphan prune deletes, which
//! it keeps and why, and in which waves. Every rule that keeps an object is a function of
//! [`crate::safeguards`]; this module applies them until nothing changes, then plans the waves
//! with the one planner, [`crate::plan::plan_deletion`].

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::collect::Listed;
use crate::discovery::Catalog;
use crate::error::{exit, UserError};
use crate::execute::Target;
use crate::graph::{full_marks, owner_mark, EdgeKind, Graph, NodeInput, NodeStatus};
use crate::graph_output::cycle_path;
use crate::identity::ObjectId;
use crate::parents::find_parents;
use crate::plan::plan_deletion;
use crate::safeguards::{
    ambiguous_mark, controlled, dies_with_plan, holds_staying, keep_marked, needed_by_staying, orphaned_by_tracker,
    tracked_elsewhere, TornDown, Trackers,
};
use crate::trackers::{marks, MarkValue, Preset};

/// An object left alone on purpose, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The object.
    pub id: ObjectId,
    /// Why.
    pub reason: String,
}

/// What a prune will do.
#[derive(Debug, Clone, Default)]
pub struct PrunePlan {
    /// Deletion waves.
    pub waves: Vec<Vec<Target>>,
    /// Objects left alone, with the reason.
    pub kept: Vec<Kept>,
    /// The stacks torn down (empty for an orphan prune): what the re-check measures marks against.
    pub torn_down: TornDown,
    /// Each planned object's planned dependencies (it goes first; they must stay if it stays).
    pub depends_on: HashMap<ObjectId, Vec<ObjectId>>,
    /// Things to tell before asking (e.g. a stack that a parent would re-create).
    pub warnings: Vec<String>,
    /// The tracking objects of each planned member (a member that stays keeps its trackers'
    /// controllers from cleaning up: see [`crate::suspend`]).
    pub trackers_of: HashMap<ObjectId, Vec<ObjectId>>,
    /// Planned tracking objects with a member the plan keeps: deleted while still suspended, so
    /// that their controller does not garbage-collect the kept member.
    pub keep_suspended: HashSet<ObjectId>,
    /// What the planned Namespaces and CRDs would take beyond the plan (filled in by
    /// [`crate::cascade::find_cascades`]; accepted with `--allow-cascade`).
    pub cascades: Vec<crate::cascade::Cascade>,
    /// Live reconcilers outside the plan that would re-create planned objects, up their chains
    /// (see [`crate::parents`]).
    pub parents: Vec<crate::parents::Parent>,
}

impl PrunePlan {
    /// How many objects the plan deletes.
    pub fn count(&self) -> usize {
        self.waves.iter().map(Vec::len).sum()
    }
}

/// What a prune plans over: the live graph and the listed objects behind it.
pub struct Snapshot<'a> {
    /// The graph (members attached).
    pub graph: &'a Graph,
    /// The listed object of each selected node.
    pub objects: &'a HashMap<ObjectId, Listed>,
    /// Every tracked object that was listed, in the graph or not.
    pub tracked: &'a [ObjectId],
}

/// Which kind of prune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Named stacks, their members and their dependents; with the keys of named stacks whose
    /// tracking object is already gone (a run again after a partial teardown).
    Teardown(Vec<(Preset, MarkValue)>),
    /// Orphans of a desired set.
    Orphans,
}

/// The tracker key of a listed object that is a tracking object itself (Kustomization,
/// HelmRelease, Argo CD Application, inventory object, ApplySet parent).
pub fn tracker_key(object: &Listed) -> Option<(Preset, MarkValue)> {
    owner_mark(&NodeInput {
        id: object.id(),
        labels: object.meta.labels.clone().unwrap_or_default(),
        annotations: object.meta.annotations.clone().unwrap_or_default(),
        ..Default::default()
    })
}

/// The named nodes, their members, and everything that depends on any of them through an
/// explicit dependency, transitively. Each chosen node says why it was chosen.
pub fn teardown_closure(graph: &Graph, named: &[usize]) -> HashMap<usize, String> {
    let mut chosen: HashMap<usize, String> = named.iter().map(|&i| (i, "named".to_string())).collect();
    let mut queue: Vec<usize> = named.to_vec();
    while let Some(current) = queue.pop() {
        let mut add = |index: usize, why: String, queue: &mut Vec<usize>| {
            if graph.nodes[index].status == NodeStatus::Selected && !chosen.contains_key(&index) {
                chosen.insert(index, why);
                queue.push(index);
            }
        };
        for member in graph.members_of(current) {
            add(member, format!("member of {}", graph.nodes[current].id), &mut queue);
        }
        // Only explicit dependencies pull dependents in. An object that merely lives in a
        // Namespace, or is an instance of a CRD, being torn down belongs to its own stack: it is
        // not deleted, and it keeps its Namespace or CRD alive.
        let explicit = |e: &&crate::graph::Edge| e.to == current && e.kind.is_declared();
        for edge in graph.edges.iter().filter(explicit) {
            add(
                edge.from,
                format!("depends on {} ({})", graph.nodes[current].id, edge.kind.label()),
                &mut queue,
            );
        }
    }
    chosen
}

/// The members, still in the graph, of a stack whose tracking object is already gone (a teardown
/// run again after a partial one): the objects that carry its full mark. A mark that names its
/// stack by name only could belong to a live stack of that name elsewhere: it never counts here.
pub fn members_of_gone(snapshot: &Snapshot, key: &(Preset, MarkValue)) -> Vec<usize> {
    let gone = TornDown::new([key.clone()]);
    snapshot
        .graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.status == NodeStatus::Selected)
        .filter(|(_, node)| {
            snapshot.objects.get(&node.id).is_some_and(|o| {
                marks(&o.meta)
                    .iter()
                    .any(|m| gone.covers(m) && m.value.namespace.is_some())
            })
        })
        .map(|(index, _)| index)
        .collect()
}

/// Applies every safeguard to the chosen nodes until nothing changes, then plans the waves.
pub fn plan(
    snapshot: &Snapshot,
    catalog: &Catalog,
    chosen: HashMap<usize, String>,
    mut kept: Vec<Kept>,
    mode: Mode,
) -> Result<PrunePlan, UserError> {
    let graph = snapshot.graph;
    let object_of = |index: usize| snapshot.objects.get(&graph.nodes[index].id);
    let all_keys: Vec<(Preset, MarkValue)> = snapshot.objects.values().filter_map(tracker_key).collect();
    let trackers = Trackers::new(all_keys.iter());
    let mut targets: BTreeMap<usize, String> = BTreeMap::new();
    let chosen_nodes: HashSet<usize> = chosen.keys().copied().collect();
    for (index, why) in chosen {
        let Some(object) = object_of(index) else { continue };
        let id = graph.nodes[index].id.clone();
        let tool_keeps = || crate::policy::tool_keeps(object, None);
        if let Some(reason) = keep_marked(&object.meta)
            .or_else(|| ambiguous_mark(&object.meta, &trackers))
            .or_else(tool_keeps)
            .or_else(|| orphaned_by_tracker(graph, index, |owner| chosen_nodes.contains(&owner)))
        {
            kept.push(Kept { id, reason });
        } else if let Some(owner) = controlled(&object.meta) {
            tracing::info!("{id} is left to its controller {owner}");
        } else {
            targets.insert(index, why);
        }
    }
    let owners_of: HashMap<String, Vec<String>> = snapshot
        .objects
        .values()
        .map(|o| {
            let owners = o
                .meta
                .owner_references
                .iter()
                .flatten()
                .map(|r| r.uid.clone())
                .collect();
            (o.uid().to_string(), owners)
        })
        .collect();
    let mut torn_down = TornDown::default();
    loop {
        let before = targets.len();
        if let Mode::Teardown(gone) = &mode {
            let planned_keys = targets.keys().filter_map(|&i| object_of(i).and_then(tracker_key));
            torn_down = TornDown::new(planned_keys.chain(gone.iter().cloned()));
            let shared: Vec<(usize, String)> = targets
                .keys()
                .filter_map(|&i| {
                    let object = object_of(i)?;
                    if tracker_key(object).is_some() {
                        return None; // a stack's own parent: see `parent_warnings`
                    }
                    tracked_elsewhere(&object.meta, &torn_down).map(|why| (i, why))
                })
                .collect();
            keep_out(graph, &mut targets, &mut kept, shared);
        }
        let planned_uids: HashSet<String> = targets
            .keys()
            .filter_map(|&i| object_of(i).map(|o| o.uid().to_string()))
            .collect();
        let stays = |index: usize| {
            graph.nodes[index].status == NodeStatus::Selected
                && !targets.contains_key(&index)
                && object_of(index).is_some_and(|o| !dies_with_plan(&o.meta, &planned_uids, &owners_of))
        };
        let planned: HashSet<usize> = targets.keys().copied().collect();
        let needed: Vec<(usize, String)> = needed_by_staying(graph, &planned, stays).into_iter().collect();
        let held = holders(snapshot, catalog, &targets, &stays);
        keep_out(graph, &mut targets, &mut kept, needed);
        keep_out(graph, &mut targets, &mut kept, held);
        if targets.len() == before {
            break;
        }
    }
    let teardown = matches!(mode, Mode::Teardown(_));
    if teardown {
        kept.extend(ambiguous_members(snapshot, &trackers, &torn_down, &targets));
    }
    let (warnings, parents) = if teardown {
        let planned = targets.keys().filter_map(|&i| object_of(i));
        let parents = find_parents(planned, snapshot.objects.values(), &torn_down);
        (parent_warnings(snapshot, &targets, &torn_down, &parents), parents)
    } else {
        (Vec::new(), Vec::new())
    };
    let indices: HashSet<usize> = targets.keys().copied().collect();
    let order = plan_deletion(graph, &indices).map_err(|cycle| {
        UserError::new(exit::CYCLE, format!("dependency cycle: {}", cycle_path(graph, &cycle)))
            .hint("no deletion order exists; fix the dependsOn/depends-on annotations")
    })?;
    let waves = order
        .waves
        .iter()
        .map(|wave| {
            wave.iter()
                .filter_map(|&index| {
                    let object = object_of(index)?;
                    let why = crate::graph_output::plan_why(graph, index, &indices, targets.get(&index));
                    Some(target(object, why))
                })
                .collect()
        })
        .collect();
    kept.sort_by(|a, b| a.id.cmp(&b.id));
    kept.dedup();
    let trackers_of = trackers_of(graph, &indices);
    let kept_ids: HashSet<&ObjectId> = kept.iter().map(|k| &k.id).collect();
    let keep_suspended = graph
        .members
        .iter()
        .filter(|m| indices.contains(&m.owner) && kept_ids.contains(&graph.nodes[m.member].id))
        .map(|m| graph.nodes[m.owner].id.clone())
        .collect();
    Ok(PrunePlan {
        waves,
        kept,
        torn_down,
        depends_on: planned_dependencies(graph, &indices),
        warnings,
        trackers_of,
        keep_suspended,
        cascades: Vec::new(),
        parents,
    })
}

/// For each member of a planned tracking object, its planned trackers.
fn trackers_of(graph: &Graph, planned: &HashSet<usize>) -> HashMap<ObjectId, Vec<ObjectId>> {
    let mut found: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    for membership in graph.members.iter().filter(|m| planned.contains(&m.owner)) {
        found
            .entry(graph.nodes[membership.member].id.clone())
            .or_default()
            .push(graph.nodes[membership.owner].id.clone());
    }
    found
}

/// A deletion target from a listed object.
pub fn target(object: &Listed, why: String) -> Target {
    Target {
        id: object.id(),
        kind: object.kind.clone(),
        uid: object.uid().to_string(),
        why,
        terminating: object.is_terminating(),
        finalizers: object.finalizers().to_vec(),
        tracked_by: crate::trackers::describe_marks(&object.meta),
    }
}

/// Moves nodes from the targets to the kept list.
fn keep_out(graph: &Graph, targets: &mut BTreeMap<usize, String>, kept: &mut Vec<Kept>, out: Vec<(usize, String)>) {
    for (index, reason) in out {
        if targets.remove(&index).is_some() {
            kept.push(Kept {
                id: graph.nodes[index].id.clone(),
                reason,
            });
        }
    }
}

/// The Namespaces and CRDs among the targets that hold an object that stays: a node of the graph
/// that stays, or a listed tracked object outside the graph that is not planned.
fn holders(
    snapshot: &Snapshot,
    catalog: &Catalog,
    targets: &BTreeMap<usize, String>,
    stays: &dyn Fn(usize) -> bool,
) -> Vec<(usize, String)> {
    let graph = snapshot.graph;
    let planned: HashSet<&ObjectId> = targets.keys().map(|&i| &graph.nodes[i].id).collect();
    let staying: Vec<&ObjectId> = snapshot
        .tracked
        .iter()
        .filter(|id| match graph.find(id) {
            Some(index) if snapshot.objects.contains_key(*id) => stays(index),
            _ => !planned.contains(id),
        })
        .collect();
    let crd_of = |id: &ObjectId| catalog.get(&id.group, &id.kind).map(|k| k.crd_name());
    targets
        .keys()
        .filter_map(|&index| {
            let holder = &graph.nodes[index].id;
            if holder.group == "apiextensions.k8s.io"
                && holder.kind == "CustomResourceDefinition"
                && !catalog.kinds().iter().any(|k| k.crd_name() == holder.name)
            {
                // No version is served: its custom resources cannot be listed, so what it would
                // take with it cannot be known.
                return Some((
                    index,
                    "its custom resources cannot be listed (no version is served)".to_string(),
                ));
            }
            holds_staying(holder, staying.iter().copied(), crd_of)
                .map(|held| (index, format!("holds {held}, which is not pruned")))
        })
        .collect()
}

/// Tracking objects in the plan that a stack outside the plan applies, when that parent is not
/// one of the live reconcilers of [`crate::parents`] (refused unless held): a kpt inventory or an
/// ApplySet (their next apply re-creates them), or an Argo CD Application that was not listed
/// (it may live all the same). Flux parents are always listed: one not found is gone.
fn parent_warnings(
    snapshot: &Snapshot,
    targets: &BTreeMap<usize, String>,
    torn_down: &TornDown,
    parents: &[crate::parents::Parent],
) -> Vec<String> {
    let found_argo = |mark: &crate::trackers::Mark| {
        parents.iter().any(|p| {
            p.id.group == "argoproj.io"
                && p.id.kind == "Application"
                && p.id.name == mark.value.name
                && (mark.value.namespace.is_none() || p.id.namespace == mark.value.namespace)
        })
    };
    targets
        .keys()
        .filter_map(|&index| {
            let object = snapshot.objects.get(&snapshot.graph.nodes[index].id)?;
            tracker_key(object)?;
            let parent = full_marks(&object.meta).into_iter().find(|m| {
                !torn_down.covers(m)
                    && match m.preset {
                        Preset::Flux | Preset::FluxHelm => false,
                        Preset::ArgoCd => !found_argo(m),
                        _ => true,
                    }
            })?;
            Some(format!(
                "{} is applied by {parent}, which is not torn down: its next apply or sync may re-create it (tear that stack down too)",
                object.id()
            ))
        })
        .collect()
}

/// Objects whose name-only mark could name one of the stacks torn down, or another stack of that
/// name: reported as kept, never deleted (the graph does not hang them under either).
fn ambiguous_members(
    snapshot: &Snapshot,
    trackers: &Trackers,
    torn_down: &TornDown,
    targets: &BTreeMap<usize, String>,
) -> Vec<Kept> {
    let planned: HashSet<&ObjectId> = targets.keys().map(|&i| &snapshot.graph.nodes[i].id).collect();
    let mut found: Vec<Kept> = snapshot
        .objects
        .values()
        .filter(|o| !planned.contains(&o.id()))
        .filter(|o| {
            full_marks(&o.meta)
                .iter()
                .any(|m| m.value.namespace.is_none() && torn_down.names(m.preset, &m.value.name))
        })
        .filter_map(|o| ambiguous_mark(&o.meta, trackers).map(|reason| Kept { id: o.id(), reason }))
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// For each planned node, the planned nodes it depends on directly.
fn planned_dependencies(graph: &Graph, planned: &HashSet<usize>) -> HashMap<ObjectId, Vec<ObjectId>> {
    let mut depends: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    for edge in &graph.edges {
        if planned.contains(&edge.from) && planned.contains(&edge.to) {
            depends
                .entry(graph.nodes[edge.from].id.clone())
                .or_default()
                .push(graph.nodes[edge.to].id.clone());
        }
    }
    depends
}

impl EdgeKind {
    /// Whether people declared this dependency (dependsOn, depends-on, sync waves, kapp rules),
    /// rather than it following from where an object lives (its Namespace, its CRD).
    pub fn is_declared(self) -> bool {
        !matches!(self, EdgeKind::Namespace | EdgeKind::Crd) && !self.is_inferred()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{build, BuildOptions};
    use crate::trackers::{FLUX_KS_NAME, FLUX_KS_NAMESPACE};
    use kube::core::ObjectMeta;
    use std::sync::Arc;

    const KS_GROUP: &str = "kustomize.toolkit.fluxcd.io";

    use crate::fixtures::kind;

    fn catalog() -> Catalog {
        Catalog::new(
            vec![
                kind("", "ConfigMap", true),
                kind("", "Namespace", false),
                kind(KS_GROUP, "Kustomization", true),
            ],
            vec![],
            crate::discovery::DiscoverySource::PerGroup,
        )
    }

    /// A small cluster: objects with labels and annotations, listed.
    struct World {
        objects: HashMap<ObjectId, Listed>,
        inputs: Vec<NodeInput>,
    }

    impl World {
        fn new() -> Self {
            Self {
                objects: HashMap::new(),
                inputs: Vec::new(),
            }
        }

        fn add(
            &mut self,
            group: &str,
            kind_name: &str,
            ns: Option<&str>,
            name: &str,
            labels: &[(&str, &str)],
        ) -> &mut NodeInput {
            self.add_with(group, kind_name, ns, name, labels, &[])
        }

        fn add_with(
            &mut self,
            group: &str,
            kind_name: &str,
            ns: Option<&str>,
            name: &str,
            labels: &[(&str, &str)],
            annotations: &[(&str, &str)],
        ) -> &mut NodeInput {
            let labels: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let annotations: BTreeMap<String, String> = annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let meta = ObjectMeta {
                name: Some(name.into()),
                namespace: ns.map(str::to_string),
                uid: Some(format!("uid-{name}")),
                labels: Some(labels.clone()),
                annotations: Some(annotations.clone()),
                ..Default::default()
            };
            let listed = Listed::new(Arc::new(kind(group, kind_name, ns.is_some())), meta);
            let id = listed.id();
            self.objects.insert(id.clone(), listed);
            self.inputs.push(NodeInput {
                id,
                uid: Some(format!("uid-{name}")),
                labels,
                annotations,
                ..Default::default()
            });
            self.inputs.last_mut().unwrap()
        }

        fn ks(&mut self, name: &str, depends_on: &[&str]) -> &mut NodeInput {
            let input = self.add(KS_GROUP, "Kustomization", Some("flux-system"), name, &[]);
            input.depends_on = depends_on
                .iter()
                .map(|d| ObjectId::new(KS_GROUP, "Kustomization", Some("flux-system"), d))
                .collect();
            input
        }

        fn member(&mut self, name: &str, stack: &str) -> &mut NodeInput {
            self.add(
                "",
                "ConfigMap",
                Some("shop"),
                name,
                &[(FLUX_KS_NAME, stack), (FLUX_KS_NAMESPACE, "flux-system")],
            )
        }

        fn teardown(&self, named: &[&str]) -> PrunePlan {
            let graph = build(
                &self.inputs,
                &BuildOptions {
                    members: true,
                    ..Default::default()
                },
            );
            let tracked: Vec<ObjectId> = self.objects.keys().cloned().collect();
            let snapshot = Snapshot {
                graph: &graph,
                objects: &self.objects,
                tracked: &tracked,
            };
            let named: Vec<usize> = named
                .iter()
                .map(|n| {
                    graph
                        .find(&ObjectId::new(KS_GROUP, "Kustomization", Some("flux-system"), n))
                        .unwrap()
                })
                .collect();
            let chosen = teardown_closure(&graph, &named);
            plan(&snapshot, &catalog(), chosen, Vec::new(), Mode::Teardown(Vec::new())).unwrap()
        }
    }

    fn names(plan: &PrunePlan) -> Vec<Vec<String>> {
        plan.waves
            .iter()
            .map(|w| w.iter().map(|t| t.id.name.clone()).collect())
            .collect()
    }

    fn kept(plan: &PrunePlan) -> Vec<String> {
        plan.kept.iter().map(|k| k.id.name.clone()).collect()
    }

    #[test]
    fn naming_the_operator_pulls_in_its_dependent_stack_first() {
        let mut world = World::new();
        world.ks("usage", &["operator"]);
        world.ks("operator", &[]);
        world.member("cr", "usage");
        world.member("controller", "operator");
        let plan = world.teardown(&["operator"]);
        assert_eq!(
            names(&plan),
            vec![vec!["cr"], vec!["usage"], vec!["controller"], vec!["operator"]]
        );
        assert!(
            plan.waves[1][0].why.contains("depends on"),
            "{:?}",
            plan.waves[1][0].why
        );
        assert!(plan.kept.is_empty());
    }

    #[test]
    fn members_flux_would_orphan_are_kept_and_their_kustomization_goes() {
        for (spec, why) in [
            (serde_json::json!({"prune": false}), "spec.prune=false"),
            (
                serde_json::json!({"prune": true, "deletionPolicy": "Orphan"}),
                "spec.deletionPolicy=Orphan",
            ),
        ] {
            let mut world = World::new();
            world.ks("keeper", &[]).body = Some(serde_json::json!({ "spec": spec }));
            world.member("left", "keeper");
            let plan = world.teardown(&["keeper"]);
            assert_eq!(names(&plan), vec![vec!["keeper"]]);
            assert_eq!(kept(&plan), vec!["left"]);
            assert!(plan.kept[0].reason.contains("Flux would orphan it"), "{:?}", plan.kept);
            assert!(plan.kept[0].reason.contains(why), "{:?}", plan.kept);
        }
        for spec in [
            serde_json::json!({"prune": true}),
            serde_json::json!({"prune": false, "deletionPolicy": "Delete"}),
            serde_json::json!({"prune": false, "deletionPolicy": "WaitForTermination"}),
            serde_json::json!({}),
        ] {
            let mut world = World::new();
            world.ks("pruner", &[]).body = Some(serde_json::json!({ "spec": spec }));
            world.member("gone", "pruner");
            let plan = world.teardown(&["pruner"]);
            assert_eq!(names(&plan), vec![vec!["gone"], vec!["pruner"]], "{spec}");
        }
    }

    #[test]
    fn an_object_another_stack_also_tracks_is_kept() {
        let mut world = World::new();
        world.ks("a", &[]);
        world.ks("h", &[]);
        world.member("only-a", "a");
        world.add(
            "",
            "ConfigMap",
            Some("shop"),
            "shared",
            &[(FLUX_KS_NAME, "a"), (FLUX_KS_NAMESPACE, "flux-system")],
        );
        world
            .inputs
            .last_mut()
            .unwrap()
            .annotations
            .insert("config.k8s.io/owning-inventory".into(), "inv-1".into());
        if let Some(o) = world
            .objects
            .get_mut(&ObjectId::new("", "ConfigMap", Some("shop"), "shared"))
        {
            o.meta
                .annotations
                .get_or_insert_with(Default::default)
                .insert("config.k8s.io/owning-inventory".into(), "inv-1".into());
        }
        let plan = world.teardown(&["a"]);
        assert_eq!(names(&plan), vec![vec!["only-a"], vec!["a"]]);
        assert_eq!(kept(&plan), vec!["shared"]);
        assert!(plan.kept[0].reason.contains("kpt:inv-1"), "{:?}", plan.kept);
    }

    #[test]
    fn a_kept_dependent_keeps_what_it_depends_on_and_its_members() {
        let mut world = World::new();
        world.add(
            KS_GROUP,
            "Kustomization",
            Some("flux-system"),
            "app",
            &[("kustomize.toolkit.fluxcd.io/prune", "disabled")],
        );
        world.inputs.last_mut().unwrap().depends_on =
            vec![ObjectId::new(KS_GROUP, "Kustomization", Some("flux-system"), "base")];
        world.ks("base", &[]);
        world.member("app-member", "app");
        world.member("base-member", "base");
        let plan = world.teardown(&["base"]);
        assert!(plan.waves.is_empty(), "{:?}", names(&plan));
        let mut kept = kept(&plan);
        kept.sort();
        assert_eq!(kept, vec!["app", "app-member", "base", "base-member"]);
        let base = plan.kept.iter().find(|k| k.id.name == "base").unwrap();
        assert!(base.reason.contains("needed by"), "{}", base.reason);
    }

    #[test]
    fn a_namespace_holding_another_stacks_object_is_kept_but_a_dying_child_does_not_hold_it() {
        let mut world = World::new();
        world.ks("a", &[]);
        world.ks("b", &[]);
        world.add(
            "",
            "Namespace",
            None,
            "shop",
            &[(FLUX_KS_NAME, "a"), (FLUX_KS_NAMESPACE, "flux-system")],
        );
        world.member("mine", "a");
        let plan = world.teardown(&["a"]);
        assert_eq!(names(&plan), vec![vec!["mine"], vec!["shop"], vec!["a"]]);

        world.member("theirs", "b");
        let plan = world.teardown(&["a"]);
        assert_eq!(kept(&plan), vec!["shop"]);
        assert!(plan.kept[0].reason.contains("theirs"));
    }

    #[test]
    fn ambiguous_name_only_marks_are_never_acted_on() {
        let mut world = World::new();
        world.ks("dup", &[]);
        world.add(KS_GROUP, "Kustomization", Some("team-b"), "dup", &[]);
        world.add("", "ConfigMap", Some("shop"), "which", &[(FLUX_KS_NAME, "dup")]);
        let plan = world.teardown(&["dup"]);
        assert!(plan.waves.iter().flatten().all(|t| t.id.name != "which"));
        assert!(kept(&plan).contains(&"which".to_string()), "{:?}", plan.kept);
    }

    #[test]
    fn a_stack_applied_by_a_parent_names_the_parent() {
        let mut world = World::new();
        world.add(
            KS_GROUP,
            "Kustomization",
            Some("flux-system"),
            "child",
            &[(FLUX_KS_NAME, "flux-system"), (FLUX_KS_NAMESPACE, "flux-system")],
        );
        world.ks("flux-system", &[]);
        let plan = world.teardown(&["child"]);
        assert_eq!(names(&plan), vec![vec!["child"]]);
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
        assert_eq!(plan.parents.len(), 1);
        assert_eq!(plan.parents[0].id.name, "flux-system");
        assert!(plan.parents[0].applies_planned);
    }

    #[test]
    fn an_argo_cd_parent_that_was_not_listed_is_warned_about() {
        let mut world = World::new();
        world.add_with(
            KS_GROUP,
            "Kustomization",
            Some("flux-system"),
            "child",
            &[],
            &[(
                "argocd.argoproj.io/tracking-id",
                "root-app:kustomize.toolkit.fluxcd.io/Kustomization:flux-system/child",
            )],
        );
        let plan = world.teardown(&["child"]);
        assert_eq!(names(&plan), vec![vec!["child"]]);
        assert!(plan.parents.is_empty());
        assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
        assert!(plan.warnings[0].contains("argocd:root-app"), "{:?}", plan.warnings);
    }

    #[test]
    fn members_of_a_gone_stack_are_found_by_their_mark() {
        let mut world = World::new();
        world.member("left", "gone");
        world.member("other", "stays");
        let graph = build(
            &world.inputs,
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        let tracked: Vec<ObjectId> = world.objects.keys().cloned().collect();
        let snapshot = Snapshot {
            graph: &graph,
            objects: &world.objects,
            tracked: &tracked,
        };
        let key = (
            Preset::Flux,
            MarkValue {
                name: "gone".into(),
                namespace: Some("flux-system".into()),
            },
        );
        let found = members_of_gone(&snapshot, &key);
        assert_eq!(found.len(), 1);
        assert_eq!(graph.nodes[found[0]].id.name, "left");
    }
}
