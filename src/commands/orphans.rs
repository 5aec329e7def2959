//! `kubectl stack orphans`: tracked objects that are no longer desired, each with the reason.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::classify::{classify, Classified, Desired, Recorded, SkipReason, Verdict};
use crate::cli::{DesiredArgs, GlobalArgs, ListOutput, ListTuning, OrphansArgs, SelectionArgs};
use crate::collect::{collect, Collection, Listed};
use crate::commands::list::{gaps, incomplete, status, tracked_by, warn_unlisted};
use crate::commands::{list_options, resolve_selection, selection, Session};
use crate::desired::{validate_identities, DesiredSet, Origin, Scopes};
use crate::error::{exit, is_not_found, UserError};
use crate::inventory::{self, InventoryRef};
use crate::manifest::{load_kustomize, load_paths, Manifest};
use crate::policy::is_claim_of;
use crate::render;
use crate::trackers::{Preset, Selection};

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

/// Reads `-f`/`-k` manifests (before any request, so a bad manifest stops everything): a
/// manifest that does not parse, or names an object the API server would reject, is refused.
pub fn read_manifests(args: &DesiredArgs) -> Result<Option<Vec<Manifest>>, UserError> {
    if args.filenames.is_empty() && args.kustomize.is_empty() {
        return Ok(None);
    }
    let mut manifests = load_paths(&args.filenames)?;
    for dir in &args.kustomize {
        manifests.extend(load_kustomize(dir)?);
    }
    validate_identities(&manifests)?;
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
    selection.tracked_only = !desired_args.untracked;
    if let Some(tracker) = selection.tracker.as_mut() {
        tracker.default_namespace(&session.connection.namespace);
    }
    refuse_checksum(desired_args)?;
    let manifests = manifests.map(|manifests| {
        let scopes = Scopes::new(Some(&session.catalog), &manifests);
        let set = DesiredSet::from_manifests(&manifests, &scopes, &session.connection.namespace, Origin::Manifests);
        report_resolution(&set);
        set
    });
    let mut recorded = None;
    if let Some(reference) = &desired_args.inventory {
        let loaded = inventory::load(&InventoryRef::parse(reference)?, session).await?;
        if selection.tracker.is_none() && selection.user_selector.is_none() {
            selection.tracker = Some(loaded.tracker);
        }
        recorded = Some(loaded.recorded);
    }
    if manifests.is_none() && recorded.is_none() {
        return Err(UserError::usage(
            "say what is desired: -f PATH, -k DIR or --inventory PRESET=REF",
        ));
    }
    if selection.tracker.is_none() && selection.user_selector.is_none() {
        return Err(
            UserError::usage("say which stack: -l SELECTOR or --tracker PRESET[=VALUE]")
                .hint("without one, every stack's objects would be compared with this one desired set"),
        );
    }
    // Before an ApplySet parent's name becomes its id: the record is read from the parent.
    if recorded.is_none() && manifests.is_some() {
        recorded = tracker_record(&selection, session).await?;
    }
    resolve_selection(&mut selection, session)?;
    if manifests.is_none() {
        tracing::warn!(
            "an inventory alone is what the tool applied last: nothing in it is an orphan, and the tool never deletes what it did not record; give the new desired set with -f/-k to see what it would prune"
        );
    }
    let desired = Desired {
        manifests,
        recorded,
        tracker: selection.tracker.clone(),
    };
    refuse_empty(&desired, desired_args.allow_empty)?;
    refuse_unresolved(&desired, desired_args.allow_unresolved)?;
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
    let mut classified = classify(&collection.objects, &desired);
    spare_derived(&mut classified, session).await;
    Ok(OrphanReport {
        classified,
        collection,
        unchecked,
    })
}

/// The record of the stack `--tracker` names (Flux inventory, Helm release, kpt inventory), read
/// so that the orphans are the tool's own diff; without one, its labels alone decide, and the
/// user is told.
async fn tracker_record(selection: &Selection, session: &Session) -> Result<Option<Recorded>, UserError> {
    let Some(tracker) = selection.tracker.as_ref() else {
        return Ok(None);
    };
    if let Some(found) = inventory::load_for_tracker(tracker, session).await? {
        tracing::info!("comparing with {}", found.recorded.name());
        return Ok(Some(found.recorded));
    }
    if matches!(
        tracker.preset,
        Preset::Flux | Preset::Helm | Preset::Kpt | Preset::ApplySet
    ) {
        tracing::warn!(
            "no {} record read for {}: falling back to its labels and annotations (name the stack, e.g. --tracker {}=NAME, to compare with what the tool recorded)",
            tracker.preset.name(),
            selection.describe(),
            tracker.preset.name()
        );
    }
    Ok(None)
}

/// `--checksum` took one stack checksum as "current" and condemned everything else. Flux v1's
/// checksums are per object: a mismatch means "not updated, skip", and only objects absent from
/// git are deleted (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go` `collectGarbage`).
fn refuse_checksum(args: &DesiredArgs) -> Result<(), UserError> {
    if args.checksum.is_none() {
        return Ok(());
    }
    Err(UserError::usage(
        "--checksum is not a desired set: Flux v1 deletes only objects absent from git, and a checksum that differs means \"not updated\", never \"delete\"",
    )
    .hint("give the repository with -f (and the sync set with --tracker flux-v1=SYNC-SET)"))
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
    let empty = match (&desired.manifests, &desired.recorded) {
        (Some(set), _) => set.is_empty(),
        (None, Some(recorded)) => recorded.is_empty(),
        (None, None) => true,
    };
    if empty && !allow_empty {
        return Err(
            UserError::refused("the desired set is empty: every tracked object would be an orphan")
                .hint("check the path or inventory; pass --allow-empty if the whole stack really is gone"),
        );
    }
    Ok(())
}

/// A desired set with entries the cluster cannot resolve (a kind not served yet, a typo in
/// `apiVersion`) is incomplete: the objects those entries stand for would look like orphans.
fn refuse_unresolved(desired: &Desired, allow_unresolved: bool) -> Result<(), UserError> {
    let Some(set) = desired.manifests.as_ref() else {
        return Ok(());
    };
    if set.unresolved.is_empty() || allow_unresolved {
        return Ok(());
    }
    Err(UserError::refused(format!(
        "the desired set is incomplete: {} declared object(s) cannot be resolved by the cluster ({}); the objects they stand for would look like orphans",
        set.unresolved.len(),
        set.unresolved.join("; ")
    ))
    .hint("install their CRDs first or fix apiVersion/kind; pass --allow-unresolved to compare anyway"))
}

/// Objects a controller derives from a tracked object without an ownerReference, which carry
/// its labels: a Service's Endpoints (the endpoints controller copies the Service's labels) and
/// EndpointSlices, a StatefulSet's claims (the StatefulSet controller copies its selector
/// labels onto each `volumeClaimTemplates` claim). They go with their source, never as orphans;
/// when the source cannot be checked they are spared too.
async fn spare_derived(classified: &mut [Classified], session: &Session) {
    let mut claim_templates: HashMap<String, ClaimTemplates> = HashMap::new();
    for entry in classified.iter_mut() {
        if !matches!(entry.verdict, Verdict::Orphan(_)) {
            continue;
        }
        let object = &entry.object;
        let source = match (object.kind.group.as_str(), object.kind.kind.as_str()) {
            ("", "Endpoints") => endpoints_source(object, session).await,
            ("discovery.k8s.io", "EndpointSlice") => object
                .meta
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
                .map(|service| format!("Service/{service}")),
            ("", "PersistentVolumeClaim") => {
                let namespace = object.namespace().unwrap_or_default().to_string();
                if !claim_templates.contains_key(&namespace) {
                    let sets = stateful_sets(session, &namespace).await;
                    claim_templates.insert(namespace.clone(), sets);
                }
                claim_templates
                    .get(&namespace)
                    .and_then(|sets| claim_source(object.name(), sets))
            }
            _ => None,
        };
        if let Some(source) = source {
            entry.verdict = Verdict::Skipped(SkipReason::Derived { source });
        }
    }
}

async fn endpoints_source(object: &Listed, session: &Session) -> Option<String> {
    let services = session.catalog.get("", "Service")?;
    let api = crate::collect::api_for(&session.connection.client, services, object.namespace());
    let service = format!("Service/{}", object.name());
    match api.get_metadata(object.name()).await {
        Ok(_) => Some(service),
        Err(err) if is_not_found(&err) => None,
        Err(err) => Some(format!("{service} (could not be checked: {err})")),
    }
}

/// The StatefulSets of a namespace, each with its claim template names, or why they could not
/// be listed.
type ClaimTemplates = Result<Vec<(String, Vec<String>)>, String>;

/// The StatefulSets of a namespace with their claim template names.
async fn stateful_sets(session: &Session, namespace: &str) -> ClaimTemplates {
    let Some(kind) = session.catalog.get("apps", "StatefulSet") else {
        return Ok(Vec::new());
    };
    let sets = crate::collect::list_objects(&session.connection.client, kind, Some(namespace), None)
        .await
        .map_err(|err| err.to_string())?;
    Ok(sets
        .into_iter()
        .map(|set| {
            let templates = set
                .data
                .pointer("/spec/volumeClaimTemplates")
                .and_then(Value::as_array)
                .map(|templates| {
                    templates
                        .iter()
                        .filter_map(|t| t.pointer("/metadata/name").and_then(Value::as_str))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            (set.metadata.name.unwrap_or_default(), templates)
        })
        .collect())
}

fn claim_source(claim: &str, sets: &ClaimTemplates) -> Option<String> {
    match sets {
        Ok(sets) => sets
            .iter()
            .find(|(set, templates)| is_claim_of(claim, set, templates))
            .map(|(set, _)| format!("StatefulSet/{set}")),
        Err(err) => Some(format!("a StatefulSet (could not be checked: {err})")),
    }
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
