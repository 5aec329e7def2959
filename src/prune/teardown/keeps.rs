//! The planner's checks that look beyond one object: Namespaces and CRDs that hold what stays,
//! tracking objects a stack outside the plan applies, and objects whose mark is ambiguous.

use std::collections::{BTreeMap, HashSet};

use super::{Kept, Snapshot};
use crate::cluster::discovery::Catalog;
use crate::graph::full_marks;
use crate::graph::tracker_key;
use crate::model::identity::ObjectId;
use crate::model::trackers::Preset;
use crate::prune::safeguards::holds_staying;
use crate::stack::keep::TornDown;
use crate::stack::keep::{ambiguous_mark, KeepReason, Trackers};

/// The Namespaces and CRDs among the targets that hold an object that stays: a node of the graph
/// that stays, or a listed tracked object outside the graph that is not planned.
pub(super) fn holders(
    snapshot: &Snapshot,
    catalog: &Catalog,
    targets: &BTreeMap<usize, String>,
    stays: &dyn Fn(usize) -> bool,
) -> Vec<(usize, KeepReason)> {
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
                return Some((index, KeepReason::ContentUnlistable));
            }
            holds_staying(holder, staying.iter().copied(), crd_of)
                .map(|held| (index, KeepReason::Holds { held: held.to_string() }))
        })
        .collect()
}

/// Tracking objects in the plan that a stack outside the plan applies, when that parent is not
/// one of the live reconcilers of [`crate::stack::parents`] (refused unless held): a kpt inventory or an
/// ApplySet (their next apply re-creates them), or an Argo CD Application that was not listed
/// (it may live all the same). Flux parents are always listed: one not found is gone.
pub(super) fn parent_warnings(
    snapshot: &Snapshot,
    targets: &BTreeMap<usize, String>,
    torn_down: &TornDown,
    parents: &[crate::stack::parents::Parent],
) -> Vec<String> {
    let found_argo = |mark: &crate::model::trackers::Mark| {
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
pub(super) fn ambiguous_members(
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
        .filter_map(|o| ambiguous_mark(&o.meta, Some(trackers)).map(|reason| Kept { id: o.id(), reason }))
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// Every member of the record of a planned stack (a Flux HelmRelease's Helm release, a kpt
/// inventory, a Kustomization's `status.inventory`, ...) that the plan does not delete and no
/// rule has kept yet, with why: one its tool may not delete (its impersonated account is
/// denied), or, among those listed, one its stack's policy leaves (suspended, `deletionPolicy:
/// Orphan`), else one that carries none of the stack's marks. A teardown says what it leaves of every record
/// it tears down, not only of the objects that carry the stack's marks. A member this run did
/// not list (outside its namespaces, or already gone) is told only when its tool may not delete
/// it: whether it exists is unknown.
pub(super) fn unplanned_record_members(
    snapshot: &Snapshot,
    targets: &BTreeMap<usize, String>,
    kept: &[Kept],
) -> Vec<Kept> {
    let graph = snapshot.graph;
    let planned: HashSet<&ObjectId> = targets.keys().map(|&i| &graph.nodes[i].id).collect();
    let mut told: HashSet<ObjectId> = kept.iter().map(|k| k.id.clone()).collect();
    let mut stacks: Vec<usize> = targets
        .keys()
        .copied()
        .filter(|i| graph.inventories.contains_key(i))
        .collect();
    stacks.sort_unstable();
    let mut found = Vec::new();
    for stack in stacks {
        let Some(record) = graph.inventories.get(&stack) else {
            continue;
        };
        let mut ids: Vec<&ObjectId> = record.ids.iter().filter(|id| !planned.contains(id)).collect();
        ids.sort();
        for id in ids {
            if !told.insert(id.clone()) {
                continue;
            }
            let listed = snapshot.objects.contains_key(id);
            let reason = match (record.denied.get(id), graph.orphaning.get(&stack)) {
                (Some(why), _) => KeepReason::ToolWouldKeep { why: why.clone() },
                (None, _) if !listed => continue,
                (None, Some(why)) => KeepReason::ToolWouldKeep { why: why.clone() },
                (None, None) => KeepReason::RecordedUnmarked {
                    inventory: record.name.clone(),
                },
            };
            found.push(Kept { id: id.clone(), reason });
        }
    }
    found
}
