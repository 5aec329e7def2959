//! `kubectl stack prune`: the plan (deletion waves), a confirmation, then ordered deletion,
//! re-checked before every wave, with a clear report of what blocks.

use std::collections::HashMap;

use crate::classify::{SkipReason, Verdict};
use crate::cli::{DryRun, GlobalArgs, PruneArgs, PruneOutput};
use crate::collect::{collect_kinds, ListScope, Listed};
use crate::commands::graph::{graph_of, live_graph, LiveGraph};
use crate::commands::orphans::{find, read_manifests, OrphanReport};
use crate::commands::{confirm, list_options, resolve_typed, Session};
use crate::error::{exit, UserError};
use crate::execute::{execute, ExecOptions};
use crate::graph::{Graph, NodeStatus};
use crate::identity::ObjectId;
use crate::prune_report::{finish, print_plan, report_suspended, Ending, Format, Progress};
use crate::recheck::Recheck;
use crate::suspend::{suspend_all, Suspensions};
use crate::teardown::{members_of_gone, plan, teardown_closure, Kept, Mode, PrunePlan, Snapshot};
use crate::trackers::{MarkValue, Preset, Selection, FLUX_KINDS};

/// Runs `prune`.
pub async fn run(global: &GlobalArgs, args: PruneArgs) -> anyhow::Result<u8> {
    let teardown = !args.targets.is_empty();
    check_mode(&args, teardown)?;
    let manifests = if teardown { None } else { read_manifests(&args.desired)? };
    let mut session = Session::open(global).await?;
    let format = match args.output {
        PruneOutput::Table => Format::Table,
        PruneOutput::Json => Format::Json,
    };
    let plan = if teardown {
        session.scope = ListScope::AllNamespaces;
        teardown_plan(&session, &args).await?
    } else {
        let report = find(&session, &args.selection, &args.desired, manifests, &args.tuning).await?;
        refuse_unlisted(&report.unchecked, args.skip_unlisted)?;
        orphan_plan(&session, report).await?
    };
    print_plan(&plan, format)?;
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
        let targets: Vec<_> = plan.waves.iter().flatten().collect();
        suspensions = match suspend_all(&session.connection.client, &targets).await {
            Ok(done) => done,
            Err((done, error)) => {
                report_suspended(&done.left(&|_| false));
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
    Ok(finish(&progress, &ending, format)?)
}

fn check_mode(args: &PruneArgs, teardown: bool) -> Result<(), UserError> {
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

/// Orphans mode: the orphans (and orphans already being deleted, which are waited for), ordered
/// through the graph of every tracked object.
async fn orphan_plan(session: &Session, report: OrphanReport) -> Result<PrunePlan, UserError> {
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
    let listed: Vec<Listed> = report.classified.into_iter().map(|c| c.object).collect();
    let live = graph_of(session, listed, false, false).await?;
    let chosen: HashMap<usize, String> = targets
        .into_iter()
        .filter_map(|(id, why)| live.graph.find(&id).map(|index| (index, why)))
        .collect();
    plan(&snapshot(&live), &session.catalog, chosen, kept, Mode::Orphans)
}

fn snapshot(live: &LiveGraph) -> Snapshot<'_> {
    Snapshot {
        graph: &live.graph,
        objects: &live.objects,
        tracked: &live.tracked,
    }
}

/// Teardown mode: the named stacks, their members, and everything that depends on them.
async fn teardown_plan(session: &Session, args: &PruneArgs) -> Result<PrunePlan, UserError> {
    // Every tracked object is a node (not only those under a live tracking object): the members
    // of a stack whose tracking object is already gone are found again by their marks.
    let live = live_graph(session, Some(Selection::default()), true, &args.tuning).await?;
    refuse_unlisted(&live.unlisted, args.skip_unlisted)?;
    let snapshot = snapshot(&live);
    let mut gone = Vec::new();
    let named = named_targets(session, args, &snapshot, &mut gone).await?;
    let indices: Vec<usize> = named.iter().map(|(index, _)| *index).collect();
    let mut chosen = teardown_closure(&live.graph, &indices);
    chosen.extend(named);
    plan(&snapshot, &session.catalog, chosen, Vec::new(), Mode::Teardown(gone))
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
