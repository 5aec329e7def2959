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

use crate::cluster::collect::api_for;
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::error::{is_not_found, root_cause, UserError};
use crate::model::identity::ObjectId;
use crate::model::trackers::FLUX_KINDS;
use crate::prune::execute::Target;
use crate::stack::parents::Parent;
use crate::stack::suspension::AT_GENERATION;
pub use crate::stack::suspension::{is_suspended, suspension_by_tool, FIELD_MANAGER, SUSPENDED_BY};

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
    /// The [`SUSPENDED_BY`] value of the suspension: the one this run wrote, or the earlier
    /// run's it took over. The suspension is the run's only while the object still carries it
    /// and kubectl-stack alone set `spec.suspend` ([`suspension_by_tool`]).
    #[serde(skip)]
    pub record: Option<String>,
    /// Someone else set `spec.suspend` since (or changed the annotation): the suspension is
    /// theirs now, never lifted by the run, and not reported as left by it.
    #[serde(skip)]
    pub given_up: bool,
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

/// The suspensions of one run.
#[derive(Debug, Clone, Default)]
pub struct Suspensions {
    /// Every object prune suspended, in the order it did.
    pub entries: Vec<Suspended>,
}

impl Suspensions {
    /// What is still suspended by prune (not lifted), except `gone` objects.
    pub fn left(&self, gone: &dyn Fn(&ObjectId) -> bool) -> Vec<&Suspended> {
        self.entries
            .iter()
            .filter(|s| !s.lifted && !s.given_up && !gone(&s.id))
            .collect()
    }

    /// Whether this run suspended `id` (or took over an earlier run's suspension of it) and has
    /// neither lifted nor given it up. Whether the object *still* proves it is the run's is
    /// [`Suspensions::holds_now`].
    pub fn holds(&self, id: &ObjectId) -> bool {
        self.held(id).is_some()
    }

    /// The suspension of `id` this run holds ([`Suspensions::holds`]).
    pub fn held(&self, id: &ObjectId) -> Option<&Suspended> {
        self.entries.iter().find(|s| s.id == *id && !s.lifted && !s.given_up)
    }

    /// Whether the object as read now (`meta`, `suspended`: its `spec.suspend`) still holds
    /// exactly this run's suspension: the run holds one, the object carries the run's own
    /// [`SUSPENDED_BY`] value, and kubectl-stack alone set `spec.suspend`
    /// ([`suspension_by_tool`]). Otherwise its `spec.suspend` is its user's: the stack's policy.
    pub fn holds_now(&self, id: &ObjectId, meta: &kube::core::ObjectMeta, suspended: bool) -> bool {
        self.held(id).is_some_and(|entry| {
            entry.record.is_some() && entry.record.as_deref() == suspension_by_tool(meta, suspended)
        })
    }

    /// Lifts the suspension of `target` if prune set it and the object still proves it is the
    /// run's ([`Suspensions::holds_now`]), with the object's resourceVersion as a precondition
    /// (a write since the read is read again). An error says why it could not: when the
    /// suspension is no longer the run's, the run gives it up (never lifts it, nor reports it as
    /// its own), and the object is left suspended.
    pub async fn lift(&mut self, client: &Client, target: &Target) -> Result<(), LiftError> {
        let Some(index) = self
            .entries
            .iter()
            .position(|s| s.id == target.id && !s.lifted && !s.given_up)
        else {
            return Ok(());
        };
        let api = api_for(client, &self.entries[index].kind, target.id.namespace.as_deref());
        for _ in 0..3 {
            let current = match with_retries("get", || api.get_opt(&target.id.name)).await {
                Ok(Some(object)) => object,
                Ok(None) => return Ok(()),
                Err(err) => return Err(LiftError::Unread(root_cause(&err))),
            };
            if !self.holds_now(&target.id, &current.metadata, is_suspended(&current.data)) {
                self.entries[index].given_up = true;
                tracing::warn!(
                    "{} was suspended by someone else since this run suspended it: that suspension is kept, and the run does not lift it",
                    target.id
                );
                return Err(LiftError::NotOurs);
            }
            let entry = &self.entries[index];
            match set_suspend(
                client,
                &entry.kind,
                &entry.id,
                false,
                current.metadata.resource_version.clone(),
            )
            .await
            {
                Ok(_) => {
                    self.entries[index].lifted = true;
                    tracing::info!("lifted the suspension of {} before deleting it", target.id);
                    return Ok(());
                }
                Err(SetError::Conflict) => continue,
                Err(SetError::Failed(why)) => return Err(LiftError::Failed(why)),
            }
        }
        Err(LiftError::KeptChanging)
    }
}

/// Why a suspension the run set could not be lifted.
#[derive(Debug, thiserror::Error)]
pub enum LiftError {
    /// The object could not be read.
    #[error("{0}")]
    Unread(String),
    /// Someone else suspended it since: the suspension is theirs now.
    #[error("its spec.suspend was set by someone else since this run suspended it ({SUSPENDED_BY} or spec.suspend's writer changed), so it is not this run's to lift")]
    NotOurs,
    /// The PATCH that lifts it failed.
    #[error("{0}")]
    Failed(String),
    /// Every try met a newer resourceVersion.
    #[error("it kept changing while its suspension was being lifted")]
    KeptChanging,
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
        if is_suspended(&current.data) {
            match suspension_by_tool(&current.metadata, true) {
                Some(run) => {
                    // An earlier run of this tool suspended it and stopped, and nobody set
                    // spec.suspend since: it is this run's to lift before the delete, as if it
                    // had suspended it itself.
                    tracing::warn!("{} is still suspended by an earlier kubectl-stack run ({run}): this run lifts it before deleting it", target.id);
                    done.entries.push(Suspended {
                        id: target.id.clone(),
                        kind: target.kind.clone(),
                        lifted: false,
                        record: Some(run.to_string()),
                        given_up: false,
                    });
                }
                None => tracing::warn!(
                    "{} was already suspended, not provably by kubectl-stack (a {SUSPENDED_BY} annotation alone is no proof): its user's suspension is kept, and its controller will not clean up after it when it is deleted",
                    target.id
                ),
            }
            continue;
        }
        let record = match set_suspend(client, &target.kind, &target.id, true, None).await {
            Ok(record) => record,
            Err(why) => {
                let why = why.to_string();
                return Err((done, UserError::failed(format!("cannot suspend {}: {why}", target.id))));
            }
        };
        tracing::info!(
            "suspended {} (to keep it suspended after this run, remove its {SUSPENDED_BY} annotation)",
            target.id
        );
        done.entries.push(Suspended {
            id: target.id.clone(),
            kind: target.kind.clone(),
            lifted: false,
            record,
            given_up: false,
        });
    }
    Ok(done)
}

/// Suspends the parents that would re-create what the teardown deletes (see
/// [`crate::stack::parents`]), those not suspended already. They are never lifted by prune: the run
/// reports them at its end with the command that resumes each.
pub async fn suspend_parents(client: &Client, parents: &[Parent]) -> Result<Suspensions, (Suspensions, UserError)> {
    let mut done = Suspensions::default();
    for parent in parents.iter().filter(|p| p.suspendable() && p.suspended != Some(true)) {
        let record = match set_suspend(client, &parent.kind, &parent.id, true, None).await {
            Ok(record) => record,
            Err(why) => {
                let error = UserError::failed(format!("cannot suspend the parent {}: {why}", parent.id));
                return Err((done, error));
            }
        };
        tracing::info!("suspended the parent {}", parent.id);
        done.entries.push(Suspended {
            id: parent.id.clone(),
            kind: parent.kind.clone(),
            lifted: false,
            record,
            given_up: false,
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

/// Why a suspend or lift PATCH did not land.
#[derive(Debug, thiserror::Error)]
enum SetError {
    /// The object changed since the resourceVersion given as a precondition.
    #[error("the object changed since it was read")]
    Conflict,
    /// Any other failure, as the server said it.
    #[error("{0}")]
    Failed(String),
}

/// Suspends (or lifts the suspension of) a Flux object, with its record, as [`FIELD_MANAGER`];
/// `resource_version`: only if the object is still at it (a suspension always reads the object
/// first and sends its resourceVersion, so that the generation it records is exact). Returns the
/// [`SUSPENDED_BY`] value written (none when lifting, or when the object is gone).
async fn set_suspend(
    client: &Client,
    kind: &KindInfo,
    id: &ObjectId,
    suspend: bool,
    resource_version: Option<String>,
) -> Result<Option<String>, SetError> {
    let api = api_for(client, kind, id.namespace.as_deref());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    for _ in 0..3 {
        let (version, record) = if suspend {
            let current = match with_retries("get", || api.get_opt(&id.name)).await {
                Ok(Some(object)) => object,
                Ok(None) => return Ok(None),
                Err(err) => return Err(SetError::Failed(root_cause(&err))),
            };
            // Changing spec.suspend increments the generation the PATCH is made against.
            let generation = current.metadata.generation.unwrap_or_default() + 1;
            let record = format!(
                "prune, pid {}, {}{AT_GENERATION}{generation}",
                std::process::id(),
                now_rfc3339()
            );
            (current.metadata.resource_version, Some(record))
        } else {
            (resource_version.clone(), None)
        };
        // The suspension and its record on the object go in one PATCH: never one without the other.
        let mut metadata = json!({"annotations": {SUSPENDED_BY: record}});
        if let Some(version) = version {
            metadata["resourceVersion"] = json!(version);
        }
        let patch = Patch::Merge(json!({
            "spec": {"suspend": suspend},
            "metadata": metadata,
        }));
        match with_retries("suspend", || api.patch(&id.name, &params, &patch)).await {
            Ok(_) => return Ok(record),
            Err(err) if is_not_found(&err) => return Ok(None),
            Err(kube::Error::Api(status)) if status.code == 409 && suspend => continue,
            Err(kube::Error::Api(status)) if status.code == 409 => return Err(SetError::Conflict),
            Err(err) => return Err(SetError::Failed(root_cause(&err))),
        }
    }
    Err(SetError::Failed(format!(
        "{id} kept changing while it was being suspended"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::suspension::recorded_generation;

    fn stack_meta(record: Option<&str>, generation: i64, suspend_owners: &[&str]) -> kube::core::ObjectMeta {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        kube::core::ObjectMeta {
            generation: Some(generation),
            annotations: record.map(|r| [(SUSPENDED_BY.to_string(), r.to_string())].into()),
            managed_fields: Some(
                suspend_owners
                    .iter()
                    .map(|manager| ManagedFieldsEntry {
                        manager: Some(manager.to_string()),
                        fields_v1: Some(FieldsV1(json!({"f:spec": {"f:suspend": {}}}))),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// A suspension is kubectl-stack's only while the object is still at the generation its
    /// annotation records and, where managed fields are tracked, kubectl-stack alone owns
    /// `spec.suspend`: a stale annotation, a spec write since, or another writer of
    /// `spec.suspend` make it its user's.
    #[test]
    fn a_suspension_is_the_tools_only_while_the_object_proves_it() {
        let ours = "prune, pid 7, 2026-01-01T00:00:00Z, generation 4";
        assert_eq!(recorded_generation(ours), Some(4));
        assert_eq!(recorded_generation("prune, pid 1, 2026-01-01T00:00:00Z"), None);
        let proven = stack_meta(Some(ours), 4, &[FIELD_MANAGER]);
        assert_eq!(suspension_by_tool(&proven, true), Some(ours));
        assert_eq!(suspension_by_tool(&proven, false), None, "not suspended");
        // No managed fields tracked (an API server without them): the generation decides.
        assert_eq!(suspension_by_tool(&stack_meta(Some(ours), 4, &[]), true), Some(ours));
        // A spec write since (flux resume, then flux suspend): another generation.
        assert_eq!(
            suspension_by_tool(&stack_meta(Some(ours), 6, &[FIELD_MANAGER]), true),
            None
        );
        // Someone else also set spec.suspend (a server-side apply of `suspend: true`).
        assert_eq!(
            suspension_by_tool(&stack_meta(Some(ours), 4, &[FIELD_MANAGER, "ops"]), true),
            None
        );
        assert_eq!(suspension_by_tool(&stack_meta(Some(ours), 4, &["flux"]), true), None);
        // An annotation without a generation (a stale one, or an older run's) proves nothing.
        let stale = stack_meta(Some("prune, pid 1, 2026-01-01T00:00:00Z"), 4, &[FIELD_MANAGER]);
        assert_eq!(suspension_by_tool(&stale, true), None);
        assert_eq!(suspension_by_tool(&stack_meta(None, 4, &[FIELD_MANAGER]), true), None);

        // The run holds it now only with its own value on the object.
        let kind = Arc::new(crate::cluster::fixtures::kind(
            "kustomize.toolkit.fluxcd.io",
            "Kustomization",
            true,
        ));
        let id = ObjectId::new("kustomize.toolkit.fluxcd.io", "Kustomization", Some("f"), "s");
        let mut suspensions = Suspensions {
            entries: vec![Suspended {
                id: id.clone(),
                kind,
                lifted: false,
                record: Some(ours.to_string()),
                given_up: false,
            }],
        };
        assert!(suspensions.holds_now(&id, &proven, true));
        let another_run = stack_meta(
            Some("prune, pid 9, 2026-01-02T00:00:00Z, generation 4"),
            4,
            &[FIELD_MANAGER],
        );
        assert!(!suspensions.holds_now(&id, &another_run, true));
        assert!(!suspensions.holds_now(&id, &stack_meta(None, 4, &[FIELD_MANAGER]), true));
        suspensions.entries[0].given_up = true;
        assert!(!suspensions.holds(&id));
        assert!(!suspensions.holds_now(&id, &proven, true));
        // One it never recorded (the object was gone when it suspended) proves nothing.
        suspensions.entries[0].given_up = false;
        suspensions.entries[0].record = None;
        assert!(!suspensions.holds_now(&id, &stack_meta(None, 4, &[]), true));
    }

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
            record: None,
            given_up: false,
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
