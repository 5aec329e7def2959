//! `kubectl stack prune`: the plan (deletion waves), a confirmation, then ordered deletion,
//! re-checked before every wave, with a clear report of what blocks.

use std::collections::{HashMap, HashSet};

use super::confirm;
use crate::cascade::{find_cascades, Cascade};
use crate::classify::{SkipReason, Verdict};
use crate::cli::{DryRun, GlobalArgs, PruneArgs, PruneOutput};
use crate::client::load_kubeconfig;
use crate::collect::{collect_kinds, ListScope, Listed};
use crate::discovery::Catalog;
use crate::error::{exit, UserError};
use crate::execute::{execute, ExecOptions};
use crate::graph::{Graph, NodeStatus};
use crate::identity::ObjectId;
use crate::live::{graph_of_with, live_graph_with, LiveGraph, LiveOptions};
use crate::orphans::{find, read_manifests, OrphanReport};
use crate::parents::{not_held, read_suspended};
use crate::plan_file::{self, Place, Request, Saved};
use crate::prune_report::{finish, print_plan, report_suspended, Ending, Format, Progress};
use crate::recheck::Recheck;
use crate::session::{list_options, resolve_typed, Session};
use crate::suspend::{suspend_all, suspend_parents, Suspensions};
use crate::teardown::{members_of_gone, plan, teardown_closure, Kept, Mode, PrunePlan, Snapshot};
use crate::trackers::{MarkValue, Preset, Selection, FLUX_KINDS};

/// Runs `prune`.
pub async fn run(global: &GlobalArgs, mut args: PruneArgs) -> anyhow::Result<u8> {
    let mut global = global.clone();
    let saved = match &args.plan {
        Some(path) => Some(plan_file::read(path)?),
        None => None,
    };
    if let Some(saved) = &saved {
        adopt_request(&mut global, &mut args, &saved.request)?;
    }
    let global = &global;
    let teardown = !args.targets.is_empty();
    check_mode(&args, teardown)?;
    // A wave rides out an API server restart for as long as it may take.
    crate::retry::set_budget(args.timeout.max(crate::retry::DEFAULT_BUDGET));
    let manifests = if teardown { None } else { read_manifests(&args.desired)? };
    let mut session = Session::open(global).await?;
    let format = match args.output {
        PruneOutput::Table => Format::Table,
        PruneOutput::Json => Format::Json,
        PruneOutput::Wide => Format::Table,
    };
    let mut desired_digest = None;
    let planning = if teardown {
        session.scope = ListScope::AllNamespaces;
        teardown_planning(&session, &args).await?
    } else {
        let selection = crate::cli::selection(&args.selection)?;
        let options = list_options(&args.tuning);
        let report = find(&session, selection, &args.desired, manifests, options).await?;
        desired_digest = Some(report.desired_digest.clone());
        refuse_unlisted(&report.unchecked, args.skip_unlisted)?;
        let (planning, scope) = orphan_planning(&session, report, !args.no_infer, args.skip_unlisted).await?;
        // What depends on the orphans was listed there: the re-check lists it there again.
        session.scope = scope;
        planning
    };
    let mut plan = plan_with_cascades(&session, &planning, &args).await?;
    read_suspended(&session.connection.client, &mut plan.parents)
        .await
        .map_err(UserError::failed)?;
    if let Some(saved) = &saved {
        plan_file::refuse_other_desired(saved, desired_digest.as_deref())?;
        refuse_changed(saved, &plan, &session.connection.server)?;
    }
    print_plan(&plan, format, args.output == PruneOutput::Wide)?;
    if let Some(path) = &args.plan_out {
        save_plan(path, &plan, global, &session, &args, desired_digest)?;
        return Ok(exit::OK);
    }
    refuse_cascades(&plan, args.allow_cascade)?;
    refuse_parents(&plan, args.suspend_parents)?;
    let count = plan.count();
    if count == 0 {
        eprintln!("Nothing to prune.");
        return Ok(exit::OK);
    }
    if args.dry_run == DryRun::Client {
        eprintln!(
            "Dry run (client): {count} object(s) in {} wave(s) would be deleted; nothing was sent.",
            plan.waves.len()
        );
        return Ok(exit::OK);
    }
    let mut suspensions = Suspensions::default();
    if args.dry_run == DryRun::None {
        let prompt = format!("Delete {count} object(s) in {} wave(s)?", plan.waves.len());
        confirm(&prompt, args.yes, "nothing was deleted")?;
        if args.suspend_parents {
            suspensions = match suspend_parents(&session.connection.client, &plan.parents).await {
                Ok(done) => done,
                Err((done, error)) => {
                    report_suspended(&done.left(&|_| false));
                    return Err(error.into());
                }
            };
        }
        let targets: Vec<_> = plan.waves.iter().flatten().collect();
        match suspend_all(&session.connection.client, &targets).await {
            Ok(done) => suspensions.entries.extend(done.entries),
            Err((done, error)) => {
                suspensions.entries.extend(done.entries);
                report_suspended(&suspensions.left(&|_| false));
                return Err(error.into());
            }
        };
    }
    let options = ExecOptions {
        server_dry_run: args.dry_run == DryRun::Server,
        cascade: args.cascade.into(),
        wave_timeout: args.timeout,
        concurrency: usize::from(args.delete_concurrency),
    };
    let client = session.connection.client.clone();
    let mut recheck = Recheck::new(
        client.clone(),
        session.catalog.clone(),
        &plan,
        suspensions,
        list_options(&args.tuning),
        session.scope.clone(),
    );
    let mut progress = Progress::new(format, global.verbosity >= 2);
    let cancel = interrupt_signal();
    let outcome = execute(&client, &plan.waves, &options, cancel, &mut progress, &mut recheck).await;
    progress.clear();
    let deleted: Vec<ObjectId> = if matches!(outcome, crate::execute::Outcome::Completed) {
        plan.waves.iter().flatten().map(|t| t.id.clone()).collect()
    } else {
        Vec::new()
    };
    let ending = Ending {
        plan: &plan,
        outcome: &outcome,
        suspended: recheck.suspensions.left(&|id| deleted.contains(id)),
        server_dry_run: options.server_dry_run,
        wave_timeout: options.wave_timeout,
    };
    // In JSON the summary stays the last line; on a terminal the chains follow the blockers table.
    let blockers = match &outcome {
        crate::execute::Outcome::TimedOut { blockers, .. } => blockers.as_slice(),
        _ => &[],
    };
    if !blockers.is_empty() && format == Format::Json {
        explain_blockers(&session, blockers, format).await?;
    }
    let code = finish(&progress, &ending, format)?;
    if !blockers.is_empty() && format != Format::Json {
        explain_blockers(&session, blockers, format).await?;
    }
    Ok(code)
}

/// What the objects of a wave that did not go wait for, as `stuck` explains it: chains down to
/// the one finalizer to remove, and its `unstick` command.
async fn explain_blockers(
    session: &Session,
    blockers: &[crate::execute::Blocker],
    format: Format,
) -> Result<(), UserError> {
    let ids: Vec<_> = blockers
        .iter()
        .map(|b| (b.target.kind.clone(), b.target.id.clone()))
        .collect();
    let report = crate::stuck::explain_blockers(session, &ids).await;
    match format {
        Format::Json => {
            let mut line = crate::stuck::chains::to_json(&report);
            line["type"] = serde_json::json!("diagnosis");
            crate::render::emit(&(line.to_string() + "\n"))
        }
        _ => {
            eprint!("{}", crate::stuck::chains::render_text(&report));
            Ok(())
        }
    }
}

fn check_mode(args: &PruneArgs, teardown: bool) -> Result<(), UserError> {
    if args.suspend_parents && !teardown {
        return Err(UserError::usage("--suspend-parents goes with a teardown (TYPE/NAME)"));
    }
    let desired = &args.desired;
    let has_desired = !desired.filenames.is_empty()
        || !desired.kustomize.is_empty()
        || desired.inventory.is_some()
        || desired.checksum.is_some();
    if teardown && (has_desired || args.selection.tracker.is_some()) {
        return Err(UserError::usage("give either stacks to tear down (TYPE/NAME) or what is desired (-f, -k, --inventory, --checksum), not both"));
    }
    if !teardown && !has_desired {
        return Err(UserError::usage("say what to prune: stacks to tear down (e.g. kustomization/usage), or what is desired (-f, -k, --inventory, --checksum) to prune the orphans"));
    }
    if let Some(selector) = &args.selection.selector {
        if selector.split(',').all(|term| term.trim().is_empty()) {
            return Err(UserError::usage("an empty selector (-l \"\") selects everything")
                .hint("give a selector that names labels, e.g. -l app=web"));
        }
        if teardown && args.targets.iter().any(|t| t.contains('/')) {
            return Err(UserError::usage("a selector (-l) cannot be combined with TYPE/NAME")
                .hint("name the stacks (TYPE/NAME ...), or give TYPE with -l to tear down those it selects"));
        }
    }
    Ok(())
}

/// The order guarantee rests on seeing every member: a kind that could not be listed may hold
/// objects that still need what a later wave deletes. Refused unless the user accepts it.
fn refuse_unlisted(unlisted: &[String], accepted: bool) -> Result<(), UserError> {
    if unlisted.is_empty() || accepted {
        return Ok(());
    }
    Err(UserError::refused(format!(
        "{} kind(s) could not be listed ({}): objects of them could still depend on what prune would delete",
        unlisted.len(),
        unlisted.join(", ")
    ))
    .hint("use an identity that may list them (--as, --context), or accept the risk with --skip-unlisted"))
}

/// What a plan is made from: the live graph, the chosen nodes and what is kept already. Planned
/// again when Namespaces or CRDs are held back (`--keep-cascading`).
struct Planning {
    live: LiveGraph,
    chosen: HashMap<usize, String>,
    kept: Vec<Kept>,
    mode: Mode,
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
}

/// Plans, then finds what the planned Namespaces and CRDs would take beyond the plan. With
/// `--keep-cascading`, those Namespaces and CRDs are kept and the rest is planned again.
async fn plan_with_cascades(session: &Session, planning: &Planning, args: &PruneArgs) -> Result<PrunePlan, UserError> {
    let mut held_back: Vec<Kept> = Vec::new();
    loop {
        let mut plan = planning.plan(&session.catalog, &held_back)?;
        let planned = plan.waves.iter().flatten().map(|t| (t.id.clone(), t.uid.clone()));
        plan.cascades = find_cascades(
            &session.connection.client,
            &session.catalog,
            planned,
            list_options(&args.tuning),
        )
        .await;
        if !args.keep_cascading || plan.cascades.is_empty() {
            return Ok(plan);
        }
        held_back.extend(plan.cascades.iter().map(|cascade| Kept {
            id: cascade.holder.clone(),
            reason: format!(
                "--keep-cascading: its deletion would also take {}",
                describe_cascade(cascade)
            ),
        }));
    }
}

/// "2 object(s) the plan does not delete (Secret/shop/handmade, ...)", or what could not be listed.
fn describe_cascade(cascade: &Cascade) -> String {
    let mut names: Vec<String> = cascade.victims.iter().take(3).map(|v| v.id.to_string()).collect();
    if cascade.victims.len() > 3 {
        names.push("...".to_string());
    }
    let mut text = format!(
        "{} object(s) the plan does not delete ({})",
        cascade.victims.len(),
        names.join(", ")
    );
    if !cascade.unlisted.is_empty() {
        text.push_str(&format!(
            " and whatever it holds of {}, which could not be listed",
            cascade.unlisted.join(", ")
        ));
    }
    text
}

/// Refuses a plan whose Namespaces or CRDs would take objects it does not delete, unless the
/// user accepted that loss.
fn refuse_cascades(plan: &PrunePlan, accepted: bool) -> Result<(), UserError> {
    if plan.cascades.is_empty() || accepted {
        return Ok(());
    }
    let holders: Vec<String> = plan
        .cascades
        .iter()
        .map(|c| format!("{}: {}", c.holder, describe_cascade(c)))
        .collect();
    Err(UserError::refused(format!(
        "deleting {} Namespace(s)/CRD(s) of the plan would also delete what the plan does not: {}",
        plan.cascades.len(),
        holders.join("; ")
    ))
    .hint("keep those Namespaces and CRDs and prune the rest with --keep-cascading, or accept the loss with --allow-cascade"))
}

/// `--plan FILE` without stacks or desired flags re-plans what the file was made for; with
/// stacks, they must be the file's.
fn adopt_request(global: &mut GlobalArgs, args: &mut PruneArgs, request: &Request) -> Result<(), UserError> {
    if request.targets.is_empty() {
        return Ok(()); // an orphan prune: the desired flags are given again
    }
    if args.targets.is_empty() {
        args.targets = request.targets.clone();
        args.selection.selector = args.selection.selector.take().or_else(|| request.selector.clone());
        global.namespace = global.namespace.take().or_else(|| Some(request.namespace.clone()));
        return Ok(());
    }
    if args.targets != request.targets {
        return Err(UserError::usage(format!(
            "the saved plan tears down {}, not {}",
            request.targets.join(" "),
            args.targets.join(" ")
        ))
        .hint("give only --plan FILE (and the safety flags)"));
    }
    Ok(())
}

/// Refuses to run a saved plan that no longer holds, saying what changed.
fn refuse_changed(saved: &Saved, plan: &PrunePlan, server: &str) -> Result<(), UserError> {
    let changed = plan_file::changes(saved, plan, server);
    if changed.is_empty() {
        return Ok(());
    }
    for change in &changed {
        eprintln!("changed: {change}");
    }
    Err(UserError::refused(format!(
        "the cluster moved since the plan was saved ({} change(s) above): nothing was deleted",
        changed.len()
    ))
    .hint("review the changes, then save a new plan with --plan-out"))
}

/// Writes the plan for `--plan-out` and says how to run it.
fn save_plan(
    path: &std::path::Path,
    plan: &PrunePlan,
    global: &GlobalArgs,
    session: &Session,
    args: &PruneArgs,
    desired_digest: Option<String>,
) -> Result<(), UserError> {
    let context = global
        .context
        .clone()
        .or_else(|| {
            load_kubeconfig(&global.connect_options())
                .ok()
                .and_then(|k| k.current_context)
        })
        .unwrap_or_default();
    let place = Place {
        context: &context,
        server: &session.connection.server,
    };
    let request = Request {
        targets: args.targets.clone(),
        namespace: session.connection.namespace.clone(),
        selector: args.selection.selector.clone(),
        desired: desired_digest,
    };
    plan_file::write(path, plan, &place, &request)?;
    eprintln!(
        "Plan saved to {}: {} object(s) in {} wave(s); nothing was deleted. Run it with: kubectl stack prune --plan {}",
        path.display(),
        plan.count(),
        plan.waves.len(),
        path.display()
    );
    if !plan.cascades.is_empty() {
        eprintln!("note: running it needs --allow-cascade (see the cascade victims above), or save it again with --keep-cascading");
    }
    if !not_held(&plan.parents).is_empty() {
        eprintln!("note: running it needs the parents above held (suspended, or --suspend-parents)");
    }
    Ok(())
}

/// Refuses a teardown that a live parent would undo (see [`crate::parents`]), unless the user
/// asked to suspend the parents first and every one of them can be.
fn refuse_parents(plan: &PrunePlan, suspend_parents: bool) -> Result<(), UserError> {
    let unheld = not_held(&plan.parents);
    if unheld.is_empty() {
        return Ok(());
    }
    let cannot: Vec<String> = plan
        .parents
        .iter()
        .filter(|p| !p.suspendable())
        .map(|p| p.id.to_string())
        .collect();
    if suspend_parents && cannot.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = unheld
        .iter()
        .map(|p| {
            let applies: Vec<String> = p.applies.iter().map(ToString::to_string).collect();
            format!("{} applies {}", p.id, applies.join(", "))
        })
        .collect();
    let error = UserError::refused(format!(
        "a live parent outside the plan would re-create what it deletes at its next reconcile: {}",
        named.join("; ")
    ));
    Err(if cannot.is_empty() {
        error.hint("tear the parent down too (name it), suspend it and the parents above it, or use --suspend-parents")
    } else {
        error.hint(format!(
            "{} cannot be suspended by kubectl stack: tear it down too, or stop its automated sync first",
            cannot.join(", ")
        ))
    })
}

/// Orphans mode: the orphans (and orphans already being deleted, which are waited for), ordered
/// through the graph of every tracked object.
async fn orphan_planning(
    session: &Session,
    report: OrphanReport,
    infer: bool,
    accept_unlisted: bool,
) -> Result<(Planning, ListScope), UserError> {
    let mut kept = Vec::new();
    let mut targets = HashMap::new();
    for classified in &report.classified {
        let id = classified.object.id();
        match &classified.verdict {
            Verdict::Orphan(reason) => {
                targets.insert(id, reason.to_string());
            }
            Verdict::Skipped(SkipReason::Terminating) => {
                targets.insert(id, "already being deleted".to_string());
            }
            Verdict::Skipped(SkipReason::Keep { marker }) => kept.push(Kept {
                id,
                reason: format!("keep marker {marker}"),
            }),
            Verdict::Skipped(_) | Verdict::Desired => {}
        }
    }
    // Every tracked object in scope is a node too, not only this stack's: another stack's object
    // that depends on an orphan, or lives in an orphan Namespace, keeps it.
    let mut listed: Vec<Listed> = report.classified.into_iter().map(|c| c.object).collect();
    let others = crate::bystanders::list(session, accept_unlisted).await?;
    listed.extend(others.objects);
    let options = LiveOptions {
        members: false,
        only_members: false,
        infer,
        only_selected: false,
    };
    let live = graph_of_with(session, listed, &options).await?;
    let chosen: HashMap<usize, String> = targets
        .into_iter()
        .filter_map(|(id, why)| live.graph.find(&id).map(|index| (index, why)))
        .collect();
    let planning = Planning {
        live,
        chosen,
        kept,
        mode: Mode::Orphans,
    };
    Ok((planning, others.scope))
}

fn snapshot(live: &LiveGraph) -> Snapshot<'_> {
    Snapshot {
        graph: &live.graph,
        objects: &live.objects,
        tracked: &live.tracked,
    }
}

/// Teardown mode: the named stacks, their members, and everything that depends on them.
async fn teardown_planning(session: &Session, args: &PruneArgs) -> Result<Planning, UserError> {
    // Every tracked object is a node (not only those under a live tracking object): the members
    // of a stack whose tracking object is already gone are found again by their marks.
    let live = live_graph_with(
        session,
        Some(Selection::default()),
        true,
        list_options(&args.tuning),
        !args.no_infer,
    )
    .await?;
    refuse_unlisted(&live.unlisted, args.skip_unlisted)?;
    let mut gone = Vec::new();
    let named = named_targets(session, args, &snapshot(&live), &mut gone).await?;
    let indices: Vec<usize> = named.iter().map(|(index, _)| *index).collect();
    let mut chosen = teardown_closure(&live.graph, &indices);
    chosen.extend(named);
    Ok(Planning {
        live,
        chosen,
        kept: Vec::new(),
        mode: Mode::Teardown(gone),
    })
}

/// The nodes the user named, with why each is chosen. A named stack that is already gone (a
/// teardown run again after a partial one) is found again by its members' marks.
async fn named_targets(
    session: &Session,
    args: &PruneArgs,
    snapshot: &Snapshot<'_>,
    gone: &mut Vec<(Preset, MarkValue)>,
) -> Result<Vec<(usize, String)>, UserError> {
    let graph = snapshot.graph;
    let mut found = Vec::new();
    for target in &args.targets {
        let (kind, id) = resolve_typed(session, target)?;
        let ids: Vec<ObjectId> = match (id, &args.selection.selector) {
            (Some(id), _) => vec![id],
            (None, Some(selector)) => {
                let namespace = session.connection.namespace.clone();
                let selection = Selection::new(Some(selector.clone()), None);
                let listed = collect_kinds(
                    &session.connection.client,
                    std::slice::from_ref(&kind),
                    &ListScope::Namespace(namespace),
                    &selection,
                    list_options(&args.tuning),
                )
                .await;
                if let Some(failure) = listed.failures.first() {
                    return Err(UserError::failed(format!(
                        "cannot list {}: {:?}",
                        failure.kind.kind_with_group(),
                        failure.failure
                    )));
                }
                listed.objects.iter().map(Listed::id).collect()
            }
            (None, None) => {
                return Err(UserError::usage(format!(
                    "{target}: give TYPE/NAME, or TYPE with -l SELECTOR"
                )))
            }
        };
        for id in ids {
            found.extend(find_named(snapshot, graph, &id, gone)?);
        }
    }
    Ok(found)
}

fn find_named(
    snapshot: &Snapshot,
    graph: &Graph,
    id: &ObjectId,
    gone: &mut Vec<(Preset, MarkValue)>,
) -> Result<Vec<(usize, String)>, UserError> {
    if let Some(index) = graph
        .find(id)
        .filter(|&i| graph.nodes[i].status == NodeStatus::Selected)
    {
        return Ok(vec![(index, "named".to_string())]);
    }
    let is_flux = FLUX_KINDS.contains(&(id.group.as_str(), id.kind.as_str()));
    let preset = if id.kind == "Kustomization" {
        Preset::Flux
    } else {
        Preset::FluxHelm
    };
    let key = (
        preset,
        MarkValue {
            name: id.name.clone(),
            namespace: id.namespace.clone(),
        },
    );
    let left = if is_flux {
        members_of_gone(snapshot, &key)
    } else {
        Vec::new()
    };
    if left.is_empty() {
        return Err(UserError::failed(format!("{id} not found")).hint(
            "name a Kustomization, HelmRelease, inventory object or ApplySet parent in -n NAMESPACE (it may already be gone)",
        ));
    }
    tracing::warn!(
        "{id} is already gone; tearing down the {} object(s) that still carry its mark",
        left.len()
    );
    gone.push(key);
    Ok(left
        .into_iter()
        .map(|index| (index, format!("member of {id} (already gone)")))
        .collect())
}

/// Ctrl-C: the first one stops new deletes; the executor reports and ends.
fn interrupt_signal() -> tokio::sync::watch::Receiver<bool> {
    let (sender, receiver) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: no new deletes will be started");
            let _ = sender.send(true);
            // Keep the sender alive so the receivers see `true`, not a closed channel.
            std::future::pending::<()>().await;
        }
    });
    receiver
}
