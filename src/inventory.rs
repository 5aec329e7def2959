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
use crate::desired::{DesiredSet, Origin, Scopes};
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
}

/// What the stack a `--tracker` names records: its tool's record, when it keeps one, and the
/// namespace it forces on the desired set (Flux `spec.targetNamespace`).
#[derive(Default)]
pub struct StackRecord {
    /// The tool's record of what it applied last; `None`: its labels alone say what it tracks.
    pub recorded: Option<Recorded>,
    /// A Flux Kustomization's `spec.targetNamespace`.
    pub target_namespace: Option<String>,
}

/// A Flux Kustomization as the orphan rules read it.
pub struct FluxStack {
    /// Its `status.inventory`, when it records one.
    pub inventory: Option<Inventory>,
    /// Its `spec.targetNamespace`, when set (an empty one sets nothing, as in Flux).
    pub target_namespace: Option<String>,
}

/// Reads a live inventory the user named; a stack that keeps no record is an error.
pub async fn load(reference: &InventoryRef, session: &Session) -> Result<Inventory, UserError> {
    match reference {
        InventoryRef::Flux { name, namespace } => {
            let namespace = namespace
                .clone()
                .unwrap_or_else(|| session.connection.namespace.clone());
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
/// (Flux `status.inventory`, a Helm release, a cli-utils/kpt inventory, an ApplySet parent
/// given by name), and a Flux Kustomization's `spec.targetNamespace`. No record when the tool
/// keeps none for it: then its labels alone say what it tracks (and the caller says so). A
/// Kustomization that exists but cannot be read is a refusal: its inventory and target
/// namespace decide what Flux would prune.
pub async fn load_for_tracker(tracker: &Tracker, session: &Session) -> Result<StackRecord, UserError> {
    let Some(value) = tracker.value.as_ref() else {
        return Ok(StackRecord::default());
    };
    let namespace = value
        .namespace
        .clone()
        .unwrap_or_else(|| session.connection.namespace.clone());
    let found = match tracker.preset {
        Preset::Flux => {
            let stack = read_flux(session, &value.name, &namespace).await?;
            return Ok(stack.map(FluxStack::into_record).unwrap_or_default());
        }
        Preset::Helm => load_helm(session, &value.name, &namespace).await,
        Preset::Kpt => load_kpt(session, &value.name).await,
        // A parent given by name (not by its id): kubectl's own prune reads that parent.
        Preset::ApplySet if !value.name.starts_with("applyset-") => load_applyset(session, &value.name).await,
        _ => return Ok(StackRecord::default()),
    };
    match found {
        Ok(found) => Ok(StackRecord {
            recorded: Some(found.recorded),
            target_namespace: found.target_namespace,
        }),
        // The stack keeps no record under that name (no release Secret, no inventory object):
        // not an error, the labels are all there is.
        Err(err) if err.message.contains("not found") || err.message.starts_with("no ") => {
            tracing::debug!("no record for {}: {}", tracker.preset.name(), err.message);
            Ok(StackRecord::default())
        }
        Err(err) => Err(err),
    }
}

impl FluxStack {
    fn into_record(self) -> StackRecord {
        StackRecord {
            recorded: self.inventory.map(|inventory| inventory.recorded),
            target_namespace: self.target_namespace,
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
    let target_namespace = object
        .data
        .pointer("/spec/targetNamespace")
        .and_then(Value::as_str)
        .filter(|target| !target.is_empty())
        .map(str::to_string);
    Ok(Some(FluxStack {
        inventory: flux_inventory(&object, name, namespace, target_namespace.clone())?,
        target_namespace,
    }))
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
    let manifest = helm_manifest(&secret).map_err(|why| {
        UserError::failed(format!(
            "cannot read Helm release {namespace}/{release} v{version}: {why}"
        ))
    })?;
    let manifests = parse_text(&manifest, &format!("helm release {namespace}/{release} v{version}"))?;
    let scopes = Scopes::new(Some(&session.catalog), &manifests);
    let record = format!("Helm release {namespace}/{release} v{version}");
    let set = DesiredSet::from_manifests(&manifests, &scopes, namespace, Origin::Inventory(record.clone()));
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
                namespace: Some(namespace.to_string()),
            }),
        },
        target_namespace: None,
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
    let release: Value = serde_json::from_slice(&json).map_err(|e| format!("release is not JSON: {e}"))?;
    Ok(release
        .get("manifest")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
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
        .and_then(|l| l.get("applyset.kubernetes.io/id").cloned())
        .unwrap_or_else(|| applyset_id(name, namespace.unwrap_or(""), &kind.kind, &kind.group));
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
    Ok(Inventory {
        recorded: Recorded::ApplySet {
            kinds,
            namespaces,
            inventory: format!("ApplySet parent {}/{name}", kind.kind_with_group()),
            owner: Some(tracker.clone()),
        },
        tracker,
        target_namespace: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
