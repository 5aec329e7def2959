//! `kubectl stack stuck`: objects being deleted, how long, held by which finalizers, tracked
//! by what, and why they hang.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::cli::{GlobalArgs, StuckArgs, StuckOutput};
use crate::collect::{api_for, collect, sort_objects, Listed};
use crate::commands::list::{gaps, incomplete, tracked_by, warn_unlisted};
use crate::commands::{list_options, resolve_selection, resolve_typed, selection, Session};
use crate::error::{exit, is_not_found, UserError};
use crate::render;
use crate::retry::with_retries;
use crate::stuck::{diagnose, DiagnosisContext};
use crate::trackers::Selection;

/// Runs `stuck`.
pub async fn run(global: &GlobalArgs, args: StuckArgs) -> anyhow::Result<u8> {
    let session = Session::open(global).await?;
    let (objects, gaps) = if args.targets.is_empty() {
        terminating_in_scope(&session, &args).await?
    } else {
        (named(&session, &args.targets).await?, Vec::new())
    };
    let stuck: Vec<&Listed> = objects.iter().filter(|o| o.is_terminating()).collect();
    for object in objects.iter().filter(|o| !o.is_terminating()) {
        eprintln!("{} is not being deleted", object.id());
    }
    let context = DiagnosisContext::load(&session).await;
    let mut reports = Vec::new();
    for object in &stuck {
        reports.push((*object, diagnose(&session, &context, object).await));
    }
    let text = match args.output {
        StuckOutput::Text => text(&reports),
        StuckOutput::Json => render::json(&as_json(&reports))?,
        StuckOutput::Yaml => render::yaml(&as_json(&reports))?,
    };
    if reports.is_empty() && args.output == StuckOutput::Text {
        eprintln!("No objects are being deleted.");
    } else {
        render::emit(&text)?;
    }
    incomplete(&gaps)?;
    Ok(if reports.is_empty() { exit::OK } else { exit::FOUND })
}

/// What is being deleted in scope, and what could not be listed ([`gaps`]).
async fn terminating_in_scope(session: &Session, args: &StuckArgs) -> Result<(Vec<Listed>, Vec<String>), UserError> {
    let mut chosen = selection(&args.selection)?;
    resolve_selection(&mut chosen, session)?;
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

async fn named(session: &Session, targets: &[String]) -> Result<Vec<Listed>, UserError> {
    let mut found = Vec::new();
    for target in targets {
        let (kind, id) = resolve_typed(session, target)?;
        let id = id.ok_or_else(|| UserError::usage(format!("{target}: give TYPE/NAME")))?;
        let api = api_for(&session.connection.client, &kind, id.namespace.as_deref());
        match with_retries("get", || api.get_metadata(&id.name)).await {
            Ok(object) => found.push(Listed::new(Arc::clone(&kind), object.metadata)),
            Err(err) if is_not_found(&err) => eprintln!("{id} is gone"),
            Err(err) => return Err(session.connection.explain(&err)),
        }
    }
    sort_objects(&mut found);
    Ok(found)
}

fn terminating_for(object: &Listed) -> String {
    render::age(object.meta.deletion_timestamp.as_ref())
}

fn text(reports: &[(&Listed, Vec<String>)]) -> String {
    let mut out = String::new();
    for (object, diagnoses) in reports {
        let finalizers = if object.finalizers().is_empty() {
            "<none>".to_string()
        } else {
            object.finalizers().join(", ")
        };
        out.push_str(&format!("{}\n", object.id()));
        out.push_str(&format!("  terminating:  {}\n", terminating_for(object)));
        out.push_str(&format!("  finalizers:   {finalizers}\n"));
        out.push_str(&format!("  tracked by:   {}\n", tracked_by(object)));
        if diagnoses.is_empty() {
            out.push_str("  diagnosis:    none found (the finalizers' controllers may be slow or down)\n");
        } else {
            out.push_str("  diagnosis:\n");
            for diagnosis in diagnoses {
                out.push_str(&format!("    - {diagnosis}\n"));
            }
        }
    }
    out
}

fn as_json(reports: &[(&Listed, Vec<String>)]) -> Value {
    let items: Vec<Value> = reports
        .iter()
        .map(|(object, diagnoses)| {
            json!({
                "apiVersion": object.kind.api_version(), "kind": object.kind.kind, "namespace": object.namespace(),
                "name": object.name(), "uid": object.uid(), "deletionTimestamp": object.meta.deletion_timestamp,
                "terminatingFor": terminating_for(object), "finalizers": object.finalizers(),
                "trackedBy": tracked_by(object), "diagnoses": diagnoses,
            })
        })
        .collect();
    json!({"stuck": items})
}
