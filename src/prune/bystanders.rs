//! What could depend on an orphan prune's targets: every object in every namespace, since a
//! `depends-on` reference (or a Flux `dependsOn`) may cross namespaces and a cluster-scoped orphan
//! may be needed by a namespaced object anywhere. A user who may not list cluster-wide gets the
//! scope of the command (`-n`), with a warning that names what could not be checked; a kind that
//! cannot be listed for another reason than 403 is reported, for the caller to refuse unless
//! accepted (`--skip-unlisted`).

use std::collections::HashSet;

use kube::core::ObjectMeta;

use crate::cluster::collect::{collect_where, Collection, ListFailure, ListOptions, ListScope, Listed};
use crate::cluster::session::Session;
use crate::model::trackers::Selection;

/// The objects that could depend on the planned ones, and the scope they were listed in (the
/// re-check before each wave lists the same scope again).
pub struct Bystanders {
    /// Every tracked object listed, but those the caller had listed already.
    pub objects: Vec<Listed>,
    /// Where they were listed.
    pub scope: ListScope,
    /// Kinds that could not be listed for another reason than 403, with why: objects of them
    /// could depend on the planned ones (the caller refuses unless that was accepted).
    pub unlisted: Vec<String>,
}

/// Lists the bystanders of an orphan prune (see the module documentation).
/// Objects whose UID is in `known` (already listed by the caller) are left out as pages arrive:
/// the snapshot never holds two copies of them.
pub async fn list(session: &Session, known: &HashSet<String>) -> Bystanders {
    let everywhere = ListScope::AllNamespaces;
    let mut scope = everywhere.clone();
    let mut listed = list_in(session, &everywhere, known).await;
    if session.scope != everywhere && listed.forbidden().next().is_some() {
        let narrow = session.scope.clone();
        tracing::warn!(
            "not allowed to list {} in every namespace: what depends on the orphans is checked in {} only",
            listed
                .forbidden()
                .map(|k| k.kind_with_group())
                .collect::<Vec<_>>()
                .join(", "),
            describe(&narrow)
        );
        listed = list_in(session, &narrow, known).await;
        scope = narrow;
    }
    let mut unlisted = Vec::new();
    for failure in &listed.failures {
        match &failure.failure {
            ListFailure::Forbidden => tracing::warn!(
                "not allowed to list {}: what of it depends on the orphans cannot be checked",
                failure.kind.kind_with_group()
            ),
            ListFailure::Error(_, message) => unlisted.push(format!("{} ({message})", failure.kind.kind_with_group())),
        }
    }
    Bystanders {
        objects: listed.objects,
        scope,
        unlisted,
    }
}

async fn list_in(session: &Session, scope: &ListScope, known: &HashSet<String>) -> Collection {
    let client = &session.connection.client;
    let kinds: Vec<_> = session.catalog.listable().cloned().collect();
    let tracked = Selection::default();
    let keep = |meta: &ObjectMeta| tracked.matches(meta) && !meta.uid.as_ref().is_some_and(|uid| known.contains(uid));
    collect_where(client, &kinds, scope, keep, ListOptions::default()).await
}

fn describe(scope: &ListScope) -> String {
    match scope {
        ListScope::Namespace(namespace) => format!("namespace {namespace} and cluster-scoped kinds"),
        ListScope::AllNamespaces => "every namespace".to_string(),
    }
}
