//! `kubectl stack list`: the objects a stack tracks.

use serde_json::{json, Value};

use crate::cli::{GlobalArgs, ListArgs, ListOutput};
use crate::collect::{collect, Collection, ErrorGroup, Listed};
use crate::error::{exit, UserError};
use crate::render;
use crate::session::{list_options, resolve_selection, selection, Session};

/// Runs `list`.
pub async fn run(global: &GlobalArgs, args: ListArgs) -> anyhow::Result<u8> {
    let mut selection = selection(&args.selection)?;
    let session = Session::open(global).await?;
    resolve_selection(&mut selection, &session)?;
    let collection = collect(
        &session.connection.client,
        &session.catalog,
        &session.scope,
        &selection,
        list_options(&args.tuning),
    )
    .await;
    warn_unlisted(&collection, &session)?;
    if collection.objects.is_empty() && matches!(args.output, ListOutput::Table | ListOutput::Wide) {
        eprintln!("No tracked objects found ({}).", selection.describe());
    } else {
        render::emit(&render_list(&collection.objects, args.output)?)?;
    }
    incomplete(&gaps(&collection, &session))?;
    Ok(exit::OK)
}

/// What could not be listed for another reason than 403 Forbidden: kinds whose listing failed,
/// and every kind of a group version that could not be discovered. Empty when the output is
/// complete, or when the only gaps are kinds an RBAC-limited user may not list.
pub fn gaps(collection: &Collection, session: &Session) -> Vec<String> {
    let mut gaps: Vec<String> = collection
        .errors()
        .iter()
        .flat_map(|group| group.kinds.iter().map(|k| k.kind_with_group()))
        .collect();
    gaps.extend(
        session
            .catalog
            .failures
            .iter()
            .map(|f| format!("every kind of {}", f.group_version)),
    );
    gaps
}

/// Fails with exit 3 after a command printed what it has, when something could not be listed.
pub fn incomplete(gaps: &[String]) -> Result<(), UserError> {
    if gaps.is_empty() {
        return Ok(());
    }
    Err(UserError::failed(format!(
        "the output is incomplete: {} could not be listed: {}",
        if gaps.len() == 1 { "1 kind" } else { "some kinds" },
        gaps.join(", ")
    ))
    .hint("the warnings above say why; run again when the API server or the aggregated API answers"))
}

/// Warns once about kinds that could not be listed; fails when no kind could be listed at all.
pub fn warn_unlisted(collection: &Collection, session: &Session) -> Result<(), UserError> {
    let forbidden: Vec<String> = collection.forbidden().map(|k| k.kind_with_group()).collect();
    let errors = collection.errors();
    if collection.listed_kinds == 0 && !collection.failures.is_empty() {
        let user = &session.connection.user;
        return Err(match errors.as_slice() {
            [] => UserError::failed(format!(
                "user \"{user}\" may not list any kind ({} kinds forbidden)",
                forbidden.len()
            ))
            .hint("ask for list permission (README: RBAC), or use --context/--as for another identity"),
            [ErrorGroup {
                message,
                status: Some(400),
                ..
            }] => UserError::usage(format!("the server rejected the selection: {message}"))
                .hint("check -l/--selector and the --tracker value (label values: letters, digits, '-', '_', '.')"),
            [ErrorGroup { message, .. }] => UserError::failed(format!("could not list any kind: {message}")),
            _ => UserError::failed(format!("could not list any kind: {}", describe_errors(&errors))),
        });
    }
    if !forbidden.is_empty() {
        tracing::warn!(
            "not allowed to list {} kind(s), their objects are not shown: {}",
            forbidden.len(),
            forbidden.join(", ")
        );
    }
    if !errors.is_empty() {
        tracing::warn!(
            "could not list some kinds, their objects are not shown: {}",
            describe_errors(&errors)
        );
    }
    Ok(())
}

fn describe_errors(errors: &[ErrorGroup]) -> String {
    errors
        .iter()
        .map(|group| {
            let names: Vec<String> = group.kinds.iter().map(|k| k.kind_with_group()).collect();
            format!("{} ({})", names.join(", "), group.message)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Renders listed objects in the chosen format.
pub fn render_list(objects: &[Listed], output: ListOutput) -> Result<String, UserError> {
    match output {
        ListOutput::Table => Ok(render::table(&HEADERS, objects.iter().map(row).collect())),
        ListOutput::Wide => Ok(render::table(&WIDE_HEADERS, objects.iter().map(wide_row).collect())),
        ListOutput::Json => render::json(&as_list(objects)),
        ListOutput::Yaml => render::yaml(&as_list(objects)),
        ListOutput::Name => Ok(objects.iter().map(|o| o.id().kubectl_name() + "\n").collect()),
    }
}

const HEADERS: [&str; 6] = ["KIND", "NAMESPACE", "NAME", "AGE", "STATUS", "TRACKED-BY"];
const WIDE_HEADERS: [&str; 10] = [
    "KIND",
    "NAMESPACE",
    "NAME",
    "AGE",
    "STATUS",
    "TRACKED-BY",
    "VERSION",
    "UID",
    "FINALIZERS",
    "CONTROLLED-BY",
];

fn row(object: &Listed) -> Vec<String> {
    vec![
        object.kind.kind_with_group(),
        object.namespace().unwrap_or("").to_string(),
        object.name().to_string(),
        render::age(object.meta.creation_timestamp.as_ref()),
        status(object),
        tracked_by(object),
    ]
}

fn wide_row(object: &Listed) -> Vec<String> {
    let mut cells = row(object);
    cells.push(object.kind.api_version());
    cells.push(object.uid().to_string());
    cells.push(if object.finalizers().is_empty() {
        "<none>".to_string()
    } else {
        object.finalizers().join(",")
    });
    cells.push(
        object
            .controller_owner()
            .map(|o| format!("{}/{}", o.kind, o.name))
            .unwrap_or_else(|| "<none>".to_string()),
    );
    cells
}

/// `Active`, or `Terminating` with how many finalizers hold it.
pub fn status(object: &Listed) -> String {
    if !object.is_terminating() {
        return "Active".to_string();
    }
    match object.finalizers().len() {
        0 => "Terminating".to_string(),
        1 => "Terminating (1 finalizer)".to_string(),
        n => format!("Terminating ({n} finalizers)"),
    }
}

/// Every tool mark on the object, comma-separated, or `<none>`.
pub fn tracked_by(object: &Listed) -> String {
    crate::trackers::describe_marks(&object.meta)
}

/// A Kubernetes `List` of the objects' metadata, as `kubectl get -o json` would frame it.
pub fn as_list(objects: &[Listed]) -> Value {
    let items: Vec<Value> = objects
        .iter()
        .map(|o| json!({"apiVersion": o.kind.api_version(), "kind": o.kind.kind, "metadata": o.meta}))
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items})
}
