use super::*;
use crate::graph::{build, BuildOptions, NodeInput};
use crate::model::trackers::{FLUX_KS_NAME, FLUX_KS_NAMESPACE};
use kube::core::ObjectMeta;
use std::sync::Arc;

const KS_GROUP: &str = "kustomize.toolkit.fluxcd.io";

use crate::cluster::fixtures::kind;

fn catalog() -> Catalog {
    Catalog::new(
        vec![
            kind("", "ConfigMap", true),
            kind("", "Namespace", false),
            kind(KS_GROUP, "Kustomization", true),
        ],
        vec![],
        crate::cluster::discovery::DiscoverySource::PerGroup,
    )
}

/// A small cluster: objects with labels and annotations, listed.
struct World {
    objects: HashMap<ObjectId, Listed>,
    inputs: Vec<NodeInput>,
}

impl World {
    fn new() -> Self {
        Self {
            objects: HashMap::new(),
            inputs: Vec::new(),
        }
    }

    fn add(
        &mut self,
        group: &str,
        kind_name: &str,
        ns: Option<&str>,
        name: &str,
        labels: &[(&str, &str)],
    ) -> &mut NodeInput {
        self.add_with(group, kind_name, ns, name, labels, &[])
    }

    fn add_with(
        &mut self,
        group: &str,
        kind_name: &str,
        ns: Option<&str>,
        name: &str,
        labels: &[(&str, &str)],
        annotations: &[(&str, &str)],
    ) -> &mut NodeInput {
        let labels: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let annotations: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let meta = ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(str::to_string),
            uid: Some(format!("uid-{name}")),
            labels: Some(labels.clone()),
            annotations: Some(annotations.clone()),
            ..Default::default()
        };
        let listed = Listed::new(Arc::new(kind(group, kind_name, ns.is_some())), meta);
        let id = listed.id();
        self.objects.insert(id.clone(), listed);
        self.inputs.push(NodeInput {
            id,
            uid: Some(format!("uid-{name}")),
            labels: labels.into(),
            annotations: annotations.into(),
            ..Default::default()
        });
        self.inputs.last_mut().unwrap()
    }

    fn ks(&mut self, name: &str, depends_on: &[&str]) -> &mut NodeInput {
        let input = self.add(KS_GROUP, "Kustomization", Some("flux-system"), name, &[]);
        input.depends_on = depends_on
            .iter()
            .map(|d| ObjectId::new(KS_GROUP, "Kustomization", Some("flux-system"), d))
            .collect();
        input
    }

    fn member(&mut self, name: &str, stack: &str) -> &mut NodeInput {
        self.add(
            "",
            "ConfigMap",
            Some("shop"),
            name,
            &[(FLUX_KS_NAME, stack), (FLUX_KS_NAMESPACE, "flux-system")],
        )
    }

    /// Gives Kustomization `stack` the body kustomize-controller leaves once it applied what
    /// now carries its labels: `spec`, and a `status.inventory` of those objects
    /// (`<namespace>_<name>_<group>_<Kind>`). Without one it deletes nothing.
    fn reconciled(&mut self, stack: &str, spec: serde_json::Value) {
        let entries: Vec<serde_json::Value> = self
            .inputs
            .iter()
            .filter(|i| i.labels.get(FLUX_KS_NAME).map(String::as_str) == Some(stack))
            .map(|i| {
                let ns = i.id.namespace.as_deref().unwrap_or_default();
                let id = format!("{ns}_{}_{}_{}", i.id.name, i.id.group, i.id.kind);
                serde_json::json!({"id": id, "v": "v1"})
            })
            .collect();
        let id = ObjectId::new(KS_GROUP, "Kustomization", Some("flux-system"), stack);
        let input = self.inputs.iter_mut().find(|i| i.id == id).expect("the Kustomization");
        input.body = Some(serde_json::json!({"spec": spec, "status": {"inventory": {"entries": entries}}}));
    }

    fn teardown(&self, named: &[&str]) -> PrunePlan {
        let ids: Vec<ObjectId> = named
            .iter()
            .map(|n| ObjectId::new(KS_GROUP, "Kustomization", Some("flux-system"), n))
            .collect();
        self.teardown_ids(&ids)
    }

    fn teardown_ids(&self, named: &[ObjectId]) -> PrunePlan {
        let graph = build(
            &self.inputs,
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        let tracked: Vec<ObjectId> = self.objects.keys().cloned().collect();
        let snapshot = Snapshot {
            graph: &graph,
            objects: &self.objects,
            tracked: &tracked,
        };
        let named: Vec<usize> = named.iter().map(|id| graph.find(id).unwrap()).collect();
        let chosen = teardown_closure(&graph, &named);
        plan(&snapshot, &catalog(), chosen, Vec::new(), Mode::Teardown(Vec::new())).unwrap()
    }
}

fn names(plan: &PrunePlan) -> Vec<Vec<String>> {
    plan.waves
        .iter()
        .map(|w| w.iter().map(|t| t.id.name.clone()).collect())
        .collect()
}

fn kept(plan: &PrunePlan) -> Vec<String> {
    plan.kept.iter().map(|k| k.id.name.clone()).collect()
}

#[test]
fn naming_the_operator_pulls_in_its_dependent_stack_first() {
    let mut world = World::new();
    world.ks("usage", &["operator"]);
    world.ks("operator", &[]);
    world.member("cr", "usage");
    world.member("controller", "operator");
    let plan = world.teardown(&["operator"]);
    assert_eq!(
        names(&plan),
        vec![vec!["cr"], vec!["usage"], vec!["controller"], vec!["operator"]]
    );
    assert!(
        plan.waves[1][0].why.contains("depends on"),
        "{:?}",
        plan.waves[1][0].why
    );
    assert!(plan.kept.is_empty());
}

#[test]
fn members_flux_would_orphan_are_kept_and_their_kustomization_goes() {
    for (spec, why) in [
        (serde_json::json!({"prune": false}), "spec.prune=false"),
        (
            serde_json::json!({"prune": true, "deletionPolicy": "Orphan"}),
            "spec.deletionPolicy=Orphan",
        ),
    ] {
        let mut world = World::new();
        world.ks("keeper", &[]);
        world.member("left", "keeper");
        world.reconciled("keeper", spec);
        let plan = world.teardown(&["keeper"]);
        assert_eq!(names(&plan), vec![vec!["keeper"]]);
        assert_eq!(kept(&plan), vec!["left"]);
        assert!(
            plan.kept[0].reason.to_string().contains("Flux would orphan it"),
            "{:?}",
            plan.kept
        );
        assert!(plan.kept[0].reason.to_string().contains(why), "{:?}", plan.kept);
    }
    for spec in [
        serde_json::json!({"prune": true}),
        serde_json::json!({"prune": false, "deletionPolicy": "Delete"}),
        serde_json::json!({"prune": false, "deletionPolicy": "WaitForTermination"}),
        serde_json::json!({}),
    ] {
        let mut world = World::new();
        world.ks("pruner", &[]);
        world.member("gone", "pruner");
        world.reconciled("pruner", spec.clone());
        let plan = world.teardown(&["pruner"]);
        assert_eq!(names(&plan), vec![vec!["gone"], vec!["pruner"]], "{spec}");
    }
}

/// kustomize-controller's `finalizerShouldDeleteResources`: "A suspended Kustomization or one
/// without an inventory will not delete resources". Its members stay, with the reason.
#[test]
fn a_kustomization_without_an_inventory_deletes_only_itself() {
    let mut world = World::new();
    world.ks("bare", &[]).body = Some(serde_json::json!({"spec": {"prune": true}}));
    world.member("labelled", "bare");
    let plan = world.teardown(&["bare"]);
    assert_eq!(names(&plan), vec![vec!["bare"]]);
    assert_eq!(kept(&plan), vec!["labelled"]);
    assert_eq!(plan.kept[0].reason.rule(), "noInventory", "{:?}", plan.kept);
    // The same stack once reconciled deletes its member.
    world.reconciled("bare", serde_json::json!({"prune": true}));
    let plan = world.teardown(&["bare"]);
    assert_eq!(names(&plan), vec![vec!["labelled"], vec!["bare"]]);
}

#[test]
fn a_member_outside_the_kustomizations_inventory_is_kept() {
    let mut world = World::new();
    let inventory =
        serde_json::json!({"status": {"inventory": {"entries": [{"id": "shop_applied__ConfigMap", "v": "v1"}]}}});
    world.ks("apps", &[]).body = Some(inventory);
    world.member("applied", "apps");
    world.member("copied", "apps");
    let plan = world.teardown(&["apps"]);
    assert_eq!(names(&plan), vec![vec!["applied"], vec!["apps"]]);
    assert_eq!(kept(&plan), vec!["copied"]);
    assert!(
        plan.kept[0].reason.to_string().contains("not in the status.inventory"),
        "{:?}",
        plan.kept
    );
    // No inventory recorded: the labels decide, as before.
    let mut world = World::new();
    world.ks("apps", &[]);
    world.member("copied", "apps");
    assert_eq!(names(&world.teardown(&["apps"])), vec![vec!["copied"], vec!["apps"]]);
}

/// Issue 24 (adversarial review, 3): every member of a torn-down stack's record that the plan
/// does not delete is told under Kept with why, also one that no longer carries the stack's marks;
/// a recorded member this run did not list (gone, or outside its namespaces) is not.
#[test]
fn a_recorded_member_the_teardown_leaves_is_told() {
    let mut world = World::new();
    let inventory = serde_json::json!({"status": {"inventory": {"entries": [
        {"id": "shop_applied__ConfigMap", "v": "v1"},
        {"id": "shop_unlabelled__ConfigMap", "v": "v1"},
        {"id": "shop_gone__ConfigMap", "v": "v1"},
    ]}}});
    world.ks("apps", &[]).body = Some(inventory);
    world.member("applied", "apps");
    world.add("", "ConfigMap", Some("shop"), "unlabelled", &[]);
    let plan = world.teardown(&["apps"]);
    assert_eq!(names(&plan), vec![vec!["applied"], vec!["apps"]]);
    assert_eq!(kept(&plan), vec!["unlabelled"], "{:?}", plan.kept);
    assert_eq!(plan.kept[0].reason.rule(), "recordedUnmarked");
    assert!(
        plan.kept[0]
            .reason
            .to_string()
            .contains("carries none of its stack's marks"),
        "{}",
        plan.kept[0].reason
    );
}

#[test]
fn an_object_another_stack_also_tracks_is_kept() {
    let mut world = World::new();
    world.ks("a", &[]);
    world.ks("h", &[]);
    world.member("only-a", "a");
    world.add(
        "",
        "ConfigMap",
        Some("shop"),
        "shared",
        &[(FLUX_KS_NAME, "a"), (FLUX_KS_NAMESPACE, "flux-system")],
    );
    world
        .inputs
        .last_mut()
        .unwrap()
        .annotations_mut()
        .insert("config.k8s.io/owning-inventory".into(), "inv-1".into());
    if let Some(o) = world
        .objects
        .get_mut(&ObjectId::new("", "ConfigMap", Some("shop"), "shared"))
    {
        o.meta
            .annotations
            .get_or_insert_with(Default::default)
            .insert("config.k8s.io/owning-inventory".into(), "inv-1".into());
    }
    let plan = world.teardown(&["a"]);
    assert_eq!(names(&plan), vec![vec!["only-a"], vec!["a"]]);
    assert_eq!(kept(&plan), vec!["shared"]);
    assert!(plan.kept[0].reason.to_string().contains("kpt:inv-1"), "{:?}", plan.kept);
}

#[test]
fn a_kept_dependent_keeps_what_it_depends_on_and_its_members() {
    let mut world = World::new();
    world.add(
        KS_GROUP,
        "Kustomization",
        Some("flux-system"),
        "app",
        &[("kustomize.toolkit.fluxcd.io/prune", "disabled")],
    );
    world.inputs.last_mut().unwrap().depends_on =
        vec![ObjectId::new(KS_GROUP, "Kustomization", Some("flux-system"), "base")];
    world.ks("base", &[]);
    world.member("app-member", "app");
    world.member("base-member", "base");
    let plan = world.teardown(&["base"]);
    assert!(plan.waves.is_empty(), "{:?}", names(&plan));
    let mut kept = kept(&plan);
    kept.sort();
    assert_eq!(kept, vec!["app", "app-member", "base", "base-member"]);
    let base = plan.kept.iter().find(|k| k.id.name == "base").unwrap();
    assert!(base.reason.to_string().contains("needed by"), "{}", base.reason);
}

#[test]
fn a_namespace_holding_another_stacks_object_is_kept_but_a_dying_child_does_not_hold_it() {
    let mut world = World::new();
    world.ks("a", &[]);
    world.ks("b", &[]);
    world.add(
        "",
        "Namespace",
        None,
        "shop",
        &[(FLUX_KS_NAME, "a"), (FLUX_KS_NAMESPACE, "flux-system")],
    );
    world.member("mine", "a");
    let plan = world.teardown(&["a"]);
    assert_eq!(names(&plan), vec![vec!["mine"], vec!["shop"], vec!["a"]]);

    world.member("theirs", "b");
    let plan = world.teardown(&["a"]);
    assert_eq!(kept(&plan), vec!["shop"]);
    assert!(plan.kept[0].reason.to_string().contains("theirs"));
}

#[test]
fn ambiguous_name_only_marks_are_never_acted_on() {
    let mut world = World::new();
    world.ks("dup", &[]);
    world.add(KS_GROUP, "Kustomization", Some("team-b"), "dup", &[]);
    world.add("", "ConfigMap", Some("shop"), "which", &[(FLUX_KS_NAME, "dup")]);
    let plan = world.teardown(&["dup"]);
    assert!(plan.waves.iter().flatten().all(|t| t.id.name != "which"));
    assert!(kept(&plan).contains(&"which".to_string()), "{:?}", plan.kept);
}

#[test]
fn a_stack_applied_by_a_parent_names_the_parent() {
    let mut world = World::new();
    world.add(
        KS_GROUP,
        "Kustomization",
        Some("flux-system"),
        "child",
        &[(FLUX_KS_NAME, "flux-system"), (FLUX_KS_NAMESPACE, "flux-system")],
    );
    world.ks("flux-system", &[]);
    let plan = world.teardown(&["child"]);
    assert_eq!(names(&plan), vec![vec!["child"]]);
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    assert_eq!(plan.parents.len(), 1);
    assert_eq!(plan.parents[0].id.name, "flux-system");
    assert!(plan.parents[0].applies_planned);
}

#[test]
fn an_argo_cd_parent_that_was_not_listed_is_warned_about() {
    let mut world = World::new();
    world.add_with(
        KS_GROUP,
        "Kustomization",
        Some("flux-system"),
        "child",
        &[],
        &[(
            "argocd.argoproj.io/tracking-id",
            "root-app:kustomize.toolkit.fluxcd.io/Kustomization:flux-system/child",
        )],
    );
    let plan = world.teardown(&["child"]);
    assert_eq!(names(&plan), vec![vec!["child"]]);
    assert!(plan.parents.is_empty());
    assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
    assert!(plan.warnings[0].contains("argocd:root-app"), "{:?}", plan.warnings);
}

#[test]
fn members_of_a_gone_stack_are_found_by_their_mark() {
    let mut world = World::new();
    world.member("left", "gone");
    world.member("other", "stays");
    let graph = build(
        &world.inputs,
        &BuildOptions {
            members: true,
            ..Default::default()
        },
    );
    let tracked: Vec<ObjectId> = world.objects.keys().cloned().collect();
    let snapshot = Snapshot {
        graph: &graph,
        objects: &world.objects,
        tracked: &tracked,
    };
    let key = (
        Preset::Flux,
        MarkValue {
            name: "gone".into(),
            namespace: Some("flux-system".into()),
        },
    );
    let found = members_of_gone(&snapshot, &key);
    assert_eq!(found.len(), 1);
    assert_eq!(graph.nodes[found[0]].id.name, "left");
}

#[test]
fn planned_dependencies_are_every_need_inferred_ones_too() {
    // What the re-check withholds when it drops an object: what that object needs, through the
    // edges the keep rules read (a custom resource keeps its operator), not a webhook rule's.
    let cm = |name: &str| NodeInput {
        id: ObjectId::new("", "ConfigMap", Some("t"), name),
        ..Default::default()
    };
    let mut graph = build(
        &[cm("cr"), cm("operator"), cm("webhook"), cm("elsewhere")],
        &BuildOptions::default(),
    );
    graph.inferred = vec![
        crate::graph::Edge {
            from: 0,
            to: 1,
            kind: crate::graph::EdgeKind::InferredFinalizer,
        },
        crate::graph::Edge {
            from: 0,
            to: 2,
            kind: crate::graph::EdgeKind::InferredWebhookRule,
        },
        crate::graph::Edge {
            from: 0,
            to: 3,
            kind: crate::graph::EdgeKind::InferredFinalizer,
        },
    ];
    let planned: HashSet<usize> = [0, 1, 2].into();
    let depends = planned_dependencies(&graph, &planned);
    let of_cr: Vec<&str> = depends[&graph.nodes[0].id].iter().map(|id| id.name.as_str()).collect();
    assert_eq!(of_cr, ["operator"]);
    assert_eq!(depends.len(), 1);
}

/// Argo CD writes `<namespace>_<name>` tracking ids for an Application outside its control-plane
/// namespace and the name alone for one inside (argo-cd `util/argo/argo.go` `AppInstanceName`;
/// the id format of `util/argo/resource_tracking.go`: `<app>:<group>/<Kind>:<namespace>/<name>`).
/// A teardown of `team/web` takes what `team_web` tracks, never what a name-only `web` id tracks,
/// even when the control-plane Application `web` is not listed.
#[test]
fn an_application_outside_the_control_plane_never_takes_a_name_only_id() {
    let mut world = World::new();
    let app = ObjectId::new("argoproj.io", "Application", Some("team"), "web");
    world.add("argoproj.io", "Application", Some("team"), "web", &[]);
    for (name, instance) in [("mine", "team_web"), ("control-planes", "web")] {
        let id = format!("{instance}:/ConfigMap:shop/{name}");
        world.add_with(
            "",
            "ConfigMap",
            Some("shop"),
            name,
            &[],
            &[(crate::model::trackers::ARGOCD_TRACKING_ID, id.as_str())],
        );
    }
    let plan = world.teardown_ids(std::slice::from_ref(&app));
    assert_eq!(names(&plan), vec![vec!["mine"], vec!["web"]]);
    // Without a `<namespace>_<name>` id in the cluster nothing proves `team` is outside the
    // control plane: the one Application of that name keeps the name-only id (Known gaps).
    let mut alone = World::new();
    alone.add("argoproj.io", "Application", Some("team"), "web", &[]);
    alone.add_with(
        "",
        "ConfigMap",
        Some("shop"),
        "control-planes",
        &[],
        &[(
            crate::model::trackers::ARGOCD_TRACKING_ID,
            "web:/ConfigMap:shop/control-planes",
        )],
    );
    assert_eq!(
        names(&alone.teardown_ids(&[app])),
        vec![vec!["control-planes"], vec!["web"]]
    );
}
