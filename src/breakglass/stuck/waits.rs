//! What the finalizers Kubernetes itself sets wait for, judged from what was read
//! ([`super::evidence`]): the garbage collector's (`foregroundDeletion`, `orphan`), the CRD
//! cleanup, PVC and PV protection, and a Pod that waits for its kubelet.

use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;

use super::evidence::{CrdCleanup, PodEvidence, PvProtection, Read};
use super::Finding;
use crate::cluster::collect::{Collection, Listed};
use crate::cluster::discovery::{Catalog, KindInfo};
use crate::error::LookupError;
use crate::render;

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

/// The objects among `among` that name `owner` in their ownerReferences, and (in words) the
/// kinds that could not be listed.
fn dependents(owner: &Listed, among: &Collection) -> (Vec<Listed>, String) {
    let uid = owner.uid();
    let found = among
        .objects
        .iter()
        .filter(|o| o.meta.owner_references.iter().flatten().any(|r| r.uid == uid))
        .cloned()
        .collect();
    let unknown = if among.failures.is_empty() {
        String::new()
    } else {
        format!(
            " ({} kind(s) could not be listed, so there may be more: {})",
            among.failures.len(),
            kind_names(among.failures.iter().map(|f| &f.kind))
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
pub(super) fn foreground(object: &Listed, among: &Collection) -> Finding {
    let (found, unknown) = dependents(object, among);
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
pub(super) fn orphan(object: &Listed, among: &Collection) -> Finding {
    let (found, unknown) = dependents(object, among);
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
pub(super) fn kind_of_crd(catalog: &Catalog, crd: &DynamicObject) -> Option<Arc<KindInfo>> {
    let spec = crd.data.get("spec")?;
    let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let group = text("/group")?;
    let kind = text("/names/kind")?;
    if let Some(found) = catalog.get(&group, &kind) {
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
pub(super) fn crd_cleanup(evidence: &CrdCleanup) -> Finding {
    const FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
    let (crd, kind, listed) = match evidence {
        CrdCleanup::Unreadable(why) => {
            return Finding::about(
                FINALIZER,
                format!("{FINALIZER}: the CRD could not be read ({why}), so its instances are not known"),
            )
        }
        CrdCleanup::NoKind => return Finding::about(FINALIZER, format!("{FINALIZER}: the CRD's spec names no kind")),
        CrdCleanup::Listed { crd, kind, instances } => (crd, kind, instances),
    };
    let condition = terminating_condition(crd);
    if let Some(failure) = listed.failures.first() {
        return Finding::about(
            FINALIZER,
            format!(
                "{FINALIZER}: its {} instances could not be listed ({:?}){condition}",
                kind.kind, failure.failure
            ),
        );
    }
    let instances = &listed.objects;
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
            describe_objects(instances, false)
        ),
        instances.clone(),
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

pub(super) fn pod_node(pod: &DynamicObject) -> &str {
    pod.data
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `kubernetes.io/pvc-protection`: kube-controller-manager removes it when no scheduled Pod
/// names the claim (`pkg/controller/volume/pvcprotection`: a Pod counts once it has a node,
/// whatever its phase).
pub(super) fn pvc_protection(
    object: &Listed,
    pods: &Result<Arc<Vec<DynamicObject>>, LookupError>,
    pod_kind: Option<&Arc<KindInfo>>,
) -> Finding {
    const FINALIZER: &str = "kubernetes.io/pvc-protection";
    let namespace = object.namespace().unwrap_or_default().to_string();
    let pods = match pods {
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
    let Some(pod_kind) = pod_kind else {
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

/// The namespace and name of the claim a volume is bound to: `None` unless it is `Bound` and
/// its `claimRef` names one.
pub(super) fn bound_claim(volume: &DynamicObject) -> Option<(String, String)> {
    if volume_phase(volume) != "Bound" {
        return None;
    }
    Some((claim_ref(volume, "namespace")?, claim_ref(volume, "name")?))
}

fn volume_phase(volume: &DynamicObject) -> &str {
    volume
        .data
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
}

fn claim_ref(volume: &DynamicObject, key: &str) -> Option<String> {
    volume
        .data
        .pointer(&format!("/spec/claimRef/{key}"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// `kubernetes.io/pv-protection`: kube-controller-manager removes it once the volume is no
/// longer `Bound` (`pkg/controller/volume/pvprotection`).
pub(super) fn pv_protection(evidence: &PvProtection) -> Finding {
    const FINALIZER: &str = "kubernetes.io/pv-protection";
    let volume = match &evidence.volume {
        Ok(volume) => volume,
        Err(why) => return Finding::about(FINALIZER, format!("{FINALIZER}: the volume could not be read ({why})")),
    };
    let phase = volume_phase(volume);
    if phase != "Bound" {
        return Finding::about(
            FINALIZER,
            format!(
                "{FINALIZER}: the volume is not Bound (phase {phase}); kube-controller-manager's pv-protection \
                 controller removes this finalizer: is it running?"
            ),
        );
    }
    let Some((namespace, name)) = bound_claim(volume) else {
        return Finding::about(
            FINALIZER,
            format!("{FINALIZER}: the volume is Bound but names no claim; the PV controller should release it"),
        );
    };
    let expected_uid = claim_ref(volume, "uid");
    let state = match &evidence.claim {
        Some(Read::NotServed) => {
            return Finding::about(
                FINALIZER,
                format!("{FINALIZER}: the server does not serve PersistentVolumeClaims"),
            )
        }
        Some(Read::Found(claim)) if expected_uid.is_none() || claim.meta.uid == expected_uid => {
            return Finding::waiting(
                FINALIZER,
                format!(
                    "{FINALIZER}: the volume is Bound to claim {}",
                    describe_object(claim, false)
                ),
                vec![claim.clone()],
            );
        }
        Some(Read::Found(_)) => "was re-created (another UID)".to_string(),
        Some(Read::Gone) => "is gone".to_string(),
        Some(Read::Failed(why)) => format!("could not be checked ({why})"),
        None => "could not be checked (it was not read)".to_string(),
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
pub(super) fn pod_without_finalizers(object: &Listed, evidence: &PodEvidence) -> Vec<Finding> {
    let node = pod_node(&evidence.pod).to_string();
    let Some(read) = evidence.node.as_ref().filter(|_| !node.is_empty()) else {
        return Vec::new();
    };
    let command = format!(
        "kubectl delete pod {} -n {} --grace-period=0 --force",
        object.name(),
        object.namespace().unwrap_or_default()
    );
    let node_state = match read {
        Read::NotServed => "unknown".to_string(),
        Read::Gone => "missing".to_string(),
        Read::Failed(why) => format!("unknown ({why})"),
        Read::Found(found) => node_ready(found),
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
    use serde_json::json;

    use super::super::evidence::test_support::{kind, listed, object};
    use super::*;
    use crate::cluster::collect::{KindFailure, ListFailure};

    fn owner() -> Listed {
        let kinds = kind("demo.example", "Widget", "widgets", true);
        listed(
            &kinds,
            json!({"name": "owner", "namespace": "ns", "uid": "u-owner",
                   "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["foregroundDeletion"]}),
        )
    }

    fn dependent(name: &str, block: bool) -> Listed {
        let kinds = kind("", "ConfigMap", "configmaps", true);
        listed(
            &kinds,
            json!({"name": name, "namespace": "ns", "uid": format!("u-{name}"), "ownerReferences": [
                {"apiVersion": "demo.example/v1", "kind": "Widget", "name": "owner", "uid": "u-owner",
                 "blockOwnerDeletion": block}]}),
        )
    }

    fn among(objects: Vec<Listed>) -> Collection {
        Collection {
            objects,
            ..Default::default()
        }
    }

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

    #[test]
    fn foreground_waits_only_for_blocking_dependents() {
        let unrelated = listed(
            &kind("", "ConfigMap", "configmaps", true),
            json!({"name": "x", "uid": "u-x"}),
        );
        let found = foreground(
            &owner(),
            &among(vec![dependent("a", true), dependent("b", false), unrelated]),
        );
        assert_eq!(found.finalizer.as_deref(), Some("foregroundDeletion"));
        assert_eq!(found.waits_for.len(), 1, "{}", found.text);
        assert!(
            found
                .text
                .starts_with("foregroundDeletion: waits for 1 dependent with blockOwnerDeletion: ConfigMap/ns/a"),
            "{}",
            found.text
        );
        let none = foreground(&owner(), &among(vec![dependent("b", false)]));
        assert!(none.waits_for.is_empty());
        assert!(
            none.text
                .contains("no dependent with blockOwnerDeletion is left; the garbage collector"),
            "{}",
            none.text
        );
    }

    #[test]
    fn unlisted_kinds_leave_dependents_unknown() {
        let mut listed = among(Vec::new());
        listed.failures.push(KindFailure {
            kind: kind("demo.example", "Gadget", "gadgets", true),
            failure: ListFailure::Forbidden,
        });
        let found = orphan(&owner(), &listed);
        assert!(
            found
                .text
                .contains("(1 kind(s) could not be listed, so there may be more: Gadget.demo.example)"),
            "{}",
            found.text
        );
    }

    #[test]
    fn orphan_waits_for_every_dependent() {
        let found = orphan(&owner(), &among(vec![dependent("a", false), dependent("b", true)]));
        assert_eq!(found.waits_for.len(), 2);
        assert!(
            found
                .text
                .starts_with("orphan: the garbage collector still has to remove this owner from 2 dependents"),
            "{}",
            found.text
        );
        let none = orphan(&owner(), &among(Vec::new()));
        assert!(
            none.text.starts_with("orphan: no dependent refers to it any more;"),
            "{}",
            none.text
        );
    }

    fn crd(conditions: serde_json::Value) -> DynamicObject {
        object(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.demo.example", "uid": "u-crd"},
            "spec": {"group": "demo.example", "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                     "versions": [{"name": "v1alpha1", "storage": false}, {"name": "v2", "storage": true}]},
            "status": {"conditions": conditions},
        }))
    }

    #[test]
    fn a_crd_undiscovered_gives_its_kind_from_its_spec() {
        let catalog = Catalog::new(vec![], vec![], crate::cluster::discovery::DiscoverySource::PerGroup);
        let found = kind_of_crd(&catalog, &crd(json!([]))).unwrap();
        assert_eq!(
            (found.kind.as_str(), found.version.as_str(), found.namespaced),
            ("Widget", "v2", true)
        );
        let served = kind("demo.example", "Widget", "widgets", true);
        let catalog = Catalog::new(
            vec![(*served).clone()],
            vec![],
            crate::cluster::discovery::DiscoverySource::PerGroup,
        );
        assert_eq!(kind_of_crd(&catalog, &crd(json!([]))).unwrap().version, "v1");
        assert!(kind_of_crd(
            &catalog,
            &object(json!({"apiVersion": "v1", "kind": "X", "metadata": {}, "spec": {}}))
        )
        .is_none());
    }

    #[test]
    fn crd_cleanup_waits_for_the_instances() {
        let widgets = kind("demo.example", "Widget", "widgets", true);
        let instance = listed(
            &widgets,
            json!({"name": "w", "namespace": "ns", "uid": "u-w", "deletionTimestamp": "2024-01-01T00:00:00Z",
                   "finalizers": ["demo.example/cleanup"]}),
        );
        let waiting = crd_cleanup(&CrdCleanup::Listed {
            crd: Box::new(crd(json!([]))),
            kind: Arc::clone(&widgets),
            instances: among(vec![instance]),
        });
        assert_eq!(waiting.waits_for.len(), 1);
        assert_eq!(
            waiting.text,
            "customresourcecleanup.apiextensions.k8s.io: waits for 1 Widget still being deleted: ns/w (finalizer demo.example/cleanup)"
        );
        let stuck =
            json!([{"type": "Terminating", "status": "True", "reason": "InstanceDeletionFailed", "message": "boom"}]);
        let empty = crd_cleanup(&CrdCleanup::Listed {
            crd: Box::new(crd(stuck)),
            kind: widgets,
            instances: among(Vec::new()),
        });
        assert_eq!(
            empty.text,
            "customresourcecleanup.apiextensions.k8s.io: no Widget is left; the API server removes this finalizer \
             (condition Terminating: InstanceDeletionFailed: boom)"
        );
        let unread = crd_cleanup(&CrdCleanup::Unreadable(LookupError::Forbidden));
        assert!(
            unread.text.contains("the CRD could not be read (forbidden)"),
            "{}",
            unread.text
        );
        assert!(crd_cleanup(&CrdCleanup::NoKind)
            .text
            .ends_with("the CRD's spec names no kind"));
    }

    fn pod(name: &str, node: Option<&str>, claim: &str) -> DynamicObject {
        object(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": "Running"},
        }))
    }

    fn claim(uid: &str) -> Listed {
        listed(
            &kind("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
            json!({"name": "data", "namespace": "ns", "uid": uid, "finalizers": ["kubernetes.io/pvc-protection"],
                   "deletionTimestamp": "2024-01-01T00:00:00Z"}),
        )
    }

    #[test]
    fn pvc_protection_waits_for_scheduled_pods_only() {
        let pods = kind("", "Pod", "pods", true);
        let listed_pods = Ok(Arc::new(vec![
            pod("runs", Some("n1"), "data"),
            pod("pending", None, "data"),
            pod("other", Some("n1"), "logs"),
        ]));
        let found = pvc_protection(&claim("u-c"), &listed_pods, Some(&pods));
        assert_eq!(found.waits_for.len(), 1);
        assert_eq!(
            found.text,
            "kubernetes.io/pvc-protection: waits for 1 Pod using the claim: ns/runs (Running on node n1) \
             (1 Pod not scheduled to a node also name it; they do not count)"
        );
        let idle = pvc_protection(
            &claim("u-c"),
            &Ok(Arc::new(vec![pod("pending", None, "data")])),
            Some(&pods),
        );
        assert!(idle.waits_for.is_empty());
        assert!(
            idle.text
                .starts_with("kubernetes.io/pvc-protection: no scheduled Pod uses the claim (1 Pod"),
            "{}",
            idle.text
        );
        let unlisted = pvc_protection(&claim("u-c"), &Err(LookupError::Forbidden), Some(&pods));
        assert!(
            unlisted.text.contains("the Pods of ns could not be listed (forbidden)"),
            "{}",
            unlisted.text
        );
    }

    fn volume(phase: &str, claim_ref: serde_json::Value) -> DynamicObject {
        object(json!({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
            "spec": {"claimRef": claim_ref}, "status": {"phase": phase},
        }))
    }

    #[test]
    fn pv_protection_follows_the_bound_claim() {
        let bound = volume("Bound", json!({"namespace": "ns", "name": "data", "uid": "u-c"}));
        assert_eq!(bound_claim(&bound), Some(("ns".to_string(), "data".to_string())));
        let judge = |volume: &DynamicObject, claim: Option<Read<Listed>>| {
            pv_protection(&PvProtection {
                volume: Ok(volume.clone()),
                claim,
            })
        };
        let waits = judge(&bound, Some(Read::Found(claim("u-c"))));
        assert_eq!(waits.waits_for.len(), 1);
        assert!(
            waits
                .text
                .starts_with("kubernetes.io/pv-protection: the volume is Bound to claim ns/data (finalizer"),
            "{}",
            waits.text
        );
        let recreated = judge(&bound, Some(Read::Found(claim("u-other"))));
        assert!(recreated.waits_for.is_empty());
        assert!(
            recreated
                .text
                .contains("claim ns/data, which was re-created (another UID)"),
            "{}",
            recreated.text
        );
        assert!(judge(&bound, Some(Read::Gone))
            .text
            .contains("which is gone: the PV controller"));
        assert!(judge(&bound, Some(Read::NotServed))
            .text
            .ends_with("does not serve PersistentVolumeClaims"));
        let released = volume("Released", json!({"namespace": "ns", "name": "data"}));
        assert_eq!(bound_claim(&released), None);
        assert!(judge(&released, None)
            .text
            .contains("the volume is not Bound (phase Released)"));
        let nameless = volume("Bound", json!({}));
        assert!(judge(&nameless, None).text.contains("Bound but names no claim"));
        let unread = pv_protection(&PvProtection {
            volume: Err(LookupError::Forbidden),
            claim: None,
        });
        assert_eq!(
            unread.text,
            "kubernetes.io/pv-protection: the volume could not be read (forbidden)"
        );
    }

    #[test]
    fn a_pod_without_finalizers_waits_for_its_kubelet() {
        let pods = kind("", "Pod", "pods", true);
        let stuck = listed(&pods, json!({"name": "runs", "namespace": "ns", "uid": "u-p"}));
        let never_scheduled = PodEvidence {
            pod: pod("runs", None, "data"),
            node: None,
        };
        assert!(pod_without_finalizers(&stuck, &never_scheduled).is_empty());
        let lost = PodEvidence {
            pod: pod("runs", Some("n1"), "data"),
            node: Some(Read::Gone),
        };
        let found = pod_without_finalizers(&stuck, &lost);
        assert_eq!(
            found[0].text,
            "waits for the kubelet of node n1, which does not exist: nothing will confirm that the Pod stopped; \
             kubectl delete pod runs -n ns --grace-period=0 --force removes it"
        );
        let ready = object(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                  "status": {"conditions": [{"type": "Ready", "status": "False"}]}}));
        let down = PodEvidence {
            pod: pod("runs", Some("n1"), "data"),
            node: Some(Read::Found(ready)),
        };
        assert!(pod_without_finalizers(&stuck, &down)[0]
            .text
            .contains("(node Ready=False)"));
    }
}
