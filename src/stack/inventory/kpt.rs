//! cli-utils / kpt inventories: ConfigMaps and ResourceGroups labelled with an inventory id.

use serde_json::Value;

use crate::cluster::discovery::Catalog;

use super::{list_labelled, served, Inventory, Unloaded};
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::model::identity::ObjectId;
use crate::model::trackers::{MarkValue, Preset, Tracker};
use crate::stack::classify::Recorded;

/// cli-utils/kpt (kubernetes-sigs/cli-utils `pkg/apply/prune/prune.go`, `pkg/inventory/policy.go`):
/// prune candidates are the inventory's objects missing from the new set, and only those whose
/// `config.k8s.io/owning-inventory` is this inventory (the `--tracker kpt=ID` selection).
pub(super) async fn load_kpt(session: &Session, id: &str) -> Result<Inventory, Unloaded> {
    let selector = format!("cli-utils.sigs.k8s.io/inventory-id={id}");
    let mut ids = Vec::new();
    let mut found: Vec<Holder> = Vec::new();
    let config_maps = served(session, "", "ConfigMap")?;
    // Both kinds of holder at once: each list makes the API server read every object of its
    // kind (0.6 s and more for the ConfigMaps of a cluster holding 50,000), and the plan and
    // the re-check before every wave wait for both (issue 30).
    let groups = async {
        match session.catalog.get("kpt.dev", "ResourceGroup") {
            Some(groups) => list_labelled(session, groups, &selector).await,
            None => Ok(Vec::new()),
        }
    };
    let (config_map_holders, group_holders) =
        futures::future::join(list_labelled(session, config_maps, &selector), groups).await;
    for object in config_map_holders? {
        let holder = Holder::of("ConfigMap", &object);
        ids.extend(config_map_ids(&object, &holder, &session.catalog)?);
        found.push(holder);
    }
    for object in group_holders? {
        found.push(Holder::of("ResourceGroup", &object));
        ids.extend(resource_group_ids(&object, &session.catalog));
    }
    refuse_shared_or_missing(&found, id, &selector)?;
    let record_namespace = found
        .first()
        .map(|holder| holder.namespace.clone())
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

/// An object that holds an inventory: its kind, namespace and name.
struct Holder {
    kind: &'static str,
    namespace: String,
    name: String,
}

impl Holder {
    fn of(kind: &'static str, object: &kube::api::DynamicObject) -> Self {
        Self {
            kind,
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The objects an inventory ConfigMap lists, one per key of its `data`. cli-utils reads every
/// key or none: one that does not parse fails the whole inventory (kubernetes-sigs/cli-utils
/// `pkg/inventory/inventory.go` `ConfigMap.Load`: `ParseObjMetadata`), and neither apply nor
/// destroy acts on any of it.
fn config_map_ids(
    object: &kube::api::DynamicObject,
    holder: &Holder,
    catalog: &Catalog,
) -> Result<Vec<ObjectId>, UserError> {
    let data = object.data.get("data").and_then(Value::as_object);
    let mut ids = Vec::new();
    for key in data.into_iter().flat_map(|data| data.keys()) {
        let id = ObjectId::from_flux_inventory_id(key).ok_or_else(|| {
            let place = format!("{}/{}", holder.namespace, holder.name);
            UserError::refused(format!(
                "inventory ConfigMap {place} holds key {key:?}, which is not <namespace>_<name>_<group>_<Kind>: cli-utils cannot read this inventory and acts on none of it"
            ))
            .hint("fix the inventory with its tool (`kpt live apply`) before pruning its stack")
        })?;
        let group = crate::model::identity::recorded_group(key).unwrap_or(&id.group);
        if mapped(catalog, group, &id.kind) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Whether cli-utils maps an inventory entry of this group and kind as recorded: one whose kind
/// another group serves, but not this one (`Deployment` of `extensions`), it cannot map, and
/// never prunes (kubernetes-sigs/cli-utils `pkg/apply/prune/prune.go` `GetPruneObjs` skips it:
/// membership review 31, F1). A kind served by no group is no object anyway.
fn mapped(catalog: &Catalog, group: &str, kind: &str) -> bool {
    catalog.serves(group, kind) || catalog.get(group, kind).is_none()
}

/// The objects a ResourceGroup lists in `spec.resources` (those with a kind).
fn resource_group_ids(object: &kube::api::DynamicObject, catalog: &Catalog) -> Vec<ObjectId> {
    let resources = object.data.pointer("/spec/resources").and_then(Value::as_array);
    resources
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let field = |name: &str| r.get(name).and_then(Value::as_str).unwrap_or("");
            (!field("kind").is_empty() && mapped(catalog, field("group"), field("kind")))
                .then(|| ObjectId::new(field("group"), field("kind"), Some(field("namespace")), field("name")))
        })
        .collect()
}

/// One id, one inventory: cli-utils refuses an id that several inventory objects claim
/// (kubernetes-sigs/cli-utils `pkg/inventory/inventory-client.go` `getClusterInventoryInfo`:
/// "found %d inventory objects with inventory id"), and never merges their contents; and an id
/// that no object holds is no inventory.
fn refuse_shared_or_missing(found: &[Holder], id: &str, selector: &str) -> Result<(), Unloaded> {
    if found.len() > 1 {
        let holders: Vec<String> = found.iter().map(Holder::to_string).collect();
        return Err(UserError::refused(format!(
            "{} inventory objects claim inventory id {id} ({}): cli-utils reads the one in the namespace of the package it applies, which kubectl-stack cannot tell from the id alone, so it acts on none of them",
            found.len(),
            holders.join(", ")
        ))
        .hint("give each inventory its own id (`kpt live init --inventory-id`)")
        .into());
    }
    if found.is_empty() {
        return Err(Unloaded::Absent(
            UserError::failed(format!("no inventory object labelled {selector}"))
                .hint("check the id (`kubectl get cm -A -l cli-utils.sigs.k8s.io/inventory-id`)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::discovery::DiscoverySource;
    use crate::cluster::fixtures::kind;

    /// Membership review 31, F1: cli-utils maps each inventory entry by its recorded group; a
    /// `Deployment` of `extensions`, where only `apps` serves Deployments, it cannot map and
    /// never prunes, so it is no member.
    #[test]
    fn an_entry_recorded_under_a_group_that_no_longer_serves_its_kind_is_no_member() {
        let catalog = Catalog::new(
            vec![
                kind("apps", "Deployment", true),
                kind("networking.k8s.io", "Ingress", true),
                kind("extensions", "Ingress", true),
            ],
            vec![],
            DiscoverySource::PerGroup,
        );
        assert!(mapped(&catalog, "apps", "Deployment"));
        assert!(!mapped(&catalog, "extensions", "Deployment"));
        assert!(mapped(&catalog, "extensions", "Ingress"), "served under both");
        assert!(mapped(&catalog, "example.com", "Gone"), "no object anyway");
    }
}
