//! kubectl ApplySet parents: the group-kinds and namespaces they record, found by name or by id.

use std::collections::HashSet;

use kube::api::DynamicObject;
use serde_json::Value;

use super::{get_object, list_labelled, Inventory, Unloaded};
use crate::cluster::discovery::{Catalog, KindInfo};
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::model::identity::canonical_group;
use crate::model::trackers::{applyset_id, MarkValue, Preset, Tracker, APPLYSET_ID};
use crate::stack::classify::Recorded;

/// kubectl ApplySet (kubernetes/kubectl `pkg/cmd/apply/applyset_pruner.go`
/// `FindAllObjectsToPrune`): kubectl lists members of the parent's `contains-group-kinds` in the
/// parent's namespace and its `additional-namespaces`, and prunes those not applied this time.
pub(super) async fn load_applyset(session: &Session, parent: &str) -> Result<Inventory, Unloaded> {
    let (resource, name) = parent.split_once('/').unwrap_or(("secrets", parent));
    let kind = session
        .catalog
        .resolve(resource)
        .ok_or_else(|| UserError::usage(format!("unknown ApplySet parent kind {resource:?}")))?
        .clone();
    let namespace = kind.namespaced.then_some(session.connection.namespace.as_str());
    let object = get_object(session, &kind, namespace, name).await?;
    let own = applyset_id(name, namespace.unwrap_or(""), &kind.kind, &kind.group);
    let label = object.metadata.labels.as_ref().and_then(|l| l.get(APPLYSET_ID));
    match label {
        Some(label) if *label == own => {}
        Some(label) => {
            return Err(UserError::refused(format!(
                "{} {name} carries {APPLYSET_ID}={label}, which is not its own id ({own}): it is a copy of another ApplySet parent, not a parent",
                kind.kind_with_group()
            ))
            .hint("kubectl refuses such a parent too; name the parent whose id it is")
            .into())
        }
        // kubectl: "ApplySet parent object ... exists and does not have required label".
        None => {
            return Err(UserError::refused(format!(
                "{} {name} has no {APPLYSET_ID} label: kubectl refuses to prune with it (\"does not have required label\"), so it is no ApplySet parent and records nothing",
                kind.kind_with_group()
            ))
            .hint("kubectl refuses such a parent too; re-apply the set with kubectl to restore the label")
            .into())
        }
    }
    kubectl_tooling(&object, &kind)?;
    permitted_parent(session, &kind).await?;
    Ok(applyset_inventory(&object, &kind, &session.catalog))
}

/// kubectl prunes with a parent of a permitted kind only (kubernetes/kubectl
/// `pkg/cmd/apply/applyset.go` `Validate`: "resource ... is not permitted as an ApplySet
/// parent"): a Secret, a ConfigMap, or a custom resource of a CRD labelled
/// `applyset.kubernetes.io/is-parent-type` now, whatever its value (membership review 27, F2: a CRD that
/// lost the label makes its resources no parents, and kubectl prunes nothing with them).
async fn permitted_parent(session: &Session, kind: &KindInfo) -> Result<(), UserError> {
    if parent_kinds(session)
        .await?
        .iter()
        .any(|k| k.group == kind.group && k.kind == kind.kind)
    {
        return Ok(());
    }
    Err(UserError::refused(format!(
        "{} is not permitted as an ApplySet parent kind (only Secrets, ConfigMaps and custom resources of CRDs labelled {APPLYSET_PARENT_TYPE} are): kubectl prunes nothing with it, and neither does kubectl-stack",
        kind.kind_with_group()
    ))
    .hint(format!("label its CRD {APPLYSET_PARENT_TYPE}=true again to make it a parent kind, then prune")))
}

/// The kinds kubectl accepts as ApplySet parents now: Secrets, ConfigMaps, and the kinds of the
/// CRDs labelled `applyset.kubernetes.io/is-parent-type` (kubectl selects the label's existence).
async fn parent_kinds(session: &Session) -> Result<Vec<std::sync::Arc<KindInfo>>, UserError> {
    let mut kinds: Vec<std::sync::Arc<KindInfo>> = [("", "Secret"), ("", "ConfigMap")]
        .into_iter()
        .filter_map(|(group, kind)| session.catalog.get(group, kind).cloned())
        .collect();
    if let Some(crds) = session.catalog.get("apiextensions.k8s.io", "CustomResourceDefinition") {
        // kubectl selects them by the label's existence, whatever its value
        // (`getAllowedCustomResourceParents`: `LabelSelectorOpExists`).
        let parent_types = list_labelled(session, crds, APPLYSET_PARENT_TYPE).await?;
        kinds.extend(parent_types.iter().filter_map(|crd| {
            let group = crd.data.pointer("/spec/group").and_then(Value::as_str)?;
            let kind = crd.data.pointer("/spec/names/kind").and_then(Value::as_str)?;
            session.catalog.get(group, kind).cloned()
        }));
    }
    Ok(kinds)
}

/// The tooling annotation kubectl requires on a parent it prunes with: present, and `kubectl`
/// before its `/` (kubernetes/kubectl `pkg/cmd/apply/applyset.go` `fetchParent`: "missing
/// required annotation", "managed by tooling ... instead of kubectl"). Another tool's ApplySet
/// follows that tool's rules, which kubectl-stack does not know: refused, nothing pruned.
fn kubectl_tooling(object: &DynamicObject, kind: &KindInfo) -> Result<(), UserError> {
    const TOOLING: &str = "applyset.kubernetes.io/tooling";
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let tooling = object.metadata.annotations.as_ref().and_then(|a| a.get(TOOLING));
    let why = match tooling.map(|t| t.split('/').next().unwrap_or_default()) {
        Some("kubectl") => return Ok(()),
        Some(other) => format!("is managed by tooling {other:?}, not kubectl"),
        None => format!("lacks the annotation {TOOLING}"),
    };
    Err(UserError::refused(format!(
        "ApplySet parent {} {name} {why}: kubectl refuses to prune with it, and so does kubectl-stack",
        kind.kind_with_group()
    ))
    .hint("prune this set with the tool that manages it"))
}

/// The label that makes a CRD's kind an ApplySet parent kind (KEP-3659).
const APPLYSET_PARENT_TYPE: &str = "applyset.kubernetes.io/is-parent-type";

/// The ApplySet parent with this id, found by its `applyset.kubernetes.io/id` label among the
/// kinds kubectl accepts as parents (Secrets, ConfigMaps, custom resources of CRDs labelled
/// `applyset.kubernetes.io/is-parent-type`), in every namespace. Only a parent whose id
/// is its own (the hash of its name, namespace, kind and group, as kubectl checks it) counts: a
/// copied label does not make a parent. `None` when there is none; an error when the parents
/// cannot be listed or several claim the id.
pub(super) async fn find_applyset_parent(session: &Session, id: &str) -> Result<Option<Inventory>, UserError> {
    let selector = format!("{APPLYSET_ID}={id}");
    let kinds = parent_kinds(session).await?;
    // Every parent kind at once (each list reads every object of its kind, Secrets and
    // ConfigMaps of the whole cluster among them), taken in their order.
    let listed = futures::future::join_all(kinds.iter().map(|kind| list_labelled(session, kind, &selector))).await;
    let mut parents = Vec::new();
    for (kind, objects) in kinds.iter().zip(listed) {
        for object in objects? {
            let name = object.metadata.name.clone().unwrap_or_default();
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            if applyset_id(&name, &namespace, &kind.kind, &kind.group) == id {
                kubectl_tooling(&object, kind)?;
                parents.push(applyset_inventory(&object, kind, &session.catalog));
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

/// What an ApplySet parent records: its group-kinds and namespaces. A parent that lists a
/// group-kind the cluster does not serve records nothing kubectl prunes: kubectl refuses the
/// whole prune ("could not find mapping for kind in applyset.kubernetes.io/contains-group-kinds",
/// kubernetes/kubectl `pkg/cmd/apply/applyset.go` `parseGroupKinds`), so every member stays.
fn applyset_inventory(object: &DynamicObject, kind: &KindInfo, catalog: &Catalog) -> Inventory {
    let name = object.metadata.name.clone().unwrap_or_default();
    let namespace = object.metadata.namespace.as_deref().filter(|_| kind.namespaced);
    let annotations = object.metadata.annotations.clone().unwrap_or_default();
    let (kinds, unmapped) = match annotations.get(GROUP_KINDS) {
        Some(listed) => (group_kinds(Some(listed)), None),
        None => group_resources(annotations.get(GROUP_RESOURCES).map(String::as_str), catalog),
    };
    let id = object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(APPLYSET_ID).cloned())
        .unwrap_or_else(|| applyset_id(&name, namespace.unwrap_or(""), &kind.kind, &kind.group));
    let additional = additional_namespaces(annotations.get(ADDITIONAL_NAMESPACES).map(String::as_str));
    let empty_namespace = additional.contains("")
        && kinds
            .iter()
            .any(|(g, k)| catalog.get(g, k).is_some_and(|k| k.namespaced));
    let namespaces: HashSet<String> = additional.into_iter().chain(namespace.map(str::to_string)).collect();
    let tracker = Tracker {
        preset: Preset::ApplySet,
        value: Some(MarkValue {
            name: id,
            namespace: None,
        }),
    };
    let inventory = format!("ApplySet parent {}/{name}", kind.kind_with_group());
    let refused = match unserved_kinds(&kinds, catalog) {
        _ if unmapped.is_some() => Some(format!(
            "lists {} in {GROUP_RESOURCES}, which the cluster does not serve: `kubectl apply --prune --applyset` refuses to prune with it (\"could not find kind for resource\"), so it prunes nothing of it",
            unmapped.unwrap_or_default()
        )),
        Some(unserved) => Some(format!(
            "lists {unserved} in {GROUP_KINDS}, which the cluster does not serve: `kubectl apply --prune --applyset` refuses to prune with it (\"could not find mapping for kind\"), so it prunes nothing of it; serve that kind again or remove it from the annotation, then prune"
        )),
        None if empty_namespace => Some(format!(
            "lists an empty namespace in {ADDITIONAL_NAMESPACES}: `kubectl apply --prune --applyset` refuses to prune with it (\"unexpectedly encountered empty namespace during prune\"), so it prunes nothing; remove the empty item, then prune"
        )),
        None => None,
    };
    let recorded = match refused {
        Some(why) => Recorded::NoInventory { why, stack: inventory },
        None => Recorded::ApplySet {
            // kubectl maps each listed group-kind and lists it, and so finds an object by
            // whichever group served it (an Ingress applied as `extensions` is listed as
            // `networking.k8s.io` here): the record holds the kinds by their canonical group
            // (membership review 29, F1), as the kpt and Flux records' ids do.
            kinds: kinds
                .into_iter()
                .map(|(group, kind)| (canonical_group(&group, &kind).to_string(), kind))
                .collect(),
            namespaces,
            inventory,
            owner: Some(tracker.clone()),
        },
    };
    Inventory {
        recorded,
        tracker,
        target_namespace: None,
        // kubectl finds a namespaced parent in its `-n` and gives that same namespace to every
        // manifest written without one (membership review 12, F2): a set run with `-A` or
        // another `-n` still reads them where kubectl applied them.
        default_namespace: namespace.map(str::to_string),
        renamed_by: None,
        record_namespace: None,
    }
}

/// The annotation that lists the group-kinds of an ApplySet's members.
const GROUP_KINDS: &str = "applyset.kubernetes.io/contains-group-kinds";
/// The annotation that listed them as group-resources before [`GROUP_KINDS`], which kubectl still
/// reads when that one is absent.
const GROUP_RESOURCES: &str = "applyset.kubernetes.io/contains-group-resources";

/// The group-kinds of a parent that lists its members' group-resources only (kubectl
/// `pkg/cmd/apply/applyset.go` `parseDeprecatedResourceAnnotation`, read when
/// `contains-group-kinds` is absent; membership review 30, F4): each `resource.group` mapped to
/// its kind as a REST mapper maps it (plural, singular or short name), and the items that map to
/// none, comma-joined, when any does not (kubectl then refuses the whole prune). Absent or empty:
/// no kinds (kubectl refuses a parent without either annotation and prunes nothing).
fn group_resources(annotation: Option<&str>, catalog: &Catalog) -> (HashSet<(String, String)>, Option<String>) {
    let mut kinds = HashSet::new();
    let mut unmapped = Vec::new();
    let listed = annotation.unwrap_or_default();
    for item in listed.split(',').filter(|_| !listed.is_empty()) {
        let (resource, group) = item.split_once('.').unwrap_or((item, ""));
        let found = catalog.kinds().iter().find(|k| {
            k.group == group
                && (k.plural == resource || k.singular == resource || k.short_names.iter().any(|s| s == resource))
        });
        match found {
            Some(kind) => {
                kinds.insert((kind.group.clone(), kind.kind.clone()));
            }
            None => unmapped.push(item.to_string()),
        }
    }
    (kinds, (!unmapped.is_empty()).then(|| unmapped.join(", ")))
}
/// The annotation that lists the namespaces beyond the parent's that hold members.
const ADDITIONAL_NAMESPACES: &str = "applyset.kubernetes.io/additional-namespaces";

/// The group-kinds an ApplySet parent lists, read as kubectl reads them (kubernetes/kubectl
/// `pkg/cmd/apply/applyset.go` `parseKindAnnotation`): an absent or empty annotation is an empty
/// set; otherwise each comma-separated item as it is, neither trimmed nor skipped when empty, is
/// `Kind.group` (`schema.ParseGroupKind`). An item kubectl cannot map (`" ConfigMap"`, `""`)
/// is then a kind the cluster does not serve, which makes kubectl refuse the whole prune.
fn group_kinds(annotation: Option<&str>) -> HashSet<(String, String)> {
    match annotation {
        None | Some("") => HashSet::new(),
        Some(listed) => listed
            .split(',')
            .map(|gk| match gk.split_once('.') {
                Some((kind, group)) => (group.to_string(), kind.to_string()),
                None => (String::new(), gk.to_string()),
            })
            .collect(),
    }
}

/// The additional namespaces an ApplySet parent lists, read as kubectl reads them
/// (`parseNamespacesAnnotation`): absent or empty is none; otherwise the comma-separated items
/// as they are (`" as3"` is not `as3`, and an empty item stays, for kubectl refuses to prune
/// with it).
fn additional_namespaces(annotation: Option<&str>) -> HashSet<String> {
    match annotation {
        None | Some("") => HashSet::new(),
        Some(listed) => listed.split(',').map(str::to_string).collect(),
    }
}

/// The listed group-kinds (`Kind.group`, as the annotation writes them) the cluster does not
/// serve, comma-separated and sorted; `None` when it serves them all.
fn unserved_kinds(kinds: &HashSet<(String, String)>, catalog: &Catalog) -> Option<String> {
    let mut unserved: Vec<String> = kinds
        .iter()
        .filter(|(group, kind)| !catalog.serves(group, kind))
        .map(|(group, kind)| match group.as_str() {
            "" => kind.clone(),
            group => format!("{kind}.{group}"),
        })
        .collect();
    unserved.sort();
    (!unserved.is_empty()).then(|| unserved.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::discovery::DiscoverySource;
    use crate::cluster::fixtures::kind;

    /// Membership review 30, F4: a parent written before `contains-group-kinds` lists its
    /// members' group-resources, which kubectl still maps to kinds and prunes.
    #[test]
    fn a_parent_listing_group_resources_records_their_kinds() {
        let catalog = Catalog::new(
            vec![kind("", "ConfigMap", true), kind("apps", "Deployment", true)],
            vec![],
            DiscoverySource::PerGroup,
        );
        let (kinds, unmapped) = group_resources(Some("configmaps,deployment.apps"), &catalog);
        let expected: HashSet<(String, String)> = [
            (String::new(), "ConfigMap".to_string()),
            ("apps".to_string(), "Deployment".to_string()),
        ]
        .into();
        assert_eq!((kinds, unmapped), (expected, None));
        let (_, unmapped) = group_resources(Some("configmaps,gizmos.example.com"), &catalog);
        assert_eq!(unmapped.as_deref(), Some("gizmos.example.com"));
        assert_eq!(group_resources(Some(""), &catalog), (HashSet::new(), None));
        assert_eq!(group_resources(None, &catalog), (HashSet::new(), None));
    }
}
