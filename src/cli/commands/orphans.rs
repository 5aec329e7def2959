//! `kubectl stack orphans`: tracked objects that are no longer desired, each with the reason.
//! The finding is [`crate::prune::orphans`]; this command parses, calls it and renders.

use serde_json::{json, Value};

use crate::cli::{list_options, selection, GlobalArgs, ListOutput, OrphansArgs};
use crate::cluster::session::Session;
use crate::error::{exit, UserError};
use crate::prune::orphans::{find, OrphanReport, PendingManifests};
use crate::render;
use crate::stack::classify::{Classified, Verdict};
use crate::stack::listing::{gaps, incomplete, status, tracked_by};

/// Runs `orphans`.
pub async fn run(global: &GlobalArgs, args: OrphansArgs) -> anyhow::Result<u8> {
    // Read while the session opens and the cluster is listed.
    let mut manifests = PendingManifests::start((&args.desired.manifests).into());
    let session = manifests.beside(Session::open(global)).await?;
    // A manifest's error wins over the selection's, as over the session's.
    let selection = manifests.beside(async { selection(&args.selection) }).await?;
    let options = list_options(&args.tuning);
    let report = find(&session, selection, &(&args.desired).into(), manifests, options).await?;
    let shown = report.orphans().count() + if args.show_skipped { report.skipped().count() } else { 0 };
    if shown == 0 && matches!(args.output, ListOutput::Table | ListOutput::Wide) {
        crate::say!("{}", nothing_found("No orphans", &report, args.show_skipped));
    } else {
        render::emit(&render_report(&report, args.output, args.show_skipped)?)?;
    }
    incomplete(&gaps(&report.collection, &session))?;
    Ok(if report.orphans().next().is_some() {
        exit::FOUND
    } else {
        exit::OK
    })
}

/// "No orphans" (or "Nothing to prune"), said so that it is not silent about why: the objects
/// looked at and where, the objects `-l` matched that no tool tracks (`--untracked`), the
/// skipped ones (`--show-skipped`).
pub fn nothing_found(verdict: &str, report: &OrphanReport, show_skipped: bool) -> String {
    let tracked = report.classified.len();
    let mut text = format!("{verdict} among {tracked} tracked object(s) {}.", report.scope);
    let untracked = report.collection.untracked_matches;
    if untracked > 0 {
        text.push_str(&format!(
            "\n{untracked} object(s) matched {} but no GitOps tool tracks them: only tracked objects can be orphans (--untracked compares them too).",
            report.selection
        ));
    }
    let skipped = report.skipped().count();
    if skipped > 0 && !show_skipped {
        text.push_str(&format!(
            "\n{skipped} object(s) not desired were skipped (kept by a marker, made by a controller, being deleted): --show-skipped lists them with the reason."
        ));
    }
    text
}

const HEADERS: [&str; 6] = ["KIND", "NAMESPACE", "NAME", "AGE", "TRACKED-BY", "REASON"];
const WIDE_HEADERS: [&str; 8] = [
    "KIND",
    "NAMESPACE",
    "NAME",
    "AGE",
    "TRACKED-BY",
    "REASON",
    "STATUS",
    "UID",
];

/// Renders the report: orphans (and skipped objects with `show_skipped`).
pub fn render_report(report: &OrphanReport, output: ListOutput, show_skipped: bool) -> Result<String, UserError> {
    let shown: Vec<&Classified> = report
        .classified
        .iter()
        .filter(|c| {
            matches!(c.verdict, Verdict::Orphan(_)) || (show_skipped && matches!(c.verdict, Verdict::Skipped(_)))
        })
        .collect();
    match output {
        ListOutput::Table => Ok(render::table(&HEADERS, shown.iter().map(|c| row(c, false)).collect())),
        ListOutput::Wide => Ok(render::table(
            &WIDE_HEADERS,
            shown.iter().map(|c| row(c, true)).collect(),
        )),
        ListOutput::Name => Ok(report.orphans().map(|c| c.object.id().kubectl_name() + "\n").collect()),
        ListOutput::Json => render::json(&as_json(report, show_skipped)),
        ListOutput::Yaml => render::yaml(&as_json(report, show_skipped)),
    }
}

fn reason(classified: &Classified) -> String {
    match &classified.verdict {
        Verdict::Orphan(reason) => reason.to_string(),
        Verdict::Skipped(reason) => format!("skipped: {reason}"),
        Verdict::Desired => "desired".to_string(),
    }
}

fn row(classified: &Classified, wide: bool) -> Vec<String> {
    let object = &classified.object;
    let mut cells = vec![
        object.kind.kind_with_group(),
        object.namespace().unwrap_or("").to_string(),
        object.name().to_string(),
        render::age(object.meta.creation_timestamp.as_ref()),
        tracked_by(object),
        reason(classified),
    ];
    if wide {
        cells.push(status(object));
        cells.push(object.uid().to_string());
    }
    cells
}

fn entry(classified: &Classified) -> Value {
    let object = &classified.object;
    let mut value = json!({
        "apiVersion": object.kind.api_version(),
        "kind": object.kind.kind,
        "namespace": object.namespace(),
        "name": object.name(),
        "uid": object.uid(),
        "trackedBy": tracked_by(object),
    });
    let verdict = match &classified.verdict {
        Verdict::Orphan(reason) => serde_json::to_value(reason).unwrap_or(Value::Null),
        Verdict::Skipped(reason) => serde_json::to_value(reason).unwrap_or(Value::Null),
        Verdict::Desired => Value::Null,
    };
    if let (Some(target), Value::Object(fields)) = (value.as_object_mut(), verdict) {
        target.extend(fields);
    }
    value
}

fn as_json(report: &OrphanReport, show_skipped: bool) -> Value {
    let orphans: Vec<Value> = report.orphans().map(entry).collect();
    let mut document = json!({"orphans": orphans, "uncheckedKinds": report.unchecked});
    if show_skipped {
        document["skipped"] = Value::Array(report.skipped().map(entry).collect());
    }
    render::document("OrphanReport", document)
}
