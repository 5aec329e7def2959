//! Waiting for a wave to be gone: one metadata watch per (kind, namespace), reporting progress
//! until every planned UID is gone, the wave times out or the run is interrupted.

use std::collections::HashMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kube::Client;
use tokio::sync::{mpsc, watch};

use super::{Blocker, Change, Event, Observer, Target};
use crate::collect::api_for;
use crate::retry::with_retries;

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
    let mut quiet = Unreported(observer);
    wait_gone(client, wave, children, timeout, cancel, &mut quiet).await
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

pub(super) async fn wait_gone(
    client: &Client,
    wave: usize,
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
    let (sender, mut sightings) = mpsc::channel(1024);
    let mut groups: HashMap<(String, String, Option<String>), Vec<Target>> = HashMap::new();
    for blocker in left.values() {
        let t = &blocker.target;
        groups
            .entry((t.kind.group.clone(), t.kind.kind.clone(), t.id.namespace.clone()))
            .or_default()
            .push(t.clone());
    }
    let watchers: Vec<_> = groups
        .into_values()
        .map(|targets| tokio::spawn(watch_group(client.clone(), targets, sender.clone())))
        .collect();
    drop(sender);
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
    for watcher in watchers {
        watcher.abort();
    }
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
            let read = crate::retry::with_budget("get", CONFIRM_BUDGET, || api.get_metadata_opt(&target.id.name)).await;
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

/// Watches one (kind, namespace) until the task is aborted: a list for a resourceVersion, a GET
/// of every target (so nothing deleted before the watch started is missed), then a metadata
/// watch from that version. Restarts on expiry (410) and on the server ending the watch.
async fn watch_group(client: Client, targets: Vec<Target>, sightings: mpsc::Sender<Sighting>) {
    let Some(first) = targets.first() else { return };
    let kind = first.kind.clone();
    let api = api_for(&client, &kind, first.id.namespace.as_deref());
    let wanted: HashMap<String, String> = targets.iter().map(|t| (t.uid.clone(), t.id.name.clone())).collect();
    let first_page = ListParams::default().limit(1);
    'watching: loop {
        let version = match with_retries("list for watch", || api.list_metadata(&first_page)).await {
            Ok(list) => list.metadata.resource_version.unwrap_or_default(),
            Err(err) => {
                tracing::debug!("cannot list {} to watch it: {err}", kind.kind_with_group());
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for (uid, name) in &wanted {
            let sighting = match with_retries("get", || api.get_metadata_opt(name)).await {
                Ok(None) => Sighting::Gone(uid.clone()),
                Ok(Some(object)) if object.metadata.uid.as_deref() != Some(uid.as_str()) => Sighting::Gone(uid.clone()),
                Ok(Some(object)) => Sighting::Present(uid.clone(), Box::new(object.metadata)),
                // Unknown: a watch from here could miss that it went before; start over.
                Err(err) => {
                    tracing::debug!("cannot read {name} to watch it: {err}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue 'watching;
                }
            };
            if sightings.send(sighting).await.is_err() {
                return;
            }
        }
        let params = WatchParams::default().timeout(WATCH_SECONDS);
        let events = match api.watch_metadata(&params, &version).await {
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
            let sighting = match event {
                WatchEvent::Deleted(object) => object
                    .metadata
                    .uid
                    .filter(|u| wanted.contains_key(u))
                    .map(Sighting::Gone),
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    let uid = object.metadata.uid.clone().filter(|u| wanted.contains_key(u));
                    uid.map(|u| Sighting::Present(u, Box::new(object.metadata)))
                }
                WatchEvent::Bookmark(_) => None,
                WatchEvent::Error(_) => break, // 410 Gone and the like: list again
            };
            if let Some(sighting) = sighting {
                if sightings.send(sighting).await.is_err() {
                    return;
                }
            }
        }
    }
}
