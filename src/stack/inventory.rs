//! Live inventories: what a tool recorded as applied (Flux Kustomization status, cli-utils/kpt
//! inventory objects, Helm release Secrets, kubectl ApplySet parents). A record is the tool's
//! *previous* set: its garbage collector deletes only what is in it and not in the new desired
//! set, so a record bounds the orphans and never adds to them ([`crate::stack::classify::Recorded`]).

mod applyset;
pub mod argo;
mod flux;
mod helm;
mod kapp;
mod kpt;

use kube::api::DynamicObject;

use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_not_found, UserError};
use crate::model::trackers::{MarkValue, Preset, Tracker, FLUX_KUSTOMIZATION};
use crate::stack::classify::Recorded;
use crate::stack::desired::{NamespaceRule, NoNamespace};

use applyset::{find_applyset_parent, load_applyset};
#[cfg(test)]
pub(crate) use flux::NO_INVENTORY;
pub use flux::{flux_record, impersonation_of, impersonation_over, read_flux, unmapped_entries, FluxRecord, FluxStack};
pub use helm::HelmRevision;
use helm::{flux_helm_record, load_helm, no_helm_release, owned_release_record};
use kpt::load_kpt;

/// `--inventory PRESET=REF`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryRef {
    /// Flux Kustomization `NAME[.NAMESPACE]`: its `status.inventory`.
    Flux {
        /// Name.
        name: String,
        /// Namespace (default: the current one).
        namespace: Option<String>,
    },
    /// cli-utils / kpt inventory id: ConfigMaps and ResourceGroups labelled with it.
    Kpt {
        /// Inventory id.
        id: String,
    },
    /// Helm release `NAME[.NAMESPACE]`: its last deployed release Secret.
    Helm {
        /// Release name.
        name: String,
        /// Namespace (default: the current one).
        namespace: Option<String>,
    },
    /// kubectl ApplySet parent `[RESOURCE[.GROUP]/]NAME` (default a Secret).
    ApplySet {
        /// The parent reference.
        parent: String,
    },
}

impl InventoryRef {
    /// Parses `flux=NAME[.NS]`, `kpt=ID`, `helm=NAME[.NS]`, `applyset=PARENT`.
    pub fn parse(text: &str) -> Result<Self, UserError> {
        let usage = || {
            UserError::usage(format!("invalid --inventory {text:?}")).hint(
                "use flux=NAME[.NAMESPACE], kpt=INVENTORY-ID, helm=RELEASE[.NAMESPACE] or applyset=[RESOURCE/]NAME",
            )
        };
        let (preset, value) = text.split_once('=').ok_or_else(usage)?;
        if value.is_empty() {
            return Err(usage());
        }
        let (name, namespace) = split_name(value);
        match preset {
            "flux" => Ok(Self::Flux { name, namespace }),
            "kpt" => Ok(Self::Kpt { id: value.to_string() }),
            "helm" => Ok(Self::Helm { name, namespace }),
            "applyset" => Ok(Self::ApplySet {
                parent: value.to_string(),
            }),
            _ => Err(usage()),
        }
    }
}

fn split_name(value: &str) -> (String, Option<String>) {
    if let Some((namespace, name)) = value.split_once('/') {
        return (name.to_string(), Some(namespace.to_string()));
    }
    match value.rsplit_once('.') {
        Some((name, namespace)) => (name.to_string(), Some(namespace.to_string())),
        None => (value.to_string(), None),
    }
}

/// A loaded inventory: what the tool recorded, and the tracker that selects the stack's objects.
pub struct Inventory {
    /// What the tool recorded as applied last.
    pub recorded: Recorded,
    /// The tracker for the inventory's own stack.
    pub tracker: Tracker,
    /// The namespace the tool gives every namespaced object of the desired set, whatever the
    /// manifests say: a Flux Kustomization's `spec.targetNamespace`.
    pub target_namespace: Option<String>,
    /// The namespace the tool gives a namespaced object written without one: a Helm release's
    /// namespace (Helm builds the manifests with it as the default namespace).
    pub default_namespace: Option<String>,
    /// Why the names the tool applies are not those of a desired set read from files (see
    /// [`StackRecord::renamed_by`]).
    pub renamed_by: Option<String>,
    /// The namespace of the object that holds the record (a kpt inventory's), when it has one.
    pub record_namespace: Option<String>,
}

/// What the stack a `--tracker` names records: its tool's record, when it keeps one, and the
/// namespace it forces on the desired set (Flux `spec.targetNamespace`).
#[derive(Clone, Default)]
pub struct StackRecord {
    /// The tool's record of what it applied last; `None`: its labels alone say what it tracks.
    pub recorded: Option<Recorded>,
    /// A Flux Kustomization's `spec.targetNamespace`.
    pub target_namespace: Option<String>,
    /// The namespace a namespaced manifest without one takes: a Helm release's namespace.
    pub default_namespace: Option<String>,
    /// A Flux HelmRelease's Helm release (its name and the namespace it installs into, as
    /// helm-controller names it and its objects' Helm marks carry): its marks are the
    /// HelmRelease's own.
    pub helm_release: Option<MarkValue>,
    /// The Flux HelmRelease whose record this is (its name and namespace), when a HelmRelease
    /// owns the stack's Helm release, whichever preset named it: its marks are the same stack.
    pub flux_helm_release: Option<MarkValue>,
    /// Why the names its tool applies are not those of a desired set read from files (a Flux
    /// Kustomization that builds with `spec.namePrefix`, ...: see [`refuse_renamed`]).
    pub renamed_by: Option<String>,
    /// Its tool gives a namespaced object written without a namespace none, and fails to apply
    /// it (a Flux Kustomization without `spec.targetNamespace`: see
    /// [`NamespaceRule::Required`]).
    pub namespace_required: Option<NoNamespace>,
    /// The namespace of the object that holds the record: kpt keeps it as still in use (cli-utils
    /// `pkg/apply/applier.go` `localNamespaces` adds the inventory's namespace).
    pub record_namespace: Option<String>,
    /// The values of what its tool builds the manifests with beyond the files (a Flux
    /// Kustomization's `spec.namePrefix`, `spec.patches`, ...; an Argo CD Application's source
    /// overrides), as JSON: [`StackRecord::renamed_by`] says which fields are set, this what they
    /// hold, so that a re-check sees a prefix changed from `a-` to `b-` (membership review 19, F3).
    pub build_overrides: Option<String>,
    /// How its tool reads a desired path, where that is not how kustomize-controller reads it
    /// (see [`PathReading`]); `None`: as kustomize-controller does.
    pub path_reading: Option<PathReading>,
    /// The only kinds its tool lists when it prunes, besides the desired set's: a kapp app's
    /// record `usedGKs`, by the app's label value (see [`kapp::kapp_record`]); `None`: every kind.
    pub kapp_kinds: Option<KappKinds>,
    /// The kinds its tool never manages: an Argo CD Application's (by the name its tracking ids
    /// carry), as its control planes' settings say (see [`argo::ResourceFilter`]).
    pub argo_filter: Option<ArgoFilter>,
    /// Why its tool deletes its members with `propagationPolicy: Orphan` (their dependents
    /// stay): a Flux HelmRelease's `spec.uninstall.deletionPropagation: orphan` on a teardown,
    /// an Argo CD Application's `PrunePropagationPolicy=orphan` on a prune (membership review 30,
    /// F3). A plan deleting with another policy is refused ([`Placement::orphans_dependents`]).
    pub orphans_dependents: Option<String>,
}

/// The name an Argo CD stack's tracking ids carry, and the kinds its Argo CD never manages.
pub type ArgoFilter = (String, argo::ResourceFilter);

/// A kapp app's label value and, for each of its app records, the kinds (group, kind) its
/// `usedGKs` holds.
pub type KappKinds = (String, Vec<Vec<(String, String)>>);

/// How a tool reads the desired path otherwise than kustomize-controller (which builds every
/// directory holding a kustomization, and a generated one elsewhere).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathReading {
    /// Argo CD: it builds a source as the type its source type detection decides, which its
    /// controller records in the Application's status ([`PathReading::ArgoCd::built_as`]): a
    /// `Kustomize` source is built with kustomize at its path; a `Directory` source reads every
    /// file as it is, a kustomization file included, which it ignores (argo-cd
    /// `reposerver/repository/repository.go` `findManifests`); `Helm` and `Plugin` render what
    /// `-f` cannot. It merges `.argocd-source.yaml` and `.argocd-source-<app>.yaml` into the
    /// source before it builds (`mergeSourceParameters`).
    ArgoCd {
        /// The types its Applications were built as; `None`: not recorded.
        built_as: Option<Vec<String>>,
    },
}

impl PathReading {
    /// Why the tool builds the desired paths otherwise than `-f`/`-k` read them (`facts`), if
    /// it does (membership reviews 22 and 23).
    pub fn builds_otherwise(&self, facts: &crate::stack::manifest::BuildFacts) -> Option<String> {
        let PathReading::ArgoCd { built_as } = self;
        let shown = |paths: &[std::path::PathBuf]| {
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !facts.argocd_source_files.is_empty() {
            return Some(format!(
                "Argo CD merges {} into the Application's source before it builds",
                shown(&facts.argocd_source_files)
            ));
        }
        let Some(types) = built_as else {
            return Some(
                "Argo CD records no status.sourceType for the Application: how it builds its path (Directory, Kustomize, Helm, a plugin) is not known"
                    .to_string(),
            );
        };
        if let Some(other) = types.iter().find(|t| !matches!(t.as_str(), "Directory" | "Kustomize")) {
            return Some(format!("Argo CD builds the Application as {other} (status.sourceType)"));
        }
        let built: Vec<std::path::PathBuf> = facts
            .root_kustomizations
            .iter()
            .chain(&facts.nested_kustomizations)
            .cloned()
            .collect();
        if types.iter().any(|t| t == "Directory") && !built.is_empty() {
            return Some(format!(
                "Argo CD builds the Application as a Directory (status.sourceType): it reads the files of {} as they are, without building the kustomization",
                shown(&built)
            ));
        }
        if types.iter().any(|t| t == "Kustomize") && facts.root_kustomizations.is_empty() {
            return Some(
                "Argo CD builds the Application with kustomize (status.sourceType), and no path given holds its kustomization: give the directory that does (-f DIR or -k DIR)"
                    .to_string(),
            );
        }
        None
    }
}

impl StackRecord {
    /// How this stack's tool gives the manifests their namespace: its target namespace over
    /// every one, else its default namespace (a Helm release's) for those without one, else
    /// `fallback` (`-n` or the context's namespace).
    pub fn namespace_rule<'a>(&'a self, fallback: &'a str) -> NamespaceRule<'a> {
        match (&self.target_namespace, &self.default_namespace) {
            (Some(target), _) => NamespaceRule::Target(target),
            (None, _) if let Some(by) = self.namespace_required => NamespaceRule::Required(by),
            (None, Some(default)) => NamespaceRule::Default(default),
            (None, None) => NamespaceRule::Default(fallback),
        }
    }
}

/// How a stack's tool places and names what it applies, as read with its record: all of a
/// [`StackRecord`] but the record itself. A desired set is resolved and compared with it, so an
/// orphan prune's re-check holds the plan's against the one read again
/// ([`Placement::changed_since`]): a stack that now places or names its manifests otherwise (a
/// Flux `spec.targetNamespace` or `spec.patches` set, an Argo CD destination moved) was judged
/// against a desired set that no longer holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    target_namespace: Option<String>,
    default_namespace: Option<String>,
    helm_release: Option<MarkValue>,
    flux_helm_release: Option<MarkValue>,
    renamed_by: Option<String>,
    namespace_required: Option<NoNamespace>,
    record_namespace: Option<String>,
    build_overrides: Option<String>,
    kapp_kinds: Option<KappKinds>,
    argo_filter: Option<ArgoFilter>,
    orphans_dependents: Option<String>,
}

/// The placement each stack's desired set was resolved with, by the marks its objects carry.
pub type Placements = std::collections::HashMap<crate::model::trackers::Mark, Placement>;

impl Placement {
    /// Why the stack's tool deletes with `propagationPolicy: Orphan`, if it does (see
    /// [`StackRecord::orphans_dependents`]).
    pub fn orphans_dependents(&self) -> Option<&str> {
        self.orphans_dependents.as_deref()
    }

    /// What changed since `planned`, in words; `None` when nothing did.
    pub fn changed_since(&self, planned: &Placement) -> Option<String> {
        let shown = |value: &Option<String>| value.clone().unwrap_or_else(|| "none".to_string());
        let mut changes = Vec::new();
        if self.target_namespace != planned.target_namespace {
            changes.push(format!(
                "its target namespace is {} (was {})",
                shown(&self.target_namespace),
                shown(&planned.target_namespace)
            ));
        }
        if self.default_namespace != planned.default_namespace || self.namespace_required != planned.namespace_required
        {
            changes.push(format!(
                "the namespace it gives a manifest without one is {} (was {})",
                shown(&self.default_namespace),
                shown(&planned.default_namespace)
            ));
        }
        if self.renamed_by != planned.renamed_by || self.build_overrides != planned.build_overrides {
            changes.push(match &self.renamed_by {
                Some(why) => format!("{why}, changed"),
                None if self.build_overrides.is_some() => "what it builds with beyond the files changed".to_string(),
                None => "it no longer renames what it builds".to_string(),
            });
        }
        if self.helm_release != planned.helm_release || self.flux_helm_release != planned.flux_helm_release {
            changes.push("the Helm release it manages is another".to_string());
        }
        if self.kapp_kinds != planned.kapp_kinds {
            changes.push("the kinds its kapp app record lists (usedGKs) changed".to_string());
        }
        if self.orphans_dependents != planned.orphans_dependents {
            changes.push("the propagation policy its tool deletes with changed".to_string());
        }
        if self.argo_filter != planned.argo_filter {
            changes
                .push("the kinds its Argo CD manages (resource.exclusions, resource.inclusions) changed".to_string());
        }
        if self.record_namespace != planned.record_namespace {
            changes.push(format!(
                "its record is in namespace {} (was {})",
                shown(&self.record_namespace),
                shown(&planned.record_namespace)
            ));
        }
        (!changes.is_empty()).then(|| changes.join("; "))
    }
}

impl StackRecord {
    /// How this stack's tool places and names what it applies (see [`Placement`]).
    pub fn placement(&self) -> Placement {
        Placement {
            target_namespace: self.target_namespace.clone(),
            default_namespace: self.default_namespace.clone(),
            helm_release: self.helm_release.clone(),
            flux_helm_release: self.flux_helm_release.clone(),
            renamed_by: self.renamed_by.clone(),
            namespace_required: self.namespace_required,
            record_namespace: self.record_namespace.clone(),
            build_overrides: self.build_overrides.clone(),
            kapp_kinds: self.kapp_kinds.clone(),
            argo_filter: self.argo_filter.clone(),
            orphans_dependents: self.orphans_dependents.clone(),
        }
    }
}

impl From<Inventory> for StackRecord {
    fn from(inventory: Inventory) -> Self {
        // A Flux Kustomization's, as [`FluxStack::into_record`] reads it.
        let namespace_required = (inventory.tracker.preset == Preset::Flux && inventory.target_namespace.is_none())
            .then_some(NoNamespace::Flux);
        Self {
            recorded: Some(inventory.recorded),
            target_namespace: inventory.target_namespace,
            default_namespace: inventory.default_namespace,
            helm_release: None,
            flux_helm_release: None,
            renamed_by: inventory.renamed_by,
            build_overrides: None,
            namespace_required,
            record_namespace: inventory.record_namespace,
            path_reading: None,
            kapp_kinds: None,
            argo_filter: None,
            orphans_dependents: None,
        }
    }
}

/// Reads a live inventory the user named; a stack that keeps no record is an error (a Flux
/// Kustomization that records no `status.inventory` is a record of nothing: [`flux_record`]).
pub async fn load(reference: &InventoryRef, session: &Session) -> Result<Inventory, UserError> {
    match reference {
        InventoryRef::Flux { name, namespace } => {
            let namespace = namespace
                .clone()
                .unwrap_or_else(|| session.connection.namespace.clone());
            let (group, kind) = FLUX_KUSTOMIZATION;
            served(session, group, kind)?;
            let stack = read_flux(session, name, &namespace).await?.ok_or_else(|| {
                UserError::failed(format!("Kustomization {namespace}/{name} not found"))
                    .hint("check the name and namespace (`kubectl get kustomizations -A`)")
            })?;
            let renamed_by = flux_comparison(&stack, name, &namespace)?;
            // One that records no status.inventory is a record of nothing (see `flux_record`).
            let mut inventory = stack.inventory;
            inventory.renamed_by = renamed_by;
            Ok(inventory)
        }
        InventoryRef::Kpt { id } => load_kpt(session, id).await.map_err(Unloaded::into_user_error),
        InventoryRef::Helm { name, namespace } => {
            let namespace = namespace
                .clone()
                .unwrap_or_else(|| session.connection.namespace.clone());
            load_helm(session, name, &namespace, HelmRevision::LastDeployed)
                .await
                .map_err(Unloaded::into_user_error)
        }
        InventoryRef::ApplySet { parent } => load_applyset(session, parent).await.map_err(Unloaded::into_user_error),
    }
}

/// Reads the record a `--inventory` names, with the tracker of its stack: [`load`], except that
/// a Helm release a Flux HelmRelease manages is that HelmRelease's record (see [`record_of`]).
pub async fn load_stack(reference: &InventoryRef, session: &Session) -> Result<(Tracker, StackRecord), UserError> {
    if let InventoryRef::Helm { name, namespace } = reference {
        let namespace = namespace
            .clone()
            .unwrap_or_else(|| session.connection.namespace.clone());
        if let Some(owned) = owned_release_record(session, name, &namespace, HelmRevision::LastDeployed).await? {
            let tracker = Tracker {
                preset: Preset::Helm,
                value: Some(MarkValue {
                    name: name.clone(),
                    namespace: Some(namespace),
                }),
            };
            return Ok((tracker, owned));
        }
    }
    let loaded = load(reference, session).await?;
    Ok((loaded.tracker.clone(), loaded.into()))
}

fn served<'a>(session: &'a Session, group: &str, kind: &str) -> Result<&'a KindInfo, UserError> {
    session.catalog.get(group, kind).map(|k| k.as_ref()).ok_or_else(|| {
        UserError::failed(format!(
            "the cluster does not serve {}",
            crate::model::identity::kind_with_group(kind, group)
        ))
    })
}

async fn get_object(
    session: &Session,
    kind: &KindInfo,
    namespace: Option<&str>,
    name: &str,
) -> Result<DynamicObject, Unloaded> {
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, namespace);
    with_retries("get inventory", || api.get(name)).await.map_err(|err| {
        if is_not_found(&err) {
            Unloaded::Absent(UserError::failed(format!(
                "{} {}{name} not found",
                kind.kind_with_group(),
                namespace.map(|n| format!("{n}/")).unwrap_or_default()
            )))
        } else {
            Unloaded::Failed(session.connection.explain(&err))
        }
    })
}

/// The record of the stack a `--tracker` names, when its tool keeps one it can be read from
/// (see [`record_of`]); none for a preset without a value. A value without a namespace means
/// the current namespace.
pub async fn load_for_tracker(tracker: &Tracker, session: &Session) -> Result<StackRecord, UserError> {
    let Some(value) = tracker.value.as_ref() else {
        return Ok(StackRecord::default());
    };
    let value = MarkValue {
        name: value.name.clone(),
        namespace: Some(
            value
                .namespace
                .clone()
                .unwrap_or_else(|| session.connection.namespace.clone()),
        ),
    };
    record_of(tracker.preset, &value, session).await
}

/// The record of the stack a mark names — Flux `status.inventory` (and its
/// `spec.targetNamespace`), a Helm release (and its namespace), a Flux HelmRelease's Helm
/// release, a cli-utils/kpt inventory, an ApplySet parent (by name, or found by its id) — the
/// one function every path reads a stack's record with. `recorded: None` when the tool keeps
/// none under that mark (no such Kustomization, release Secret, inventory or parent): its
/// labels alone say what it tracks, and the caller says so. An error when the record exists
/// but cannot be read, or is not one the tool would act on (a Helm release with no deployed
/// revision): what the tool would prune is then unknown.
pub async fn record_of(preset: Preset, value: &MarkValue, session: &Session) -> Result<StackRecord, UserError> {
    record_as(preset, value, session, HelmRevision::LastDeployed).await
}

/// [`record_of`] as the stack's tool reads it when the stack itself is deleted: the same record,
/// but a Helm release (and a Flux HelmRelease's) is what `helm uninstall` deletes, its latest
/// revision (see [`HelmRevision`]). What a teardown's members are bounded by.
pub async fn uninstall_record_of(
    preset: Preset,
    value: &MarkValue,
    session: &Session,
) -> Result<StackRecord, UserError> {
    record_as(preset, value, session, HelmRevision::Latest).await
}

async fn record_as(
    preset: Preset,
    value: &MarkValue,
    session: &Session,
    helm_revision: HelmRevision,
) -> Result<StackRecord, UserError> {
    let namespace = value
        .namespace
        .clone()
        .unwrap_or_else(|| session.connection.namespace.clone());
    let found = match preset {
        Preset::Flux => {
            let Some(stack) = read_flux(session, &value.name, &namespace).await? else {
                return Ok(StackRecord::default());
            };
            let renamed_by = flux_comparison(&stack, &value.name, &namespace)?;
            return Ok(StackRecord {
                renamed_by,
                ..stack.into_record()
            });
        }
        Preset::FluxHelm => return flux_helm_record(session, &value.name, &namespace, helm_revision).await,
        Preset::Helm => match owned_release_record(session, &value.name, &namespace, helm_revision).await? {
            // A release a Flux HelmRelease manages is that HelmRelease's record.
            Some(owned) => return Ok(owned),
            None => load_helm(session, &value.name, &namespace, helm_revision).await,
        },
        Preset::ArgoCd => {
            let comparing = helm_revision == HelmRevision::LastDeployed;
            return argo::argo_record(session, value, comparing).await;
        }
        Preset::Kapp => {
            let comparing = helm_revision == HelmRevision::LastDeployed;
            return kapp::kapp_record(session, &value.name, comparing).await;
        }
        Preset::Kpt => load_kpt(session, &value.name).await,
        Preset::ApplySet if value.name.starts_with("applyset-") => {
            match find_applyset_parent(session, &value.name).await? {
                Some(parent) => Ok(parent),
                None => Err(Unloaded::Absent(UserError::failed(format!(
                    "no parent carries {}={} as its own id",
                    crate::model::trackers::APPLYSET_ID,
                    value.name
                )))),
            }
        }
        // A parent given by name: kubectl's own prune reads that parent.
        Preset::ApplySet => load_applyset(session, &value.name).await,
        _ => return Ok(StackRecord::default()),
    };
    let default_namespace = matches!(preset, Preset::Helm).then_some(namespace);
    match found {
        Ok(found) => Ok(found.into()),
        Err(Unloaded::Absent(err)) if preset == Preset::Helm => Err(no_helm_release(&value.name, &err)),
        Err(Unloaded::Absent(err)) if matches!(preset, Preset::Kpt | Preset::ApplySet) => Ok(StackRecord {
            recorded: Some(gone_record(preset, &value.name, &err)),
            ..StackRecord::default()
        }),
        Err(Unloaded::Absent(err)) => {
            tracing::debug!("no record for {}: {}", preset.name(), err.message);
            Ok(StackRecord {
                default_namespace,
                ..StackRecord::default()
            })
        }
        Err(Unloaded::Failed(err)) => Err(err),
    }
}

/// The record of a kpt inventory or ApplySet parent that is gone (a finished `kpt live destroy`,
/// a deleted parent): its tool prunes nothing under that mark, so neither does kubectl-stack, and
/// its labels never take over. cli-utils prunes only what the inventory object in the cluster
/// lists (kubernetes-sigs/cli-utils `pkg/apply/prune/prune.go`: the prune set is the cluster
/// inventory's objects; a new inventory lists none). kubectl prunes only the group-kinds the live
/// parent lists (`applyset.kubernetes.io/contains-group-kinds`, read in `fetchParent`): with the
/// parent gone, `kubectl apply --prune --applyset` re-creates it and prunes nothing (checked with
/// kubectl 1.32 against a live cluster, `tests/orphans_record.rs`).
fn gone_record(preset: Preset, name: &str, err: &UserError) -> Recorded {
    let (stack, why) = match preset {
        Preset::Kpt => (
            format!("kpt inventory {name}"),
            format!(
                "is gone ({}): `kpt live apply` prunes only what the inventory object in the cluster lists, so it prunes nothing of it",
                err.message
            ),
        ),
        _ => (
            format!("ApplySet {name}"),
            format!(
                "has no parent ({}): `kubectl apply --prune --applyset` prunes only the kinds the live parent lists, so it prunes nothing of it (it re-creates the parent)",
                err.message
            ),
        ),
    };
    Recorded::NoInventory { stack, why }
}

/// A stack whose tool prunes nothing: none of its objects is an orphan (refused when named,
/// never an orphan under `-l`).
/// What a Kustomization's spec says of comparing its record with a desired set, the same for
/// `--tracker flux=` and `--inventory flux=`: with `spec.prune: false` Flux deletes nothing it
/// applied (refused); a spec that renames what it builds (see [`FluxStack::renames`]) is named,
/// for [`refuse_renamed`].
fn flux_comparison(stack: &FluxStack, name: &str, namespace: &str) -> Result<Option<String>, UserError> {
    if let Some(why) = &stack.acts_elsewhere {
        return Err(prunes_nothing(why));
    }
    if stack.prune_disabled {
        return Err(prunes_nothing(&format!(
            "Kustomization {namespace}/{name} has spec.prune: false: Flux deletes nothing it applied"
        )));
    }
    Ok((!stack.renames.is_empty()).then(|| {
        format!(
            "Kustomization {namespace}/{name} builds with spec.{}",
            stack.renames.join(", spec.")
        )
    }))
}

/// A desired set read from files (`-f`/`-k`, whose paths `compared` describes; `None`: no
/// desired set) is compared with the record of a stack whose tool renames what it builds, or
/// reads those paths otherwise ([`PathReading`]), only when the user says the files are that
/// tool's own build (`--as-built`): otherwise the names differ, and everything the tool keeps
/// would be called an orphan.
pub fn refuse_renamed(
    stack: &StackRecord,
    compared: Option<&crate::stack::manifest::BuildFacts>,
    as_built: bool,
) -> Result<(), UserError> {
    let read_otherwise = || {
        let facts = compared?;
        stack.path_reading.as_ref()?.builds_otherwise(facts)
    };
    match stack.renamed_by.clone().or_else(read_otherwise) {
        Some(why) if compared.is_some() && !as_built => Err(UserError::refused(format!(
            "{why}, which -f/-k do not reproduce: the names it applies are not those of the desired set given, and comparing them would call what its tool keeps an orphan"
        ))
        .hint("compare with what the tool built (`flux build kustomization NAME --path DIR > built.yaml`, `argocd app manifests NAME > built.yaml`), then -f built.yaml --as-built")),
        _ => Ok(()),
    }
}

pub(crate) fn prunes_nothing(why: &str) -> UserError {
    UserError::refused(format!("{why}, so nothing of it is an orphan"))
        .hint("prune it with its own tool's rules in mind, or name another stack")
}

/// Why a tool's record was not loaded: told apart by the loader where it knows (a 404, an empty
/// list), never by the words of a message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unloaded {
    /// The stack keeps no record under that name (no release Secret, no inventory object, no
    /// parent): what that means is the caller's to say (see [`record_of`]).
    #[error("{}", .0.message)]
    Absent(UserError),
    /// The record could not be read, or its tool would refuse it.
    #[error("{}", .0.message)]
    Failed(#[from] UserError),
}

impl Unloaded {
    /// The error for the user, absent or not (a record the user named must exist).
    pub(crate) fn into_user_error(self) -> UserError {
        match self {
            Unloaded::Absent(err) | Unloaded::Failed(err) => err,
        }
    }
}

async fn list_labelled(session: &Session, kind: &KindInfo, selector: &str) -> Result<Vec<DynamicObject>, UserError> {
    let query = crate::cluster::collect::ListQuery {
        labels: Some(selector),
        page_size: LABELLED_PAGE,
        ..Default::default()
    };
    crate::cluster::collect::list_query(&session.connection.client, kind, &query)
        .await
        .map_err(|err| session.connection.explain(&err))
}

/// Page size of the lists of a tool's record objects by label: a few objects among possibly
/// many of their kind (every ConfigMap of the cluster, for a kpt inventory id). The API server
/// reads its store page by page until a page is full, starting at this size: at the usual 500,
/// a label that only a few of 50,000 ConfigMaps carry costs it many reads (1.6 s against
/// 0.6 s at 10,000, the most it reads at once).
const LABELLED_PAGE: u32 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventory_refs_parse() {
        assert_eq!(
            InventoryRef::parse("flux=apps.flux-system").unwrap(),
            InventoryRef::Flux {
                name: "apps".into(),
                namespace: Some("flux-system".into())
            }
        );
        assert_eq!(
            InventoryRef::parse("kpt=abc-123").unwrap(),
            InventoryRef::Kpt { id: "abc-123".into() }
        );
        assert_eq!(
            InventoryRef::parse("helm=web").unwrap(),
            InventoryRef::Helm {
                name: "web".into(),
                namespace: None
            }
        );
        assert!(InventoryRef::parse("flux").is_err());
        assert!(InventoryRef::parse("argo=x").is_err());
    }

    #[test]
    fn a_stacks_namespace_rule_is_its_target_else_its_default_else_the_fallback() {
        let stack = |target: Option<&str>, default: Option<&str>| StackRecord {
            recorded: None,
            target_namespace: target.map(str::to_string),
            default_namespace: default.map(str::to_string),
            ..StackRecord::default()
        };
        assert_eq!(
            stack(Some("t"), Some("d")).namespace_rule("n"),
            NamespaceRule::Target("t")
        );
        assert_eq!(stack(None, Some("d")).namespace_rule("n"), NamespaceRule::Default("d"));
        assert_eq!(stack(None, None).namespace_rule("n"), NamespaceRule::Default("n"));
        // A Flux Kustomization without a target namespace gives none (see `NamespaceRule::Required`).
        let flux = |target: Option<&str>| StackRecord {
            namespace_required: Some(NoNamespace::Flux),
            ..stack(target, None)
        };
        assert_eq!(
            flux(None).namespace_rule("n"),
            NamespaceRule::Required(NoNamespace::Flux)
        );
        assert_eq!(flux(Some("t")).namespace_rule("n"), NamespaceRule::Target("t"));
    }
}
