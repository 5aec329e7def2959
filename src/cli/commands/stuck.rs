//! `kubectl stack stuck`: objects being deleted, how long, held by which finalizers, tracked
//! by what, and why they hang.

use std::sync::Arc;

use crate::breakglass::stuck::chains::{render_text, to_json};
use crate::breakglass::stuck::{explain, DiagnosisContext};
use crate::cli::{list_options, selection};
use crate::cli::{GlobalArgs, StuckArgs, StuckOutput};
use crate::cluster::collect::{api_for, collect, sort_objects, Listed};
use crate::cluster::retry::with_retries;
use crate::cluster::session::{resolve_selection, resolve_typed, Session};
use crate::error::{exit, is_not_found, UserError};
use crate::model::trackers::Selection;
use crate::render;
use crate::stack::listing::{gaps, incomplete, warn_unlisted};

/// Runs `stuck`.
pub async fn run(global: &GlobalArgs, args: StuckArgs) -> anyhow::Result<u8> {
    let session = Session::open(global).await?;
    let (objects, gaps, mut missing) = if args.targets.is_empty() {
        let (objects, gaps) = terminating_in_scope(&session, &args).await?;
        (objects, gaps, Vec::new())
    } else {
        let (objects, missing) = named(&session, &args.targets).await?;
        (objects, Vec::new(), missing)
    };
    let stuck: Vec<Listed> = objects.iter().filter(|o| o.is_terminating()).cloned().collect();
    for object in objects.iter().filter(|o| !o.is_terminating()) {
        crate::say!("{} is not being deleted", object.id());
    }
    let mut context = DiagnosisContext::load(&session).await;
    let report = explain(&session, &mut context, stuck).await;
    if report.entries.is_empty() && args.output == StuckOutput::Text {
        if missing.is_empty() {
            crate::say!("No objects are being deleted.");
        }
    } else {
        let text = match args.output {
            StuckOutput::Text => render_text(&report),
            StuckOutput::Json => render::json(&render::document("StuckReport", to_json(&report)))?,
            StuckOutput::Yaml => render::yaml(&render::document("StuckReport", to_json(&report)))?,
        };
        render::emit(&text)?;
    }
    incomplete(&gaps)?;
    // A named object not found is an error (exit 3), said after what was found.
    if let Some(last) = missing.pop() {
        for other in &missing {
            crate::say!("error: {}", other.message);
        }
        return Err(last.into());
    }
    Ok(if report.entries.is_empty() {
        exit::OK
    } else {
        exit::FOUND
    })
}

/// What is being deleted in scope, and what could not be listed ([`gaps`]).
async fn terminating_in_scope(session: &Session, args: &StuckArgs) -> Result<(Vec<Listed>, Vec<String>), UserError> {
    let mut chosen = selection(&args.selection)?;
    resolve_selection(&mut chosen, session)?;
    // With neither `--tracker` nor a selector (`-l ''` selects everything, as in kubectl),
    // every object being deleted counts, whether a tool tracks it or not.
    let mut chosen = if chosen.tracker.is_none() && chosen.user_selector.is_none() {
        Selection::everything()
    } else {
        chosen
    };
    // Keep only what is being deleted as pages arrive: a large cluster is never held in memory.
    chosen.only_terminating = true;
    let collection = collect(
        &session.connection.client,
        &session.catalog,
        &session.scope,
        &chosen,
        list_options(&args.tuning),
    )
    .await;
    warn_unlisted(&collection, session)?;
    let gaps = gaps(&collection, session);
    Ok((
        collection.objects.into_iter().filter(Listed::is_terminating).collect(),
        gaps,
    ))
}

/// The named objects, and an error for each one not found.
async fn named(session: &Session, targets: &[String]) -> Result<(Vec<Listed>, Vec<UserError>), UserError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for target in targets {
        let (kind, id) = resolve_typed(session, target)?;
        let id = id.ok_or_else(|| UserError::usage(format!("{target}: give TYPE/NAME")))?;
        let api = api_for(&session.connection.client, &kind, id.namespace.as_deref());
        match with_retries("get", || api.get_metadata(&id.name)).await {
            Ok(object) => found.push(Listed::new(Arc::clone(&kind), object.metadata)),
            Err(err) if is_not_found(&err) => missing.push(super::not_found(&kind, &id)),
            Err(err) => return Err(session.connection.explain(&err)),
        }
    }
    sort_objects(&mut found);
    Ok((found, missing))
}
