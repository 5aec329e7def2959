//! Unit tests of the orphan rules.

use super::*;
use crate::model::trackers::{Tracker, FLUX_KS_NAME, FLUX_KS_NAMESPACE};
use crate::stack::classify::OrphanReason;
use crate::stack::keep::KeepReason;
use std::sync::Arc;

fn config_map(labels: &[(&str, &str)]) -> Listed {
    let mut meta = crate::cluster::fixtures::meta(labels, &[]);
    meta.name = Some("a".into());
    meta.namespace = Some("web".into());
    Listed::new(Arc::new(crate::cluster::fixtures::kind("", "ConfigMap", true)), meta)
}

#[test]
fn only_objects_no_named_stack_or_record_bounds_are_judged_by_their_own_stack() {
    let tracker = |text: &str| Some(Tracker::parse(text).unwrap());
    assert!(judged_by_labels(&Desired::default()), "-l alone");
    let preset_only = Desired {
        tracker: tracker("flux"),
        ..Default::default()
    };
    assert!(
        judged_by_labels(&preset_only),
        "a preset without a value names no stack"
    );
    let named = Desired {
        tracker: tracker("flux=apps.flux-system"),
        ..Default::default()
    };
    assert!(!judged_by_labels(&named), "--tracker flux=NAME.NS reads its own record");
}

#[test]
fn the_desired_digest_changes_with_any_desired_identity_and_only_then() {
    let set = |names: &[&str]| Desired {
        manifests: Some(DesiredSet::from_ids(
            names
                .iter()
                .map(|n| crate::model::identity::ObjectId::new("", "ConfigMap", Some("web"), n)),
            Origin::Manifests,
        )),
        ..Default::default()
    };
    let digest = |desired: &Desired| DesiredDigest::of(desired).finish();
    assert_eq!(
        digest(&set(&["a", "b"])),
        digest(&set(&["b", "a"])),
        "order does not matter"
    );
    assert_ne!(digest(&set(&["a", "b"])), digest(&set(&["a", "b", "c"])));
    assert_ne!(digest(&set(&["a"])), digest(&set(&["b"])));
    assert_eq!(digest(&set(&[])).len(), 64);
}

#[test]
fn an_objects_recorded_stacks_are_those_its_marks_name_unambiguously() {
    let named = |preset: Preset, name: &str, namespace: Option<&str>| {
        (
            preset,
            MarkValue {
                name: name.into(),
                namespace: namespace.map(str::to_string),
            },
        )
    };
    let both = config_map(&[(FLUX_KS_NAME, "apps"), (FLUX_KS_NAMESPACE, "flux-system")]);
    assert_eq!(
        recorded_stacks_of(&both),
        vec![named(Preset::Flux, "apps", Some("flux-system"))]
    );
    assert!(
        recorded_stacks_of(&config_map(&[(FLUX_KS_NAME, "apps")])).is_empty(),
        "ambiguous"
    );
    assert!(recorded_stacks_of(&config_map(&[("app", "shop")])).is_empty());
    let mut kpt_and_applyset = config_map(&[(crate::model::trackers::APPLYSET_PART_OF, "applyset-x-v1")]);
    kpt_and_applyset.meta.annotations = Some(
        [(
            crate::model::trackers::KPT_OWNING_INVENTORY.to_string(),
            "inv".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    assert_eq!(
        recorded_stacks_of(&kpt_and_applyset),
        vec![
            named(Preset::ApplySet, "applyset-x-v1", None),
            named(Preset::Kpt, "inv", None)
        ]
    );
    // A kapp app's record bounds nothing, but places its namespace-less manifests (review 16).
    assert_eq!(
        recorded_stacks_of(&config_map(&[(crate::model::trackers::KAPP_APP, "1")])),
        vec![named(Preset::Kapp, "1", None)]
    );
}

#[test]
fn one_stack_keeping_an_object_keeps_it() {
    let object = config_map(&[]);
    let orphan = Classified {
        object: object.clone(),
        verdict: Verdict::Orphan(OrphanReason::NotInDesiredSet),
    };
    let kept = Classified {
        object,
        verdict: Verdict::Skipped(KeepReason::NotInInventory { inventory: "x".into() }),
    };
    let verdict = |v: Vec<Classified>| mildest(v.into_iter().map(|c| c.verdict).collect());
    assert_eq!(verdict(vec![orphan.clone(), kept.clone()]), Some(kept.verdict.clone()));
    assert_eq!(verdict(vec![orphan.clone()]), Some(orphan.verdict.clone()));
    assert_eq!(verdict(vec![]), None);
}

#[test]
fn an_unreadable_stack_makes_no_orphan_but_leaves_other_verdicts() {
    let object = config_map(&[]);
    let orphan = Classified {
        object: object.clone(),
        verdict: Verdict::Orphan(OrphanReason::NotInDesiredSet),
    };
    let judged = unknown_unless_desired(orphan.verdict, "Kustomization f/apps cannot be read");
    assert_eq!(
        judged,
        Verdict::Skipped(KeepReason::RecordUnreadable {
            why: "Kustomization f/apps cannot be read".into()
        })
    );
    let desired = Classified {
        object,
        verdict: Verdict::Desired,
    };
    assert_eq!(unknown_unless_desired(desired.verdict, "x"), Verdict::Desired);
}

#[test]
fn marks_found_together_are_one_stack_and_apart_are_several() {
    let flux = |name: &str| {
        [
            (FLUX_KS_NAME, name.to_string()),
            (FLUX_KS_NAMESPACE, "flux-system".to_string()),
        ]
    };
    let object = |labels: &[(&str, String)]| {
        let pairs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        config_map(&pairs)
    };
    let app = object(&flux("app"));
    let app_too = object(&flux("app"));
    assert_eq!(stacks_among(&[app.clone(), app_too]).len(), 1);
    let infra = object(&flux("infra"));
    let two = stacks_among(&[app.clone(), infra]);
    assert_eq!(two.len(), 2, "{two:?}");
    assert!(two.iter().any(|s| s.contains("infra")) && two.iter().any(|s| s.contains("app")));
    // A HelmRelease's objects carry its labels and its Helm release's annotations: one stack.
    let mut helm = crate::cluster::fixtures::meta(
        &[
            ("helm.toolkit.fluxcd.io/name", "web"),
            ("helm.toolkit.fluxcd.io/namespace", "web"),
            ("app.kubernetes.io/managed-by", "Helm"),
        ],
        &[
            ("meta.helm.sh/release-name", "web"),
            ("meta.helm.sh/release-namespace", "web"),
        ],
    );
    helm.name = Some("h".into());
    helm.namespace = Some("web".into());
    let helm = Listed::new(Arc::new(crate::cluster::fixtures::kind("", "ConfigMap", true)), helm);
    let mut release_only = crate::cluster::fixtures::meta(
        &[("app.kubernetes.io/managed-by", "Helm")],
        &[
            ("meta.helm.sh/release-name", "web"),
            ("meta.helm.sh/release-namespace", "web"),
        ],
    );
    release_only.name = Some("r".into());
    release_only.namespace = Some("web".into());
    let release_only = Listed::new(
        Arc::new(crate::cluster::fixtures::kind("", "ConfigMap", true)),
        release_only,
    );
    assert_eq!(stacks_among(&[helm, release_only]).len(), 1);
    assert!(stacks_among(&[]).is_empty());
    // Review finding F4: an Argo CD tracking id left on objects of two Flux stacks (a migration)
    // does not make them one stack.
    let with_argo = |stack: &str, name: &str| {
        let mut meta = crate::cluster::fixtures::meta(
            &[(FLUX_KS_NAME, stack), (FLUX_KS_NAMESPACE, "flux-system")],
            &[("argocd.argoproj.io/tracking-id", &format!("shop:/ConfigMap:m1/{name}"))],
        );
        meta.name = Some(name.into());
        meta.namespace = Some("m1".into());
        Listed::new(Arc::new(crate::cluster::fixtures::kind("", "ConfigMap", true)), meta)
    };
    let bridged = stacks_among(&[with_argo("a", "a1"), with_argo("b", "b1")]);
    assert!(bridged.len() >= 2, "{bridged:?}");
}
