//! The session every live command starts from: a connection, the server's catalog of kinds, and
//! where to list; with the small resolutions that need both (ApplySet parents, `TYPE/NAME`).

use std::sync::Arc;

use crate::cli::{GlobalArgs, ListTuning, SelectionArgs};
use crate::client::{connect, Connection};
use crate::collect::{ListOptions, ListScope};
use crate::discovery::{discover_cached, Catalog, DiskCache, KindInfo};
use crate::error::UserError;
use crate::identity::ObjectId;
use crate::trackers::{applyset_id, Preset, Selection, Tracker};

/// A connection plus the server's catalog of kinds: what every live command starts from.
#[derive(Clone)]
pub struct Session {
    /// The connection.
    pub connection: Connection,
    /// Every kind the server serves.
    pub catalog: Arc<Catalog>,
    /// Where to list.
    pub scope: ListScope,
}

impl Session {
    /// Connects and discovers, warning on stderr about group versions that could not be discovered.
    pub async fn open(global: &GlobalArgs) -> Result<Self, UserError> {
        let connection = connect(global).await?;
        let cache = cache_root(global).map(|root| DiskCache::for_server(&root, &connection.server));
        let catalog = discover_cached(&connection.client, cache.as_ref(), global.discovery_cache)
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
        let scope = if global.all_namespaces {
            ListScope::AllNamespaces
        } else {
            ListScope::Namespace(connection.namespace.clone())
        };
        Ok(Self {
            connection,
            catalog: Arc::new(catalog),
            scope,
        })
    }
}

/// The discovery cache root: `--cache-dir`, else kubectl's default.
pub fn cache_root(global: &GlobalArgs) -> Option<std::path::PathBuf> {
    global
        .cache_dir
        .clone()
        .filter(|dir| !dir.as_os_str().is_empty())
        .or_else(crate::discovery::default_cache_root)
}

/// Builds the selection from `-l` and `--tracker`.
pub fn selection(args: &SelectionArgs) -> Result<Selection, UserError> {
    let tracker = args.tracker.as_deref().map(Tracker::parse).transpose()?;
    Ok(Selection::new(args.selector.clone(), tracker))
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

/// List options from the tuning flags.
pub fn list_options(tuning: &ListTuning) -> ListOptions {
    ListOptions {
        concurrency: usize::from(tuning.concurrency),
        page_size: tuning.chunk_size,
    }
}
