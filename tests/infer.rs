//! Inferred order on the real cluster (#14): two Flux-style stacks with no `dependsOn` between
//! them, torn down by one `prune`, with stand-in controllers that do their part only while their
//! Deployment exists — as a real operator, webhook server or CSI driver would.

mod common;

use std::sync::RwLock;
use std::time::Duration;

use common::*;

/// A dead aggregated API makes discovery fail for every prune on the cluster (exit 4 without
/// --skip-unlisted): the APIService test runs alone, the others together.
static DISCOVERY: RwLock<()> = RwLock::new(());

fn kustomizations(flux_ns: &str, names: &[&str]) -> String {
    names
        .iter()
        .map(|name| {
            format!(
                "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {flux_ns}}}\nspec: {{prune: true}}\n"
            )
        })
        .collect()
}

/// The operator stack: a CRD, the controller (Deployment, ServiceAccount), the Service that
/// serves its admission webhook, and the ValidatingWebhookConfiguration; the usage stack: custom
/// resources with the operator's finalizer. No dependsOn anywhere.
struct OperatorStacks {
    flux_ns: Namespace,
    op_ns: String,
    app_ns: String,
    group: String,
    webhook: String,
}

const CRS: usize = 3;

fn operator_and_usage(prefix: &str) -> OperatorStacks {
    ensure_flux_crds();
    let flux_ns = Namespace::new(prefix);
    let f = flux_ns.0.clone();
    let run = unique(prefix);
    let (op_ns, app_ns) = (format!("{run}-op"), format!("{run}-app"));
    let group = format!("{run}.example.com");
    let webhook = format!("{run}-check");
    let (operator, usage) = (flux_labels("operator", &f), flux_labels("usage", &f));
    apply(&format!(
        r#"{}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: gizmos.{group}, labels: {operator}}}
spec:
  group: {group}
  names: {{kind: Gizmo, plural: gizmos, singular: gizmo}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
---
apiVersion: v1
kind: Namespace
metadata: {{name: {op_ns}, labels: {operator}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: controller, namespace: {op_ns}, labels: {operator}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: controller, namespace: {op_ns}, labels: {operator}}}
spec:
  selector: {{matchLabels: {{app: controller}}}}
  template:
    metadata: {{labels: {{app: controller}}}}
    spec: {{serviceAccountName: controller, containers: [{{name: manager, image: example/operator}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: webhook, namespace: {op_ns}, labels: {operator}}}
spec: {{selector: {{app: controller}}, ports: [{{port: 443, targetPort: 9443}}]}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {app_ns}, labels: {usage}}}
"#,
        kustomizations(&f, &["operator", "usage"])
    ));
    wait_established(&[&format!("crd/gizmos.{group}")], &format!("gizmos.{group}"));
    // The 1.20 token controller gives the ServiceAccount a token Secret no stack tracks; the
    // teardown refuses to delete a Namespace that would take an untracked object with it. Here
    // the Secret goes with its ServiceAccount's stack (whether a token Secret should always follow
    // its ServiceAccount is for that safeguard to decide).
    let mut token = String::new();
    wait_until(Duration::from_secs(30), || {
        let secrets = kubectl(&["get", "secrets", "-n", &op_ns, "-o", "name"]);
        token = secrets
            .stdout
            .lines()
            .find(|l| l.starts_with("secret/controller-token-"))
            .unwrap_or_default()
            .to_string();
        !token.is_empty()
    });
    let labelled = kubectl(&[
        "label",
        &token,
        "-n",
        &op_ns,
        "kustomize.toolkit.fluxcd.io/name=operator",
        &format!("kustomize.toolkit.fluxcd.io/namespace={f}"),
    ]);
    assert_eq!(labelled.code, 0, "{}", labelled.stderr);
    let mut crs = String::new();
    for i in 0..CRS {
        crs.push_str(&format!(
            "---\napiVersion: {group}/v1\nkind: Gizmo\nmetadata: {{name: g{i}, namespace: {app_ns}, labels: {usage}, finalizers: [{group}/cleanup]}}\n"
        ));
    }
    apply(&crs);
    // The webhook checks creations only (no server answers it here): it comes after the custom
    // resources it would have checked.
    apply(&format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {webhook}, labels: {operator}}}
webhooks:
- name: check.{group}
  clientConfig: {{service: {{namespace: {op_ns}, name: webhook, path: /validate}}}}
  rules: [{{apiGroups: ["{group}"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["gizmos"]}}]
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: ["v1"]
"#
    ));
    record_flux_inventories(&f);
    OperatorStacks {
        flux_ns,
        op_ns,
        app_ns,
        group,
        webhook,
    }
}

#[test]
fn a_teardown_with_no_depends_on_waits_for_the_live_operator_and_drops_the_webhook_first() {
    let _discovery = DISCOVERY.read().unwrap_or_else(|e| e.into_inner());
    let _logs = start();
    let stacks = operator_and_usage("infer-op");
    let (f, op_ns) = (stacks.flux_ns.0.clone(), stacks.op_ns.clone());
    let resource = format!("gizmos.{}", stacks.group);
    let operator = StandIn::start(
        &resource,
        Some(&stacks.app_ns),
        "g",
        &format!("{}/cleanup", stacks.group),
        move || exists("deployment", Some(&op_ns), "controller"),
    );

    // The same order from `graph`; and without inference the controller shares the custom
    // resources' wave: the deadlock of kustomize-controller#301.
    let wave_in_graph = |extra: &[&str], kind: &str, ns: &str, name: &str| {
        let mut args = vec!["graph", "-A", "--members", "--order", "delete", "-o", "json"];
        args.extend_from_slice(extra);
        let json = stack(&args).expect_code(0).json();
        let node = json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .position(|n| n["kind"] == kind && n["namespace"] == ns && n["name"] == name)
            .unwrap_or_else(|| panic!("{kind}/{ns}/{name}"));
        json["waves"]
            .as_array()
            .unwrap()
            .iter()
            .position(|w| w.as_array().unwrap().iter().any(|i| i == node))
            .expect("planned")
    };
    let (app, op) = (stacks.app_ns.as_str(), stacks.op_ns.as_str());
    assert!(wave_in_graph(&[], "Gizmo", app, "g0") < wave_in_graph(&[], "Deployment", op, "controller"));
    assert_eq!(
        wave_in_graph(&["--no-infer"], "Gizmo", app, "g0"),
        wave_in_graph(&["--no-infer"], "Deployment", op, "controller")
    );

    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/usage",
        "kustomization/operator",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let finalized = operator.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(finalized, CRS, "the live operator finalized every custom resource");
    let lines = json_lines(&pruned.stdout);

    // Planned: custom resources before the controller; the webhook before its Service and the
    // workload behind it.
    for i in 0..CRS {
        assert!(planned_wave(&lines, "Gizmo", &format!("g{i}")) < planned_wave(&lines, "Deployment", "controller"));
    }
    let webhook_wave = planned_wave(&lines, "ValidatingWebhookConfiguration", &stacks.webhook);
    assert!(webhook_wave < planned_wave(&lines, "Service", "webhook"));
    assert!(webhook_wave < planned_wave(&lines, "Deployment", "controller"));
    let plan = lines.iter().find(|l| l["type"] == "plan").unwrap();
    let why_g0 = plan["waves"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w.as_array().unwrap())
        .find(|t| t["id"]["name"] == "g0")
        .unwrap()["why"]
        .clone();
    assert!(why_g0.as_str().unwrap().contains("(inferred: finalizer)"), "{why_g0}");

    // Observed: every custom resource gone before the controller was deleted; the webhook
    // configuration gone before its Service was deleted.
    let controller_deleted = event_at(&lines, "Deployment", "controller", "deleted");
    for i in 0..CRS {
        assert!(event_at(&lines, "Gizmo", &format!("g{i}"), "gone") < controller_deleted);
    }
    assert!(
        event_at(&lines, "ValidatingWebhookConfiguration", &stacks.webhook, "gone")
            < event_at(&lines, "Service", "webhook", "deleted")
    );
    assert!(!exists("validatingwebhookconfiguration", None, &stacks.webhook));
    assert!(!exists("crd", None, &format!("gizmos.{}", stacks.group)));
}

#[test]
fn a_teardown_drops_an_apiservice_before_the_service_that_serves_it() {
    let _discovery = DISCOVERY.write().unwrap_or_else(|e| e.into_inner());
    let _logs = start();
    ensure_flux_crds();
    let flux_ns = Namespace::new("infer-api");
    let f = flux_ns.0.clone();
    let run = unique("infer-api");
    let (api_ns, group) = (format!("{run}-api"), format!("{run}.example.com"));
    let apiservice = format!("v1alpha1.{group}");
    let metrics = flux_labels("metrics", &f);
    apply(&format!(
        r#"{}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {api_ns}, labels: {metrics}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api-server, namespace: {api_ns}, labels: {metrics}}}
spec:
  selector: {{matchLabels: {{app: api}}}}
  template: {{metadata: {{labels: {{app: api}}}}, spec: {{containers: [{{name: api, image: example/api}}]}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: {api_ns}, labels: {metrics}}}
spec: {{selector: {{app: api}}, ports: [{{port: 443, targetPort: 6443}}]}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {apiservice}, labels: {metrics}}}
spec:
  group: {group}
  version: v1alpha1
  service: {{namespace: {api_ns}, name: api}}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 1000
  versionPriority: 15
"#,
        kustomizations(&f, &["metrics"])
    ));
    // No server answers the aggregated API here: its group cannot be listed, which prune only
    // accepts with --skip-unlisted.
    record_flux_inventories(&f);
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/metrics",
        "--yes",
        "--skip-unlisted",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    let lines = json_lines(&pruned.stdout);
    let api_wave = planned_wave(&lines, "APIService", &apiservice);
    assert!(api_wave < planned_wave(&lines, "Service", "api"));
    assert!(api_wave < planned_wave(&lines, "Deployment", "api-server"));
    assert!(event_at(&lines, "APIService", &apiservice, "gone") < event_at(&lines, "Service", "api", "deleted"));
    assert!(!exists("apiservice", None, &apiservice));
}

#[test]
fn a_teardown_releases_volumes_while_their_csi_driver_runs() {
    let _discovery = DISCOVERY.read().unwrap_or_else(|e| e.into_inner());
    let _logs = start();
    ensure_flux_crds();
    let flux_ns = Namespace::new("infer-csi");
    let f = flux_ns.0.clone();
    let run = unique("infer-csi");
    let (csi_ns, data_ns) = (format!("{run}-csi"), format!("{run}-data"));
    let driver = format!("{run}.csi.example.com");
    let class = format!("{run}-fast");
    let (storage, data) = (flux_labels("storage", &f), flux_labels("data", &f));
    let mut yaml = format!(
        r#"{}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {csi_ns}, labels: {storage}}}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {{name: {driver}, labels: {storage}}}
spec: {{attachRequired: false}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {class}, labels: {storage}}}
provisioner: {driver}
reclaimPolicy: Retain
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: csi-controller, namespace: {csi_ns}, labels: {storage}}}
spec:
  selector: {{matchLabels: {{app: csi}}}}
  template: {{metadata: {{labels: {{app: csi}}}}, spec: {{containers: [{{name: csi, image: example/csi}}]}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {data_ns}, labels: {data}}}
"#,
        kustomizations(&f, &["storage", "data"])
    );
    let volumes = 2;
    for i in 0..volumes {
        // As the external-provisioner leaves them: annotated with the driver, bound, and held by
        // its finalizer until the driver has deleted the volume.
        yaml.push_str(&format!(
            r#"---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {run}-pv{i}
  labels: {data}
  annotations: {{pv.kubernetes.io/provisioned-by: {driver}}}
  finalizers: [external-provisioner.volume.kubernetes.io/finalizer]
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: {class}
  csi: {{driver: {driver}, volumeHandle: vol-{i}}}
  claimRef: {{namespace: {data_ns}, name: claim{i}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: claim{i}, namespace: {data_ns}, labels: {data}}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {class}
  volumeName: {run}-pv{i}
  resources: {{requests: {{storage: 1Gi}}}}
"#
        ));
    }
    apply(&yaml);
    // kube-controller-manager's protection controllers do not run on the test cluster: stand in
    // for them (no Pod uses these volumes).
    let pvc_protection = StandIn::start(
        "persistentvolumeclaims",
        Some(&data_ns),
        "claim",
        "kubernetes.io/pvc-protection",
        || true,
    );
    let pv_protection = StandIn::start("persistentvolumes", None, &run, "kubernetes.io/pv-protection", || true);
    let driver_ns = csi_ns.clone();
    let csi = StandIn::start(
        "persistentvolumes",
        None,
        &run,
        "external-provisioner.volume.kubernetes.io/finalizer",
        move || exists("deployment", Some(&driver_ns), "csi-controller"),
    );
    record_flux_inventories(&f);
    let pruned = stack(&[
        "prune",
        "-n",
        &f,
        "kustomization/data",
        "kustomization/storage",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    let released = csi.stop();
    pvc_protection.stop();
    pv_protection.stop();
    assert_eq!(pruned.code, 0, "stdout:\n{}\nstderr:\n{}", pruned.stdout, pruned.stderr);
    assert_eq!(released, volumes, "the live driver released every volume");
    let lines = json_lines(&pruned.stdout);
    for i in 0..volumes {
        let claim = planned_wave(&lines, "PersistentVolumeClaim", &format!("claim{i}"));
        let volume = planned_wave(&lines, "PersistentVolume", &format!("{run}-pv{i}"));
        assert!(claim < volume);
        for (kind, name) in [
            ("Deployment", "csi-controller"),
            ("CSIDriver", driver.as_str()),
            ("StorageClass", class.as_str()),
        ] {
            assert!(volume < planned_wave(&lines, kind, name), "{kind}/{name}");
        }
        assert!(
            event_at(&lines, "PersistentVolume", &format!("{run}-pv{i}"), "gone")
                < event_at(&lines, "Deployment", "csi-controller", "deleted")
        );
    }
    assert!(!exists("csidriver", None, &driver));
}
