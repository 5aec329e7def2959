//! The records and policies of an orphan prune's stacks, read again before each wave with the
//! one function the plan read them with ([`crate::stack::inventory::record_of`]): a Flux
//! Kustomization's `status.inventory` emptied, `spec.prune: false` or `spec.suspend: true` set,
//! a kpt inventory or ApplySet parent changed since the plan — what its tool would no longer
//! delete is dropped, by the same rules as the plan ([`crate::stack::keep::outside_record`]).

use std::collections::HashMap;

use crate::cluster::collect::Listed;
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::model::trackers::{marks, Mark};
use crate::stack::classify::Recorded;
use crate::stack::keep::{self, Context, KeepReason, Question};

/// Each stack that marks a wave's objects, with its record as it is now: `Ok(None)` when its
/// tool keeps none (its labels decide, as in the plan), `Err` when its tool would now prune
/// nothing of it (a refusal of the plan's: `spec.prune: false`, suspended, ...) or it cannot be
/// read.
#[derive(Debug, Default)]
pub struct OrphanRecords(HashMap<Mark, Result<Option<Recorded>, UserError>>);

impl OrphanRecords {
    /// Reads the record of every stack that marks one of `objects`, once each.
    pub async fn read<'a>(session: &Session, objects: impl Iterator<Item = &'a Listed>) -> Self {
        let mut found = HashMap::new();
        for object in objects {
            for mark in marks(&object.meta) {
                if found.contains_key(&mark) || !crate::prune::orphans::has_record(mark.preset) {
                    continue;
                }
                let now = crate::stack::inventory::record_of(mark.preset, &mark.value, session)
                    .await
                    .map(|stack| stack.recorded);
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
