//! Whether the kinds the server serves may have changed since a catalog was discovered: a watch
//! of the CustomResourceDefinitions and APIServices (metadata only), started before the catalog
//! is discovered, from the resourceVersion of a list of them. The re-check before a wave reuses
//! the plan's catalog unless this watch saw a change; anything it cannot vouch for (a watch that
//! broke or never started, a group that could not be discovered, a CRD discovery does not serve
//! yet) means discovering again, never assuming.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::Client;
use serde::de::DeserializeOwned;

use super::Catalog;

/// How long one watch request lasts before it is resumed from the last resourceVersion seen.
const WATCH_SECONDS: u32 = 290;

/// What the watches have seen since the last [`KindsWatch::take_change`].
#[derive(Debug, Default)]
struct Seen {
    /// Something was added, changed or deleted (or a watch had to list again).
    changed: bool,
    /// A watch could not start: nothing it did not see can be vouched for.
    broken: bool,
    /// The names of the CRDs (`plural.group`) as the watch knows them.
    crds: BTreeSet<String>,
}

/// Which of the two watched kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    Crds,
    ApiServices,
}

/// The watch of the CRDs and APIServices of one run (see the module documentation). Its tasks end
/// when it is dropped.
#[derive(Debug)]
pub struct KindsWatch {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl KindsWatch {
    /// Lists the CRDs and APIServices and watches them from there. Call it before discovering
    /// the catalog it vouches for: a change after the list is an event of the watch.
    pub async fn start(client: &Client) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let services: Api<APIService> = Api::all(client.clone());
        let (crd_version, service_version) = futures::join!(
            list_into(&crds, &seen, Watched::Crds),
            list_into(&services, &seen, Watched::ApiServices)
        );
        let mut tasks = Vec::new();
        match (crd_version, service_version) {
            (Some(crd_version), Some(service_version)) => {
                tasks.push(tokio::spawn(watch(crds, seen.clone(), Watched::Crds, crd_version)));
                tasks.push(tokio::spawn(watch(
                    services,
                    seen.clone(),
                    Watched::ApiServices,
                    service_version,
                )));
            }
            _ => lock(&seen).broken = true,
        }
        Self { seen, tasks }
    }

    /// Why `catalog` may no longer be what the server serves, if it may not: a CRD or APIService
    /// changed since the last call (or since the watch started), a watch broke, the catalog lacks
    /// groups it could not discover, or a CRD the watch knows has no kind in it (discovery serves
    /// a new CRD a little after it is made). Clears the change seen: discover again right after
    /// a `Some`, and what changes from then on is seen at the next call.
    pub fn take_change(&self, catalog: &Catalog) -> Option<&'static str> {
        let mut seen = lock(&self.seen);
        let changed = std::mem::take(&mut seen.changed);
        if seen.broken {
            return Some("the watch of CRDs and APIServices could not start");
        }
        if changed {
            return Some("a CRD or APIService changed");
        }
        if !catalog.failures.is_empty() {
            return Some("some group versions could not be discovered");
        }
        let served: BTreeSet<String> = catalog
            .kinds()
            .iter()
            .filter(|k| !k.group.is_empty())
            .map(|k| k.crd_name())
            .collect();
        if !seen.crds.is_subset(&served) {
            return Some("a CRD is not served yet");
        }
        None
    }
}

impl Drop for KindsWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The state, even when a task panicked while holding it (it only holds plain sets).
fn lock(seen: &Mutex<Seen>) -> MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Lists `api` (metadata only), records the CRD names, and returns the list's resourceVersion
/// (none when the list failed).
async fn list_into<K>(api: &Api<K>, seen: &Mutex<Seen>, watched: Watched) -> Option<String>
where
    K: Clone + DeserializeOwned + Debug,
{
    match api.list_metadata(&ListParams::default()).await {
        Ok(list) => {
            if watched == Watched::Crds {
                lock(seen).crds = list.items.into_iter().filter_map(|o| o.metadata.name).collect();
            }
            list.metadata.resource_version
        }
        Err(err) => {
            tracing::debug!("cannot list {watched:?} to watch them: {err}");
            None
        }
    }
}

/// Watches `api` from `version` until aborted, marking every change. A watch the server ends is
/// resumed from the last version seen; one that fails (410 Gone, an error) lists again, which
/// counts as a change (what happened meanwhile is not known).
async fn watch<K>(api: Api<K>, seen: Arc<Mutex<Seen>>, watched: Watched, mut version: String)
where
    K: Clone + DeserializeOwned + Debug + Send + 'static,
{
    loop {
        let params = WatchParams::default().timeout(WATCH_SECONDS);
        let resumed = match api.watch_metadata(&params, &version).await {
            Ok(events) => follow(events, &seen, watched, &mut version).await,
            Err(err) => {
                tracing::debug!("cannot watch {watched:?}: {err}");
                false
            }
        };
        if resumed {
            continue;
        }
        lock(&seen).changed = true;
        loop {
            if let Some(listed) = list_into(&api, &seen, watched).await {
                version = listed;
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        lock(&seen).changed = true;
    }
}

/// Follows one watch request; true when the server ended it cleanly (resume from `version`),
/// false when it failed (list again).
async fn follow<K>(
    events: impl futures::Stream<Item = kube::Result<WatchEvent<kube::core::PartialObjectMeta<K>>>>,
    seen: &Mutex<Seen>,
    watched: Watched,
    version: &mut String,
) -> bool
where
    K: Clone + DeserializeOwned + Debug,
{
    let mut events = std::pin::pin!(events);
    loop {
        let event = match events.try_next().await {
            Ok(Some(event)) => event,
            Ok(None) => return true,
            Err(err) => {
                tracing::debug!("the watch of {watched:?} failed: {err}");
                return false;
            }
        };
        let (metadata, deleted) = match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => (object.metadata, false),
            WatchEvent::Deleted(object) => (object.metadata, true),
            WatchEvent::Bookmark(bookmark) => {
                *version = bookmark.metadata.resource_version;
                continue;
            }
            WatchEvent::Error(err) => {
                tracing::debug!("the watch of {watched:?} ended: {err:?}");
                return false;
            }
        };
        tracing::debug!("{watched:?} changed: {:?}", metadata.name);
        let mut seen = lock(seen);
        seen.changed = true;
        if let (Watched::Crds, Some(name)) = (watched, metadata.name) {
            match deleted {
                true => seen.crds.remove(&name),
                false => seen.crds.insert(name),
            };
        }
        if let Some(next) = metadata.resource_version {
            *version = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::discovery::{DiscoveryFailure, DiscoverySource};
    use crate::cluster::fixtures::kind;

    fn watch_seeing(crds: &[&str], changed: bool, broken: bool) -> KindsWatch {
        let seen = Seen {
            changed,
            broken,
            crds: crds.iter().map(|c| c.to_string()).collect(),
        };
        KindsWatch {
            seen: Arc::new(Mutex::new(seen)),
            tasks: Vec::new(),
        }
    }

    fn catalog(failed: bool) -> Catalog {
        let failures = match failed {
            true => vec![DiscoveryFailure {
                group_version: "metrics.k8s.io/v1beta1".into(),
                message: "down".into(),
            }],
            false => Vec::new(),
        };
        Catalog::new(
            vec![kind("", "ConfigMap", true), kind("example.com", "Widget", true)],
            failures,
            DiscoverySource::Aggregated,
        )
    }

    #[test]
    fn the_catalog_is_reused_only_when_nothing_changed_and_every_crd_is_served() {
        assert_eq!(
            watch_seeing(&["widgets.example.com"], false, false).take_change(&catalog(false)),
            None
        );
        // A change is reported once: the caller discovers again right after.
        let changed = watch_seeing(&[], true, false);
        assert!(changed.take_change(&catalog(false)).is_some());
        assert_eq!(changed.take_change(&catalog(false)), None);
        // What cannot be vouched for is reported every time.
        let broken = watch_seeing(&[], false, true);
        assert!(broken.take_change(&catalog(false)).is_some());
        assert!(broken.take_change(&catalog(false)).is_some());
        let lagging = watch_seeing(&["widgets.example.com", "gadgets.example.com"], false, false);
        assert!(lagging.take_change(&catalog(false)).is_some());
        assert!(lagging.take_change(&catalog(false)).is_some());
        assert!(watch_seeing(&[], false, false).take_change(&catalog(true)).is_some());
    }
}
