//! The records and policies of an orphan prune's stacks, read again before each wave with the
//! one function the plan read them with ([`crate::stack::inventory::record_of`]): a Flux
//! Kustomization's `status.inventory` emptied, `spec.prune: false` or `spec.suspend: true` set,
//! a kpt inventory or ApplySet parent changed since the plan — what its tool would no longer
//! delete is dropped, by the same rules as the plan ([`crate::stack::keep::outside_record`]).
//! Every stack the plan judged is read again, whatever its tool, and held against how it placed
//! and named its manifests then ([`Placement`]): an Argo CD Application set to `Prune=false`, a
//! Flux Kustomization given `spec.targetNamespace` or `spec.patches` since the plan, keep all
//! that they mark (the desired set the plan compared with is no longer theirs).

use std::collections::HashMap;

use crate::cluster::collect::Listed;
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::model::trackers::{marks, Mark};
use crate::stack::classify::Recorded;
use crate::stack::inventory::{Placement, Placements, StackRecord};
use crate::stack::keep::{self, Context, KeepReason, Question};

/// Each stack that marks a wave's objects, with its record as it is now: `Ok(None)` when its
/// tool keeps none (its labels decide, as in the plan), `Err` when its tool would now prune
/// nothing of it (a refusal of the plan's: `spec.prune: false`, suspended, ...) or it cannot be
/// read.
#[derive(Debug, Default)]
pub struct OrphanRecords(HashMap<Mark, Result<Option<Recorded>, UserError>>);

impl OrphanRecords {
    /// Reads the record of every stack that marks one of `objects`, once each: those whose
    /// tool keeps a record, and every stack the plan judged (`planned`, held against how it
    /// placed its manifests then).
    pub async fn read<'a>(session: &Session, objects: impl Iterator<Item = &'a Listed>, planned: &Placements) -> Self {
        let mut found = HashMap::new();
        for object in objects {
            for mark in marks(&object.meta) {
                let placed = planned.get(&mark);
                if found.contains_key(&mark) || !(placed.is_some() || crate::prune::orphans::has_record(mark.preset)) {
                    continue;
                }
                let now = crate::stack::inventory::record_of(mark.preset, &mark.value, session).await;
                let now = now.and_then(|stack| placed_as_planned(&mark, stack, placed));
                found.insert(mark, now);
            }
        }
        Self(found)
    }

    /// Why `object` is no longer an orphan by the records and policies of the stacks that mark
    /// it now (`context`: the plan's orphan question, asked again with each record).
    pub fn reason(&self, object: &Listed, context: &Context) -> Option<KeepReason> {
        marks(&object.meta).iter().find_map(|mark| match self.0.get(mark)? {
            Err(why) => Some(KeepReason::ToolWouldKeep {
                why: why.message.clone(),
            }),
            Ok(None) => None,
            Ok(Some(recorded)) => {
                let Question::Orphan {
                    tracker, stack, needs, ..
                } = &context.question
                else {
                    return None;
                };
                let asked = Context {
                    question: Question::Orphan {
                        tracker: *tracker,
                        recorded: Some(recorded),
                        compared: true,
                        stack: *stack,
                        needs: *needs,
                    },
                    trackers: context.trackers,
                };
                keep::outside_record(object, &asked)
            }
        })
    }
}

/// The stack's record, when its tool places and names its manifests as when planned.
fn placed_as_planned(
    mark: &Mark,
    stack: StackRecord,
    planned: Option<&Placement>,
) -> Result<Option<Recorded>, UserError> {
    match planned.and_then(|planned| stack.placement().changed_since(planned)) {
        Some(change) => Err(UserError::refused(format!(
            "{mark} changed since the plan: {change}; the desired set the plan compared with is not what it applies now"
        ))
        .hint("run the prune again to compare with the stack as it is now")),
        None => Ok(stack.recorded),
    }
}
