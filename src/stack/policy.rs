//! One orphan policy per tracker: an object is an orphan only if the tool that tracks it would
//! delete it too. Each rule is taken from the producer's own source (file and version named on
//! the rule) and answers one question: would this tool leave this object alone, and why?
//! `orphans`, `prune` and `graph` all reach these rules through [`crate::stack::classify`].
//!
//! Rules that need the tool's record (Flux `status.inventory`, a Helm release, a cli-utils
//! inventory, an ApplySet parent) are applied in [`crate::stack::classify`] against
//! [`crate::stack::classify::Recorded`]; the rules here read the object alone.

use crate::cluster::collect::Listed;
use crate::model::trackers::{
    flux_v1_gc_mark, flux_v1_gc_mark_of, flux_v1_resource_id, marks, Preset, Tracker, ARGOCD_INSTANCE,
    ARGOCD_TRACKING_ID, KAPP_APP,
};
use crate::stack::desired::Needs;

/// Argo CD's installation id annotation (argo-cd `common/common.go` `AnnotationInstallationID`).
pub const ARGOCD_INSTALLATION_ID: &str = "argocd.argoproj.io/installation-id";
/// kapp's identity annotation (carvel-dev/kapp `pkg/kapp/resources/identity_annotation.go`).
pub const KAPP_IDENTITY: &str = "kapp.k14s.io/identity";
/// Argo CD's hook annotation (argo-cd `common/common.go` `AnnotationKeyHook`).
pub const ARGOCD_HOOK: &str = "argocd.argoproj.io/hook";

/// Helm's hook annotation (helm/helm v3 `pkg/release/hook.go` `HookAnnotation`).
pub const HELM_HOOK: &str = "helm.sh/hook";

/// Why the tracking tool itself would not delete the object, or `None` when every tool that
/// tracks it (and the one the user named) would. The tools asked are those that marked the
/// object, plus the `--tracker` preset; `needs`: how the new desired set's tools list, when one
/// was given.
pub fn tool_keeps(object: &Listed, tracker: Option<&Tracker>, needs: Option<&Needs>) -> Option<String> {
    let mut presets: Vec<Preset> = marks(&object.meta).into_iter().map(|m| m.preset).collect();
    if let Some(tracker) = tracker {
        presets.push(tracker.preset);
    }
    presets.sort();
    presets.dedup();
    let sync_set = tracker
        .filter(|t| t.preset == Preset::FluxV1)
        .and_then(|t| t.value.as_ref())
        .map(|v| v.name.as_str());
    presets.into_iter().find_map(|preset| match preset {
        Preset::FluxV1 => flux_v1_keeps(object, sync_set),
        Preset::Kapp => kapp_keeps(object, needs),
        Preset::ArgoCd => argocd_keeps(object),
        Preset::Helm | Preset::FluxHelm => helm_keeps(object),
        Preset::Flux | Preset::ApplySet | Preset::Kpt => None,
    })
}

/// Flux v1 (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go`, `collectGarbage` and
/// `getAllowedGCMarkedResourcesInSyncSet`): only objects whose gc mark equals
/// `makeGCMark(syncSet, resourceID)` for themselves are collected (a copied label does not
/// qualify), never `Endpoints` or `ComponentStatus`, never an object with ownerReferences (see
/// [`owned_by`]). A differing `sync-checksum` means "not updated: skip", never "delete"; only
/// objects absent from git are deleted. The legacy `flux.weave.works/stack` label is taken as is.
pub fn flux_v1_keeps(object: &Listed, sync_set: Option<&str>) -> Option<String> {
    if object.kind.group.is_empty() && matches!(object.kind.kind.as_str(), "Endpoints" | "ComponentStatus") {
        return Some(format!("Flux v1 never collects {}", object.kind.kind));
    }
    let mark = flux_v1_gc_mark_of(&object.meta)?;
    let Some(sync_set) = sync_set else {
        return Some("Flux v1 gc mark not verified: name the sync set with --tracker flux-v1=SYNC-SET".to_string());
    };
    let id = flux_v1_resource_id(object.namespace(), &object.kind.kind, object.name());
    (mark != flux_v1_gc_mark(sync_set, &id))
        .then(|| format!("its Flux v1 gc mark is not sync set {sync_set}'s mark for {id} (a copied label)"))
}

/// kapp (carvel-dev/kapp `pkg/kapp/resources/identity_annotation.go`): an object with the app
/// label but without a `kapp.k14s.io/identity` annotation naming itself
/// (`v1;<namespace>/<group>/<Kind>/<name>;<apiVersion>`) was made by a controller that copied
/// the label: kapp calls it transient and does not delete it. The group named may be another
/// group serving its kind (an Ingress applied as `extensions`): see [`kapp_group`].
pub fn kapp_keeps(object: &Listed, needs: Option<&Needs>) -> Option<String> {
    let labels = object.meta.labels.as_ref();
    labels.and_then(|l| l.get(KAPP_APP))?;
    kapp_group(object, needs).is_none().then(|| {
        let own_key = kapp_key(object, &object.kind.group);
        format!("no {KAPP_IDENTITY} naming {own_key}: kapp treats it as transient")
    })
}

/// The group through which kapp takes the object for its own: the one its
/// `kapp.k14s.io/identity` names, when that names the object (namespace, kind, name) and kapp
/// takes the copy it lists through that group for the object ([`Needs::kapp_sees_own`]; where
/// the server's versions are not known, only the group it is listed under here is taken).
/// `None`: kapp calls the object transient.
pub fn kapp_group<'a>(object: &'a Listed, needs: Option<&Needs>) -> Option<&'a str> {
    let identity = annotation(object, KAPP_IDENTITY)?;
    let ["v1", key, api_version] = identity.split(';').collect::<Vec<_>>()[..] else {
        return None;
    };
    let group = &object.kind.group;
    let sharing = crate::model::identity::groups_sharing(group, &object.kind.kind);
    let named = std::iter::once(group.as_str())
        .chain(sharing)
        .find(|named| key == kapp_key(object, named))
        .filter(|named| !crate::stack::desired::needs::kapp_never_lists(named, &object.kind.kind))?;
    let app = object.meta.labels.as_ref().and_then(|l| l.get(KAPP_APP))?;
    let seen = needs.and_then(|needs| needs.kapp_sees_own(app, group, &object.kind.kind, named, api_version));
    seen.unwrap_or(named == group).then_some(named)
}

/// kapp's key of the object listed through `group`: `<namespace>/<group>/<Kind>/<name>`.
fn kapp_key(object: &Listed, group: &str) -> String {
    format!(
        "{}/{group}/{}/{}",
        object.namespace().unwrap_or(""),
        object.kind.kind,
        object.name()
    )
}

/// Argo CD (argo-cd `util/argo/resource_tracking.go` `getAppInstanceValue`,
/// `controller/state.go` `isSelfReferencedObj`): the tracking id must parse as
/// `<app>:<group>/<Kind>:<namespace>/<name>` and name the object itself (a copied annotation
/// does not); an object with an `installation-id` belongs to that Argo CD installation only;
/// with annotation tracking (the default since Argo CD 3.0) the `app.kubernetes.io/instance`
/// label alone is not Argo CD's mark (Helm charts set it too).
pub fn argocd_keeps(object: &Listed) -> Option<String> {
    let Some(id) = annotation(object, ARGOCD_TRACKING_ID) else {
        let labelled = object
            .meta
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(ARGOCD_INSTANCE));
        return labelled.then(|| {
            format!("only the {ARGOCD_INSTANCE} label: Argo CD tracks by {ARGOCD_TRACKING_ID} (default since 3.0)")
        });
    };
    // gitops-engine `pkg/sync/sync_context.go` `getSyncTasks`: hooks are not pruned (`hook.IsHook`:
    // `argocd.argoproj.io/hook`, or a Helm hook `helm.sh/hook`).
    if let Some(hook) = annotation(object, ARGOCD_HOOK).or_else(|| annotation(object, HELM_HOOK)) {
        return Some(format!("a sync hook ({hook}): Argo CD never prunes hooks"));
    }
    if let Some(installation) = annotation(object, ARGOCD_INSTALLATION_ID) {
        return Some(format!(
            "{ARGOCD_INSTALLATION_ID}={installation}: tracked by that Argo CD installation"
        ));
    }
    let Some((group, kind, namespace, name)) = parse_tracking_id(id) else {
        return Some(format!("malformed {ARGOCD_TRACKING_ID} {id:?}: Argo CD ignores it"));
    };
    let own_namespace = object.namespace().unwrap_or("");
    let same = (own_namespace == namespace || own_namespace.is_empty())
        && object.name() == name
        && object.kind.group == group
        && object.kind.kind == kind;
    (!same).then(|| format!("its {ARGOCD_TRACKING_ID} names {kind} {namespace}/{name}, not this object (a copy)"))
}

/// `<app>:<group>/<Kind>:<namespace>/<name>` into (group, kind, namespace, name).
fn parse_tracking_id(id: &str) -> Option<(&str, &str, &str, &str)> {
    let mut parts = id.splitn(3, ':');
    let (_app, group_kind, namespace_name) = (parts.next()?, parts.next()?, parts.next()?);
    let (group, kind) = group_kind.split_once('/')?;
    let (namespace, name) = namespace_name.split_once('/')?;
    (!kind.contains('/') && !name.contains('/')).then_some((group, kind, namespace, name))
}

/// Helm (helm/helm v3 `pkg/action/upgrade.go`, `pkg/releaseutil/manifest_sorter.go`): hooks are
/// not part of a release's manifest, so an upgrade never deletes them; they go by their
/// `helm.sh/hook-delete-policy` only.
pub fn helm_keeps(object: &Listed) -> Option<String> {
    annotation(object, HELM_HOOK).map(|hook| format!("a Helm hook ({HELM_HOOK}={hook}): Helm never prunes hooks"))
}

/// Any object with an ownerReference belongs to its owner: the garbage collector removes it
/// with the owner, and Flux v1, Argo CD and kapp all leave owned objects alone. Returns the
/// owner, `Kind/name` (the controller owner first).
pub fn owned_by(object: &Listed) -> Option<String> {
    crate::stack::keep::controller_of(&object.meta).or_else(|| {
        let first = object.meta.owner_references.as_ref()?.first()?;
        Some(format!("{}/{}", first.kind, first.name))
    })
}

/// Whether a PersistentVolumeClaim named `claim` was made from a claim template of StatefulSet
/// `set`: `<template>-<set>-<ordinal>` (kubernetes `pkg/controller/statefulset/stateful_set_utils.go`
/// `getPersistentVolumeClaimName`). The controller copies the set's selector labels onto it.
pub fn is_claim_of(claim: &str, set: &str, templates: &[String]) -> bool {
    templates.iter().any(|template| {
        claim
            .strip_prefix(&format!("{template}-{set}-"))
            .is_some_and(|ordinal| !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn annotation<'a>(object: &'a Listed, key: &str) -> Option<&'a str> {
    object
        .meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trackers::{FLUX_V1_GC_MARK, HELM_RELEASE_NAME, HELM_RELEASE_NAMESPACE};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::ObjectMeta;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn object(group: &str, kind: &str, name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Listed {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        Listed::new(
            Arc::new(crate::cluster::fixtures::kind(group, kind, true)),
            ObjectMeta {
                name: Some(name.into()),
                namespace: Some("web".into()),
                labels: map(labels),
                annotations: map(annotations),
                ..Default::default()
            },
        )
    }

    #[test]
    fn flux_v1_collects_only_its_own_gc_mark() {
        // The mark Flux v1 computes for sync set "git" and `web:configmap/a`.
        let mark = flux_v1_gc_mark("git", "web:configmap/a");
        assert!(mark.starts_with("sha256.") && !mark.contains('='), "{mark}");
        let own = object("", "ConfigMap", "a", &[(FLUX_V1_GC_MARK, &mark)], &[]);
        assert_eq!(flux_v1_keeps(&own, Some("git")), None);
        let copy = object("", "ConfigMap", "b", &[(FLUX_V1_GC_MARK, &mark)], &[]);
        assert!(flux_v1_keeps(&copy, Some("git")).unwrap().contains("copied label"));
        assert!(flux_v1_keeps(&own, Some("other")).is_some());
        assert!(flux_v1_keeps(&own, None).unwrap().contains("--tracker flux-v1="));
        let endpoints = object("", "Endpoints", "a", &[(FLUX_V1_GC_MARK, &mark)], &[]);
        assert!(flux_v1_keeps(&endpoints, Some("git")).is_some());
        assert_eq!(flux_v1_resource_id(None, "ClusterRole", "x"), "<cluster>:clusterrole/x");
    }

    #[test]
    fn kapp_needs_an_identity_naming_the_object() {
        let own = object(
            "apps",
            "Deployment",
            "api",
            &[(KAPP_APP, "1")],
            &[(KAPP_IDENTITY, "v1;web/apps/Deployment/api;apps/v1")],
        );
        assert_eq!(kapp_keeps(&own, None), None);
        let transient = object("", "Pod", "api-x", &[(KAPP_APP, "1")], &[]);
        assert!(kapp_keeps(&transient, None).unwrap().contains("transient"));
        let copied = object(
            "apps",
            "Deployment",
            "other",
            &[(KAPP_APP, "1")],
            &[(KAPP_IDENTITY, "v1;web/apps/Deployment/api;apps/v1")],
        );
        assert!(kapp_keeps(&copied, None).is_some());
    }

    /// Membership review 32, F1: kapp lists an Ingress once through each group and version that
    /// serves it in its app's scope (carvel-dev/kapp `identified_resources_list.go`), so an
    /// identity naming `extensions` is its own wherever kapp lists that copy.
    #[test]
    fn kapp_takes_an_identity_under_another_group_of_its_kind_as_kapp_lists_it() {
        let ingress = |identity: &str| {
            object(
                "networking.k8s.io",
                "Ingress",
                "web",
                &[(KAPP_APP, "1")],
                &[(KAPP_IDENTITY, identity)],
            )
        };
        let served = [
            ("networking.k8s.io", "v1"),
            ("networking.k8s.io", "v1beta1"),
            ("extensions", "v1beta1"),
            ("", "v1"),
        ];
        let mut every_kind = Needs::default();
        every_kind.note_shared_versions(
            served
                .iter()
                .map(|(g, v)| (g.to_string(), "Ingress".to_string(), v.to_string())),
        );
        let scoped = |records: &[&[&str]]| {
            let mut needs = every_kind.clone();
            let used: Vec<Vec<(String, String)>> = records
                .iter()
                .map(|groups| groups.iter().map(|g| (g.to_string(), "Ingress".to_string())).collect())
                .collect();
            needs.scope_kapp("1", &used, std::iter::empty());
            needs
        };
        let extensions = ingress("v1;web/extensions/Ingress/web;extensions/v1beta1");
        let own = ingress("v1;web/networking.k8s.io/Ingress/web;networking.k8s.io/v1");
        let unserved_version = ingress("v1;web/extensions/Ingress/web;extensions/v1");
        let own_unserved = ingress("v1;web/networking.k8s.io/Ingress/web;networking.k8s.io/v2");
        // Every kind listed: the extensions copy matches the identity's version.
        assert_eq!(kapp_keeps(&extensions, Some(&every_kind)), None);
        assert_eq!(kapp_group(&extensions, Some(&every_kind)), Some("extensions"));
        assert_eq!(kapp_keeps(&own, Some(&every_kind)), None);
        // No copy at the identity's version: kapp takes the first by apiVersion,
        // `extensions/v1beta1` (review 33, F2).
        assert_eq!(kapp_keeps(&unserved_version, Some(&every_kind)), None);
        assert!(kapp_keeps(&own_unserved, Some(&every_kind)).is_some());
        // Only extensions listed: its one copy is valid, whatever the version.
        let only_extensions = scoped(&[&["extensions"]]);
        assert_eq!(kapp_keeps(&unserved_version, Some(&only_extensions)), None);
        assert_eq!(kapp_keeps(&extensions, Some(&only_extensions)), None);
        assert!(kapp_keeps(&own, Some(&only_extensions)).is_some());
        // Only networking.k8s.io listed: the extensions identity names no copy kapp lists.
        assert!(kapp_keeps(&extensions, Some(&scoped(&[&["networking.k8s.io"]]))).is_some());
        assert_eq!(
            kapp_keeps(&own_unserved, Some(&scoped(&[&["networking.k8s.io"]]))),
            None
        );
        // Two app records: kapp's only where each would take it (review 33, F6).
        let two = scoped(&[&["networking.k8s.io"], &["networking.k8s.io", "extensions"]]);
        assert!(kapp_keeps(&own_unserved, Some(&two)).is_some());
        assert_eq!(kapp_keeps(&own, Some(&two)), None);
        // Versions unknown (a teardown): only the group it is listed under here.
        assert!(kapp_keeps(&extensions, None).is_some());
        assert_eq!(kapp_keeps(&own, None), None);
        // Another name, or a group that does not serve the kind, is never its own.
        let other = ingress("v1;web/extensions/Ingress/other;extensions/v1beta1");
        assert!(kapp_keeps(&other, Some(&every_kind)).is_some());
        let foreign = ingress("v1;web/apps/Ingress/web;apps/v1");
        assert!(kapp_keeps(&foreign, Some(&every_kind)).is_some());
    }

    /// Review 33, F1 and F3: kapp never lists core `v1` Events, so an Event is its own only
    /// through `events.k8s.io`.
    #[test]
    fn kapp_lists_events_through_events_k8s_io_only() {
        let event = |identity: &str| object("", "Event", "ev", &[(KAPP_APP, "1")], &[(KAPP_IDENTITY, identity)]);
        let mut needs = Needs::default();
        let served = [("", "v1"), ("events.k8s.io", "v1"), ("events.k8s.io", "v1beta1")];
        needs.note_shared_versions(
            served
                .iter()
                .map(|(g, v)| (g.to_string(), "Event".to_string(), v.to_string())),
        );
        let core = event("v1;web//Event/ev;v1");
        assert!(kapp_keeps(&core, Some(&needs)).is_some());
        assert!(kapp_keeps(&core, None).is_some());
        assert_eq!(
            kapp_keeps(&event("v1;web/events.k8s.io/Event/ev;events.k8s.io/v1"), Some(&needs)),
            None
        );
        assert_eq!(
            kapp_keeps(&event("v1;web/events.k8s.io/Event/ev;events.k8s.io/v2"), Some(&needs)),
            None
        );
    }

    #[test]
    fn argocd_tracking_id_must_name_the_object_itself() {
        fn id(value: &str) -> [(&str, &str); 1] {
            [(ARGOCD_TRACKING_ID, value)]
        }
        let own = object("apps", "Deployment", "ui", &[], &id("shop:apps/Deployment:web/ui"));
        assert_eq!(argocd_keeps(&own), None);
        let copy = object("apps", "Deployment", "ui-copy", &[], &id("shop:apps/Deployment:web/ui"));
        assert!(argocd_keeps(&copy).unwrap().contains("not this object"));
        let other_kind = object("", "ConfigMap", "ui", &[], &id("shop:apps/Deployment:web/ui"));
        assert!(argocd_keeps(&other_kind).is_some());
        let malformed = object("", "ConfigMap", "ui", &[], &id("shop"));
        assert!(argocd_keeps(&malformed).unwrap().contains("malformed"));
        let elsewhere = object(
            "",
            "ConfigMap",
            "ui",
            &[],
            &[
                (ARGOCD_TRACKING_ID, "shop:/ConfigMap:web/ui"),
                (ARGOCD_INSTALLATION_ID, "other-argo"),
            ],
        );
        assert!(argocd_keeps(&elsewhere).unwrap().contains("installation"));
        let label_only = object("", "ConfigMap", "ui", &[(ARGOCD_INSTANCE, "shop")], &[]);
        assert!(argocd_keeps(&label_only).unwrap().contains("label"));
    }

    #[test]
    fn argo_cd_hooks_are_never_pruned() {
        let tracking = (ARGOCD_TRACKING_ID, "shop:batch/Job:web/migrate");
        let hook = object("batch", "Job", "migrate", &[], &[tracking, (ARGOCD_HOOK, "PreSync")]);
        assert!(argocd_keeps(&hook).is_some());
        let helm_hook = object("batch", "Job", "migrate", &[], &[tracking, (HELM_HOOK, "pre-install")]);
        assert!(argocd_keeps(&helm_hook).is_some());
        assert!(argocd_keeps(&object("batch", "Job", "migrate", &[], &[tracking])).is_none());
    }

    #[test]
    fn helm_hooks_are_never_pruned() {
        let hook = object("batch", "Job", "migrate", &[], &[(HELM_HOOK, "pre-upgrade")]);
        assert!(helm_keeps(&hook).is_some());
        assert_eq!(helm_keeps(&object("", "ConfigMap", "a", &[], &[])), None);
    }

    #[test]
    fn every_marking_tool_and_the_named_tracker_are_asked() {
        // Helm-marked with Argo's label: Helm's rules apply, Argo's label is not its mark.
        let chart = object(
            "",
            "ConfigMap",
            "a",
            &[(ARGOCD_INSTANCE, "web")],
            &[(HELM_RELEASE_NAME, "web"), (HELM_RELEASE_NAMESPACE, "web")],
        );
        assert_eq!(tool_keeps(&chart, None, None), None);
        let argo = Tracker::parse("argocd=web").unwrap();
        assert!(tool_keeps(&chart, Some(&argo), None).unwrap().contains("label"));
    }

    #[test]
    fn owners_and_claim_templates() {
        let mut owned = object("", "ConfigMap", "a", &[], &[]);
        assert_eq!(owned_by(&owned), None);
        owned.meta.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            name: "api".into(),
            uid: "u".into(),
            controller: None,
            ..Default::default()
        }]);
        assert_eq!(owned_by(&owned).as_deref(), Some("Service/api"));
        let templates = vec!["data".to_string()];
        assert!(is_claim_of("data-db-0", "db", &templates));
        assert!(is_claim_of("data-db-12", "db", &templates));
        assert!(!is_claim_of("data-db-x", "db", &templates));
        assert!(!is_claim_of("data-db-", "db", &templates));
        assert!(!is_claim_of("logs-db-0", "db", &templates));
    }
}
