//! Execute: delete a plan wave by wave. Within a wave, bounded concurrent deletes with a UID
//! precondition; then wait, by watching, until every object of the wave is gone (NotFound, or
//! the name now has another UID) before the next wave starts. A failed delete, a timed-out wave
//! or Ctrl-C stops before the next wave: nothing a stuck object depends on is deleted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use kube::core::ObjectMeta;
use kube::Client;
use serde::Serialize;
use tokio::sync::watch;

use crate::cluster::collect::api_for;
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::error::{api_status, root_cause, LookupError};
use crate::model::identity::ObjectId;

mod wait;
use wait::{wait_children, wait_gone, WaitResult, WaveWatch};

/// One object to delete.
#[derive(Debug, Clone)]
pub struct Target {
    /// Identity.
    pub id: ObjectId,
    /// Its kind.
    pub kind: Arc<KindInfo>,
    /// The UID that was planned: only this object is deleted, never a namesake.
    pub uid: String,
    /// Why it is deleted (for the plan).
    pub why: String,
    /// Whether it was already being deleted when planned (no DELETE is sent; it is waited for).
    pub terminating: bool,
    /// Finalizers when planned.
    pub finalizers: Vec<String>,
    /// Which tools track it, for the blockers report.
    pub tracked_by: String,
}

/// How dependents of a deleted object are garbage-collected (`--cascade`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cascade {
    /// Dependents are deleted in the background (default).
    #[default]
    Background,
    /// The object waits until its dependents are deleted.
    Foreground,
    /// Dependents are left alone.
    Orphan,
}

/// How to execute.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Send every delete with `dryRun=All` and do not wait.
    pub server_dry_run: bool,
    /// Garbage collection of dependents.
    pub cascade: Cascade,
    /// How long one wave may take to be gone.
    pub wave_timeout: Duration,
    /// Deletes in flight at once.
    pub concurrency: usize,
}

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// The DELETE was accepted.
    Deleted,
    /// With server dry-run: the server would delete it.
    WouldDelete,
    /// It was already gone (NotFound).
    AlreadyGone,
    /// The name now belongs to another object (another UID): that one was left alone.
    Replaced,
    /// It was already being deleted: no DELETE was sent.
    AlreadyTerminating,
    /// The DELETE failed.
    Failed,
    /// It is gone (the wave's wait saw it go).
    Gone,
    /// The re-check before its wave found it changed: it was not deleted (see the reason).
    Dropped,
    /// Its DELETE was sent and no answer came before the run was interrupted: the server may
    /// still act on it (the object may be deleted, or not).
    MayStillLand,
    /// The run was interrupted before its DELETE was sent.
    NotSent,
}

/// One event of the execution, for progress and `-o json` lines.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// 1-based wave.
    pub wave: usize,
    /// What happened.
    pub change: Change,
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// The planned UID.
    pub uid: String,
    /// Error message, for failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it was dropped, for drops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Event {
    fn new(wave: usize, change: Change, target: &Target, error: Option<String>) -> Self {
        Self {
            wave,
            change,
            group: target.id.group.clone(),
            kind: target.id.kind.clone(),
            namespace: target.id.namespace.clone(),
            name: target.id.name.clone(),
            uid: target.uid.clone(),
            error,
            reason: None,
        }
    }

    /// A target dropped by the re-check, with the reason.
    pub fn dropped(wave: usize, target: &Target, reason: &str) -> Self {
        Self {
            reason: Some(reason.to_string()),
            ..Self::new(wave, Change::Dropped, target, None)
        }
    }
}

/// A wave after its re-check: what is still to delete, and what was dropped (with why).
#[derive(Debug, Clone, Default)]
pub struct CheckedWave {
    /// Still to delete.
    pub targets: Vec<Target>,
    /// Dropped, each with the reason.
    pub dropped: Vec<(Target, String)>,
}

/// Runs before each wave's deletes: re-checks the wave against the cluster and prepares it.
pub trait WaveGuard: Send {
    /// Checks (and prepares) one wave; `wave` is 1-based.
    fn before_wave(&mut self, wave: usize, targets: Vec<Target>) -> futures::future::BoxFuture<'_, CheckedWave>;

    /// After a wave is gone: what the controllers of its deleted objects made (ownerReferences
    /// with `controller: true`, down the chain) that is still there. It dies with them, and the
    /// next wave waits for it too. None by default.
    fn children<'a>(&'a mut self, _wave: usize, _deleted: &'a [Target]) -> futures::future::BoxFuture<'a, Vec<Target>> {
        Box::pin(async { Vec::new() })
    }
}

/// No re-check: every wave runs as planned.
pub struct Unchecked;

impl WaveGuard for Unchecked {
    fn before_wave(&mut self, _wave: usize, targets: Vec<Target>) -> futures::future::BoxFuture<'_, CheckedWave> {
        Box::pin(async move {
            CheckedWave {
                targets,
                dropped: Vec::new(),
            }
        })
    }
}

/// An object still there when its wave timed out.
#[derive(Debug, Clone)]
pub struct Blocker {
    /// The object.
    pub target: Target,
    /// Its finalizers as last seen.
    pub finalizers: Vec<String>,
    /// When its deletion was requested, as last seen.
    pub deletion_timestamp: Option<Time>,
}

/// How an execution ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Every wave is gone.
    Completed,
    /// Deletes of a wave failed; later waves were not started.
    DeleteFailed {
        /// The 1-based wave.
        wave: usize,
    },
    /// A wave was not gone in time; later waves were not started.
    TimedOut {
        /// The 1-based wave.
        wave: usize,
        /// What is still there.
        blockers: Vec<Blocker>,
    },
    /// Ctrl-C: no new delete was started.
    Interrupted {
        /// The 1-based wave that was running.
        wave: usize,
        /// What the wave was waiting for, still there when it was interrupted (as last seen;
        /// none when it was interrupted before its deletes were all answered).
        blockers: Vec<Blocker>,
    },
}

impl Outcome {
    /// Interrupted in `wave` before it waited for anything.
    fn interrupted(wave: usize) -> Self {
        Self::Interrupted {
            wave,
            blockers: Vec::new(),
        }
    }
}

/// Receives events and progress as they happen.
pub trait Observer {
    /// One object's change.
    fn event(&mut self, event: &Event);
    /// A wave starts.
    fn wave_started(&mut self, wave: usize, waves: usize, objects: usize);
    /// Periodic progress while waiting: what is left of the wave.
    fn waiting(&mut self, wave: usize, left: &[Blocker]);
    /// The wave is gone.
    fn wave_done(&mut self, wave: usize, elapsed: Duration);
}

/// Deletes the waves in order; `guard` re-checks each wave just before its deletes.
pub async fn execute(
    client: &Client,
    waves: &[Vec<Target>],
    options: &ExecOptions,
    cancel: watch::Receiver<bool>,
    observer: &mut dyn Observer,
    guard: &mut dyn WaveGuard,
) -> Outcome {
    for (index, planned) in waves.iter().enumerate() {
        let number = index + 1;
        if *cancel.borrow() {
            return Outcome::interrupted(number);
        }
        let checked = guard.before_wave(number, planned.clone()).await;
        for (target, reason) in &checked.dropped {
            observer.event(&Event::dropped(number, target, reason));
        }
        let wave = &checked.targets;
        if *cancel.borrow() {
            return Outcome::interrupted(number);
        }
        observer.wave_started(number, waves.len(), wave.len());
        let started = Instant::now();
        let watch = watch_before_deletes(client, wave, options).await;
        let results = delete_wave(client, wave, options, cancel.clone()).await;
        let Tally {
            pending,
            deleted,
            failed,
        } = tally(number, results, observer);
        if *cancel.borrow() {
            return Outcome::interrupted(number);
        }
        let Some(watch) = watch else {
            // A server dry run: a real run would stop here: the dry run must not show what comes after.
            if failed {
                return Outcome::DeleteFailed { wave: number };
            }
            continue;
        };
        let waited = wait_gone(
            client,
            number,
            watch,
            pending,
            options.wave_timeout,
            cancel.clone(),
            observer,
        )
        .await;
        let waited = match waited {
            WaitResult::Gone if options.cascade != Cascade::Orphan && number < waves.len() => {
                // What the wave's controllers made goes with them: the next wave waits for it
                // (after the last wave nothing is left to go first, as with `kubectl delete`).
                let children = guard.children(number, &deleted).await;
                let left = options.wave_timeout.saturating_sub(started.elapsed());
                wait_children(client, number, children, left, cancel.clone(), observer).await
            }
            other => other,
        };
        match waited {
            WaitResult::Gone => {}
            WaitResult::TimedOut(blockers) => return Outcome::TimedOut { wave: number, blockers },
            WaitResult::Interrupted(blockers) => return Outcome::Interrupted { wave: number, blockers },
        }
        if failed {
            return Outcome::DeleteFailed { wave: number };
        }
        observer.wave_done(number, started.elapsed());
    }
    Outcome::Completed
}

/// The wave's watch, started before its deletes so that every deletion they cause is one of
/// its events; none for a server dry run, which waits for nothing.
async fn watch_before_deletes(client: &Client, wave: &[Target], options: &ExecOptions) -> Option<WaveWatch> {
    if options.server_dry_run {
        return None;
    }
    let watch = WaveWatch::start(client, wave, false).await;
    watch.deletes_start();
    Some(watch)
}

/// What a wave's deletes did.
struct Tally {
    /// Deleted or being deleted: the wave waits for them.
    pending: Vec<Target>,
    /// Deleted, being deleted, gone or replaced: their controllers' children go with them.
    deleted: Vec<Target>,
    /// Some delete failed.
    failed: bool,
}

/// Reports each delete's result and sorts the targets by it.
fn tally(wave: usize, results: Vec<(Target, Result<Change, DeleteError>)>, observer: &mut dyn Observer) -> Tally {
    let mut tally = Tally {
        pending: Vec::new(),
        deleted: Vec::new(),
        failed: false,
    };
    for (target, result) in results {
        let change = match &result {
            Ok(change) => *change,
            Err(_) => Change::Failed,
        };
        tally.failed |= change == Change::Failed;
        if matches!(change, Change::Deleted | Change::AlreadyTerminating) {
            tally.pending.push(target.clone());
        }
        if matches!(
            change,
            Change::Deleted | Change::AlreadyTerminating | Change::AlreadyGone | Change::Replaced
        ) {
            tally.deleted.push(target.clone());
        }
        observer.event(&Event::new(wave, change, &target, result.err().map(|e| e.to_string())));
    }
    tally
}

async fn delete_wave(
    client: &Client,
    wave: &[Target],
    options: &ExecOptions,
    cancel: watch::Receiver<bool>,
) -> Vec<(Target, Result<Change, DeleteError>)> {
    stream::iter(wave.iter().cloned())
        .map(|target| {
            let cancel = cancel.clone();
            async move {
                if target.terminating {
                    return (target, Ok(Change::AlreadyTerminating));
                }
                if *cancel.borrow() || crate::cluster::retry::cancelled() {
                    return (target, Ok(Change::NotSent));
                }
                let result = delete_one(client, &target, options).await;
                (target, result)
            }
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await
}

/// Why one DELETE failed; its text is what the report shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeleteError {
    /// The request failed for good: its root cause.
    #[error("{0}")]
    Failed(String),
    /// It failed, and a try that got no answer may still land.
    #[error("{0} (a try got no answer: the server may still delete it)")]
    MayStillLand(String),
    /// It failed, and the run was interrupted before it was retried.
    #[error("{0} (not retried: interrupted)")]
    Interrupted(String),
    /// Answered NotFound or Conflict, and the name could not be read again to tell why.
    #[error("the DELETE was answered {status} ({answer}) and the object could not be read again ({read})")]
    Unverified {
        /// The HTTP status (404 or 409).
        status: u16,
        /// What the server said.
        answer: String,
        /// Why the name could not be read.
        read: LookupError,
    },
    /// Answered NotFound or Conflict, but the planned object is still there (a webhook refused it).
    #[error("the DELETE was answered {status} ({answer}), but the planned object is still there with its UID")]
    Refused {
        /// The HTTP status (404 or 409).
        status: u16,
        /// What the server said.
        answer: String,
    },
}

/// Sends one DELETE with a UID precondition. NotFound means our object is gone (also when an
/// earlier attempt's answer was lost); a precondition conflict means the name has another UID.
/// A DELETE of which a try got no answer may still land: interrupted, it is reported so.
pub async fn delete_one(client: &Client, target: &Target, options: &ExecOptions) -> Result<Change, DeleteError> {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let api = api_for(client, &target.kind, target.id.namespace.as_deref());
    let params = delete_params(target, options);
    let attempts = AtomicUsize::new(0);
    // Tries that got an answer (or never reached the server); the others may still land.
    let settled = AtomicUsize::new(0);
    let sent = || {
        attempts.fetch_add(1, Relaxed);
        let request = api.delete(&target.id.name, &params);
        let settled = &settled;
        async move {
            let result = request.await;
            if !matches!(&result, Err(err) if crate::cluster::retry::got_no_answer(err)) {
                settled.fetch_add(1, Relaxed);
            }
            result
        }
    };
    let result = with_retries("delete", sent).await;
    let lost = attempts.load(Relaxed) > settled.load(Relaxed);
    match result {
        Ok(_) if options.server_dry_run => Ok(Change::WouldDelete),
        Ok(_) => Ok(Change::Deleted),
        Err(err) => match api_status(&err) {
            Some(status @ (404 | 409)) => {
                let retried = attempts.load(Relaxed) > 1;
                let found = with_retries("get", || api.get_metadata_opt(&target.id.name)).await;
                let found = found
                    .map(|meta| meta.map(|m| m.metadata))
                    .map_err(|e| LookupError::Failed(root_cause(&e)));
                judge_refusal(status, retried, &target.uid, found, &root_cause(&err))
            }
            _ if lost && crate::cluster::retry::cancelled() => Ok(Change::MayStillLand),
            _ if lost => Err(DeleteError::MayStillLand(root_cause(&err))),
            _ if crate::cluster::retry::cancelled() => Err(DeleteError::Interrupted(root_cause(&err))),
            _ => Err(DeleteError::Failed(root_cause(&err))),
        },
    }
}

/// The DELETE's options: dry run, propagation, and the planned UID as a precondition.
fn delete_params(target: &Target, options: &ExecOptions) -> DeleteParams {
    DeleteParams {
        dry_run: options.server_dry_run,
        propagation_policy: Some(match options.cascade {
            Cascade::Background => PropagationPolicy::Background,
            Cascade::Foreground => PropagationPolicy::Foreground,
            Cascade::Orphan => PropagationPolicy::Orphan,
        }),
        preconditions: Some(Preconditions {
            uid: Some(target.uid.clone()),
            resource_version: None,
        }),
        grace_period_seconds: None,
    }
}

/// What a DELETE answered with NotFound or Conflict did, judged by what the name holds now: an
/// admission webhook may refuse a DELETE with either code, so neither alone proves the planned
/// object is gone or replaced.
fn judge_refusal(
    status: u16,
    retried: bool,
    planned_uid: &str,
    found: Result<Option<ObjectMeta>, LookupError>,
    answer: &str,
) -> Result<Change, DeleteError> {
    match found {
        Err(read) => Err(DeleteError::Unverified {
            status,
            answer: answer.to_string(),
            read,
        }),
        // NotFound after an earlier attempt whose answer was lost: that attempt deleted it.
        Ok(None) if retried => Ok(Change::Deleted),
        Ok(None) => Ok(Change::AlreadyGone),
        Ok(Some(meta)) if meta.uid.as_deref() != Some(planned_uid) => Ok(Change::Replaced),
        Ok(Some(meta)) if meta.deletion_timestamp.is_some() => Ok(Change::AlreadyTerminating),
        Ok(Some(_)) => Err(DeleteError::Refused {
            status,
            answer: answer.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(uid: &str, terminating: bool) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.to_string()),
            deletion_timestamp: terminating.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_refused_delete_of_the_planned_object_is_a_failure() {
        for status in [404, 409] {
            let judged = judge_refusal(status, false, "u1", Ok(Some(meta("u1", false))), "denied");
            assert_eq!(
                judged.unwrap_err().to_string(),
                format!(
                    "the DELETE was answered {status} (denied), but the planned object is still there with its UID"
                )
            );
        }
    }

    #[test]
    fn a_conflict_over_another_uid_is_a_replacement() {
        let judged = judge_refusal(409, false, "u1", Ok(Some(meta("u2", false))), "precondition");
        assert_eq!(judged, Ok(Change::Replaced));
    }

    #[test]
    fn not_found_is_gone_and_deleted_when_an_earlier_answer_was_lost() {
        assert_eq!(judge_refusal(404, false, "u1", Ok(None), "nf"), Ok(Change::AlreadyGone));
        assert_eq!(judge_refusal(404, true, "u1", Ok(None), "nf"), Ok(Change::Deleted));
    }

    #[test]
    fn the_planned_object_terminating_is_waited_for() {
        let judged = judge_refusal(409, false, "u1", Ok(Some(meta("u1", true))), "c");
        assert_eq!(judged, Ok(Change::AlreadyTerminating));
    }

    #[test]
    fn an_unreadable_name_is_a_failure() {
        let judged = judge_refusal(404, false, "u1", Err(LookupError::Failed("timeout".into())), "nf");
        assert_eq!(
            judged.unwrap_err().to_string(),
            "the DELETE was answered 404 (nf) and the object could not be read again (timeout)"
        );
        assert_eq!(
            DeleteError::MayStillLand("reset".into()).to_string(),
            "reset (a try got no answer: the server may still delete it)"
        );
        assert_eq!(
            DeleteError::Interrupted("reset".into()).to_string(),
            "reset (not retried: interrupted)"
        );
    }
}
