//! Finalizers that a known controller removes (Flux, Argo CD, kapp-controller, a cloud
//! controller manager, CSI sidecars): which controller, and whether it runs, from what the
//! cluster says (its Deployment, StatefulSet or DaemonSet and their ready replicas).

use serde_json::Value;

use super::evidence::Workloads;
use super::Finding;

/// The controller that removes a finalizer, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Controller {
    /// The project, e.g. `Flux`.
    pub project: &'static str,
    /// The workload's usual name, e.g. `kustomize-controller`; a workload whose name is this or
    /// ends with `-` and this (a Helm release prefix) counts.
    pub workload: String,
    /// Whether matching is by a container name (CSI sidecars) instead of the workload's name.
    pub by_container: bool,
}

impl Controller {
    fn named(project: &'static str, workload: &str) -> Self {
        Self {
            project,
            workload: workload.to_string(),
            by_container: false,
        }
    }
}

/// Flux's finalizer (fluxcd/pkg `apis/meta`: `finalizers.fluxcd.io`), by the API group of the
/// object that carries it.
fn flux_controller(group: &str, kind: &str) -> &'static str {
    match group {
        "kustomize.toolkit.fluxcd.io" => "kustomize-controller",
        "helm.toolkit.fluxcd.io" => "helm-controller",
        "notification.toolkit.fluxcd.io" => "notification-controller",
        "image.toolkit.fluxcd.io" if kind == "ImageUpdateAutomation" => "image-automation-controller",
        "image.toolkit.fluxcd.io" => "image-reflector-controller",
        _ => "source-controller",
    }
}

/// The controller behind a well-known finalizer, whatever object carries it (for Flux, the
/// source-controller's name stands for any Flux controller).
pub(super) fn known(finalizer: &str) -> Option<Controller> {
    known_for(finalizer, "", "")
}

/// The controller behind a well-known finalizer on an object of this group and kind.
/// Sources: Flux `finalizers.fluxcd.io` (fluxcd/pkg apis/meta); Argo CD
/// `resources-finalizer.argocd.argoproj.io` and its `/foreground`, `/background` forms, and the
/// `pre-delete-`/`post-delete-finalizer.argocd.argoproj.io` hooks (argoproj/argo-cd
/// pkg/apis/application/v1alpha1); kapp-controller `finalizers.kapp-ctrl.k14s.io/delete`
/// (carvel-dev/kapp-controller pkg/app); Kubernetes' service controller
/// `service.kubernetes.io/load-balancer-cleanup` (in the cloud controller manager); CSI's
/// `external-provisioner.volume.kubernetes.io/finalizer` and `external-attacher/<driver>`.
pub(super) fn known_for(finalizer: &str, group: &str, kind: &str) -> Option<Controller> {
    let domain = finalizer.split('/').next().unwrap_or(finalizer);
    match domain {
        "finalizers.fluxcd.io" => Some(Controller::named("Flux", flux_controller(group, kind))),
        "resources-finalizer.argocd.argoproj.io"
        | "pre-delete-finalizer.argocd.argoproj.io"
        | "post-delete-finalizer.argocd.argoproj.io" => {
            let workload = if kind == "ApplicationSet" {
                "argocd-applicationset-controller"
            } else {
                "argocd-application-controller"
            };
            Some(Controller::named("Argo CD", workload))
        }
        "finalizers.kapp-ctrl.k14s.io" => Some(Controller::named("Carvel", "kapp-controller")),
        "service.kubernetes.io" if finalizer == "service.kubernetes.io/load-balancer-cleanup" => {
            Some(Controller::named("the cloud provider", "cloud-controller-manager"))
        }
        "external-provisioner.volume.kubernetes.io" => Some(Controller {
            project: "the CSI driver",
            workload: "csi-provisioner".into(),
            by_container: true,
        }),
        "external-attacher" => Some(Controller {
            project: "the CSI driver",
            workload: "csi-attacher".into(),
            by_container: true,
        }),
        _ => None,
    }
}

/// A Deployment, StatefulSet or DaemonSet: where, how many replicas, how many ready.
#[derive(Debug, Clone)]
pub(super) struct Workload {
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    kind: String,
    namespace: String,
    name: String,
    /// Wanted replicas (scheduled pods for a DaemonSet).
    desired: i64,
    ready: i64,
    /// Its containers' names.
    containers: Vec<String>,
    /// The GitOps marks on it (`flux:ns/name`, …).
    marks: Vec<String>,
}

impl Workload {
    pub(super) fn from(kind: &str, object: &kube::api::DynamicObject) -> Self {
        let number = |pointer: &str| object.data.pointer(pointer).and_then(Value::as_i64);
        let (desired, ready) = if kind == "DaemonSet" {
            (
                number("/status/desiredNumberScheduled").unwrap_or(0),
                number("/status/numberReady").unwrap_or(0),
            )
        } else {
            (
                number("/spec/replicas").unwrap_or(1),
                number("/status/readyReplicas").unwrap_or(0),
            )
        };
        let containers = object
            .data
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        Self {
            marks: crate::model::trackers::marks(&object.metadata)
                .iter()
                .map(ToString::to_string)
                .collect(),
            kind: kind.to_string(),
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
            desired,
            ready,
            containers,
        }
    }

    fn runs(&self, controller: &Controller) -> bool {
        if controller.by_container {
            self.containers.contains(&controller.workload)
        } else {
            self.name == controller.workload || self.name.ends_with(&format!("-{}", controller.workload))
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} {}/{} has {}/{} ready",
            self.kind, self.namespace, self.name, self.ready, self.desired
        )
    }
}

/// The finding for a finalizer a known controller removes: the controller, and whether it runs.
pub(super) fn explain(finalizer: &str, controller: &Controller, workloads: &Workloads) -> Finding {
    let who = if controller.by_container {
        format!("{}'s {} sidecar", controller.project, controller.workload)
    } else {
        format!("{}'s {}", controller.project, controller.workload)
    };
    let state = match workloads {
        Err(why) => format!("whether it runs could not be checked ({why})"),
        Ok(all) => running_state(all, controller),
    };
    Finding::about(finalizer, format!("finalizer {finalizer} is removed by {who}: {state}"))
}

/// Whether the workloads of the stack that also installed a CRD (its controller, most likely)
/// run, in words; `tracked` is the CRD's marks, comma-separated; `workloads` is `None` when
/// they were not listed (the CRD is untracked).
pub(super) fn stack_workloads(tracked: &str, workloads: Option<&Workloads>) -> String {
    const ASK: &str = "is that controller running?";
    if tracked.is_empty() {
        return ASK.to_string();
    }
    let Some(Ok(all)) = workloads else {
        return ASK.to_string();
    };
    let stack: Vec<&str> = tracked.split(',').collect();
    let beside: Vec<&Workload> = all
        .iter()
        .filter(|w| w.marks.iter().any(|m| stack.contains(&m.as_str())))
        .collect();
    if beside.is_empty() {
        return format!("{ASK} (no Deployment, StatefulSet or DaemonSet of that stack was found)");
    }
    let described: Vec<String> = beside.iter().map(|w| w.describe()).collect();
    if beside.iter().any(|w| w.ready > 0) {
        format!(
            "the stack's {} (it runs: its logs say why it does not finish)",
            described.join(", ")
        )
    } else {
        format!(
            "the stack's {}: its controller is not running, so nothing removes the finalizer",
            described.join(", ")
        )
    }
}

/// Whether the controller runs, in words.
fn running_state(all: &[Workload], controller: &Controller) -> String {
    let matching: Vec<&Workload> = all.iter().filter(|w| w.runs(controller)).collect();
    if matching.is_empty() {
        let what = if controller.by_container {
            format!(
                "no Deployment, StatefulSet or DaemonSet has a {} container",
                controller.workload
            )
        } else {
            format!("no Deployment, StatefulSet or DaemonSet named {}", controller.workload)
        };
        return format!(
            "{what} in any namespace: it is not installed here (or runs outside the cluster), so nothing removes the \
             finalizer"
        );
    }
    let described: Vec<String> = matching.iter().map(|w| w.describe()).collect();
    if matching.iter().any(|w| w.ready > 0) {
        format!(
            "it runs ({}): its logs say why it does not finish",
            described.join(", ")
        )
    } else {
        format!(
            "it is not running ({}): nothing removes the finalizer until it runs again",
            described.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(kind: &str, name: &str, ready: i64, containers: &[&str]) -> Workload {
        Workload {
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            desired: 1,
            ready,
            containers: containers.iter().map(|c| c.to_string()).collect(),
            marks: Vec::new(),
        }
    }

    #[test]
    fn finalizers_name_their_controllers() {
        let flux = known_for("finalizers.fluxcd.io", "helm.toolkit.fluxcd.io", "HelmRelease").unwrap();
        assert_eq!(flux.workload, "helm-controller");
        let argo = known_for(
            "resources-finalizer.argocd.argoproj.io/foreground",
            "argoproj.io",
            "Application",
        )
        .unwrap();
        assert_eq!(argo.workload, "argocd-application-controller");
        assert_eq!(
            known("finalizers.kapp-ctrl.k14s.io/delete").unwrap().workload,
            "kapp-controller"
        );
        assert!(known("external-attacher/ebs-csi-aws-com").unwrap().by_container);
        assert!(known("service.kubernetes.io/other").is_none());
        assert!(known("example.com/cleanup").is_none());
    }

    #[test]
    fn running_is_told_by_ready_replicas() {
        let flux = Controller::named("Flux", "kustomize-controller");
        let none = running_state(&[workload("Deployment", "other", 1, &[])], &flux);
        assert!(
            none.starts_with("no Deployment, StatefulSet or DaemonSet named kustomize-controller"),
            "{none}"
        );
        let down = running_state(&[workload("Deployment", "kustomize-controller", 0, &[])], &flux);
        assert!(
            down.starts_with("it is not running (Deployment ns/kustomize-controller has 0/1 ready)"),
            "{down}"
        );
        let prefixed = running_state(&[workload("Deployment", "flux-kustomize-controller", 1, &[])], &flux);
        assert!(prefixed.starts_with("it runs"), "{prefixed}");
        let csi = known("external-provisioner.volume.kubernetes.io/finalizer").unwrap();
        let sidecar = running_state(
            &[workload("StatefulSet", "ebs-csi-controller", 2, &["csi-provisioner"])],
            &csi,
        );
        assert!(sidecar.starts_with("it runs"), "{sidecar}");
    }

    #[test]
    fn a_known_controller_is_named_with_its_state() {
        let flux = Controller::named("Flux", "kustomize-controller");
        let unknown = explain(
            "finalizers.fluxcd.io",
            &flux,
            &Err(crate::error::LookupError::Forbidden),
        );
        assert_eq!(unknown.finalizer.as_deref(), Some("finalizers.fluxcd.io"));
        assert_eq!(
            unknown.text,
            "finalizer finalizers.fluxcd.io is removed by Flux's kustomize-controller: whether it runs could not be \
             checked (forbidden)"
        );
        let csi = known("external-attacher/ebs").unwrap();
        let found = explain("external-attacher/ebs", &csi, &Ok(std::sync::Arc::new(Vec::new())));
        assert!(
            found
                .text
                .contains("the CSI driver's csi-attacher sidecar: no Deployment"),
            "{}",
            found.text
        );
    }

    #[test]
    fn a_crds_stack_is_judged_by_its_workloads() {
        let mut down = workload("Deployment", "operator", 0, &[]);
        down.marks = vec!["flux:flux-system/operator".into()];
        let all = Ok(std::sync::Arc::new(vec![down, workload("Deployment", "other", 1, &[])]));
        assert_eq!(stack_workloads("", None), "is that controller running?");
        assert_eq!(
            stack_workloads("flux:flux-system/operator", Some(&all)),
            "the stack's Deployment ns/operator has 0/1 ready: its controller is not running, so nothing removes the \
             finalizer"
        );
        assert!(stack_workloads("flux:flux-system/elsewhere", Some(&all))
            .contains("no Deployment, StatefulSet or DaemonSet of that stack"));
        let unknown = Err(crate::error::LookupError::Forbidden);
        assert_eq!(
            stack_workloads("flux:flux-system/operator", Some(&unknown)),
            "is that controller running?"
        );
    }
}
