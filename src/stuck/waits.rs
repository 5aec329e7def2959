//! What the finalizers Kubernetes itself sets wait for, read from the cluster: the garbage
//! collector's (`foregroundDeletion`, `orphan`), the CRD cleanup, PVC and PV protection, and a
//! Pod that waits for its kubelet.

use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;

use super::{DiagnosisContext, Finding};
use crate::collect::{api_for, Collection, ListScope, Listed};
use crate::discovery::KindInfo;
use crate::error::{is_not_found, root_cause, LookupError};
use crate::render;
use crate::retry::with_retries;
use crate::session::Session;

/// How many objects a finding names before it says "and N more".
const NAMED: usize = 5;

/// `Kind.group, …`, at most a few.
pub(super) fn kind_names<'a>(kinds: impl Iterator<Item = &'a Arc<KindInfo>>) -> String {
    let names: Vec<String> = kinds.map(|k| k.kind_with_group()).collect();
    capped(names)
}

fn capped(mut items: Vec<String>) -> String {
    let more = items.len().saturating_sub(NAMED);
    items.truncate(NAMED);
    let mut text = items.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// One object and its deletion state: `ConfigMap/ns/b (being deleted 12s; finalizers: x)`.
pub(super) fn describe_object(object: &Listed, with_kind: bool) -> String {
    let name = if with_kind {
        object.id().to_string()
    } else {
        match object.namespace() {
            Some(namespace) => format!("{namespace}/{}", object.name()),
            None => object.name().to_string(),
        }
    };
    let finalizers = object.finalizers();
    let state = match (object.is_terminating(), finalizers.len()) {
        (true, 0) => format!("being deleted {}", render::age(object.meta.deletion_timestamp.as_ref())),
        (true, 1) => format!("finalizer {}", finalizers[0]),
        (true, _) => format!("finalizers {}", finalizers.join(", ")),
        (false, _) => "not being deleted yet".to_string(),
    };
    format!("{name} ({state})")
}

/// Several objects, at most a few named.
pub(super) fn describe_objects(objects: &[Listed], with_kind: bool) -> String {
    capped(objects.iter().map(|o| describe_object(o, with_kind)).collect())
}

fn plural(count: usize, one: &str, many: &str) -> String {
    if count == 1 {
        format!("1 {one}")
    } else {
        format!("{count} {many}")
    }
}

/// The findings for a finalizer Kubernetes itself sets; `None` for any other finalizer.
pub(super) async fn builtin(
    session: &Session,
    context: &mut DiagnosisContext,
    object: &Listed,
    finalizer: &str,
) -> Option<Vec<Finding>> {
    let found = match finalizer {
        "foregroundDeletion" => foreground(session, context, object).await,
        "orphan" => orphan(session, context, object).await,
        "customresourcecleanup.apiextensions.k8s.io" => crd_cleanup(session, context, object).await,
        "kubernetes.io/pvc-protection" => pvc_protection(session, context, object).await,
        "kubernetes.io/pv-protection" => pv_protection(session, object).await,
        _ => return None,
    };
    Some(vec![found])
}

/// Objects that name `owner` in their ownerReferences, and the kinds that could not be listed.
async fn dependents(session: &Session, context: &mut DiagnosisContext, owner: &Listed) -> (Vec<Listed>, String) {
    let uid = owner.uid().to_string();
    let collection: Arc<Collection> = match owner.namespace() {
        // Owner references never cross namespaces: a namespaced owner's dependents are beside it.
        Some(namespace) => context.namespace_content(session, namespace).await,
        None => match context.cluster_dependents.get(&uid) {
            Some(found) => Arc::clone(found),
            None => {
                let kinds: Vec<_> = session.catalog.listable().cloned().collect();
                let refers = |meta: &kube::core::ObjectMeta| {
                    meta.owner_references
                        .iter()
                        .flatten()
                        .any(|reference| reference.uid == uid)
                };
                let found = crate::collect::collect_where(
                    &session.connection.client,
                    &kinds,
                    &ListScope::AllNamespaces,
                    refers,
                    Default::default(),
                )
                .await;
                let found = Arc::new(found);
                context.cluster_dependents.insert(uid.clone(), Arc::clone(&found));
                found
            }
        },
    };
    let found = collection
        .objects
        .iter()
        .filter(|o| o.meta.owner_references.iter().flatten().any(|r| r.uid == uid))
        .cloned()
        .collect();
    let unknown = if collection.failures.is_empty() {
        String::new()
    } else {
        format!(
            " ({} kind(s) could not be listed, so there may be more: {})",
            collection.failures.len(),
            kind_names(collection.failures.iter().map(|f| &f.kind))
        )
    };
    (found, unknown)
}

fn blocks_owner(dependent: &Listed, owner_uid: &str) -> bool {
    dependent
        .meta
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == owner_uid && r.block_owner_deletion == Some(true))
}

/// `foregroundDeletion`: the garbage collector deletes the dependents and removes this
/// finalizer once none that has `blockOwnerDeletion` is left.
async fn foreground(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Finding {
    let (found, unknown) = dependents(session, context, object).await;
    let blocking: Vec<Listed> = found.into_iter().filter(|d| blocks_owner(d, object.uid())).collect();
    if blocking.is_empty() {
        return Finding::about(
            "foregroundDeletion",
            format!(
                "foregroundDeletion: no dependent with blockOwnerDeletion is left{unknown}; the garbage collector \
                 (kube-controller-manager) removes this finalizer: is it running?"
            ),
        );
    }
    Finding::waiting(
        "foregroundDeletion",
        format!(
            "foregroundDeletion: waits for {} with blockOwnerDeletion: {}{unknown}",
            plural(blocking.len(), "dependent", "dependents"),
            describe_objects(&blocking, true)
        ),
        blocking,
    )
}

/// `orphan`: the garbage collector removes this owner from every dependent's ownerReferences,
/// then the finalizer.
async fn orphan(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Finding {
    let (found, unknown) = dependents(session, context, object).await;
    if found.is_empty() {
        return Finding::about(
            "orphan",
            format!(
                "orphan: no dependent refers to it any more{unknown}; the garbage collector (kube-controller-manager) \
                 removes this finalizer: is it running?"
            ),
        );
    }
    Finding::waiting(
        "orphan",
        format!(
            "orphan: the garbage collector still has to remove this owner from {}: {}{unknown}; if it cannot update \
             them (their events say why, e.g. a dependent that no longer validates), remove the ownerReference \
             yourself; removing the finalizer instead lets the garbage collector delete them",
            plural(found.len(), "dependent", "dependents"),
            describe_objects(&found, true)
        ),
        found,
    )
}

/// The kind a CRD defines: as discovered, or (a terminating CRD may be gone from discovery)
/// from its own spec, at its storage version.
fn kind_of_crd(session: &Session, crd: &DynamicObject) -> Option<Arc<KindInfo>> {
    let spec = crd.data.get("spec")?;
    let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let group = text("/group")?;
    let kind = text("/names/kind")?;
    if let Some(found) = session.catalog.get(&group, &kind) {
        return Some(Arc::clone(found));
    }
    let versions = spec.get("versions").and_then(Value::as_array);
    let version = versions
        .and_then(|v| {
            v.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
        .or_else(|| text("/version"))?;
    Some(Arc::new(KindInfo {
        group,
        version,
        plural: text("/names/plural")?,
        singular: text("/names/singular").unwrap_or_default(),
        kind,
        short_names: Vec::new(),
        namespaced: text("/scope").as_deref() == Some("Namespaced"),
        verbs: vec!["list".into(), "get".into(), "delete".into(), "patch".into()],
    }))
}

/// `customresourcecleanup.apiextensions.k8s.io`: the API server deletes every instance of the
/// CRD's kind, and removes the finalizer when none is left.
async fn crd_cleanup(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Finding {
    const FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
    let crd = context
        .crds
        .iter()
        .find(|crd| crd.metadata.uid.as_deref() == Some(object.uid()))
        .cloned();
    let crd = match crd {
        Some(crd) => crd,
        None => {
            let api = api_for(&session.connection.client, &object.kind, None);
            match with_retries("get", || api.get(object.name())).await {
                Ok(crd) => crd,
                Err(err) => {
                    return Finding::about(
                        FINALIZER,
                        format!(
                            "{FINALIZER}: the CRD could not be read ({}), so its instances are not known",
                            root_cause(&err)
                        ),
                    )
                }
            }
        }
    };
    let Some(kind) = kind_of_crd(session, &crd) else {
        return Finding::about(FINALIZER, format!("{FINALIZER}: the CRD's spec names no kind"));
    };
    let listed = crate::collect::collect_kinds(
        &session.connection.client,
        std::slice::from_ref(&kind),
        &ListScope::AllNamespaces,
        &crate::trackers::Selection::everything(),
        Default::default(),
    )
    .await;
    let condition = terminating_condition(&crd);
    if let Some(failure) = listed.failures.first() {
        return Finding::about(
            FINALIZER,
            format!(
                "{FINALIZER}: its {} instances could not be listed ({:?}){condition}",
                kind.kind, failure.failure
            ),
        );
    }
    let instances = listed.objects;
    if instances.is_empty() {
        return Finding::about(
            FINALIZER,
            format!(
                "{FINALIZER}: no {} is left; the API server removes this finalizer{condition}",
                kind.kind
            ),
        );
    }
    let all_deleting = instances.iter().all(Listed::is_terminating);
    Finding::waiting(
        FINALIZER,
        format!(
            "{FINALIZER}: waits for {} {} still {}: {}",
            instances.len(),
            kind.kind,
            if all_deleting { "being deleted" } else { "there" },
            describe_objects(&instances, false)
        ),
        instances,
    )
}

/// The CRD's `Terminating` condition, when it says more than "in progress".
fn terminating_condition(crd: &DynamicObject) -> String {
    let conditions = crd
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Terminating"))
        .and_then(|c| {
            let reason = c.get("reason").and_then(Value::as_str).unwrap_or_default();
            let message = c.get("message").and_then(Value::as_str).unwrap_or_default();
            (reason != "InstanceDeletionInProgress" && !message.is_empty())
                .then(|| format!(" (condition Terminating: {reason}: {message})"))
        })
        .unwrap_or_default()
}

/// Pods of a namespace, whole, listed once.
async fn pods_in(
    session: &Session,
    context: &mut DiagnosisContext,
    namespace: &str,
) -> Result<Arc<Vec<DynamicObject>>, LookupError> {
    if let Some(found) = context.pods.get(namespace) {
        return found.clone();
    }
    let found = match session.catalog.get("", "Pod") {
        None => Err(LookupError::NotServed("Pods".into())),
        Some(kind) => crate::collect::list_objects(&session.connection.client, kind, Some(namespace), None)
            .await
            .map(Arc::new)
            .map_err(|err| LookupError::Failed(root_cause(&err))),
    };
    context.pods.insert(namespace.to_string(), found.clone());
    found
}

fn pod_claims(pod: &DynamicObject) -> impl Iterator<Item = &str> {
    pod.data
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|volume| {
            volume
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
        })
}

fn pod_node(pod: &DynamicObject) -> &str {
    pod.data
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `kubernetes.io/pvc-protection`: kube-controller-manager removes it when no scheduled Pod
/// names the claim (`pkg/controller/volume/pvcprotection`: a Pod counts once it has a node,
/// whatever its phase).
async fn pvc_protection(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Finding {
    const FINALIZER: &str = "kubernetes.io/pvc-protection";
    let namespace = object.namespace().unwrap_or_default().to_string();
    let pods = match pods_in(session, context, &namespace).await {
        Ok(pods) => pods,
        Err(why) => {
            return Finding::about(
                FINALIZER,
                format!(
                "{FINALIZER}: the Pods of {namespace} could not be listed ({why}): which use the claim is not known"
            ),
            )
        }
    };
    let Some(pod_kind) = session.catalog.get("", "Pod") else {
        return Finding::about(FINALIZER, format!("{FINALIZER}: the server does not serve Pods"));
    };
    let using: Vec<&DynamicObject> = pods
        .iter()
        .filter(|pod| pod_claims(pod).any(|claim| claim == object.name()))
        .collect();
    let (scheduled, unscheduled): (Vec<&DynamicObject>, Vec<&DynamicObject>) =
        using.into_iter().partition(|pod| !pod_node(pod).is_empty());
    let not_counted = if unscheduled.is_empty() {
        String::new()
    } else {
        format!(
            " ({} not scheduled to a node also name it; they do not count)",
            plural(unscheduled.len(), "Pod", "Pods")
        )
    };
    if scheduled.is_empty() {
        return Finding::about(
            FINALIZER,
            format!(
                "{FINALIZER}: no scheduled Pod uses the claim{not_counted}; kube-controller-manager's pvc-protection \
                 controller removes this finalizer: is it running?"
            ),
        );
    }
    let described: Vec<String> = scheduled
        .iter()
        .map(|pod| {
            let phase = pod
                .data
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("Pending");
            let deleting = if pod.metadata.deletion_timestamp.is_some() {
                ", being deleted"
            } else {
                ""
            };
            format!(
                "{}/{} ({phase} on node {}{deleting})",
                namespace,
                pod.metadata.name.as_deref().unwrap_or_default(),
                pod_node(pod)
            )
        })
        .collect();
    let waits_for = scheduled
        .iter()
        .map(|pod| Listed::new(Arc::clone(pod_kind), pod.metadata.clone()))
        .collect();
    Finding::waiting(
        FINALIZER,
        format!(
            "{FINALIZER}: waits for {} using the claim: {}{not_counted}",
            plural(scheduled.len(), "Pod", "Pods"),
            capped(described)
        ),
        waits_for,
    )
}

/// `kubernetes.io/pv-protection`: kube-controller-manager removes it once the volume is no
/// longer `Bound` (`pkg/controller/volume/pvprotection`).
async fn pv_protection(session: &Session, object: &Listed) -> Finding {
    const FINALIZER: &str = "kubernetes.io/pv-protection";
    let api = api_for(&session.connection.client, &object.kind, None);
    let volume = match with_retries("get", || api.get(object.name())).await {
        Ok(volume) => volume,
        Err(err) => {
            return Finding::about(
                FINALIZER,
                format!("{FINALIZER}: the volume could not be read ({})", root_cause(&err)),
            )
        }
    };
    let phase = volume
        .data
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let claim_text = |key: &str| {
        volume
            .data
            .pointer(&format!("/spec/claimRef/{key}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if phase != "Bound" {
        return Finding::about(
            FINALIZER,
            format!(
                "{FINALIZER}: the volume is not Bound (phase {phase}); kube-controller-manager's pv-protection \
                 controller removes this finalizer: is it running?"
            ),
        );
    }
    let (Some(namespace), Some(name)) = (claim_text("namespace"), claim_text("name")) else {
        return Finding::about(
            FINALIZER,
            format!("{FINALIZER}: the volume is Bound but names no claim; the PV controller should release it"),
        );
    };
    let Some(claims) = session.catalog.get("", "PersistentVolumeClaim") else {
        return Finding::about(
            FINALIZER,
            format!("{FINALIZER}: the server does not serve PersistentVolumeClaims"),
        );
    };
    let claims_api = api_for(&session.connection.client, claims, Some(&namespace));
    let expected_uid = claim_text("uid");
    let state = match with_retries("get", || claims_api.get_metadata(&name)).await {
        Ok(claim) if expected_uid.is_none() || claim.metadata.uid == expected_uid => {
            let claim = Listed::new(Arc::clone(claims), claim.metadata);
            return Finding::waiting(
                FINALIZER,
                format!(
                    "{FINALIZER}: the volume is Bound to claim {}",
                    describe_object(&claim, false)
                ),
                vec![claim],
            );
        }
        Ok(_) => "was re-created (another UID)".to_string(),
        Err(err) if is_not_found(&err) => "is gone".to_string(),
        Err(err) => format!("could not be checked ({})", root_cause(&err)),
    };
    Finding::about(
        FINALIZER,
        format!(
            "{FINALIZER}: the volume is still Bound to claim {namespace}/{name}, which {state}: the PV controller \
             (kube-controller-manager) should mark it Released: is it running?"
        ),
    )
}

/// A Pod being deleted with no finalizers: it waits for its kubelet to confirm that its
/// containers stopped (or for nothing, when it was never scheduled).
pub(super) async fn pod_without_finalizers(session: &Session, object: &Listed) -> Vec<Finding> {
    let api = api_for(&session.connection.client, &object.kind, object.namespace());
    let Ok(pod) = with_retries("get", || api.get(object.name())).await else {
        return Vec::new();
    };
    let node = pod_node(&pod).to_string();
    if node.is_empty() {
        return Vec::new();
    }
    let command = format!(
        "kubectl delete pod {} -n {} --grace-period=0 --force",
        object.name(),
        object.namespace().unwrap_or_default()
    );
    let node_state = match session.catalog.get("", "Node") {
        None => "unknown".to_string(),
        Some(nodes) => {
            let nodes_api = api_for(&session.connection.client, nodes, None);
            match with_retries("get", || nodes_api.get(&node)).await {
                Err(err) if is_not_found(&err) => "missing".to_string(),
                Err(err) => format!("unknown ({})", root_cause(&err)),
                Ok(found) => node_ready(&found),
            }
        }
    };
    let text = match node_state.as_str() {
        "missing" => format!(
            "waits for the kubelet of node {node}, which does not exist: nothing will confirm that the Pod stopped; \
             {command} removes it"
        ),
        _ => format!(
            "waits for the kubelet of node {node} (node {node_state}) to confirm that its containers stopped; if the \
             node is lost, {command} removes it"
        ),
    };
    vec![Finding::general(text)]
}

fn node_ready(node: &DynamicObject) -> String {
    let ready = node
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        .and_then(|c| c.get("status").and_then(Value::as_str));
    match ready {
        Some("True") => "Ready".into(),
        Some(other) => format!("Ready={other}"),
        None => "with no Ready condition".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_are_capped() {
        let items: Vec<String> = (1..=7).map(|i| i.to_string()).collect();
        assert_eq!(capped(items), "1, 2, 3, 4, 5 and 2 more");
        assert_eq!(plural(1, "Pod", "Pods"), "1 Pod");
        assert_eq!(plural(2, "Pod", "Pods"), "2 Pods");
    }

    #[test]
    fn pods_name_their_claims() {
        let pod: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
            "spec": {"nodeName": "n1", "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                                                   {"name": "b", "emptyDir": {}}]},
        }))
        .unwrap();
        assert_eq!(pod_claims(&pod).collect::<Vec<_>>(), vec!["data"]);
        assert_eq!(pod_node(&pod), "n1");
    }
}
