//! What dies with a wave: the objects the garbage collector deletes because their owners are gone
//! (a Deployment's ReplicaSets and their Pods, a custom resource owned by a ClusterRole the wave
//! deletes). The next wave waits for them, so that nothing they use (a ServiceAccount, a
//! ConfigMap, a webhook, a CRD, an operator) goes first.
//!
//! The rule is the garbage collector's own, [`crate::prune::safeguards::dies_with_plan`]: an object dies
//! when **every** owner of it is gone (deleted by a wave run so far, or dying in turn), whether or
//! not the owner is its controller. A namespaced owner's dependents share its namespace; a
//! cluster-scoped owner's dependents may be anywhere, so a wave that deletes one lists every
//! namespace.

use std::collections::HashSet;

use kube::Client;

use crate::cluster::collect::{ListOptions, Listed};
use crate::cluster::discovery::Catalog;
use crate::prune::cascade::owners::{owned_around, owners_by_uid};
use crate::prune::execute::Target;
use crate::prune::safeguards::dies_with_plan;

/// The objects among `objects` that die because every owner of theirs is in `gone` (UIDs of what
/// the waves run so far deleted) or dies in turn, excluding `planned` ones (they go in their own
/// wave) and those already gone. None with `orphans` (the waves delete with `--cascade=orphan`:
/// the garbage collector leaves the dependents).
pub fn dying_with<'a>(
    objects: &'a [Listed],
    gone: &HashSet<String>,
    planned: &HashSet<String>,
    orphans: bool,
) -> Vec<&'a Listed> {
    let owners_of = owners_by_uid(objects);
    objects
        .iter()
        .filter(|o| !planned.contains(o.uid()) && !gone.contains(o.uid()))
        .filter(|o| dies_with_plan(&o.meta, gone, &owners_of, orphans))
        .collect()
}

/// Lists where the `deleted` objects' dependents can be ([`owned_around`]), and returns what dies
/// with the waves run so far (`gone`: the UIDs they deleted, these included) and is still there,
/// as targets to wait for (none with `orphans`: see [`dying_with`]).
pub async fn children(
    client: &Client,
    catalog: &Catalog,
    deleted: &[Target],
    gone: &HashSet<String>,
    planned: &HashSet<String>,
    options: ListOptions,
    orphans: bool,
) -> Vec<Target> {
    if orphans {
        return Vec::new();
    }
    let listed = owned_around(client, catalog, deleted.iter().map(|t| &t.id), options).await;
    dying_with(&listed.objects, gone, planned, false)
        .into_iter()
        .map(|child| crate::prune::teardown::target(child, made_by(child)))
        .collect()
}

/// Why a dependent dies: its owners, all of which are gone or going.
fn made_by(child: &Listed) -> String {
    let owners: Vec<String> = child
        .meta
        .owner_references
        .iter()
        .flatten()
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect();
    format!("owned by {}, all gone with the waves run", owners.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::kind;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::ObjectMeta;
    use std::sync::Arc;

    fn object(kind_name: &str, uid: &str, owners: &[(&str, bool)]) -> Listed {
        let meta = ObjectMeta {
            name: Some(uid.into()),
            namespace: Some("web".into()),
            uid: Some(uid.into()),
            owner_references: Some(
                owners
                    .iter()
                    .map(|(owner, controller)| OwnerReference {
                        uid: owner.to_string(),
                        controller: Some(*controller),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        Listed::new(Arc::new(kind("apps", kind_name, true)), meta)
    }

    #[test]
    fn what_every_owner_of_is_gone_dies_with_the_wave() {
        let objects = [
            object("Pod", "pod", &[("rs", true)]),
            object("ReplicaSet", "rs", &[("deploy", true)]),
            object("ReplicaSet", "other-rs", &[("other", true)]),
            object("ConfigMap", "referenced", &[("deploy", false)]),
            object("ConfigMap", "second-live-owner", &[("deploy", true), ("live", false)]),
            object("ConfigMap", "both-gone", &[("deploy", false), ("earlier", false)]),
            object("Widget", "cluster-owned", &[("clusterrole", false)]),
            object("ReplicaSet", "planned-rs", &[("deploy", true)]),
        ];
        let gone: HashSet<String> = ["deploy", "earlier", "clusterrole"].map(String::from).into();
        let planned: HashSet<String> = ["planned-rs".to_string()].into();
        let mut found: Vec<&str> = dying_with(&objects, &gone, &planned, false)
            .iter()
            .map(|o| o.uid())
            .collect();
        found.sort();
        assert_eq!(found, vec!["both-gone", "cluster-owned", "pod", "referenced", "rs"]);
        // Deleted with --cascade=orphan, the owners leave them all.
        assert!(dying_with(&objects, &gone, &planned, true).is_empty());
    }
}
