//! Cascade victims: what the API server's own cascades would take with a Namespace or a CRD the
//! plan deletes, although the plan does not delete it. Deleting a Namespace deletes every object
//! in it; deleting a CRD deletes every custom resource of it, in every namespace. An object counts
//! unless it is planned, dies with a planned owner chain anyway, or is one the control plane makes
//! by itself (see [`crate::prune::safeguards::made_by_control_plane`]). The planner lists the content
//! of each planned Namespace and CRD once with [`contents`]; the re-check before every wave
//! lists it again with the same function and judges it with the same [`victims`].

pub mod by_name;
pub mod owners;
pub mod volumes;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::core::ObjectMeta;
use kube::Client;
use serde::Serialize;

use crate::cluster::collect::{
    collect_kinds, list_metadata_pages, Collection, KindFailure, ListFailure, ListOptions, ListQuery, ListScope, Listed,
};
use crate::cluster::discovery::{Catalog, KindInfo};
use crate::model::identity::ObjectId;
use crate::model::trackers::{describe_marks, is_tracked, Selection};
use crate::prune::safeguards::{dies_with_plan, made_by_control_plane, token_of_default_account, SERVICE_ACCOUNT_NAME};

/// One object a Namespace's or CRD's deletion would take, and why it counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Victim {
    /// The object.
    pub id: ObjectId,
    /// Its UID (a saved plan accepts exactly these objects).
    pub uid: String,
    /// Why it counts: untracked, another stack's, keep-marked.
    pub why: String,
}

/// The victims of one planned Namespace or CRD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cascade {
    /// The Namespace or CRD.
    pub holder: ObjectId,
    /// What its deletion would take beyond the plan.
    pub victims: Vec<Victim>,
    /// Kinds whose objects in it could not be listed: what they hold is unknown.
    pub unlisted: Vec<String>,
}

impl Cascade {
    /// Whether the deletion of the holder takes nothing beyond the plan, as far as is known.
    pub fn is_clean(&self) -> bool {
        self.victims.is_empty() && self.unlisted.is_empty()
    }
}

/// Whether deleting this object cascades to other objects (a Namespace or a CRD).
pub fn is_holder(id: &ObjectId) -> bool {
    matches!(
        (id.group.as_str(), id.kind.as_str()),
        ("", "Namespace") | ("apiextensions.k8s.io", "CustomResourceDefinition")
    )
}

/// Lists what a Namespace holds (every listable namespaced kind in it) or a CRD holds (its custom
/// resources in every namespace). `None` for any other object.
pub async fn contents(
    client: &Client,
    catalog: &Catalog,
    holder: &ObjectId,
    options: ListOptions,
) -> Option<Collection> {
    let (kinds, scope): (Vec<Arc<KindInfo>>, ListScope) = match (holder.group.as_str(), holder.kind.as_str()) {
        ("", "Namespace") => (
            catalog.listable().filter(|k| k.namespaced).cloned().collect(),
            ListScope::Namespace(holder.name.clone()),
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            catalog
                .kinds()
                .iter()
                .filter(|k| !k.group.is_empty() && k.crd_name() == holder.name && k.can("list"))
                .cloned()
                .collect(),
            ListScope::AllNamespaces,
        ),
        _ => return None,
    };
    let mut held = collect_kinds(client, &kinds, &scope, &Selection::everything(), options).await;
    if let ListScope::Namespace(namespace) = &scope {
        read_token_types(client, catalog, namespace, &mut held).await;
    }
    Some(held)
}

/// The `type` of a ServiceAccount token Secret, which the token controller makes and deletes
/// with its ServiceAccount.
pub const SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";

/// Proves which Secrets of `namespace` are ServiceAccount token Secrets: metadata-only lists
/// carry no `type`, so the Secrets of type [`SERVICE_ACCOUNT_TOKEN`] are listed apart (a field
/// selector the API server serves for Secrets) and their UIDs recorded in
/// [`Collection::service_account_tokens`]. A listing that fails is a failure of the Secret kind:
/// the Namespace's content is then not known (order review 7: an Opaque Secret carrying a
/// ServiceAccount's name and UID annotations is no token, and counts).
async fn read_token_types(client: &Client, catalog: &Catalog, namespace: &str, held: &mut Collection) {
    let Some(kind) = catalog.get("", "Secret").cloned() else {
        return;
    };
    let fields = format!("type={SERVICE_ACCOUNT_TOKEN}");
    let query = ListQuery {
        namespace: Some(namespace),
        fields: Some(&fields),
        ..ListQuery::default()
    };
    let mut tokens = HashSet::new();
    let take = |page: Vec<kube::core::PartialObjectMeta<kube::api::DynamicObject>>| {
        tokens.extend(page.into_iter().filter_map(|secret| secret.metadata.uid));
    };
    match list_metadata_pages(client, &kind, &query, take).await {
        Ok(()) => held.service_account_tokens.extend(tokens),
        Err(err)
            if held
                .failures
                .iter()
                .any(|f| f.kind.kind == "Secret" && f.kind.group.is_empty()) =>
        {
            tracing::debug!("cannot list the token Secrets of {namespace}: {err}");
        }
        Err(err) => held.failures.push(KindFailure {
            failure: match crate::error::is_forbidden(&err) {
                true => ListFailure::Forbidden,
                false => ListFailure::Error(crate::error::api_status(&err), crate::error::root_cause(&err)),
            },
            kind,
        }),
    }
}

/// What the plan deletes, as the victims judge needs it.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    /// The UIDs of the planned objects.
    pub uids: HashSet<String>,
    /// The planned objects.
    pub ids: HashSet<ObjectId>,
    /// They are deleted with `--cascade=orphan`: what they own does not die with them
    /// ([`crate::prune::safeguards::dies_with_plan`]).
    pub orphans: bool,
}

/// The victims among the objects a holder holds (`held`, as [`contents`] listed them; `tokens`:
/// the UIDs of those proven ServiceAccount token Secrets, [`Collection::service_account_tokens`]).
pub fn victims(held: &[Listed], tokens: &HashSet<String>, planned: &Planned) -> Vec<Victim> {
    let held_uids: HashSet<&str> = held.iter().map(Listed::uid).collect();
    let owners_of: HashMap<String, Vec<String>> = held
        .iter()
        .map(|o| {
            let owners = o.meta.owner_references.iter().flatten().map(|r| r.uid.clone());
            (o.uid().to_string(), owners.collect())
        })
        .collect();
    let services: HashSet<ObjectId> = held
        .iter()
        .map(Listed::id)
        .chain(planned.ids.iter().cloned())
        .filter(|id| id.group.is_empty() && id.kind == "Service")
        .collect();
    let default_accounts: HashSet<String> = held
        .iter()
        .filter(|o| o.kind.group.is_empty() && o.kind.kind == "ServiceAccount" && o.name() == "default")
        .map(|o| o.uid().to_string())
        .collect();
    let kept_marked = |o: &Listed| crate::model::trackers::keep_marker(&o.meta).is_some();
    let counted: Vec<&Listed> = held
        .iter()
        .filter(|o| !o.is_terminating() && !planned.uids.contains(o.uid()))
        .filter(|o| !dies_with_plan(&o.meta, &planned.uids, &owners_of, planned.orphans))
        // A keep marker counts whoever made the object (review 16, F2).
        .filter(|o| {
            made_by_control_plane(&o.id(), &o.meta, &services).is_none() || kept_marked(o) || is_tracked(&o.meta)
        })
        // Only a Secret proven of the token type is the token controller's: any Secret can carry
        // a ServiceAccount's name and UID annotations.
        // (A keep marker or another stack's mark counts on a token too: order review 29, F3.)
        .filter(|o| {
            !tokens.contains(o.uid())
                || kept_marked(o)
                || is_tracked(&o.meta)
                || !(token_of_default_account(&o.id(), &o.meta, &default_accounts)
                    || token_of_planned_account(&o.id(), &o.meta, planned))
        })
        .collect();
    // What a controller the holder holds made (a Deployment's ReplicaSets and Pods), unmarked,
    // goes with that controller, which is named itself: named once, through it. Anything else
    // counts on its own: a plain owner reference, a mark, a keep marker, or a controller that is
    // not named (made by the control plane, already being deleted) would leave it unnamed
    // (review 16, F2).
    let named: HashSet<&str> = counted.iter().map(|o| o.uid()).collect();
    let mut found: Vec<Victim> = counted
        .iter()
        .filter(|o| {
            // One owner outside (a ClusterRole) would keep it from the garbage collector: the
            // holder alone takes it, and it is named on its own.
            let all_owners_held = o
                .meta
                .owner_references
                .iter()
                .flatten()
                .all(|r| held_uids.contains(r.uid.as_str()));
            let goes_with_controller = all_owners_held
                && o.controller_owner()
                    .is_some_and(|c| held_uids.contains(c.uid.as_str()) && named.contains(c.uid.as_str()));
            !goes_with_controller || kept_marked(o) || is_tracked(&o.meta)
        })
        .map(|o| Victim {
            id: o.id(),
            uid: o.uid().to_string(),
            why: why_it_counts(o),
        })
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// The annotation of a ServiceAccount token Secret that holds its ServiceAccount's UID.
pub const SERVICE_ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";

/// Whether this object is the token Secret of a ServiceAccount the plan deletes: a Secret whose
/// `kubernetes.io/service-account.name` and `.uid` annotations name a planned ServiceAccount of
/// its namespace, by name and UID. The token controller deletes such a Secret when its
/// ServiceAccount goes (kubernetes `pkg/controller/serviceaccount/tokens_controller.go`), so it
/// dies with the plan. A token of a ServiceAccount that stays, or of a re-created one (another
/// UID), is not covered.
pub fn token_of_planned_account(id: &ObjectId, meta: &ObjectMeta, planned: &Planned) -> bool {
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
    let (Some(name), Some(uid)) = (annotation(SERVICE_ACCOUNT_NAME), annotation(SERVICE_ACCOUNT_UID)) else {
        return false;
    };
    id.group.is_empty()
        && id.kind == "Secret"
        && planned.uids.contains(uid)
        && planned
            .ids
            .contains(&ObjectId::new("", "ServiceAccount", id.namespace.as_deref(), name))
}

pub(crate) fn why_it_counts(object: &Listed) -> String {
    if let Some(marker) = crate::model::trackers::keep_marker(&object.meta) {
        format!("keep marker {marker}")
    } else if is_tracked(&object.meta) {
        format!("tracked, not pruned: {}", describe_marks(&object.meta))
    } else {
        "untracked".to_string()
    }
}

/// What a holder may hold that is not known: the kinds whose objects in it could not be listed,
/// and every kind of a group version that could not be discovered (an aggregated API whose
/// APIService is down) and could serve objects in it — any for a Namespace, those of the CRD's own
/// group for a CRD. Their objects would die unnamed, so a holder with any is never clean
/// ([`Cascade::is_clean`]): `--skip-unlisted` accepts unknown dependents, never unknown victims.
/// A group version whose APIService the plan deletes is no unknown content: the API goes with
/// it. The plan's cascades and the re-check before each wave ask this one function.
pub fn unknown_content(catalog: &Catalog, holder: &ObjectId, held: &Collection, planned: &Planned) -> Vec<String> {
    let crd_group = match (holder.group.as_str(), holder.kind.as_str()) {
        ("", "Namespace") => None,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            Some(holder.name.split_once('.').map_or("", |(_, group)| group))
        }
        _ => return Vec::new(),
    };
    let undiscovered = catalog.failures.iter().filter(|failure| {
        let (group, version) = failure
            .group_version
            .rsplit_once('/')
            .unwrap_or(("", &failure.group_version));
        let api_service = ObjectId::new(
            "apiregistration.k8s.io",
            "APIService",
            None,
            &format!("{version}.{group}"),
        );
        crd_group.is_none_or(|crd_group| crd_group == group) && !planned.ids.contains(&api_service)
    });
    let mut unknown: Vec<String> = held
        .failures
        .iter()
        .map(|f| f.kind.kind_with_group())
        .chain(undiscovered.map(|f| format!("every kind of {}", f.group_version)))
        .collect();
    unknown.sort();
    unknown.dedup();
    unknown
}

/// The cascade of one holder from its listed content (and what could not be, see
/// [`unknown_content`]).
pub fn cascade_of(catalog: &Catalog, holder: &ObjectId, held: &Collection, planned: &Planned) -> Cascade {
    let unlisted = unknown_content(catalog, holder, held, planned);
    Cascade {
        holder: holder.clone(),
        victims: victims(&held.objects, &held.service_account_tokens, planned),
        unlisted,
    }
}

/// The content cascades of the Namespaces and CRDs that die with the plan although it does not
/// name them ([`owners::dying_holders`]), each charged to the planned owner that takes it (a
/// victim's `why` and an unlisted kind say which holder holds it), with the victims as listed;
/// the claims they hold are added to `claims`, charged the same way.
/// The plan and the re-check before each wave ask this one function.
pub async fn held_by_dying(
    client: &Client,
    catalog: &Catalog,
    owned: &[Listed],
    planned: &Planned,
    planned_ids: &HashMap<String, ObjectId>,
    options: ListOptions,
    claims: &mut HashMap<String, ObjectId>,
) -> Vec<(Cascade, Vec<Listed>)> {
    let mut found = Vec::new();
    for (holder, owner) in owners::dying_holders(owned, planned, planned_ids) {
        found.extend(held_by(client, catalog, (&holder, &owner), planned, options, claims).await);
    }
    found
}

/// How many rounds [`victims_dependents`] follows the garbage collector down from the victims.
const MAX_DEPTH: usize = 8;

/// What the garbage collector takes with the victims found so far (review 16, F1): a victim (a
/// CRD's custom resource, a Namespace's object) that owns objects elsewhere takes them when it
/// dies, and they take theirs; a Namespace or CRD among them takes its content. Each is charged
/// to the planned object charged with the victim it hangs from, and counts as any owner's
/// dependent does ([`owners::Counted`]); followed for up to [`MAX_DEPTH`] rounds. Deleted with
/// `--cascade=orphan`, the planned objects take nothing, but their Namespaces' and CRDs'
/// content still dies, and with it what it owns. The plan and the re-check before each wave
/// ask this one function.
pub async fn victims_dependents(
    client: &Client,
    catalog: &Catalog,
    found: &[Cascade],
    planned: &Planned,
    counted: &owners::Counted<'_>,
    options: ListOptions,
) -> Dependents {
    let mut claims: HashMap<String, ObjectId> = HashMap::new();
    let mut nodes: Vec<Listed> = Vec::new();
    let mut charged: HashMap<String, ObjectId> = found
        .iter()
        .flat_map(|c| c.victims.iter().map(|v| (v.uid.clone(), c.holder.clone())))
        .collect();
    let mut dying: HashSet<String> = charged.keys().cloned().collect();
    if !planned.orphans {
        dying.extend(planned.uids.iter().cloned());
    }
    let mut frontier: Vec<ObjectId> = found
        .iter()
        .flat_map(|c| c.victims.iter().map(|v| v.id.clone()))
        .collect();
    let mut out = Vec::new();
    for _ in 0..MAX_DEPTH {
        if frontier.is_empty() {
            break;
        }
        let owned = owners::owned_around(client, catalog, frontier.iter(), options).await;
        let owners_of = owners::owners_by_uid(&owned.objects);
        let mut next = Vec::new();
        for object in &owned.objects {
            let uid = object.uid();
            if charged.contains_key(uid) || planned.uids.contains(uid) || object.is_terminating() {
                continue;
            }
            if !dies_with_plan(&object.meta, &dying, &owners_of, false) {
                continue;
            }
            let Some(root) = owners::charged_owner(uid, &charged, &owners_of) else {
                continue;
            };
            charged.insert(uid.to_string(), root.clone());
            dying.insert(uid.to_string());
            next.push(object.id());
            if volumes::is_claim(&object.id()) {
                claims.insert(uid.to_string(), root.clone());
            }
            let counted_victim = counted_victim(object, &root, counted);
            let victim = counted_victim.is_some();
            out.extend(counted_victim);
            if !is_holder(&object.id()) {
                // Uncounted (a controller's child), it is a node all the same when a stayer may
                // need it: the planned object that takes it is then kept (order review 26, F1).
                if !victim && owners::may_be_needed(object) {
                    nodes.push(object.clone());
                }
                continue;
            }
            // A Namespace or CRD that dies so is a node of the plan's graph, counted or not: what
            // it holds dies with it, and a need among that keeps what takes it (review 25, F2).
            nodes.push(object.clone());
            let held = held_by(client, catalog, (&object.id(), &root), planned, options, &mut claims).await;
            let Some((cascade, taken)) = held else {
                continue;
            };
            for victim in &cascade.victims {
                charged.insert(victim.uid.clone(), root.clone());
                dying.insert(victim.uid.clone());
                next.push(victim.id.clone());
            }
            out.push((cascade, taken));
        }
        frontier = next;
    }
    Dependents {
        cascades: out,
        claims,
        nodes,
    }
}

/// The cascade of `root` that takes `object` (owned by what the plan takes) when it counts as a
/// victim, with it as listed.
fn counted_victim(object: &Listed, root: &ObjectId, counted: &owners::Counted<'_>) -> Option<(Cascade, Vec<Listed>)> {
    let counts = counted.counts(object) && made_by_control_plane(&object.id(), &object.meta, &HashSet::new()).is_none();
    counts.then(|| {
        let victim = Victim {
            id: object.id(),
            uid: object.uid().to_string(),
            why: format!("owned by what the plan takes: {}", why_it_counts(object)),
        };
        (single(root.clone(), victim), vec![object.clone()])
    })
}

/// What the garbage collector takes with the victims ([`victims_dependents`]).
#[derive(Default)]
pub struct Dependents {
    /// The cascades that count, each with its victims as listed.
    pub cascades: Vec<(Cascade, Vec<Listed>)>,
    /// Every claim that dies so, counted or not, by UID with the planned object charged with
    /// it: the PV controller reclaims its volume ([`volumes::volume_cascades`]).
    pub claims: HashMap<String, ObjectId>,
    /// The Namespaces and CRDs that die so, and what dies so uncounted that a stayer may need
    /// ([`owners::may_be_needed`]), as listed: nodes of the plan's graph.
    pub nodes: Vec<Listed>,
}

/// The content cascade of a Namespace or CRD (`holder`) that dies unplanned, charged to the
/// planned object `root` that takes it (a victim's `why` and an unlisted kind say which holder
/// holds it), with the victims as listed; `None` when it takes nothing beyond the plan.
async fn held_by(
    client: &Client,
    catalog: &Catalog,
    (holder, root): (&ObjectId, &ObjectId),
    planned: &Planned,
    options: ListOptions,
    claims: &mut HashMap<String, ObjectId>,
) -> Option<(Cascade, Vec<Listed>)> {
    let held = contents(client, catalog, holder, options).await?;
    claims.extend(claims_in(&held.objects, planned).map(|uid| (uid, root.clone())));
    let mut cascade = cascade_of(catalog, holder, &held, planned);
    if cascade.is_clean() {
        return None;
    }
    for victim in &mut cascade.victims {
        victim.why = format!("in {holder}, which dies with it: {}", victim.why);
    }
    for kind in &mut cascade.unlisted {
        *kind = format!("{kind} in {holder}");
    }
    let victims: HashSet<&str> = cascade.victims.iter().map(|v| v.uid.as_str()).collect();
    let taken = held
        .objects
        .iter()
        .filter(|o| victims.contains(o.uid()))
        .cloned()
        .collect();
    cascade.holder = root.clone();
    Some((cascade, taken))
}

/// The UIDs of the claims among `objects` that the plan does not delete itself.
fn claims_in<'a>(objects: &'a [Listed], planned: &'a Planned) -> impl Iterator<Item = String> + 'a {
    objects
        .iter()
        .filter(|o| volumes::is_claim(&o.id()) && !planned.uids.contains(o.uid()))
        .map(|o| o.uid().to_string())
}

/// A cascade of one victim.
fn single(holder: ObjectId, victim: Victim) -> Cascade {
    Cascade {
        holder,
        victims: vec![victim],
        unlisted: Vec::new(),
    }
}

/// One cascade per holder: the victims and unlisted kinds of the cascades of the same holder
/// (its content, what it owns, what the Namespaces and CRDs it takes hold) together.
fn merged(cascades: Vec<Cascade>) -> Vec<Cascade> {
    let mut by_holder: BTreeMap<ObjectId, Cascade> = BTreeMap::new();
    for cascade in cascades {
        match by_holder.entry(cascade.holder.clone()) {
            Entry::Vacant(slot) => {
                slot.insert(cascade);
            }
            Entry::Occupied(mut slot) => {
                let into = slot.get_mut();
                into.victims.extend(cascade.victims);
                into.unlisted.extend(cascade.unlisted);
            }
        }
    }
    by_holder
        .into_values()
        .map(|mut cascade| {
            cascade.victims.sort_by(|a, b| a.id.cmp(&b.id));
            cascade.victims.dedup_by(|a, b| a.uid == b.uid);
            cascade.unlisted.sort();
            cascade.unlisted.dedup();
            cascade
        })
        .collect()
}

/// What dies with the plan beyond it: the cascades found, the victims they take (as listed),
/// and the claims that die, each by UID with the planned object whose deletion takes it (see
/// [`volumes::volume_cascades`]).
#[derive(Default)]
struct Dying {
    found: Vec<Cascade>,
    taken: Vec<Listed>,
    claims: HashMap<String, ObjectId>,
}

/// The cascades of the planned Namespaces and CRDs that are not clean, the victims they take,
/// and every claim they hold.
async fn planned_holders_cascades(
    client: &Client,
    catalog: &Catalog,
    planned: &Planned,
    options: ListOptions,
) -> Dying {
    let mut holders: Vec<&ObjectId> = planned.ids.iter().filter(|id| is_holder(id)).collect();
    holders.sort();
    let mut dying = Dying::default();
    for holder in holders {
        if let Some(held) = contents(client, catalog, holder, options).await {
            let cascade = cascade_of(catalog, holder, &held, planned);
            let victims: HashSet<&str> = cascade.victims.iter().map(|v| v.uid.as_str()).collect();
            dying
                .taken
                .extend(held.objects.iter().filter(|o| victims.contains(o.uid())).cloned());
            dying
                .claims
                .extend(claims_in(&held.objects, planned).map(|uid| (uid, holder.clone())));
            if !cascade.is_clean() {
                dying.found.push(cascade);
            }
        }
    }
    dying
}

impl Dying {
    /// Adds what the garbage collector takes with victims ([`victims_dependents`]).
    fn add_dependents(&mut self, dependents: Dependents) {
        for (cascade, held) in dependents.cascades {
            self.taken.extend(held);
            self.found.push(cascade);
        }
        self.claims.extend(dependents.claims);
        self.taken.extend(dependents.nodes);
    }

    /// Adds the volumes the dying claims take that count ([`volumes::volume_cascades`]): the
    /// claims planned, those the cascades found name as victims, and those already known.
    async fn add_reclaimed_volumes(
        &mut self,
        client: &Client,
        catalog: &Catalog,
        planned: &Planned,
        names: &HashMap<String, ObjectId>,
        (counted, options): (&owners::Counted<'_>, ListOptions),
    ) {
        self.claims.extend(volumes::planned_claims(names));
        for cascade in &self.found {
            let claims = cascade.victims.iter().filter(|v| volumes::is_claim(&v.id));
            self.claims
                .extend(claims.map(|v| (v.uid.clone(), cascade.holder.clone())));
        }
        let found = reclaimed(client, catalog, planned, &self.claims, (counted, options)).await;
        for (cascade, held) in found.cascades {
            self.taken.extend(held);
            self.found.push(cascade);
        }
        self.taken.extend(found.nodes);
    }
}

/// What the PV controller reclaims once the dying claims are gone, and what the garbage
/// collector then takes with those volumes ([`reclaimed`]).
#[derive(Default)]
pub struct Reclaimed {
    /// The volumes that count as victims ([`volumes::volume_cascades`]) and what they own that
    /// counts ([`victims_dependents`]), each with its victims as listed.
    pub cascades: Vec<(Cascade, Vec<Listed>)>,
    /// Every dying volume, counted or not, and what dies with them uncounted that a stayer may
    /// need, as listed: nodes of the plan's graph (a volume is held by its claim there).
    pub nodes: Vec<Listed>,
}

/// The volumes bound to the dying `claims` (by UID, each with the planned object whose deletion
/// takes it) that the PV controller reclaims, and what they own, walked as a victim's dependents
/// are (order review 27, F1): the plan and the re-check before each wave ask this one function.
pub async fn reclaimed(
    client: &Client,
    catalog: &Catalog,
    planned: &Planned,
    claims: &HashMap<String, ObjectId>,
    (counted, options): (&owners::Counted<'_>, ListOptions),
) -> Reclaimed {
    let mut found = Reclaimed::default();
    let bound = volumes::bound_volumes(client, catalog, claims).await;
    for cascade in volumes::volume_cascades(&bound, planned, claims, counted) {
        let victims: HashSet<&str> = cascade.victims.iter().map(|v| v.uid.as_str()).collect();
        let held = bound.iter().filter(|v| victims.contains(v.listed.uid()));
        let held = held.map(|v| v.listed.clone()).collect();
        found.cascades.push((cascade, held));
    }
    let (dying, walked): (Vec<&volumes::BoundVolume>, Vec<Cascade>) =
        volumes::dying_volumes(&bound, planned, claims).unzip();
    if dying.is_empty() {
        return found;
    }
    found.nodes.extend(dying.iter().map(|volume| volume.listed.clone()));
    let dependents = victims_dependents(client, catalog, &walked, planned, counted, options).await;
    found.cascades.extend(dependents.cascades);
    found.nodes.extend(dependents.nodes);
    found
}

/// The cascades of the plan that would take something beyond it — of its Namespaces and CRDs
/// (their content), of its objects as owners ([`owners::owner_cascades`]) and of its claims as
/// their volumes' ([`volumes::volume_cascades`]) — and the victims as
/// listed, with what a planned object controls that may run a controller
/// ([`owners::controlled_children`]; the plan's graph makes nodes of them all: see
/// [`crate::graph::live::LiveGraph::add_victims`]).
pub async fn find_cascades(
    client: &Client,
    catalog: &Catalog,
    planned_objects: impl IntoIterator<Item = (ObjectId, String)>,
    counted: &owners::Counted<'_>,
    options: ListOptions,
    orphans: bool,
) -> (Vec<Cascade>, Vec<Listed>) {
    let mut planned = Planned {
        orphans,
        ..Planned::default()
    };
    let mut names: HashMap<String, ObjectId> = HashMap::new();
    for (id, uid) in planned_objects {
        planned.uids.insert(uid.clone());
        planned.ids.insert(id.clone());
        names.insert(uid, id);
    }
    let mut dying = planned_holders_cascades(client, catalog, &planned, options).await;
    // Deleted with `--cascade=orphan`, the planned objects take nothing they own; their
    // Namespaces' and CRDs' content still dies, and what it owns (review 17, F1).
    let owned = match planned.ids.is_empty() || orphans {
        true => None,
        false => Some(owners::owned_around(client, catalog, planned.ids.iter(), options).await),
    };
    if let Some(owned) = &owned {
        dying
            .add_owned(client, catalog, owned, &planned, &names, (counted, options))
            .await;
    }
    // What the token, endpoints and pod garbage controllers delete by name with a ServiceAccount,
    // Service or Node that dies with the plan, whatever the cascade policy (order reviews 29 to
    // 31), and what that owns.
    let owned_objects = owned.as_ref().map(|owned| owned.objects.as_slice()).unwrap_or_default();
    let takers = by_name::takers(owned_objects, &planned, &names);
    let named = by_name::named_cascades(client, catalog, &planned, &takers, counted).await;
    let owning = named.owning(owned.as_ref().map(|owned| owned.objects.as_slice()));
    for (cascade, held) in named.cascades {
        dying.taken.extend(held);
        dying.found.push(cascade);
    }
    if !owning.is_empty() {
        let named_dependents = victims_dependents(client, catalog, &owning, &planned, counted, options).await;
        dying.add_dependents(named_dependents);
    }
    let dependents = victims_dependents(client, catalog, &dying.found, &planned, counted, options).await;
    dying.add_dependents(dependents);
    // A dying claim takes the volume the PV controller reclaims once it is gone, whatever the
    // cascade (order review 19, P; review 22, F1).
    if let Some(owned) = &owned {
        dying
            .claims
            .extend(owners::dying_claims(&owned.objects, &planned, &names));
    }
    dying.found = merged(std::mem::take(&mut dying.found));
    dying
        .add_reclaimed_volumes(client, catalog, &planned, &names, (counted, options))
        .await;
    let Dying { found, mut taken, .. } = dying;
    let found = merged(found);
    if let Some(owned) = &owned {
        add_dying_nodes(&mut taken, &owned.objects, &planned, &names);
    }
    (found, taken)
}

impl Dying {
    /// Adds what the planned objects take as owners ([`owners::owner_cascades`]) and the content
    /// of the Namespaces and CRDs that die with them ([`held_by_dying`]).
    async fn add_owned(
        &mut self,
        client: &Client,
        catalog: &Catalog,
        owned: &Collection,
        planned: &Planned,
        names: &HashMap<String, ObjectId>,
        (counted, options): (&owners::Counted<'_>, ListOptions),
    ) {
        for failure in &owned.failures {
            tracing::warn!(
                "cannot list {} to find what the plan's objects own: {}",
                failure.kind.kind_with_group(),
                failure.failure
            );
        }
        for cascade in owners::owner_cascades(&owned.objects, planned, names, counted) {
            let victims: HashSet<&str> = cascade.victims.iter().map(|v| v.uid.as_str()).collect();
            self.taken
                .extend(owned.objects.iter().filter(|o| victims.contains(o.uid())).cloned());
            self.found.push(cascade);
        }
        let held = held_by_dying(
            client,
            catalog,
            &owned.objects,
            planned,
            names,
            options,
            &mut self.claims,
        )
        .await;
        for (cascade, held) in held {
            self.taken.extend(held);
            self.found.push(cascade);
        }
    }
}

/// Adds to the plan's graph nodes what dies with it unnamed: a Namespace or CRD that dies with
/// the plan (what it holds and the plan deletes dies when it does: review 16, F3), and what a
/// planned object controls that may run a controller or needs one ([`owners::controlled_children`]).
fn add_dying_nodes(taken: &mut Vec<Listed>, owned: &[Listed], planned: &Planned, names: &HashMap<String, ObjectId>) {
    let dying: HashSet<ObjectId> = owners::dying_holders(owned, planned, names)
        .into_iter()
        .map(|(holder, _)| holder)
        .collect();
    taken.extend(owned.iter().filter(|o| dying.contains(&o.id())).cloned());
    let mut nodes: HashSet<String> = taken.iter().map(|o| o.uid().to_string()).collect();
    let controlled = owners::controlled_children(owned, planned);
    taken.extend(controlled.into_iter().filter(|o| nodes.insert(o.uid().to_string())));
    // A claim that dies as a planned owner's child is a node too: the volume the PV controller
    // then reclaims is held by it in the plan's graph, and what that volume owns with it (order
    // review 28, F2).
    let claims = owners::dying_claims(owned, planned, names);
    taken.extend(
        owned
            .iter()
            .filter(|o| claims.contains_key(o.uid()) && nodes.insert(o.uid().to_string()))
            .cloned(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::ObjectMeta;
    use std::collections::BTreeMap;

    fn kind(group: &str, kind: &str) -> Arc<KindInfo> {
        Arc::new(crate::cluster::fixtures::kind(group, kind, true))
    }

    fn object(k: &str, name: &str, owner: Option<&str>, labels: &[(&str, &str)]) -> Listed {
        let labels: BTreeMap<String, String> = labels.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        Listed::new(
            kind("", k),
            ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                uid: Some(format!("uid-{name}")),
                labels: Some(labels),
                // `*uid`: the owner is the object's controller.
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        uid: uid.trim_start_matches('*').into(),
                        kind: "X".into(),
                        name: "x".into(),
                        controller: uid.starts_with('*').then_some(true),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
        )
    }

    #[test]
    fn untracked_foreign_and_kept_objects_count_the_rest_does_not() {
        let held = vec![
            object("ConfigMap", "planned", None, &[]),
            object("Secret", "handmade", None, &[]),
            object(
                "ConfigMap",
                "theirs",
                None,
                &[("kustomize.toolkit.fluxcd.io/name", "b")],
            ),
            object("ReplicaSet", "rs", Some("uid-deploy"), &[]),
            object("Pod", "pod", Some("uid-rs"), &[]),
            object("PersistentVolumeClaim", "data-db-0", None, &[]),
            object("ServiceAccount", "default", None, &[]),
            object("ConfigMap", "kube-root-ca.crt", None, &[]),
            // Review 16, F2: only an unmarked child a named controller made goes with it.
            object("Pod", "stray-child", Some("uid-handmade"), &[]),
            object("Pod", "made-child", Some("*uid-handmade"), &[]),
            object("ConfigMap", "owned-by-default-account", Some("uid-default"), &[]),
            object("ConfigMap", "made-by-default-account", Some("*uid-default"), &[]),
        ];
        let planned = Planned {
            uids: ["uid-planned".to_string(), "uid-deploy".to_string()].into(),
            orphans: false,
            ids: HashSet::new(),
        };
        let found: Vec<(String, String)> = victims(&held, &HashSet::new(), &planned)
            .into_iter()
            .map(|v| (v.id.name, v.why))
            .collect();
        assert_eq!(
            found,
            vec![
                ("made-by-default-account".to_string(), "untracked".to_string()),
                ("owned-by-default-account".to_string(), "untracked".to_string()),
                ("theirs".to_string(), "tracked, not pruned: flux:b".to_string()),
                ("data-db-0".to_string(), "untracked".to_string()),
                ("stray-child".to_string(), "untracked".to_string()),
                ("handmade".to_string(), "untracked".to_string()),
            ]
        );
    }

    fn catalog_without(group_versions: &[&str]) -> Catalog {
        let failures = group_versions
            .iter()
            .map(|gv| crate::cluster::discovery::DiscoveryFailure {
                group_version: gv.to_string(),
                message: "the server is currently unable to handle the request".into(),
            })
            .collect();
        let kinds = vec![crate::cluster::fixtures::kind("", "ConfigMap", true)];
        Catalog::new(kinds, failures, crate::cluster::discovery::DiscoverySource::PerGroup)
    }

    /// Adversarial review, finding 11: a kind that could not be listed, or a group version that
    /// could not be discovered (an aggregated API whose APIService is down), may hold objects the
    /// Namespace or CRD takes with it; its cascade is never clean, with no victim named.
    #[test]
    fn a_holder_whose_content_could_not_be_listed_or_discovered_is_never_clean() {
        let namespace = ObjectId::new("", "Namespace", None, "shop");
        let planned = Planned::default();
        let all_listed = Collection::default();
        let discovered = catalog_without(&[]);
        assert!(cascade_of(&discovered, &namespace, &all_listed, &planned).is_clean());

        let mut one_failed = Collection::default();
        one_failed.failures.push(crate::cluster::collect::KindFailure {
            kind: kind("example.com", "Gizmo"),
            failure: crate::cluster::collect::ListFailure::Forbidden,
        });
        let cascade = cascade_of(&discovered, &namespace, &one_failed, &planned);
        assert!(cascade.victims.is_empty());
        assert_eq!(cascade.unlisted, ["Gizmo.example.com"]);
        assert!(
            !cascade.is_clean(),
            "content that could not be listed is not known to be empty"
        );

        let down = catalog_without(&["metrics.k8s.io/v1beta1"]);
        let cascade = cascade_of(&down, &namespace, &all_listed, &planned);
        assert_eq!(cascade.unlisted, ["every kind of metrics.k8s.io/v1beta1"]);
        assert!(
            !cascade.is_clean(),
            "an undiscovered group may serve objects in the Namespace"
        );

        let other_crd = ObjectId::new(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "gizmos.example.com",
        );
        assert!(cascade_of(&down, &other_crd, &all_listed, &planned).is_clean());
        let own_crd = ObjectId::new(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "nodemetrics.metrics.k8s.io",
        );
        assert!(!cascade_of(&down, &own_crd, &all_listed, &planned).is_clean());
        let config_map = ObjectId::new("", "ConfigMap", Some("shop"), "settings");
        assert!(unknown_content(&down, &config_map, &all_listed, &planned).is_empty());
        // The plan deletes the APIService itself: its API goes first, nothing of it is unknown.
        let api_service = ObjectId::new("apiregistration.k8s.io", "APIService", None, "v1beta1.metrics.k8s.io");
        let with_api = Planned {
            uids: ["uid-api".to_string()].into(),
            orphans: false,
            ids: [api_service].into(),
        };
        assert!(cascade_of(&down, &namespace, &all_listed, &with_api).is_clean());
    }

    fn token(name: &str, account: &str, account_uid: &str) -> Listed {
        let annotations = [
            (SERVICE_ACCOUNT_NAME.to_string(), account.to_string()),
            (SERVICE_ACCOUNT_UID.to_string(), account_uid.to_string()),
        ];
        let mut listed = object("Secret", name, None, &[]);
        listed.meta.annotations = Some(annotations.into());
        listed
    }

    #[test]
    fn the_token_of_a_planned_service_account_dies_with_it_other_tokens_count() {
        let planned = Planned {
            uids: ["uid-builder".to_string(), "uid-settings".to_string()].into(),
            orphans: false,
            ids: [
                ObjectId::new("", "ServiceAccount", Some("shop"), "builder"),
                ObjectId::new("", "ConfigMap", Some("shop"), "settings"),
            ]
            .into(),
        };
        let held = vec![
            object("ServiceAccount", "builder", None, &[]),
            token("builder-token", "builder", "uid-builder"),
            object("ServiceAccount", "runner", None, &[]),
            token("runner-token", "runner", "uid-runner"),
            token("old-builder-token", "builder", "uid-builder-before"),
            token("settings-token", "settings", "uid-settings"),
            object("Secret", "handmade", None, &[]),
        ];
        let tokens: HashSet<String> = held
            .iter()
            .filter(|o| o.name().ends_with("-token"))
            .map(|o| o.uid().to_string())
            .collect();
        let found: Vec<String> = victims(&held, &tokens, &planned)
            .into_iter()
            .map(|v| v.id.name)
            .collect();
        assert_eq!(
            found,
            [
                "handmade",
                "old-builder-token",
                "runner-token",
                "settings-token",
                "runner"
            ]
        );
        let elsewhere = ObjectId::new("", "Secret", Some("other"), "builder-token");
        assert!(!token_of_planned_account(&elsewhere, &held[1].meta, &planned));
        assert!(token_of_planned_account(&held[1].id(), &held[1].meta, &planned));
    }

    /// Order review 7: an Opaque Secret that carries a planned ServiceAccount's name and UID
    /// annotations (or the `default` account's) is no token Secret: only a Secret listed with
    /// the token type ([`SERVICE_ACCOUNT_TOKEN`]) dies with its account or is the control
    /// plane's. The annotations alone prove nothing.
    #[test]
    fn only_a_secret_proven_of_the_token_type_is_a_token() {
        let planned = Planned {
            uids: ["uid-builder".to_string()].into(),
            orphans: false,
            ids: [ObjectId::new("", "ServiceAccount", Some("shop"), "builder")].into(),
        };
        let held = vec![
            object("ServiceAccount", "builder", None, &[]),
            token("builder-token", "builder", "uid-builder"),
            token("forged", "builder", "uid-builder"),
            object("ServiceAccount", "default", None, &[]),
            token("default-token", "default", "uid-default"),
            token("forged-default", "default", "uid-default"),
        ];
        let tokens: HashSet<String> = ["uid-builder-token".to_string(), "uid-default-token".to_string()].into();
        let found: Vec<String> = victims(&held, &tokens, &planned)
            .into_iter()
            .map(|v| v.id.name)
            .collect();
        assert_eq!(found, ["forged", "forged-default"]);
        let none_proven: Vec<String> = victims(&held, &HashSet::new(), &planned)
            .into_iter()
            .map(|v| v.id.name)
            .collect();
        assert_eq!(
            none_proven,
            ["builder-token", "default-token", "forged", "forged-default"]
        );
    }
}
