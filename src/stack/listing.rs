//! What a listing leaves out, and how a listed object is described: the gaps that make a
//! command's output incomplete (exit 3), the warnings about kinds that could not be listed, and
//! each object's status and tracking marks.

use crate::cluster::collect::{Collection, ErrorGroup, Listed};
use crate::cluster::session::Session;
use crate::error::UserError;

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
    match &object.marks {
        Some(described) => described.to_string(),
        None => crate::model::trackers::describe_marks(&object.meta),
    }
}
