//! What dies with a wave: the objects the garbage collector deletes because their owners are gone
//! (a Deployment's ReplicaSets and their Pods, a custom resource owned by a ClusterRole the wave
//! deletes). The next wave waits for them, so that nothing they use (a ServiceAccount, a
//! ConfigMap, a webhook, a CRD, an operator) goes first.
//!
//! The rule is the garbage collector's own, [`crate::safeguards::dies_with_plan`]: an object dies
//! when **every** owner of it is gone (deleted by a wave run so far, or dying in turn), whether or
//! not the owner is its controller. A namespaced owner's dependents share its namespace; a
//! cluster-scoped owner's dependents may be anywhere, so a wave that deletes one lists every
//! namespace.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use kube::Client;

use crate::collect::{collect_where, ListOptions, ListScope, Listed};
use crate::discovery::{Catalog, KindInfo};
use crate::execute::Target;
use crate::safeguards::dies_with_plan;

/// The objects among `objects` that die because every owner of theirs is in `gone` (UIDs of what
/// the waves run so far deleted) or dies in turn, excluding `planned` ones (they go in their own
/// wave) and those already gone.
pub fn dying_with<'a>(objects: &'a [Listed], gone: &HashSet<String>, planned: &HashSet<String>) -> Vec<&'a Listed> {
    let owners_of: HashMap<String, Vec<String>> = objects
        .iter()
        .map(|o| {
            let owners = o.meta.owner_references.iter().flatten().map(|r| r.uid.clone());
            (o.uid().to_string(), owners.collect())
        })
        .collect();
    objects
        .iter()
        .filter(|o| !planned.contains(o.uid()) && !gone.contains(o.uid()))
        .filter(|o| dies_with_plan(&o.meta, gone, &owners_of))
        .collect()
}

/// Where the dependents of the `deleted` objects can be: the namespaces of namespaced ones, or
/// every namespace (and the cluster-scoped kinds) when one of them is cluster-scoped.
fn scopes_of(deleted: &[Target]) -> (Vec<ListScope>, bool) {
    if deleted.iter().any(|t| t.id.namespace.is_none()) {
        return (vec![ListScope::AllNamespaces], true);
    }
    let namespaces: BTreeSet<&str> = deleted.iter().filter_map(|t| t.id.namespace.as_deref()).collect();
    let scopes = namespaces
        .into_iter()
        .map(|n| ListScope::Namespace(n.to_string()))
        .collect();
    (scopes, false)
}

/// Lists where the `deleted` objects' dependents can be, and returns what dies with the waves
/// run so far (`gone`: the UIDs they deleted, these included) and is still there, as targets to
/// wait for.
pub async fn children(
    client: &Client,
    catalog: &Catalog,
    deleted: &[Target],
    gone: &HashSet<String>,
    planned: &HashSet<String>,
    options: ListOptions,
) -> Vec<Target> {
    let (scopes, cluster_scoped) = scopes_of(deleted);
    let kinds: Vec<Arc<KindInfo>> = catalog
        .listable()
        .filter(|k| k.namespaced || cluster_scoped)
        .cloned()
        .collect();
    let owned = |meta: &kube::core::ObjectMeta| meta.owner_references.as_ref().is_some_and(|r| !r.is_empty());
    let mut found = Vec::new();
    for scope in scopes {
        let listed = collect_where(client, &kinds, &scope, owned, options).await;
        for child in dying_with(&listed.objects, gone, planned) {
            found.push(crate::teardown::target(child, made_by(child)));
        }
    }
    found
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
    use crate::fixtures::kind;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::ObjectMeta;

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
        let mut found: Vec<&str> = dying_with(&objects, &gone, &planned).iter().map(|o| o.uid()).collect();
        found.sort();
        assert_eq!(found, vec!["both-gone", "cluster-owned", "pod", "referenced", "rs"]);
    }

    #[test]
    fn a_cluster_scoped_owner_has_its_dependents_looked_for_everywhere() {
        let target = |namespace: Option<&str>| {
            let listed = Listed::new(
                Arc::new(kind("", "ConfigMap", namespace.is_some())),
                ObjectMeta {
                    name: Some("x".into()),
                    namespace: namespace.map(String::from),
                    uid: Some("u".into()),
                    ..Default::default()
                },
            );
            crate::teardown::target(&listed, String::new())
        };
        let (scopes, cluster) = scopes_of(&[target(Some("a")), target(Some("b")), target(Some("a"))]);
        assert_eq!((scopes.len(), cluster), (2, false));
        let (scopes, cluster) = scopes_of(&[target(Some("a")), target(None)]);
        assert!(cluster && matches!(scopes.as_slice(), [ListScope::AllNamespaces]));
    }
}
