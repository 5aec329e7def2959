//! Waiting for a wave to be gone: one metadata watch per (kind, namespace), started before the
//! wave's deletes from a resourceVersion read before them, so that every deletion they cause is an
//! event of the watch: the wave is gone when the watch has seen each planned UID deleted, with no
//! read of each object and no polling interval in the critical path. Progress is reported until
//! every planned UID is gone, the wave times out or the run is interrupted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kube::Client;
use tokio::sync::{mpsc, watch};

use super::{Blocker, Change, Event, Observer, Target};
use crate::cluster::collect::api_for;
use crate::cluster::retry::with_retries;

/// How waiting for a wave ended.
pub(super) enum WaitResult {
    /// Every object is gone.
    Gone,
    /// The timeout passed; these were still there.
    TimedOut(Vec<Blocker>),
    /// Ctrl-C; these were still there (as last seen).
    Interrupted(Vec<Blocker>),
}

/// What a watcher reports about one planned UID.
enum Sighting {
    Gone(String),
    Present(String, Box<ObjectMeta>),
}

const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Waits for the controller children of a wave's objects, as for the wave itself, without
/// reporting them as the plan's objects.
pub(super) async fn wait_children(
    client: &Client,
    wave: usize,
    children: Vec<Target>,
    timeout: Duration,
    cancel: watch::Receiver<bool>,
    observer: &mut dyn Observer,
) -> WaitResult {
    if children.is_empty() {
        return WaitResult::Gone;
    }
    tracing::info!(
        "wave {wave}: waiting for {} object(s) their controllers made",
        children.len()
    );
    // Their controllers' garbage collector deletes them at any time: each is read once.
    let watch = WaveWatch::start(client, &children, true).await;
    let mut quiet = Unreported(observer);
    wait_gone(client, wave, watch, children, timeout, cancel, &mut quiet).await
}

/// An observer that passes on progress but not the children's own events (they are not in the
/// plan, and not counted in its summary).
struct Unreported<'a>(&'a mut dyn Observer);

impl Observer for Unreported<'_> {
    fn event(&mut self, _event: &Event) {}
    fn wave_started(&mut self, wave: usize, waves: usize, objects: usize) {
        self.0.wave_started(wave, waves, objects);
    }
    fn waiting(&mut self, wave: usize, left: &[Blocker]) {
        self.0.waiting(wave, left);
    }
    fn wave_done(&mut self, wave: usize, elapsed: Duration) {
        self.0.wave_done(wave, elapsed);
    }
}

/// The watches of one wave, started before its deletes.
pub(super) struct WaveWatch {
    sightings: mpsc::Receiver<Sighting>,
    watchers: Vec<tokio::task::JoinHandle<()>>,
    /// Set when the deletes may have started: a watch (re)started after that reads each object
    /// once, as it cannot know from its resourceVersion alone what went before.
    deletes_started: Arc<AtomicBool>,
}

impl WaveWatch {
    /// Starts one watch per (kind, namespace) of `targets`. Each reads its resourceVersion before
    /// this returns, so a deletion that a later DELETE causes is an event of the watch; only the
    /// objects already terminating (no DELETE is sent for them) are read once.
    pub(super) async fn start(client: &Client, targets: &[Target], deletes_started: bool) -> Self {
        let (sender, sightings) = mpsc::channel(1024);
        let mut groups: HashMap<(&str, &str, Option<&str>), Vec<Target>> = HashMap::new();
        for t in targets {
            groups
                .entry((&t.kind.group, &t.kind.kind, t.id.namespace.as_deref()))
                .or_default()
                .push(t.clone());
        }
        let started = deletes_started;
        let deletes_started = Arc::new(AtomicBool::new(started));
        let versions = futures::stream::iter(groups.into_values())
            .map(|targets| async move {
                // After the deletes, a version alone would not show what went before it.
                let version = if started {
                    None
                } else {
                    first_version(client, &targets).await
                };
                (targets, version)
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
        let watchers = versions
            .into_iter()
            .map(|(targets, version)| {
                let group = Group {
                    client: client.clone(),
                    targets,
                    sightings: sender.clone(),
                    deletes_started: deletes_started.clone(),
                };
                tokio::spawn(group.watch(version))
            })
            .collect();
        Self {
            sightings,
            watchers,
            deletes_started,
        }
    }

    /// The deletes start now: a watch that starts again from here reads its objects first.
    pub(super) fn deletes_start(&self) {
        self.deletes_started.store(true, SeqCst);
    }
}

impl Drop for WaveWatch {
    fn drop(&mut self) {
        for watcher in &self.watchers {
            watcher.abort();
        }
    }
}

/// The resourceVersion a group's watch starts from, read once before the deletes (a failure is
/// left to the watch itself, which then reads its objects first).
async fn first_version(client: &Client, targets: &[Target]) -> Option<String> {
    let first = targets.first()?;
    let api = api_for(client, &first.kind, first.id.namespace.as_deref());
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(list) => list.metadata.resource_version,
        Err(err) => {
            tracing::debug!("cannot list {} to watch it: {err}", first.kind.kind_with_group());
            None
        }
    }
}

/// Waits until the watch has seen every `pending` object gone, the timeout passes (a last read
/// of what is left decides the blockers) or the run is interrupted.
pub(super) async fn wait_gone(
    client: &Client,
    wave: usize,
    mut watch: WaveWatch,
    pending: Vec<Target>,
    timeout: Duration,
    mut cancel: watch::Receiver<bool>,
    observer: &mut dyn Observer,
) -> WaitResult {
    let mut left: HashMap<String, Blocker> = pending
        .into_iter()
        .map(|t| {
            let blocker = Blocker {
                finalizers: t.finalizers.clone(),
                deletion_timestamp: None,
                target: t,
            };
            (blocker.target.uid.clone(), blocker)
        })
        .collect();
    if left.is_empty() {
        return WaitResult::Gone;
    }
    let sightings = &mut watch.sightings;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    ticker.tick().await;
    let result = loop {
        tokio::select! {
            sighting = sightings.recv() => match sighting {
                Some(Sighting::Gone(uid)) => {
                    if let Some(blocker) = left.remove(&uid) {
                        observer.event(&Event::new(wave, Change::Gone, &blocker.target, None));
                    }
                    if left.is_empty() {
                        break WaitResult::Gone;
                    }
                }
                Some(Sighting::Present(uid, meta)) => {
                    if let Some(blocker) = left.get_mut(&uid) {
                        blocker.finalizers = meta.finalizers.clone().unwrap_or_default();
                        blocker.deletion_timestamp = meta.deletion_timestamp.clone();
                    }
                }
                None => {
                    // Every watcher ended (they only end on errors they cannot recover from).
                    tokio::time::sleep_until(deadline).await;
                    break time_up(client, wave, left, observer).await;
                }
            },
            _ = ticker.tick() => observer.waiting(wave, &sorted(left.clone())),
            // What the watchers did not report yet is read once more: an object gone is never
            // called a blocker (with `--timeout 0` no watcher reported anything).
            _ = tokio::time::sleep_until(deadline) => break time_up(client, wave, left, observer).await,
            changed = cancel.changed() => if changed.is_err() || *cancel.borrow() {
                break WaitResult::Interrupted(sorted(std::mem::take(&mut left)));
            },
        }
    };
    drop(watch);
    result
}

/// The wave's time is up: what is still there after a last look.
async fn time_up(
    client: &Client,
    wave: usize,
    mut left: HashMap<String, Blocker>,
    observer: &mut dyn Observer,
) -> WaitResult {
    confirm_left(client, wave, &mut left, observer).await;
    if left.is_empty() {
        WaitResult::Gone
    } else {
        WaitResult::TimedOut(sorted(left))
    }
}

/// How long the last look at a wave's remaining objects may retry a read.
const CONFIRM_BUDGET: Duration = Duration::from_secs(10);

/// Reads each object still `left` once more when the wave's time is up: the gone ones leave
/// (reported gone), the others get their finalizers and deletion time as they are now. An object
/// that cannot be read stays a blocker.
async fn confirm_left(client: &Client, wave: usize, left: &mut HashMap<String, Blocker>, observer: &mut dyn Observer) {
    let reads = futures::stream::iter(left.values().map(|b| b.target.clone()))
        .map(|target| async move {
            let api = api_for(client, &target.kind, target.id.namespace.as_deref());
            let read =
                crate::cluster::retry::with_budget("get", CONFIRM_BUDGET, || api.get_metadata_opt(&target.id.name))
                    .await;
            (target, read)
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    for (target, read) in reads {
        match read {
            Ok(Some(object)) if object.metadata.uid.as_deref() == Some(target.uid.as_str()) => {
                if let Some(blocker) = left.get_mut(&target.uid) {
                    blocker.finalizers = object.metadata.finalizers.clone().unwrap_or_default();
                    blocker.deletion_timestamp = object.metadata.deletion_timestamp.clone();
                }
            }
            Ok(_) => {
                if let Some(blocker) = left.remove(&target.uid) {
                    observer.event(&Event::new(wave, Change::Gone, &blocker.target, None));
                }
            }
            Err(err) => tracing::debug!("cannot read {} again: {err}", target.id),
        }
    }
}

fn sorted(left: HashMap<String, Blocker>) -> Vec<Blocker> {
    let mut blockers: Vec<Blocker> = left.into_values().collect();
    blockers.sort_by(|a, b| a.target.id.cmp(&b.target.id));
    blockers
}

const WATCH_SECONDS: u32 = 290;

/// One (kind, namespace) of a wave and where its watch reports.
struct Group {
    client: Client,
    targets: Vec<Target>,
    sightings: mpsc::Sender<Sighting>,
    deletes_started: Arc<AtomicBool>,
}

impl Group {
    /// Watches until the task is aborted: from `version` when it was read before the deletes
    /// (reading only the objects already terminating), else from a fresh list's version after a
    /// read of every target (so nothing deleted before the watch started is missed). Starts again
    /// on expiry (410) and when the server ends the watch.
    async fn watch(self, mut version: Option<String>) {
        let Some(first) = self.targets.first() else { return };
        let kind = first.kind.clone();
        let api = api_for(&self.client, &kind, first.id.namespace.as_deref());
        let wanted: HashSet<String> = self.targets.iter().map(|t| t.uid.clone()).collect();
        let first_page = ListParams::default().limit(1);
        loop {
            let (from, all) = match version.take() {
                Some(before_deletes) => (before_deletes, false),
                None => {
                    match with_retries("list for watch", || api.list_metadata(&first_page)).await {
                        // Read after the deletes started: whatever went before it is read below.
                        Ok(list) => (
                            list.metadata.resource_version.unwrap_or_default(),
                            self.deletes_started.load(SeqCst),
                        ),
                        Err(err) => {
                            tracing::debug!("cannot list {} to watch it: {err}", kind.kind_with_group());
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                    }
                }
            };
            let to_read: Vec<Target> = self.targets.iter().filter(|t| all || t.terminating).cloned().collect();
            if !self.read(&api, to_read).await {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            let params = WatchParams::default().timeout(WATCH_SECONDS);
            let events = match api.watch_metadata(&params, &from).await {
                Ok(events) => events,
                Err(err) => {
                    // Watch refused (e.g. no watch permission): fall back to listing and reading
                    // again each second, which the top of this loop does.
                    tracing::debug!("cannot watch {}: {err}; polling instead", kind.kind_with_group());
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut events = std::pin::pin!(events.into_stream());
            while let Ok(Some(event)) = events.try_next().await {
                if let WatchEvent::Error(_) = event {
                    break; // 410 Gone and the like: list again
                }
                let Some(sighting) = sighting(event, &wanted) else {
                    continue;
                };
                if self.sightings.send(sighting).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Reads each of `targets` (16 at once) and reports what it found; false when one could not
    /// be read (a watch from here could miss that it went before).
    async fn read(&self, api: &kube::Api<kube::api::DynamicObject>, targets: Vec<Target>) -> bool {
        let reads: Vec<(Target, kube::Result<_>)> = futures::stream::iter(targets)
            .map(|t| async move {
                let read = with_retries("get", || api.get_metadata_opt(&t.id.name)).await;
                (t, read)
            })
            .buffer_unordered(16)
            .collect()
            .await;
        for (target, read) in reads {
            let uid = target.uid.clone();
            let sighting = match read {
                Ok(Some(object)) if object.metadata.uid.as_deref() == Some(uid.as_str()) => {
                    Sighting::Present(uid, Box::new(object.metadata))
                }
                Ok(_) => Sighting::Gone(uid),
                Err(err) => {
                    tracing::debug!("cannot read {} to watch it: {err}", target.id);
                    return false;
                }
            };
            if self.sightings.send(sighting).await.is_err() {
                return true;
            }
        }
        true
    }
}

/// What a watch event says about a wanted UID.
fn sighting(
    event: WatchEvent<kube::core::PartialObjectMeta<kube::api::DynamicObject>>,
    wanted: &HashSet<String>,
) -> Option<Sighting> {
    match event {
        WatchEvent::Deleted(object) => object.metadata.uid.filter(|u| wanted.contains(u)).map(Sighting::Gone),
        WatchEvent::Added(object) | WatchEvent::Modified(object) => {
            let uid = object.metadata.uid.clone().filter(|u| wanted.contains(u))?;
            Some(Sighting::Present(uid, Box::new(object.metadata)))
        }
        WatchEvent::Bookmark(_) | WatchEvent::Error(_) => None,
    }
}
