//! Planning a prune: which objects a teardown (named stacks) or an orphan prune deletes, which
//! it keeps and why, and in which waves. Every rule that keeps an object is a function of
//! [`crate::prune::safeguards`]; this module applies them until nothing changes, then plans the waves
//! with the one planner, [`crate::graph::plan::plan_deletion_told`].

mod closure;
mod keeps;

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::cluster::collect::Listed;
use crate::cluster::discovery::Catalog;
use crate::error::{exit, UserError};
use crate::graph::output::cycle_path;
use crate::graph::plan::plan_deletion_told;
use crate::graph::{tracker_key, Graph, NodeStatus};
use crate::model::identity::ObjectId;
use crate::model::trackers::{MarkValue, Preset, Tracker};
use crate::prune::execute::Target;
use crate::prune::safeguards::{dies_with_plan, needed_by_staying};
use crate::stack::desired::Needs;
use crate::stack::keep::{self, Claim, KeepReason, Question, Trackers};
use crate::stack::keep::{tracked_elsewhere, TornDown};
use crate::stack::parents::find_parents;

pub use closure::{members_of_gone, teardown_closure};
use keeps::{ambiguous_members, holders, parent_warnings, unplanned_record_members};

/// An object left alone on purpose, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The object.
    pub id: ObjectId,
    /// Why: the rule of the keep chain ([`crate::stack::keep`]) or of the plan ([`crate::prune::safeguards`]).
    pub reason: KeepReason,
}

/// What a prune will do.
#[derive(Debug, Clone, Default)]
pub struct PrunePlan {
    /// Deletion waves.
    pub waves: Vec<Vec<Target>>,
    /// Whether the plan's graph inferred the edges nobody declared (not `--no-infer`): the
    /// re-check before each wave builds its graph the same way.
    pub infer: bool,
    /// Whether the plan deletes with `--cascade=orphan`: nothing dies with a planned owner (see
    /// [`crate::graph::Graph::orphan_dependents`]); the re-check judges the same way.
    pub orphan_dependents: bool,
    /// Objects left alone, with the reason.
    pub kept: Vec<Kept>,
    /// The stacks torn down (empty for an orphan prune): what the re-check measures marks against.
    pub torn_down: TornDown,
    /// The tracking objects of the cluster when planned (what a name-only mark may mean).
    pub trackers: Trackers,
    /// The tracker an orphan prune named (`--tracker`): its tool's rules apply in the re-check
    /// as in the plan. `None` for a teardown.
    pub tracker: Option<Tracker>,
    /// What the objects of an orphan prune's desired set need (kpt prunes none of it:
    /// [`crate::stack::keep::kpt_needed`]): the re-check asks it as the plan did. Empty for a teardown.
    pub needs: Needs,
    /// How each stack an orphan prune's objects were judged by placed and named its manifests
    /// (see [`crate::stack::inventory::Placement`]): the re-check reads each stack again and
    /// drops what a stack that now places them otherwise marks. Empty for a teardown.
    pub placements: crate::stack::inventory::Placements,
    /// The planned tracking objects whose tool's record bounded their members: one whose
    /// record is gone by the re-check no longer says what its tool would delete.
    pub recorded_stacks: HashSet<ObjectId>,
    /// Each planned object's planned dependencies (it goes first; they must stay if it stays).
    pub depends_on: HashMap<ObjectId, Vec<ObjectId>>,
    /// Things to tell before asking (e.g. a stack that a parent would re-create).
    pub warnings: Vec<String>,
    /// The tracking objects of each planned member (a member that stays keeps its trackers'
    /// controllers from cleaning up: see [`crate::prune::suspend`]).
    pub trackers_of: HashMap<ObjectId, Vec<ObjectId>>,
    /// The mark each of those tracking objects carried when planned: the re-check reads its
    /// record beside it from the first wave (and keeps that read only while the mark holds).
    pub stack_marks: HashMap<ObjectId, (Preset, MarkValue)>,
    /// Planned tracking objects with a member the plan keeps: deleted while still suspended, so
    /// that their controller does not garbage-collect the kept member.
    pub keep_suspended: HashSet<ObjectId>,
    /// What the planned Namespaces and CRDs would take beyond the plan (filled in by
    /// [`crate::prune::cascade::find_cascades`]; accepted with `--allow-cascade`).
    pub cascades: Vec<crate::prune::cascade::Cascade>,
    /// Live reconcilers outside the plan that would re-create planned objects, up their chains
    /// (see [`crate::stack::parents`]).
    pub parents: Vec<crate::stack::parents::Parent>,
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
    /// Orphans of a desired set, with the tracker the user named and what the desired set's
    /// objects need (its tool's rules apply: the keep chain asks them of every planned orphan,
    /// as when it was classified).
    Orphans(Option<Tracker>, Box<Needs>),
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
    let all_keys: Vec<(Preset, MarkValue)> = snapshot.objects.values().filter_map(tracker_key).collect();
    let trackers = Trackers::new(all_keys.iter());
    let teardown = matches!(mode, Mode::Teardown(_));
    let (orphan_tracker, needs) = match &mode {
        Mode::Orphans(tracker, needs) => (tracker.clone(), Needs::clone(needs)),
        Mode::Teardown(_) => (None, Needs::default()),
    };
    let asked = Asked {
        trackers: &trackers,
        orphan_tracker: orphan_tracker.as_ref(),
        needs: &needs,
        teardown,
    };
    let mut targets = first_verdicts(snapshot, chosen, &asked, &mut kept);
    let torn_down = settle(snapshot, catalog, &mode, &mut targets, &mut kept);
    if teardown {
        kept.extend(ambiguous_members(snapshot, &trackers, &torn_down, &targets));
        let unplanned = unplanned_record_members(snapshot, &targets, &kept);
        kept.extend(unplanned);
    }
    let (mut warnings, parents) = if teardown {
        let planned = targets.keys().filter_map(|&i| snapshot.objects.get(&graph.nodes[i].id));
        let parents = find_parents(planned, snapshot.objects.values(), &torn_down);
        (parent_warnings(snapshot, &targets, &torn_down, &parents), parents)
    } else {
        (Vec::new(), Vec::new())
    };
    let indices: HashSet<usize> = targets.keys().copied().collect();
    warnings.extend(unordered_needs(graph, &indices));
    let (waves, unsatisfied) = waves_of(snapshot, &targets)?;
    warnings.extend(unsatisfied);
    // One line per object: the first reason found stands (the sort is stable).
    kept.sort_by(|a, b| a.id.cmp(&b.id));
    kept.dedup_by(|a, b| a.id == b.id);
    let keep_suspended = keep_suspended(graph, &indices, &kept);
    let planned_trackers = trackers_of(graph, &indices);
    Ok(PrunePlan {
        waves,
        // Set by the caller, which knows whether the graph inferred (`pruning::finish_plan`).
        infer: false,
        orphan_dependents: graph.orphan_dependents,
        kept,
        torn_down,
        trackers,
        tracker: orphan_tracker,
        needs,
        // Set by the caller, which read the stacks (`pruning::finish_plan`).
        placements: Default::default(),
        recorded_stacks: indices
            .iter()
            .filter(|i| graph.inventories.contains_key(i))
            .map(|&i| graph.nodes[i].id.clone())
            .collect(),
        depends_on: planned_dependencies(graph, &indices),
        warnings,
        stack_marks: stack_marks(snapshot, &planned_trackers),
        trackers_of: planned_trackers,
        keep_suspended,
        cascades: Vec::new(),
        parents,
    })
}

/// What the keep chain is asked of each chosen node.
struct Asked<'a> {
    trackers: &'a Trackers,
    orphan_tracker: Option<&'a Tracker>,
    needs: &'a Needs,
    teardown: bool,
}

/// The chosen nodes the keep chain lets go, each with why it was chosen; the others are kept,
/// each with its reason.
fn first_verdicts(
    snapshot: &Snapshot,
    chosen: HashMap<usize, String>,
    asked: &Asked,
    kept: &mut Vec<Kept>,
) -> BTreeMap<usize, String> {
    let graph = snapshot.graph;
    let chosen_nodes: HashSet<usize> = chosen.keys().copied().collect();
    let named: HashSet<usize> = chosen
        .iter()
        .filter(|(_, why)| *why == "named")
        .map(|(&i, _)| i)
        .collect();
    let mut targets = BTreeMap::new();
    for (index, why) in chosen {
        let Some(object) = snapshot.objects.get(&graph.nodes[index].id) else {
            continue;
        };
        let context = keep::Context {
            question: match asked.teardown {
                true => Question::Teardown {
                    claims: claims(graph, index, &chosen_nodes, &named),
                },
                // The orphans were judged (with their stack) when they were classified; the
                // tool the user named is asked again, as then.
                false => Question::Orphan {
                    tracker: asked.orphan_tracker,
                    recorded: None,
                    compared: true,
                    stack: None,
                    needs: Some(asked.needs),
                },
            },
            trackers: Some(asked.trackers),
        };
        // An orphan prune plans orphans already being deleted, to wait for them.
        match keep::reason(object, &context).filter(|r| *r != KeepReason::Terminating) {
            Some(reason) => kept.push(Kept {
                id: graph.nodes[index].id.clone(),
                reason,
            }),
            None => {
                targets.insert(index, why);
            }
        }
    }
    targets
}

/// Applies the safeguards until nothing changes: what another stack still tracks, what
/// something that stays needs, and what a Namespace or CRD that stays holds are kept out of
/// `targets` (into `kept`). Returns the stacks the plan tears down, as last settled.
fn settle(
    snapshot: &Snapshot,
    catalog: &Catalog,
    mode: &Mode,
    targets: &mut BTreeMap<usize, String>,
    kept: &mut Vec<Kept>,
) -> TornDown {
    let graph = snapshot.graph;
    let object_of = |index: usize| snapshot.objects.get(&graph.nodes[index].id);
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
    let argocd_outside = crate::graph::argocd_outside_namespaces(snapshot.objects.values().map(|o| &*o.meta));
    let mut torn_down = TornDown::default();
    loop {
        let before = targets.len();
        if let Mode::Teardown(gone) = mode {
            let planned_keys = targets.keys().filter_map(|&i| object_of(i).and_then(tracker_key));
            // A torn-down HelmRelease's Helm release (as its record names it) is its own.
            let aliases = targets
                .keys()
                .filter_map(|i| graph.inventories.get(i))
                .flat_map(|record| record.aliases.iter().cloned());
            torn_down = TornDown::new(planned_keys.chain(aliases).chain(gone.iter().cloned()))
                .with_argocd_outside(argocd_outside.clone());
            let shared: Vec<(usize, KeepReason)> = targets
                .keys()
                .filter_map(|&i| {
                    let object = object_of(i)?;
                    if tracker_key(object).is_some() {
                        return None; // a stack's own parent: see `parent_warnings`
                    }
                    tracked_elsewhere(&object.meta, &torn_down).map(|why| (i, why))
                })
                .collect();
            keep_out(graph, targets, kept, shared);
        }
        let planned_uids: HashSet<String> = targets
            .keys()
            .filter_map(|&i| object_of(i).map(|o| o.uid().to_string()))
            .collect();
        // A cascade victim dies with the planned Namespace or CRD that takes it; it stays (and
        // keeps what it needs) when no planned one does.
        let dying = graph.dying_victims(|holder| targets.contains_key(&holder));
        let stays = |index: usize| {
            graph.nodes[index].status == NodeStatus::Selected
                && !targets.contains_key(&index)
                && !dying.contains_key(&index)
                && object_of(index)
                    .is_some_and(|o| !dies_with_plan(&o.meta, &planned_uids, &owners_of, graph.orphan_dependents))
        };
        let planned: HashSet<usize> = targets.keys().copied().collect();
        let needed: Vec<(usize, KeepReason)> = needed_by_staying(graph, &planned, stays).into_iter().collect();
        let held = holders(snapshot, catalog, targets, &stays);
        keep_out(graph, targets, kept, needed);
        keep_out(graph, targets, kept, held);
        if targets.len() == before {
            return torn_down;
        }
    }
}

/// The waves of the planned `targets`, in the deletion order of the graph, with the orders no
/// wave can satisfy (told as warnings); a dependency cycle is an error.
fn waves_of(
    snapshot: &Snapshot,
    targets: &BTreeMap<usize, String>,
) -> Result<(Vec<Vec<Target>>, Vec<String>), UserError> {
    let graph = snapshot.graph;
    let indices: HashSet<usize> = targets.keys().copied().collect();
    let (order, unsatisfied) = plan_deletion_told(graph, &indices).map_err(|cycle| {
        UserError::new(exit::CYCLE, format!("dependency cycle: {}", cycle_path(graph, &cycle)))
            .hint("no deletion order exists; fix the dependsOn/depends-on annotations")
    })?;
    let waves = order
        .waves
        .iter()
        .map(|wave| {
            wave.iter()
                .filter_map(|&index| {
                    let object = snapshot.objects.get(&graph.nodes[index].id)?;
                    let why = crate::graph::output::plan_why(graph, index, &indices, targets.get(&index));
                    Some(target(object, why))
                })
                .collect()
        })
        .collect();
    Ok((waves, unsatisfied))
}

/// The planned tracking objects that must be deleted still suspended: a member they record is
/// kept. A member kept because its Kustomization records no inventory needs no suspension: its
/// controller's clean-up deletes nothing of it.
fn keep_suspended(graph: &Graph, indices: &HashSet<usize>, kept: &[Kept]) -> HashSet<ObjectId> {
    let kept_ids: HashSet<&ObjectId> = kept
        .iter()
        .filter(|k| !matches!(k.reason, KeepReason::NoInventory { .. }))
        .map(|k| &k.id)
        .collect();
    graph
        .members
        .iter()
        .filter(|m| indices.contains(&m.owner) && kept_ids.contains(&graph.nodes[m.member].id))
        .map(|m| graph.nodes[m.owner].id.clone())
        .collect()
}

/// Rule "what dies goes before what it needs", where it cannot hold: an inferred need between
/// two planned objects that the declared order contradicts (declared edges win the order, see
/// [`Graph::unordered`]) is told before asking, e.g. a claim of a stack whose declared
/// dependent holds its StorageClass.
fn unordered_needs(graph: &Graph, planned: &HashSet<usize>) -> Vec<String> {
    graph
        .unordered
        .iter()
        .filter(|e| e.kind.is_need() && planned.contains(&e.from) && planned.contains(&e.to))
        .map(|e| {
            format!(
                "{} needs {} ({}), but the declared order deletes it first: check the stacks' dependsOn",
                graph.nodes[e.from].id,
                graph.nodes[e.to].id,
                e.kind.label()
            )
        })
        .collect()
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

/// The marks the tracking objects in `trackers_of` carry (see [`PrunePlan::stack_marks`]).
fn stack_marks(
    snapshot: &Snapshot,
    trackers_of: &HashMap<ObjectId, Vec<ObjectId>>,
) -> HashMap<ObjectId, (Preset, MarkValue)> {
    let stacks: HashSet<&ObjectId> = trackers_of.values().flatten().collect();
    stacks
        .into_iter()
        .filter_map(|id| Some((id.clone(), tracker_key(snapshot.objects.get(id)?)?)))
        .collect()
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
        tracked_by: crate::model::trackers::describe_marks(&object.meta),
    }
}

/// The stacks torn down that claim the node `member` (their marks are on it), with what their
/// tools recorded and would do: what the keep chain asks of a teardown member.
pub fn claims<'a>(
    graph: &'a Graph,
    member: usize,
    torn_down: &HashSet<usize>,
    named: &HashSet<usize>,
) -> Vec<Claim<'a>> {
    graph
        .members
        .iter()
        .filter(|m| m.member == member && torn_down.contains(&m.owner))
        .map(|m| Claim {
            stack: &graph.nodes[m.owner].id,
            record: graph.inventories.get(&m.owner),
            // A tracking object whose deletion deletes nothing (a kpt inventory, an ApplySet
            // parent) tears its members down only when named; deleted as a member of another
            // stack, it leaves them (see `graph::Graph::inert`).
            leaves_members: graph
                .orphaning
                .get(&m.owner)
                .or_else(|| graph.inert.get(&m.owner).filter(|_| !named.contains(&m.owner)))
                .map(String::as_str),
            unreadable: None,
        })
        .collect()
}

/// Moves nodes from the targets to the kept list.
fn keep_out(graph: &Graph, targets: &mut BTreeMap<usize, String>, kept: &mut Vec<Kept>, out: Vec<(usize, KeepReason)>) {
    for (index, reason) in out {
        if targets.remove(&index).is_some() {
            kept.push(Kept {
                id: graph.nodes[index].id.clone(),
                reason,
            });
        }
    }
}

/// For each planned node, the planned nodes it needs directly, through the one edge set the keep
/// rules read ([`crate::prune::safeguards::needed_by_staying`]): declared, structural and inferred (a
/// custom resource the re-check drops keeps the operator its finalizer names).
fn planned_dependencies(graph: &Graph, planned: &HashSet<usize>) -> HashMap<ObjectId, Vec<ObjectId>> {
    let mut depends: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    for edge in graph.needs() {
        if planned.contains(&edge.from) && planned.contains(&edge.to) {
            depends
                .entry(graph.nodes[edge.from].id.clone())
                .or_default()
                .push(graph.nodes[edge.to].id.clone());
        }
    }
    depends
}

#[cfg(test)]
mod tests;
