//! Building the graph: one node per object, the declared and implicit edges, memberships and
//! the inferred edges.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use super::declared::{kapp_edges, sync_wave_edges};
use super::memberships::memberships;
use super::{BuildOptions, Edge, EdgeKind, Graph, NodeInput, NodeStatus, KPT_DEPENDS_ON};
use crate::model::identity::ObjectId;
use crate::stack::members::{flux_inventory_of, orphans_members};

/// Builds the graph of the selected objects. Explicit dependencies outside the selection become
/// referred-to nodes (status decided later by `mark_referenced`); implicit ones (CRD, Namespace)
/// are kept only when the target is selected.
pub fn build(inputs: &[NodeInput], options: &BuildOptions) -> Graph {
    // Edges are indexed by input position below: one input per identity makes it the node index.
    let inputs = merge_duplicates(inputs);
    let inputs = inputs.as_ref();
    let mut graph = Graph {
        orphan_dependents: options.orphan_dependents,
        ..Graph::default()
    };
    for input in inputs {
        graph.add(input.id.clone(), input.uid.clone(), NodeStatus::Selected);
    }
    let mut edges = Vec::new();
    for (from, input) in inputs.iter().enumerate() {
        for target in &input.depends_on {
            edges.push((from, target.clone(), EdgeKind::DependsOn));
        }
        if let Some(list) = input.annotations.get(KPT_DEPENDS_ON) {
            for target in list.split(',').filter_map(ObjectId::from_depends_on_ref) {
                edges.push((from, target, EdgeKind::KptDependsOn));
            }
        }
        implicit_edges(&graph, input, options, from, &mut edges);
    }
    for (from, target, kind) in edges {
        let to = graph.add(target, None, NodeStatus::External);
        if from != to || kind != EdgeKind::Namespace {
            graph.edges.push(Edge { from, to, kind });
        }
    }
    // A referred-to object lives in its Namespace (and its CRD) too: what dies with it (a
    // Namespace of the plan) is ordered through these edges like any other.
    let mut implicit = Vec::new();
    for index in inputs.len()..graph.nodes.len() {
        let referenced = NodeInput {
            id: graph.nodes[index].id.clone(),
            ..NodeInput::default()
        };
        implicit_edges(&graph, &referenced, options, index, &mut implicit);
    }
    for (from, target, kind) in implicit {
        if let Some(to) = graph.find(&target).filter(|&to| to != from) {
            graph.edges.push(Edge { from, to, kind });
        }
    }
    graph.edges.extend(sync_wave_edges(inputs));
    graph.edges.extend(kapp_edges(inputs));
    if options.members {
        graph.members = memberships(inputs);
        graph.orphaning = inputs
            .iter()
            .enumerate()
            .filter_map(|(index, input)| orphans_members(input).map(|why| (index, why)))
            .collect();
        graph.inert = inputs
            .iter()
            .enumerate()
            .filter_map(|(index, input)| crate::stack::members::deletes_nothing_itself(input).map(|why| (index, why)))
            .collect();
        graph.inventories = inputs
            .iter()
            .enumerate()
            .filter_map(|(index, input)| flux_inventory_of(input).map(|record| (index, record)))
            .collect();
    }
    graph.edges.sort_by_key(|e| (e.from, e.to, e.kind));
    graph.edges.dedup();
    graph.owners = owners_of(&graph, inputs);
    if options.infer {
        add_inferred(&mut graph, inputs, options);
    }
    graph
}

/// The owners of each input that has any, as nodes by UID (or the UID of an owner that is no
/// node).
fn owners_of(graph: &Graph, inputs: &[NodeInput]) -> HashMap<usize, Vec<super::Owner>> {
    let by_uid: HashMap<&str, usize> = graph
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(index, node)| node.uid.as_deref().map(|uid| (uid, index)))
        .collect();
    inputs
        .iter()
        .enumerate()
        .filter(|(_, input)| !input.owners.is_empty())
        .map(|(index, input)| {
            let owners = input.owners.iter().map(|uid| match by_uid.get(uid.as_str()) {
                Some(&node) => super::Owner::Node(node),
                None => super::Owner::Outside(uid.clone()),
            });
            (index, owners.collect())
        })
        .collect()
}

/// Adds the inferred edges; one that would close a cycle is dropped with a warning naming it.
fn add_inferred(graph: &mut Graph, inputs: &[NodeInput], options: &BuildOptions) {
    let known = crate::graph::infer::Known {
        crd_names: options.crd_names.clone(),
        plurals: options.plurals.clone(),
    };
    let candidates = crate::graph::infer::candidates(inputs, &known);
    let dropped = crate::graph::infer::add_acyclic(graph, candidates);
    for dropped in &dropped {
        tracing::warn!(
            "inferred edge {} -> {} ({}) orders nothing: it would close a dependency cycle with declared ones, which win (it still keeps what it needs)",
            graph.nodes[dropped.from].id,
            graph.nodes[dropped.to].id,
            dropped.kind.label()
        );
    }
    graph.unordered = dropped;
}

/// One input per identity, in first-seen order. A later definition of the same object is merged
/// into the first: its dependencies (Flux `dependsOn`, `depends-on` references) are added, and its
/// labels and annotations fill in what the first does not set (the first wins where both do).
pub fn merge_duplicates(inputs: &[NodeInput]) -> Cow<'_, [NodeInput]> {
    let mut seen = HashSet::with_capacity(inputs.len());
    if inputs.iter().all(|input| seen.insert(&input.id)) {
        return Cow::Borrowed(inputs);
    }
    let mut merged: Vec<NodeInput> = Vec::with_capacity(seen.len());
    let mut position: HashMap<&ObjectId, usize> = HashMap::with_capacity(seen.len());
    for input in inputs {
        match position.get(&input.id) {
            Some(&first) => merge_into(&mut merged[first], input),
            None => {
                position.insert(&input.id, merged.len());
                merged.push(input.clone());
            }
        }
    }
    Cow::Owned(merged)
}

fn merge_into(first: &mut NodeInput, other: &NodeInput) {
    let labels = std::sync::Arc::make_mut(&mut first.labels);
    for (key, value) in other.labels.iter() {
        labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    let annotations = std::sync::Arc::make_mut(&mut first.annotations);
    for (key, value) in other.annotations.iter() {
        match annotations.get_mut(key) {
            Some(existing) if key == KPT_DEPENDS_ON && existing != value => {
                let mut references: Vec<String> = existing.split(',').map(|r| r.trim().to_string()).collect();
                for reference in value.split(',').map(str::trim) {
                    if !references.iter().any(|r| r == reference) {
                        references.push(reference.to_string());
                    }
                }
                *existing = references.join(",");
            }
            Some(_) => {}
            None => {
                annotations.insert(key.clone(), value.clone());
            }
        }
    }
    for dependency in &other.depends_on {
        if !first.depends_on.contains(dependency) {
            first.depends_on.push(dependency.clone());
        }
    }
    if first.uid.is_none() {
        first.uid.clone_from(&other.uid);
    }
    // The same object read twice (a stayer read whole, a child read by its metadata): what one
    // reading lacks, the other gives, whichever came first (inference reads the body).
    if first.body.is_none() {
        first.body.clone_from(&other.body);
    }
    if first.finalizers.is_empty() {
        first.finalizers.clone_from(&other.finalizers);
    }
    if first.owners.is_empty() {
        first.owners.clone_from(&other.owners);
    }
}

fn implicit_edges(
    graph: &Graph,
    input: &NodeInput,
    options: &BuildOptions,
    from: usize,
    out: &mut Vec<(usize, ObjectId, EdgeKind)>,
) {
    if let Some(namespace) = &input.id.namespace {
        let target = ObjectId::new("", "Namespace", None, namespace);
        if graph.find(&target).is_some() {
            out.push((from, target, EdgeKind::Namespace));
        }
    }
    if let Some(crd) = options.crd_names.get(&(input.id.group.clone(), input.id.kind.clone())) {
        let target = ObjectId::new("apiextensions.k8s.io", "CustomResourceDefinition", None, crd);
        if graph.find(&target).is_some() {
            out.push((from, target, EdgeKind::Crd));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::test_inputs::{ks, node};
    use crate::graph::{
        Edge, EdgeKind, NodeStatus, ARGO_SYNC_WAVE, KAPP_CHANGE_GROUP, KAPP_CHANGE_RULE, KPT_DEPENDS_ON,
    };

    #[test]
    fn flux_depends_on_defaults_to_the_objects_namespace() {
        let graph = build(
            &[
                ks("usage", &[("operator", None), ("infra", Some("other"))]),
                ks("operator", &[]),
            ],
            &BuildOptions::default(),
        );
        let usage = graph
            .find(&ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("flux-system"),
                "usage",
            ))
            .unwrap();
        let operator = graph
            .find(&ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("flux-system"),
                "operator",
            ))
            .unwrap();
        let infra = graph
            .find(&ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("other"),
                "infra",
            ))
            .unwrap();
        assert!(graph.edges.contains(&Edge {
            from: usage,
            to: operator,
            kind: EdgeKind::DependsOn
        }));
        assert!(graph.edges.contains(&Edge {
            from: usage,
            to: infra,
            kind: EdgeKind::DependsOn
        }));
        assert_eq!(graph.nodes[infra].status, NodeStatus::External);
    }

    #[test]
    fn kpt_argo_kapp_and_implicit_edges() {
        let mut pod = node("", "Pod", Some("test"), "pod-a");
        pod.annotations_mut().insert(
            KPT_DEPENDS_ON.into(),
            "/namespaces/test/ConfigMap/cm, apps/namespaces/test/Deployment/d".into(),
        );
        let cm = node("", "ConfigMap", Some("test"), "cm");
        let namespace = node("", "Namespace", None, "test");
        let crd = node(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        );
        let widget = node("example.com", "Widget", Some("test"), "w");
        let mut wave1 = node("", "ConfigMap", Some("test"), "wave1");
        wave1.annotations_mut().insert(
            "argocd.argoproj.io/tracking-id".into(),
            "app:/ConfigMap:test/wave1".into(),
        );
        // Not a number to Go's Atoi (a space): Argo CD takes the Helm hook weight (review 15).
        wave1.annotations_mut().insert(ARGO_SYNC_WAVE.into(), " 0".into());
        wave1.annotations_mut().insert("helm.sh/hook-weight".into(), "1".into());
        let mut wave0 = node("", "ConfigMap", Some("test"), "wave0");
        wave0.annotations_mut().insert(
            "argocd.argoproj.io/tracking-id".into(),
            "app:/ConfigMap:test/wave0".into(),
        );
        let mut job = node("batch", "Job", Some("test"), "migrate");
        job.annotations_mut()
            .insert(KAPP_CHANGE_GROUP.into(), "db-migrations".into());
        let mut app = node("apps", "Deployment", Some("test"), "app");
        app.annotations_mut().insert(
            format!("{KAPP_CHANGE_RULE}.0"),
            "upsert after upserting db-migrations".into(),
        );
        let inputs = vec![pod, cm, namespace, crd, widget, wave1, wave0, job, app];
        let mut options = BuildOptions::default();
        options
            .crd_names
            .insert(("example.com".into(), "Widget".into()), "widgets.example.com".into());
        let graph = build(&inputs, &options);
        let has = |from: usize, to: usize, kind| graph.edges.contains(&Edge { from, to, kind });
        assert!(has(0, 1, EdgeKind::KptDependsOn));
        let deployment = graph
            .find(&ObjectId::new("apps", "Deployment", Some("test"), "d"))
            .unwrap();
        assert!(has(0, deployment, EdgeKind::KptDependsOn));
        assert!(has(0, 2, EdgeKind::Namespace) && has(1, 2, EdgeKind::Namespace) && has(4, 2, EdgeKind::Namespace));
        assert!(has(4, 3, EdgeKind::Crd));
        assert!(has(5, 6, EdgeKind::SyncWave));
        assert!(!has(6, 5, EdgeKind::SyncWave));
        assert!(has(8, 7, EdgeKind::KappRule));
    }

    /// Order review 14, F2: kapp replaces the placeholders of a change group, and of the group a
    /// change rule names, with the values of the object that carries the annotation
    /// (carvel-dev/kapp `change_group_name.go`); one without a value for it makes no edge.
    #[test]
    fn kapp_placeholders_are_replaced_by_the_objects_values() {
        let mut config = node("", "ConfigMap", Some("shop"), "cfg");
        config
            .annotations_mut()
            .insert(KAPP_CHANGE_GROUP.into(), "apps.co/config-{name}".into());
        let mut web = node("apps", "Deployment", Some("shop"), "web");
        web.annotations_mut().insert(
            KAPP_CHANGE_RULE.into(),
            "delete before deleting apps.co/config-cfg".into(),
        );
        let mut by_namespace = node("apps", "Deployment", Some("shop"), "api");
        by_namespace.annotations_mut().insert(
            KAPP_CHANGE_RULE.into(),
            "delete before deleting apps.co/{namespace}-crds".into(),
        );
        let mut crd = node(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        );
        crd.annotations_mut()
            .insert(KAPP_CHANGE_GROUP.into(), "apps.co/shop-crds".into());
        let mut unresolved = node("", "ConfigMap", Some("shop"), "odd");
        unresolved
            .annotations_mut()
            .insert(KAPP_CHANGE_GROUP.into(), "apps.co/config-{crd-kind}".into());
        let mut rule_on_odd = node("", "Secret", Some("shop"), "s");
        rule_on_odd
            .annotations_mut()
            .insert(KAPP_CHANGE_RULE.into(), "delete before deleting apps.co/config-".into());
        let graph = build(
            &[config, web, by_namespace, crd, unresolved, rule_on_odd],
            &BuildOptions::default(),
        );
        let has = |from: usize, to: usize| {
            graph.edges.contains(&Edge {
                from,
                to,
                kind: EdgeKind::KappRule,
            })
        };
        assert!(has(1, 0), "{:?}", graph.edges);
        assert!(has(2, 3), "{:?}", graph.edges);
        assert!(
            !graph.edges.iter().any(|e| e.to == 4 || e.from == 5),
            "{:?}",
            graph.edges
        );
        assert_eq!(
            super::super::declared::kapp_group_name("g-{crd-group}-{crd-kind}", &{
                let mut crd = node(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    None,
                    "gizmos.ops.io",
                );
                crd.body = Some(serde_json::json!({"spec": {"group": "ops.io", "names": {"kind": "Gizmo"}}}));
                crd
            }),
            Some("g-ops.io-Gizmo".to_string())
        );
    }

    /// Order review 14, F3: a Flux `dependsOn` entry with `namespace: ""` names a stack in the
    /// dependent's own namespace, as kustomize-controller reads it.
    #[test]
    fn an_empty_depends_on_namespace_is_the_dependents_own() {
        let id = ObjectId::new(
            "kustomize.toolkit.fluxcd.io",
            "Kustomization",
            Some("flux-system"),
            "use",
        );
        let body = serde_json::json!({"spec": {"dependsOn": [{"name": "op", "namespace": ""}]}});
        assert_eq!(
            NodeInput::flux_depends_on(&id, &body),
            [ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("flux-system"),
                "op"
            )]
        );
    }

    #[test]
    fn duplicates_are_merged_into_one_node_with_every_dependency() {
        // Two files (staging/, prod/) define the same ConfigMap; the second also depends on `b`.
        let mut first = node("", "ConfigMap", Some("t"), "app");
        first
            .annotations_mut()
            .insert(KPT_DEPENDS_ON.into(), "/namespaces/t/ConfigMap/a".into());
        first.labels_mut().insert("tier".into(), "first".into());
        let mut second = first.clone();
        second
            .annotations_mut()
            .insert(KPT_DEPENDS_ON.into(), "/namespaces/t/ConfigMap/b".into());
        second.labels_mut().insert("tier".into(), "second".into());
        second.labels_mut().insert("extra".into(), "yes".into());
        let inputs = vec![
            first,
            node("", "ConfigMap", Some("t"), "a"),
            second,
            node("", "ConfigMap", Some("t"), "b"),
            node("", "ConfigMap", Some("t"), "a"),
        ];
        let merged = merge_duplicates(&inputs);
        assert_eq!(merged.len(), 3);
        assert_eq!(merged[0].labels["tier"], "first");
        assert_eq!(merged[0].labels["extra"], "yes");
        let graph = build(&inputs, &BuildOptions::default());
        assert_eq!(graph.nodes.len(), 3, "{:?}", graph.nodes);
        let id = |name: &str| graph.find(&ObjectId::new("", "ConfigMap", Some("t"), name)).unwrap();
        let edges: Vec<(usize, usize)> = graph.edges.iter().map(|e| (e.from, e.to)).collect();
        assert_eq!(edges, vec![(id("app"), id("a")), (id("app"), id("b"))]);
        let plan = crate::graph::plan::plan_deletion(&graph, &(0..graph.nodes.len()).collect()).unwrap();
        assert_eq!(plan.waves, vec![vec![id("app")], vec![id("a"), id("b")]]);
    }
}
