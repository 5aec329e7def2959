//! Volume cascades: a PersistentVolume with `persistentVolumeReclaimPolicy: Delete` is deleted,
//! with its data, by the PV controller once the claim bound to it is gone (kubernetes
//! `pkg/controller/volume/persistentvolume/pv_controller.go` `reclaimVolume`: a released volume
//! whose policy is `Delete` is deleted), as after `kubectl delete pvc`. So a planned claim takes
//! its bound volume, which no ownerReference says (order review 19, P).
//!
//! The volume a provisioner made for the claim (`pv.kubernetes.io/provisioned-by`) and nothing
//! else marks is the claim's to take. Any other counts as a victim, named and refused like a
//! Namespace's: a keep marker, the plan keeping it, the mark of a stack the plan does not tear
//! down ([`Counted`]), or a volume made by hand that no stack tracks.

use std::collections::HashMap;
use std::sync::Arc;

use kube::Client;
use serde_json::Value;

use super::owners::Counted;
use super::{why_it_counts, Cascade, Planned, Victim};
use crate::cluster::collect::{list_objects, Listed};
use crate::cluster::discovery::Catalog;
use crate::model::identity::ObjectId;
use crate::model::trackers::{is_tracked, keep_marker};
use crate::stack::keep::tracked_elsewhere;

/// The annotation a provisioner writes on a volume it made for a claim (kubernetes
/// `pkg/controller/volume/persistentvolume/util`, `AnnDynamicallyProvisioned`).
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

/// A PersistentVolume, as a claim's deletion judges it.
#[derive(Debug, Clone)]
pub struct BoundVolume {
    /// Its metadata.
    pub listed: Listed,
    /// The UID of the claim it is bound to (`spec.claimRef.uid`), if any.
    pub claim_uid: Option<String>,
    /// Whether the PV controller deletes it once that claim is gone (`Delete` policy).
    pub reclaimed: bool,
}

impl BoundVolume {
    /// Reads a volume's binding and reclaim policy from its whole body.
    pub fn new(listed: Listed, body: &Value) -> Self {
        let text = |pointer: &str| body.pointer(pointer).and_then(Value::as_str);
        Self {
            claim_uid: text("/spec/claimRef/uid")
                .filter(|uid| !uid.is_empty())
                .map(str::to_string),
            reclaimed: text("/spec/persistentVolumeReclaimPolicy") == Some("Delete"),
            listed,
        }
    }
}

/// Whether an object is a PersistentVolumeClaim.
pub fn is_claim(id: &ObjectId) -> bool {
    id.group.is_empty() && id.kind == "PersistentVolumeClaim"
}

/// Whether an object is a PersistentVolume.
pub fn is_volume(id: &ObjectId) -> bool {
    id.group.is_empty() && id.kind == "PersistentVolume"
}

/// The planned claims, each by UID with itself as what takes it (see [`volume_cascades`]).
pub fn planned_claims(planned: &HashMap<String, ObjectId>) -> HashMap<String, ObjectId> {
    planned
        .iter()
        .filter(|(_, id)| is_claim(id))
        .map(|(uid, id)| (uid.clone(), id.clone()))
        .collect()
}

/// The cluster's PersistentVolumes, when a claim dies (none otherwise). A listing that fails
/// is told: what the claims take is then unknown to this rule.
pub async fn bound_volumes(client: &Client, catalog: &Catalog, claims: &HashMap<String, ObjectId>) -> Vec<BoundVolume> {
    if claims.is_empty() {
        return Vec::new();
    }
    let Some(kind) = catalog.get("", "PersistentVolume") else {
        return Vec::new();
    };
    match list_objects(client, kind, None, None).await {
        Ok(volumes) => volumes
            .into_iter()
            .map(|volume| BoundVolume::new(Listed::new(Arc::clone(kind), volume.metadata), &volume.data))
            .collect(),
        Err(err) => {
            tracing::warn!("cannot list PersistentVolumes to find what the plan's claims reclaim: {err}");
            Vec::new()
        }
    }
}

/// The volumes the dying claims take and that count, each as a cascade of the planned object
/// whose deletion takes its claim (`claims`: each dying claim's UID with that object: a planned
/// claim itself, the planned Namespace that holds one, the planned owner of one).
pub fn volume_cascades(
    volumes: &[BoundVolume],
    planned: &Planned,
    claims: &HashMap<String, ObjectId>,
    counted: &Counted,
) -> Vec<Cascade> {
    let mut found: Vec<Cascade> = dying_volumes(volumes, planned, claims)
        .filter(|(volume, _)| counts(&volume.listed, counted))
        .map(|(_, cascade)| cascade)
        .collect();
    found.sort_by(|a, b| a.holder.cmp(&b.holder));
    found
}

/// Every volume the PV controller reclaims once its dying claim (`claims`, by UID, with the
/// planned object that takes it) is gone, counted as a victim or not, each as the cascade of
/// that planned object.
pub fn dying_volumes<'a>(
    volumes: &'a [BoundVolume],
    planned: &'a Planned,
    claims: &'a HashMap<String, ObjectId>,
) -> impl Iterator<Item = (&'a BoundVolume, Cascade)> + 'a {
    volumes
        .iter()
        .filter(|volume| volume.reclaimed && !volume.listed.is_terminating())
        .filter(|volume| !planned.uids.contains(volume.listed.uid()))
        .filter_map(|volume| {
            let holder = claims.get(volume.claim_uid.as_deref()?)?;
            let cascade = Cascade {
                holder: holder.clone(),
                victims: vec![Victim {
                    id: volume.listed.id(),
                    uid: volume.listed.uid().to_string(),
                    why: why_it_counts(&volume.listed),
                }],
                unlisted: Vec::new(),
            };
            Some((volume, cascade))
        })
}

/// Whether a reclaimed volume counts as a victim (see the module).
fn counts(volume: &Listed, counted: &Counted) -> bool {
    let provisioned = volume
        .meta
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(PROVISIONED_BY));
    keep_marker(&volume.meta).is_some()
        || counted.kept.contains(&volume.id())
        || tracked_elsewhere(&volume.meta, counted.torn_down).is_some()
        || (!provisioned && !is_tracked(&volume.meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::keep::TornDown;
    use kube::core::ObjectMeta;
    use std::collections::{BTreeMap, HashSet};

    fn volume(
        name: &str,
        claim: &str,
        policy: &str,
        annotations: &[(&str, &str)],
        labels: &[(&str, &str)],
    ) -> BoundVolume {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let listed = Listed::new(
            Arc::new(crate::cluster::fixtures::kind("", "PersistentVolume", false)),
            ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                annotations: Some(map(annotations)),
                labels: Some(map(labels)),
                ..Default::default()
            },
        );
        let body = serde_json::json!({"spec": {"claimRef": {"uid": claim}, "persistentVolumeReclaimPolicy": policy}});
        BoundVolume::new(listed, &body)
    }

    /// Order review 19, P: a planned claim takes the volume it is bound to when its policy is
    /// `Delete`. A volume a provisioner made for it goes with it; one another stack tracks, one
    /// with a keep marker, or one made by hand is its victim; a `Retain` volume stays.
    #[test]
    fn a_planned_claim_takes_its_reclaimed_volume_and_names_what_counts() {
        let claim = ObjectId::new("", "PersistentVolumeClaim", Some("app"), "data");
        let planned = Planned {
            uids: ["uid-claim".to_string()].into(),
            ids: [claim.clone()].into(),
            orphans: false,
        };
        let names: HashMap<String, ObjectId> = [("uid-claim".to_string(), claim.clone())].into();
        let provisioned = [(PROVISIONED_BY, "csi.example.com")];
        let volumes = [
            volume("dynamic", "uid-claim", "Delete", &provisioned, &[]),
            volume(
                "kept",
                "uid-claim",
                "Delete",
                &[("helm.sh/resource-policy", "keep")],
                &[],
            ),
            volume(
                "theirs",
                "uid-claim",
                "Delete",
                &provisioned,
                &[
                    ("kustomize.toolkit.fluxcd.io/name", "storage"),
                    ("kustomize.toolkit.fluxcd.io/namespace", "flux-system"),
                ],
            ),
            volume("by-hand", "uid-claim", "Delete", &[], &[]),
            volume("retained", "uid-claim", "Retain", &[], &[]),
            volume("elsewhere", "uid-other", "Delete", &[], &[]),
        ];
        let torn_down = TornDown::default();
        let kept = HashSet::new();
        let counted = Counted {
            torn_down: &torn_down,
            kept: &kept,
        };
        let found = volume_cascades(&volumes, &planned, &planned_claims(&names), &counted);
        let mut victims: Vec<String> = found
            .iter()
            .inspect(|cascade| assert_eq!(cascade.holder, claim))
            .flat_map(|cascade| cascade.victims.iter().map(|v| v.id.name.clone()))
            .collect();
        victims.sort();
        assert_eq!(victims, ["by-hand", "kept", "theirs"]);
        assert!(volume_cascades(&volumes, &Planned::default(), &HashMap::new(), &counted).is_empty());
        // A claim that dies with a planned Namespace: its volume is that Namespace's victim.
        let namespace = ObjectId::new("", "Namespace", None, "app");
        let in_namespace: HashMap<String, ObjectId> = [("uid-claim".to_string(), namespace.clone())].into();
        let found = volume_cascades(&volumes, &Planned::default(), &in_namespace, &counted);
        assert!(!found.is_empty() && found.iter().all(|cascade| cascade.holder == namespace));
    }
}
