//! Finding orphans: the use-case `orphans` and `prune` share. The desired set (`-f`/`-k`
//! manifests, resolved through discovery, in the namespace the stack's tool would give them),
//! the tool's record (`--inventory`, or the one the `--tracker` names), the listing, then each
//! tracked object judged by the rules of the tool that tracks it ([`crate::stack::classify`],
//! [`crate::stack::policy`]), with the objects a controller derives spared.

use std::collections::HashMap;

use serde_json::Value;

use crate::cluster::collect::{collect, Collection, ListOptions, ListScope, Listed};
use crate::stack::classify::{classify_owned, verdict, Classified, Desired, Recorded, Verdict};
use crate::stack::kapp_versions::LiveVersions;
use crate::stack::keep::{ComparedStack, KeepReason};
// Until `warn_unlisted` and the session have their library homes (issue 12, helper `arch`).
use crate::cluster::session::{resolve_selection, Session};
use crate::error::{is_not_found, UserError};
use crate::model::trackers::{marks, Mark, MarkValue, Preset, Selection, Tracker};
use crate::stack::desired::{validate_identities, DesiredSet, Needs, Origin, Scopes};
use crate::stack::inventory::{self, InventoryRef, Placement, Placements, StackRecord};
use crate::stack::listing::warn_unlisted;
use crate::stack::manifest::{load_kustomize, load_paths, Manifest, Reading};
use crate::stack::policy::is_claim_of;

mod pending;
pub use pending::PendingManifests;

/// What `orphans` found: every tracked object with its verdict, and what could not be checked.
pub struct OrphanReport {
    /// Every tracked object and its verdict.
    pub classified: Vec<Classified>,
    /// The listing, for its failures.
    pub collection: Collection,
    /// Kinds that could not be checked (`Kind.group`), with why.
    pub unchecked: Vec<String>,
    /// A digest of what the orphans were judged against (see [`DesiredDigest`]): a saved plan
    /// records it, and `--plan` refuses to run it against another desired set.
    pub desired_digest: String,
    /// What selected the objects, for messages (e.g. `-l app=web`).
    pub selection: String,
    /// Where the objects were listed, for messages (e.g. `in namespace default`).
    pub scope: String,
    /// The tracker the user named (`--tracker`, its namespace defaulted): its tool's rules apply
    /// when the orphans are planned and re-checked, as when they were classified.
    pub tracker: Option<Tracker>,
    /// What the objects of the desired sets the orphans were judged against need (kpt prunes
    /// none of it: [`crate::stack::keep::kpt_needed`]), for the plan and its re-check.
    pub needs: Needs,
    /// How each stack whose objects were judged placed and named its manifests (see
    /// [`Placement`]), by its mark: the re-check before each wave reads each again.
    pub placements: Placements,
    /// The tracked objects outside the selection, every namespace, when the one listing of
    /// [`find_with_bystanders`] found them with the selection; `None`: the plan lists them.
    pub bystanders: Option<crate::prune::bystanders::Listing>,
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

/// Where manifests are read from (`-f`/`-k`).
#[derive(Debug, Clone, Default)]
pub struct ManifestSources {
    /// Files and directories (recursively), or `-` for stdin.
    pub filenames: Vec<std::path::PathBuf>,
    /// Kustomization directories, rendered as Flux renders them.
    pub kustomize: Vec<std::path::PathBuf>,
}

/// What the desired set is and how strictly it is compared (built from the flags in
/// `cli::mapping`, the only place that knows both).
#[derive(Debug, Clone, Default)]
pub struct DesiredOptions {
    /// A tool's live record of what it applied last (`--inventory PRESET=REF`).
    pub inventory: Option<String>,
    /// A Flux v1 checksum: refused (it never means "delete").
    pub checksum: Option<String>,
    /// Accept an empty desired set.
    pub allow_empty: bool,
    /// Compare although some declared objects cannot be resolved.
    pub allow_unresolved: bool,
    /// With `-l` and no tracker, objects no tool tracks may be orphans too.
    pub untracked: bool,
    /// The desired set is what the stack's tool built: its names are the tool's own.
    pub as_built: bool,
    /// How the desired paths were built ([`crate::stack::manifest::BuildFacts`]).
    pub build_facts: crate::stack::manifest::BuildFacts,
}

/// Reads `-f`/`-k` manifests (a bad manifest stops everything, whatever else fails: `graph`
/// reads them before any request, `orphans` and `prune` beside their requests through
/// [`PendingManifests`]): a manifest that does not parse, or names an object the API server would reject, is refused;
/// for a desired set, so is any file that cannot be read as objects (see [`Reading`]).
pub fn read_manifests(args: &ManifestSources, reading: Reading) -> Result<Option<Vec<Manifest>>, UserError> {
    if args.filenames.is_empty() && args.kustomize.is_empty() {
        return Ok(None);
    }
    let mut manifests = load_paths(&args.filenames, reading)?;
    for dir in &args.kustomize {
        manifests.extend(load_kustomize(dir)?);
    }
    if reading == Reading::Desired {
        // Those `load_paths` read are slim already; kustomize's output is slimmed here.
        manifests.iter_mut().for_each(Manifest::slim);
    }
    validate_identities(&manifests)?;
    Ok(Some(manifests))
}

/// Finds the orphans: the shared core of `orphans` and `prune`. `selection` is what `-l` and
/// `--tracker` select, `manifests` the `-f`/`-k` manifests being read ([`PendingManifests`]),
/// `options` how to list.
pub async fn find(
    session: &Session,
    selection: Selection,
    desired_args: &DesiredOptions,
    manifests: PendingManifests,
    options: ListOptions,
) -> Result<OrphanReport, UserError> {
    find_inner(session, selection, desired_args, manifests, options, false).await
}

/// [`find`] for a prune, which plans over the bystanders too ([`crate::prune::bystanders`]): where
/// one listing serves both (every namespace, a selection the client tells apart by itself),
/// the bystanders are kept from it ([`OrphanReport::bystanders`]) rather than listed again.
pub async fn find_with_bystanders(
    session: &Session,
    selection: Selection,
    desired_args: &DesiredOptions,
    manifests: PendingManifests,
    options: ListOptions,
) -> Result<OrphanReport, UserError> {
    find_inner(session, selection, desired_args, manifests, options, true).await
}

async fn find_inner(
    session: &Session,
    mut selection: Selection,
    desired_args: &DesiredOptions,
    mut pending: PendingManifests,
    options: ListOptions,
    with_bystanders: bool,
) -> Result<OrphanReport, UserError> {
    let mut placements = Placements::new();
    let given = pending.given();
    let stack = pending
        .beside(stack_of(session, &mut selection, desired_args, given))
        .await?;
    // The manifests are read and resolved while the cluster is listed; a refused desired set
    // ends the listing at once.
    let resolving = async {
        let manifests = pending.manifests().await?;
        let desired = desired_from(
            session,
            &selection,
            desired_args,
            stack,
            manifests.as_deref(),
            &mut placements,
        )
        .await?;
        Ok::<_, UserError>((desired, manifests))
    };
    let listing = async { Ok(list_compared(session, &selection, options, with_bystanders).await) };
    let ((mut desired, manifests), (mut collection, bystanders)) = futures::try_join!(resolving, listing)?;
    desired.live_versions = std::sync::Arc::new(LiveVersions::of(&collection.objects));
    warn_unlisted(&collection, session)?;
    if desired.recorded.is_none() && manifests.is_some() {
        refuse_missing_stack(&selection, &collection, session).await?;
    }
    if manifests.is_some() && judged_by_labels(&desired) {
        refuse_several_stacks(&collection.objects, &selection)?;
    }
    let unchecked = unchecked_kinds(&collection, session);
    warn_unchecked(&unchecked);
    let mut digest = DesiredDigest::of(&desired);
    let mut needs = desired
        .manifests
        .as_ref()
        .map(|set| set.needs.clone())
        .unwrap_or_default();
    // Moved into the verdicts: the report holds each listed object once.
    let objects = std::mem::take(&mut collection.objects);
    let mut classified = match manifests.as_deref() {
        Some(manifests) if judged_by_labels(&desired) => {
            let judged = Judged {
                base: &desired,
                manifests,
                as_built: desired_args.as_built,
                build_facts: &desired_args.build_facts,
            };
            classify_by_recorded_stack(objects, &judged, session, (&mut digest, &mut needs, &mut placements)).await
        }
        _ => classify_owned(objects, &desired),
    };
    spare_derived(&mut classified, session).await;
    digest.add_placements(&placements);
    // Compared: the manifests' memory, freed on the thread that read them, goes back for good.
    drop((manifests, desired));
    crate::return_free_pages();
    Ok(OrphanReport {
        classified,
        collection,
        unchecked,
        desired_digest: digest.finish(),
        selection: selection.describe(),
        scope: scope_words(&session.scope),
        tracker: selection.tracker.clone(),
        needs,
        placements,
        bystanders,
    })
}

/// Says which kinds were not checked ([`unchecked_kinds`]), if any.
fn warn_unchecked(unchecked: &[String]) {
    if !unchecked.is_empty() {
        tracing::warn!(
            "not checked (no object of these kinds is called an orphan): {}",
            unchecked.join(", ")
        );
    }
}

/// The stack's record a run compares with, read once, and the selection completed by it, after
/// the refusals that need no manifest (a checksum, an unnamed or renamed stack): what the
/// listing waits for. `has_manifests`: whether `-f`/`-k` were given.
async fn stack_of(
    session: &Session,
    selection: &mut Selection,
    desired_args: &DesiredOptions,
    has_manifests: bool,
) -> Result<StackRecord, UserError> {
    selection.tracked_only = !desired_args.untracked;
    if let Some(tracker) = selection.tracker.as_mut() {
        tracker.default_namespace(&session.connection.namespace);
    }
    refuse_checksum(desired_args)?;
    let mut stack = named_record(desired_args, selection, session).await?;
    refuse_unnamed(has_manifests, &stack, selection)?;
    // Before an ApplySet parent's name becomes its id: the record is read from the parent.
    if stack.recorded.is_none() && has_manifests {
        stack = tracker_record(selection, session).await?;
    }
    let facts = has_manifests.then_some(&desired_args.build_facts);
    inventory::refuse_renamed(&stack, facts, desired_args.as_built)?;
    resolve_selection(selection, session)?;
    Ok(stack)
}

/// The desired set a run compares with: the manifests resolved against the stack's record
/// ([`stack_of`]), after every refusal of a set that cannot be compared (objects outside the
/// scope, an empty or unresolved set, one its tool would refuse).
async fn desired_from(
    session: &Session,
    selection: &Selection,
    desired_args: &DesiredOptions,
    stack: StackRecord,
    manifests: Option<&[Manifest]>,
    placements: &mut Placements,
) -> Result<Desired, UserError> {
    let resolved = manifests.map(|manifests| {
        let set = resolve_manifests(manifests, session, &stack);
        report_resolution(&set);
        set
    });
    let preset = selection.tracker.as_ref().map(|tracker| tracker.preset);
    if let Some(set) = &resolved {
        let gone = gone_dependencies(session, preset, set).await;
        if let Some(why) = unreadable_by_its_tool(preset, set, stack.recorded.as_ref(), &gone) {
            return Err(UserError::refused(why)
                .hint("change the desired set so that its tool can apply it, or compare without what it refuses"));
        }
    }
    if manifests.is_none() {
        tracing::warn!(
            "an inventory alone is what the tool applied last: nothing in it is an orphan, and the tool never deletes what it did not record; give the new desired set with -f/-k to see what it would prune"
        );
    }
    let compared = compared_stack(selection.tracker.as_ref(), &stack);
    if let Some(compared) = &compared {
        let placement = match desired_args.inventory.is_some() {
            // Read by the tracker's mark, as the re-check reads it (an inventory named by
            // reference is read through another door).
            true => record_placement(compared, session).await,
            false => Some(stack.placement()),
        };
        if let Some(placement) = placement {
            place(placements, compared, placement);
        }
    }
    let desired = Desired {
        manifests: resolved,
        stack: compared,
        recorded: stack.recorded,
        tracker: selection.tracker.clone(),
        live_versions: Default::default(),
    };
    warn_outside_scope(&session.scope, &desired, stack.target_namespace.as_deref());
    refuse_unplaced(&desired)?;
    refuse_empty(&desired, desired_args.allow_empty)?;
    refuse_unresolved(&desired, desired_args.allow_unresolved)?;
    Ok(desired)
}

/// The objects the desired set is compared with, and the bystanders from the same listing
/// where one serves both ([`crate::prune::bystanders::one_listing_serves`]).
async fn list_compared(
    session: &Session,
    selection: &Selection,
    options: ListOptions,
    with_bystanders: bool,
) -> (Collection, Option<crate::prune::bystanders::Listing>) {
    if with_bystanders && crate::prune::bystanders::one_listing_serves(session, selection) {
        let (collection, bystanders) = crate::prune::bystanders::collect_with(session, selection, options).await;
        return (collection, Some(bystanders));
    }
    let collection = collect(
        &session.connection.client,
        &session.catalog,
        &session.scope,
        selection,
        options,
    )
    .await;
    (collection, None)
}

/// Where objects were listed, in words: `in every namespace`, or `in namespace NS (and
/// cluster-scoped objects)`.
pub fn scope_words(scope: &ListScope) -> String {
    match scope {
        ListScope::AllNamespaces => "in every namespace".to_string(),
        ListScope::Namespace(namespace) => format!("in namespace {namespace} (and cluster-scoped objects)"),
    }
}

/// Without `-A`, only one namespace is listed: the namespaces that the stack's record, its
/// target namespace or the desired set name besides it are warned about, as their objects are
/// neither listed nor judged (issue 27: "No orphans among 1 tracked objects" while the orphan
/// sat in the namespace the record names).
fn warn_outside_scope(scope: &ListScope, desired: &Desired, target: Option<&str>) {
    let ListScope::Namespace(checked) = scope else {
        return;
    };
    let outside = |namespaces: &mut dyn Iterator<Item = &str>| -> Vec<String> {
        let set: std::collections::BTreeSet<&str> = namespaces.filter(|ns| *ns != checked).collect();
        set.into_iter().map(String::from).collect()
    };
    let hint = |namespaces: &[String]| {
        format!(
            "they were not checked (only namespace {checked} was): add -A, or -n {}",
            namespaces[0]
        )
    };
    let (record, mut in_record) = match &desired.recorded {
        Some(Recorded::Ids { ids, inventory, .. }) => (
            inventory.clone(),
            outside(&mut ids.iter().filter_map(|id| id.namespace.as_deref())),
        ),
        Some(Recorded::ApplySet {
            namespaces, inventory, ..
        }) => (inventory.clone(), outside(&mut namespaces.iter().map(String::as_str))),
        Some(Recorded::NoInventory { .. }) | None => (String::new(), Vec::new()),
    };
    if let Some(target) = target.filter(|t| *t != checked.as_str()) {
        if !in_record.iter().any(|ns| ns == target) {
            in_record.push(target.to_string());
        }
    }
    if !in_record.is_empty() {
        let whose = if record.is_empty() {
            "the stack's targetNamespace".to_string()
        } else {
            format!("the record of {record}")
        };
        tracing::warn!(
            "{whose} names objects in namespace(s) {}: {}",
            in_record.join(", "),
            hint(&in_record)
        );
    }
    let in_manifests = desired.manifests.as_ref().map_or_else(Vec::new, |set| {
        outside(&mut set.ids.iter().filter_map(|id| id.namespace.as_deref()))
    });
    let new: Vec<String> = in_manifests.into_iter().filter(|ns| !in_record.contains(ns)).collect();
    if !new.is_empty() {
        tracing::warn!(
            "the desired set (-f/-k) names objects in namespace(s) {}: {}",
            new.join(", "),
            hint(&new)
        );
    }
}

/// The record `--inventory` names; its stack is the selection when `-l`/`--tracker` name none.
async fn named_record(
    desired_args: &DesiredOptions,
    selection: &mut Selection,
    session: &Session,
) -> Result<StackRecord, UserError> {
    let Some(reference) = &desired_args.inventory else {
        return Ok(StackRecord::default());
    };
    let (tracker, loaded) = inventory::load_stack(&InventoryRef::parse(reference)?, session).await?;
    if let Some(Recorded::NoInventory { stack, why }) = &loaded.recorded {
        tracing::warn!("{stack} {why}: nothing it records is an orphan");
    }
    if selection.tracker.is_none() && selection.user_selector.is_none() {
        selection.tracker = Some(tracker);
    }
    Ok(loaded)
}

/// Usage errors: nothing desired, or no stack named.
fn refuse_unnamed(has_manifests: bool, stack: &StackRecord, selection: &Selection) -> Result<(), UserError> {
    if !has_manifests && stack.recorded.is_none() {
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
    Ok(())
}

/// One desired set describes one stack: under `-l` or a bare `--tracker PRESET`, a selection
/// whose objects belong to several stacks (marks never found on one object together) would
/// compare every one of them with this one set, and call everything of the others an orphan.
/// Refused (exit 4), naming the stacks.
fn refuse_several_stacks(objects: &[Listed], selection: &Selection) -> Result<(), UserError> {
    let stacks = stacks_among(objects);
    if stacks.len() < 2 {
        return Ok(());
    }
    const SHOWN: usize = 5;
    let mut names: Vec<String> = stacks.iter().take(SHOWN).cloned().collect();
    if stacks.len() > SHOWN {
        names.push(format!("and {} more", stacks.len() - SHOWN));
    }
    Err(UserError::refused(format!(
        "{} selects the objects of {} stacks ({}): one desired set describes one stack",
        selection.describe(),
        stacks.len(),
        names.join(", ")
    ))
    .hint("name the stack whose desired set this is: --tracker PRESET=NAME (or narrow -l to its objects)"))
}

/// Whether two marks found on one object name one stack: one tool's marks of one name (an Argo
/// CD tracking id and instance label), or a Flux HelmRelease's labels and the annotations of the
/// Helm release it installs (`<name>` or `<targetNamespace>-<name>`, stored in its namespace).
/// Two different stacks' marks on one object (left by a migration) never make them one: that
/// would let one desired set be compared with both.
fn same_stack(a: &Mark, b: &Mark) -> bool {
    let namespaces_agree =
        |x: &MarkValue, y: &MarkValue| x.namespace.is_none() || y.namespace.is_none() || x.namespace == y.namespace;
    if a.preset == b.preset {
        return a.value.name == b.value.name && namespaces_agree(&a.value, &b.value);
    }
    let (helm_release, helm) = match (a.preset, b.preset) {
        (Preset::FluxHelm, Preset::Helm) => (a, b),
        (Preset::Helm, Preset::FluxHelm) => (b, a),
        _ => return false,
    };
    let name = &helm_release.value.name;
    // helm-controller installs into `spec.targetNamespace` as release `<targetNamespace>-<name>`:
    // the Helm mark then names the target namespace, not the HelmRelease's.
    let in_target = helm
        .value
        .namespace
        .as_ref()
        .is_some_and(|target| helm.value.name == format!("{target}-{name}"));
    in_target
        || (helm.value.namespace == helm_release.value.namespace
            && (helm.value.name == *name || helm.value.name.ends_with(&format!("-{name}"))))
}

/// The stacks the objects belong to, each named by one of its marks: marks of one stack that
/// occur on one object together (see [`same_stack`]) are one.
fn stacks_among(objects: &[Listed]) -> Vec<String> {
    let mut stack_of: HashMap<String, usize> = HashMap::new();
    let mut parent: Vec<usize> = Vec::new();
    fn root(parent: &mut [usize], mut at: usize) -> usize {
        while parent[at] != at {
            parent[at] = parent[parent[at]];
            at = parent[at];
        }
        at
    }
    // An object marked by name only (no namespace) is never judged (ambiguous): its mark names
    // no one stack.
    for object in objects
        .iter()
        .filter(|o| crate::stack::keep::ambiguous_mark(&o.meta, None).is_none())
    {
        let found = marks(&object.meta);
        let keys: Vec<usize> = found
            .iter()
            .map(|mark| {
                let next = parent.len();
                let key = *stack_of.entry(mark.to_string()).or_insert(next);
                if key == next {
                    parent.push(next);
                }
                key
            })
            .collect();
        for (i, j) in (0..found.len()).flat_map(|i| (i + 1..found.len()).map(move |j| (i, j))) {
            if same_stack(&found[i], &found[j]) {
                let (a, b) = (root(&mut parent, keys[i]), root(&mut parent, keys[j]));
                parent[a] = b;
            }
        }
    }
    let mut named: std::collections::BTreeMap<usize, String> = std::collections::BTreeMap::new();
    for (mark, key) in &stack_of {
        let top = root(&mut parent, *key);
        let entry = named.entry(top).or_insert_with(|| mark.clone());
        if mark < entry {
            *entry = mark.clone();
        }
    }
    let mut stacks: Vec<String> = named.into_values().collect();
    stacks.sort();
    stacks
}

/// The record of the stack `--tracker` names (Flux inventory, Helm release, kpt inventory), read
/// so that the orphans are the tool's own diff, and a Flux Kustomization's target namespace;
/// without a record, its labels alone decide, and the user is told.
pub async fn tracker_record(selection: &Selection, session: &Session) -> Result<StackRecord, UserError> {
    let Some(tracker) = selection.tracker.as_ref() else {
        return Ok(StackRecord::default());
    };
    let found = inventory::load_for_tracker(tracker, session).await?;
    if let Some(target) = &found.target_namespace {
        tracing::info!(
            "namespaced manifests are compared in {target}, the Kustomization's targetNamespace (as kustomize-controller applies them)"
        );
    }
    match &found.recorded {
        Some(Recorded::NoInventory { stack, why }) if !names_flux_stack(selection) => {
            tracing::warn!(
                "{stack} {why}: nothing it marks is an orphan (its labels do not take over); delete its leftovers by name, or apply the stack again with its tool to give it a record"
            );
            return Ok(found);
        }
        Some(recorded) => {
            tracing::info!("comparing with {}", recorded.name());
            return Ok(found);
        }
        None => {}
    }
    // A named Flux stack without a record is reported once its objects are listed
    // ([`refuse_missing_stack`]): not found, or judged by its labels.
    if has_record(tracker.preset) && !names_flux_stack(selection) {
        tracing::warn!(
            "no {} record read for {}: falling back to its labels and annotations (name the stack, e.g. --tracker {}=NAME, to compare with what the tool recorded)",
            tracker.preset.name(),
            selection.describe(),
            tracker.preset.name()
        );
    }
    Ok(found)
}

/// Whether `--tracker` names one Flux Kustomization or HelmRelease (`flux=NAME[.NS]`).
fn names_flux_stack(selection: &Selection) -> bool {
    selection
        .tracker
        .as_ref()
        .is_some_and(|t| t.value.is_some() && t.preset.flux_kind().is_some())
}

/// A Flux stack `--tracker` names whose record was not read: when its Kustomization (or
/// HelmRelease) does not exist and no object carries its mark in scope, it is not found (exit 3,
/// as with `--inventory`), never "no orphans among 0 tracked objects"; when objects still carry
/// its mark, they are judged by their labels, and the user is told why.
async fn refuse_missing_stack(
    selection: &Selection,
    collection: &Collection,
    session: &Session,
) -> Result<(), UserError> {
    let Some(tracker) = selection.tracker.as_ref().filter(|_| names_flux_stack(selection)) else {
        return Ok(());
    };
    let (Some((group, kind)), Some(value)) = (tracker.preset.flux_kind(), tracker.value.as_ref()) else {
        return Ok(());
    };
    let namespace = value
        .namespace
        .clone()
        .unwrap_or_else(|| session.connection.namespace.clone());
    let stack = format!("{kind} {namespace}/{}", value.name);
    let (state, missing) = match session.catalog.get(group, kind) {
        None => (format!("{stack} not found (the cluster does not serve {kind}s)"), true),
        Some(info) => {
            let api = crate::cluster::collect::api_for(&session.connection.client, info, Some(&namespace));
            match crate::cluster::retry::with_retries("get", || api.get_metadata_opt(&value.name)).await {
                Ok(None) => (format!("{stack} not found"), true),
                Ok(Some(_)) if kind == "Kustomization" => (format!("{stack} has no status.inventory"), false),
                Ok(Some(_)) => (format!("{stack} has no Helm release to read"), false),
                Err(err) => (
                    format!(
                        "{stack} could not be read ({})",
                        session.connection.explain(&err).message
                    ),
                    false,
                ),
            }
        }
    };
    let found = collection.objects.len();
    if missing && found == 0 {
        return Err(UserError::failed(state).hint(format!(
            "check the name and namespace (`kubectl get {}s -A`); NAME.NAMESPACE names another namespace, e.g. --tracker {}={}.flux-system",
            kind.to_lowercase(),
            tracker.preset.name(),
            value.name
        )));
    }
    tracing::warn!(
        "{state}: the {found} object(s) that carry its mark in scope are judged by their labels and annotations"
    );
    Ok(())
}

/// Whether the preset's tool keeps a record of what it applied that bounds what it prunes.
pub(crate) fn has_record(preset: Preset) -> bool {
    matches!(
        preset,
        Preset::Flux | Preset::FluxHelm | Preset::Helm | Preset::Kpt | Preset::ApplySet
    )
}

/// Resolves the manifests through discovery: a namespaced manifest takes the stack's target
/// namespace when its tool forces one (Flux `spec.targetNamespace`), else its own, else the
/// stack's default (a Helm release's namespace), else `-n` or the context's namespace.
fn resolve_manifests(manifests: &[Manifest], session: &Session, stack: &StackRecord) -> DesiredSet {
    let scopes = Scopes::new(Some(&session.catalog), manifests);
    let rule = stack.namespace_rule(&session.connection.namespace);
    let mut set = DesiredSet::resolved(manifests, &scopes, rule, Origin::Manifests);
    if let Some(namespace) = &stack.record_namespace {
        set.needs.add_namespace(namespace);
    }
    if let Some((app, used)) = &stack.kapp_kinds {
        let written = manifests.iter().map(|m| {
            (
                crate::stack::manifest::group_of(&m.api_version).to_string(),
                m.kind.clone(),
            )
        });
        set.needs.scope_kapp(app, used, written);
    }
    set.needs.note_shared_versions(session.catalog.served_versions());
    if let Some((app, filter)) = &stack.argo_filter {
        set.needs.scope_argo(app, filter);
    }
    set
}

/// Whether no record was read and no single stack named: `-l` alone (or a `--tracker` preset
/// without a value), where each object must be judged by the record of the stack that marks it.
fn judged_by_labels(desired: &Desired) -> bool {
    desired.recorded.is_none() && desired.tracker.as_ref().is_none_or(|tracker| tracker.value.is_none())
}

/// The stacks whose record bounds what their tool prunes that an object's marks name: a Flux
/// Kustomization or HelmRelease, a Helm release (each with its namespace: a mark without one is
/// ambiguous and judged elsewhere), a cli-utils/kpt inventory, an ApplySet; and an Argo CD
/// Application or a kapp app, whose destination or app-record namespace places the manifests
/// written without one (`inventory::record_of`).
fn recorded_stacks_of(object: &Listed) -> Vec<(Preset, MarkValue)> {
    let named_whole = |preset: Preset| matches!(preset, Preset::Kpt | Preset::ApplySet | Preset::ArgoCd | Preset::Kapp);
    let places = |preset: Preset| matches!(preset, Preset::ArgoCd | Preset::Kapp);
    marks(&object.meta)
        .into_iter()
        .filter(|mark| has_record(mark.preset) || places(mark.preset))
        .filter(|mark| mark.value.namespace.is_some() || named_whole(mark.preset))
        .map(|mark| (mark.preset, mark.value))
        .collect()
}

/// How the objects of one stack are judged: by its record and namespace rule, or, when it
/// cannot be read, not at all (why).
type StackJudgement = Result<Desired, Unjudged>;

/// Why the objects of a stack are not judged by its record (they are unknown, never orphans).
#[derive(Debug, thiserror::Error)]
enum Unjudged {
    /// Its record could not be read, or its tool would prune nothing of it now.
    #[error(transparent)]
    Record(UserError),
    /// Manifests of it could not be placed in a namespace.
    #[error("{0}")]
    Unplaced(String),
}

/// `-l` alone (or a `--tracker` preset without a value): an object is judged as `--tracker
/// PRESET=ITS-STACK` judges it, by the record of every stack its marks name (Flux
/// `status.inventory` and `spec.targetNamespace`, a Helm release and its namespace, a Flux
/// HelmRelease's Helm release, a cli-utils/kpt inventory, an ApplySet parent): only what that
/// record holds and the new desired set lacks is an orphan. A stack that keeps no record leaves
/// its labels to decide (as `--tracker` does); one whose record cannot be read makes its
/// objects unknown, never orphans. An object marked by several such stacks is an orphan only
/// when each of them would prune it. Objects no such stack marks are judged by `base`.
/// What each stack's objects are judged against under `-l` alone: the desired set given, and
/// whether it is the tools' own build (`--as-built`).
struct Judged<'a> {
    base: &'a Desired,
    manifests: &'a [Manifest],
    as_built: bool,
    build_facts: &'a crate::stack::manifest::BuildFacts,
}

async fn classify_by_recorded_stack(
    objects: Vec<Listed>,
    judged: &Judged<'_>,
    session: &Session,
    (digest, needs, placements): (&mut DesiredDigest, &mut Needs, &mut Placements),
) -> Vec<Classified> {
    let base = judged.base;
    let mut stacks: HashMap<(Preset, MarkValue), StackJudgement> = HashMap::new();
    let mut classified = Vec::with_capacity(objects.len());
    for object in objects {
        let mut verdicts = Vec::new();
        for key in recorded_stacks_of(&object) {
            if !stacks.contains_key(&key) {
                let judgement = stack_judgement(&key.0, &key.1, judged, session, placements).await;
                if let Ok(desired) = &judgement {
                    digest.add(desired);
                    if let Some(set) = &desired.manifests {
                        needs.extend(&set.needs);
                    }
                }
                stacks.insert(key.clone(), judgement);
            }
            verdicts.push(match stacks.get(&key) {
                Some(Ok(desired)) => verdict(&object, desired),
                Some(Err(why)) => unknown_unless_desired(verdict(&object, base), &why.to_string()),
                None => verdict(&object, base),
            });
        }
        let mildest = mildest(verdicts).unwrap_or_else(|| verdict(&object, base));
        classified.push(Classified {
            object,
            verdict: mildest,
        });
    }
    classified
}

/// Of the verdicts of every stack that marks an object, the first that is not an orphan (one
/// tool keeping it keeps it), else the first.
fn mildest(verdicts: Vec<Verdict>) -> Option<Verdict> {
    let kept = verdicts
        .iter()
        .position(|v| !matches!(v, Verdict::Orphan(_)))
        .unwrap_or(0);
    verdicts.into_iter().nth(kept)
}

/// What the objects of one stack are judged against: its record, with the manifests resolved
/// in the namespaces its tool gives them.
async fn stack_judgement(
    preset: &Preset,
    value: &MarkValue,
    judged: &Judged<'_>,
    session: &Session,
    placements: &mut Placements,
) -> StackJudgement {
    let stack_name = crate::model::trackers::Mark {
        preset: *preset,
        value: value.clone(),
    }
    .to_string();
    let record = inventory::record_of(*preset, value, session).await;
    let checked = record
        .and_then(|stack| inventory::refuse_renamed(&stack, Some(judged.build_facts), judged.as_built).map(|()| stack));
    let stack = match checked {
        Ok(stack) => stack,
        Err(err) => {
            tracing::warn!("{}: its objects are not called orphans", err.message);
            return Err(Unjudged::Record(err));
        }
    };
    match &stack.recorded {
        Some(recorded) => tracing::info!("the objects {stack_name} marks are compared with {}", recorded.name()),
        None => tracing::warn!("no record read for {stack_name}: the objects it marks are compared by their labels"),
    }
    let tracker = Tracker {
        preset: *preset,
        value: Some(value.clone()),
    };
    let manifests = resolve_manifests(judged.manifests, session, &stack);
    let gone = gone_dependencies(session, Some(*preset), &manifests).await;
    if let Some(why) = unplaced_words(&manifests)
        .or_else(|| unreadable_by_its_tool(Some(*preset), &manifests, stack.recorded.as_ref(), &gone))
    {
        tracing::warn!("{stack_name}: {why}");
        return Err(Unjudged::Unplaced(why));
    }
    let compared = compared_stack(Some(&tracker), &stack);
    if let Some(compared) = &compared {
        place(placements, compared, stack.placement());
    }
    Ok(Desired {
        manifests: Some(manifests),
        stack: compared,
        recorded: stack.recorded,
        tracker: judged.base.tracker.clone(),
        live_versions: judged.base.live_versions.clone(),
    })
}

/// Keeps how `stack`'s tool placed its manifests under every mark of the compared stack (its
/// tracker's and its aliases'), for the re-check to hold against the one it reads again.
fn place(placements: &mut Placements, compared: &ComparedStack, placement: Placement) {
    let tracker = compared.tracker.value.iter().map(|value| Mark {
        preset: compared.tracker.preset,
        value: value.clone(),
    });
    for mark in tracker.chain(compared.aliases.iter().cloned()) {
        placements.insert(mark, placement.clone());
    }
}

/// How the compared stack's tool places its manifests, read by its tracker's mark with
/// [`inventory::record_of`] (as the re-check reads it); `None` when it cannot be read.
async fn record_placement(compared: &ComparedStack, session: &Session) -> Option<Placement> {
    let value = compared.tracker.value.as_ref()?;
    let stack = inventory::record_of(compared.tracker.preset, value, session).await;
    stack.ok().map(|stack| stack.placement())
}

/// The stack a desired set describes, as the keep chain asks of it: the tracker, and the Helm
/// release a Flux HelmRelease's record names and that HelmRelease (their marks are one stack's,
/// whichever of the two presets named it).
fn compared_stack(tracker: Option<&Tracker>, stack: &StackRecord) -> Option<ComparedStack> {
    let release = stack.helm_release.iter().map(|release| Mark {
        preset: Preset::Helm,
        value: release.clone(),
    });
    let owner = stack.flux_helm_release.iter().map(|owner| Mark {
        preset: Preset::FluxHelm,
        value: owner.clone(),
    });
    let aliases = release.chain(owner);
    tracker.map(|tracker| ComparedStack {
        tracker: tracker.clone(),
        aliases: aliases.collect(),
    })
}

/// What the orphans were judged against, as one sha256: every resolved desired identity and
/// the name of every record used. Two runs with the same digest compared the cluster with the
/// same desired set (in the same namespaces); a saved orphan plan keeps it so that `--plan`
/// runs only against the desired set that was reviewed.
#[derive(Debug, Default)]
pub struct DesiredDigest {
    lines: std::collections::BTreeSet<String>,
}

impl DesiredDigest {
    /// The digest of one desired set and record.
    pub fn of(desired: &Desired) -> Self {
        let mut digest = Self::default();
        digest.add(desired);
        digest
    }

    /// Adds a desired set and record (another stack's, under `-l`).
    pub fn add(&mut self, desired: &Desired) {
        if let Some(set) = &desired.manifests {
            self.lines.extend(set.ids.iter().map(|id| format!("desired {id}")));
            self.lines
                .extend(set.unresolved.iter().map(|u| format!("unresolved {u}")));
        }
        if let Some(recorded) = &desired.recorded {
            self.lines.insert(format!("record {}", recorded.name()));
        }
    }

    /// Adds how each stack placed and named its manifests (see [`Placement`]): a saved plan
    /// runs only while every stack builds them as when it was saved (membership review 19, F3).
    pub fn add_placements(&mut self, placements: &Placements) {
        self.lines.extend(
            placements
                .iter()
                .map(|(mark, placement)| format!("placement {mark} {placement:?}")),
        );
    }

    /// The sha256, as hex.
    pub fn finish(self) -> String {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        for line in &self.lines {
            hasher.update(line.as_bytes());
            hasher.update(b"\n");
        }
        hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

/// An object whose stack cannot be read: never an orphan (its tool's verdict is unknown).
fn unknown_unless_desired(verdict: Verdict, why: &str) -> Verdict {
    match verdict {
        Verdict::Orphan(_) => Verdict::Skipped(KeepReason::RecordUnreadable { why: why.to_string() }),
        other => other,
    }
}

/// `--checksum` took one stack checksum as "current" and condemned everything else. Flux v1's
/// checksums are per object: a mismatch means "not updated, skip", and only objects absent from
/// git are deleted (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go` `collectGarbage`).
fn refuse_checksum(args: &DesiredOptions) -> Result<(), UserError> {
    if args.checksum.is_none() {
        return Ok(());
    }
    Err(UserError::usage(
        "--checksum is not a desired set: Flux v1 deletes only objects absent from git, and a checksum that differs means \"not updated\", never \"delete\"",
    )
    .hint("give the repository with -f (and the sync set with --tracker flux-v1=SYNC-SET)"))
}

fn report_resolution(set: &DesiredSet) {
    for unresolved in &set.unresolved {
        tracing::warn!("{unresolved}");
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

/// A desired set with a namespaced object that has no namespace where the stack's tool gives it
/// none (a Flux Kustomization without `spec.targetNamespace`: [`crate::stack::desired::NamespaceRule::Required`]): its
/// tool's apply fails on it, and it prunes nothing. Given `-n`'s namespace it would keep an object
/// of that namespace and call the same object elsewhere an orphan; refused instead (exit 4).
fn refuse_unplaced(desired: &Desired) -> Result<(), UserError> {
    let Some(set) = desired.manifests.as_ref() else {
        return Ok(());
    };
    match (unplaced_words(set), set.unplaced.first()) {
        (Some(why), Some(first)) => Err(UserError::refused(why).hint(first.by.hint())),
        _ => Ok(()),
    }
}

/// Why the stack's tool would prune nothing of a desired set it cannot apply or build: a set
/// kustomize-controller cannot build ([`crate::stack::desired::rejects::flux_rejects`]) or whose
/// identities it cannot read back from the inventory it writes of them (its diff of the old and
/// new inventories fails on an RBAC name holding `_`, cli-utils `ParseObjMetadata`: "too many
/// fields": membership review 21, F1b); a set kpt refuses ([`crate::stack::desired::rejects::kpt_rejects`],
/// review 24).
fn unreadable_by_its_tool(
    preset: Option<Preset>,
    set: &DesiredSet,
    recorded: Option<&Recorded>,
    gone: &std::collections::HashSet<crate::model::identity::ObjectId>,
) -> Option<String> {
    match preset? {
        Preset::Flux => {
            if let Some(why) = &set.flux_rejects {
                return Some(format!(
                    "{why}: kustomize-controller cannot build the desired set, so Flux applies and prunes nothing: nothing is an orphan"
                ));
            }
            let first = set.flux_unreadable.first()?;
            Some(format!(
                "{first}: kustomize-controller cannot read its name back from the inventory it writes (a `_` outside `__`), so its diff of the inventories fails and Flux prunes nothing: nothing is an orphan"
            ))
        }
        Preset::Kpt => {
            let inventory = match recorded {
                Some(Recorded::Ids { ids, .. }) => Some(ids),
                _ => None,
            };
            // kpt drops an inventory entry whose object is gone: a dependency on it is external.
            let known = |id: &crate::model::identity::ObjectId| {
                set.ids.contains(id) || (inventory.is_some_and(|ids| ids.contains(id)) && !gone.contains(id))
            };

            crate::stack::desired::rejects::kpt_rejects(&set.kpt_dependencies, known).map(|why| {
                format!("kpt refuses the desired set ({why}): it applies nothing and prunes nothing, so nothing is an orphan")
            })
        }
        _ => None,
    }
}

/// The objects the desired set's kpt dependency annotations name, outside the set, that are gone
/// from the cluster (membership review 25, F1): kpt drops an inventory entry whose object no
/// longer exists, so a dependency on it is external. One that cannot be read is not called gone.
/// Only asked of a kpt stack.
async fn gone_dependencies(
    session: &Session,
    preset: Option<Preset>,
    set: &DesiredSet,
) -> std::collections::HashSet<crate::model::identity::ObjectId> {
    let mut gone = std::collections::HashSet::new();
    if preset != Some(Preset::Kpt) {
        return gone;
    }
    let named: std::collections::HashSet<&crate::model::identity::ObjectId> = set
        .kpt_dependencies
        .iter()
        .filter_map(|(_, named)| named.as_ref().ok())
        .flatten()
        .filter(|id| !set.ids.contains(id))
        .collect();
    for id in named {
        let Some(kind) = session.catalog.get(&id.group, &id.kind) else {
            gone.insert(id.clone());
            continue;
        };
        let api = crate::cluster::collect::api_for(&session.connection.client, kind, id.namespace.as_deref());
        if let Ok(None) =
            crate::cluster::retry::with_retries("get a dependency", || api.get_metadata_opt(&id.name)).await
        {
            gone.insert(id.clone());
        }
    }
    gone
}

/// Why a desired set cannot be applied by its stack's tool, if it has unplaced objects.
fn unplaced_words(set: &DesiredSet) -> Option<String> {
    let first = set.unplaced.first()?;
    let all: Vec<String> = set.unplaced.iter().map(ToString::to_string).collect();
    Some(first.by.why(first, &all.join("; ")))
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
    let unresolved: Vec<String> = set.unresolved.iter().map(ToString::to_string).collect();
    Err(UserError::refused(format!(
        "the desired set is incomplete: {} declared object(s) cannot be resolved by the cluster ({}); the objects they stand for would look like orphans",
        unresolved.len(),
        unresolved.join("; ")
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
            entry.verdict = Verdict::Skipped(KeepReason::Derived { source });
        }
    }
}

async fn endpoints_source(object: &Listed, session: &Session) -> Option<String> {
    let services = session.catalog.get("", "Service")?;
    let api = crate::cluster::collect::api_for(&session.connection.client, services, object.namespace());
    let service = format!("Service/{}", object.name());
    match api.get_metadata(object.name()).await {
        Ok(_) => Some(service),
        Err(err) if is_not_found(&err) => None,
        Err(err) => Some(format!("{service} (could not be checked: {err})")),
    }
}

/// The StatefulSets of a namespace, each with its claim template names, or why they could not
/// be listed.
type ClaimTemplates = Result<Vec<(String, Vec<String>)>, kube::Error>;

/// The StatefulSets of a namespace with their claim template names.
async fn stateful_sets(session: &Session, namespace: &str) -> ClaimTemplates {
    let Some(kind) = session.catalog.get("apps", "StatefulSet") else {
        return Ok(Vec::new());
    };
    let sets = crate::cluster::collect::list_objects(&session.connection.client, kind, Some(namespace), None).await?;
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

#[cfg(test)]
mod tests;
