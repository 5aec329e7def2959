//! Classify: which tracked objects are orphans (tracked, no longer desired, and deletable by the
//! tracking tool's own rules), and which are kept out of that on purpose (owned or derived by a
//! controller, already being deleted, keep-marked, ambiguously marked, not in the tool's record,
//! or kept by the tool's rules in [`crate::stack::policy`]).

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;

use crate::cluster::collect::Listed;
use crate::model::identity::ObjectId;
use crate::model::trackers::{marks, Preset, Tracker};
use crate::stack::desired::DesiredSet;
use crate::stack::kapp_versions::LiveVersions;
use crate::stack::keep::{self, outside_record, ComparedStack, Context, KeepReason, Question};

/// What a tool recorded as applied last: only objects in it can be pruned by that tool.
#[derive(Debug, Clone)]
pub enum Recorded {
    /// Identities: Flux `status.inventory`, a cli-utils/kpt inventory, a Helm release manifest.
    Ids {
        /// The recorded identities.
        ids: HashSet<ObjectId>,
        /// The record, for messages (e.g. `Kustomization flux-system/apps`).
        inventory: String,
        /// Recorded objects the tool may not delete, each with why: a Flux Kustomization's
        /// `spec.serviceAccountName` that exists but may not delete them (kustomize-controller
        /// impersonates it; see [`crate::stack::members::Impersonation::Limited`]).
        denied: std::collections::BTreeMap<ObjectId, String>,
        /// The mark a recorded object must still carry to be deleted (Flux deletes only stale
        /// objects with its owner labels, cli-utils only those whose `owning-inventory` is this
        /// inventory); `None` where the tool checks none (Helm).
        owner: Option<Tracker>,
    },
    /// kubectl ApplySet: the parent lists group-kinds and namespaces; kubectl prunes members
    /// (`applyset.kubernetes.io/part-of`) of those kinds in those namespaces only
    /// (kubernetes/kubectl `pkg/cmd/apply/applyset_pruner.go` `FindAllObjectsToPrune`).
    ApplySet {
        /// `(group, kind)` pairs of `applyset.kubernetes.io/contains-group-kinds`.
        kinds: HashSet<(String, String)>,
        /// The parent's namespace and `applyset.kubernetes.io/additional-namespaces`.
        namespaces: HashSet<String>,
        /// The parent, for messages.
        inventory: String,
        /// The member label kubectl lists by (`applyset.kubernetes.io/part-of=<id>`).
        owner: Option<Tracker>,
    },
    /// A Flux Kustomization with no `status.inventory` it can read: kustomize-controller deletes
    /// nothing of it, on apply or on deletion (see [`crate::stack::inventory::flux_record`]).
    NoInventory {
        /// The stack, for messages (e.g. `Kustomization flux-system/apps`).
        stack: String,
        /// Why (no `status.inventory`, an unreadable entry).
        why: String,
    },
}

impl Recorded {
    /// Whether the record holds the object.
    pub fn holds(&self, object: &Listed) -> bool {
        match self {
            Recorded::Ids { ids, .. } => ids.contains(&object.id()),
            Recorded::ApplySet { kinds, namespaces, .. } => {
                let group = crate::model::identity::canonical_group(&object.kind.group, &object.kind.kind);
                kinds.contains(&(group.to_string(), object.kind.kind.clone()))
                    && object.namespace().is_none_or(|ns| namespaces.contains(ns))
            }
            Recorded::NoInventory { .. } => false,
        }
    }

    /// Whether the object still carries the mark the tool deletes by (always, where it checks none).
    pub fn still_marked(&self, object: &Listed) -> bool {
        let owner = match self {
            Recorded::Ids { owner, .. } | Recorded::ApplySet { owner, .. } => owner,
            Recorded::NoInventory { .. } => return true,
        };
        owner.as_ref().is_none_or(|tracker| tracker.matches(&object.meta))
    }

    /// The record's description.
    pub fn name(&self) -> &str {
        match self {
            Recorded::Ids { inventory, .. } | Recorded::ApplySet { inventory, .. } => inventory,
            Recorded::NoInventory { stack, .. } => stack,
        }
    }

    /// The record as the objects given meet it: those it holds that still carry its tool's mark,
    /// what that tool would delete with its stack.
    pub fn members<'a>(&self, objects: impl IntoIterator<Item = &'a Listed>) -> crate::stack::members::MemberRecord {
        crate::stack::members::MemberRecord {
            ids: objects
                .into_iter()
                .filter(|object| self.holds(object) && self.still_marked(object))
                .map(Listed::id)
                .collect(),
            name: self.name().to_string(),
            aliases: Vec::new(),
            denied: self.denied().clone(),
            no_inventory: match self {
                Recorded::NoInventory { why, .. } => Some(why.clone()),
                _ => None,
            },
        }
    }

    /// The recorded objects its tool may not delete, each with why (see `Recorded::Ids::denied`).
    pub fn denied(&self) -> &std::collections::BTreeMap<ObjectId, String> {
        static NONE: std::collections::BTreeMap<ObjectId, String> = std::collections::BTreeMap::new();
        match self {
            Recorded::Ids { denied, .. } => denied,
            _ => &NONE,
        }
    }

    /// Whether the record is empty.
    pub fn is_empty(&self) -> bool {
        match self {
            Recorded::Ids { ids, .. } => ids.is_empty(),
            Recorded::ApplySet { kinds, .. } => kinds.is_empty(),
            Recorded::NoInventory { .. } => true,
        }
    }
}

/// What counts as desired, and what the tool recorded: an object is an orphan when the tool
/// recorded it (or, with no record, merely marked it) and the new desired set lacks it — the
/// diff each tool's own garbage collector makes.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    /// The new desired set (`-f`, `-k`); `None` when only a record was given.
    pub manifests: Option<DesiredSet>,
    /// The tool's record of what it applied last, when one was read.
    pub recorded: Option<Recorded>,
    /// The tracker the user named, whose tool's rules apply besides the marking tools'.
    pub tracker: Option<Tracker>,
    /// The stack the desired set describes, when a tracker named one (see [`ComparedStack`]).
    pub stack: Option<ComparedStack>,
    /// The live versions of kapp's versioned resources among the listed objects: those kapp
    /// keeps for a versioned manifest are desired ([`crate::stack::kapp_versions`]).
    pub live_versions: std::sync::Arc<LiveVersions>,
}

/// Why an object is an orphan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum OrphanReason {
    /// Marked by the stack, not among the manifests (no tool record read: labels only).
    NotInDesiredSet,
    /// In the tool's record of what it applied, not among the manifests.
    GoneFromDesiredSet {
        /// The record.
        inventory: String,
    },
}

impl fmt::Display for OrphanReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrphanReason::NotInDesiredSet => write!(f, "not in desired set"),
            OrphanReason::GoneFromDesiredSet { inventory } => {
                write!(f, "in {inventory}, not in desired set")
            }
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
    Skipped(KeepReason),
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
    tracked.iter().map(|object| classify_one(object, desired)).collect()
}

/// [`classify`], taking the objects: each is moved into its verdict, never copied (a listing
/// of many objects is held once).
pub fn classify_owned(tracked: Vec<Listed>, desired: &Desired) -> Vec<Classified> {
    tracked
        .into_iter()
        .map(|object| {
            let verdict = verdict(&object, desired);
            Classified { object, verdict }
        })
        .collect()
}

/// Classifies one tracked object against what is desired.
pub fn classify_one(object: &Listed, desired: &Desired) -> Classified {
    Classified {
        object: object.clone(),
        verdict: verdict(object, desired),
    }
}

/// The verdict of one tracked object against what is desired ([`classify_one`] without the
/// object).
pub fn verdict(object: &Listed, desired: &Desired) -> Verdict {
    let manifests = desired.manifests.as_ref();
    if desired.wants(object) {
        return Verdict::Desired;
    }
    let context = desired.keep_context();
    if manifests.is_none() {
        // Only a record, no new desired set: what the tool applied last is what it wants; the
        // record still bounds what it speaks for.
        return match outside_record(object, &context) {
            Some(reason) => Verdict::Skipped(reason),
            None => Verdict::Desired,
        };
    }
    match keep::reason(object, &context) {
        Some(reason) => Verdict::Skipped(reason),
        None => Verdict::Orphan(match &desired.recorded {
            Some(recorded) => OrphanReason::GoneFromDesiredSet {
                inventory: recorded.name().to_string(),
            },
            None => OrphanReason::NotInDesiredSet,
        }),
    }
}

impl Desired {
    /// Whether the new desired set holds the object, as the tool that would prune it compares:
    /// by identity (group, kind, namespace, name), and for an object Flux v1 tracks (its mark
    /// on it, or `--tracker flux-v1`) also as Flux v1 compares, without the group (see
    /// [`DesiredSet::holds_flux_v1`]): what Flux v1 keeps is never its orphan; for an object Flux
    /// tracks, also as kustomize-controller reads its inventory back ([`DesiredSet::holds_as_flux`]).
    /// A live version of
    /// a manifest kapp versions is wanted while kapp keeps it ([`LiveVersions::keeps`]).
    pub fn wants(&self, object: &Listed) -> bool {
        let Some(set) = self.manifests.as_ref() else {
            return false;
        };
        let id = object.id();
        let marked_by = |preset: Preset| {
            self.tracker.as_ref().is_some_and(|t| t.preset == preset)
                || marks(&object.meta).iter().any(|m| m.preset == preset)
        };
        set.ids.contains(&id)
            || (marked_by(Preset::FluxV1) && set.holds_flux_v1(&id))
            || (marked_by(Preset::Flux) && set.holds_as_flux(&id))
            || self.live_versions.keeps(object, &set.kapp_versioned)
    }

    /// The question the keep chain answers for this desired set.
    pub fn keep_context(&self) -> Context<'_> {
        Context {
            question: Question::Orphan {
                tracker: self.tracker.as_ref(),
                recorded: self.recorded.as_ref(),
                compared: self.manifests.is_some(),
                stack: self.stack.as_ref(),
                needs: self.manifests.as_ref().map(|set| &set.needs),
            },
            trackers: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::discovery::KindInfo;
    use crate::stack::desired::Origin;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use kube::core::ObjectMeta;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn kind(group: &str, kind: &str, namespaced: bool) -> Arc<KindInfo> {
        Arc::new(crate::cluster::fixtures::kind(group, kind, namespaced))
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

    fn ids(names: &[&str]) -> HashSet<ObjectId> {
        names
            .iter()
            .map(|n| ObjectId::new("", "ConfigMap", Some("web"), n))
            .collect()
    }

    fn desired(names: &[&str]) -> Desired {
        Desired {
            manifests: Some(DesiredSet::from_ids(ids(names), Origin::Manifests)),
            ..Default::default()
        }
    }

    #[test]
    fn undesired_objects_are_orphans_and_desired_ones_are_not() {
        let verdicts = classify(&[object("keep-me"), object("old")], &desired(&["keep-me"]));
        assert_eq!(verdicts[0].verdict, Verdict::Desired);
        assert_eq!(verdicts[1].verdict, Verdict::Orphan(OrphanReason::NotInDesiredSet));
    }

    #[test]
    fn owned_terminating_kept_and_ambiguous_objects_are_never_orphans() {
        let owner = |controller: Option<bool>| {
            Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web-123".into(),
                uid: "u".into(),
                controller,
                ..Default::default()
            }])
        };
        let mut child = object("child");
        child.meta.owner_references = owner(Some(true));
        let mut dependent = object("dependent");
        dependent.meta.owner_references = owner(None);
        let mut terminating = object("going");
        terminating.meta.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        let mut kept = object("kept");
        kept.meta.annotations = Some(BTreeMap::from([(
            "helm.sh/resource-policy".to_string(),
            " Keep".to_string(),
        )]));
        let mut ambiguous = object("ambiguous");
        ambiguous.meta.labels = Some(BTreeMap::from([(
            crate::model::trackers::FLUX_KS_NAME.to_string(),
            "dup".to_string(),
        )]));
        let verdicts = classify(&[child, dependent, terminating, kept, ambiguous], &desired(&[]));
        let owned = Verdict::Skipped(KeepReason::ControllerOwned {
            owner: "ReplicaSet/web-123".into(),
        });
        assert_eq!(verdicts[0].verdict, owned);
        assert_eq!(verdicts[1].verdict, owned);
        assert_eq!(verdicts[2].verdict, Verdict::Skipped(KeepReason::Terminating));
        assert!(matches!(verdicts[3].verdict, Verdict::Skipped(KeepReason::Keep { .. })));
        assert!(matches!(
            verdicts[4].verdict,
            Verdict::Skipped(KeepReason::AmbiguousMark { .. })
        ));
    }

    #[test]
    fn identity_includes_the_group() {
        // A ConfigMap kind in another group is another object; the same group is the desired one.
        let same = object("same");
        let other_group = Listed::new(kind("other.example.com", "ConfigMap", true), *object("same").meta);
        let verdicts = classify(&[same, other_group], &desired(&["same"]));
        assert_eq!(verdicts[0].verdict, Verdict::Desired);
        assert_eq!(verdicts[1].verdict, Verdict::Orphan(OrphanReason::NotInDesiredSet));
        // And the other way round: desired in a group, listed in core.
        let in_group = Desired {
            manifests: Some(DesiredSet::from_ids(
                [ObjectId::new("other.example.com", "ConfigMap", Some("web"), "same")],
                Origin::Manifests,
            )),
            ..Default::default()
        };
        let verdicts = classify(&[object("same")], &in_group);
        assert_eq!(verdicts[0].verdict, Verdict::Orphan(OrphanReason::NotInDesiredSet));
    }

    /// Flux v1 tells objects apart by `<namespace>:<kind>/<name>` without a group (fluxcd/flux
    /// 1.x `pkg/cluster/kubernetes/sync.go` `collectGarbage`, `pkg/resource/id.go` `MakeID`):
    /// an object it tracks is kept when git holds one of that kind, namespace and name in any
    /// group; any other object is still compared by its full identity.
    #[test]
    fn flux_v1_compares_without_the_group_as_its_garbage_collector_does() {
        let sync_set = "git";
        let own_mark = crate::model::trackers::flux_v1_gc_mark(sync_set, "web:certificate/tls");
        let certificate = |group: &str, labels: &[(&str, &str)]| {
            let mut listed = Listed::new(kind(group, "Certificate", true), *object("tls").meta);
            listed.meta.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
            listed
        };
        let old = certificate(
            "certmanager.k8s.io",
            &[(crate::model::trackers::FLUX_V1_GC_MARK, &own_mark)],
        );
        let in_git = Desired {
            manifests: Some(DesiredSet::from_ids(
                [ObjectId::new("cert-manager.io", "Certificate", Some("web"), "tls")],
                Origin::Manifests,
            )),
            tracker: Some(Tracker::parse("flux-v1=git").unwrap()),
            ..Default::default()
        };
        assert_eq!(classify_one(&old, &in_git).verdict, Verdict::Desired);
        // Without the tracker, the object's own Flux v1 mark says which tool compares it.
        let legacy = certificate("certmanager.k8s.io", &[(crate::model::trackers::FLUX_V1_STACK, "git")]);
        let untracked = Desired {
            tracker: None,
            ..in_git.clone()
        };
        assert_eq!(classify_one(&legacy, &untracked).verdict, Verdict::Desired);
        // Another tool's object is still another object in another group.
        let other = certificate("certmanager.k8s.io", &[(crate::model::trackers::KAPP_APP, "x")]);
        assert_ne!(classify_one(&other, &untracked).verdict, Verdict::Desired);
        // Flux v1 still tells namespaces and names apart.
        let mut elsewhere = old.clone();
        elsewhere.meta.namespace = Some("other".into());
        assert!(!matches!(classify_one(&elsewhere, &in_git).verdict, Verdict::Desired));
    }

    #[test]
    fn identity_includes_group_kind_and_namespace() {
        // Same name, other namespace or other kind: not the desired object.
        let mut elsewhere = object("same");
        elsewhere.meta.namespace = Some("other".into());
        let secret = Listed::new(kind("", "Secret", true), *object("same").meta);
        let verdicts = classify(&[elsewhere, secret, object("same")], &desired(&["same"]));
        assert!(verdicts[..2].iter().all(|v| matches!(v.verdict, Verdict::Orphan(_))));
        assert_eq!(verdicts[2].verdict, Verdict::Desired, "the control: same identity");
    }

    #[test]
    fn a_record_alone_prunes_nothing_and_never_reaches_beyond_itself() {
        let recorded = Recorded::Ids {
            ids: ids(&["applied", "removed"]),
            inventory: "Kustomization flux-system/apps".into(),
            owner: None,
            denied: Default::default(),
        };
        let alone = Desired {
            recorded: Some(recorded.clone()),
            ..Default::default()
        };
        let objects = [object("applied"), object("removed"), object("never-recorded")];
        let verdicts = classify(&objects, &alone);
        assert_eq!(verdicts[0].verdict, Verdict::Desired);
        assert_eq!(verdicts[1].verdict, Verdict::Desired);
        let not_recorded = Verdict::Skipped(KeepReason::NotInInventory {
            inventory: "Kustomization flux-system/apps".into(),
        });
        assert_eq!(verdicts[2].verdict, not_recorded);

        // With the new desired set: the tool's diff, previous record minus new set.
        let diff = Desired {
            recorded: Some(recorded),
            ..desired(&["applied"])
        };
        let verdicts = classify(&objects, &diff);
        assert_eq!(verdicts[0].verdict, Verdict::Desired);
        assert_eq!(
            verdicts[1].verdict,
            Verdict::Orphan(OrphanReason::GoneFromDesiredSet {
                inventory: "Kustomization flux-system/apps".into()
            })
        );
        assert_eq!(verdicts[2].verdict, not_recorded);
    }

    #[test]
    fn a_recorded_object_that_lost_the_tools_mark_is_not_deleted() {
        let owner = Tracker::parse("flux=apps.flux-system").unwrap();
        let recorded = Recorded::Ids {
            ids: ids(&["marked", "unmarked"]),
            inventory: "the inventory of Kustomization flux-system/apps".into(),
            owner: Some(owner),
            denied: Default::default(),
        };
        let diff = Desired {
            recorded: Some(recorded),
            ..desired(&[])
        };
        let mut marked = object("marked");
        marked.meta.labels = Some(BTreeMap::from([
            (crate::model::trackers::FLUX_KS_NAME.to_string(), "apps".to_string()),
            (
                crate::model::trackers::FLUX_KS_NAMESPACE.to_string(),
                "flux-system".to_string(),
            ),
        ]));
        let verdicts = classify(&[marked, object("unmarked")], &diff);
        assert!(matches!(verdicts[0].verdict, Verdict::Orphan(_)));
        assert!(matches!(
            verdicts[1].verdict,
            Verdict::Skipped(KeepReason::ToolWouldKeep { .. })
        ));
    }

    #[test]
    fn an_applyset_prunes_only_listed_kinds_in_listed_namespaces() {
        let recorded = Recorded::ApplySet {
            kinds: [(String::new(), "ConfigMap".to_string())].into_iter().collect(),
            namespaces: ["web".to_string()].into_iter().collect(),
            inventory: "ApplySet parent Secret/set".into(),
            owner: None,
        };
        let diff = Desired {
            recorded: Some(recorded),
            ..desired(&[])
        };
        let mut elsewhere = object("elsewhere");
        elsewhere.meta.namespace = Some("other".into());
        let secret = Listed::new(kind("", "Secret", true), *object("s").meta);
        let verdicts = classify(&[object("cm"), elsewhere, secret], &diff);
        assert!(matches!(verdicts[0].verdict, Verdict::Orphan(_)));
        assert!(matches!(
            verdicts[1].verdict,
            Verdict::Skipped(KeepReason::NotInInventory { .. })
        ));
        assert!(matches!(
            verdicts[2].verdict,
            Verdict::Skipped(KeepReason::NotInInventory { .. })
        ));
    }
}
