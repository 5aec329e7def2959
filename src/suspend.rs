//! Flux suspensions around a teardown.
//!
//! A running kustomize-controller or helm-controller re-applies what prune deletes, so the Flux
//! Kustomizations and HelmReleases of a plan are suspended before the first wave. But a
//! suspended object is not cleaned up by its controller when it is deleted: kustomize-controller
//! skips garbage collection (fluxcd/kustomize-controller
//! `internal/controller/kustomization_controller.go`, `finalizerShouldDeleteResources`:
//! `if obj.Spec.Suspend { return false }`), and helm-controller skips `helm uninstall`, leaving
//! the release and its storage Secret behind (fluxcd/helm-controller
//! `internal/controller/helmrelease_controller.go`, `reconcileDelete`: "Only uninstall the release
//! ... if the resource is not suspended"). So the suspension prune set is lifted again just before that object's
//! own DELETE, when every member prune knows of is already gone: the controller's finalizer then
//! does its full cleanup. A tracking object with a member that stays (kept by a safeguard, or
//! dropped by the re-check) is deleted still suspended instead, so that its controller's cleanup
//! does not delete that member. Whatever stays suspended when a run stops is reported with the
//! command that resumes it.

use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::Client;
use serde::Serialize;
use serde_json::json;

use crate::collect::api_for;
use crate::discovery::KindInfo;
use crate::error::{is_not_found, root_cause, UserError};
use crate::execute::Target;
use crate::identity::ObjectId;
use crate::parents::Parent;
use crate::retry::with_retries;
use crate::trackers::FLUX_KINDS;

/// One Flux object prune suspended.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Suspended {
    /// The object.
    pub id: ObjectId,
    /// Its kind.
    #[serde(skip)]
    pub kind: Arc<KindInfo>,
    /// Whether prune lifted the suspension again (just before deleting it).
    pub lifted: bool,
}

impl Suspended {
    /// The command that resumes it (and removes the record of this tool's suspension).
    pub fn resume_command(&self) -> String {
        format!(
            "kubectl -n {} patch {}/{} --type merge -p '{{\"spec\":{{\"suspend\":false}},\"metadata\":{{\"annotations\":{{\"{SUSPENDED_BY}\":null}}}}}}'",
            self.id.namespace.as_deref().unwrap_or("default"),
            self.kind.crd_name(),
            self.id.name
        )
    }
}

/// The annotation a suspension by kubectl-stack is recorded in, on the suspended object itself,
/// in the same PATCH that suspends it: a run that stops before it lifts a suspension (Ctrl-C,
/// SIGTERM, `kill -9`, a lost connection) leaves it findable. A later run lifts it as its own
/// before deleting the object, and `kubectl get kustomizations,helmreleases -A -o
/// jsonpath='{range .items[?(@.metadata.annotations.kubectl-stack/suspended-by)]}...'` lists
/// them (README).
pub const SUSPENDED_BY: &str = "kubectl-stack/suspended-by";

/// The suspensions of one run.
#[derive(Debug, Clone, Default)]
pub struct Suspensions {
    /// Every object prune suspended, in the order it did.
    pub entries: Vec<Suspended>,
}

impl Suspensions {
    /// What is still suspended by prune (not lifted), except `gone` objects.
    pub fn left(&self, gone: &dyn Fn(&ObjectId) -> bool) -> Vec<&Suspended> {
        self.entries.iter().filter(|s| !s.lifted && !gone(&s.id)).collect()
    }

    /// Whether this run suspended `id` (or took over an earlier run's suspension of it) and has
    /// not lifted it: its `spec.suspend` is the run's own, not the stack's policy.
    pub fn holds(&self, id: &ObjectId) -> bool {
        self.entries.iter().any(|s| s.id == *id && !s.lifted)
    }

    /// Lifts the suspension of `target` if prune set it. An error says why it could not.
    pub async fn lift(&mut self, client: &Client, target: &Target) -> Result<(), String> {
        let Some(entry) = self.entries.iter_mut().find(|s| s.id == target.id && !s.lifted) else {
            return Ok(());
        };
        match set_suspend(client, &entry.kind, &entry.id, false).await {
            Ok(()) => {
                entry.lifted = true;
                tracing::info!("lifted the suspension of {} before deleting it", entry.id);
                Ok(())
            }
            Err(err) => Err(err),
        }
    }
}

/// Whether a target is a Flux object that can be suspended.
pub fn is_flux(target: &Target) -> bool {
    FLUX_KINDS.contains(&(target.kind.group.as_str(), target.kind.kind.as_str()))
}

/// Suspends the Flux objects among `targets` that are not suspended already and not being
/// deleted. On an error, the suspensions made so far are returned with it, to be reported.
pub async fn suspend_all(client: &Client, targets: &[&Target]) -> Result<Suspensions, (Suspensions, UserError)> {
    let mut done = Suspensions::default();
    for target in targets.iter().filter(|t| is_flux(t) && !t.terminating) {
        let api = api_for(client, &target.kind, target.id.namespace.as_deref());
        let current = match with_retries("get", || api.get_opt(&target.id.name)).await {
            Ok(Some(object)) => object,
            Ok(None) => continue,
            Err(err) => {
                let error = UserError::failed(format!("cannot read {}: {}", target.id, root_cause(&err)));
                return Err((done, error));
            }
        };
        if current
            .data
            .pointer("/spec/suspend")
            .and_then(serde_json::Value::as_bool)
            == Some(true)
        {
            let ours = current.metadata.annotations.as_ref().and_then(|a| a.get(SUSPENDED_BY));
            match ours {
                Some(run) => {
                    // An earlier run of this tool suspended it and stopped: it is this run's
                    // to lift before the delete, as if it had suspended it itself.
                    tracing::warn!("{} is still suspended by an earlier kubectl-stack run ({run}): this run lifts it before deleting it", target.id);
                    done.entries.push(Suspended {
                        id: target.id.clone(),
                        kind: target.kind.clone(),
                        lifted: false,
                    });
                }
                None => tracing::warn!(
                    "{} was already suspended (not by kubectl-stack): its controller will not clean up after it when it is deleted",
                    target.id
                ),
            }
            continue;
        }
        if let Err(why) = set_suspend(client, &target.kind, &target.id, true).await {
            return Err((done, UserError::failed(format!("cannot suspend {}: {why}", target.id))));
        }
        tracing::info!("suspended {}", target.id);
        done.entries.push(Suspended {
            id: target.id.clone(),
            kind: target.kind.clone(),
            lifted: false,
        });
    }
    Ok(done)
}

/// Suspends the parents that would re-create what the teardown deletes (see
/// [`crate::parents`]), those not suspended already. They are never lifted by prune: the run
/// reports them at its end with the command that resumes each.
pub async fn suspend_parents(client: &Client, parents: &[Parent]) -> Result<Suspensions, (Suspensions, UserError)> {
    let mut done = Suspensions::default();
    for parent in parents.iter().filter(|p| p.suspendable() && p.suspended != Some(true)) {
        if let Err(why) = set_suspend(client, &parent.kind, &parent.id, true).await {
            let error = UserError::failed(format!("cannot suspend the parent {}: {why}", parent.id));
            return Err((done, error));
        }
        tracing::info!("suspended the parent {}", parent.id);
        done.entries.push(Suspended {
            id: parent.id.clone(),
            kind: parent.kind.clone(),
            lifted: false,
        });
    }
    Ok(done)
}

/// The time now, UTC, as RFC 3339 (seconds).
fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map_or_else(|_| String::new(), |t| t.to_string())
}

async fn set_suspend(client: &Client, kind: &KindInfo, id: &ObjectId, suspend: bool) -> Result<(), String> {
    let api = api_for(client, kind, id.namespace.as_deref());
    // The suspension and its record on the object go in one PATCH: never one without the other.
    let record = suspend.then(|| format!("prune, pid {}, {}", std::process::id(), now_rfc3339()));
    let patch = Patch::Merge(json!({
        "spec": {"suspend": suspend},
        "metadata": {"annotations": {SUSPENDED_BY: record}},
    }));
    let params = PatchParams::default();
    match with_retries("suspend", || api.patch(&id.name, &params, &patch)).await {
        Ok(_) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) => Err(root_cause(&err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_command_names_the_object_exactly() {
        let kind = Arc::new(KindInfo {
            group: "kustomize.toolkit.fluxcd.io".into(),
            version: "v1".into(),
            kind: "Kustomization".into(),
            plural: "kustomizations".into(),
            singular: "kustomization".into(),
            short_names: vec!["ks".into()],
            namespaced: true,
            verbs: vec![],
        });
        let entry = Suspended {
            id: ObjectId::new(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                Some("flux-system"),
                "apps",
            ),
            kind,
            lifted: false,
        };
        assert_eq!(
            entry.resume_command(),
            "kubectl -n flux-system patch kustomizations.kustomize.toolkit.fluxcd.io/apps --type merge -p '{\"spec\":{\"suspend\":false},\"metadata\":{\"annotations\":{\"kubectl-stack/suspended-by\":null}}}'"
        );
        let suspensions = Suspensions {
            entries: vec![entry.clone()],
        };
        assert_eq!(suspensions.left(&|_| false).len(), 1);
        assert!(suspensions.left(&|id| *id == entry.id).is_empty());
    }
}
