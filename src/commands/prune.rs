//! `kubectl stack prune`: the plan (deletion waves), a confirmation, then ordered deletion
//! with a clear report of what blocks.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;

use crate::classify::{SkipReason, Verdict};
use crate::cli::{DryRun, GlobalArgs, PruneArgs, PruneOutput};
use crate::collect::{ListScope, Listed};
use crate::commands::graph::{graph_of, live_graph, LiveGraph, FLUX_KINDS};
use crate::commands::list::tracked_by;
use crate::commands::orphans::{find, read_manifests};
use crate::commands::{confirm, resolve_typed, Session};
use crate::discovery::Catalog;
use crate::error::{exit, UserError};
use crate::execute::{execute, Blocker, Change, Event, ExecOptions, Observer, Outcome, Target};
use crate::graph::{EdgeKind, Graph, NodeStatus};
use crate::graph_output::cycle_path;
use crate::identity::ObjectId;
use crate::plan::plan_deletion;
use crate::render;
use crate::retry::with_retries;
use crate::trackers::keep_marker;

/// An object left alone on purpose, and why.
#[derive(Debug, Clone)]
pub struct Kept {
    /// The object.
    pub id: ObjectId,
    /// Why.
    pub reason: String,
}

/// What prune will do.
#[derive(Debug, Clone, Default)]
pub struct PrunePlan {
    /// Deletion waves.
    pub waves: Vec<Vec<Target>>,
    /// Objects left alone, with the reason.
    pub kept: Vec<Kept>,
}

/// Runs `prune`.
pub async fn run(global: &GlobalArgs, args: PruneArgs) -> anyhow::Result<u8> {
    let teardown = !args.targets.is_empty();
    check_mode(&args, teardown)?;
    let manifests = if teardown { None } else { read_manifests(&args.desired)? };
    let mut session = Session::open(global).await?;
    let plan = if teardown {
        session.scope = ListScope::AllNamespaces;
        teardown_plan(&session, &args).await?
    } else {
        let report = find(&session, &args.selection, &args.desired, manifests, &args.tuning).await?;
        refuse_unlisted(&report.unchecked, args.skip_unlisted)?;
        orphan_plan(&session, report).await?
    };
    print_plan(&plan, args.output)?;
    let count: usize = plan.waves.iter().map(Vec::len).sum();
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
    if args.dry_run == DryRun::None {
        confirm(
            &format!("Delete {count} object(s) in {} wave(s)?", plan.waves.len()),
            args.yes,
            "nothing was deleted",
        )?;
        suspend_flux_trackers(&session, &plan).await?;
    }
    let options = ExecOptions {
        server_dry_run: args.dry_run == DryRun::Server,
        cascade: args.cascade,
        wave_timeout: args.timeout,
        concurrency: usize::from(args.delete_concurrency),
    };
    let cancel = interrupt_signal();
    let mut observer = Progress::new(args.output, global.verbosity >= 2);
    let outcome = execute(&session.connection.client, &plan.waves, &options, cancel, &mut observer).await;
    observer.clear();
    Ok(finish(&observer, &plan, &outcome, args.output, &options)?)
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
async fn orphan_plan(
    session: &Session,
    report: crate::commands::orphans::OrphanReport,
) -> Result<PrunePlan, UserError> {
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
    plan_targets(&live, &session.catalog, chosen, kept)
}

/// Teardown mode: the named stacks, their members, and everything that depends on them.
async fn teardown_plan(session: &Session, args: &PruneArgs) -> Result<PrunePlan, UserError> {
    let live = live_graph(session, None, true, &args.tuning).await?;
    refuse_unlisted(&live.unlisted, args.skip_unlisted)?;
    let named = named_targets(session, args, &live.graph).await?;
    let chosen = teardown_closure(&live.graph, &named);
    plan_targets(&live, &session.catalog, chosen, Vec::new())
}

async fn named_targets(session: &Session, args: &PruneArgs, graph: &Graph) -> Result<Vec<usize>, UserError> {
    let mut found = Vec::new();
    for target in &args.targets {
        let (kind, id) = resolve_typed(session, target)?;
        let ids: Vec<ObjectId> = match (id, &args.selection.selector) {
            (Some(id), _) => vec![id],
            (None, Some(selector)) => {
                let namespace = kind.namespaced.then_some(session.connection.namespace.as_str());
                let api = crate::collect::api_for(&session.connection.client, &kind, namespace);
                let params = kube::api::ListParams::default().labels(selector);
                let list = with_retries("list targets", || api.list_metadata(&params))
                    .await
                    .map_err(|err| session.connection.explain(&err))?;
                list.items
                    .into_iter()
                    .map(|o| Listed::new(kind.clone(), o.metadata).id())
                    .collect()
            }
            (None, None) => {
                return Err(UserError::usage(format!(
                    "{target}: give TYPE/NAME, or TYPE with -l SELECTOR"
                )))
            }
        };
        for id in ids {
            match graph
                .find(&id)
                .filter(|&i| graph.nodes[i].status == NodeStatus::Selected)
            {
                Some(index) => found.push(index),
                None => return Err(UserError::failed(format!("{id} not found")).hint(
                    "name a Kustomization, HelmRelease or inventory object in -n NAMESPACE (it may already be gone)",
                )),
            }
        }
    }
    Ok(found)
}

/// The named nodes, their members, and everything that depends on any of them, transitively.
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
        // not deleted, and it keeps its Namespace or CRD alive (see `protect_holders`).
        let explicit =
            |e: &&crate::graph::Edge| e.to == current && !matches!(e.kind, EdgeKind::Namespace | EdgeKind::Crd);
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

/// Leaves out what must not be deleted (keep markers, controller-made objects, Namespaces that
/// hold objects that stay) and plans the rest into waves.
fn plan_targets(
    live: &LiveGraph,
    catalog: &Catalog,
    chosen: HashMap<usize, String>,
    mut kept: Vec<Kept>,
) -> Result<PrunePlan, UserError> {
    let graph = &live.graph;
    let mut targets: HashMap<usize, String> = HashMap::new();
    for (index, why) in chosen {
        let id = &graph.nodes[index].id;
        let Some(object) = live.objects.get(id) else { continue };
        if let Some(marker) = keep_marker(&object.meta) {
            kept.push(Kept {
                id: id.clone(),
                reason: format!("keep marker {marker}"),
            });
        } else if let Some(owner) = object.controller_owner() {
            tracing::info!("{id} is left to its controller {}/{}", owner.kind, owner.name);
        } else {
            targets.insert(index, why);
        }
    }
    protect_holders(graph, &live.tracked, catalog, &mut targets, &mut kept);
    let indices: HashSet<usize> = targets.keys().copied().collect();
    let plan = plan_deletion(graph, &indices).map_err(|cycle| {
        UserError::new(exit::CYCLE, format!("dependency cycle: {}", cycle_path(graph, &cycle)))
            .hint("no deletion order exists; fix the dependsOn/depends-on annotations")
    })?;
    let waves = plan
        .waves
        .iter()
        .map(|wave| {
            wave.iter()
                .filter_map(|index| {
                    let id = &graph.nodes[*index].id;
                    let object = live.objects.get(id)?;
                    Some(Target {
                        id: id.clone(),
                        kind: object.kind.clone(),
                        uid: object.uid().to_string(),
                        why: crate::graph_output::plan_why(graph, *index, &indices, targets.get(index)),
                        terminating: object.is_terminating(),
                        finalizers: object.finalizers().to_vec(),
                        tracked_by: tracked_by(object),
                    })
                })
                .collect()
        })
        .collect();
    kept.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(PrunePlan { waves, kept })
}

/// A Namespace or CRD is not deleted while it holds a tracked object that is not deleted
/// (another stack's, a desired or a kept one): deleting it would delete that object too.
fn protect_holders(
    graph: &Graph,
    tracked: &[ObjectId],
    catalog: &Catalog,
    targets: &mut HashMap<usize, String>,
    kept: &mut Vec<Kept>,
) {
    let deleted: HashSet<&ObjectId> = targets.keys().map(|&i| &graph.nodes[i].id).collect();
    let staying: Vec<&ObjectId> = graph
        .nodes
        .iter()
        .filter(|node| node.status == NodeStatus::Selected)
        .map(|node| &node.id)
        .chain(tracked.iter())
        .filter(|id| !deleted.contains(id))
        .collect();
    let crd_of = |id: &ObjectId| {
        catalog
            .get(&id.group, &id.kind)
            .map(|k| format!("{}.{}", k.plural, k.group))
    };
    let holders: Vec<usize> = targets.keys().copied().collect();
    for index in holders {
        let holder = &graph.nodes[index].id;
        let held = match (holder.group.as_str(), holder.kind.as_str()) {
            ("", "Namespace") => staying
                .iter()
                .find(|id| id.namespace.as_deref() == Some(holder.name.as_str())),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => staying
                .iter()
                .find(|id| crd_of(id).as_deref() == Some(holder.name.as_str())),
            _ => None,
        };
        if let Some(held) = held {
            kept.push(Kept {
                id: holder.clone(),
                reason: format!("holds {held}, which is not pruned"),
            });
            targets.remove(&index);
        }
    }
}

fn print_plan(plan: &PrunePlan, output: PruneOutput) -> Result<(), UserError> {
    match output {
        PruneOutput::Table => {
            let rows: Vec<Vec<String>> = plan
                .waves
                .iter()
                .enumerate()
                .flat_map(|(wave, targets)| {
                    targets.iter().map(move |t| {
                        vec![
                            (wave + 1).to_string(),
                            t.id.kind_with_group(),
                            t.id.namespace.clone().unwrap_or_default(),
                            t.id.name.clone(),
                            t.why.clone(),
                        ]
                    })
                })
                .collect();
            if !rows.is_empty() {
                render::emit(&render::table(&["WAVE", "KIND", "NAMESPACE", "NAME", "WHY"], rows))?;
            }
            for kept in &plan.kept {
                eprintln!("kept: {} ({})", kept.id, kept.reason);
            }
            Ok(())
        }
        PruneOutput::Json => {
            let waves: Vec<Vec<serde_json::Value>> = plan
                .waves
                .iter()
                .map(|wave| {
                    wave.iter()
                        .map(|t| json!({"id": t.id, "uid": t.uid, "why": t.why}))
                        .collect()
                })
                .collect();
            let kept: Vec<serde_json::Value> = plan
                .kept
                .iter()
                .map(|k| json!({"id": k.id, "reason": k.reason}))
                .collect();
            render::emit(&(json!({"type": "plan", "waves": waves, "kept": kept}).to_string() + "\n"))
        }
    }
}

/// Suspends the Flux Kustomizations and HelmReleases about to be deleted, so that a running
/// controller does not re-apply what prune deletes before them.
async fn suspend_flux_trackers(session: &Session, plan: &PrunePlan) -> Result<(), UserError> {
    let patch = kube::api::Patch::Merge(json!({"spec": {"suspend": true}}));
    for target in plan.waves.iter().flatten() {
        let is_flux = FLUX_KINDS.contains(&(target.kind.group.as_str(), target.kind.kind.as_str()));
        if !is_flux || target.terminating {
            continue;
        }
        let api = crate::collect::api_for(&session.connection.client, &target.kind, target.id.namespace.as_deref());
        let params = kube::api::PatchParams::default();
        match with_retries("suspend", || api.patch(&target.id.name, &params, &patch)).await {
            Ok(_) => tracing::info!("suspended {}", target.id),
            Err(err) if crate::error::is_not_found(&err) => {}
            Err(err) => {
                return Err(UserError::failed(format!(
                    "cannot suspend {}: {}",
                    target.id,
                    crate::error::root_cause(&err)
                )))
            }
        }
    }
    Ok(())
}

/// Ctrl-C: the first one stops new deletes; the executor reports and ends.
fn interrupt_signal() -> watch::Receiver<bool> {
    let (sender, receiver) = watch::channel(false);
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

/// Counts and prints what happens: a progress bar per wave on a terminal, lines otherwise.
struct Progress {
    output: PruneOutput,
    verbose: bool,
    counts: HashMap<Change, usize>,
    failures: Vec<Event>,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(output: PruneOutput, verbose: bool) -> Self {
        Self {
            output,
            verbose,
            counts: HashMap::new(),
            failures: Vec::new(),
            bar: None,
        }
    }

    /// Removes the bar (before the summary and the blockers report).
    fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Prints a line on stderr, above the bar when there is one.
    fn say(&self, line: String) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn bar_for(&self, wave: usize, waves: usize, objects: usize) -> Option<indicatif::ProgressBar> {
        use std::io::IsTerminal;
        if self.output != PruneOutput::Table || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::new(objects as u64);
        let template = if crate::render::color_allowed() {
            "wave {prefix} {bar:30.cyan/blue} {pos}/{len} gone {elapsed} {wide_msg}"
        } else {
            "wave {prefix} {bar:30} {pos}/{len} gone {elapsed} {wide_msg}"
        };
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(format!("{wave}/{waves}"));
        bar.enable_steady_tick(Duration::from_millis(200));
        Some(bar)
    }

    fn count(&self, change: Change) -> usize {
        self.counts.get(&change).copied().unwrap_or(0)
    }
}

impl Observer for Progress {
    fn event(&mut self, event: &Event) {
        *self.counts.entry(event.change).or_insert(0) += 1;
        if event.change == Change::Failed {
            self.failures.push(event.clone());
        }
        if self.output == PruneOutput::Json {
            let mut line = serde_json::to_value(event).unwrap_or_default();
            line["type"] = json!("event");
            let _ = render::emit(&(line.to_string() + "\n"));
        }
        let id = ObjectId::new(&event.group, &event.kind, event.namespace.as_deref(), &event.name);
        if let Some(bar) = &self.bar {
            if matches!(event.change, Change::Gone | Change::AlreadyGone | Change::Replaced) {
                bar.inc(1);
            }
        }
        match event.change {
            Change::Failed => self.say(format!("  failed: {id}: {}", event.error.as_deref().unwrap_or(""))),
            Change::Replaced => self.say(format!(
                "  {id}: the name now has another UID; that object was left alone"
            )),
            Change::AlreadyGone if self.verbose => self.say(format!("  already gone: {id}")),
            Change::Deleted | Change::Gone | Change::WouldDelete | Change::AlreadyTerminating if self.verbose => {
                self.say(format!("  {:?}: {id}", event.change))
            }
            _ => {}
        }
    }

    fn wave_started(&mut self, wave: usize, waves: usize, objects: usize) {
        self.clear();
        self.bar = self.bar_for(wave, waves, objects);
        self.say(format!("wave {wave}/{waves}: deleting {objects} object(s)"));
    }

    fn waiting(&mut self, wave: usize, left: &[Blocker]) {
        let shown: Vec<String> = left.iter().take(5).map(describe_blocker).collect();
        let more = if left.len() > 5 {
            format!(" and {} more", left.len() - 5)
        } else {
            String::new()
        };
        match &self.bar {
            Some(bar) => bar.set_message(format!("waiting for {}{more}", shown.join("; "))),
            None => eprintln!(
                "wave {wave}: waiting for {} object(s): {}{more}",
                left.len(),
                shown.join("; ")
            ),
        }
    }

    fn wave_done(&mut self, wave: usize, elapsed: Duration) {
        self.clear();
        eprintln!("wave {wave}: gone in {:.1}s", elapsed.as_secs_f64());
    }
}

/// How long a blocker has been terminating, or `-` when it was never seen terminating.
fn terminating_for(blocker: &Blocker) -> String {
    blocker
        .deletion_timestamp
        .as_ref()
        .map(|t| render::age(Some(t)))
        .unwrap_or_else(|| "-".to_string())
}

fn describe_blocker(blocker: &Blocker) -> String {
    let since = terminating_for(blocker);
    if blocker.finalizers.is_empty() {
        format!("{} (terminating {since})", blocker.target.id)
    } else {
        format!(
            "{} (terminating {since}, finalizers: {})",
            blocker.target.id,
            blocker.finalizers.join(", ")
        )
    }
}

fn finish(
    progress: &Progress,
    plan: &PrunePlan,
    outcome: &Outcome,
    output: PruneOutput,
    options: &ExecOptions,
) -> Result<u8, UserError> {
    let deleted = progress.count(Change::Deleted) + progress.count(Change::AlreadyTerminating);
    let gone = progress.count(Change::AlreadyGone) + progress.count(Change::Replaced);
    let failed = progress.count(Change::Failed);
    let would = progress.count(Change::WouldDelete);
    let (status, code) = match outcome {
        Outcome::Completed if failed > 0 => ("failed", exit::INCOMPLETE),
        Outcome::Completed => ("completed", exit::OK),
        Outcome::DeleteFailed { .. } | Outcome::TimedOut { .. } => ("incomplete", exit::INCOMPLETE),
        Outcome::Interrupted { .. } => ("interrupted", exit::INTERRUPTED),
    };
    match output {
        PruneOutput::Json => render::emit(
            &(json!({"type": "summary", "status": status, "deleted": deleted, "alreadyGone": gone, "kept": plan.kept.len(),
                     "failed": failed, "wouldDelete": would})
            .to_string()
                + "\n"),
        )?,
        PruneOutput::Table if options.server_dry_run => {
            render::emit(&format!("Server dry run: {would} would be deleted, {gone} already gone, {} kept, {failed} failed.\n", plan.kept.len()))?
        }
        PruneOutput::Table => render::emit(&format!(
            "Summary: {deleted} deleted, {gone} already gone, {} kept (marker or holding), {failed} failed.\n",
            plan.kept.len()
        ))?,
    }
    match outcome {
        Outcome::DeleteFailed { wave } => {
            eprintln!("error: {failed} delete(s) failed in wave {wave}; later waves were not started (nothing they depend on was deleted)");
            eprintln!("hint: fix the cause above, then run the same command again to continue");
        }
        Outcome::TimedOut { wave, blockers } => report_blockers(*wave, blockers, options.wave_timeout),
        Outcome::Interrupted { wave } => eprintln!("interrupted in wave {wave}: no further deletes were started"),
        Outcome::Completed if failed > 0 => eprintln!("error: {failed} delete(s) failed"),
        Outcome::Completed => {}
    }
    Ok(code)
}

fn report_blockers(wave: usize, blockers: &[Blocker], timeout: Duration) {
    eprintln!(
        "error: wave {wave} was not gone within {}s; later waves were not started (nothing these objects depend on was deleted)",
        timeout.as_secs()
    );
    let rows: Vec<Vec<String>> = blockers
        .iter()
        .map(|b| {
            vec![
                b.target.id.kind_with_group(),
                b.target.id.namespace.clone().unwrap_or_default(),
                b.target.id.name.clone(),
                terminating_for(b),
                if b.finalizers.is_empty() {
                    "<none>".into()
                } else {
                    b.finalizers.join(",")
                },
                b.target.tracked_by.clone(),
            ]
        })
        .collect();
    eprint!(
        "{}",
        render::table(
            &["KIND", "NAMESPACE", "NAME", "TERMINATING", "FINALIZERS", "TRACKED-BY"],
            rows
        )
    );
    for command in stuck_commands(blockers) {
        eprintln!("hint: inspect them with: {command}");
    }
    eprintln!("hint: when they are gone, run the same prune command again to continue");
}

/// The `kubectl stack stuck` commands that inspect exactly these objects, one per namespace.
pub fn stuck_commands(blockers: &[Blocker]) -> Vec<String> {
    let mut by_namespace: std::collections::BTreeMap<Option<String>, Vec<String>> = Default::default();
    for blocker in blockers {
        let id = &blocker.target.id;
        let typed = if id.group.is_empty() {
            blocker.target.kind.plural.clone()
        } else {
            format!("{}.{}", blocker.target.kind.plural, id.group)
        };
        by_namespace
            .entry(id.namespace.clone())
            .or_default()
            .push(format!("{typed}/{}", id.name));
    }
    by_namespace
        .into_iter()
        .map(|(namespace, names)| match namespace {
            Some(ns) => format!("kubectl stack stuck -n {ns} {}", names.join(" ")),
            None => format!("kubectl stack stuck {}", names.join(" ")),
        })
        .collect()
}
