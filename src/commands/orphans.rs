//! `kubectl stack orphans`: tracked objects that are no longer desired, each with the reason.

use serde_json::{json, Value};

use crate::classify::{classify, Classified, Desired, Verdict};
use crate::cli::{DesiredArgs, GlobalArgs, ListOutput, ListTuning, OrphansArgs, SelectionArgs};
use crate::collect::{collect, Collection};
use crate::commands::list::{gaps, incomplete, status, tracked_by, warn_unlisted};
use crate::commands::{list_options, resolve_selection, selection, Session};
use crate::desired::{DesiredSet, Origin, Scopes};
use crate::error::{exit, UserError};
use crate::inventory::{self, InventoryRef};
use crate::manifest::{load_kustomize, load_paths, Manifest};
use crate::render;

/// What `orphans` found: every tracked object with its verdict, and what could not be checked.
pub struct OrphanReport {
    /// Every tracked object and its verdict.
    pub classified: Vec<Classified>,
    /// The listing, for its failures.
    pub collection: Collection,
    /// Kinds that could not be checked (`Kind.group`), with why.
    pub unchecked: Vec<String>,
}

impl OrphanReport {
    /// The orphans.
    pub fn orphans(&self) -> impl Iterator<Item = &Classified> {
        self.classified
            .iter()
            .filter(|c| matches!(c.verdict, Verdict::Orphan(_)))
    }

    /// The skipped objects.
    pub fn skipped(&self) -> impl Iterator<Item = &Classified> {
        self.classified
            .iter()
            .filter(|c| matches!(c.verdict, Verdict::Skipped(_)))
    }
}

/// Runs `orphans`.
pub async fn run(global: &GlobalArgs, args: OrphansArgs) -> anyhow::Result<u8> {
    let manifests = read_manifests(&args.desired)?;
    let session = Session::open(global).await?;
    let report = find(&session, &args.selection, &args.desired, manifests, &args.tuning).await?;
    let shown = report.orphans().count() + if args.show_skipped { report.skipped().count() } else { 0 };
    if shown == 0 && matches!(args.output, ListOutput::Table | ListOutput::Wide) {
        eprintln!("No orphans among {} tracked objects.", report.classified.len());
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

/// Reads `-f`/`-k` manifests (before any request, so a bad manifest stops everything).
pub fn read_manifests(args: &DesiredArgs) -> Result<Option<Vec<Manifest>>, UserError> {
    if args.filenames.is_empty() && args.kustomize.is_empty() {
        return Ok(None);
    }
    let mut manifests = load_paths(&args.filenames)?;
    for dir in &args.kustomize {
        manifests.extend(load_kustomize(dir)?);
    }
    Ok(Some(manifests))
}

/// Finds the orphans: the shared core of `orphans` and `prune`.
pub async fn find(
    session: &Session,
    selection_args: &SelectionArgs,
    desired_args: &DesiredArgs,
    manifests: Option<Vec<Manifest>>,
    tuning: &ListTuning,
) -> Result<OrphanReport, UserError> {
    let mut selection = selection(selection_args)?;
    let desired = match (manifests, &desired_args.inventory, &desired_args.checksum) {
        (Some(manifests), _, _) => {
            let scopes = Scopes::new(Some(&session.catalog), &manifests);
            let set = DesiredSet::from_manifests(&manifests, &scopes, &session.connection.namespace, Origin::Manifests);
            report_resolution(&set);
            Desired::Set(set)
        }
        (None, Some(reference), _) => {
            let loaded = inventory::load(&InventoryRef::parse(reference)?, session).await?;
            if selection.tracker.is_none() && selection.user_selector.is_none() {
                selection.tracker = Some(loaded.tracker);
            }
            loaded.desired
        }
        (None, None, Some(checksum)) => Desired::Checksum(checksum.clone()),
        (None, None, None) => {
            return Err(UserError::usage(
                "say what is desired: -f PATH, -k DIR, --inventory PRESET=REF or --checksum VALUE",
            ))
        }
    };
    if selection.tracker.is_none() && selection.user_selector.is_none() {
        return Err(
            UserError::usage("say which stack: -l SELECTOR or --tracker PRESET[=VALUE]")
                .hint("without one, every stack's objects would be compared with this one desired set"),
        );
    }
    refuse_empty(&desired, desired_args.allow_empty)?;
    resolve_selection(&mut selection, session)?;
    let collection = collect(
        &session.connection.client,
        &session.catalog,
        &session.scope,
        &selection,
        list_options(tuning),
    )
    .await;
    warn_unlisted(&collection, session)?;
    let unchecked = unchecked_kinds(&collection, session);
    if !unchecked.is_empty() {
        tracing::warn!(
            "not checked (no object of these kinds is called an orphan): {}",
            unchecked.join(", ")
        );
    }
    let classified = classify(&collection.objects, &desired);
    Ok(OrphanReport {
        classified,
        collection,
        unchecked,
    })
}

fn report_resolution(set: &DesiredSet) {
    for why in &set.unresolved {
        tracing::warn!("{why}");
    }
    for note in &set.notes {
        tracing::info!("{note}");
    }
}

fn refuse_empty(desired: &Desired, allow_empty: bool) -> Result<(), UserError> {
    let empty = match desired {
        Desired::Set(set) => set.is_empty(),
        Desired::GroupKinds { kinds, .. } => kinds.is_empty(),
        Desired::Checksum(sum) => sum.is_empty(),
    };
    if empty && !allow_empty {
        return Err(
            UserError::refused("the desired set is empty: every tracked object would be an orphan")
                .hint("check the path or inventory; pass --allow-empty if the whole stack really is gone"),
        );
    }
    Ok(())
}

fn unchecked_kinds(collection: &Collection, session: &Session) -> Vec<String> {
    let mut kinds: Vec<String> = collection.failures.iter().map(|f| f.kind.kind_with_group()).collect();
    kinds.extend(
        session
            .catalog
            .failures
            .iter()
            .map(|f| format!("every kind of {}", f.group_version)),
    );
    kinds
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
    document
}
