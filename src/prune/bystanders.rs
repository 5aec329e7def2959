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

/// Lists the bystanders of an orphan prune (see the module documentation), with the untracked
/// objects that declare a need in the same listing ([`Listing::stayers`]: the plan's stayers,
/// looked for where the bystanders are). Objects whose UID is in `known` (already listed by the
/// caller) are left out as pages arrive: the snapshot never holds two copies of them.
pub async fn list(session: &Session, known: &HashSet<String>) -> (Bystanders, Collection) {
    let everywhere = ListScope::AllNamespaces;
    let mut scope = everywhere.clone();
    let options = ListOptions::default();
    let (_, mut listing) = listing_in(session, &everywhere, None, known, options).await;
    if session.scope != everywhere && listing.bystanders.forbidden().next().is_some() {
        let narrow = session.scope.clone();
        tracing::warn!(
            "not allowed to list {} in every namespace: what depends on the orphans is checked in {} only",
            listing
                .bystanders
                .forbidden()
                .map(|k| k.kind_with_group())
                .collect::<Vec<_>>()
                .join(", "),
            describe(&narrow)
        );
        (_, listing) = listing_in(session, &narrow, None, known, options).await;
        scope = narrow;
    }
    (of_listing(listing.bystanders, scope, known), listing.stayers)
}

/// The bystanders of a listing made in `scope`: its objects but those whose UID is in `known`,
/// with the kinds it could not list (those forbidden are warned about).
pub fn of_listing(mut listed: Collection, scope: ListScope, known: &HashSet<String>) -> Bystanders {
    listed.objects.retain(|o| !known.contains(o.uid()));
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

/// Whether one listing finds both an orphan prune's selection and its bystanders: in every
/// namespace (as the bystanders are listed), with no `-l` (a label selector only the server
/// applies; a tracker's mark is told apart by [`Selection::matches`] itself).
pub fn one_listing_serves(session: &Session, selection: &Selection) -> bool {
    session.scope == ListScope::AllNamespaces && selection.user_selector.is_none()
}

/// What one listing of every kind in every namespace found besides an orphan prune's selection
/// ([`collect_with`]); each part carries the listing's failures.
pub struct Listing {
    /// The other tracked objects: the bystanders, for [`of_listing`].
    pub bystanders: Collection,
    /// The untracked objects that declare a need ([`crate::graph::stayers::declares_a_need`]): the
    /// part in scope of [`crate::graph::stayers::list_finalized`], for the plan's graph.
    pub stayers: Collection,
}

/// One listing of every kind in every namespace, without a label selector, split into what
/// `selection` matches (as [`crate::cluster::collect::collect`] would find it) and the rest of what the
/// plan lists there ([`Listing`]). For where [`one_listing_serves`].
pub async fn collect_with(session: &Session, selection: &Selection, options: ListOptions) -> (Collection, Listing) {
    listing_in(
        session,
        &ListScope::AllNamespaces,
        Some(selection),
        &HashSet::new(),
        options,
    )
    .await
}

/// One listing of every kind in `scope`, without a label selector, split three ways: what
/// `selection` matches, the other tracked objects, and the untracked ones that declare a need;
/// each part carries the listing's failures. Objects whose UID is in `known` are left out of the
/// last two as pages arrive.
async fn listing_in(
    session: &Session,
    scope: &ListScope,
    selection: Option<&Selection>,
    known: &HashSet<String>,
    options: ListOptions,
) -> (Collection, Listing) {
    let client = &session.connection.client;
    let kinds: Vec<_> = session.catalog.listable().cloned().collect();
    let tracked = Selection::default();
    // Told apart on the metadata as listed (before anything of it is dropped), by UID.
    let selected = std::sync::Mutex::new(HashSet::new());
    let stayers = std::sync::Mutex::new(HashSet::new());
    let note = |set: &std::sync::Mutex<HashSet<String>>, meta: &ObjectMeta| {
        if let Ok(mut set) = set.lock() {
            set.insert(meta.uid.clone().unwrap_or_default());
        }
    };
    let keep = |meta: &ObjectMeta| {
        if selection.is_some_and(|s| s.matches(meta)) {
            note(&selected, meta);
            return true;
        }
        if meta.uid.as_ref().is_some_and(|uid| known.contains(uid)) {
            return false;
        }
        if tracked.matches(meta) {
            return true;
        }
        let stays = crate::graph::stayers::declares_a_need(meta);
        if stays {
            note(&stayers, meta);
        }
        stays
    };
    let mut listed = collect_where(client, &kinds, scope, keep, options).await;
    let selected = selected.into_inner().unwrap_or_default();
    let stayers = stayers.into_inner().unwrap_or_default();
    let (chosen, others): (Vec<Listed>, Vec<Listed>) = std::mem::take(&mut listed.objects)
        .into_iter()
        .partition(|o| selected.contains(o.uid()));
    let (staying, others): (Vec<Listed>, Vec<Listed>) = others.into_iter().partition(|o| stayers.contains(o.uid()));
    let part = |objects: Vec<Listed>| Collection {
        objects,
        ..listed.clone()
    };
    let rest = Listing {
        bystanders: part(others),
        stayers: part(staying),
    };
    listed.objects = chosen;
    (listed, rest)
}

fn describe(scope: &ListScope) -> String {
    match scope {
        ListScope::Namespace(namespace) => format!("namespace {namespace} and cluster-scoped kinds"),
        ListScope::AllNamespaces => "every namespace".to_string(),
    }
}
