//! Property tests (#10 item 3): over random objects — duplicates, dangling and malformed
//! references, sync waves, kapp rules, finalizers, webhooks, volumes — building a graph and
//! planning it never panic, duplicates become one node, and every wave respects every edge.

use std::collections::{HashMap, HashSet};

use petgraph::algo::{has_path_connecting, tarjan_scc, DfsSpace};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Value};

use kubectl_stack::graph::plan::{plan_deletion, planning_order};
use kubectl_stack::graph::{
    build, BuildOptions, Graph, NodeInput, ARGO_SYNC_WAVE, KAPP_CHANGE_GROUP, KAPP_CHANGE_RULE, KPT_DEPENDS_ON,
};
use kubectl_stack::model::identity::ObjectId;
use kubectl_stack::stack::manifest::parse_text;

const KINDS: [(&str, &str); 10] = [
    ("", "ConfigMap"),
    ("", "Namespace"),
    ("", "Service"),
    ("", "PersistentVolumeClaim"),
    ("apps", "Deployment"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("kustomize.toolkit.fluxcd.io", "Kustomization"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("apiregistration.k8s.io", "APIService"),
    ("ops.example.com", "Gizmo"),
];
const NAMES: [&str; 4] = ["a", "b", "gizmos.ops.example.com", "c"];
const NAMESPACES: [Option<&str>; 3] = [None, Some("a"), Some("b")];

fn id() -> impl Strategy<Value = ObjectId> {
    (0..KINDS.len(), 0..NAMES.len(), 0..NAMESPACES.len()).prop_map(|(k, n, ns)| {
        let (group, kind) = KINDS[k];
        ObjectId::new(group, kind, NAMESPACES[ns], NAMES[n])
    })
}

/// A `depends-on` reference: valid (to an object of the pool) or not.
fn reference() -> impl Strategy<Value = String> {
    prop_oneof![
        id().prop_map(|id| match &id.namespace {
            Some(ns) => format!("{}/namespaces/{ns}/{}/{}", id.group, id.kind, id.name),
            None => format!("{}/{}/{}", id.group, id.kind, id.name),
        }),
        "[a-z/,. ]{0,20}",
    ]
}

fn annotations() -> impl Strategy<Value = Vec<(String, String)>> {
    let entry = prop_oneof![
        prop::collection::vec(reference(), 1..4).prop_map(|r| (KPT_DEPENDS_ON.to_string(), r.join(","))),
        prop_oneof![
            Just("0".to_string()),
            Just("1".to_string()),
            Just("-3".to_string()),
            "[0-9x ]{0,4}"
        ]
        .prop_map(|w| (ARGO_SYNC_WAVE.to_string(), w)),
        Just((
            "argocd.argoproj.io/tracking-id".to_string(),
            "app:/ConfigMap:a/x".to_string()
        )),
        prop_oneof![Just("g1"), Just("g2")].prop_map(|g| (KAPP_CHANGE_GROUP.to_string(), g.to_string())),
        (
            prop_oneof![Just("upsert"), Just("delete"), Just("drop")],
            prop_oneof![Just("before"), Just("after")],
            prop_oneof![Just("upserting"), Just("deleting")],
            prop_oneof![Just("g1"), Just("g2"), Just("")],
        )
            .prop_map(|(a, o, t, g)| (format!("{KAPP_CHANGE_RULE}.1"), format!("{a} {o} {t} {g}"))),
        Just((
            "pv.kubernetes.io/provisioned-by".to_string(),
            "csi.example.com".to_string()
        )),
    ];
    prop::collection::vec(entry, 0..3)
}

/// A body for the kinds inference reads: selectors, webhooks, APIService backends, claims.
fn body() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(
            json!({"spec": {"selector": {"app": "a"}, "template": {"metadata": {"labels": {"app": "a"}}}}})
        )),
        Just(Some(
            json!({"webhooks": [{"clientConfig": {"service": {"namespace": "a", "name": "a"}},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "operations": ["*"]}]}]})
        )),
        Just(Some(
            json!({"spec": {"group": "ops.example.com", "service": {"namespace": "b", "name": "b"}}})
        )),
        Just(Some(
            json!({"spec": {"storageClassName": "a", "volumeName": "b", "csi": {"driver": "csi.example.com"}}})
        )),
        Just(Some(json!({"webhooks": "not a list", "spec": 7}))),
    ]
}

fn input() -> impl Strategy<Value = NodeInput> {
    (
        id(),
        annotations(),
        prop::collection::vec(id(), 0..2),
        prop::collection::vec(
            prop_oneof![Just("ops.example.com/x"), Just("example.com/y"), Just("kubernetes")],
            0..2,
        ),
        body(),
        prop::option::of(prop_oneof![Just("a"), Just("b")]),
        any::<bool>(),
    )
        .prop_map(|(id, annotations, depends_on, finalizers, body, stack, folder)| {
            let mut input = NodeInput {
                id,
                annotations: std::sync::Arc::new(annotations.into_iter().collect()),
                depends_on,
                finalizers: finalizers.into_iter().map(str::to_string).collect(),
                body,
                app: folder.then(|| "repo/apps".to_string()),
                ..Default::default()
            };
            if let Some(stack) = stack {
                input
                    .labels_mut()
                    .insert("kustomize.toolkit.fluxcd.io/name".into(), stack.into());
                input
                    .labels_mut()
                    .insert("kustomize.toolkit.fluxcd.io/namespace".into(), "a".into());
            }
            input
        })
}

/// Inputs where some objects are defined twice, differently (as `staging/` and `prod/` do).
fn inputs() -> impl Strategy<Value = Vec<NodeInput>> {
    let defined = (input(), prop::option::weighted(0.3, input())).prop_map(|(first, again)| {
        let mut defined = vec![first];
        if let Some(mut again) = again {
            again.id = defined[0].id.clone();
            defined.push(again);
        }
        defined
    });
    prop::collection::vec(defined, 0..16).prop_map(|groups| groups.into_iter().flatten().collect())
}

fn options(members: bool, infer: bool) -> BuildOptions {
    let mut options = BuildOptions {
        members,
        infer,
        ..Default::default()
    };
    options.crd_names.insert(
        ("ops.example.com".into(), "Gizmo".into()),
        "gizmos.ops.example.com".into(),
    );
    options
}

/// Every "deleted before" pair the planner must honour for `targets`: edges (declared and
/// inferred), memberships and the victims' orders, as `planning_order` states them.
fn before_pairs(graph: &Graph, targets: &HashSet<usize>) -> Vec<(usize, usize)> {
    let order = planning_order(graph, targets);
    order
        .edge_indices()
        .filter_map(|e| order.edge_endpoints(e))
        .map(|(a, b)| (order[a], order[b]))
        .collect()
}

/// The planner's promises for `targets` (issue 25, item 1): a plan holds every target once and
/// respects every "deleted before" path of `planning_order` between two targets, also through
/// objects it does not delete and through cycles among them; a cycle among objects the plan does
/// not delete fails nothing. A failed plan names a real cycle (each step a pair of
/// `planning_order`, closing) through a target, and there is one: a target in a cyclic
/// strongly connected component.
fn check_plan(graph: &Graph, targets: &HashSet<usize>) -> Result<(), TestCaseError> {
    let order = planning_order(graph, targets);
    let node = |i: usize| petgraph::graph::NodeIndex::new(i);
    let cyclic_target = tarjan_scc(&order).into_iter().any(|scc| {
        (scc.len() > 1 || order.contains_edge(scc[0], scc[0])) && scc.iter().any(|n| targets.contains(&order[*n]))
    });
    match plan_deletion(graph, targets) {
        Ok(plan) => {
            prop_assert!(!cyclic_target, "a cycle through a target was not reported");
            let mut wave_of = HashMap::new();
            for (wave, members) in plan.waves.iter().enumerate() {
                for &node in members {
                    prop_assert!(targets.contains(&node), "not a target");
                    prop_assert!(wave_of.insert(node, wave).is_none(), "planned twice");
                }
            }
            prop_assert_eq!(wave_of.len(), targets.len());
            for (first, later) in before_pairs(graph, targets) {
                if targets.contains(&first) && targets.contains(&later) {
                    prop_assert!(
                        wave_of[&first] < wave_of[&later],
                        "{:?} before {:?}",
                        graph.nodes[first].id,
                        graph.nodes[later].id
                    );
                }
            }
            let mut space = DfsSpace::new(&order);
            for &first in targets {
                for &later in targets {
                    if first != later && has_path_connecting(&order, node(first), node(later), Some(&mut space)) {
                        prop_assert!(
                            wave_of[&first] < wave_of[&later],
                            "path {:?} ~> {:?}",
                            graph.nodes[first].id,
                            graph.nodes[later].id
                        );
                    }
                }
            }
        }
        Err(cycle) => {
            prop_assert!(
                cyclic_target,
                "a cycle was reported where no target is in one: {:?}",
                cycle
            );
            // The cycle is real: each step is a "deleted before" pair, it closes, and it passes
            // through a target.
            let pairs: HashSet<(usize, usize)> = before_pairs(graph, targets).into_iter().collect();
            prop_assert!(!cycle.path.is_empty());
            prop_assert!(cycle.path.iter().any(|n| targets.contains(n)), "{:?}", cycle);
            for (i, &node) in cycle.path.iter().enumerate() {
                let next = cycle.path[(i + 1) % cycle.path.len()];
                prop_assert!(pairs.contains(&(node, next)), "{node} -> {next} not an edge");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn building_and_planning_never_panic_and_waves_respect_every_edge(
        inputs in inputs(),
        members in any::<bool>(),
        infer in any::<bool>(),
        chosen in prop::option::of(prop::collection::vec(any::<bool>(), 32)),
    ) {
        let graph = build(&inputs, &options(members, infer));
        // Duplicates are merged: one node per identity, every input has its node.
        let ids: HashSet<&ObjectId> = graph.nodes.iter().map(|n| &n.id).collect();
        prop_assert_eq!(ids.len(), graph.nodes.len());
        for input in &inputs {
            prop_assert!(graph.find(&input.id).is_some());
        }
        for edge in graph.all_edges() {
            prop_assert!(edge.from < graph.nodes.len() && edge.to < graph.nodes.len());
        }
        for edge in &graph.inferred {
            prop_assert!(edge.kind.is_inferred());
        }
        // Every node, or a random part of them (a teardown of one stack among others).
        let targets: HashSet<usize> = (0..graph.nodes.len())
            .filter(|i| chosen.as_ref().is_none_or(|c| c[i % c.len()]))
            .collect();
        check_plan(&graph, &targets)?;
        if let Err(cycle) = plan_deletion(&graph, &targets) {
            // Inferred edges never create a cycle: without them it is still there.
            let declared = build(&inputs, &options(members, false));
            prop_assert!(plan_deletion(&declared, &targets).is_err(), "{:?}", cycle);
        }
    }

    #[test]
    fn manifests_of_any_text_parse_or_fail_without_panic(text in "(apiVersion: v1\nkind: ConfigMap\nmetadata: \\{name: [a-z]{0,3}\\}\n---\n)?[ -~\n]{0,200}") {
        let _ = parse_text(&text, "fuzz.yaml");
    }

    #[test]
    fn depends_on_references_of_any_text_never_panic(text in "[ -~]{0,60}") {
        let _ = ObjectId::from_depends_on_ref(&text);
        let _ = ObjectId::from_flux_inventory_id(&text);
    }
}
