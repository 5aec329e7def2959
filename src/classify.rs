//! Classify: which tracked objects are orphans (tracked, no longer desired), and which are
//! kept out of that on purpose (made by a controller, already being deleted, keep-marked).

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;

use crate::collect::Listed;
use crate::desired::{DesiredSet, Origin};
use crate::trackers::keep_marker;

/// Flux v1 stack checksum label.
pub const FLUX_V1_STACK_CHECKSUM: &str = "flux.weave.works/stack-checksum";
/// Flux v1 later per-object checksum annotation.
pub const FLUX_V1_SYNC_CHECKSUM: &str = "fluxcd.io/sync-checksum";

/// What counts as desired.
#[derive(Debug, Clone)]
pub enum Desired {
    /// Identities from manifests or an inventory.
    Set(DesiredSet),
    /// Flux v1: objects whose stack checksum is this value (anything else is stale).
    Checksum(String),
    /// kubectl ApplySet: only members of these (group, kind)s are in the parent's inventory.
    GroupKinds {
        /// `(group, kind)` pairs the parent lists.
        kinds: HashSet<(String, String)>,
        /// The parent, for messages.
        parent: String,
    },
}

/// Why an object is an orphan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum OrphanReason {
    /// Not among the manifests.
    NotInDesiredSet,
    /// Flux v1: its checksum is not the current one.
    StaleChecksum {
        /// The checksum it carries.
        found: String,
    },
    /// Not in the tool's inventory any more.
    GoneFromInventory {
        /// The inventory.
        inventory: String,
    },
}

impl fmt::Display for OrphanReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrphanReason::NotInDesiredSet => write!(f, "not in desired set"),
            OrphanReason::StaleChecksum { found } => write!(f, "stale checksum ({found})"),
            OrphanReason::GoneFromInventory { inventory } => write!(f, "gone from inventory ({inventory})"),
        }
    }
}

/// Why a tracked, undesired object is nevertheless not an orphan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum SkipReason {
    /// A controller made it (it inherited the stack's labels); its owner decides its fate.
    ControllerOwned {
        /// `Kind/name` of the controller.
        owner: String,
    },
    /// Already being deleted (listed apart).
    Terminating,
    /// A tool's keep marker says never to prune it.
    Keep {
        /// The marker, `key=value`.
        marker: String,
    },
    /// Flux v1 checksum mode: it carries no checksum, so staleness cannot be proven.
    NoChecksum,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::ControllerOwned { owner } => write!(f, "controlled by {owner}"),
            SkipReason::Terminating => write!(f, "already being deleted"),
            SkipReason::Keep { marker } => write!(f, "keep marker {marker}"),
            SkipReason::NoChecksum => write!(f, "no checksum to compare"),
        }
    }
}

/// The verdict on one tracked object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Still desired.
    Desired,
    /// Tracked and no longer desired.
    Orphan(OrphanReason),
    /// Not desired, but not to be pruned.
    Skipped(SkipReason),
}

/// One tracked object and its verdict.
#[derive(Debug, Clone)]
pub struct Classified {
    /// The object.
    pub object: Listed,
    /// The verdict.
    pub verdict: Verdict,
}

/// Classifies every tracked object against what is desired.
pub fn classify(tracked: &[Listed], desired: &Desired) -> Vec<Classified> {
    tracked
        .iter()
        .map(|object| Classified {
            object: object.clone(),
            verdict: verdict(object, desired),
        })
        .collect()
}

fn verdict(object: &Listed, desired: &Desired) -> Verdict {
    let reason = match undesired_reason(object, desired) {
        Ok(None) => return Verdict::Desired,
        Ok(Some(reason)) => reason,
        Err(skip) => return Verdict::Skipped(skip),
    };
    if object.is_terminating() {
        return Verdict::Skipped(SkipReason::Terminating);
    }
    if let Some(owner) = object.controller_owner() {
        return Verdict::Skipped(SkipReason::ControllerOwned {
            owner: format!("{}/{}", owner.kind, owner.name),
        });
    }
    if let Some(marker) = keep_marker(&object.meta) {
        return Verdict::Skipped(SkipReason::Keep { marker });
    }
    Verdict::Orphan(reason)
}

/// `Ok(None)` when desired, `Ok(Some(reason))` when not, `Err` when it cannot be told.
fn undesired_reason(object: &Listed, desired: &Desired) -> Result<Option<OrphanReason>, SkipReason> {
    match desired {
        Desired::Set(set) => {
            if set.ids.contains(&object.id()) {
                return Ok(None);
            }
            Ok(Some(match &set.origin {
                Origin::Manifests => OrphanReason::NotInDesiredSet,
                Origin::Inventory(inventory) => OrphanReason::GoneFromInventory {
                    inventory: inventory.clone(),
                },
            }))
        }
        Desired::Checksum(current) => match checksum(object) {
            None => Err(SkipReason::NoChecksum),
            Some(found) if found == current => Ok(None),
            Some(found) => Ok(Some(OrphanReason::StaleChecksum {
                found: found.to_string(),
            })),
        },
        Desired::GroupKinds { kinds, parent } => {
            if kinds.contains(&(object.kind.group.clone(), object.kind.kind.clone())) {
                Ok(None)
            } else {
                Ok(Some(OrphanReason::GoneFromInventory {
                    inventory: parent.clone(),
                }))
            }
        }
    }
}

/// The Flux v1 checksum an object carries (label, or the later annotation).
pub fn checksum(object: &Listed) -> Option<&str> {
    let label = object.meta.labels.as_ref().and_then(|l| l.get(FLUX_V1_STACK_CHECKSUM));
    let annotation = object
        .meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(FLUX_V1_SYNC_CHECKSUM));
    label.or(annotation).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::KindInfo;
    use crate::identity::ObjectId;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use kube::core::ObjectMeta;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn kind(group: &str, kind: &str, namespaced: bool) -> Arc<KindInfo> {
        Arc::new(KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            singular: kind.to_lowercase(),
            short_names: vec![],
            namespaced,
            verbs: vec!["list".into(), "delete".into()],
        })
    }

    fn object(name: &str) -> Listed {
        Listed::new(
            kind("", "ConfigMap", true),
            ObjectMeta {
                name: Some(name.into()),
                namespace: Some("web".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
        )
    }

    fn desired(names: &[&str]) -> Desired {
        Desired::Set(DesiredSet::from_ids(
            names.iter().map(|n| ObjectId::new("", "ConfigMap", Some("web"), n)),
            Origin::Manifests,
        ))
    }

    #[test]
    fn undesired_objects_are_orphans_and_desired_ones_are_not() {
        let verdicts = classify(&[object("keep-me"), object("old")], &desired(&["keep-me"]));
        assert_eq!(verdicts[0].verdict, Verdict::Desired);
        assert_eq!(verdicts[1].verdict, Verdict::Orphan(OrphanReason::NotInDesiredSet));
    }

    #[test]
    fn controller_children_terminating_and_kept_objects_are_never_orphans() {
        let mut child = object("child");
        child.meta.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-123".into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        let mut terminating = object("going");
        terminating.meta.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        let mut kept = object("kept");
        kept.meta.annotations = Some(BTreeMap::from([(
            "helm.sh/resource-policy".to_string(),
            "keep".to_string(),
        )]));
        let verdicts = classify(&[child, terminating, kept], &desired(&[]));
        assert_eq!(
            verdicts[0].verdict,
            Verdict::Skipped(SkipReason::ControllerOwned {
                owner: "ReplicaSet/web-123".into()
            })
        );
        assert_eq!(verdicts[1].verdict, Verdict::Skipped(SkipReason::Terminating));
        assert!(matches!(verdicts[2].verdict, Verdict::Skipped(SkipReason::Keep { .. })));
    }

    #[test]
    fn identity_includes_the_group() {
        // A ConfigMap kind in another group is another object; the same group is the desired one.
        let same = object("same");
        let other_group = Listed::new(kind("other.example.com", "ConfigMap", true), object("same").meta);
        let verdicts = classify(&[same, other_group], &desired(&["same"]));
        assert_eq!(verdicts[0].verdict, Verdict::Desired);
        assert_eq!(verdicts[1].verdict, Verdict::Orphan(OrphanReason::NotInDesiredSet));
        // And the other way round: desired in a group, listed in core.
        let in_group = Desired::Set(DesiredSet::from_ids(
            [ObjectId::new("other.example.com", "ConfigMap", Some("web"), "same")],
            Origin::Manifests,
        ));
        let verdicts = classify(&[object("same")], &in_group);
        assert_eq!(verdicts[0].verdict, Verdict::Orphan(OrphanReason::NotInDesiredSet));
    }

    #[test]
    fn identity_includes_group_kind_and_namespace() {
        // Same name, other namespace or other kind: not the desired object.
        let mut elsewhere = object("same");
        elsewhere.meta.namespace = Some("other".into());
        let secret = Listed::new(kind("", "Secret", true), object("same").meta);
        let verdicts = classify(&[elsewhere, secret, object("same")], &desired(&["same"]));
        assert!(verdicts[..2].iter().all(|v| matches!(v.verdict, Verdict::Orphan(_))));
        assert_eq!(verdicts[2].verdict, Verdict::Desired, "the control: same identity");
    }

    #[test]
    fn flux_v1_checksum_mode() {
        let labelled = |name: &str, sum: Option<&str>| {
            let mut o = object(name);
            if let Some(sum) = sum {
                o.meta.labels = Some(BTreeMap::from([(FLUX_V1_STACK_CHECKSUM.to_string(), sum.to_string())]));
            }
            o
        };
        let verdicts = classify(
            &[
                labelled("a", Some("new")),
                labelled("b", Some("old")),
                labelled("c", None),
            ],
            &Desired::Checksum("new".into()),
        );
        assert_eq!(verdicts[0].verdict, Verdict::Desired);
        assert_eq!(
            verdicts[1].verdict,
            Verdict::Orphan(OrphanReason::StaleChecksum { found: "old".into() })
        );
        assert_eq!(verdicts[2].verdict, Verdict::Skipped(SkipReason::NoChecksum));
    }

    #[test]
    fn inventory_origin_names_the_inventory() {
        let set = DesiredSet::from_ids([], Origin::Inventory("Kustomization flux-system/apps".into()));
        let verdicts = classify(&[object("x")], &Desired::Set(set));
        assert_eq!(
            verdicts[0].verdict.clone(),
            Verdict::Orphan(OrphanReason::GoneFromInventory {
                inventory: "Kustomization flux-system/apps".into()
            })
        );
    }
}
