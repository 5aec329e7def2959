//! The wave's kinds read from watches instead of listed again before every wave.
//!
//! When the re-check is built, each kind the plan deletes (that the server lets us watch) is
//! listed once in the re-check's scope, metadata only, and watched from that list's
//! resourceVersion; the store holds the same [`Listed`] a listing gives. Before a wave, the
//! re-check takes a fresh resourceVersion from the server (one quorum read: a list with `limit=1`)
//! and reads a kind from its store only once the watch has delivered an event or bookmark at that
//! resourceVersion or later — the store is then at least what a list made now would have seen.
//! The kind is listed meanwhile, as before, and the first of the two to answer is taken: a watch
//! that has not caught up when the list answers (or within [`CATCH_UP`]), one that broke (410
//! Gone, an error) or is listing again, a kind served at another version than the one watched,
//! or a resourceVersion that is not a number: the list's answer is used. Nothing is ever judged
//! from a stale store.
//!
//! Assumption (documented, as the API server's own watch cache relies on it): etcd's
//! resourceVersions are one revision counter shared by every kind, and compare numerically; a
//! watch delivers a kind's events in resourceVersion order. A server whose resourceVersions are
//! not numbers is never read from a watch.
//!
//! A watch proves itself fresh only by an event or bookmark: a kind nobody changes since its last
//! event (an idle kind while others change) cannot show it has caught up, and is listed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kube::Client;

use crate::cluster::collect::{api_for, sort_objects, Collection, ListScope, Listed, Trim};
use crate::cluster::discovery::KindInfo;
use crate::model::identity::ObjectId;

/// How long one watch request lasts before it is resumed from the last resourceVersion seen.
const WATCH_SECONDS: u32 = 290;

/// How long a re-check waits at most for a watch to deliver the events up to the fresh
/// resourceVersion (the kind is listed meanwhile: the first answer is taken).
pub const CATCH_UP: Duration = Duration::from_secs(2);

/// One kind's objects as its watch knows them.
#[derive(Default)]
struct Store {
    /// By UID.
    objects: HashMap<String, Listed>,
    /// The UIDs of the objects whose annotations [`Listed::new`] changed otherwise than by
    /// dropping a known content annotation (see [`held`]): a list filters on the metadata as the
    /// server gave it, the store holds it processed, so while it holds one, the kind is listed.
    inexact: HashSet<String>,
    /// The resourceVersion up to which every event was applied; `None` before the first list and
    /// from the moment the watch fails until it has listed again.
    version: Option<u64>,
}

/// A watched kind's objects by (namespace, name), each with its owner references.
type Names = HashMap<(Option<String>, String), Option<Vec<OwnerReference>>>;

/// What a store can give for a fresh resourceVersion.
#[derive(Debug)]
enum Snapshot {
    /// Its watch has not delivered everything up to that resourceVersion (or is broken).
    Behind,
    /// Up to date, but holding an object a filter could read otherwise than a list (see [`held`]).
    Inexact,
    /// Up to date: the objects `keep` accepts.
    Ready(Vec<Listed>),
}

impl Store {
    /// The rule of the module: the objects `keep` accepts only once every event up to `fresh`
    /// was applied.
    fn snapshot(&self, fresh: u64, keep: &(dyn Fn(&ObjectMeta) -> bool + Sync)) -> Snapshot {
        match self.version {
            Some(version) if version >= fresh => {}
            _ => return Snapshot::Behind,
        }
        if !self.inexact.is_empty() {
            return Snapshot::Inexact;
        }
        Snapshot::Ready(self.objects.values().filter(|o| keep(&o.meta)).cloned().collect())
    }
}

/// One watched kind.
struct Watch {
    kind: Arc<KindInfo>,
    store: Arc<Mutex<Store>>,
    moved: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// The watches of the wave's kinds for one run (see the module documentation). Their tasks end
/// when it is dropped.
pub struct Watches {
    client: Client,
    scope: ListScope,
    watches: HashMap<(String, String), Watch>,
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches")
            .field("scope", &self.scope)
            .field("kinds", &self.watches.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for watch in self.watches.values() {
            watch.task.abort();
        }
    }
}

fn lock(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A resourceVersion as a number (see the module documentation), if it is one.
fn number(version: Option<&str>) -> Option<u64> {
    version?.parse().ok()
}

impl Watches {
    /// Starts one list+watch in `scope` of each of `kinds` that can be watched (one per kind).
    /// Must run inside the Tokio runtime.
    pub fn start(
        client: &Client,
        scope: &ListScope,
        page_size: u32,
        kinds: impl IntoIterator<Item = Arc<KindInfo>>,
    ) -> Self {
        let mut watches = HashMap::new();
        for kind in kinds {
            let key = (kind.group.clone(), kind.kind.clone());
            if watches.contains_key(&key) || !kind.can("list") || !kind.can("watch") {
                continue;
            }
            let store = Arc::new(Mutex::new(Store::default()));
            let moved = Arc::new(tokio::sync::Notify::new());
            let api = api_for(client, &kind, scope.namespace());
            let task = tokio::spawn(run(api, kind.clone(), store.clone(), moved.clone(), page_size));
            watches.insert(
                key,
                Watch {
                    kind,
                    store,
                    moved,
                    task,
                },
            );
        }
        Self {
            client: client.clone(),
            scope: scope.clone(),
            watches,
        }
    }

    /// For each watched kind, a resourceVersion at least as recent as any write of that kind the
    /// server had acknowledged when it was asked: one quorum read of that kind itself (a list of
    /// one object). Each watch is compared with its own kind's read only: a kind an aggregated
    /// API server serves from its own storage counts its resourceVersions apart (membership
    /// review 10). A kind whose read fails is absent (listed); `None` when none could be read.
    pub async fn fresh_versions(&self) -> Option<Fresh> {
        let reads = self.watches.iter().map(|(key, watch)| async move {
            let api = api_for(&self.client, &watch.kind, self.scope.namespace());
            match api.list_metadata(&ListParams::default().limit(1)).await {
                Ok(list) => number(list.metadata.resource_version.as_deref()).map(|version| (key.clone(), version)),
                Err(err) => {
                    tracing::debug!(
                        "re-check: no fresh resourceVersion of {} ({err}): listed",
                        watch.kind.kind_with_group()
                    );
                    None
                }
            }
        });
        let found: HashMap<(String, String), u64> =
            futures::future::join_all(reads).await.into_iter().flatten().collect();
        (!found.is_empty()).then(|| Fresh(Arc::new(found)))
    }

    /// Whether each of `ids` exists now, with its owner references, for those a fresh watch can
    /// tell (as a GET made now would: its kind watched at the version `catalog` serves, in a scope
    /// that holds it, and the watch delivered everything up to a resourceVersion read now);
    /// the others are left out (read by the caller).
    pub async fn lookup(
        &self,
        ids: &[ObjectId],
        catalog: &crate::cluster::discovery::Catalog,
    ) -> HashMap<ObjectId, Option<Vec<OwnerReference>>> {
        let mut found = HashMap::new();
        let watched = |id: &ObjectId| {
            let watch = self.watches.get(&(id.group.clone(), id.kind.clone()))?;
            let served = catalog.get(&id.group, &id.kind)?;
            let covered = match (&self.scope, &id.namespace) {
                (ListScope::AllNamespaces, _) => true,
                (ListScope::Namespace(scope), Some(namespace)) => scope == namespace,
                (ListScope::Namespace(_), None) => !watch.kind.namespaced,
            };
            (**served == *watch.kind && covered && id.namespace.is_some() == watch.kind.namespaced).then_some(watch)
        };
        if !ids.iter().any(|id| watched(id).is_some()) {
            return found;
        }
        let Some(fresh) = self.fresh_versions().await else {
            return found;
        };
        let mut by_name: HashMap<(String, String), Names> = HashMap::new();
        for id in ids {
            let Some(watch) = watched(id) else { continue };
            let key = (id.group.clone(), id.kind.clone());
            if !by_name.contains_key(&key) {
                let Some(fresh) = fresh.of(&key) else { continue };
                let store = lock(&watch.store);
                if store.version.is_none_or(|v| v < fresh) {
                    continue;
                }
                let names = store
                    .objects
                    .values()
                    .map(|o| {
                        let name = (o.meta.namespace.clone(), o.name().to_string());
                        (name, Some(o.meta.owner_references.clone().unwrap_or_default()))
                    })
                    .collect();
                by_name.insert(key.clone(), names);
            }
            let Some(names) = by_name.get(&key) else { continue };
            let owners = names.get(&(id.namespace.clone(), id.name.clone())).cloned().flatten();
            found.insert(id.clone(), owners);
        }
        tracing::debug!(
            "re-check: {} referenced object(s) looked up in the watches",
            found.len()
        );
        found
    }

    /// What a list of `kind` in the watches' scope made now would keep with `keep`, from its
    /// watch: once that watch delivered everything up to `fresh` (within [`CATCH_UP`]), and only
    /// for the very kind watched (same version) in `scope`, with nothing trimmed. `None`: list it.
    pub async fn read(
        &self,
        kind: &Arc<KindInfo>,
        scope: &ListScope,
        fresh: &Fresh,
        trim: Trim,
        keep: &(dyn Fn(&ObjectMeta) -> bool + Sync),
    ) -> Option<Collection> {
        let key = (kind.group.clone(), kind.kind.clone());
        let watch = self.watches.get(&key)?;
        let fresh = fresh.of(&key)?;
        if *watch.kind != **kind || *scope != self.scope || trim != Trim::Keep {
            return None;
        }
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            // Made before the store is looked at: a wake-up in between is not missed.
            let moved = watch.moved.notified();
            match lock(&watch.store).snapshot(fresh, keep) {
                Snapshot::Behind => {}
                Snapshot::Inexact => {
                    tracing::debug!(
                        "re-check: {} holds objects a filter could read otherwise than listed: listed",
                        kind.kind_with_group()
                    );
                    return None;
                }
                Snapshot::Ready(mut objects) => {
                    sort_objects(&mut objects);
                    tracing::debug!(
                        "re-check: {} read from its watch ({} kept)",
                        kind.kind_with_group(),
                        objects.len()
                    );
                    return Some(Collection {
                        objects,
                        listed_kinds: 1,
                        ..Collection::default()
                    });
                }
            }
            if tokio::time::timeout_at(deadline, moved).await.is_err() {
                tracing::debug!(
                    "re-check: the watch of {} has not shown resourceVersion {fresh}: listed",
                    kind.kind_with_group()
                );
                return None;
            }
        }
    }
}

/// The fresh resourceVersion of each watched kind, from that kind's own quorum read
/// ([`Watches::fresh_versions`]).
#[derive(Debug, Clone)]
pub struct Fresh(Arc<HashMap<(String, String), u64>>);

impl Fresh {
    /// The fresh resourceVersion of a kind, when its read succeeded.
    fn of(&self, key: &(String, String)) -> Option<u64> {
        self.0.get(key).copied()
    }
}

/// Lists then watches one kind until aborted; lists again whenever the watch fails.
async fn run(
    api: Api<DynamicObject>,
    kind: Arc<KindInfo>,
    store: Arc<Mutex<Store>>,
    moved: Arc<tokio::sync::Notify>,
    page_size: u32,
) {
    loop {
        let Some(mut version) = list_into(&api, &kind, &store, page_size).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        moved.notify_waiters();
        loop {
            let params = WatchParams::default().timeout(WATCH_SECONDS);
            let resumed = match api.watch_metadata(&params, &version.to_string()).await {
                Ok(events) => follow(events, &kind, &store, &moved, &mut version).await,
                Err(err) => {
                    tracing::debug!("cannot watch {}: {err}", kind.kind_with_group());
                    // Not allowed to watch: it is listed by every re-check, never read from here.
                    if crate::error::is_forbidden(&err) {
                        lock(&store).version = None;
                        return;
                    }
                    false
                }
            };
            if !resumed {
                break;
            }
        }
        // Nothing is read from it until it has listed again, a moment later (a watch that keeps
        // failing does not make a list after list).
        lock(&store).version = None;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Lists the kind's metadata page by page into `store` (replacing what it held); returns the
/// list's resourceVersion. The list is served from the API server's watch cache
/// (`resourceVersion=0`, as a reflector's first list is): it may be a moment old, which costs
/// nothing here (the store is read only once its watch has reached a fresh resourceVersion), and
/// it is about twice as fast as a list from etcd (52,000 ConfigMaps: 1.9 s against 3.4 s), which
/// is what a re-check waits for when a watch started just before it (issue 30).
async fn list_into(
    api: &Api<DynamicObject>,
    kind: &Arc<KindInfo>,
    store: &Mutex<Store>,
    page_size: u32,
) -> Option<u64> {
    let mut params = ListParams::default().limit(page_size).match_any();
    let mut objects = HashMap::new();
    let mut inexact = HashSet::new();
    let mut version = None;
    loop {
        let page = match api.list_metadata(&params).await {
            Ok(page) => page,
            Err(err) => {
                tracing::debug!("cannot list {} to watch it: {err}", kind.kind_with_group());
                return None;
            }
        };
        // The first page's resourceVersion is the whole list's (one snapshot).
        if version.is_none() {
            version = Some(number(page.metadata.resource_version.as_deref())?);
        }
        for item in page.items {
            let (listed, exact) = held(kind, item.metadata);
            if !exact {
                inexact.insert(listed.uid().to_string());
            }
            objects.insert(listed.uid().to_string(), listed);
        }
        match page.metadata.continue_ {
            // A continued list names no resourceVersion (the server forbids one): the token
            // holds the first page's.
            Some(token) if !token.is_empty() => {
                params = ListParams::default().limit(page_size);
                params.continue_token = Some(token);
            }
            _ => break,
        }
    }
    let mut held = lock(store);
    held.objects = objects;
    held.inexact = inexact;
    held.version = version;
    version
}

/// Follows one watch request into `store`; true when the server ended it cleanly (resume from
/// `version`), false when it failed (list again).
async fn follow(
    events: impl futures::Stream<Item = kube::Result<WatchEvent<kube::core::PartialObjectMeta<DynamicObject>>>>,
    kind: &Arc<KindInfo>,
    store: &Mutex<Store>,
    moved: &tokio::sync::Notify,
    version: &mut u64,
) -> bool {
    let mut events = std::pin::pin!(events);
    loop {
        let event = match events.try_next().await {
            Ok(Some(event)) => event,
            Ok(None) => return true,
            Err(err) => {
                tracing::debug!("the watch of {} failed: {err}", kind.kind_with_group());
                lock(store).version = None;
                return false;
            }
        };
        let (metadata, deleted) = match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => (object.metadata, false),
            WatchEvent::Deleted(object) => (object.metadata, true),
            WatchEvent::Bookmark(bookmark) => {
                let Some(at) = number(Some(&bookmark.metadata.resource_version)) else {
                    lock(store).version = None;
                    return false;
                };
                *version = at;
                lock(store).version = Some(at);
                moved.notify_waiters();
                continue;
            }
            WatchEvent::Error(err) => {
                tracing::debug!("the watch of {} ended: {err:?}", kind.kind_with_group());
                lock(store).version = None;
                return false;
            }
        };
        let Some(at) = number(metadata.resource_version.as_deref()) else {
            lock(store).version = None;
            return false;
        };
        let (listed, exact) = held(kind, metadata);
        let uid = listed.uid().to_string();
        let mut store = lock(store);
        match deleted || exact {
            true => store.inexact.remove(&uid),
            false => store.inexact.insert(uid.clone()),
        };
        match deleted {
            true => store.objects.remove(&uid),
            false => store.objects.insert(uid, listed),
        };
        store.version = Some(at);
        drop(store);
        *version = at;
        moved.notify_waiters();
    }
}

/// Annotations [`Listed::new`] drops that no filter of the re-check reads (the known carriers of
/// an object's applied content): dropping them changes no filter's answer. A copy of
/// `crate::cluster::collect`'s list: a key added there and not here only makes the kind listed.
const CONTENT_KEYS: [&str; 3] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "banzaicloud.com/last-applied",
    "banzaicloud.io/last-applied",
];

/// kapp's annotations that keep the applied content (dropped by [`Listed::new`] too).
const KAPP_ORIGINAL_PREFIX: &str = "kapp.k14s.io/original";

/// The object as the store holds it ([`Listed::new`], as a listing holds it), and whether every
/// filter answers the same on it as on `meta` as the server gave it: its annotations changed only
/// by dropping [`CONTENT_KEYS`] and kapp's originals (a filter reads labels, some annotations,
/// finalizers and owner references; never managed fields).
fn held(kind: &Arc<KindInfo>, meta: ObjectMeta) -> (Listed, bool) {
    let before = meta.annotations.clone().unwrap_or_default();
    let listed = Listed::new(kind.clone(), meta);
    let empty = std::collections::BTreeMap::new();
    let after = listed.meta.annotations.as_ref().unwrap_or(&empty);
    let exact = before.iter().all(|(key, value)| match after.get(key) {
        Some(now) => now == value,
        None => CONTENT_KEYS.contains(&key.as_str()) || key.starts_with(KAPP_ORIGINAL_PREFIX),
    }) && after.len() <= before.len();
    (listed, exact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::kind;

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("cm".into()),
            uid: Some("uid".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_objects_a_filter_reads_the_same_way_are_exact() {
        let config_map = Arc::new(kind("", "ConfigMap", true));
        let applied = meta(&[
            (
                "kubectl.kubernetes.io/last-applied-configuration",
                r#"{"kind":"ConfigMap"}"#,
            ),
            ("config.kubernetes.io/depends-on", "/namespaces/a/ConfigMap/b"),
        ]);
        assert!(held(&config_map, applied).1);
        // An annotation that looks like content is dropped by `Listed::new`: a list's filter saw it.
        let hidden = meta(&[("example.com/rule", r#"{"apiVersion":"v1","kind":"X"}"#)]);
        assert!(!held(&config_map, hidden).1);
        // A tracker's mark or option is kept whatever it looks like (`collect::carries_content`).
        let declared = meta(&[("kapp.k14s.io/change-rule", r#"{"apiVersion":"v1","kind":"X"}"#)]);
        assert!(held(&config_map, declared).1);
        // A Secret's annotations are redacted: not exact.
        let secret = Arc::new(kind("", "Secret", true));
        assert!(!held(&secret, meta(&[("note", "x")])).1);
        assert!(held(&secret, meta(&[])).1);
    }

    #[test]
    fn a_store_answers_only_once_it_has_seen_the_fresh_resource_version() {
        let config_map = Arc::new(kind("", "ConfigMap", true));
        let (object, _) = held(&config_map, meta(&[]));
        let mut store = Store::default();
        let all = |_: &ObjectMeta| true;
        // Not listed yet, or broken since: never read.
        assert!(matches!(store.snapshot(1, &all), Snapshot::Behind));
        store.objects.insert("uid".into(), object);
        store.version = Some(10);
        assert!(matches!(store.snapshot(11, &all), Snapshot::Behind));
        assert!(matches!(store.snapshot(10, &all), Snapshot::Ready(found) if found.len() == 1));
        let none = |_: &ObjectMeta| false;
        assert!(matches!(store.snapshot(9, &none), Snapshot::Ready(found) if found.is_empty()));
        store.inexact.insert("uid".into());
        assert!(matches!(store.snapshot(10, &all), Snapshot::Inexact));
        store.version = None;
        assert!(matches!(store.snapshot(1, &all), Snapshot::Behind));
    }

    #[test]
    fn resource_versions_compare_as_numbers() {
        assert_eq!(number(Some("1200")), Some(1200));
        assert!(number(Some("1200")) > number(Some("999")));
        assert_eq!(number(Some("opaque-token")), None);
        assert_eq!(number(None), None);
    }
}
