//! cli-utils / kpt inventories: ConfigMaps and ResourceGroups labelled with an inventory id.

use serde_json::Value;

use super::{list_labelled, served, Inventory};
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::model::identity::ObjectId;
use crate::model::trackers::{MarkValue, Preset, Tracker};
use crate::stack::classify::Recorded;

/// cli-utils/kpt (kubernetes-sigs/cli-utils `pkg/apply/prune/prune.go`, `pkg/inventory/policy.go`):
/// prune candidates are the inventory's objects missing from the new set, and only those whose
/// `config.k8s.io/owning-inventory` is this inventory (the `--tracker kpt=ID` selection).
pub(super) async fn load_kpt(session: &Session, id: &str) -> Result<Inventory, UserError> {
    let selector = format!("cli-utils.sigs.k8s.io/inventory-id={id}");
    let mut ids = Vec::new();
    let mut found: Vec<String> = Vec::new();
    let where_ = |object: &kube::api::DynamicObject| {
        format!(
            "{}/{}",
            object.metadata.namespace.as_deref().unwrap_or_default(),
            object.metadata.name.as_deref().unwrap_or_default()
        )
    };
    let config_maps = served(session, "", "ConfigMap")?;
    for object in list_labelled(session, config_maps, &selector).await? {
        found.push(format!("ConfigMap {}", where_(&object)));
        let data = object
            .data
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // cli-utils reads every key or none: one that does not parse fails the whole inventory
        // (kubernetes-sigs/cli-utils `pkg/inventory/inventory.go` `ConfigMap.Load`:
        // `ParseObjMetadata`), and neither apply nor destroy acts on any of it.
        for key in data.keys() {
            let parsed = ObjectId::from_flux_inventory_id(key).ok_or_else(|| {
                UserError::refused(format!(
                    "inventory ConfigMap {} holds key {key:?}, which is not <namespace>_<name>_<group>_<Kind>: cli-utils cannot read this inventory and acts on none of it",
                    where_(&object)
                ))
                .hint("fix the inventory with its tool (`kpt live apply`) before pruning its stack")
            })?;
            ids.push(parsed);
        }
    }
    if let Some(groups) = session.catalog.get("kpt.dev", "ResourceGroup") {
        for object in list_labelled(session, groups, &selector).await? {
            found.push(format!("ResourceGroup {}", where_(&object)));
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
    // One id, one inventory: cli-utils refuses an id that several inventory objects claim
    // (kubernetes-sigs/cli-utils `pkg/inventory/inventory-client.go` `getClusterInventoryInfo`:
    // "found %d inventory objects with inventory id"), and never merges their contents.
    if found.len() > 1 {
        return Err(UserError::refused(format!(
            "{} inventory objects claim inventory id {id} ({}): cli-utils acts on none of them, and neither does kubectl-stack",
            found.len(),
            found.join(", ")
        ))
        .hint("give each inventory its own id (`kpt live init --inventory-id`)"));
    }
    if found.is_empty() {
        return Err(UserError::failed(format!("no inventory object labelled {selector}"))
            .hint("check the id (`kubectl get cm -A -l cli-utils.sigs.k8s.io/inventory-id`)"));
    }
    let record_namespace = found
        .first()
        .and_then(|place| place.split_once(' '))
        .and_then(|(_, at)| at.split_once('/'))
        .map(|(namespace, _)| namespace.to_string())
        .filter(|namespace| !namespace.is_empty());
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
            denied: Default::default(),
        },
        tracker,
        target_namespace: None,
        default_namespace: None,
        renamed_by: None,
        record_namespace,
    })
}
