//! Running a confirmed plan: suspending what must hold still, the waves with a re-check before
//! each, progress, the summary, and what blocks a wave that did not finish.

use crate::cluster::collect::ListOptions;
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::model::identity::ObjectId;
use crate::prune::execute::{execute, Blocker, ExecOptions, Outcome};
use crate::prune::recheck::Recheck;
use crate::prune::report::{finish, report_suspended, Ending, Format, Progress};
use crate::prune::suspend::{suspend_all, suspend_parents, Suspensions};
use crate::prune::teardown::PrunePlan;

/// How to run a plan.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// How to delete.
    pub exec: ExecOptions,
    /// How the re-check lists.
    pub list: ListOptions,
    /// Table or JSON lines.
    pub format: Format,
    /// Show each event, not only the waves.
    pub verbose: bool,
}

/// Suspends what must hold still while the plan runs: with `parents`, the live parents that
/// would re-create what it deletes; always, the Flux objects it deletes (so that they do not
/// re-apply their members meanwhile). On failure, says what was left suspended.
pub async fn suspend_for(session: &Session, plan: &PrunePlan, parents: bool) -> Result<Suspensions, UserError> {
    let client = &session.connection.client;
    let mut suspensions = Suspensions::default();
    if parents {
        suspensions = match suspend_parents(client, &plan.parents).await {
            Ok(done) => done,
            Err((done, error)) => {
                report_suspended(&done.left(&|_| false));
                return Err(error);
            }
        };
    }
    let targets: Vec<_> = plan.waves.iter().flatten().collect();
    match suspend_all(client, &targets).await {
        Ok(done) => suspensions.entries.extend(done.entries),
        Err((done, error)) => {
            suspensions.entries.extend(done.entries);
            report_suspended(&suspensions.left(&|_| false));
            return Err(error);
        }
    };
    Ok(suspensions)
}

/// Runs the waves (each re-checked first), reports progress and the summary, and explains what
/// blocks a wave that timed out; returns the exit code.
pub async fn run_waves(
    session: &Session,
    plan: &PrunePlan,
    suspensions: Suspensions,
    options: &RunOptions,
) -> Result<u8, UserError> {
    let client = session.connection.client.clone();
    let mut recheck = Recheck::new(session, plan, suspensions, options.list);
    let format = options.format;
    let mut progress = Progress::new(format, options.verbose);
    let cancel = interrupt_signal();
    let outcome = execute(&client, &plan.waves, &options.exec, cancel, &mut progress, &mut recheck).await;
    progress.clear();
    // What the re-check dropped or withheld was not deleted: a suspension prune set on it stays,
    // and is reported (review finding R5 of issue 25).
    let deleted: Vec<ObjectId> = if matches!(outcome, Outcome::Completed) {
        plan.waves
            .iter()
            .flatten()
            .filter(|t| !recheck.kept_back(t))
            .map(|t| t.id.clone())
            .collect()
    } else {
        Vec::new()
    };
    let ending = Ending {
        plan,
        outcome: &outcome,
        suspended: recheck.suspensions.left(&|id| deleted.contains(id)),
        server_dry_run: options.exec.server_dry_run,
        wave_timeout: options.exec.wave_timeout,
    };
    // In JSON the summary stays the last line; on a terminal the chains follow the blockers table.
    let blockers: &[Blocker] = match &outcome {
        Outcome::TimedOut { blockers, .. } => blockers.as_slice(),
        _ => &[],
    };
    if !blockers.is_empty() && format == Format::Json {
        explain_blockers(session, blockers, format).await?;
    }
    let code = finish(&progress, &ending, format)?;
    if !blockers.is_empty() && format != Format::Json {
        explain_blockers(session, blockers, format).await?;
    }
    Ok(code)
}

/// What the objects of a wave that did not go wait for, as `stuck` explains it: chains down to
/// the one finalizer to remove, and its `unstick` command.
async fn explain_blockers(session: &Session, blockers: &[Blocker], format: Format) -> Result<(), UserError> {
    let ids: Vec<_> = blockers
        .iter()
        .map(|b| (b.target.kind.clone(), b.target.id.clone()))
        .collect();
    let report = crate::breakglass::stuck::explain_blockers(session, &ids).await;
    match format {
        Format::Json => {
            let line = crate::breakglass::stuck::chains::to_json(&report);
            crate::render::emit(&crate::render::json_line("diagnosis", line))
        }
        _ => {
            crate::say_part!("{}", crate::breakglass::stuck::chains::render_text(&report));
            Ok(())
        }
    }
}

/// Ctrl-C or SIGTERM: the first stops new deletes and every retry (the executor reports and
/// ends, exit 130); a second exits at once, saying that deletes already sent may still land.
fn interrupt_signal() -> tokio::sync::watch::Receiver<bool> {
    let (sender, receiver) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let how = next_signal(&mut terminate).await;
        crate::cluster::retry::cancel_retries();
        crate::say!("{how}: no new deletes will be started and nothing is retried (again to exit at once)");
        let _ = sender.send(true);
        let how = next_signal(&mut terminate).await;
        crate::say!(
            "{how} again: exiting now; deletes already sent may still land, and suspensions this run made stay (annotated {}): run the same command again to see where it stands",
            crate::prune::suspend::SUSPENDED_BY
        );
        std::process::exit(i32::from(crate::error::exit::INTERRUPTED));
    });
    receiver
}

/// The next Ctrl-C or SIGTERM, named.
async fn next_signal(terminate: &mut Option<tokio::signal::unix::Signal>) -> &'static str {
    match terminate {
        Some(terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => "interrupted",
                _ = terminate.recv() => "terminated",
            }
        }
        None => tokio::signal::ctrl_c().await.map_or("terminated", |()| "interrupted"),
    }
}
