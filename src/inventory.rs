//! Live inventories: what a tool recorded as applied (Flux Kustomization status, cli-utils/kpt
//! inventory objects, Helm release Secrets, kubectl ApplySet parents). A record is the tool's
//! *previous* set: its garbage collector deletes only what is in it and not in the new desired
//! set, so a record bounds the orphans and never adds to them ([`crate::classify::Recorded`]).

use std::collections::HashSet;
use std::io::Read;

use base64::Engine;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::classify::Recorded;
use crate::desired::{DesiredSet, NamespaceRule, Origin, Scopes};
use crate::discovery::KindInfo;
use crate::error::{is_not_found, UserError};
use crate::identity::ObjectId;
use crate::manifest::parse_text;
use crate::retry::with_retries;
use crate::session::Session;
use crate::trackers::{applyset_id, MarkValue, Preset, Tracker, FLUX_KUSTOMIZATION};

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
}

/// What the stack a `--tracker` names records: its tool's record, when it keeps one, and the
/// namespace it forces on the desired set (Flux `spec.targetNamespace`).
#[derive(Default)]
pub struct StackRecord {
    /// The tool's record of what it applied last; `None`: its labels alone say what it tracks.
    pub recorded: Option<Recorded>,
    /// A Flux Kustomization's `spec.targetNamespace`.
    pub target_namespace: Option<String>,
    /// The namespace a namespaced manifest without one takes: a Helm release's namespace.
    pub default_namespace: Option<String>,
}

impl StackRecord {
    /// How this stack's tool gives the manifests their namespace: its target namespace over
    /// every one, else its default namespace (a Helm release's) for those without one, else
    /// `fallback` (`-n` or the context's namespace).
    pub fn namespace_rule<'a>(&'a self, fallback: &'a str) -> NamespaceRule<'a> {
        match (&self.target_namespace, &self.default_namespace) {
            (Some(target), _) => NamespaceRule::Target(target),
            (None, Some(default)) => NamespaceRule::Default(default),
            (None, None) => NamespaceRule::Default(fallback),
        }
    }
}

impl From<Inventory> for StackRecord {
    fn from(inventory: Inventory) -> Self {
        Self {
            recorded: Some(inventory.recorded),
            target_namespace: inventory.target_namespace,
            default_namespace: inventory.default_namespace,
        }
    }
}

/// A Flux Kustomization as the orphan rules read it.
pub struct FluxStack {
    /// Its `status.inventory`, when it records one.
    pub inventory: Option<Inventory>,
    /// Its `spec.targetNamespace`, when set (an empty one sets nothing, as in Flux).
    pub target_namespace: Option<String>,
    /// `spec.prune: false`: Flux deletes nothing it applied (fluxcd/kustomize-controller
    /// `internal/controller/kustomization_controller.go` `prune`: `if !obj.Spec.Prune { return }`).
    pub prune_disabled: bool,
}

/// Reads a live inventory the user named; a stack that keeps no record is an error.
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
            stack.inventory.ok_or_else(|| {
                UserError::failed(format!("Kustomization {namespace}/{name} has no status.inventory"))
                    .hint("Flux records an inventory once a reconciliation succeeded; compare with -f/-k and --tracker instead")
            })
        }
        InventoryRef::Kpt { id } => load_kpt(session, id).await,
        InventoryRef::Helm { name, namespace } => {
            let namespace = namespace
                .clone()
                .unwrap_or_else(|| session.connection.namespace.clone());
            load_helm(session, name, &namespace).await
        }
        InventoryRef::ApplySet { parent } => load_applyset(session, parent).await,
    }
}

fn served<'a>(session: &'a Session, group: &str, kind: &str) -> Result<&'a KindInfo, UserError> {
    session.catalog.get(group, kind).map(|k| k.as_ref()).ok_or_else(|| {
        UserError::failed(format!(
            "the cluster does not serve {}",
            crate::discovery::kind_with_group(kind, group)
        ))
    })
}

async fn get_object(
    session: &Session,
    kind: &KindInfo,
    namespace: Option<&str>,
    name: &str,
) -> Result<DynamicObject, UserError> {
    let api = crate::collect::api_for(&session.connection.client, kind, namespace);
    with_retries("get inventory", || api.get(name)).await.map_err(|err| {
        if is_not_found(&err) {
            UserError::failed(format!(
                "{} {}{name} not found",
                kind.kind_with_group(),
                namespace.map(|n| format!("{n}/")).unwrap_or_default()
            ))
        } else {
            session.connection.explain(&err)
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
    let namespace = value
        .namespace
        .clone()
        .unwrap_or_else(|| session.connection.namespace.clone());
    let found = match preset {
        Preset::Flux => {
            let stack = read_flux(session, &value.name, &namespace).await?;
            if stack.as_ref().is_some_and(|stack| stack.prune_disabled) {
                return Err(prunes_nothing(&format!(
                    "Kustomization {namespace}/{} has spec.prune: false: Flux deletes nothing it applied",
                    value.name
                )));
            }
            return Ok(stack.map(FluxStack::into_record).unwrap_or_default());
        }
        Preset::FluxHelm => return flux_helm_record(session, &value.name, &namespace).await,
        Preset::Helm => load_helm(session, &value.name, &namespace).await,
        Preset::Kpt => load_kpt(session, &value.name).await,
        Preset::ApplySet if value.name.starts_with("applyset-") => {
            match find_applyset_parent(session, &value.name).await? {
                Some(parent) => Ok(parent),
                None => return Ok(StackRecord::default()),
            }
        }
        // A parent given by name: kubectl's own prune reads that parent.
        Preset::ApplySet => load_applyset(session, &value.name).await,
        _ => return Ok(StackRecord::default()),
    };
    let default_namespace = matches!(preset, Preset::Helm).then_some(namespace);
    match found {
        Ok(found) => Ok(found.into()),
        Err(err) if is_absent(&err) && preset == Preset::Helm => Err(no_helm_release(&value.name, &err)),
        Err(err) if is_absent(&err) => {
            tracing::debug!("no record for {}: {}", preset.name(), err.message);
            Ok(StackRecord {
                default_namespace,
                ..StackRecord::default()
            })
        }
        Err(err) => Err(err),
    }
}

/// A stack whose tool prunes nothing: none of its objects is an orphan (refused when named,
/// never an orphan under `-l`).
fn prunes_nothing(why: &str) -> UserError {
    UserError::refused(format!("{why}, so nothing of it is an orphan"))
        .hint("prune it with its own tool's rules in mind, or name another stack")
}

/// No Helm release record to read: Helm deletes only through an upgrade's diff against its
/// release (helm/helm v3 `pkg/action/upgrade.go`), never by label, so nothing is an orphan.
fn no_helm_release(release: &str, err: &UserError) -> UserError {
    UserError::refused(format!(
        "no Helm release {release} to compare with ({}): Helm deletes only what its release records, so nothing of it is an orphan",
        err.message
    ))
    .hint("kubectl-stack reads releases from Secrets (Helm's default driver); a release stored in ConfigMaps or SQL cannot be read")
}

/// Whether a load failed because the stack keeps no record under that name (no release
/// Secret, no inventory object, no parent): not an error, the labels are all there is.
fn is_absent(err: &UserError) -> bool {
    err.message.contains("not found") || err.message.starts_with("no ")
}

/// The API group of Flux HelmReleases.
const FLUX_HR_GROUP: &str = "helm.toolkit.fluxcd.io";

/// The Helm release a Flux HelmRelease manages, as helm-controller names it (fluxcd/helm-controller
/// `api/v2*/helmrelease_types.go`: `GetReleaseName` is `spec.releaseName`, else
/// `[<targetNamespace>-]<name>`; `GetReleaseNamespace` is `spec.targetNamespace`, else the
/// HelmRelease's namespace; `GetStorageNamespace` is `spec.storageNamespace`, else the
/// HelmRelease's namespace), read as `--tracker helm=` reads a release. No HelmRelease (or no
/// such kind served): no record. One that cannot be read, or whose release name is longer
/// than Helm allows (helm-controller shortens it with a hash): an error.
async fn flux_helm_record(session: &Session, name: &str, namespace: &str) -> Result<StackRecord, UserError> {
    let Some(kind) = session.catalog.get(FLUX_HR_GROUP, "HelmRelease") else {
        return Ok(StackRecord::default());
    };
    let api = crate::collect::api_for(&session.connection.client, kind, Some(namespace));
    let object = match with_retries("get HelmRelease", || api.get(name)).await {
        Ok(object) => object,
        Err(err) if is_not_found(&err) => return Ok(StackRecord::default()),
        Err(err) => {
            return Err(UserError::refused(format!(
                "HelmRelease {namespace}/{name} cannot be read ({}): its Helm release decides what helm-controller would prune",
                session.connection.explain(&err).message
            )))
        }
    };
    let spec = |field: &str| {
        object
            .data
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let target = spec("targetNamespace");
    let release = spec("releaseName").unwrap_or_else(|| match &target {
        Some(target) => format!("{target}-{name}"),
        None => name.to_string(),
    });
    if release.len() > 53 {
        return Err(UserError::refused(format!(
            "HelmRelease {namespace}/{name}: release name {release:?} is longer than 53 characters, and helm-controller shortens it"
        )));
    }
    let storage = spec("storageNamespace").unwrap_or_else(|| namespace.to_string());
    match load_helm(session, &release, &storage).await {
        Ok(found) => Ok(found.into()),
        Err(err) if is_absent(&err) => Err(no_helm_release(&release, &err)),
        Err(err) => Err(err),
    }
}

impl FluxStack {
    fn into_record(self) -> StackRecord {
        StackRecord {
            recorded: self.inventory.map(|inventory| inventory.recorded),
            target_namespace: self.target_namespace,
            default_namespace: None,
        }
    }
}

/// Reads a Flux Kustomization: its inventory and target namespace. `None` when the cluster
/// serves no Kustomizations or this one does not exist; a refusal (exit 4) when it exists but
/// cannot be read (forbidden, the server failing): guessing its inventory or target namespace
/// could make what Flux keeps look like orphans.
pub async fn read_flux(session: &Session, name: &str, namespace: &str) -> Result<Option<FluxStack>, UserError> {
    let (group, kind) = FLUX_KUSTOMIZATION;
    let Some(kind) = session.catalog.get(group, kind) else {
        return Ok(None);
    };
    let api = crate::collect::api_for(&session.connection.client, kind, Some(namespace));
    let object = match with_retries("get Kustomization", || api.get(name)).await {
        Ok(object) => object,
        Err(err) if is_not_found(&err) => return Ok(None),
        Err(err) => {
            return Err(UserError::refused(format!(
                "Kustomization {namespace}/{name} cannot be read ({}): its inventory and targetNamespace decide what Flux would prune",
                session.connection.explain(&err).message
            ))
            .hint("allow `get` on kustomizations.kustomize.toolkit.fluxcd.io, or retry when the API server answers"))
        }
    };
    let target_namespace = target_namespace_of(&object);
    let prune_disabled = object.data.pointer("/spec/prune").and_then(Value::as_bool) == Some(false);
    Ok(Some(FluxStack {
        inventory: flux_inventory(&object, name, namespace, target_namespace.clone())?,
        target_namespace,
        prune_disabled,
    }))
}

/// A Kustomization's `spec.targetNamespace`; an empty one sets nothing (fluxcd/pkg
/// `kustomize/kustomize_generator.go` sets the kustomization's `namespace:` to it, and kustomize
/// leaves namespaces alone when that is empty).
fn target_namespace_of(kustomization: &DynamicObject) -> Option<String> {
    kustomization
        .data
        .pointer("/spec/targetNamespace")
        .and_then(Value::as_str)
        .filter(|target| !target.is_empty())
        .map(str::to_string)
}

/// Flux v2 (fluxcd/kustomize-controller `internal/controller/kustomization_controller.go`:
/// `staleObjects := inventory.Diff(oldInventory, newInventory)`, then `prune`): the objects
/// deleted are those of the previous `status.inventory` that the new inventory lacks.
/// `None` when the Kustomization records none.
fn flux_inventory(
    object: &DynamicObject,
    name: &str,
    namespace: &str,
    target_namespace: Option<String>,
) -> Result<Option<Inventory>, UserError> {
    let Some(entries) = object
        .data
        .pointer("/status/inventory/entries")
        .and_then(Value::as_array)
    else {
        return Ok(None);
    };
    let mut ids = Vec::new();
    for entry in entries {
        let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
        ids.push(ObjectId::from_flux_inventory_id(id).ok_or_else(|| {
            UserError::failed(format!(
                "Kustomization {namespace}/{name}: inventory entry {id:?} is not <namespace>_<name>_<group>_<Kind>"
            ))
        })?);
    }
    let tracker = Tracker {
        preset: Preset::Flux,
        value: Some(MarkValue {
            name: name.to_string(),
            namespace: Some(namespace.to_string()),
        }),
    };
    Ok(Some(Inventory {
        recorded: Recorded::Ids {
            ids: ids.into_iter().collect(),
            inventory: format!("the inventory of Kustomization {namespace}/{name}"),
            owner: Some(tracker.clone()),
        },
        tracker,
        target_namespace,
        default_namespace: None,
    }))
}

/// cli-utils/kpt (kubernetes-sigs/cli-utils `pkg/apply/prune/prune.go`, `pkg/inventory/policy.go`):
/// prune candidates are the inventory's objects missing from the new set, and only those whose
/// `config.k8s.io/owning-inventory` is this inventory (the `--tracker kpt=ID` selection).
async fn load_kpt(session: &Session, id: &str) -> Result<Inventory, UserError> {
    let selector = format!("cli-utils.sigs.k8s.io/inventory-id={id}");
    let mut ids = Vec::new();
    let mut found_any = false;
    let config_maps = served(session, "", "ConfigMap")?;
    for object in list_labelled(session, config_maps, &selector).await? {
        found_any = true;
        let data = object
            .data
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        ids.extend(data.keys().filter_map(|key| ObjectId::from_flux_inventory_id(key)));
    }
    if let Some(groups) = session.catalog.get("kpt.dev", "ResourceGroup") {
        for object in list_labelled(session, groups, &selector).await? {
            found_any = true;
            let resources = object
                .data
                .pointer("/spec/resources")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            ids.extend(resources.iter().filter_map(|r| {
                let field = |name: &str| r.get(name).and_then(Value::as_str).unwrap_or("");
                (!field("kind").is_empty())
                    .then(|| ObjectId::new(field("group"), field("kind"), Some(field("namespace")), field("name")))
            }));
        }
    }
    if !found_any {
        return Err(UserError::failed(format!("no inventory object labelled {selector}"))
            .hint("check the id (`kubectl get cm -A -l cli-utils.sigs.k8s.io/inventory-id`)"));
    }
    let tracker = Tracker {
        preset: Preset::Kpt,
        value: Some(MarkValue {
            name: id.to_string(),
            namespace: None,
        }),
    };
    Ok(Inventory {
        recorded: Recorded::Ids {
            ids: ids.into_iter().collect(),
            inventory: format!("inventory {id}"),
            owner: Some(tracker.clone()),
        },
        tracker,
        target_namespace: None,
        default_namespace: None,
    })
}

async fn list_labelled(session: &Session, kind: &KindInfo, selector: &str) -> Result<Vec<DynamicObject>, UserError> {
    crate::collect::list_objects(&session.connection.client, kind, None, Some(selector))
        .await
        .map_err(|err| session.connection.explain(&err))
}

/// Helm v3 (helm/helm `pkg/action/upgrade.go`, `pkg/storage/storage.go` `Deployed`): an upgrade
/// deletes what the last *deployed* revision's manifest has and the new one lacks; a pending or
/// failed revision above it is not the current release (a rollback needs the deployed objects).
/// Hooks are kept out of the manifest, so they are never in the record.
async fn load_helm(session: &Session, release: &str, namespace: &str) -> Result<Inventory, UserError> {
    let secrets = served(session, "", "Secret")?;
    let labels = format!("owner=helm,name={release}");
    let query = crate::collect::ListQuery {
        namespace: Some(namespace),
        labels: Some(&labels),
        fields: Some("type=helm.sh/release.v1"),
        ..Default::default()
    };
    let releases = crate::collect::list_query(&session.connection.client, secrets, &query)
        .await
        .map_err(|err| session.connection.explain(&err))?;
    let revisions: Vec<(u64, String, DynamicObject)> = releases
        .into_iter()
        .filter_map(|s| {
            let labels = s.metadata.labels.as_ref()?;
            let version = labels.get("version")?.parse::<u64>().ok()?;
            let status = labels.get("status").cloned().unwrap_or_default();
            Some((version, status, s))
        })
        .collect();
    if revisions.is_empty() {
        return Err(
            UserError::failed(format!("no release Secret for Helm release {namespace}/{release}"))
                .hint("Helm keeps sh.helm.release.v1.<name>.v<revision> Secrets in the release namespace"),
        );
    }
    let Some((version, secret)) = last_deployed(revisions) else {
        return Err(UserError::refused(format!(
            "Helm release {namespace}/{release} has no deployed revision: Helm itself would not upgrade or prune it"
        ))
        .hint("see `helm history`; roll back or finish the pending operation first"));
    };
    let decoded = helm_release(&secret).map_err(|why| {
        UserError::failed(format!(
            "cannot read Helm release {namespace}/{release} v{version}: {why}"
        ))
    })?;
    let manifest = decoded.get("manifest").and_then(Value::as_str).unwrap_or_default();
    // Helm builds the manifests with the release namespace as the default namespace
    // (helm/helm `pkg/kube/client.go` `Build`: `NamespaceParam(...).DefaultNamespace()`); it is
    // the storage namespace unless the release was stored elsewhere (Flux `storageNamespace`).
    let release_namespace = decoded
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(namespace)
        .to_string();
    let manifests = parse_text(manifest, &format!("helm release {namespace}/{release} v{version}"))?;
    let scopes = Scopes::new(Some(&session.catalog), &manifests);
    let record = format!("Helm release {namespace}/{release} v{version}");
    let set = DesiredSet::from_manifests(
        &manifests,
        &scopes,
        &release_namespace,
        Origin::Inventory(record.clone()),
    );
    Ok(Inventory {
        recorded: Recorded::Ids {
            ids: set.ids,
            inventory: record,
            // Helm deletes what the old manifest has and the new one lacks, marked or not.
            owner: None,
        },
        tracker: Tracker {
            preset: Preset::Helm,
            value: Some(MarkValue {
                name: release.to_string(),
                namespace: Some(release_namespace.clone()),
            }),
        },
        target_namespace: None,
        default_namespace: Some(release_namespace),
    })
}

/// The highest revision whose status is `deployed`, with its Secret.
fn last_deployed<T>(revisions: Vec<(u64, String, T)>) -> Option<(u64, T)> {
    revisions
        .into_iter()
        .filter(|(_, status, _)| status == "deployed")
        .max_by_key(|(version, _, _)| *version)
        .map(|(version, _, secret)| (version, secret))
}

/// The `manifest` of a Helm release Secret: `data.release` is base64 (the API's) of base64
/// (Helm's) of gzip of JSON. The Secret's data is never printed.
pub fn helm_manifest(secret: &DynamicObject) -> Result<String, String> {
    Ok(helm_release(secret)?
        .get("manifest")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

/// The release JSON of a Helm release Secret (see [`helm_manifest`]).
fn helm_release(secret: &DynamicObject) -> Result<Value, String> {
    let engine = base64::engine::general_purpose::STANDARD;
    let field = secret
        .data
        .pointer("/data/release")
        .and_then(Value::as_str)
        .ok_or("no data.release")?;
    let helm_encoded = engine
        .decode(field)
        .map_err(|e| format!("data.release is not base64: {e}"))?;
    let compressed = engine
        .decode(&helm_encoded)
        .map_err(|e| format!("release is not base64: {e}"))?;
    let json = if compressed.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(compressed.as_slice())
            .read_to_end(&mut text)
            .map_err(|e| format!("release is not gzip: {e}"))?;
        text
    } else {
        compressed
    };
    serde_json::from_slice(&json).map_err(|e| format!("release is not JSON: {e}"))
}

/// kubectl ApplySet (kubernetes/kubectl `pkg/cmd/apply/applyset_pruner.go`
/// `FindAllObjectsToPrune`): kubectl lists members of the parent's `contains-group-kinds` in the
/// parent's namespace and its `additional-namespaces`, and prunes those not applied this time.
async fn load_applyset(session: &Session, parent: &str) -> Result<Inventory, UserError> {
    let (resource, name) = parent.split_once('/').unwrap_or(("secrets", parent));
    let kind = session
        .catalog
        .resolve(resource)
        .ok_or_else(|| UserError::usage(format!("unknown ApplySet parent kind {resource:?}")))?
        .clone();
    let namespace = kind.namespaced.then_some(session.connection.namespace.as_str());
    let object = get_object(session, &kind, namespace, name).await?;
    Ok(applyset_inventory(&object, &kind))
}

/// The ApplySet label a parent carries: `applyset.kubernetes.io/id`.
const APPLYSET_ID: &str = "applyset.kubernetes.io/id";
/// The label that makes a CRD's kind an ApplySet parent kind (KEP-3659).
const APPLYSET_PARENT_TYPE: &str = "applyset.kubernetes.io/is-parent-type";

/// The ApplySet parent with this id, found by its `applyset.kubernetes.io/id` label among the
/// kinds kubectl accepts as parents (Secrets, ConfigMaps, custom resources of CRDs labelled
/// `applyset.kubernetes.io/is-parent-type: "true"`), in every namespace. Only a parent whose id
/// is its own (the hash of its name, namespace, kind and group, as kubectl checks it) counts: a
/// copied label does not make a parent. `None` when there is none; an error when the parents
/// cannot be listed or several claim the id.
async fn find_applyset_parent(session: &Session, id: &str) -> Result<Option<Inventory>, UserError> {
    let selector = format!("{APPLYSET_ID}={id}");
    let mut kinds: Vec<std::sync::Arc<KindInfo>> = [("", "Secret"), ("", "ConfigMap")]
        .into_iter()
        .filter_map(|(group, kind)| session.catalog.get(group, kind).cloned())
        .collect();
    if let Some(crds) = session.catalog.get("apiextensions.k8s.io", "CustomResourceDefinition") {
        let parent_types = list_labelled(session, crds, &format!("{APPLYSET_PARENT_TYPE}=true")).await?;
        kinds.extend(parent_types.iter().filter_map(|crd| {
            let group = crd.data.pointer("/spec/group").and_then(Value::as_str)?;
            let kind = crd.data.pointer("/spec/names/kind").and_then(Value::as_str)?;
            session.catalog.get(group, kind).cloned()
        }));
    }
    let mut parents = Vec::new();
    for kind in &kinds {
        for object in list_labelled(session, kind, &selector).await? {
            let name = object.metadata.name.clone().unwrap_or_default();
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            if applyset_id(&name, &namespace, &kind.kind, &kind.group) == id {
                parents.push(applyset_inventory(&object, kind));
            }
        }
    }
    if parents.len() > 1 {
        let names: Vec<&str> = parents.iter().map(|p| p.recorded.name()).collect();
        return Err(UserError::refused(format!(
            "several ApplySet parents claim id {id}: {}",
            names.join(", ")
        )));
    }
    Ok(parents.pop())
}

/// What an ApplySet parent records: its group-kinds and namespaces.
fn applyset_inventory(object: &DynamicObject, kind: &KindInfo) -> Inventory {
    let name = object.metadata.name.clone().unwrap_or_default();
    let namespace = object.metadata.namespace.as_deref().filter(|_| kind.namespaced);
    let annotations = object.metadata.annotations.clone().unwrap_or_default();
    let listed = annotations
        .get("applyset.kubernetes.io/contains-group-kinds")
        .cloned()
        .unwrap_or_default();
    let kinds: HashSet<(String, String)> = listed
        .split(',')
        .map(str::trim)
        .filter(|gk| !gk.is_empty())
        .map(|gk| match gk.split_once('.') {
            Some((kind, group)) => (group.to_string(), kind.to_string()),
            None => (String::new(), gk.to_string()),
        })
        .collect();
    let id = object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(APPLYSET_ID).cloned())
        .unwrap_or_else(|| applyset_id(&name, namespace.unwrap_or(""), &kind.kind, &kind.group));
    let namespaces: HashSet<String> = annotations
        .get("applyset.kubernetes.io/additional-namespaces")
        .map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|ns| !ns.is_empty())
        .chain(namespace)
        .map(str::to_string)
        .collect();
    let tracker = Tracker {
        preset: Preset::ApplySet,
        value: Some(MarkValue {
            name: id,
            namespace: None,
        }),
    };
    Inventory {
        recorded: Recorded::ApplySet {
            kinds,
            namespaces,
            inventory: format!("ApplySet parent {}/{name}", kind.kind_with_group()),
            owner: Some(tracker.clone()),
        },
        tracker,
        target_namespace: None,
        default_namespace: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_target_namespace_is_read_and_an_empty_one_sets_nothing() {
        let kustomization = |spec: serde_json::Value| DynamicObject {
            types: None,
            metadata: Default::default(),
            data: serde_json::json!({ "spec": spec }),
        };
        let with_target = kustomization(serde_json::json!({"targetNamespace": "apps"}));
        assert_eq!(target_namespace_of(&with_target).as_deref(), Some("apps"));
        assert_eq!(
            target_namespace_of(&kustomization(serde_json::json!({"targetNamespace": ""}))),
            None
        );
        assert_eq!(target_namespace_of(&kustomization(serde_json::json!({}))), None);
        let recorded = flux_inventory(
            &DynamicObject {
                data: serde_json::json!({"status": {"inventory": {"entries": [{"id": "apps_a__ConfigMap", "v": "v1"}]}}}),
                ..with_target.clone()
            },
            "ks",
            "flux-system",
            Some("apps".into()),
        )
        .unwrap()
        .unwrap();
        assert_eq!(recorded.target_namespace.as_deref(), Some("apps"));
        let Recorded::Ids { ids, .. } = &recorded.recorded else {
            panic!("a Flux inventory records identities");
        };
        assert!(ids.contains(&ObjectId::new("", "ConfigMap", Some("apps"), "a")));
    }

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
        };
        assert_eq!(
            stack(Some("t"), Some("d")).namespace_rule("n"),
            NamespaceRule::Target("t")
        );
        assert_eq!(stack(None, Some("d")).namespace_rule("n"), NamespaceRule::Default("d"));
        assert_eq!(stack(None, None).namespace_rule("n"), NamespaceRule::Default("n"));
    }

    #[test]
    fn the_current_helm_release_is_the_last_deployed_revision() {
        let revisions = vec![
            (1, "superseded".to_string(), "v1"),
            (2, "deployed".to_string(), "v2"),
            (3, "pending-upgrade".to_string(), "v3"),
        ];
        assert_eq!(last_deployed(revisions), Some((2, "v2")));
        assert_eq!(last_deployed(vec![(1, "failed".to_string(), "v1")]), None);
    }

    #[test]
    fn helm_release_secret_decodes() {
        let release =
            serde_json::json!({"name": "web", "manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"});
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(release.to_string().as_bytes()).unwrap();
        let engine = base64::engine::general_purpose::STANDARD;
        let helm = engine.encode(gz.finish().unwrap());
        let api = engine.encode(helm);
        let secret: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sh.helm.release.v1.web.v1"},
            "data": {"release": api}
        }))
        .unwrap();
        assert!(helm_manifest(&secret).unwrap().contains("kind: ConfigMap"));
    }
}
