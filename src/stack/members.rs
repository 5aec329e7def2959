//! Members: what each tracking object (Kustomization, HelmRelease, Argo CD Application,
//! inventory, ApplySet parent) claims, by the stacks' full identities, and what its record
//! holds ([`MemberRecord`]); an object as the layers above take it ([`NodeInput`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::cluster::collect::Listed;
use crate::model::identity::ObjectId;
use crate::model::trackers::{applyset_id, marks, Mark, MarkValue, Preset, APPLYSET_ID};

pub(crate) fn object_meta(input: &NodeInput) -> kube::core::ObjectMeta {
    kube::core::ObjectMeta {
        labels: Some(BTreeMap::clone(&input.labels)),
        annotations: Some(BTreeMap::clone(&input.annotations)),
        ..Default::default()
    }
}

/// A mark with the full identity of the stack it names, as [`owner_mark`] keys tracking objects.
/// Argo CD records an Application outside its control-plane namespace (apps in any namespace) as
/// `<namespace>_<name>`, and one in the control-plane namespace by its name alone (argo-cd
/// `util/argo/argo.go` `AppInstanceName`, v3; `_` occurs in neither a namespace nor a name): the
/// first names the Application in that namespace, the second names one by name only, as the
/// control-plane namespace is not known here. Other marks are unchanged.
pub fn full_mark(mark: Mark) -> Mark {
    if mark.preset != Preset::ArgoCd || mark.value.namespace.is_some() {
        return mark;
    }
    match mark.value.name.split_once('_') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => Mark {
            preset: mark.preset,
            value: MarkValue {
                name: name.to_string(),
                namespace: Some(namespace.to_string()),
            },
        },
        _ => mark,
    }
}

/// The namespaces Argo CD proves are not its control-plane namespace: those that name an
/// Application in a `<namespace>_<name>` tracking id. Argo CD writes that form only for an
/// Application outside its control-plane namespace, and the name alone for one inside
/// (argo-cd `util/argo/argo.go` `AppInstanceName`: `if appNs == "" || appNs == defaultNs {
/// return appName }`), so an Application in such a namespace never wrote a name-only id: one
/// belongs to the Application of that name in the control-plane namespace only. A forged id can
/// only add a namespace here, which keeps more.
pub fn argocd_outside_namespaces<'a>(metas: impl IntoIterator<Item = &'a kube::core::ObjectMeta>) -> HashSet<String> {
    metas
        .into_iter()
        .flat_map(full_marks)
        .filter(|mark| mark.preset == Preset::ArgoCd)
        .filter_map(|mark| mark.value.namespace)
        .collect()
}

/// Whether a name-only mark may name the stack `owner`: any stack of its name, except an Argo
/// CD Application in a namespace proven outside the control plane ([`argocd_outside_namespaces`]).
pub fn name_only_may_name(mark: &Mark, owner: &(Preset, MarkValue), outside: &HashSet<String>) -> bool {
    let (preset, value) = owner;
    *preset == mark.preset
        && value.name == mark.value.name
        && !(*preset == Preset::ArgoCd && value.namespace.as_ref().is_some_and(|ns| outside.contains(ns)))
}

/// Every tracker's mark on an object, each with its stack's full identity ([`full_mark`]).
pub fn full_marks(meta: &kube::core::ObjectMeta) -> Vec<Mark> {
    marks(meta).into_iter().map(full_mark).collect()
}

/// The tracker identity an object stands for when it is a tracking object itself.
pub fn owner_mark(input: &NodeInput) -> Option<(Preset, MarkValue)> {
    let named = |preset| {
        Some((
            preset,
            MarkValue {
                name: input.id.name.clone(),
                namespace: input.id.namespace.clone(),
            },
        ))
    };
    match (input.id.group.as_str(), input.id.kind.as_str()) {
        ("kustomize.toolkit.fluxcd.io", "Kustomization") => named(Preset::Flux),
        ("helm.toolkit.fluxcd.io", "HelmRelease") => named(Preset::FluxHelm),
        // Its full identity (apps in any namespace): see [`full_mark`].
        ("argoproj.io", "Application") => named(Preset::ArgoCd),
        _ => {
            let id_label = |key: &str| {
                input.labels.get(key).map(|id| MarkValue {
                    name: id.clone(),
                    namespace: None,
                })
            };
            id_label("cli-utils.sigs.k8s.io/inventory-id")
                .map(|v| (Preset::Kpt, v))
                .or_else(|| applyset_parent_id(input).map(|v| (Preset::ApplySet, v)))
        }
    }
}

/// The tracker key of a listed object that is a tracking object itself (Kustomization,
/// HelmRelease, Argo CD Application, inventory object, ApplySet parent).
pub fn tracker_key(object: &Listed) -> Option<(Preset, MarkValue)> {
    owner_mark(&NodeInput {
        id: object.id(),
        labels: Arc::new(object.meta.labels.clone().unwrap_or_default()),
        annotations: Arc::new(object.meta.annotations.clone().unwrap_or_default()),
        ..Default::default()
    })
}

/// The ApplySet id of a parent: its `applyset.kubernetes.io/id` label, only when that label is
/// the parent's own id (kubectl's hash of its name, namespace, kind and group). A copy of a
/// parent keeps the original's label; kubectl refuses it ("incorrect value for label
/// applyset.kubernetes.io/id", kubernetes/kubectl `pkg/cmd/apply/applyset.go`
/// `fetchParent`), and so does every path here: it is no parent and tracks nothing.
fn applyset_parent_id(input: &NodeInput) -> Option<MarkValue> {
    let label = input.labels.get(APPLYSET_ID)?;
    let own = applyset_id(
        &input.id.name,
        input.id.namespace.as_deref().unwrap_or(""),
        &input.id.kind,
        &input.id.group,
    );
    if *label != own {
        if first_time_copy(&input.id) {
            tracing::warn!(
                "{} carries {APPLYSET_ID}={label}, which is not its own id ({own}): a copy of another ApplySet parent is not a parent",
                input.id
            );
        }
        return None;
    }
    Some(MarkValue {
        name: own,
        namespace: None,
    })
}

/// Whether the copy of an ApplySet parent `id` is met for the first time in this run: every path
/// that asks for an object's mark meets it (the graph, each re-check), and the user is told once.
fn first_time_copy(id: &ObjectId) -> bool {
    static WARNED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<ObjectId>>> =
        std::sync::OnceLock::new();
    let warned = WARNED.get_or_init(Default::default);
    warned.lock().map_or(true, |mut warned| warned.insert(id.clone()))
}

/// Why a tracking object's controller would leave its members behind when it is deleted, read
/// from its whole object (`body`). A Flux Kustomization deletes its inventory on deletion only
/// when its deletion policy says so: `MirrorPrune` (the default, `spec.deletionPolicy` unset)
/// follows `spec.prune`; `Delete` and `WaitForTermination` delete; `Orphan` (and any other
/// value) leaves them (fluxcd/kustomize-controller `internal/controller/kustomization_controller.go`
/// `finalizerShouldDeleteResources`, v1.x, API `kustomize.toolkit.fluxcd.io/v1`). A HelmRelease
/// has no such field: helm-controller uninstalls its release on deletion unless it is suspended
/// (`reconcileDelete`), which prune lifts; `spec.uninstall.keepHistory` keeps only the release
/// history, and `helm.sh/resource-policy: keep` is a keep marker on the object itself.
pub fn orphans_members(input: &NodeInput) -> Option<String> {
    let kind = (input.id.group.as_str(), input.id.kind.as_str());
    let body = input.body.as_ref()?;
    let spec = body.get("spec")?;
    let lifted = input.annotations.contains_key(crate::stack::suspension::SUSPENDED_BY);
    // A deletion policy the stack states is named before a suspension: both leave the members.
    if let Some(why) = kustomization_policy(input, spec) {
        return Some(why);
    }
    if let Some(why) = flux_acts_elsewhere(&input.id, body, lifted, &input.impersonation) {
        return Some(format!("Flux would orphan it: {why}"));
    }
    if kind == ("helm.toolkit.fluxcd.io", "HelmRelease") {
        // helm-controller uninstalls the latest release of its status history, in the storage
        // namespace its status records; without either it uninstalls nothing
        // (fluxcd/helm-controller `internal/controller/helmrelease_controller.go`
        // `reconcileReleaseDeletion`: "skipping Helm release uninstallation: no storage namespace
        // configured"; `internal/reconcile/uninstall.go`: `ErrNoLatest`, ignored by the caller).
        let recorded = |pointer: &str| {
            body.pointer(pointer)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
        };
        let missing = [
            ("/status/storageNamespace", "status.storageNamespace"),
            ("/status/history/0/name", "status.history"),
        ]
        .into_iter()
        .find(|(pointer, _)| !recorded(pointer));
        return missing.map(|(_, field)| {
            format!(
                "Flux would orphan it: {} records no {field} (helm-controller never installed it), and helm-controller then uninstalls nothing",
                input.id
            )
        });
    }
    None
}

/// What a Kustomization's `spec.prune` and `spec.deletionPolicy` say of its members on deletion
/// (see [`orphans_members`]); `None` for anything else, or when they are deleted.
fn kustomization_policy(input: &NodeInput, spec: &Value) -> Option<String> {
    if (input.id.group.as_str(), input.id.kind.as_str()) != ("kustomize.toolkit.fluxcd.io", "Kustomization") {
        return None;
    }
    let policy = spec
        .get("deletionPolicy")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .unwrap_or("MirrorPrune");
    // `spec.prune` is required by Flux's own CRD schema; a Kustomization without it (a CRD with
    // no schema) states nothing, and its members go as before.
    let prune = spec.get("prune").and_then(Value::as_bool);
    match policy {
        "MirrorPrune" if prune != Some(false) => None,
        "MirrorPrune" => Some(format!("Flux would orphan it: {} has spec.prune=false", input.id)),
        "Delete" | "WaitForTermination" => None,
        other => Some(format!(
            "Flux would orphan it: {} has spec.deletionPolicy={other}",
            input.id
        )),
    }
}

/// Why deleting a tracking object deletes none of its members by itself (review finding of
/// issue 24): a kpt/cli-utils inventory and a kubectl ApplySet parent are read only by their
/// tools' client-side prune (`kpt live destroy`, `kubectl apply --prune`: cli-utils
/// `pkg/apply/prune`, kubectl `applyset_pruner.go`); an Argo CD Application without
/// `resources-finalizer.argocd.argoproj.io` is a non-cascading delete (argo-cd `app_deletion`).
/// `None` for a Flux stack (its finalizer deletes its inventory: see [`orphans_members`]) and
/// anything else.
pub fn deletes_nothing_itself(input: &NodeInput) -> Option<String> {
    let (preset, _) = owner_mark(input)?;
    match preset {
        Preset::Kpt | Preset::ApplySet => Some(format!(
            "{} is deleted as a member of another stack, and deleting it deletes nothing else: its tool prunes only when it runs (name it to tear its members down)",
            input.id
        )),
        Preset::ArgoCd if !input.finalizers.iter().any(|f| f == "resources-finalizer.argocd.argoproj.io") => Some(format!(
            "{} has no resources-finalizer.argocd.argoproj.io: deleting it leaves its resources (name it to tear them down)",
            input.id
        )),
        _ => None,
    }
}

/// Why a Flux Kustomization or HelmRelease (`body`, the whole object) prunes nothing in this
/// cluster, on apply or on deletion: a stack its user suspended is not reconciled and deletes
/// nothing when it is deleted (fluxcd/kustomize-controller `finalizerShouldDeleteResources`: `if
/// obj.Spec.Suspend { return false }`; fluxcd/helm-controller `reconcileDelete`: "skipping Helm
/// uninstall for suspended resource"), unless this tool suspended it (`lifted`: the suspension
/// is lifted before the stack goes, see `prune::suspend`); a stack with `spec.kubeConfig` applies
/// and deletes in the cluster that kubeconfig names (kustomize-controller `finalize` and
/// helm-controller `buildRESTClientGetter` build their clients from it): objects here that carry
/// its marks are look-alikes, not its members. A Kustomization whose `spec.serviceAccountName`
/// names a ServiceAccount that does not exist in its namespace prunes nothing either
/// (`impersonation`, read where its body is read: see [`Impersonation`]). `None` for any other
/// object.
pub fn flux_acts_elsewhere(id: &ObjectId, body: &Value, lifted: bool, impersonation: &Impersonation) -> Option<String> {
    let flux_kind = matches!(
        (id.group.as_str(), id.kind.as_str()),
        ("kustomize.toolkit.fluxcd.io", "Kustomization") | ("helm.toolkit.fluxcd.io", "HelmRelease")
    );
    let spec = body.get("spec").filter(|_| flux_kind)?;
    if spec.get("suspend").and_then(Value::as_bool) == Some(true) && !lifted {
        return Some(format!(
            "{id} is suspended (spec.suspend=true), and Flux prunes nothing of a suspended stack"
        ));
    }
    if spec.get("kubeConfig").is_some_and(|config| !config.is_null()) {
        return Some(format!(
            "{id} applies to another cluster (spec.kubeConfig): objects here that carry its marks are not its members"
        ));
    }
    cannot_impersonate(id, body, impersonation)
}

/// Whether the ServiceAccount a Flux Kustomization impersonates (`spec.serviceAccountName`)
/// exists in its namespace: read where the stack's body is read (`crate::stack::inventory::impersonation_of`),
/// passed to the pure rule [`flux_acts_elsewhere`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Impersonation {
    /// Not looked up.
    #[default]
    NotLookedUp,
    /// It exists, and may delete every member its Kustomization records.
    Found,
    /// It exists, but may not delete these recorded members (a SubjectAccessReview said so):
    /// kustomize-controller's prune and its finalizer, impersonating it, fail on them, and they
    /// stay (see [`crate::stack::inventory::impersonation_of`]). Each with why.
    Limited(std::collections::BTreeMap<ObjectId, String>),
    /// It does not exist (NotFound).
    Missing,
    /// It could not be read, and why.
    Unreadable(String),
}

/// The ServiceAccount a Flux Kustomization or HelmRelease (`body`) impersonates,
/// `spec.serviceAccountName` (an empty one names none), always in the stack's own namespace:
/// kustomize-controller's `NewImpersonator(..., obj.Spec.ServiceAccountName, obj.GetNamespace())`
/// and helm-controller's `kube.WithImpersonate(obj.Spec.ServiceAccountName, obj.GetNamespace())`
/// (fluxcd/helm-controller `internal/controller/helmrelease_controller.go`
/// `buildRESTClientGetter`; `internal/kube/impersonate.go` `SetImpersonationConfig` sets only
/// `rest.ImpersonationConfig{UserName: "system:serviceaccount:NS:NAME"}`). Both controllers fall
/// back to their `--default-service-account` flag when it is empty; that flag is not read here
/// (README, Known gaps). `None` for any other object.
pub fn service_account_named<'a>(id: &ObjectId, body: &'a Value) -> Option<&'a str> {
    let flux = flux_controller(id).is_some();
    body.pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|name| flux && !name.is_empty())
}

/// The Flux controller that reconciles (and impersonates for) a Kustomization or HelmRelease.
pub fn flux_controller(id: &ObjectId) -> Option<&'static str> {
    match (id.group.as_str(), id.kind.as_str()) {
        ("kustomize.toolkit.fluxcd.io", "Kustomization") => Some("kustomize-controller"),
        ("helm.toolkit.fluxcd.io", "HelmRelease") => Some("helm-controller"),
        _ => None,
    }
}

/// kustomize-controller impersonates `spec.serviceAccountName` to apply and to prune; when that
/// ServiceAccount is not found in the Kustomization's namespace, `CanImpersonate` is false and
/// its `finalize` prunes nothing ("skiping pruning, failed to find account to impersonate"), and a
/// reconcile cannot build its client, so it prunes nothing on apply either
/// (fluxcd/kustomize-controller `internal/controller/kustomization_controller.go` `finalize`;
/// fluxcd/pkg `runtime/client/impersonator.go` `CanImpersonate`). helm-controller likewise
/// confirms the impersonated ServiceAccount exists in the HelmRelease's namespace before it
/// uninstalls, and skips the uninstall when it is not found (fluxcd/helm-controller
/// `internal/controller/helmrelease_controller.go` `reconcileReleaseDeletion`: "Confirm any
/// ServiceAccount used for impersonation exists before attempting to uninstall"); an upgrade
/// impersonating an account that does not exist is kept to the same rule (it keeps more). One
/// not read makes what it would prune unknown: nothing of it is deleted either.
fn cannot_impersonate(id: &ObjectId, body: &Value, impersonation: &Impersonation) -> Option<String> {
    let account = service_account_named(id, body)?;
    let controller = flux_controller(id).unwrap_or("its controller");
    let named = format!(
        "{id} impersonates ServiceAccount {}/{account} (spec.serviceAccountName)",
        id.namespace.as_deref().unwrap_or_default()
    );
    match impersonation {
        Impersonation::Found | Impersonation::Limited(_) => None,
        Impersonation::Missing => Some(format!(
            "{named}, which does not exist: {controller} cannot impersonate it and prunes nothing"
        )),
        Impersonation::Unreadable(why) => Some(format!(
            "{named}, which could not be read ({why}): whether {controller} can impersonate it and prune is unknown"
        )),
        Impersonation::NotLookedUp => Some(format!(
            "{named}, which was not looked up: whether {controller} can impersonate it and prune is unknown"
        )),
    }
}

/// A Flux Kustomization's `status.inventory`: on deletion, kustomize-controller's `finalize`
/// deletes only these (`inventory.List(obj.Status.Inventory)`, fluxcd/kustomize-controller
/// `internal/controller/kustomization_controller.go`). `None` for anything else, or when its
/// body was not read. An inventory without entries (`status.inventory: {}`) is a record that
/// holds nothing; one that is missing, or has an entry that cannot be read, is a record that
/// holds nothing and says why ([`MemberRecord::no_inventory`]): kustomize-controller
/// deletes nothing without an inventory it can read ([`crate::stack::inventory::flux_record`], the one
/// reading `orphans` shares).
pub fn flux_inventory_of(input: &NodeInput) -> Option<MemberRecord> {
    if (input.id.group.as_str(), input.id.kind.as_str()) != ("kustomize.toolkit.fluxcd.io", "Kustomization") {
        return None;
    }
    let name = format!("the status.inventory of {}", input.id);
    Some(match crate::stack::inventory::flux_record(input.body.as_ref()?) {
        crate::stack::inventory::FluxRecord::Ids(ids) => MemberRecord {
            ids,
            name,
            denied: match &input.impersonation {
                Impersonation::Limited(denied) => denied.clone(),
                _ => Default::default(),
            }
            .into_iter()
            .chain(input.unmapped.clone())
            .collect(),
            ..Default::default()
        },
        crate::stack::inventory::FluxRecord::Nothing(why) => MemberRecord {
            name,
            no_inventory: Some(why),
            ..Default::default()
        },
    })
}

/// The entries of a Flux Kustomization's `status.inventory` (`body`, the whole object), `None`
/// only when it records no inventory at all. An inventory present without entries (`{}`,
/// `entries: null` or `[]`) is an empty record: kustomize-controller deletes nothing of it, on
/// prune (`inventory.Diff` of an empty old inventory is empty) or on deletion
/// (`finalizerShouldDeleteResources`: `len(obj.Status.Inventory.Entries) == 0` deletes nothing;
/// fluxcd/kustomize-controller `internal/controller/kustomization_controller.go`, v1.x). The one
/// reading of it every path shares.
pub fn flux_inventory_entries(body: &Value) -> Option<&[Value]> {
    let inventory = body.pointer("/status/inventory").filter(|v| v.is_object())?;
    Some(
        inventory
            .get("entries")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
    )
}

/// Keeps the candidates that are tracking objects themselves or tracked by one of `owners` or of
/// the candidates: the objects `--members` hangs under something.
pub fn tracked_by_any(owners: &[NodeInput], candidates: Vec<NodeInput>) -> Vec<NodeInput> {
    let keys: HashSet<(Preset, MarkValue)> = owners.iter().chain(candidates.iter()).filter_map(owner_mark).collect();
    let names: HashSet<(Preset, String)> = keys.iter().map(|(p, v)| (*p, v.name.clone())).collect();
    candidates
        .into_iter()
        .filter(|input| {
            owner_mark(input).is_some()
                || full_marks(&object_meta(input)).into_iter().any(|m| {
                    keys.contains(&(m.preset, m.value.clone()))
                        || (m.value.namespace.is_none() && names.contains(&(m.preset, m.value.name.clone())))
                })
        })
        .collect()
}

/// What a tracking object's tool records as its members: on deletion it deletes only these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberRecord {
    /// The recorded members.
    pub ids: HashSet<ObjectId>,
    /// The record, for messages (e.g. `the status.inventory of Kustomization.kustomize.toolkit.fluxcd.io/flux-system/apps`).
    pub name: String,
    /// Marks that name the same stack by another tool's mark: a Flux HelmRelease's Helm release
    /// (as helm-controller names it). A teardown of the stack covers them.
    pub aliases: Vec<(crate::model::trackers::Preset, crate::model::trackers::MarkValue)>,
    /// Why its tool deletes nothing of the stack whatever the marks say, when so: a Flux
    /// Kustomization with no `status.inventory` it can read (see [`crate::stack::inventory::flux_record`]).
    pub no_inventory: Option<String>,
    /// Recorded members its tool may not delete, each with why: a Flux stack's
    /// `spec.serviceAccountName` may not delete them (see [`Impersonation::Limited`]), or a
    /// Kustomization records them at a version no longer served ([`NodeInput::unmapped`]).
    pub denied: std::collections::BTreeMap<ObjectId, String>,
}

/// Labels or annotations as a graph input holds them: shared, as the objects of one stack often
/// carry the same ones (50,000 ConfigMaps of one Kustomization, one map). Read through `Deref`;
/// changed with [`Arc::make_mut`], which copies a shared map first.
pub type StringMap = Arc<BTreeMap<String, String>>;

/// Gives out one [`StringMap`] for equal maps: the inputs of a graph hold each distinct set of
/// labels and annotations once (issue 30: two copies of every object's labels were a third of a
/// plan's memory).
#[derive(Debug, Default)]
pub struct Interner(HashSet<StringMap>);

impl Interner {
    /// The shared map equal to `map` (an empty one when `None`), made the first time it is seen.
    pub fn share(&mut self, map: Option<&BTreeMap<String, String>>) -> StringMap {
        let empty = BTreeMap::new();
        let map = map.unwrap_or(&empty);
        if let Some(shared) = self.0.get(map) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(map.clone());
        self.0.insert(Arc::clone(&shared));
        shared
    }
}

/// An object as the graph builder needs it.
#[derive(Debug, Clone, Default)]
pub struct NodeInput {
    /// Identity.
    pub id: ObjectId,
    /// UID, when live.
    pub uid: Option<String>,
    /// Labels, shared by the inputs that carry the same ones ([`Interner`]).
    pub labels: StringMap,
    /// Annotations, shared as the labels are.
    pub annotations: StringMap,
    /// `spec.dependsOn` of Flux objects, already resolved.
    pub depends_on: Vec<ObjectId>,
    /// Finalizers (inference: a custom resource's finalizer names its controller).
    pub finalizers: Vec<String>,
    /// The whole object, for the kinds inference reads (`graph::infer::SPEC_KINDS`).
    pub body: Option<Value>,
    /// Offline: the folder the manifest was read from, which stands for the Argo CD application
    /// (sync waves) and the stack (inference) when the object carries no tracker's mark.
    pub app: Option<String>,
    /// The UIDs of its owners (`metadata.ownerReferences`): it dies with the plan when every
    /// one of them does ([`Graph::dying_by_owners`]).
    pub owners: Vec<String>,
    /// A Flux Kustomization's: whether the ServiceAccount it impersonates exists, as read with
    /// its body (see [`Impersonation`]).
    pub impersonation: Impersonation,
    /// A Flux Kustomization's: the `status.inventory` entries recorded at a version the cluster
    /// no longer serves, each with why (see [`crate::stack::inventory::unmapped_entries`]), read with its
    /// body: kustomize-controller cannot delete them.
    pub unmapped: std::collections::BTreeMap<ObjectId, String>,
}

impl NodeInput {
    /// The labels to change (copied first when shared).
    pub fn labels_mut(&mut self) -> &mut BTreeMap<String, String> {
        Arc::make_mut(&mut self.labels)
    }

    /// The annotations to change (copied first when shared).
    pub fn annotations_mut(&mut self) -> &mut BTreeMap<String, String> {
        Arc::make_mut(&mut self.annotations)
    }

    /// Reads Flux `spec.dependsOn` from a full object body; namespace defaults to the object's own.
    pub fn flux_depends_on(id: &ObjectId, body: &Value) -> Vec<ObjectId> {
        let is_flux = matches!(
            (id.group.as_str(), id.kind.as_str()),
            ("kustomize.toolkit.fluxcd.io", "Kustomization") | ("helm.toolkit.fluxcd.io", "HelmRelease")
        );
        if !is_flux {
            return Vec::new();
        }
        let entries = body
            .pointer("/spec/dependsOn")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        entries
            .iter()
            .filter_map(|entry| {
                // Older Flux versions also accepted plain names.
                let (name, namespace) = match entry {
                    Value::String(name) => (name.as_str(), None),
                    other => (
                        other.get("name")?.as_str()?,
                        other.get("namespace").and_then(Value::as_str),
                    ),
                };
                // An empty namespace is the dependent's own, as kustomize-controller's
                // `checkDependencies` reads it (`if d.Namespace == "" { d.Namespace = obj.GetNamespace() }`):
                // order review 14, F3.
                let namespace = namespace.filter(|n| !n.is_empty()).or(id.namespace.as_deref());
                Some(ObjectId::new(&id.group, &id.kind, namespace, name))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_maps_are_shared_and_changed_apart() {
        let mut interner = Interner::default();
        let labels = |value: &str| BTreeMap::from([("app".to_string(), value.to_string())]);
        let first = interner.share(Some(&labels("web")));
        let second = interner.share(Some(&labels("web")));
        let other = interner.share(Some(&labels("db")));
        assert!(Arc::ptr_eq(&first, &second));
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(Arc::ptr_eq(
            &interner.share(None),
            &interner.share(Some(&BTreeMap::new()))
        ));
        let mut input = NodeInput {
            labels: first,
            ..Default::default()
        };
        input.labels_mut().insert("tier".into(), "front".into());
        assert_eq!(second.len(), 1, "a change copies the shared map first");
        assert_eq!(input.labels.len(), 2);
    }
}
