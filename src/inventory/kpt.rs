//! cli-utils / kpt inventories: ConfigMaps and ResourceGroups labelled with an inventory id.

use serde_json::Value;

use super::{list_labelled, served, Inventory};
use crate::classify::Recorded;
use crate::error::UserError;
use crate::identity::ObjectId;
use crate::session::Session;
use crate::trackers::{MarkValue, Preset, Tracker};

/// cli-utils/kpt (kubernetes-sigs/cli-utils `pkg/apply/prune/prune.go`, `pkg/inventory/policy.go`):
/// prune candidates are the inventory's objects missing from the new set, and only those whose
/// `config.k8s.io/owning-inventory` is this inventory (the `--tracker kpt=ID` selection).
pub(super) async fn load_kpt(session: &Session, id: &str) -> Result<Inventory, UserError> {
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
