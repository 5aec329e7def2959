//! The session every live command starts from: a connection, the server's catalog of kinds, and
//! where to list; with the small resolutions that need both (ApplySet parents, `TYPE/NAME`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cluster::client::{connect, ConnectOptions, Connection};
use crate::cluster::collect::{
    collect_kinds, sort_objects, Collection, KindFailure, ListFailure, ListOptions, ListScope,
};
use crate::cluster::discovery::{discover_cached, CacheUse, Catalog, DiskCache, KindInfo, KindsWatch};
use crate::error::{root_cause, UserError};
use crate::model::identity::ObjectId;
use crate::model::trackers::{applyset_id, Preset, Selection};

/// How to open a session: what to connect with, where discovery is cached and how far the cache
/// may be trusted, and whether to list in every namespace.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// The connection.
    pub connect: ConnectOptions,
    /// The cache directory (`--cache-dir`); none or empty: kubectl's default.
    pub cache_dir: Option<PathBuf>,
    /// How far discovery may rely on the disk cache.
    pub discovery_cache: CacheUse,
    /// List in every namespace.
    pub all_namespaces: bool,
    /// Watch the CRDs and APIServices from before discovery ([`Session::kinds_watch`]).
    pub watch_kinds: bool,
}

/// A connection plus the server's catalog of kinds: what every live command starts from.
#[derive(Clone)]
pub struct Session {
    /// The connection.
    pub connection: Connection,
    /// Every kind the server serves.
    pub catalog: Arc<Catalog>,
    /// Where to list.
    pub scope: ListScope,
    /// Where discovery is cached on disk (kubectl's cache, or `--cache-dir`), if anywhere.
    pub cache: Option<DiskCache>,
    /// The watch of CRDs and APIServices started before the catalog was discovered, when the
    /// session was opened to run waves: it says when the catalog may be out of date.
    pub kinds_watch: Option<Arc<KindsWatch>>,
}

impl Session {
    /// Connects and discovers, warning on stderr about group versions that could not be discovered.
    /// Takes [`SessionOptions`], or the command line's global flags (`&GlobalArgs`).
    pub async fn open(options: impl Into<SessionOptions>) -> Result<Self, UserError> {
        let options = options.into();
        let connection = connect(&options.connect).await?;
        let cache =
            cache_root(options.cache_dir.as_deref()).map(|root| DiskCache::for_server(&root, &connection.server));
        // Started before discovery: a change after it is an event of the watch.
        let kinds_watch = match options.watch_kinds {
            true => Some(Arc::new(KindsWatch::start(&connection.client).await)),
            false => None,
        };
        let catalog = discover_cached(&connection.client, cache.as_ref(), options.discovery_cache)
            .await
            .map_err(|err| connection.explain(&err))?;
        if catalog.kinds().is_empty() {
            return Err(UserError::failed(format!(
                "the API server at {} reported no kinds at all",
                connection.server
            ))
            .hint("check the server with `kubectl api-resources`"));
        }
        for failure in &catalog.failures {
            tracing::warn!(
                "could not discover {}: {} (its kinds are not listed)",
                failure.group_version,
                failure.message
            );
        }
        let scope = if options.all_namespaces {
            ListScope::AllNamespaces
        } else {
            ListScope::Namespace(connection.namespace.clone())
        };
        Ok(Self {
            connection,
            catalog: Arc::new(catalog),
            scope,
            cache,
            kinds_watch,
        })
    }
}

/// The discovery cache root: `--cache-dir` (when given and not empty), else kubectl's default.
pub fn cache_root(cache_dir: Option<&Path>) -> Option<PathBuf> {
    cache_dir
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(crate::cluster::discovery::default_cache_root)
}

/// Completes a selection that needs the server: an ApplySet given by its parent
/// (`applyset=[RESOURCE[.GROUP]/]NAME`, default a Secret in the current namespace) becomes its id.
pub fn resolve_selection(selection: &mut Selection, session: &Session) -> Result<(), UserError> {
    let Some(tracker) = selection.tracker.as_mut() else {
        return Ok(());
    };
    let Some(value) = tracker.value.as_mut() else {
        return Ok(());
    };
    if tracker.preset != Preset::ApplySet || value.name.starts_with("applyset-") {
        return Ok(());
    }
    let parent = value.name.clone();
    let (resource, name) = parent.split_once('/').unwrap_or(("secrets", parent.as_str()));
    let kind = session.catalog.resolve(resource).ok_or_else(|| {
        UserError::usage(format!("unknown ApplySet parent kind {resource:?}"))
            .hint("give the parent as [RESOURCE[.GROUP]/]NAME, e.g. secrets/my-set, or the id applyset-...-v1")
    })?;
    let namespace = if kind.namespaced {
        session.connection.namespace.as_str()
    } else {
        ""
    };
    value.name = applyset_id(name, namespace, &kind.kind, &kind.group);
    tracing::info!(
        "ApplySet parent {}/{name} has id {}",
        kind.kind_with_group(),
        value.name
    );
    Ok(())
}

/// Resolves `TYPE/NAME` (kubectl spellings of TYPE: `configmaps`, `deploy`, `gizmos.example.com`)
/// to its kind and identity in the current namespace; `TYPE` alone gives no name.
pub fn resolve_typed(session: &Session, typed: &str) -> Result<(Arc<KindInfo>, Option<ObjectId>), UserError> {
    let (kind_text, name) = match typed.split_once('/') {
        Some((kind, name)) if !name.is_empty() => (kind, Some(name)),
        _ => (typed, None),
    };
    let kind = session
        .catalog
        .resolve(kind_text)
        .ok_or_else(|| {
            UserError::usage(format!("the server does not serve a kind {kind_text:?}"))
                .hint("`kubectl api-resources` lists them")
        })?
        .clone();
    let namespace = kind.namespaced.then_some(session.connection.namespace.as_str());
    let id = name.map(|name| ObjectId::new(&kind.group, &kind.kind, namespace, name));
    Ok((kind, id))
}

/// Kinds that answered 404 to a LIST although the catalog (perhaps from kubectl's disk cache)
/// says they are served make discovery run afresh, once (rewriting the cache), and the session's
/// catalog is replaced. What a 404 means is decided by [`Session::settle_not_served`].
pub async fn relist_not_served(
    session: &mut Session,
    collection: &mut Collection,
    selection: &Selection,
    options: ListOptions,
) {
    let client = session.connection.client.clone();
    let scope = session.scope.clone();
    let relist =
        |kinds: Vec<Arc<KindInfo>>| async move { collect_kinds(&client, &kinds, &scope, selection, options).await };
    if let Some(fresh) = session.settle_not_served(collection, relist).await {
        session.catalog = Arc::new(fresh);
    }
}

impl Session {
    /// Decides, for every path that lists, what a 404 to a LIST means (the kinds in
    /// [`Collection::not_served`]): discovery runs afresh, once; a kind still served is listed
    /// again by `relist` at what the server serves now (a CRD whose version changed); one no
    /// longer served has no objects (its CRD deleted: another stack's teardown, a test); one that
    /// answers 404 again, though fresh discovery serves it, is a listing failure, never taken as
    /// a kind without objects. Returns the fresh catalog when discovery ran.
    pub async fn settle_not_served<F, Fut>(&self, collection: &mut Collection, relist: F) -> Option<Catalog>
    where
        F: FnOnce(Vec<Arc<KindInfo>>) -> Fut,
        Fut: std::future::Future<Output = Collection>,
    {
        if collection.not_served.is_empty() {
            return None;
        }
        let names: Vec<String> = collection.not_served.iter().map(|k| k.kind_with_group()).collect();
        tracing::info!(
            "{} answered 404 though discovery serves it: discovering afresh",
            names.join(", ")
        );
        let fresh = match discover_cached(&self.connection.client, self.cache.as_ref(), CacheUse::Refresh).await {
            Ok(fresh) => fresh,
            Err(err) => {
                let message = format!(
                    "answered 404, and discovery could not be repeated: {}",
                    root_cause(&err)
                );
                for kind in std::mem::take(&mut collection.not_served) {
                    collection.failures.push(KindFailure {
                        kind,
                        failure: ListFailure::Error(Some(404), message.clone()),
                    });
                }
                return None;
            }
        };
        let (served, gone): (Vec<Arc<KindInfo>>, Vec<Arc<KindInfo>>) = std::mem::take(&mut collection.not_served)
            .into_iter()
            .partition(|k| fresh.get(&k.group, &k.kind).is_some_and(|f| f.can("list")));
        for kind in &gone {
            tracing::debug!("{} is no longer served: no objects", kind.kind_with_group());
        }
        collection.not_served = gone;
        let again: Vec<Arc<KindInfo>> = served
            .iter()
            .filter_map(|k| fresh.get(&k.group, &k.kind).cloned())
            .collect();
        if !again.is_empty() {
            let relisted = relist(again).await;
            collection.objects.extend(relisted.objects);
            sort_objects(&mut collection.objects);
            collection.listed_kinds += relisted.listed_kinds;
            collection.failures.extend(relisted.failures);
            for kind in relisted.not_served {
                collection.failures.push(KindFailure {
                    kind,
                    failure: ListFailure::Error(
                        Some(404),
                        "answered 404 to a list although discovery serves it".to_string(),
                    ),
                });
            }
        }
        Some(fresh)
    }
}
