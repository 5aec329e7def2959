//! The prune use-case: from a session and a request to a plan (teardown or orphans), with what
//! the planned Namespaces and CRDs would take beyond it, and the parents that would undo it;
//! then the refusals ([`refusals`]) and the run ([`run`]). `commands::prune` only parses, asks
//! and calls these.
//!
//! The layer holds every step of a prune: the orphan finder ([`orphans`]) and the teardown
//! closure ([`teardown`]), the safeguards and cascades, the re-check before every wave
//! ([`recheck`]), Flux suspensions ([`suspend`]), execution ([`execute`]), the plan file and the
//! report.

pub(crate) mod refusals;
pub(crate) mod run;
mod targets;

pub(crate) mod bystanders;
pub mod cascade;
pub mod execute;
pub(crate) mod orphans;
pub(crate) mod plan_file;
pub(crate) mod plan_table;
pub mod recheck;
pub(crate) mod report;
pub(crate) mod safeguards;
pub(crate) mod suspend;
pub mod teardown;

use std::collections::{HashMap, HashSet};

use crate::cluster::collect::{ListOptions, ListScope, Listed};
use crate::cluster::discovery::Catalog;
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::graph::live::{graph_of_inner, planning_graph, LiveGraph, LiveOptions};
use crate::model::identity::ObjectId;
use crate::model::trackers::Preset;
use crate::prune::cascade::find_cascades;
use crate::prune::cascade::owners::{kept_on_their_own, Counted};
use crate::prune::orphans::OrphanReport;
use crate::prune::teardown::{plan, teardown_closure, Kept, Mode, PrunePlan, Snapshot};
use crate::stack::classify::Verdict;
use crate::stack::keep::KeepReason;
use crate::stack::parents::read_suspended;

use refusals::{describe_cascade, refuse_unlisted};

/// What to plan: the stacks to tear down (none: the orphans), how to list, and the choices the
/// flags make.
#[derive(Debug, Clone, Default)]
pub struct PlanRequest {
    /// `TYPE/NAME` or `TYPE` (with `selector`) of the stacks to tear down.
    pub targets: Vec<String>,
    /// `-l`: with a bare `TYPE`, which objects of it.
    pub selector: Option<String>,
    /// How to list.
    pub list: ListOptions,
    /// Infer the edges nobody declared.
    pub infer: bool,
    /// Go on although some kinds could not be listed.
    pub skip_unlisted: bool,
    /// Keep the planned Namespaces and CRDs whose deletion would take what the plan does not
    /// delete, and plan the rest.
    pub keep_cascading: bool,
    /// Tear down the objects that still carry the mark of a named stack that is already gone
    /// (`--leftovers`); without it they are kept.
    pub leftovers: bool,
    /// `--cascade=orphan`: the deletions leave what the planned objects own (see
    /// [`crate::graph::Graph::orphan_dependents`]), so nothing dies with its owner.
    pub orphan_dependents: bool,
}

/// The plan of a teardown of the named stacks (the session lists every namespace).
pub async fn plan_teardown(session: &Session, request: &PlanRequest) -> Result<PrunePlan, UserError> {
    let mut planning = teardown_planning(session, request).await?;
    finish_plan(session, &mut planning, request).await
}

/// The plan of pruning the orphans a report found. What depends on the orphans is looked for
/// in every namespace where that may be listed ([`crate::prune::bystanders`]): the session's scope
/// becomes where it was listed, so that the re-check lists there again.
pub async fn plan_orphans(
    session: &mut Session,
    report: OrphanReport,
    request: &PlanRequest,
) -> Result<PrunePlan, UserError> {
    refuse_unlisted(&report.unchecked, request.skip_unlisted)?;
    let (mut planning, scope) = orphan_planning(session, report, request).await?;
    // What depends on the orphans was listed there (see `crate::prune::bystanders`): the re-check
    // before each wave lists it there again.
    session.scope = scope;
    finish_plan(session, &mut planning, request).await
}

/// The cascades, then whether each parent is suspended already.
async fn finish_plan(
    session: &Session,
    planning: &mut Planning,
    request: &PlanRequest,
) -> Result<PrunePlan, UserError> {
    // A tool that deletes with `propagationPolicy: Orphan` leaves its members' dependents: a
    // plan that would take them deletes more than it (membership review 30, F3).
    if let Some(why) = planning.orphaning.first().filter(|_| !request.orphan_dependents) {
        return Err(UserError::refused(format!(
            "{why}, so what its members own stays; deleting them with another policy would take that too"
        ))
        .hint("run with --cascade=orphan to delete as its tool does"));
    }
    let mut plan = plan_with_cascades(session, planning, request).await?;
    plan.infer = request.infer;
    plan.orphan_dependents = request.orphan_dependents;
    plan.placements = planning.placements.clone();
    read_suspended(&session.connection.client, &mut plan.parents)
        .await
        .map_err(|err| UserError::failed(err.to_string()))?;
    Ok(plan)
}

/// What a plan is made from: the live graph, the chosen nodes and what is kept already. Planned
/// again when Namespaces or CRDs are held back (`--keep-cascading`).
struct Planning {
    live: LiveGraph,
    chosen: HashMap<usize, String>,
    kept: Vec<Kept>,
    mode: Mode,
    /// An orphan prune's stacks' placements ([`PrunePlan::placements`]).
    placements: crate::stack::inventory::Placements,
    /// Why a torn-down stack's tool deletes its members with `propagationPolicy: Orphan`
    /// ([`crate::stack::inventory::StackRecord::orphans_dependents`]).
    orphaning: Vec<String>,
}

impl Planning {
    /// The plan, with the `held_back` objects kept out of it.
    fn plan(&self, catalog: &Catalog, held_back: &[Kept]) -> Result<PrunePlan, UserError> {
        let held: HashSet<&ObjectId> = held_back.iter().map(|k| &k.id).collect();
        let chosen = self
            .chosen
            .iter()
            .filter(|(index, _)| !held.contains(&self.live.graph.nodes[**index].id))
            .map(|(index, why)| (*index, why.clone()))
            .collect();
        let mut kept = self.kept.clone();
        kept.extend(held_back.iter().cloned());
        plan(&snapshot(&self.live), catalog, chosen, kept, self.mode.clone())
    }

    /// Makes nodes of the cascade victims that are not yet (see
    /// [`crate::graph::live::LiveGraph::add_victims`]); whether there were any.
    async fn add_victims(&mut self, session: &Session, victims: Vec<Listed>) -> Result<bool, UserError> {
        let Some(moved) = self.live.add_victims(session, victims).await? else {
            return Ok(false);
        };
        self.chosen = std::mem::take(&mut self.chosen)
            .into_iter()
            .filter_map(|(index, why)| moved.get(&index).map(|&now| (now, why)))
            .collect();
        Ok(true)
    }
}

/// Plans, then finds what the planned Namespaces and CRDs would take beyond the plan: the
/// victims become nodes of the graph and the plan is made again (what they need orders the
/// Namespace or CRD that takes them, and is kept while they stay). With `--keep-cascading`, those
/// Namespaces and CRDs are kept and the rest is planned again.
async fn plan_with_cascades(
    session: &Session,
    planning: &mut Planning,
    request: &PlanRequest,
) -> Result<PrunePlan, UserError> {
    let mut held_back: Vec<Kept> = Vec::new();
    loop {
        let mut plan = planning.plan(&session.catalog, &held_back)?;
        let planned = plan.waves.iter().flatten().map(|t| (t.id.clone(), t.uid.clone()));
        let kept = kept_on_their_own(&plan.kept);
        let counted = Counted {
            torn_down: &plan.torn_down,
            kept: &kept,
        };
        let (cascades, victims) = find_cascades(
            &session.connection.client,
            &session.catalog,
            planned,
            &counted,
            request.list,
            request.orphan_dependents,
        )
        .await;
        plan.cascades = cascades;
        if planning.add_victims(session, victims).await? {
            continue;
        }
        if !request.keep_cascading || plan.cascades.is_empty() {
            return Ok(plan);
        }
        held_back.extend(plan.cascades.iter().map(|cascade| Kept {
            id: cascade.holder.clone(),
            reason: KeepReason::Cascading {
                takes: describe_cascade(cascade),
            },
        }));
    }
}

/// Orphans mode: the orphans (and orphans already being deleted, which are waited for), ordered
/// through the graph of every tracked object.
async fn orphan_planning(
    session: &Session,
    report: OrphanReport,
    request: &PlanRequest,
) -> Result<(Planning, ListScope), UserError> {
    let (infer, accept_unlisted) = (request.infer, request.skip_unlisted);
    // Moved out of the report, not copied: the desired set's needs and placements hold an
    // identity per desired object (issue 30).
    let OrphanReport {
        classified,
        tracker,
        needs,
        placements,
        bystanders,
        ..
    } = report;
    let (targets, kept) = verdicts(&classified);
    // Every tracked object in scope is a node too, not only this stack's: another stack's object
    // that depends on an orphan, or lives in an orphan Namespace, keeps it.
    let mut listed: Vec<Listed> = classified.into_iter().map(|c| c.object).collect();
    let known: HashSet<String> = listed.iter().map(|o| o.uid().to_string()).collect();
    let (others, stayers_listed) = match bystanders {
        // Listed with the orphans' selection, in every namespace (`orphans::find_with_bystanders`).
        Some(listing) => (
            crate::prune::bystanders::of_listing(listing.bystanders, ListScope::AllNamespaces, &known),
            Some(listing.stayers),
        ),
        // Listed apart from the selection, with the stayers (one listing of every kind).
        None => {
            let (others, stayers) = crate::prune::bystanders::list(session, &known).await;
            (others, Some(stayers))
        }
    };
    refuse_unlisted(&others.unlisted, accept_unlisted)?;
    listed.extend(others.objects);
    let options = LiveOptions {
        members: false,
        only_members: false,
        infer,
        only_selected: false,
        stayers: infer,
    };
    // The untracked objects that declare a need (stayers) are looked for where the bystanders
    // were: in every namespace when allowed, not only in `-n`'s (membership review 10).
    let mut widened = session.clone();
    widened.scope = others.scope.clone();
    let mut live = graph_of_inner(&widened, listed, &options, stayers_listed).await?;
    live.set_orphan_dependents(request.orphan_dependents);
    let chosen: HashMap<usize, String> = targets
        .into_iter()
        .filter_map(|(id, why)| live.graph.find(&id).map(|index| (index, why)))
        .collect();
    let orphaning = placements
        .values()
        .filter_map(|placement| placement.orphans_dependents().map(str::to_string))
        .collect();
    let planning = Planning {
        live,
        chosen,
        kept,
        mode: Mode::Orphans(tracker, Box::new(needs)),
        placements,
        orphaning,
    };
    Ok((planning, others.scope))
}

/// The orphans to delete (and those being deleted already), each with why, and what a keep
/// marker keeps, from the verdicts.
fn verdicts(classified: &[crate::stack::classify::Classified]) -> (HashMap<ObjectId, String>, Vec<Kept>) {
    let mut kept = Vec::new();
    let mut targets = HashMap::new();
    for classified in classified {
        let id = classified.object.id();
        match &classified.verdict {
            Verdict::Orphan(reason) => {
                targets.insert(id, reason.to_string());
            }
            Verdict::Skipped(KeepReason::Terminating) => {
                targets.insert(id, "already being deleted".to_string());
            }
            Verdict::Skipped(reason @ KeepReason::Keep { .. }) => kept.push(Kept {
                id,
                reason: reason.clone(),
            }),
            Verdict::Skipped(_) | Verdict::Desired => {}
        }
    }
    (targets, kept)
}

fn snapshot(live: &LiveGraph) -> Snapshot<'_> {
    Snapshot {
        graph: &live.graph,
        objects: &live.objects,
        tracked: &live.tracked,
    }
}

/// Teardown mode: the named stacks, their members, and everything that depends on them.
async fn teardown_planning(session: &Session, request: &PlanRequest) -> Result<Planning, UserError> {
    // Every tracked object is a node (not only those under a live tracking object): the members
    // of a stack whose tracking object is already gone are found again by their marks.
    let mut live = planning_graph(session, request.list, request.infer).await?;
    live.set_orphan_dependents(request.orphan_dependents);
    refuse_unlisted(&live.unlisted, request.skip_unlisted)?;
    let mut gone = Vec::new();
    let mut kept = Vec::new();
    let named = targets::named_targets(session, request, &snapshot(&live), &mut gone, &mut kept).await?;
    let indices: Vec<usize> = named.iter().map(|(index, _)| *index).collect();
    let mut chosen = teardown_closure(&live.graph, &indices);
    chosen.extend(named);
    let orphaning = read_member_records(session, &mut live, chosen.keys().copied()).await;
    Ok(Planning {
        live,
        chosen,
        kept,
        mode: Mode::Teardown(gone),
        placements: Default::default(),
        orphaning,
    })
}

/// Reads the record of every torn-down stack whose tool keeps one beside its tracking object —
/// a kpt/cli-utils inventory, a Flux HelmRelease's Helm release, an ApplySet parent — or whose
/// members are decided beside it (an Argo CD Application's control-plane settings), with the
/// one function `orphans` reads them with ([`crate::stack::inventory::record_of`]), so that a teardown
/// deletes only what that tool would (see [`crate::stack::keep::outside_record`]). A Flux
/// Kustomization's `status.inventory` is on its listed object already. A record that exists
/// but cannot be read bounds its members to none: what its tool would delete is unknown.
/// Returns why a stack's tool deletes with `propagationPolicy: Orphan`, for each that does.
async fn read_member_records(
    session: &Session,
    live: &mut LiveGraph,
    chosen: impl Iterator<Item = usize>,
) -> Vec<String> {
    let mut orphaning = Vec::new();
    let trackers: Vec<(usize, Preset, crate::model::trackers::MarkValue)> = chosen
        .filter(|index| !live.graph.inventories.contains_key(index))
        .filter_map(|index| {
            let object = live.objects.get(&live.graph.nodes[index].id)?;
            let (preset, value) = crate::graph::tracker_key(object)?;
            crate::prune::recheck::reads_beside(preset).then_some((index, preset, value))
        })
        .collect();
    for (index, preset, value) in trackers {
        let id = live.graph.nodes[index].id.clone();
        let record = match crate::stack::inventory::uninstall_record_of(preset, &value, session).await {
            Ok(stack) => {
                orphaning.extend(stack.orphans_dependents.clone());
                match stack.recorded {
                    Some(recorded) => crate::graph::MemberRecord {
                        aliases: stack.helm_release.into_iter().map(|v| (Preset::Helm, v)).collect(),
                        ..recorded.members(live.objects.values())
                    },
                    None => {
                        if crate::prune::recheck::keeps_record_beside(preset) {
                            tracing::warn!("no record read for {id}: the objects that carry its marks are its members");
                        }
                        continue;
                    }
                }
            }
            Err(err) => {
                tracing::warn!("{}: none of the objects {id} marks is deleted", err.message);
                crate::graph::MemberRecord {
                    ids: Default::default(),
                    name: format!("the record of {id}, which could not be read"),
                    ..Default::default()
                }
            }
        };
        live.graph.inventories.insert(index, record);
    }
    orphaning
}
