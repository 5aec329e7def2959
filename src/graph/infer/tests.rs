//! Unit tests of inference.

use serde_json::json;

use super::*;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const CRD_GROUP: &str = "apiextensions.k8s.io";
use crate::graph::{build, BuildOptions, NodeInput};

fn object(group: &str, kind: &str, ns: Option<&str>, name: &str, stack: Option<&str>) -> NodeInput {
    let mut input = NodeInput {
        id: ObjectId::new(group, kind, ns, name),
        ..Default::default()
    };
    if let Some(stack) = stack {
        input
            .labels_mut()
            .insert("kustomize.toolkit.fluxcd.io/name".into(), stack.into());
        input
            .labels_mut()
            .insert("kustomize.toolkit.fluxcd.io/namespace".into(), "flux-system".into());
    }
    input
}

fn with_body(mut input: NodeInput, body: Value) -> NodeInput {
    input.body = Some(body);
    input
}

fn options() -> BuildOptions {
    let mut options = BuildOptions {
        infer: true,
        ..Default::default()
    };
    options.crd_names.insert(
        ("ops.example.com".into(), "Gizmo".into()),
        "gizmos.ops.example.com".into(),
    );
    options
}

/// The inferred edges as (from name, to name, kind).
fn inferred(inputs: &[NodeInput], options: &BuildOptions) -> Vec<(String, String, EdgeKind)> {
    let graph = build(inputs, options);
    graph
        .inferred
        .iter()
        .map(|e| {
            (
                graph.nodes[e.from].id.name.clone(),
                graph.nodes[e.to].id.name.clone(),
                e.kind,
            )
        })
        .collect()
}

fn edge(from: &str, to: &str, kind: EdgeKind) -> (String, String, EdgeKind) {
    (from.to_string(), to.to_string(), kind)
}

fn deployment(ns: &str, name: &str, labels: Value, stack: Option<&str>) -> NodeInput {
    with_body(
        object("apps", "Deployment", Some(ns), name, stack),
        json!({"spec": {"template": {"metadata": {"labels": labels}}}}),
    )
}

fn service(ns: &str, name: &str, selector: Value, stack: Option<&str>) -> NodeInput {
    with_body(
        object("", "Service", Some(ns), name, stack),
        json!({"spec": {"selector": selector}}),
    )
}

#[test]
fn finalizer_domains_name_a_crds_group_a_parent_or_the_crd() {
    let crd = "gizmos.ops.example.com";
    assert!(finalizer_matches_crd("ops.example.com/cleanup", crd));
    assert!(finalizer_matches_crd("example.com/cleanup", crd));
    assert!(finalizer_matches_crd("gizmos.ops.example.com/x", crd));
    assert!(!finalizer_matches_crd("ample.com/cleanup", crd));
    assert!(!finalizer_matches_crd("other.io/cleanup", crd));
    assert_eq!(finalizer_domain("ops.example.com/cleanup"), Some("ops.example.com"));
    assert_eq!(finalizer_domain("kubernetes"), None);
    assert_eq!(finalizer_domain("foregroundDeletion"), None);
    assert_eq!(finalizer_domain("orphan"), None);
}

#[test]
fn a_finalizer_without_a_path_names_its_group_by_its_domain() {
    // Rook's real finalizer on a CephCluster (rook `pkg/apis/ceph.rook.io/v1`): no slash.
    assert_eq!(
        finalizer_domain("cephcluster.ceph.rook.io"),
        Some("cephcluster.ceph.rook.io")
    );
    assert!(finalizer_matches_crd(
        "cephcluster.ceph.rook.io",
        "cephclusters.ceph.rook.io"
    ));
    assert!(finalizer_names_group("cephcluster.ceph.rook.io", "ceph.rook.io"));
    assert!(!finalizer_names_group("cephcluster.ceph.rook.io", "rook.io.example"));
    assert!(!finalizer_names_group("kubernetes", ""));
}

#[test]
fn flux_v1_gc_marked_objects_of_a_sync_set_are_one_stack() {
    // Issue 29's generated worlds: `--tracker flux-v1=SET` deleted an operator whose custom
    // resource stays, as each gc mark (a hash of the sync set and the object) seemed a stack.
    let gc_marked = |mut input: NodeInput| {
        let (namespace, kind, name) = (input.id.namespace.clone(), input.id.kind.clone(), input.id.name.clone());
        let id = crate::model::trackers::flux_v1_resource_id(namespace.as_deref(), &kind, &name);
        let mark = crate::model::trackers::flux_v1_gc_mark("apps", &id);
        input.labels_mut().insert("fluxcd.io/sync-gc-mark".into(), mark);
        input
    };
    let mut cr = object("ops.example.com", "Gizmo", Some("app"), "g1", None);
    cr.finalizers = vec!["ops.example.com/cleanup".into()];
    let inputs = vec![
        cr,
        gc_marked(object(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "gizmos.ops.example.com",
            None,
        )),
        gc_marked(deployment("op", "controller", json!({"app": "op"}), None)),
    ];
    assert_eq!(
        inferred(&inputs, &options()),
        vec![edge("g1", "controller", EdgeKind::InferredFinalizer)]
    );
    // The same with the operator's Flux v1 mark taken from its legacy `flux.weave.works/stack`
    // label (a generated world: the operator was deleted while its custom resource stayed).
    let mut legacy = inputs.clone();
    legacy[2]
        .labels_mut()
        .insert("flux.weave.works/stack".into(), "other".into());
    assert_eq!(
        inferred(&legacy, &options()),
        vec![edge("g1", "controller", EdgeKind::InferredFinalizer)]
    );
}

#[test]
fn a_custom_resource_depends_on_the_controller_of_its_finalizers_stack() {
    let mut cr = object("ops.example.com", "Gizmo", Some("app"), "g1", Some("usage"));
    cr.finalizers = vec!["ops.example.com/cleanup".into()];
    let mut plain = object("ops.example.com", "Gizmo", Some("app"), "g2", Some("usage"));
    plain.finalizers = vec!["other.io/cleanup".into()];
    let inputs = vec![
        cr,
        plain,
        object(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "gizmos.ops.example.com",
            Some("operator"),
        ),
        deployment("op", "controller", json!({"app": "op"}), Some("operator")),
        object("", "ServiceAccount", Some("op"), "controller-sa", Some("operator")),
        object(
            "rbac.authorization.k8s.io",
            "ClusterRole",
            None,
            "controller-role",
            Some("operator"),
        ),
        object("", "ConfigMap", Some("op"), "settings", Some("operator")),
        deployment("else", "unrelated", json!({"app": "x"}), Some("other")),
    ];
    let mut found = inferred(&inputs, &options());
    found.sort();
    assert_eq!(
        found,
        vec![
            edge("g1", "controller", EdgeKind::InferredFinalizer),
            edge("g1", "controller-role", EdgeKind::InferredFinalizer),
            edge("g1", "controller-sa", EdgeKind::InferredFinalizer),
        ]
    );
    assert!(inferred(
        &inputs,
        &BuildOptions {
            infer: false,
            ..options()
        }
    )
    .is_empty());
}

#[test]
fn a_webhook_goes_before_its_backend_and_after_what_it_intercepts() {
    let webhook = |policy: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "webhooks": [{
            "name": "check.ops.example.com",
            "clientConfig": {"service": {"namespace": "op", "name": "hook"}},
            "failurePolicy": policy,
            "rules": [
                {"apiGroups": ["ops.example.com"], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["gizmos"], "scope": "Namespaced"},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
            ]
        }]})
    };
    let inputs = |policy: &str| {
        vec![
            with_body(
                object(
                    "admissionregistration.k8s.io",
                    "ValidatingWebhookConfiguration",
                    None,
                    "check",
                    None,
                ),
                webhook(policy),
            ),
            service("op", "hook", json!({"app": "hook"}), None),
            deployment("op", "hook-server", json!({"app": "hook", "tier": "x"}), None),
            deployment("op", "other-server", json!({"app": "other"}), None),
            deployment("elsewhere", "same-labels", json!({"app": "hook"}), None),
            object("ops.example.com", "Gizmo", Some("app"), "g1", None),
            object("", "ConfigMap", Some("app"), "created-only", None),
        ]
    };
    let mut found = inferred(&inputs("Fail"), &options());
    found.sort();
    assert_eq!(
        found,
        vec![
            edge("check", "hook", EdgeKind::InferredWebhook),
            edge("check", "hook-server", EdgeKind::InferredWebhook),
            edge("g1", "check", EdgeKind::InferredWebhookRule),
        ]
    );
    let mut ignored = inferred(&inputs("Ignore"), &options());
    ignored.sort();
    assert_eq!(
        ignored,
        vec![
            edge("check", "hook", EdgeKind::InferredWebhook),
            edge("check", "hook-server", EdgeKind::InferredWebhook),
        ]
    );
}

#[test]
fn an_apiservice_goes_before_its_backend_and_after_its_apis_objects() {
    let inputs = vec![
        with_body(
            object(
                "apiregistration.k8s.io",
                "APIService",
                None,
                "v1beta1.metrics.example.com",
                None,
            ),
            json!({"spec": {"group": "metrics.example.com", "version": "v1beta1",
                                "service": {"namespace": "mon", "name": "api"}}}),
        ),
        with_body(
            object("apiregistration.k8s.io", "APIService", None, "v1.apps", None),
            json!({"spec": {"group": "apps", "version": "v1", "service": null}}),
        ),
        service("mon", "api", json!({"app": "api"}), None),
        deployment("mon", "api-server", json!({"app": "api"}), None),
        object("metrics.example.com", "Rollup", Some("mon"), "daily", None),
    ];
    let mut found = inferred(&inputs, &options());
    found.sort();
    assert_eq!(
        found,
        vec![
            edge("daily", "v1beta1.metrics.example.com", EdgeKind::InferredAggregatedApi),
            edge("v1beta1.metrics.example.com", "api", EdgeKind::InferredApiService),
            edge(
                "v1beta1.metrics.example.com",
                "api-server",
                EdgeKind::InferredApiService
            ),
        ]
    );
}

#[test]
fn volumes_go_before_their_csi_driver() {
    let driver = "csi.example.com";
    let mut claim = with_body(
        object("", "PersistentVolumeClaim", Some("app"), "data", Some("usage")),
        json!({"spec": {"storageClassName": "fast", "volumeName": "pv-data"}}),
    );
    claim.finalizers = vec!["kubernetes.io/pvc-protection".into()];
    let by_class = with_body(
        object("", "PersistentVolumeClaim", Some("app"), "by-class", Some("usage")),
        json!({"spec": {"storageClassName": "fast"}}),
    );
    let mut annotated = object("", "PersistentVolume", None, "pv-annotated", Some("usage"));
    annotated
        .annotations_mut()
        .insert("pv.kubernetes.io/provisioned-by".into(), "other.example.com".into());
    let inputs = vec![
        claim,
        by_class,
        with_body(
            object("", "PersistentVolume", None, "pv-data", Some("usage")),
            json!({"spec": {"csi": {"driver": driver, "volumeHandle": "h1"}}}),
        ),
        annotated,
        object("storage.k8s.io", "CSIDriver", None, driver, Some("storage")),
        with_body(
            object("storage.k8s.io", "StorageClass", None, "fast", Some("storage")),
            json!({"provisioner": driver}),
        ),
        deployment("kube-system", "csi-controller", json!({"app": "csi"}), Some("storage")),
    ];
    let found = inferred(&inputs, &options());
    let has = |from: &str, to: &str, kind| found.contains(&edge(from, to, kind));
    for volume in ["data", "by-class", "pv-data"] {
        for target in [driver, "csi-controller"] {
            assert!(
                has(volume, target, EdgeKind::InferredStorageDriver),
                "{volume} -> {target}: {found:?}"
            );
        }
    }
    // The class a volume names is its own edge; a volume that names none needs it as its driver's.
    for volume in ["data", "by-class"] {
        assert!(
            has(volume, "fast", EdgeKind::InferredStorageClass),
            "{volume}: {found:?}"
        );
    }
    assert!(has("pv-data", "fast", EdgeKind::InferredStorageDriver), "{found:?}");
    assert!(has("data", "pv-data", EdgeKind::InferredVolume), "{found:?}");
    assert!(
        !found.iter().any(|(from, _, _)| from == "pv-annotated"),
        "another driver: {found:?}"
    );
}

/// Review finding R7 (issue 25): a claim or volume that stays keeps the StorageClass it names,
/// whatever that class provisions with (a local class, a class not read whole), and says so.
#[test]
fn a_volume_that_stays_keeps_the_storage_class_it_names() {
    let claim = with_body(
        object("", "PersistentVolumeClaim", Some("app"), "untracked-claim", None),
        json!({"spec": {"storageClassName": "local"}}),
    );
    let volume = with_body(
        object("", "PersistentVolume", None, "untracked-volume", None),
        json!({"spec": {"storageClassName": "local", "local": {"path": "/d"}}}),
    );
    let mut legacy = object("", "PersistentVolumeClaim", Some("app"), "legacy-claim", None);
    legacy
        .annotations_mut()
        .insert("volume.beta.kubernetes.io/storage-class".into(), "local".into());
    let class = object("storage.k8s.io", "StorageClass", None, "local", Some("storage"));
    let inputs = vec![claim, volume, legacy, class];
    let found = inferred(&inputs, &options());
    for from in ["untracked-claim", "untracked-volume", "legacy-claim"] {
        assert!(
            found.contains(&edge(from, "local", EdgeKind::InferredStorageClass)),
            "{from}: {found:?}"
        );
    }
    let graph = build(&inputs, &options());
    let class = graph
        .find(&ObjectId::new("storage.k8s.io", "StorageClass", None, "local"))
        .expect("class");
    // The keep rule (`prune::safeguards::needed_by_staying`) reads the graph's needs: each
    // claim that stays needs the class, and says why by the edge's label.
    let needing: Vec<&Edge> = graph.needs().filter(|e| e.to == class).collect();
    assert_eq!(needing.len(), 3, "{needing:?}");
    assert!(needing.iter().all(|e| e.kind == EdgeKind::InferredStorageClass));
    assert_eq!(EdgeKind::InferredStorageClass.label(), "inferred: storage class");
}

#[test]
fn declared_edges_win_and_an_inferred_cycle_is_dropped() {
    let mut cr = object("ops.example.com", "Gizmo", Some("app"), "g1", Some("usage"));
    cr.finalizers = vec!["ops.example.com/cleanup".into()];
    let mut controller = deployment("op", "controller", json!({"app": "op"}), Some("operator"));
    // Declared, against the inference: the controller depends on the custom resource.
    controller.annotations_mut().insert(
        crate::graph::KPT_DEPENDS_ON.into(),
        "ops.example.com/namespaces/app/Gizmo/g1".into(),
    );
    let inputs = vec![
        cr,
        controller,
        object("", "ServiceAccount", Some("op"), "sa", Some("operator")),
        object(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "gizmos.ops.example.com",
            Some("operator"),
        ),
    ];
    let graph = build(&inputs, &options());
    let names: Vec<(String, String)> = graph
        .inferred
        .iter()
        .map(|e| (graph.nodes[e.from].id.name.clone(), graph.nodes[e.to].id.name.clone()))
        .collect();
    assert_eq!(names, vec![("g1".to_string(), "sa".to_string())]);
    let plan = crate::graph::plan::plan_deletion(&graph, &(0..graph.nodes.len()).collect()).unwrap();
    let wave_of = |name: &str| {
        plan.waves
            .iter()
            .position(|w| w.iter().any(|&i| graph.nodes[i].id.name == name))
    };
    assert!(
        wave_of("controller") < wave_of("g1"),
        "declared order kept: {:?}",
        plan.waves
    );
    assert!(wave_of("g1") < wave_of("sa"), "inferred order kept: {:?}", plan.waves);
}

#[test]
fn plurals_are_known_or_guessed_as_kubernetes_does() {
    let mut known = Known::default();
    known
        .plurals
        .insert(("".into(), "Endpoints".into()), "endpoints".into());
    assert_eq!(plural_of(&known, "", "Endpoints"), "endpoints");
    assert_eq!(plural_of(&known, "", "Service"), "services");
    assert_eq!(plural_of(&known, "x.io", "Policy"), "policies");
    assert_eq!(plural_of(&known, "x.io", "Ingress"), "ingresses");
}

/// Finding 7 of the adversarial review: CRDs in one stack, their operator in another (Flux's
/// usual `infra-crds` / `infra-controllers`): RBAC names the operator. Its ServiceAccount is
/// bound to a ClusterRole that may update the group's objects; a workload bound only to a role
/// granting every group (`*`, as cluster-admin) is no controller in particular.
#[test]
fn a_custom_resource_depends_on_the_operator_rbac_names_when_its_crd_is_in_another_stack() {
    let mut cr = object("ops.example.com", "Gizmo", Some("app"), "g1", Some("usage"));
    cr.finalizers = vec!["ops.example.com/cleanup".into()];
    let workload = |name: &str, account: &str, stack: &str| {
        with_body(
            object("apps", "Deployment", Some("op"), name, Some(stack)),
            json!({"spec": {"template": {"spec": {"serviceAccountName": account}}}}),
        )
    };
    let role = |name: &str, groups: Value| {
        with_body(
            object(RBAC_GROUP, "ClusterRole", None, name, Some("operator")),
            json!({"rules": [{"apiGroups": groups, "resources": ["*"], "verbs": ["get", "update"]}]}),
        )
    };
    let binding = |name: &str, role: &str, account: &str| {
        with_body(
            object(RBAC_GROUP, "ClusterRoleBinding", None, name, Some("operator")),
            json!({"roleRef": {"kind": "ClusterRole", "name": role},
                   "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "op"}]}),
        )
    };
    let inputs = vec![
        cr,
        object(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "gizmos.ops.example.com",
            Some("crds"),
        ),
        workload("controller", "controller-sa", "operator"),
        role("gizmo-manager", json!(["ops.example.com"])),
        binding("gizmo-manager", "gizmo-manager", "controller-sa"),
        workload("admin-tool", "admin-sa", "tools"),
        role("everything", json!(["*"])),
        binding("everything", "everything", "admin-sa"),
    ];
    let mut found: Vec<(String, String)> = inferred(&inputs, &options())
        .into_iter()
        .filter(|(from, _, kind)| from == "g1" && *kind == EdgeKind::InferredFinalizer)
        .map(|(from, to, _)| (from, to))
        .collect();
    found.sort();
    found.dedup();
    let to: Vec<&str> = found.iter().map(|(_, to)| to.as_str()).collect();
    assert!(to.contains(&"controller"), "{found:?}");
    assert!(!to.contains(&"admin-tool"), "{found:?}");
    assert!(
        !to.contains(&"gizmo-manager") || to.contains(&"controller"),
        "{found:?}"
    );
}

/// Review finding F2 (issue 25): an operator that finalizes a built-in object (a ConfigMap)
/// goes after it; a parent-domain finalizer (`kubernetes.io/...`) names no operator of a
/// `*.kubernetes.io` group on a built-in object.
#[test]
fn a_built_in_object_with_an_operators_finalizer_goes_before_the_operator() {
    let mut config_map = object("", "ConfigMap", Some("app"), "cm-fin", Some("operator"));
    config_map.finalizers = vec!["ops.example.com/cleanup".into()];
    let mut protected = object("", "ConfigMap", Some("app"), "protected", Some("operator"));
    protected.finalizers = vec!["example.com/protection".into()];
    let inputs = vec![
        config_map,
        protected,
        object(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "gizmos.ops.example.com",
            Some("operator"),
        ),
        deployment("op", "controller", json!({"app": "op"}), Some("operator")),
    ];
    let found = inferred(&inputs, &options());
    assert!(
        found.contains(&edge("cm-fin", "controller", EdgeKind::InferredFinalizer)),
        "{found:?}"
    );
    assert!(!found.iter().any(|(from, _, _)| from == "protected"), "{found:?}");
}

/// Review finding F10 (issue 25): a webhook's backend runs with its ServiceAccount, that
/// account's bindings and their roles, and the TLS Secret it mounts: a webhook that stays keeps
/// them with the backend, and a teardown deletes the backend before them.
#[test]
fn a_webhook_backend_needs_what_it_runs_with() {
    let webhook = json!({"apiVersion": "admissionregistration.k8s.io/v1", "webhooks": [{
        "name": "check.ops.example.com",
        "clientConfig": {"service": {"namespace": "op", "name": "hook"}},
        "failurePolicy": "Ignore"
    }]});
    let server = with_body(
        object("apps", "Deployment", Some("op"), "hook-server", None),
        json!({"spec": {"template": {"metadata": {"labels": {"app": "hook"}}, "spec": {
            "serviceAccountName": "hook-sa",
            "volumes": [
                {"name": "tls", "secret": {"secretName": "hook-tls"}},
                {"name": "cfg", "projected": {"sources": [{"configMap": {"name": "hook-config"}}]}}
            ]
        }}}}),
    );
    let binding = |kind: &str, ns: Option<&str>, name: &str, role_kind: &str, account: &str| {
        with_body(
            object("rbac.authorization.k8s.io", kind, ns, name, None),
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": "hook-role"},
                   "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "op"}]}),
        )
    };
    let inputs = vec![
        with_body(
            object(
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                None,
                "check",
                None,
            ),
            webhook,
        ),
        service("op", "hook", json!({"app": "hook"}), None),
        server,
        object("", "ServiceAccount", Some("op"), "hook-sa", None),
        object("", "Secret", Some("op"), "hook-tls", None),
        object("", "ConfigMap", Some("op"), "hook-config", None),
        binding("ClusterRoleBinding", None, "hook-binding", "ClusterRole", "hook-sa"),
        object("rbac.authorization.k8s.io", "ClusterRole", None, "hook-role", None),
        binding("RoleBinding", Some("op"), "other-binding", "Role", "someone-else"),
        object("", "Secret", Some("op"), "unrelated", None),
    ];
    let mut found: Vec<_> = inferred(&inputs, &options())
        .into_iter()
        .filter(|e| e.2 == EdgeKind::InferredRunsWith)
        .collect();
    found.sort();
    assert_eq!(
        found,
        vec![
            edge("hook-binding", "hook-role", EdgeKind::InferredRunsWith),
            edge("hook-server", "hook-binding", EdgeKind::InferredRunsWith),
            edge("hook-server", "hook-config", EdgeKind::InferredRunsWith),
            edge("hook-server", "hook-sa", EdgeKind::InferredRunsWith),
            edge("hook-server", "hook-tls", EdgeKind::InferredRunsWith),
        ]
    );
}

/// Review finding R2 (issue 25): a failing webhook that intercepts the DELETE of Namespaces,
/// its own backend's included, closes a cycle of inferred edges (webhook before its backend,
/// backend before its Namespace, Namespace before the webhook). The rule edge yields: the webhook
/// goes first, then its backend, then the Namespace.
#[test]
fn a_webhook_that_intercepts_its_backends_namespace_still_goes_before_its_backend() {
    let webhook = json!({"apiVersion": "admissionregistration.k8s.io/v1", "webhooks": [{
        "name": "protect.ops.example.com",
        "clientConfig": {"service": {"namespace": "hookns", "name": "hook"}},
        "failurePolicy": "Fail",
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["namespaces"]}]
    }]});
    // The Namespace first: its rule edge is then a candidate before the webhook's backend edges.
    let inputs = vec![
        object("", "Namespace", None, "hookns", Some("s")),
        service("hookns", "hook", json!({"app": "hook"}), Some("s")),
        deployment("hookns", "hookd", json!({"app": "hook"}), Some("s")),
        with_body(
            object(
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                None,
                "protect",
                Some("s"),
            ),
            webhook,
        ),
    ];
    let graph = build(&inputs, &options());
    let plan = crate::graph::plan::plan_deletion(&graph, &(0..graph.nodes.len()).collect()).unwrap();
    let wave_of = |name: &str| {
        plan.waves
            .iter()
            .position(|w| w.iter().any(|&i| graph.nodes[i].id.name == name))
            .unwrap()
    };
    assert!(wave_of("protect") < wave_of("hook"), "{:?}", plan.waves);
    assert!(wave_of("hookd") < wave_of("hookns"), "{:?}", plan.waves);
}

/// Review finding F3 (issue 25): a backend's pods read ConfigMaps and Secrets through more than
/// volumes: `envFrom`, `env[].valueFrom` and `imagePullSecrets`, in containers and init
/// containers alike, whatever runs them (a bare Pod, a Job's or a ReplicaSet's template).
#[test]
fn pods_read_what_their_env_and_pull_secrets_name() {
    let spec = json!({
        "imagePullSecrets": [{"name": "registry"}],
        "initContainers": [{"name": "init",
            "envFrom": [{"configMapRef": {"name": "init-env"}}],
            "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "init-token", "key": "t"}}}]}],
        "containers": [{"name": "main",
            "envFrom": [{"secretRef": {"name": "main-env"}}, {"prefix": "X_"}],
            "env": [{"name": "A", "value": "plain"},
                    {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "main-key", "key": "b"}}},
                    {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
        "volumes": [{"name": "tls", "secret": {"secretName": "tls"}}]
    });
    let read = rbac::read_by_pods(&spec);
    let expected: Vec<(&str, String)> = vec![
        ("ConfigMap", "init-env".into()),
        ("ConfigMap", "main-key".into()),
        ("Secret", "init-token".into()),
        ("Secret", "main-env".into()),
        ("Secret", "registry".into()),
        ("Secret", "tls".into()),
    ];
    assert_eq!(read, expected);
}

/// Review findings F3 and F4 (issue 25): a webhook's Service selects a bare Pod and a
/// ReplicaSet's pods as well as a Deployment's; each is its backend and runs with what its pods
/// read (a Job's template reads the same way).
#[test]
fn a_webhook_backend_may_be_a_bare_pod_or_a_replica_set_and_keeps_what_its_pods_read() {
    let webhook = json!({"apiVersion": "admissionregistration.k8s.io/v1", "webhooks": [{
        "name": "check.ops.example.com",
        "clientConfig": {"service": {"namespace": "op", "name": "hook"}},
        "failurePolicy": "Ignore"
    }]});
    let mut pod = with_body(
        object("", "Pod", Some("op"), "hook-pod", None),
        json!({"spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "pod-env"}}]}]}}),
    );
    pod.labels_mut().insert("app".into(), "hook".into());
    let mut other_pod = object("", "Pod", Some("op"), "other-pod", None);
    other_pod.labels_mut().insert("app".into(), "other".into());
    let replica_set = with_body(
        object("apps", "ReplicaSet", Some("op"), "hook-rs", None),
        json!({"spec": {"template": {"metadata": {"labels": {"app": "hook", "tier": "x"}}, "spec": {
            "imagePullSecrets": [{"name": "rs-pull"}],
            "containers": [{"name": "c", "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "rs-key", "key": "k"}}}]}]
        }}}}),
    );
    let job = with_body(
        object("batch", "Job", Some("op"), "hook-job", None),
        json!({"spec": {"template": {"metadata": {"labels": {"app": "hook"}}, "spec": {
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "job-env"}}]}]
        }}}}),
    );
    let inputs = vec![
        with_body(
            object(
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                None,
                "check",
                None,
            ),
            webhook,
        ),
        service("op", "hook", json!({"app": "hook"}), None),
        pod,
        other_pod,
        replica_set,
        job,
        object("", "ConfigMap", Some("op"), "pod-env", None),
        object("", "Secret", Some("op"), "rs-pull", None),
        object("", "Secret", Some("op"), "rs-key", None),
        object("", "Secret", Some("op"), "job-env", None),
    ];
    let mut found = inferred(&inputs, &options());
    found.sort();
    for expected in [
        edge("check", "hook-pod", EdgeKind::InferredWebhook),
        edge("check", "hook-rs", EdgeKind::InferredWebhook),
        edge("check", "hook-job", EdgeKind::InferredWebhook),
        edge("hook-pod", "pod-env", EdgeKind::InferredRunsWith),
        edge("hook-rs", "rs-pull", EdgeKind::InferredRunsWith),
        edge("hook-rs", "rs-key", EdgeKind::InferredRunsWith),
        edge("hook-job", "job-env", EdgeKind::InferredRunsWith),
    ] {
        assert!(found.contains(&expected), "{expected:?} missing from {found:?}");
    }
    assert!(!found.iter().any(|(_, to, _)| to == "other-pod"), "{found:?}");
}

/// Review finding F4 (issue 25): an APIService's Service without a selector is served by the
/// Endpoints and EndpointSlices written for it by hand: they are its backend.
#[test]
fn a_selectorless_service_is_served_by_its_endpoints_and_endpoint_slices() {
    let api_service = with_body(
        object(
            "apiregistration.k8s.io",
            "APIService",
            None,
            "v1.metrics.example.com",
            None,
        ),
        json!({"spec": {"group": "metrics.example.com", "service": {"namespace": "op", "name": "metrics"}}}),
    );
    let mut slice = object("discovery.k8s.io", "EndpointSlice", Some("op"), "metrics-abc", None);
    slice
        .labels_mut()
        .insert("kubernetes.io/service-name".into(), "metrics".into());
    let inputs = vec![
        api_service,
        with_body(object("", "Service", Some("op"), "metrics", None), json!({"spec": {}})),
        object("", "Endpoints", Some("op"), "metrics", None),
        slice,
        object("", "Endpoints", Some("op"), "unrelated", None),
        object("", "Endpoints", Some("elsewhere"), "metrics", None),
    ];
    let graph = build(&inputs, &options());
    let mut found: Vec<String> = graph
        .inferred
        .iter()
        .filter(|e| e.kind == EdgeKind::InferredApiService)
        .map(|e| graph.nodes[e.to].id.to_string())
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            "EndpointSlice.discovery.k8s.io/op/metrics-abc",
            "Endpoints/op/metrics",
            "Service/op/metrics"
        ]
    );
}

/// Review finding F2 (issue 25): a custom resource whose CRD is no node (Helm's `crds/`, an
/// operator's own, another stack's out of scope) still names its operator through RBAC: the
/// workload whose ServiceAccount may update its group, and that workload's stack.
#[test]
fn a_custom_resource_whose_crd_is_no_node_depends_on_the_operator_rbac_names() {
    let mut cr = object("g.example.com", "Db", Some("g-y"), "stays", Some("other"));
    cr.finalizers = vec!["g.example.com/cleanup".into()];
    let mut unrelated = object("g.example.com", "Db", Some("g-y"), "plain", Some("other"));
    unrelated.finalizers = vec!["elsewhere.example.org/cleanup".into()];
    let inputs: Vec<NodeInput> = vec![cr, unrelated]
        .into_iter()
        .chain(db_operator(
            json!({"kind": "ServiceAccount", "name": "op", "namespace": "g-op"}),
        ))
        .collect();
    let mut options = options();
    options
        .crd_names
        .insert(("g.example.com".into(), "Db".into()), "dbs.g.example.com".into());
    let found = inferred(&inputs, &options);
    assert!(
        found.contains(&edge("stays", "op", EdgeKind::InferredFinalizer)),
        "{found:?}"
    );
    assert!(
        found.contains(&edge("stays", "db-manager", EdgeKind::InferredFinalizer)),
        "{found:?}"
    );
    // A finalizer that names no group of its object falls back on who may update it (order
    // review 7): the only workload RBAC lets update Dbs.
    assert!(
        found.contains(&edge("plain", "op", EdgeKind::InferredFinalizer)),
        "{found:?}"
    );
}

/// Stack `op`: Deployment `g-op/op` running as ServiceAccount `op`, and ClusterRole `db-manager`
/// (it may update `dbs.g.example.com`) bound to `subject`.
fn db_operator(subject: Value) -> Vec<NodeInput> {
    vec![
        with_body(
            object("apps", "Deployment", Some("g-op"), "op", Some("op")),
            json!({"spec": {"template": {"spec": {"serviceAccountName": "op"}}}}),
        ),
        object("", "ServiceAccount", Some("g-op"), "op", Some("op")),
        with_body(
            object(RBAC_GROUP, "ClusterRole", None, "db-manager", Some("op")),
            json!({"rules": [{"apiGroups": ["g.example.com"], "resources": ["dbs", "dbs/finalizers"],
                              "verbs": ["get", "list", "watch", "update", "patch"]}]}),
        ),
        with_body(
            object(RBAC_GROUP, "ClusterRoleBinding", None, "db-manager", Some("op")),
            json!({"roleRef": {"kind": "ClusterRole", "name": "db-manager"}, "subjects": [subject]}),
        ),
    ]
}

/// Order review 8: RBAC names the operator whatever form its binding's subject takes (a `User`
/// `system:serviceaccount:NS:NAME`, a `Group` `system:serviceaccounts:NS`), and a workload of
/// the CRD's own stack that is no operator does not hide it (F2, F1).
#[test]
fn rbac_names_the_operator_through_every_subject_form_beside_the_crds_own_workloads() {
    let subjects = [
        json!({"kind": "ServiceAccount", "name": "op", "namespace": "g-op"}),
        json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccount:g-op:op"}),
        json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts:g-op"}),
        json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts"}),
    ];
    for subject in subjects {
        let mut cr = object("g.example.com", "Db", Some("g-y"), "stays", Some("app"));
        cr.finalizers = vec!["g.example.com/cleanup".into()];
        let inputs: Vec<NodeInput> = vec![
            cr,
            object(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                None,
                "dbs.g.example.com",
                Some("crds"),
            ),
            deployment("crds", "docs-ui", json!({"app": "docs"}), Some("crds")),
        ]
        .into_iter()
        .chain(db_operator(subject.clone()))
        .collect();
        let mut options = options();
        options
            .crd_names
            .insert(("g.example.com".into(), "Db".into()), "dbs.g.example.com".into());
        let found = inferred(&inputs, &options);
        assert!(
            found.contains(&edge("stays", "op", EdgeKind::InferredFinalizer)),
            "{subject}: {found:?}"
        );
        assert!(
            found.contains(&edge("op", "db-manager", EdgeKind::InferredRunsWith)),
            "{subject}: {found:?}"
        );
    }
}

/// Review finding F-C (issue 25, order review 6): a webhook whose `clientConfig.url` names a
/// Service by its in-cluster host (`hook.t1.svc`) keeps that Service and its workload like the
/// `service` form does; a URL outside the cluster names none.
#[test]
fn a_webhook_url_naming_an_in_cluster_service_has_that_backend() {
    let cases = [
        ("https://hook.op.svc:443/validate", true),
        ("https://hook.op.svc.cluster.local/validate?x=1", true),
        ("https://hook.op.svc", true),
        ("https://hooks.example.com/validate", false),
        ("https://hook.other.svc/validate", false),
        ("not a url", false),
        ("https://.op.svc/", false),
    ];
    for (url, backed) in cases {
        let webhook = json!({"apiVersion": "admissionregistration.k8s.io/v1", "webhooks": [{
            "name": "check.ops.example.com",
            "clientConfig": {"url": url},
            "failurePolicy": "Ignore"
        }]});
        let inputs = vec![
            with_body(
                object(
                    "admissionregistration.k8s.io",
                    "ValidatingWebhookConfiguration",
                    None,
                    "check",
                    None,
                ),
                webhook,
            ),
            service("op", "hook", json!({"app": "hook"}), None),
        ];
        let found = inferred(&inputs, &options());
        assert_eq!(
            found.contains(&edge("check", "hook", EdgeKind::InferredWebhook)),
            backed,
            "{url}: {found:?}"
        );
    }
}

#[test]
fn a_crds_conversion_webhook_goes_before_its_backend() {
    let conversion = |client_config: Value| json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client_config}}}});
    let inputs = vec![
        with_body(
            object(
                CRD_GROUP,
                "CustomResourceDefinition",
                None,
                "gizmos.ops.example.com",
                None,
            ),
            conversion(json!({"service": {"namespace": "ops", "name": "conv"}})),
        ),
        with_body(
            object(
                CRD_GROUP,
                "CustomResourceDefinition",
                None,
                "widgets.ops.example.com",
                None,
            ),
            json!({"spec": {"conversion": {"strategy": "None"}}}),
        ),
        with_body(
            object(
                CRD_GROUP,
                "CustomResourceDefinition",
                None,
                "olds.ops.example.com",
                None,
            ),
            json!({"spec": {"conversion": {"strategy": "Webhook",
                "webhookClientConfig": {"url": "https://conv.ops.svc:443/convert"}}}}),
        ),
        service("ops", "conv", json!({"app": "conv"}), None),
        deployment("ops", "conv-server", json!({"app": "conv"}), None),
    ];
    let mut found = inferred(&inputs, &options());
    found.sort();
    assert_eq!(
        found,
        vec![
            edge("gizmos.ops.example.com", "conv", EdgeKind::InferredWebhook),
            edge("gizmos.ops.example.com", "conv-server", EdgeKind::InferredWebhook),
            edge("olds.ops.example.com", "conv", EdgeKind::InferredWebhook),
            edge("olds.ops.example.com", "conv-server", EdgeKind::InferredWebhook),
        ]
    );
    assert_eq!(
        services_called(&inputs[0]),
        vec![("ops".to_string(), "conv".to_string())]
    );
    assert!(services_called(&inputs[1]).is_empty());
}

/// Order review 6, F-A: an operator finalizes with the permissions its ServiceAccount is bound
/// to, whichever stack holds them. Stack `op` holds the CRD and the operator Deployment, stack
/// `rbac` the ClusterRoleBinding and ClusterRole of the operator's account, stack `use` a Gizmo
/// with the operator's finalizer: the Gizmo goes before the operator, and the operator before its
/// account's binding and role (an operator that stays keeps them), but not before the Secrets and
/// ConfigMaps its pods read.
#[test]
fn an_operator_needs_the_rbac_it_finalizes_with_from_any_stack() {
    let mut gizmo = object("ops.example.com", "Gizmo", Some("app"), "g", Some("use"));
    gizmo.finalizers = vec!["ops.example.com/cleanup".into()];
    let operator = with_body(
        object("apps", "Deployment", Some("op"), "operator", Some("op")),
        json!({"spec": {"template": {"metadata": {"labels": {"app": "operator"}}, "spec": {
            "serviceAccountName": "operator",
            "volumes": [{"name": "cfg", "configMap": {"name": "operator-config"}}]
        }}}}),
    );
    let inputs = vec![
        object(
            CRD_GROUP,
            "CustomResourceDefinition",
            None,
            "gizmos.ops.example.com",
            Some("op"),
        ),
        operator,
        object("", "ServiceAccount", Some("op"), "operator", Some("op")),
        object("", "ConfigMap", Some("op"), "operator-config", Some("op")),
        with_body(
            object(RBAC_GROUP, "ClusterRoleBinding", None, "operator", Some("rbac")),
            json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "operator"},
                   "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "op"}]}),
        ),
        object(RBAC_GROUP, "ClusterRole", None, "operator", Some("rbac")),
        gizmo,
    ];
    let graph = build(&inputs, &options());
    let mut found: Vec<(String, String, EdgeKind)> = graph
        .inferred
        .iter()
        .map(|e| {
            (
                graph.nodes[e.from].id.kind.clone(),
                graph.nodes[e.to].id.kind.clone(),
                e.kind,
            )
        })
        .collect();
    found.sort();
    found.dedup();
    assert!(
        found.contains(&edge("Gizmo", "Deployment", EdgeKind::InferredFinalizer)),
        "{found:?}"
    );
    let runs_with: Vec<_> = found
        .into_iter()
        .filter(|e| e.2 == EdgeKind::InferredRunsWith)
        .collect();
    assert_eq!(
        runs_with,
        vec![
            edge("ClusterRoleBinding", "ClusterRole", EdgeKind::InferredRunsWith),
            edge("Deployment", "ClusterRoleBinding", EdgeKind::InferredRunsWith),
            edge("Deployment", "ServiceAccount", EdgeKind::InferredRunsWith),
        ]
    );
}

/// Order review 8's gap, met again by review 21 (T2): an operator RBAC names (it may update an
/// operator's API group) goes before the ServiceAccount and RBAC it runs with even when nothing
/// it finalizes exists at plan time: a custom resource made mid-run needs them all. A workload
/// whose RBAC writes only Kubernetes' own groups (leader election) is no operator.
#[test]
fn an_operator_rbac_names_goes_before_its_rbac_with_nothing_to_finalize_yet() {
    let operator_rules = json!([{"apiGroups": ["ops.example.com"], "resources": ["gizmos", "gizmos/finalizers"], "verbs": ["get", "update"]}]);
    let election_rules = json!([{"apiGroups": ["coordination.k8s.io", ""], "resources": ["leases", "configmaps"], "verbs": ["get", "update"]}]);
    let mut inputs = vec![
        workload_as("operator", "operator", "op", json!({})),
        object("", "ServiceAccount", Some("op"), "operator", Some("op")),
        workload_as("elected", "elected", "op", json!({})),
        object("", "ServiceAccount", Some("op"), "elected", Some("op")),
    ];
    inputs.extend(role_for("operator", "operator", "op", operator_rules));
    inputs.extend(role_for("elected", "elected", "op", election_rules));
    let graph = build(&inputs, &options());
    let found: Vec<(String, String, EdgeKind)> = graph
        .inferred
        .iter()
        .map(|e| {
            (
                graph.nodes[e.from].id.name.clone(),
                graph.nodes[e.to].id.to_string(),
                e.kind,
            )
        })
        .collect();
    assert_eq!(
        targets(&found, "operator", EdgeKind::InferredRunsWith),
        [
            "ClusterRole.rbac.authorization.k8s.io/operator",
            "ClusterRoleBinding.rbac.authorization.k8s.io/operator",
            "ServiceAccount/op/operator"
        ],
        "{found:?}"
    );
    assert!(
        targets(&found, "elected", EdgeKind::InferredRunsWith).is_empty(),
        "{found:?}"
    );
}

/// A Deployment of stack `stack` in `op` whose pods run as ServiceAccount `account`, with `pod`
/// merged into its pod spec.
fn workload_as(name: &str, account: &str, stack: &str, pod: Value) -> NodeInput {
    let mut spec = json!({"serviceAccountName": account});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), pod.as_object()) {
        spec.extend(extra.clone());
    }
    with_body(
        object("apps", "Deployment", Some("op"), name, Some(stack)),
        json!({"spec": {"template": {"spec": spec}}}),
    )
}

/// A ClusterRole `name` with `rules`, and a ClusterRoleBinding of it to ServiceAccount
/// `op/account`, both of stack `stack`.
fn role_for(name: &str, account: &str, stack: &str, rules: Value) -> [NodeInput; 2] {
    [
        with_body(
            object(RBAC_GROUP, "ClusterRole", None, name, Some(stack)),
            json!({ "rules": rules }),
        ),
        with_body(
            object(RBAC_GROUP, "ClusterRoleBinding", None, name, Some(stack)),
            json!({"roleRef": {"kind": "ClusterRole", "name": name},
                   "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "op"}]}),
        ),
    ]
}

/// The targets of the inferred edges of `kind` from the object named `from`, sorted.
fn targets(found: &[(String, String, EdgeKind)], from: &str, kind: EdgeKind) -> Vec<String> {
    let mut to: Vec<String> = found
        .iter()
        .filter(|(f, _, k)| f == from && *k == kind)
        .map(|(_, t, _)| t.clone())
        .collect();
    to.sort();
    to.dedup();
    to
}

/// Order review 7, gap 1: Crossplane's real finalizer `finalizer.managedresource.crossplane.io`
/// on an `s3.aws.upbound.io` Bucket names no group of the Bucket, and a finalizer may have no dot
/// at all. RBAC names the operator that finalizes it all the same: the workloads allowed to update
/// Buckets (a rule for every resource of the named group counts, as Crossplane's RBAC manager
/// grants a provider). Several such workloads are all needed; cluster-admin's `*` ties nothing,
/// nor does the garbage collector's `foregroundDeletion`.
#[test]
fn a_finalizer_that_names_no_group_of_its_object_ties_it_to_who_may_update_it() {
    let bucket = |name: &str, finalizer: &str| {
        let mut bucket = object("s3.aws.upbound.io", "Bucket", Some("app"), name, Some("use"));
        bucket.finalizers = vec![finalizer.into()];
        bucket
    };
    let mut inputs = vec![
        bucket("crossplane", "finalizer.managedresource.crossplane.io"),
        bucket("dotless", "cleanup"),
        bucket("foreground", "foregroundDeletion"),
        object(
            CRD_GROUP,
            "CustomResourceDefinition",
            None,
            "buckets.s3.aws.upbound.io",
            Some("crds"),
        ),
        workload_as("provider-aws-s3", "provider", "provider", json!({})),
        workload_as("second-provider", "second", "second", json!({})),
        workload_as("admin-tool", "admin", "tools", json!({})),
        workload_as("other-provider", "other", "other", json!({})),
    ];
    inputs.extend(role_for(
        "provider",
        "provider",
        "provider",
        json!([{"apiGroups": ["s3.aws.upbound.io"], "resources": ["*"], "verbs": ["*"]}]),
    ));
    inputs.extend(role_for(
        "second",
        "second",
        "second",
        json!([{"apiGroups": ["s3.aws.upbound.io"], "resources": ["buckets/finalizers"], "verbs": ["update"]}]),
    ));
    inputs.extend(role_for(
        "admin",
        "admin",
        "tools",
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    ));
    inputs.extend(role_for(
        "other",
        "other",
        "other",
        json!([{"apiGroups": ["ec2.aws.upbound.io"], "resources": ["*"], "verbs": ["*"]},
               {"apiGroups": ["s3.aws.upbound.io"], "resources": ["buckets"], "verbs": ["get", "list", "watch"]}]),
    ));
    let mut options = options();
    options.crd_names.insert(
        ("s3.aws.upbound.io".into(), "Bucket".into()),
        "buckets.s3.aws.upbound.io".into(),
    );
    let found = inferred(&inputs, &options);
    for from in ["crossplane", "dotless"] {
        let to = targets(&found, from, EdgeKind::InferredFinalizer);
        assert!(to.contains(&"provider-aws-s3".to_string()), "{from}: {found:?}");
        assert!(to.contains(&"second-provider".to_string()), "{from}: {found:?}");
        assert!(!to.contains(&"admin-tool".to_string()), "{from}: {found:?}");
        assert!(!to.contains(&"other-provider".to_string()), "{from}: {found:?}");
    }
    assert!(!found.iter().any(|(from, _, _)| from == "foreground"), "{found:?}");
    // The operators need what they finalize with.
    assert!(
        found.contains(&edge("provider-aws-s3", "provider", EdgeKind::InferredRunsWith)),
        "{found:?}"
    );
}

/// Order review 7, gap 2: a built-in object (a Secret) finalized by an operator whose CRD is no
/// node of the graph is tied to the operator RBAC names: first the one whose RBAC names the
/// finalizer's domain as an operator group; for a finalizer with no such domain, those allowed
/// to update Secrets by name — never through a rule for every core resource, nor a default role
/// of the control plane. A Kubernetes-domain finalizer and the garbage collector's tie nothing.
#[test]
fn a_built_in_object_finalized_by_an_operator_without_a_crd_node_is_tied_by_rbac() {
    let secret = |name: &str, finalizer: &str| {
        let mut secret = object("", "Secret", Some("app"), name, Some("use"));
        secret.finalizers = vec![finalizer.into()];
        secret
    };
    let mut inputs = vec![
        secret("by-domain", "ops.example.com/protect"),
        secret("dotless", "protect"),
        secret("kubernetes", "kubernetes.io/pvc-protection"),
        secret("orphaning", "orphan"),
        workload_as("operator", "operator", "op", json!({})),
        workload_as("secrets-writer", "writer", "writer", json!({})),
        workload_as("core-admin", "core-admin", "tools", json!({})),
        workload_as("defaults", "defaults", "tools", json!({})),
    ];
    inputs.extend(role_for(
        "operator",
        "operator",
        "op",
        json!([{"apiGroups": ["ops.example.com"], "resources": ["gizmos"], "verbs": ["update"]},
               {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}]),
    ));
    inputs.extend(role_for(
        "writer",
        "writer",
        "writer",
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "patch"]}]),
    ));
    inputs.extend(role_for(
        "core-admin",
        "core-admin",
        "tools",
        json!([{"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}]),
    ));
    let [mut default_role, binding] = role_for(
        "system:controller:token-cleaner",
        "defaults",
        "tools",
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["delete", "update"]}]),
    );
    default_role
        .labels_mut()
        .insert(BOOTSTRAPPING.0.into(), BOOTSTRAPPING.1.into());
    inputs.extend([default_role, binding]);
    let found = inferred(&inputs, &options());
    // Each workload with the controller objects of its stack (here its role, named alike).
    assert_eq!(
        targets(&found, "by-domain", EdgeKind::InferredFinalizer),
        ["operator"],
        "{found:?}"
    );
    assert_eq!(
        targets(&found, "dotless", EdgeKind::InferredFinalizer),
        ["secrets-writer", "writer"],
        "{found:?}"
    );
    for untied in ["kubernetes", "orphaning"] {
        assert!(!found.iter().any(|(from, _, _)| from == untied), "{untied}: {found:?}");
    }
    assert!(served_by_an_operator("protect"));
    assert!(!served_by_an_operator("foregroundDeletion"));
    assert!(!served_by_an_operator("orphan"));
}

/// The volumes, drivers and provisioners of
/// [`a_volume_goes_before_the_provisioner_that_serves_its_driver_in_any_stack`].
fn csi_world(hostpath: &str) -> Vec<NodeInput> {
    let volume = |name: &str, driver: &str| {
        with_body(
            object("", "PersistentVolume", None, name, Some("data")),
            json!({"spec": {"csi": {"driver": driver, "volumeHandle": name}}}),
        )
    };
    let sidecar = |driver: &str| {
        json!({"containers": [
            {"name": "hostpath", "image": "registry.k8s.io/sig-storage/hostpathplugin:v1.11.0",
             "args": [format!("--drivername={driver}"), "--endpoint=$(CSI_ENDPOINT)"]},
            {"name": "csi-provisioner", "image": "registry.k8s.io/sig-storage/csi-provisioner:v3.6.0",
             "args": ["-v=5", "--csi-address=/csi/csi.sock"]}
        ]})
    };
    let mut in_tree = object("", "PersistentVolume", None, "pv-in-tree", Some("data"));
    in_tree.annotations_mut().insert(
        "pv.kubernetes.io/provisioned-by".into(),
        "kubernetes.io/host-path".into(),
    );
    let mut inputs = vec![
        volume("pv-hostpath", hostpath),
        volume("pv-ebs", "ebs.csi.aws.com"),
        in_tree,
        object("storage.k8s.io", "CSIDriver", None, hostpath, Some("storage")),
        with_body(
            object(
                "storage.k8s.io",
                "StorageClass",
                None,
                "csi-hostpath-sc",
                Some("storage"),
            ),
            json!({"provisioner": hostpath}),
        ),
        workload_as(
            "csi-hostpathplugin",
            "csi-hostpathplugin-sa",
            "controller",
            sidecar(hostpath),
        ),
        workload_as("other-csi", "other-sa", "other", sidecar("other.csi.example.com")),
        with_body(
            object("storage.k8s.io", "StorageClass", None, "other-sc", Some("other")),
            json!({"provisioner": "other.csi.example.com"}),
        ),
        workload_as(
            "ebs-csi-controller",
            "ebs-csi-controller-sa",
            "ebs",
            json!({"containers": [{"name": "ebs-plugin", "image": "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.25.0",
                                    "args": ["controller", "--endpoint=$(CSI_ENDPOINT)"]}]}),
        ),
        workload_as("plain", "plain-sa", "plain", json!({})),
    ];
    inputs.extend(role_for(
        "ebs-external-provisioner-role",
        "ebs-csi-controller-sa",
        "ebs",
        json!([{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]}]),
    ));
    inputs.push(object(
        "",
        "ServiceAccount",
        Some("op"),
        "csi-hostpathplugin-sa",
        Some("controller"),
    ));
    inputs
}

/// Order review 7, gap 3: a CSI driver's controller in another stack than its CSIDriver and
/// StorageClass. A volume goes before the provisioner workloads that serve its driver (a
/// `csi-provisioner` sidecar, or RBAC that creates and deletes PersistentVolumes) and that name
/// it (`--drivername=...`, as csi-driver-host-path's plugin does), not those that name another
/// driver; when none names it and the driver's stacks run no workload, before those that name no
/// known driver. An in-tree driver (`kubernetes.io/...`) has no provisioner workload.
#[test]
fn a_volume_goes_before_the_provisioner_that_serves_its_driver_in_any_stack() {
    let hostpath = "hostpath.csi.k8s.io";
    let inputs = csi_world(hostpath);
    let found = inferred(&inputs, &options());
    let hostpath_targets = targets(&found, "pv-hostpath", EdgeKind::InferredStorageDriver);
    assert!(
        hostpath_targets.contains(&"csi-hostpathplugin".to_string()),
        "{found:?}"
    );
    assert!(hostpath_targets.contains(&hostpath.to_string()), "{found:?}");
    for unrelated in ["other-csi", "ebs-csi-controller", "plain"] {
        assert!(!hostpath_targets.contains(&unrelated.to_string()), "{found:?}");
    }
    // With the controller objects of its stack, as a finalizer's operator found by RBAC.
    assert_eq!(
        targets(&found, "pv-ebs", EdgeKind::InferredStorageDriver),
        ["ebs-csi-controller", "ebs-external-provisioner-role"],
        "{found:?}"
    );
    assert!(!found.iter().any(|(from, _, _)| from == "pv-in-tree"), "{found:?}");
    // The provisioner keeps (and goes before) what it runs with.
    assert!(
        found.contains(&edge(
            "csi-hostpathplugin",
            "csi-hostpathplugin-sa",
            EdgeKind::InferredRunsWith
        )),
        "{found:?}"
    );
    let plugin = inputs.iter().find(|i| i.id.name == "csi-hostpathplugin").unwrap();
    assert!(super::rbac::names_driver(plugin, hostpath));
    assert!(!super::rbac::names_driver(plugin, "csi.k8s.io"));
}

/// Order review 7: the roles read whole with the stayers are those that may name an operator:
/// an operator group's, or a write on resources a rule names; not cluster-admin's wildcards, and
/// a control-plane default only for an operator group.
#[test]
fn roles_that_may_name_an_operator_are_read_whole() {
    let role = |rules: Value| json!({ "rules": rules });
    let secrets = role(json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["update"]}]));
    assert!(may_name_an_operator(&secrets, false));
    assert!(!may_name_an_operator(&secrets, true));
    let provisioner =
        role(json!([{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["create", "delete"]}]));
    assert!(may_name_an_operator(&provisioner, false));
    let admin = role(json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]));
    assert!(!may_name_an_operator(&admin, false));
    let reader = role(json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]));
    assert!(!may_name_an_operator(&reader, false));
    let operator = role(json!([{"apiGroups": ["ops.example.com"], "resources": ["*"], "verbs": ["patch"]}]));
    assert!(may_name_an_operator(&operator, true));
}

fn labels_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Order review 9, F1: label selectors read as apimachinery's `LabelSelectorAsSelector` reads
/// them (what the clusterrole aggregation controller selects by).
#[test]
fn label_selectors_read_match_labels_and_every_expression_operator() {
    let labels = labels_of(&[("tier", "ops"), ("env", "prod")]);
    let check = |selector: Value| selector_matches(&selector, &labels);
    assert_eq!(check(json!({})), Some(true), "an empty selector selects everything");
    assert_eq!(check(json!({"matchLabels": {"tier": "ops"}})), Some(true));
    assert_eq!(
        check(json!({"matchLabels": {"tier": "ops", "env": "dev"}})),
        Some(false)
    );
    assert_eq!(check(json!({"matchLabels": {"absent": "x"}})), Some(false));
    let expression = |key: &str, operator: &str, values: Value| {
        check(json!({"matchExpressions": [{"key": key, "operator": operator, "values": values}]}))
    };
    assert_eq!(expression("env", "In", json!(["dev", "prod"])), Some(true));
    assert_eq!(expression("env", "In", json!(["dev"])), Some(false));
    assert_eq!(expression("absent", "In", json!(["dev"])), Some(false));
    assert_eq!(expression("env", "NotIn", json!(["dev"])), Some(true));
    assert_eq!(expression("env", "NotIn", json!(["prod"])), Some(false));
    assert_eq!(expression("absent", "NotIn", json!(["prod"])), Some(true));
    assert_eq!(expression("env", "Exists", json!(null)), Some(true));
    assert_eq!(expression("absent", "Exists", json!([])), Some(false));
    assert_eq!(expression("absent", "DoesNotExist", json!(null)), Some(true));
    assert_eq!(expression("env", "DoesNotExist", json!(null)), Some(false));
    // Both parts, all of them.
    assert_eq!(
        check(json!({"matchLabels": {"tier": "ops"}, "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod"]},
            {"key": "gone", "operator": "DoesNotExist"}]})),
        Some(true)
    );
    assert_eq!(
        check(json!({"matchLabels": {"tier": "ops"}, "matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["prod"]}]})),
        Some(false)
    );
    // What the API server rejects selects nothing.
    assert_eq!(expression("env", "In", json!([])), None);
    assert_eq!(expression("env", "Exists", json!(["prod"])), None);
    assert_eq!(expression("env", "Equals", json!(["prod"])), None);
}

/// Order review 9, F1: a ClusterRole aggregates the ClusterRoles one of its
/// `clusterRoleSelectors` selects, never itself; an invalid selector aggregates nothing.
#[test]
fn an_aggregation_rule_selects_by_any_of_its_selectors() {
    let role = json!({"metadata": {"name": "op"}, "aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"example.com/aggregate-to-op": "true"}},
        {"matchExpressions": [{"key": "example.com/part-of", "operator": "In", "values": ["op", "ops"]}]}
    ]}});
    assert!(aggregates(
        &role,
        "piece",
        &labels_of(&[("example.com/aggregate-to-op", "true")])
    ));
    assert!(aggregates(
        &role,
        "piece",
        &labels_of(&[("example.com/part-of", "ops")])
    ));
    assert!(!aggregates(
        &role,
        "piece",
        &labels_of(&[("example.com/part-of", "other")])
    ));
    assert!(!aggregates(
        &role,
        "op",
        &labels_of(&[("example.com/aggregate-to-op", "true")])
    ));
    assert!(!aggregates(&json!({"rules": []}), "piece", &labels_of(&[("a", "b")])));
    let invalid = json!({"aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"example.com/aggregate-to-op": "true"}},
        {"matchExpressions": [{"key": "x", "operator": "In", "values": []}]}
    ]}});
    assert!(!aggregates(
        &invalid,
        "piece",
        &labels_of(&[("example.com/aggregate-to-op", "true")])
    ));
}

/// The stacks of order review 9, F1: `op` holds the CRD, the operator Deployment, its
/// ServiceAccount, its ClusterRoleBinding and the aggregated ClusterRole `sprocket-op` (no rules
/// of its own, `selector` as its one selector); `rbac` the ClusterRole `sprocket-op-sprockets`,
/// labelled `labels`, that grants the Sprockets; `use` a Sprocket with the operator's finalizer.
fn aggregated_operator(selector: Value, labels: &[(&str, &str)], finalizer: &str) -> Vec<NodeInput> {
    let mut sprocket = object("sprocket.test", "Sprocket", Some("use"), "s1", Some("use"));
    sprocket.finalizers = vec![finalizer.into()];
    let mut piece = with_body(
        object(RBAC_GROUP, "ClusterRole", None, "sprocket-op-sprockets", Some("rbac")),
        json!({"rules": [{"apiGroups": ["sprocket.test"], "resources": ["sprockets"],
                          "verbs": ["get", "list", "watch", "update", "patch"]}]}),
    );
    piece.labels_mut().extend(labels_of(labels));
    vec![
        object(
            CRD_GROUP,
            "CustomResourceDefinition",
            None,
            "sprockets.sprocket.test",
            Some("op"),
        ),
        workload_as("sprocket-op", "sprocket-op", "op", json!({})),
        object("", "ServiceAccount", Some("op"), "sprocket-op", Some("op")),
        with_body(
            object(RBAC_GROUP, "ClusterRoleBinding", None, "sprocket-op", Some("op")),
            json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "sprocket-op"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sprocket-op", "namespace": "op"}]}),
        ),
        with_body(
            object(RBAC_GROUP, "ClusterRole", None, "sprocket-op", Some("op")),
            json!({"aggregationRule": {"clusterRoleSelectors": [selector]}, "rules": []}),
        ),
        piece,
        sprocket,
    ]
}

fn sprocket_options() -> BuildOptions {
    let mut options = options();
    options.crd_names.insert(
        ("sprocket.test".into(), "Sprocket".into()),
        "sprockets.sprocket.test".into(),
    );
    options
}

/// Order review 9, F1: the operator bound to an aggregated ClusterRole needs the ClusterRole its
/// rules are aggregated from, by `matchLabels` or `matchExpressions`: the Sprocket goes before the
/// operator, and the operator before the piece of its role (through the role it is bound to).
#[test]
fn an_operator_bound_to_an_aggregated_cluster_role_needs_its_pieces() {
    let label = "rev25b.example.com/aggregate-to-sprocket-op";
    for selector in [
        json!({"matchLabels": {label: "true"}}),
        json!({"matchExpressions": [{"key": label, "operator": "Exists"}]}),
    ] {
        let inputs = aggregated_operator(selector.clone(), &[(label, "true")], "sprocket.test/cleanup");
        let found = inferred(&inputs, &sprocket_options());
        for expected in [
            edge("s1", "sprocket-op", EdgeKind::InferredFinalizer),
            edge("sprocket-op", "sprocket-op-sprockets", EdgeKind::InferredRunsWith),
        ] {
            assert!(found.contains(&expected), "{selector}: {expected:?} not in {found:?}");
        }
        // Not selected: no piece of the role.
        let inputs = aggregated_operator(selector.clone(), &[("other", "true")], "sprocket.test/cleanup");
        let found = inferred(&inputs, &sprocket_options());
        assert!(
            !found.iter().any(|(_, to, _)| to == "sprocket-op-sprockets"),
            "{selector}: {found:?}"
        );
    }
}

/// Order review 9, F1: the RBAC fallback of a finalizer that names no group of its object finds
/// the operator through the aggregated ClusterRole it is bound to (the piece grants the update;
/// the bound role has no rules of its own until the aggregation controller copies them in).
#[test]
fn the_rbac_fallback_finds_an_operator_bound_to_an_aggregated_role() {
    let label = "rev25b.example.com/aggregate-to-sprocket-op";
    let selector = json!({"matchExpressions": [{"key": label, "operator": "In", "values": ["true", "yes"]}]});
    let mut inputs = aggregated_operator(selector, &[(label, "yes")], "cleanup");
    // No CRD of the graph names the Sprocket's group: only RBAC ties it to its operator.
    inputs.remove(0);
    let mut found = inferred(&inputs, &sprocket_options());
    found.retain(|(from, _, kind)| from == "s1" && *kind == EdgeKind::InferredFinalizer);
    let operator = edge("s1", "sprocket-op", EdgeKind::InferredFinalizer);
    assert!(found.contains(&operator), "{found:?}");
    // Without the aggregation, no workload may update Sprockets: nothing is found.
    let mut inputs = aggregated_operator(json!({"matchLabels": {label: "no"}}), &[(label, "yes")], "cleanup");
    inputs.remove(0);
    let found = inferred(&inputs, &sprocket_options());
    assert!(!found.iter().any(|(from, _, _)| from == "s1"), "{found:?}");
}

/// Order review 9, F2: a Namespace's `spec.finalizers` but `kubernetes` tie it to their operator
/// as its metadata ones would; `kubernetes` alone names none.
#[test]
fn a_namespaces_spec_finalizers_name_its_operator() {
    let namespace = |finalizers: Value| {
        with_body(
            object("", "Namespace", None, "nsf", Some("nsf")),
            json!({"apiVersion": "v1", "spec": {"finalizers": finalizers}}),
        )
    };
    let mut inputs = aggregated_operator(
        json!({"matchLabels": {"a": "b"}}),
        &[("a", "b")],
        "sprocket.test/cleanup",
    );
    inputs.pop();
    inputs.push(namespace(json!(["kubernetes", "sprocket.test/ns-cleanup"])));
    assert_eq!(finalizers_of(inputs.last().unwrap()), ["sprocket.test/ns-cleanup"]);
    let found = inferred(&inputs, &sprocket_options());
    assert!(
        found.contains(&edge("nsf", "sprocket-op", EdgeKind::InferredFinalizer)),
        "{found:?}"
    );
    inputs.pop();
    inputs.push(namespace(json!(["kubernetes"])));
    assert!(finalizers_of(inputs.last().unwrap()).is_empty());
    let found = inferred(&inputs, &sprocket_options());
    assert!(!found.iter().any(|(from, _, _)| from == "nsf"), "{found:?}");
}

/// Order review 11: the roles read whole with the stayers and the roles the inference asks
/// about are one predicate. Over every rule built from a vocabulary of verbs, groups and
/// resources, in default and other roles, any question the inference puts ([`rbac::Ask`]) that a
/// rule answers yes makes its role one that `may_name_an_operator` reads; the `*.k8s.io`
/// operator the old filter missed is one of them.
#[test]
fn every_role_the_inference_asks_about_is_read_whole() {
    use super::rbac::Ask;
    let verbs = [["update"], ["patch"], ["*"], ["create"], ["delete"], ["get"]];
    let groups = [
        "",
        "*",
        "apps",
        "ops.example.com",
        "snapshot.storage.k8s.io",
        "x.kubernetes.io",
    ];
    let resources = [
        "*",
        "widgets",
        "widgets/finalizers",
        "persistentvolumes",
        "*/finalizers",
    ];
    let mut asks: Vec<Ask> = vec![
        Ask::WritesVolumes("create"),
        Ask::WritesVolumes("delete"),
        Ask::UpdatesAnOperatorGroup,
    ];
    for group in groups {
        asks.push(Ask::UpdatesGroup(group));
        asks.push(Ask::OperatesDomain(group));
        asks.push(Ask::OperatesDomain("sub.ops.example.com"));
        for resource in ["widgets", "persistentvolumes", "gadgets", "namespaces"] {
            for any_resource in [false, true] {
                asks.push(Ask::UpdatesResource {
                    group,
                    resource,
                    any_resource,
                });
            }
        }
    }
    let mut checked = 0;
    for verb in verbs {
        for extra_verb in [None, Some("delete")] {
            let mut rule_verbs: Vec<&str> = verb.to_vec();
            rule_verbs.extend(extra_verb);
            for group in groups {
                for resource in resources {
                    let rule = json!({"apiGroups": [group], "resources": [resource], "verbs": rule_verbs});
                    let role = json!({ "rules": [rule.clone()] });
                    for default in [false, true] {
                        for ask in &asks {
                            if ask.accepts(&rule, default) {
                                checked += 1;
                                assert!(
                                    may_name_an_operator(&role, default),
                                    "{ask:?} accepts {rule} (default {default}) but the role is not read"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} accepted questions");
    let snapshotter =
        json!({"rules": [{"apiGroups": ["snapshot.storage.k8s.io"], "resources": ["*"], "verbs": ["update"]}]});
    assert!(may_name_an_operator(&snapshotter, false));
    let admin = json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    assert!(!may_name_an_operator(&admin, false));
}

/// Order review 12: a finalizer of a Kubernetes domain on a built-in object is an add-on's unless
/// the control plane removes it itself (F1: a cloud controller manager's
/// `service.kubernetes.io/load-balancer-cleanup` and the snapshot controller's
/// `snapshot.storage.kubernetes.io/pvc-as-source-protection` name who may update that kind;
/// `kubernetes.io/pvc-protection` names nobody); a Namespace's `spec.finalizers` are removed
/// through `namespaces/finalize` (F2); a provisioner may get `create` and `delete` on
/// PersistentVolumes from two rules of two roles (F3).
#[test]
fn add_on_finalizers_of_kubernetes_domains_and_split_grants_name_their_controller() {
    let with_finalizer = |kind: &str, name: &str, finalizer: &str| {
        let mut input = object("", kind, Some("app"), name, Some("use"));
        input.finalizers = vec![finalizer.into()];
        input
    };
    let mut inputs = vec![
        with_finalizer("Service", "lb", "service.kubernetes.io/load-balancer-cleanup"),
        with_finalizer(
            "PersistentVolumeClaim",
            "source",
            "snapshot.storage.kubernetes.io/pvc-as-source-protection",
        ),
        with_finalizer("PersistentVolumeClaim", "protected", "kubernetes.io/pvc-protection"),
        with_body(
            object("", "Namespace", None, "tenant", Some("use")),
            json!({"spec": {"finalizers": ["kubernetes", "cleanup.nsop.example.org/tenant"]}}),
        ),
        workload_as("cloud-controller-manager", "ccm", "infra", json!({})),
        workload_as("snapshot-controller", "snap", "snap", json!({})),
        workload_as("nsop", "nsop", "nsop", json!({})),
        workload_as("nfs-provisioner", "nfs", "storage", json!({})),
        with_body(
            object("", "PersistentVolume", None, "pv-nfs", Some("data")),
            json!({"spec": {"storageClassName": "nfs-client"}}),
        ),
        with_body(
            object("storage.k8s.io", "StorageClass", None, "nfs-client", Some("sc")),
            json!({"provisioner": "example.com/nfs"}),
        ),
    ];
    inputs.extend(role_for(
        "ccm",
        "ccm",
        "infra",
        json!([{"apiGroups": [""], "resources": ["services"], "verbs": ["list", "patch", "update", "watch"]}]),
    ));
    inputs.extend(role_for(
        "snap",
        "snap",
        "snap",
        json!([{"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "update"]}]),
    ));
    inputs.extend(role_for(
        "nsop",
        "nsop",
        "nsop",
        json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
               {"apiGroups": [""], "resources": ["namespaces/finalize"], "verbs": ["update"]}]),
    ));
    inputs.extend(role_for(
        "nfs-create",
        "nfs",
        "storage",
        json!([{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "create"]}]),
    ));
    inputs.extend(role_for(
        "nfs-delete",
        "nfs",
        "storage",
        json!([{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["delete"]}]),
    ));
    let found = inferred(&inputs, &options());
    let finalized_by = |from: &str| targets(&found, from, EdgeKind::InferredFinalizer);
    assert!(
        finalized_by("lb").contains(&"cloud-controller-manager".to_string()),
        "{found:?}"
    );
    assert!(
        finalized_by("source").contains(&"snapshot-controller".to_string()),
        "{found:?}"
    );
    assert!(finalized_by("protected").is_empty(), "{found:?}");
    assert!(finalized_by("tenant").contains(&"nsop".to_string()), "{found:?}");
    let served_by = targets(&found, "pv-nfs", EdgeKind::InferredStorageDriver);
    assert!(served_by.contains(&"nfs-provisioner".to_string()), "{found:?}");
}

/// Order review 13: an operator may run as a bare Pod, ReplicaSet or Job. A custom resource goes
/// before one in its CRD's stack, and before one RBAC names; one that another object made (a
/// Deployment's ReplicaSet, its Pods) is its maker's, and ties nothing.
#[test]
fn a_bare_pod_or_replica_set_runs_an_operator_one_made_by_another_does_not() {
    let gizmo = |group: &str, name: &str| {
        let mut cr = object(group, "Gizmo", Some("app"), name, Some("usage"));
        cr.finalizers = vec![format!("{group}/cleanup")];
        cr
    };
    let crd = |group: &str| {
        object(
            CRD_GROUP,
            "CustomResourceDefinition",
            None,
            &format!("gizmos.{group}"),
            Some("crds"),
        )
    };
    let pod = |name: &str, account: &str, stack: &str, owned: bool| {
        let mut pod = with_body(
            object("", "Pod", Some("op"), name, Some(stack)),
            json!({"spec": {"serviceAccountName": account}}),
        );
        if owned {
            pod.owners = vec!["uid-of-a-replica-set".into()];
        }
        pod
    };
    let mut inputs = vec![
        gizmo("a.example.com", "by-stack"),
        gizmo("b.example.com", "by-rbac"),
        gizmo("c.example.com", "by-owned"),
        object(
            CRD_GROUP,
            "CustomResourceDefinition",
            None,
            "gizmos.a.example.com",
            Some("ops-a"),
        ),
        crd("b.example.com"),
        crd("c.example.com"),
        pod("bare-pod", "a", "ops-a", false),
        with_body(
            object("apps", "ReplicaSet", Some("op"), "bare-rs", Some("ops-b")),
            json!({"spec": {"template": {"spec": {"serviceAccountName": "b"}}}}),
        ),
        pod("owned-pod", "c", "ops-c", true),
    ];
    inputs.extend(role_for(
        "b",
        "b",
        "ops-b",
        json!([{"apiGroups": ["b.example.com"], "resources": ["gizmos"], "verbs": ["update"]}]),
    ));
    inputs.extend(role_for(
        "c",
        "c",
        "ops-c",
        json!([{"apiGroups": ["c.example.com"], "resources": ["gizmos"], "verbs": ["update"]}]),
    ));
    let found = inferred(&inputs, &options());
    let finalized_by = |from: &str| targets(&found, from, EdgeKind::InferredFinalizer);
    assert!(finalized_by("by-stack").contains(&"bare-pod".to_string()), "{found:?}");
    assert!(finalized_by("by-rbac").contains(&"bare-rs".to_string()), "{found:?}");
    assert!(
        !finalized_by("by-owned").contains(&"owned-pod".to_string()),
        "{found:?}"
    );
}
