//! What dies with a wave: the objects the controllers of its deleted objects made
//! (ownerReferences with `controller: true`, down the chain: a Deployment's ReplicaSets and their
//! Pods). The garbage collector deletes them after their owner is gone; the next wave waits for
//! them, so that nothing they use (a ServiceAccount, a ConfigMap, a webhook, a CRD) goes first.
//! Owners and their children share a namespace (a namespaced owner cannot own across
//! namespaces); the children of cluster-scoped owners are not looked for.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use kube::Client;

use crate::collect::{collect_where, ListOptions, ListScope, Listed};
use crate::discovery::Catalog;
use crate::execute::Target;

/// The objects among `objects` that a controller chain from one of `owners` (UIDs) made,
/// excluding `planned` ones (they go in their own wave).
pub fn controlled_by<'a>(
    objects: &'a [Listed],
    owners: &HashSet<String>,
    planned: &HashSet<String>,
) -> Vec<&'a Listed> {
    let mut dying: HashSet<String> = owners.clone();
    let mut found: Vec<&Listed> = Vec::new();
    loop {
        let before = found.len();
        for object in objects {
            let controller = object.controller_owner().map(|o| o.uid.as_str());
            if controller.is_some_and(|uid| dying.contains(uid)) && !dying.contains(object.uid()) {
                dying.insert(object.uid().to_string());
                if !planned.contains(object.uid()) {
                    found.push(object);
                }
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// Lists, in the namespaces of the `deleted` objects, what their controllers made that is still
/// there, as targets to wait for.
pub async fn children(
    client: &Client,
    catalog: &Catalog,
    deleted: &[Target],
    planned: &HashSet<String>,
    options: ListOptions,
) -> Vec<Target> {
    let namespaces: BTreeSet<&str> = deleted.iter().filter_map(|t| t.id.namespace.as_deref()).collect();
    if namespaces.is_empty() {
        return Vec::new();
    }
    let owners: HashSet<String> = deleted.iter().map(|t| t.uid.clone()).collect();
    let kinds: Vec<Arc<crate::discovery::KindInfo>> = catalog.listable().filter(|k| k.namespaced).cloned().collect();
    let mut found = Vec::new();
    for namespace in namespaces {
        let scope = ListScope::Namespace(namespace.to_string());
        let owned = |meta: &kube::core::ObjectMeta| meta.owner_references.as_ref().is_some_and(|r| !r.is_empty());
        let listed = collect_where(client, &kinds, &scope, owned, options).await;
        for child in controlled_by(&listed.objects, &owners, planned) {
            let owner = child
                .controller_owner()
                .map(|o| format!("{}/{}", o.kind, o.name))
                .unwrap_or_default();
            found.push(crate::teardown::target(
                child,
                format!("made by the controller of {owner}"),
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::kind;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::ObjectMeta;

    fn object(kind_name: &str, uid: &str, owner: Option<(&str, bool)>) -> Listed {
        let meta = ObjectMeta {
            name: Some(uid.into()),
            namespace: Some("web".into()),
            uid: Some(uid.into()),
            owner_references: owner.map(|(owner, controller)| {
                vec![OwnerReference {
                    uid: owner.into(),
                    controller: Some(controller),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        };
        Listed::new(Arc::new(kind("apps", kind_name, true)), meta)
    }

    #[test]
    fn the_controller_chain_of_a_deleted_owner_dies_with_it() {
        let objects = [
            object("Pod", "pod", Some(("rs", true))),
            object("ReplicaSet", "rs", Some(("deploy", true))),
            object("ReplicaSet", "other-rs", Some(("other", true))),
            object("ConfigMap", "referenced", Some(("deploy", false))),
            object("ReplicaSet", "planned-rs", Some(("deploy", true))),
        ];
        let owners: HashSet<String> = ["deploy".to_string()].into();
        let planned: HashSet<String> = ["planned-rs".to_string()].into();
        let mut found: Vec<&str> = controlled_by(&objects, &owners, &planned)
            .iter()
            .map(|o| o.uid())
            .collect();
        found.sort();
        assert_eq!(found, vec!["pod", "rs"]);
    }
}
