//! Owner cascades: what the garbage collector deletes with the plan's objects as their owners,
//! although the plan does not delete it (review finding 1 of the order review: another stack's
//! object, a keep-marked one or an untracked one with a plain `ownerReference` to a planned
//! ConfigMap went with it, unnamed). The rule is the garbage collector's own
//! ([`crate::prune::safeguards::dies_with_plan`]: every owner gone). What a controller made (an owner
//! reference with `controller: true`: a Deployment's ReplicaSets, a Service's EndpointSlices) is
//! its owner's to take and no victim; anything else that dies so is a victim of the planned owner
//! it hangs from, named and refused like a Namespace's, unless `--allow-cascade`.
//!
//! Where the dependents can be: in the namespace of a namespaced owner, anywhere for a
//! cluster-scoped one ([`owned_around`]); the waits after each wave list the same way
//! ([`crate::prune::recheck::children`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use kube::Client;

use super::{why_it_counts, Cascade, Planned, Victim};
use crate::cluster::collect::{collect_where, Collection, ListOptions, ListScope, Listed};
use crate::cluster::discovery::{Catalog, KindInfo};
use crate::model::identity::ObjectId;
use crate::model::trackers::keep_marker;
use crate::prune::safeguards::{dies_with_plan, made_by_control_plane};
use crate::stack::keep::{tracked_elsewhere, TornDown};

/// Where the dependents of `owners` can be: the namespaces of namespaced ones, or every
/// namespace (and the cluster-scoped kinds) when one of them is cluster-scoped. The flag tells
/// the latter.
pub fn scopes_of<'a>(owners: impl IntoIterator<Item = &'a ObjectId>) -> (Vec<ListScope>, bool) {
    let mut namespaces: BTreeSet<&str> = BTreeSet::new();
    for owner in owners {
        match owner.namespace.as_deref() {
            Some(namespace) => namespaces.insert(namespace),
            None => return (vec![ListScope::AllNamespaces], true),
        };
    }
    let scopes = namespaces
        .into_iter()
        .map(|n| ListScope::Namespace(n.to_string()))
        .collect();
    (scopes, false)
}

/// Lists every object with an owner reference where the dependents of `owners` can be (see
/// [`scopes_of`]), in one collection.
pub async fn owned_around<'a>(
    client: &Client,
    catalog: &Catalog,
    owners: impl IntoIterator<Item = &'a ObjectId>,
    options: ListOptions,
) -> Collection {
    let (scopes, cluster_scoped) = scopes_of(owners);
    let kinds: Vec<Arc<KindInfo>> = catalog
        .listable()
        .filter(|k| k.namespaced || cluster_scoped)
        .cloned()
        .collect();
    let owned = |meta: &kube::core::ObjectMeta| meta.owner_references.as_ref().is_some_and(|r| !r.is_empty());
    let mut all = Collection::default();
    for scope in scopes {
        let listed = collect_where(client, &kinds, &scope, owned, options).await;
        all.objects.extend(listed.objects);
        all.failures.extend(listed.failures);
        all.not_served.extend(listed.not_served);
    }
    drop_never_collected(&mut all.objects, catalog);
    all
}

/// Whether the garbage collector never deletes `object` by its owners: a cluster-scoped object
/// with an owner reference to a namespaced kind (kubernetes `garbagecollector.go`,
/// `namespacedOwnerOfClusterScopedObjectErr`, since v1.20: the reference is invalid, the
/// collector records an `OwnerRefInvalidNamespace` event and forgets the object, whatever its
/// other owners). An owner kind the catalog does not know proves nothing: the object may die.
pub fn never_collected(object: &Listed, catalog: &Catalog) -> bool {
    !object.kind.namespaced
        && object.meta.owner_references.iter().flatten().any(|reference| {
            let group = reference.api_version.rsplit_once('/').map_or("", |(group, _)| group);
            catalog.get(group, &reference.kind).is_some_and(|kind| kind.namespaced)
        })
}

/// Leaves out of an owned listing what the garbage collector never deletes by its owners
/// ([`never_collected`]): every path that judges what dies with a plan (the plan's cascades and
/// the re-check before each wave) reads its owned objects through this one rule.
pub fn drop_never_collected(owned: &mut Vec<Listed>, catalog: &Catalog) {
    owned.retain(|object| !never_collected(object, catalog));
}

/// The owners of each listed object, by UID.
pub fn owners_by_uid(objects: &[Listed]) -> HashMap<String, Vec<String>> {
    objects
        .iter()
        .map(|o| {
            let owners = o.meta.owner_references.iter().flatten().map(|r| r.uid.clone());
            (o.uid().to_string(), owners.collect())
        })
        .collect()
}

/// What makes an object a controller made count as a victim all the same: a keep marker, the
/// plan keeping it (`kept`: desired, another stack's, …), or the mark of a stack the plan does not
/// tear down (`torn_down`; an orphan prune tears none down). Only an unmarked child a controller
/// made is its owner's to take.
pub struct Counted<'a> {
    /// The stacks the plan tears down.
    pub torn_down: &'a TornDown,
    /// What the plan keeps.
    pub kept: &'a HashSet<ObjectId>,
}

/// The objects a plan keeps for a reason of their own, as [`Counted::kept`] takes them: one kept
/// because its controller owns it goes with that owner and is left out.
pub fn kept_on_their_own(kept: &[crate::prune::teardown::Kept]) -> HashSet<ObjectId> {
    kept.iter()
        .filter(|k| !matches!(k.reason, crate::stack::keep::KeepReason::ControllerOwned { .. }))
        .map(|k| k.id.clone())
        .collect()
}

impl Counted<'_> {
    /// Whether an object that dies with the plan counts as a victim.
    pub fn counts(&self, object: &Listed) -> bool {
        object.controller_owner().is_none() || self.counts_as_made(object)
    }

    /// Whether an object a controller made (its controller's child, or what a controller deletes
    /// by name: a token Secret, a Service's Endpoints) counts as a victim all the same: a keep
    /// marker, the plan keeping it, or the mark of a stack the plan does not tear down.
    pub fn counts_as_made(&self, object: &Listed) -> bool {
        keep_marker(&object.meta).is_some()
            || self.kept.contains(&object.id())
            || tracked_elsewhere(&object.meta, self.torn_down).is_some()
    }
}

/// The owner cascades of the plan among the `owned` objects (as [`owned_around`] listed them):
/// for each planned owner, the objects that die with it and count (see [`Counted`]).
/// `planned_ids` names the planned objects by UID.
pub fn owner_cascades(
    owned: &[Listed],
    planned: &Planned,
    planned_ids: &HashMap<String, ObjectId>,
    counted: &Counted,
) -> Vec<Cascade> {
    let owners_of = owners_by_uid(owned);
    let services: HashSet<ObjectId> = planned
        .ids
        .iter()
        .filter(|id| id.group.is_empty() && id.kind == "Service")
        .cloned()
        .collect();
    let mut by_holder: BTreeMap<ObjectId, Vec<Victim>> = BTreeMap::new();
    for object in owned {
        if planned.uids.contains(object.uid())
            || object.is_terminating()
            || !counted.counts(object)
            // What the control plane makes counts all the same when marked as someone's (order
            // review 30, F1: another stack's EndpointSlice owned by a planned Service).
            || (made_by_control_plane(&object.id(), &object.meta, &services).is_some() && !counted.counts_as_made(object))
            || !dies_with_plan(&object.meta, &planned.uids, &owners_of, planned.orphans)
        {
            continue;
        }
        let Some(holder) = planned_root(object.uid(), &planned.uids, &owners_of).and_then(|uid| planned_ids.get(&uid))
        else {
            continue;
        };
        by_holder.entry(holder.clone()).or_default().push(Victim {
            id: object.id(),
            uid: object.uid().to_string(),
            why: why_it_counts(object),
        });
    }
    by_holder
        .into_iter()
        .map(|(holder, mut victims)| {
            victims.sort_by(|a, b| a.id.cmp(&b.id));
            Cascade {
                holder,
                victims,
                unlisted: Vec::new(),
            }
        })
        .collect()
}

/// The Namespaces and CRDs among `owned` that the garbage collector deletes with the plan
/// although the plan does not name them (a tenant operator's Namespace, a Crossplane
/// ProviderRevision's CRDs), each with the planned owner up its chain that takes it. Their content
/// dies with them, another stack's included, so it is judged as a planned holder's is
/// ([`super::held_by_dying`]); controller-made or not, the holder itself is no proof its content is
/// its owner's (review 15, F1).
pub fn dying_holders(
    owned: &[Listed],
    planned: &Planned,
    planned_ids: &HashMap<String, ObjectId>,
) -> Vec<(ObjectId, ObjectId)> {
    let owners_of = owners_by_uid(owned);
    let mut found: Vec<(ObjectId, ObjectId)> = owned
        .iter()
        .filter(|object| {
            super::is_holder(&object.id())
                && !planned.uids.contains(object.uid())
                && !object.is_terminating()
                && dies_with_plan(&object.meta, &planned.uids, &owners_of, planned.orphans)
        })
        .filter_map(|object| {
            let root = planned_root(object.uid(), &planned.uids, &owners_of)?;
            Some((object.id(), planned_ids.get(&root)?.clone()))
        })
        .collect();
    found.sort();
    found
}

/// The objects among `owned` that a planned object controls (its owner reference with
/// `controller: true`) and that can run a controller ([`crate::graph::infer::runs_controllers`]: an
/// operator Deployment a ClusterServiceVersion made, its ServiceAccount and RBAC) or need one to
/// finalize them ([`crate::graph::stayers::needs_its_controller`]: a custom resource such an
/// operator made and owns), when they die with the plan. They are no victims (their owner's to
/// take), but nodes of the plan's graph: a custom resource whose finalizer names such an operator
/// goes before the owner that takes it (rule "what dies goes before what it needs",
/// [`crate::graph::Graph::victim_orders`]), and one that dies with its operator is told
/// ([`crate::graph::Graph::needs_its_taker`], order review 22, F2).
///
/// The controller may be a planned object or, up a chain of controllers, one that a planned
/// object controls (Crossplane's Provider → ProviderRevision → the provider's Deployment and
/// RBAC: order review 8, F5).
pub fn controlled_children(owned: &[Listed], planned: &Planned) -> Vec<Listed> {
    let owners_of = owners_by_uid(owned);
    let controller_of: HashMap<&str, &str> = owned
        .iter()
        .filter_map(|o| o.controller_owner().map(|owner| (o.uid(), owner.uid.as_str())))
        .collect();
    owned
        .iter()
        .filter(|object| {
            !planned.uids.contains(object.uid())
                && !object.is_terminating()
                && controlled_from_plan(object.uid(), &controller_of, &planned.uids)
                && may_be_needed(object)
                && dies_with_plan(&object.meta, &planned.uids, &owners_of, planned.orphans)
        })
        .cloned()
        .collect()
}

/// Whether what dies with the plan unnamed (not a counted victim) is a node of the plan's
/// graph all the same, by any route it dies (a planned controller's child, or what a cascade
/// victim owns): what can run or serve a controller, which a staying operator or backend may
/// run with ([`crate::graph::infer::runs_controllers`]), or what needs its own controller
/// ([`crate::graph::stayers::needs_its_controller`]). A need of a stayer in it then keeps what
/// takes it (order review 26, F1).
pub fn may_be_needed(object: &Listed) -> bool {
    crate::graph::infer::runs_controllers(&object.id()) || crate::graph::stayers::needs_its_controller(&object.meta)
}

/// The PersistentVolumeClaims among `owned` that die with the plan without being planned (a
/// controller's or a plain owner's, up to a planned owner), each by UID with the planned object
/// whose deletion takes it: the PV controller then reclaims their volumes
/// ([`super::volumes`], order review 22, F1).
pub fn dying_claims(
    owned: &[Listed],
    planned: &Planned,
    planned_ids: &HashMap<String, ObjectId>,
) -> HashMap<String, ObjectId> {
    dying_owned(owned, planned, planned_ids, super::volumes::is_claim)
        .into_iter()
        .map(|(_, uid, holder)| (uid, holder))
        .collect()
}

/// The objects among `owned` of the kinds `of_kind` picks that die with the plan without being
/// planned (every owner dies, up to a planned owner), each as (its id, its UID, the planned
/// object whose deletion takes it).
pub fn dying_owned(
    owned: &[Listed],
    planned: &Planned,
    planned_ids: &HashMap<String, ObjectId>,
    of_kind: impl Fn(&ObjectId) -> bool,
) -> Vec<(ObjectId, String, ObjectId)> {
    let owners_of = owners_by_uid(owned);
    owned
        .iter()
        .filter(|object| of_kind(&object.id()) && !planned.uids.contains(object.uid()))
        .filter(|object| {
            !object.is_terminating() && dies_with_plan(&object.meta, &planned.uids, &owners_of, planned.orphans)
        })
        .filter_map(|object| {
            let root = planned_root(object.uid(), &planned.uids, &owners_of)?;
            Some((object.id(), object.uid().to_string(), planned_ids.get(&root)?.clone()))
        })
        .collect()
}

/// Whether the chain of controllers up from the object with this UID reaches a planned object
/// (`controller_of`: each listed object's controller, by UID). A cycle proves nothing.
fn controlled_from_plan(uid: &str, controller_of: &HashMap<&str, &str>, planned: &HashSet<String>) -> bool {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut current = uid;
    while let Some(&controller) = controller_of.get(current) {
        if planned.contains(controller) {
            return true;
        }
        if !seen.insert(controller) {
            return false;
        }
        current = controller;
    }
    false
}

/// The planned object charged with the first owner up the owner chain of the object with this
/// UID that is charged to one (`charged`: what dies with the plan, by UID, with the planned object
/// that takes it), breadth first.
pub fn charged_owner(
    uid: &str,
    charged: &HashMap<String, ObjectId>,
    owners_of: &HashMap<String, Vec<String>>,
) -> Option<ObjectId> {
    first_owner(uid, owners_of, |owner| charged.get(owner).cloned())
}

/// The first planned owner up the owner chain of the object with this UID (breadth first).
fn planned_root(uid: &str, planned: &HashSet<String>, owners_of: &HashMap<String, Vec<String>>) -> Option<String> {
    first_owner(uid, owners_of, |owner| {
        planned.contains(owner).then(|| owner.to_string())
    })
}

/// The first answer `found` gives of an owner up the owner chain of the object with this UID,
/// breadth first, each owner asked once.
fn first_owner<T>(uid: &str, owners_of: &HashMap<String, Vec<String>>, found: impl Fn(&str) -> Option<T>) -> Option<T> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut queue: std::collections::VecDeque<&str> = owners_of.get(uid)?.iter().map(String::as_str).collect();
    while let Some(owner) = queue.pop_front() {
        if let Some(answer) = found(owner) {
            return Some(answer);
        }
        if seen.insert(owner) {
            queue.extend(owners_of.get(owner).into_iter().flatten().map(String::as_str));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::kind;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::ObjectMeta;
    use std::collections::BTreeMap as Labels;

    fn object(name: &str, owners: &[(&str, bool)], labels: &[(&str, &str)]) -> Listed {
        let meta = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("app".into()),
            uid: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<Labels<_, _>>(),
            ),
            owner_references: Some(
                owners
                    .iter()
                    .map(|(uid, controller)| OwnerReference {
                        uid: uid.to_string(),
                        controller: Some(*controller),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        Listed::new(Arc::new(kind("", "ConfigMap", true)), meta)
    }

    #[test]
    fn a_cluster_scoped_object_naming_a_namespaced_owner_is_never_collected() {
        use crate::cluster::discovery::DiscoverySource;
        let catalog = Catalog::new(
            vec![
                kind("", "ConfigMap", true),
                kind("", "Namespace", false),
                kind("rbac.authorization.k8s.io", "ClusterRole", false),
            ],
            vec![],
            DiscoverySource::PerGroup,
        );
        let with_owner = |namespaced: bool, api_version: &str, owner_kind: &str| {
            let meta = ObjectMeta {
                name: Some("o".into()),
                uid: Some("o".into()),
                namespace: namespaced.then(|| "app".to_string()),
                owner_references: Some(vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: owner_kind.into(),
                    uid: "owner".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            };
            let kind = match namespaced {
                true => kind("", "ConfigMap", true),
                false => kind("rbac.authorization.k8s.io", "ClusterRole", false),
            };
            Listed::new(Arc::new(kind), meta)
        };
        assert!(never_collected(&with_owner(false, "v1", "ConfigMap"), &catalog));
        // A cluster-scoped owner, a namespaced dependent, or an owner kind nobody serves: the
        // garbage collector may delete it.
        assert!(!never_collected(&with_owner(false, "v1", "Namespace"), &catalog));
        assert!(!never_collected(&with_owner(true, "v1", "ConfigMap"), &catalog));
        assert!(!never_collected(&with_owner(false, "example.com/v1", "Gone"), &catalog));
        let mut owned = vec![
            with_owner(false, "v1", "ConfigMap"),
            with_owner(true, "v1", "ConfigMap"),
        ];
        drop_never_collected(&mut owned, &catalog);
        assert_eq!(owned.len(), 1);
        assert!(owned[0].kind.namespaced);
    }

    #[test]
    fn what_dies_with_a_planned_owner_without_its_controller_making_it_is_a_victim() {
        let other = [
            ("kustomize.toolkit.fluxcd.io/name", "other"),
            ("kustomize.toolkit.fluxcd.io/namespace", "f"),
        ];
        let owned = [
            object("plain", &[("owner", false)], &[]),
            object("other-stacks", &[("owner", false)], &other),
            object("made", &[("owner", true)], &[]),
            object("made-but-another-stacks", &[("owner", true)], &other),
            object("second-live-owner", &[("owner", false), ("live", false)], &[]),
            object("down-the-chain", &[("made", true)], &[]),
            object("through-made", &[("made", false)], &[]),
            object("planned", &[("owner", false)], &[]),
        ];
        let planned = Planned {
            uids: ["owner", "planned"].map(String::from).into(),
            orphans: false,
            ids: [ObjectId::new("", "ConfigMap", Some("app"), "owner")].into(),
        };
        let names: HashMap<String, ObjectId> = [(
            "owner".to_string(),
            ObjectId::new("", "ConfigMap", Some("app"), "owner"),
        )]
        .into();
        let torn_down = TornDown::default();
        let kept = HashSet::new();
        let counted = Counted {
            torn_down: &torn_down,
            kept: &kept,
        };
        let cascades = owner_cascades(&owned, &planned, &names, &counted);
        assert_eq!(cascades.len(), 1);
        assert_eq!(cascades[0].holder.name, "owner");
        let victims: Vec<(&str, &str)> = cascades[0]
            .victims
            .iter()
            .map(|v| (v.id.name.as_str(), v.why.as_str()))
            .collect();
        let names: Vec<&str> = victims.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            ["made-but-another-stacks", "other-stacks", "plain", "through-made"]
        );
        assert!(victims[1].1.starts_with("tracked, not pruned"), "{victims:?}");
        assert_eq!(victims[2], ("plain", "untracked"));
    }

    /// Order review 8, F5: an operator two controllers down from a planned object (Provider →
    /// ProviderRevision → Deployment) is a node of the plan's graph, as one directly controlled is.
    #[test]
    fn what_a_chain_of_controllers_from_the_plan_runs_is_a_node() {
        let deployment = |name: &str, owners: &[(&str, bool)]| {
            let base = object(name, owners, &[]);
            Listed::new(Arc::new(kind("apps", "Deployment", true)), (*base.meta).clone())
        };
        let owned = [
            object("revision", &[("provider", true)], &[]),
            deployment("direct", &[("provider", true)]),
            deployment("two-down", &[("revision", true)]),
            deployment("not-controlled", &[("revision", false)]),
            deployment("elsewhere", &[("stranger", true)]),
        ];
        let planned = Planned {
            uids: ["provider"].map(String::from).into(),
            ids: HashSet::new(),
            orphans: false,
        };
        let mut names: Vec<String> = controlled_children(&owned, &planned)
            .iter()
            .map(|o| o.id().name)
            .collect();
        names.sort();
        assert_eq!(names, ["direct", "two-down"]);
    }

    /// Review 15, F1: a Namespace or CRD dies with the plan through any chain of owners (a
    /// Provider's revision's CRD), controller-made or not, and is charged to the planned owner.
    #[test]
    fn namespaces_and_crds_that_die_with_the_plan_are_found_with_their_planned_owner() {
        let holder = |group: &str, kind_name: &str, name: &str, owners: &[(&str, bool)]| {
            let mut meta = (*object(name, owners, &[]).meta).clone();
            meta.namespace = None;
            Listed::new(Arc::new(kind(group, kind_name, false)), meta)
        };
        let owned = [
            object("revision", &[("provider", true)], &[]),
            holder("", "Namespace", "made", &[("provider", true)]),
            holder(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "two-down",
                &[("revision", true)],
            ),
            holder(
                "",
                "Namespace",
                "second-live-owner",
                &[("provider", true), ("live", false)],
            ),
            holder("", "Namespace", "elsewhere", &[("stranger", true)]),
            holder("", "Namespace", "planned", &[("provider", true)]),
            holder(
                "rbac.authorization.k8s.io",
                "ClusterRole",
                "no-holder",
                &[("provider", true)],
            ),
        ];
        let provider = ObjectId::new("pkg.crossplane.io", "Provider", None, "provider");
        let planned = Planned {
            uids: ["provider", "planned"].map(String::from).into(),
            ids: [provider.clone()].into(),
            orphans: false,
        };
        let names: HashMap<String, ObjectId> = [("provider".to_string(), provider.clone())].into();
        let found: Vec<(String, ObjectId)> = dying_holders(&owned, &planned, &names)
            .into_iter()
            .map(|(holder, owner)| (holder.name, owner))
            .collect();
        assert_eq!(
            found,
            [
                ("made".to_string(), provider.clone()),
                ("two-down".to_string(), provider)
            ]
        );
        let orphaned = Planned {
            orphans: true,
            ..planned
        };
        assert!(dying_holders(&owned, &orphaned, &names).is_empty());
    }

    #[test]
    fn a_cluster_scoped_owner_has_its_dependents_looked_for_everywhere() {
        let id = |namespace: Option<&str>| ObjectId::new("", "ConfigMap", namespace, "x");
        let (scopes, cluster) = scopes_of(&[id(Some("a")), id(Some("b")), id(Some("a"))]);
        assert_eq!((scopes.len(), cluster), (2, false));
        let (scopes, cluster) = scopes_of(&[id(Some("a")), id(None)]);
        assert!(cluster && matches!(scopes.as_slice(), [ListScope::AllNamespaces]));
    }
}
