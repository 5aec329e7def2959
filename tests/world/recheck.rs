//! The re-check before each wave of a teardown (`recheck::Recheck::check`), emulated on a world
//! changed between two waves ([`super::Change`]: a keep marker added, a Flux policy flipped, an
//! object re-marked or given a second mark). Production's judge (`Recheck::judge`) reads the
//! wave's objects and their torn-down stacks again through the API; here they are read from the
//! changed world, and the same pure parts decide: the keep chain ([`keep::reason`], with the
//! claims `Recheck::records_now` makes), [`tracked_elsewhere`] and [`TornDown::covers`], the
//! stacks' policy ([`orphans_members`]) and records ([`flux_inventory_of`], and for a record
//! beside its tracking object the reader the plan used, as `recheck::read_stack` does). What a
//! dropped object depends on is withheld from the later waves (`Recheck::withhold_dependencies`).
//!
//! Not emulated: new dependents (`Recheck::judge_dependents`), what a Namespace or CRD holds now
//! (`judge_content`) and the garbage collector's cascades of the wave (`judge_owned`).

use std::collections::{HashMap, HashSet};

use kubectl_stack::cluster::collect::Listed;
use kubectl_stack::cluster::discovery::Catalog;
use kubectl_stack::graph::{flux_inventory_of, orphans_members, owner_mark, MemberRecord, NodeInput};
use kubectl_stack::model::identity::ObjectId;
use kubectl_stack::prune::execute::Target;
use kubectl_stack::prune::recheck::{self, keeps_record_beside};
use kubectl_stack::prune::teardown::PrunePlan;
use kubectl_stack::stack::keep::{self, Claim, Context, KeepReason, Question};

use super::{Change, Entry, World};

/// One torn-down stack's answer for one object (`recheck::StackClaim`).
#[derive(Default)]
struct ClaimNow {
    record: Option<MemberRecord>,
    leaves_members: Option<String>,
    unreadable: Option<String>,
}

/// The listed object of `id` in `world`: a regular object or a stack's tracking object.
fn listed_now(world: &World, catalog: &Catalog, id: &ObjectId) -> Option<Listed> {
    if let Some(index) = world.present().find(|&i| world.id(i) == *id) {
        return Some(crate::listed_of(catalog, id, &world.object_body(index)));
    }
    let stack = stack_of(world, id)?;
    Some(crate::listed_of(catalog, id, &world.tracker_body(stack)))
}

fn stack_of(world: &World, id: &ObjectId) -> Option<usize> {
    (0..world.stacks.len()).find(|&s| world.tracker_id(s) == *id)
}

/// `recheck::read_stack` and `Recheck::records_now` for stack `stack`, meeting `object`.
fn claim_now(world: &World, stack: usize, object: &Listed, plan: &PrunePlan) -> ClaimNow {
    let id = world.tracker_id(stack);
    let body = world.tracker_body(stack);
    let string_map = |key: &str| -> std::collections::BTreeMap<String, String> {
        serde_json::from_value(body["metadata"][key].clone()).unwrap_or_default()
    };
    let input = NodeInput {
        id: id.clone(),
        labels: string_map("labels").into(),
        annotations: string_map("annotations").into(),
        body: Some(body.clone()),
        ..Default::default()
    };
    let leaves_members = orphans_members(&input);
    let record = if let Some(record) = flux_inventory_of(&input) {
        Some(record)
    } else if owner_mark(&input).is_some_and(|(preset, _)| keeps_record_beside(preset)) {
        match crate::record_of(world, stack, true) {
            Ok(recorded) => recorded.map(|r| r.members([object])),
            Err(()) => {
                return ClaimNow {
                    unreadable: Some("its record cannot be read".into()),
                    ..ClaimNow::default()
                }
            }
        }
    } else {
        None
    };
    if record.is_none() && plan.recorded_stacks.contains(&id) {
        return ClaimNow {
            unreadable: Some("its record is gone since the plan".into()),
            ..ClaimNow::default()
        };
    }
    ClaimNow {
        record,
        leaves_members,
        unreadable: None,
    }
}

/// `Recheck::judge`: why `target` is dropped from its wave now, if it is. `gone`: the objects of
/// the waves already run.
fn judge(
    world: &World,
    catalog: &Catalog,
    plan: &PrunePlan,
    target: &Target,
    gone: &HashSet<ObjectId>,
) -> Option<String> {
    let object = listed_now(world, catalog, &target.id)?;
    let trackers = plan.trackers_of.get(&target.id).cloned().unwrap_or_default();
    let answers: Vec<(ObjectId, ClaimNow)> = trackers
        .into_iter()
        .filter(|tracker| !gone.contains(tracker))
        .filter_map(|tracker| {
            let stack = stack_of(world, &tracker)?;
            let claim = claim_now(world, stack, &object, plan);
            Some((tracker, claim))
        })
        .collect();
    let claims: Vec<Claim> = answers
        .iter()
        .map(|(stack, claim)| Claim {
            stack,
            record: claim.record.as_ref(),
            leaves_members: claim.leaves_members.as_deref(),
            unreadable: claim.unreadable.as_deref(),
        })
        .collect();
    let context = Context {
        question: Question::Teardown { claims },
        trackers: Some(&plan.trackers),
    };
    if let Some(reason) = keep::reason(&object, &context).filter(|r| *r != KeepReason::Terminating) {
        return Some(reason.to_string());
    }
    recheck::marks_changed(
        &object,
        target,
        &plan.torn_down,
        plan.trackers_of.contains_key(&target.id),
    )
}

/// `Recheck::withhold_dependencies`.
fn withhold(plan: &PrunePlan, dropped: &ObjectId, withheld: &mut HashSet<ObjectId>) {
    let mut queue = vec![dropped.clone()];
    while let Some(current) = queue.pop() {
        for dependency in plan.depends_on.get(&current).into_iter().flatten() {
            if withheld.insert(dependency.clone()) {
                queue.push(dependency.clone());
            }
        }
    }
}

/// The change aimed at what it can change: an object's change at an object of the waves after
/// it, a policy's change at a torn-down Flux Kustomization (the generated index, modulo their
/// count). Without such an object or stack, the change as generated.
pub fn aim(world: &World, plan: &PrunePlan, after: usize, change: Change) -> Change {
    let later: Vec<usize> = plan.waves[after + 1..]
        .iter()
        .flatten()
        .filter_map(|t| world.present().find(|&i| world.id(i) == t.id))
        .collect();
    let flux: Vec<usize> = (0..world.stacks.len())
        .filter(|&s| {
            world.stacks[s].tool == super::Tool::Flux
                && plan.waves.iter().flatten().any(|t| t.id == world.tracker_id(s))
        })
        .collect();
    let object = |o: usize| if later.is_empty() { o } else { later[o % later.len()] };
    let stack = |s: usize| if flux.is_empty() { s } else { flux[s % flux.len()] };
    match change {
        Change::Keep { object: o, marker } => Change::Keep {
            object: object(o),
            marker,
        },
        Change::Orphan { stack: s } => Change::Orphan { stack: stack(s) },
        Change::NoPrune { stack: s } => Change::NoPrune { stack: stack(s) },
        Change::Remark { object: o, stack } => Change::Remark {
            object: object(o),
            stack,
        },
        Change::SecondMark { object: o, stack } => Change::SecondMark {
            object: object(o),
            stack,
        },
    }
}

/// What the waves after the world's change delete, each re-checked on the changed world: the
/// changed world, and the ids deleted after the change. `None`: no change happens (no change
/// generated, not a teardown, or a plan of one wave).
pub fn run_changed(world: &World, plan: &PrunePlan) -> Option<(World, HashSet<ObjectId>, HashMap<ObjectId, String>)> {
    let (after, change) = world.change?;
    if world.entry != Entry::Teardown || world.name_copy || plan.waves.len() < 2 {
        return None;
    }
    let after = after % (plan.waves.len() - 1);
    let next = world.changed(aim(world, plan, after, change));
    let catalog = crate::catalog();
    let mut gone: HashSet<ObjectId> = plan.waves[..=after].iter().flatten().map(|t| t.id.clone()).collect();
    let mut withheld: HashSet<ObjectId> = HashSet::new();
    let mut deleted = HashSet::new();
    let mut dropped: HashMap<ObjectId, String> = HashMap::new();
    for wave in &plan.waves[after + 1..] {
        let mut this_wave = Vec::new();
        for target in wave.iter().filter(|t| !withheld.contains(&t.id)) {
            match judge(&next, &catalog, plan, target, &gone) {
                Some(why) => {
                    dropped.insert(target.id.clone(), why);
                }
                None => this_wave.push(target.id.clone()),
            }
        }
        for id in dropped.keys() {
            withhold(plan, id, &mut withheld);
        }
        deleted.extend(this_wave.iter().cloned());
        gone.extend(this_wave);
    }
    Some((next, deleted, dropped))
}
