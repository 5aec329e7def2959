//! Safeguards: the rules that keep an object out of a prune, one rule per function (as
//! cli-utils' `pkg/apply/filter`). The planner ([`crate::prune::teardown`]) applies them when it plans,
//! and the re-check ([`crate::prune::recheck`]) applies them again before every wave.

use std::collections::{BTreeMap, HashMap, HashSet};

use kube::core::ObjectMeta;

use crate::graph::{Edge, EdgeKind, Graph};
use crate::model::identity::ObjectId;
use crate::stack::keep::KeepReason;

/// Whether an object dies with the plan, as the garbage collector decides: it has owners and
/// **every** one of them is deleted by the plan or dies with it in turn (by UID, through the
/// owners known here). An object with one live owner outside the plan is kept by the garbage
/// collector (kubernetes `pkg/controller/garbagecollector/garbagecollector.go`
/// `attemptToDeleteItem`: "solid" owners keep it), so it does not die with the plan: it keeps
/// its Namespace, and a Namespace deleted around it takes it as a cascade victim. An owner not
/// known here counts as live. Such an object does not keep its Namespace, and is not "left
/// behind".
///
/// With `orphans` (the plan deletes with `--cascade=orphan`, see
/// [`crate::graph::Graph::orphan_dependents`]) nothing dies so: the garbage collector removes the
/// planned owners' references instead, and an owner that would die only through them stays.
pub fn dies_with_plan(
    meta: &ObjectMeta,
    planned: &HashSet<String>,
    owners_of: &HashMap<String, Vec<String>>,
    orphans: bool,
) -> bool {
    if orphans {
        return false;
    }
    let owners: Vec<&str> = meta.owner_references.iter().flatten().map(|o| o.uid.as_str()).collect();
    let mut on_path = HashSet::new();
    !owners.is_empty()
        && owners
            .iter()
            .all(|uid| owner_dies(uid, planned, owners_of, &mut on_path))
}

/// Whether the owner with this UID is deleted by the plan or dies with it (every owner of its
/// own does). A cycle of owners proves nothing: it counts as live.
fn owner_dies<'a>(
    uid: &'a str,
    planned: &HashSet<String>,
    owners_of: &'a HashMap<String, Vec<String>>,
    on_path: &mut HashSet<&'a str>,
) -> bool {
    if planned.contains(uid) {
        return true;
    }
    let Some(owners) = owners_of.get(uid).filter(|owners| !owners.is_empty()) else {
        return false;
    };
    if !on_path.insert(uid) {
        return false;
    }
    let dies = owners
        .iter()
        .all(|owner| owner_dies(owner, planned, owners_of, on_path));
    on_path.remove(uid);
    dies
}

/// Rule: what something that stays depends on stays too. Returns the planned nodes that a
/// staying node depends on (directly), each with the reason. `staying` tells whether a node of
/// the graph exists and is not deleted.
pub fn needed_by_staying(
    graph: &Graph,
    planned: &HashSet<usize>,
    staying: impl Fn(usize) -> bool,
) -> BTreeMap<usize, KeepReason> {
    let mut needed = BTreeMap::new();
    // What a planned owner takes with it (the garbage collector's all-owners rule): a need that
    // dies so keeps those owners.
    let by_owners = graph.dying_by_owners(|index| planned.contains(&index));
    // A planned need that dies before its own wave (with a Namespace a planned owner takes)
    // keeps what takes it too (review 16, F3).
    let early = graph.early_takers(planned);
    // A need that dies as the content of a Namespace or CRD that dies with the plan unplanned (a
    // tenant Namespace a planned object controls) keeps what takes that holder (order review 24).
    // One a planned Namespace or CRD holds keeps that holder by its own rule ("holds").
    let dying = graph.dying_victims(|index| planned.contains(&index));
    let held_by_planned = |index: usize| {
        graph.edges.iter().any(|e| {
            e.from == index && matches!(e.kind, EdgeKind::Namespace | EdgeKind::Crd) && planned.contains(&e.to)
        })
    };
    // One edge set: declared, structural and inferred (a CR that stays needs the operator its
    // finalizer names; an untracked webhook that stays needs its backend).
    // An inferred need that orders nothing (it would close a cycle) keeps all the same.
    for Edge { from, to, kind } in graph.needs() {
        if planned.contains(from) || !staying(*from) {
            continue;
        }
        let by = graph.nodes[*from].id.to_string();
        if planned.contains(to) && !needed.contains_key(to) {
            let why = match kind {
                EdgeKind::Namespace | EdgeKind::Crd => KeepReason::Holds { held: by.clone() },
                other => KeepReason::Needed {
                    by: by.clone(),
                    edge: other.label().to_string(),
                },
            };
            needed.insert(*to, why);
            for taker in early.get(to).into_iter().flatten() {
                needed.entry(*taker).or_insert_with(|| KeepReason::Needed {
                    by: by.clone(),
                    edge: format!("{}: {} dies with it", kind.label(), graph.nodes[*to].id),
                });
            }
        } else if let Some(owners) = by_owners
            .get(to)
            .or_else(|| dying.get(to).filter(|_| !held_by_planned(*to)))
        {
            for owner in owners {
                needed.entry(*owner).or_insert_with(|| KeepReason::Needed {
                    by: by.clone(),
                    edge: format!("{}: {} dies with it", kind.label(), graph.nodes[*to].id),
                });
            }
        }
    }
    needed
}

/// Rule: a Namespace or a CRD is not deleted while it holds an object that stays (its deletion
/// would delete that object too). `crd_of` names the CRD (`plural.group`) of a custom kind.
pub fn holds_staying<'a>(
    holder: &ObjectId,
    staying: impl IntoIterator<Item = &'a ObjectId>,
    crd_of: impl Fn(&ObjectId) -> Option<String>,
) -> Option<&'a ObjectId> {
    let mut staying = staying.into_iter();
    match (holder.group.as_str(), holder.kind.as_str()) {
        ("", "Namespace") => staying.find(|id| id.namespace.as_deref() == Some(holder.name.as_str())),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            staying.find(|id| crd_of(id).as_deref() == Some(holder.name.as_str()))
        }
        _ => None,
    }
}

/// The annotation that names the ServiceAccount of a token Secret.
pub const SERVICE_ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";

/// Rule (cascade victims): what the control plane makes by itself, in every namespace or for
/// every Service, is no loss when its Namespace goes: the `default` ServiceAccount, the
/// `kube-root-ca.crt` ConfigMap, Events, and the Endpoints and EndpointSlices of a Service
/// (`services`: the Services of the Namespace and those the plan deletes). Returns what it is.
/// (The default ServiceAccount's token Secret: see [`token_of_default_account`].)
pub fn made_by_control_plane(id: &ObjectId, meta: &ObjectMeta, services: &HashSet<ObjectId>) -> Option<&'static str> {
    let service_named = |name: Option<&str>| {
        name.is_some_and(|name| services.contains(&ObjectId::new("", "Service", id.namespace.as_deref(), name)))
    };
    let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str);
    match (id.group.as_str(), id.kind.as_str(), id.name.as_str()) {
        ("", "ServiceAccount", "default") => Some("the default ServiceAccount"),
        ("", "ConfigMap", "kube-root-ca.crt") => Some("the cluster CA bundle"),
        ("", "Event", _) | ("events.k8s.io", "Event", _) => Some("an Event"),
        ("", "Endpoints", name) if service_named(Some(name)) => Some("a Service's Endpoints"),
        // Only a slice the EndpointSlice controllers manage is theirs: a hand-made one for a
        // Service without a selector is someone's (order review 30, F3).
        ("discovery.k8s.io", "EndpointSlice", _)
            if service_named(label("kubernetes.io/service-name"))
                && matches!(
                    label("endpointslice.kubernetes.io/managed-by"),
                    Some("endpointslice-controller.k8s.io" | "endpointslicemirroring-controller.k8s.io")
                ) =>
        {
            Some("a Service's EndpointSlice")
        }
        _ => None,
    }
}

/// Rule (cascade victims): the token Secret the token controller made for a Namespace's
/// `default` ServiceAccount: a Secret whose `kubernetes.io/service-account.name` is `default`
/// and whose `kubernetes.io/service-account.uid` is the UID of that ServiceAccount as listed
/// (`default_accounts`: the UIDs of the listed `default` ServiceAccounts). The name annotation
/// alone proves nothing: any Secret can carry it (metadata-only lists cannot see the type).
pub fn token_of_default_account(id: &ObjectId, meta: &ObjectMeta, default_accounts: &HashSet<String>) -> bool {
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str);
    id.group.is_empty()
        && id.kind == "Secret"
        && annotation(SERVICE_ACCOUNT_NAME) == Some("default")
        && annotation(crate::prune::cascade::SERVICE_ACCOUNT_UID).is_some_and(|uid| default_accounts.contains(uid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{build, BuildOptions, NodeInput};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use crate::cluster::fixtures::meta;

    #[test]
    fn children_die_with_a_planned_owner_through_the_owner_chain() {
        let owned_by = |uid: &str, controller: bool| ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                uid: uid.into(),
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                controller: Some(controller),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let pod = owned_by("rs-uid", true);
        let planned: HashSet<String> = ["deploy-uid".to_string()].into();
        let owners = HashMap::from([("rs-uid".to_string(), vec!["deploy-uid".to_string()])]);
        assert!(dies_with_plan(&pod, &planned, &owners, false));
        assert!(!dies_with_plan(&pod, &planned, &HashMap::new(), false));
        assert!(
            !dies_with_plan(&pod, &planned, &owners, true),
            "--cascade=orphan takes nothing"
        );
        assert!(!dies_with_plan(&ObjectMeta::default(), &planned, &owners, false));
    }

    #[test]
    fn an_object_dies_with_the_plan_only_when_every_owner_does() {
        let owned_by = |uids: &[&str]| ObjectMeta {
            owner_references: Some(
                uids.iter()
                    .map(|uid| OwnerReference {
                        uid: (*uid).into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        let planned: HashSet<String> = ["p".to_string()].into();
        let owners = HashMap::from([
            ("rs".to_string(), vec!["p".to_string()]),
            ("loop-a".to_string(), vec!["loop-b".to_string()]),
            ("loop-b".to_string(), vec!["loop-a".to_string()]),
        ]);
        assert!(dies_with_plan(&owned_by(&["p"]), &planned, &owners, false));
        assert!(dies_with_plan(&owned_by(&["p", "rs"]), &planned, &owners, false));
        // A second, live owner (an untracked ClusterRole the plan keeps) keeps it.
        assert!(!dies_with_plan(
            &owned_by(&["p", "clusterrole"]),
            &planned,
            &owners,
            false
        ));
        assert!(!dies_with_plan(&owned_by(&["loop-a"]), &planned, &owners, false));
    }

    #[test]
    fn what_a_staying_object_depends_on_stays() {
        let cm = |name: &str, deps: &[&str]| {
            let mut input = NodeInput {
                id: ObjectId::new("", "ConfigMap", Some("t"), name),
                ..Default::default()
            };
            if !deps.is_empty() {
                let refs: Vec<String> = deps.iter().map(|d| format!("/namespaces/t/ConfigMap/{d}")).collect();
                input
                    .annotations_mut()
                    .insert(crate::graph::KPT_DEPENDS_ON.into(), refs.join(","));
            }
            input
        };
        // app (kept) -> base; other -> base2; other is planned too.
        let graph = build(
            &[
                cm("app", &["base"]),
                cm("base", &[]),
                cm("other", &["base2"]),
                cm("base2", &[]),
            ],
            &BuildOptions::default(),
        );
        let planned: HashSet<usize> = [1, 2, 3].into();
        let needed = needed_by_staying(&graph, &planned, |_| true);
        assert_eq!(needed.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert!(needed[&1].to_string().contains("ConfigMap/t/app"), "{needed:?}");
        // A node that does not stay (e.g. already gone) keeps nothing.
        assert!(needed_by_staying(&graph, &planned, |_| false).is_empty());
    }

    /// Issue 29's generated worlds: an inferred need that cannot order (declared edges win the
    /// order, see `Graph::unordered`) still keeps: a webhook that stays keeps its backend.
    #[test]
    fn an_inferred_need_that_cannot_order_still_keeps() {
        let node = |group: &str, kind: &str, namespace: Option<&str>, name: &str| NodeInput {
            id: ObjectId::new(group, kind, namespace, name),
            ..Default::default()
        };
        let mut graph = build(
            &[
                node(
                    "admissionregistration.k8s.io",
                    "ValidatingWebhookConfiguration",
                    None,
                    "hook",
                ),
                node("", "Service", Some("ops"), "webhook"),
            ],
            &BuildOptions::default(),
        );
        graph.unordered.push(Edge {
            from: 0,
            to: 1,
            kind: EdgeKind::InferredWebhook,
        });
        let needed = needed_by_staying(&graph, &[1].into(), |i| i == 0);
        assert!(
            needed.get(&1).is_some_and(|why| why.to_string().contains("hook")),
            "{needed:?}"
        );
    }

    #[test]
    fn namespaces_and_crds_that_hold_staying_objects_stay() {
        let staying = [
            ObjectId::new("", "ConfigMap", Some("shop"), "settings"),
            ObjectId::new("example.com", "Widget", Some("other"), "w"),
        ];
        let crd_of = |id: &ObjectId| (id.group == "example.com").then(|| "widgets.example.com".to_string());
        let namespace = ObjectId::new("", "Namespace", None, "shop");
        assert_eq!(holds_staying(&namespace, &staying, crd_of), Some(&staying[0]));
        let empty = ObjectId::new("", "Namespace", None, "empty");
        assert_eq!(holds_staying(&empty, &staying, crd_of), None);
        let crd = ObjectId::new(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        );
        assert_eq!(holds_staying(&crd, &staying, crd_of), Some(&staying[1]));
        let config_map = ObjectId::new("", "ConfigMap", Some("shop"), "x");
        assert_eq!(holds_staying(&config_map, &staying, crd_of), None);
    }

    #[test]
    fn what_the_control_plane_makes_is_no_loss() {
        let services: HashSet<ObjectId> = [ObjectId::new("", "Service", Some("shop"), "web")].into();
        let plain = ObjectMeta::default();
        let id = |group: &str, kind: &str, name: &str| ObjectId::new(group, kind, Some("shop"), name);
        assert!(made_by_control_plane(&id("", "ServiceAccount", "default"), &plain, &services).is_some());
        assert!(made_by_control_plane(&id("", "ServiceAccount", "builder"), &plain, &services).is_none());
        let token = meta(
            &[],
            &[
                (SERVICE_ACCOUNT_NAME, "default"),
                (crate::prune::cascade::SERVICE_ACCOUNT_UID, "sa-uid"),
            ],
        );
        let accounts: HashSet<String> = ["sa-uid".to_string()].into();
        assert!(token_of_default_account(
            &id("", "Secret", "default-token-x"),
            &token,
            &accounts
        ));
        // A Secret that only names the default ServiceAccount is a user's Secret (finding 6).
        let named_only = meta(&[], &[(SERVICE_ACCOUNT_NAME, "default")]);
        assert!(!token_of_default_account(
            &id("", "Secret", "mine"),
            &named_only,
            &accounts
        ));
        assert!(!token_of_default_account(
            &id("", "Secret", "t"),
            &token,
            &HashSet::new()
        ));
        assert!(made_by_control_plane(&id("", "Secret", "default-token-x"), &token, &services).is_none());
        let other_token = meta(&[], &[(SERVICE_ACCOUNT_NAME, "builder")]);
        assert!(made_by_control_plane(&id("", "Secret", "builder-token-x"), &other_token, &services).is_none());
        assert!(made_by_control_plane(&id("", "Secret", "handmade"), &plain, &services).is_none());
        assert!(made_by_control_plane(&id("", "ConfigMap", "kube-root-ca.crt"), &plain, &services).is_some());
        assert!(made_by_control_plane(&id("events.k8s.io", "Event", "e"), &plain, &services).is_some());
        assert!(made_by_control_plane(&id("", "Endpoints", "web"), &plain, &services).is_some());
        assert!(made_by_control_plane(&id("", "Endpoints", "db"), &plain, &services).is_none());
        let slice = meta(
            &[
                ("kubernetes.io/service-name", "web"),
                (
                    "endpointslice.kubernetes.io/managed-by",
                    "endpointslice-controller.k8s.io",
                ),
            ],
            &[],
        );
        assert!(
            made_by_control_plane(&id("discovery.k8s.io", "EndpointSlice", "web-abc"), &slice, &services).is_some()
        );
        // A hand-made slice (no managing controller) is someone's (order review 30, F3).
        let hand_made = meta(&[("kubernetes.io/service-name", "web")], &[]);
        assert!(made_by_control_plane(
            &id("discovery.k8s.io", "EndpointSlice", "web-hand"),
            &hand_made,
            &services
        )
        .is_none());
        assert!(made_by_control_plane(&id("", "PersistentVolumeClaim", "data"), &plain, &services).is_none());
    }
}
