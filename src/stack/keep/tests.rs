//! One test per rule of the chain, and the chain's order.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::core::ObjectMeta;

use super::*;
use crate::cluster::fixtures::{kind, meta};

const FLUX_NAME: &str = "kustomize.toolkit.fluxcd.io/name";
const FLUX_NAMESPACE: &str = "kustomize.toolkit.fluxcd.io/namespace";

fn config_map(name: &str, meta: ObjectMeta) -> Listed {
    Listed::new(
        Arc::new(kind("", "ConfigMap", true)),
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("web".into()),
            uid: Some(format!("uid-{name}")),
            ..meta
        },
    )
}

fn flux_marked(name: &str) -> Listed {
    config_map(name, meta(&[(FLUX_NAME, "apps"), (FLUX_NAMESPACE, "flux-system")], &[]))
}

fn orphan_question() -> Context<'static> {
    Context {
        question: Question::Orphan {
            tracker: None,
            recorded: None,
            compared: true,
            stack: None,
            needs: None,
        },
        trackers: None,
    }
}

fn teardown(claims: Vec<Claim<'_>>) -> Context<'_> {
    Context {
        question: Question::Teardown { claims },
        trackers: None,
    }
}

fn stack() -> ObjectId {
    ObjectId::new(
        "kustomize.toolkit.fluxcd.io",
        "Kustomization",
        Some("flux-system"),
        "apps",
    )
}

fn claim<'a>(stack: &'a ObjectId, record: Option<&'a MemberRecord>) -> Claim<'a> {
    Claim {
        stack,
        record,
        leaves_members: None,
        unreadable: None,
    }
}

fn record(names: &[&str]) -> MemberRecord {
    MemberRecord {
        ids: names
            .iter()
            .map(|n| ObjectId::new("", "ConfigMap", Some("web"), n))
            .collect(),
        name: "the status.inventory of apps".into(),
        ..Default::default()
    }
}

fn value(name: &str, namespace: &str) -> MarkValue {
    MarkValue {
        name: name.into(),
        namespace: Some(namespace.into()),
    }
}

fn owner(controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "web".into(),
        uid: "uid-web".into(),
        controller: Some(controller),
        ..Default::default()
    }
}

#[test]
fn a_teardown_deletes_only_what_every_claiming_record_misses_not() {
    let stack = stack();
    let holds = record(&["a"]);
    let context = teardown(vec![claim(&stack, Some(&holds))]);
    assert_eq!(outside_record(&flux_marked("a"), &context), None);
    let copy = outside_record(&flux_marked("a-copy"), &context);
    assert!(matches!(copy, Some(KeepReason::NotInInventory { .. })), "{copy:?}");
    // A stack that keeps no record leaves its marks to decide.
    assert_eq!(
        outside_record(&flux_marked("a-copy"), &teardown(vec![claim(&stack, None)])),
        None
    );
}

/// A Kustomization without a `status.inventory` it can read deletes nothing
/// (kustomize-controller `finalizerShouldDeleteResources`): every path keeps what carries its
/// marks, with the typed reason, and the JSON names it `noInventory`.
#[test]
fn a_kustomization_without_an_inventory_keeps_everything_it_marks() {
    let stack = stack();
    let nothing = MemberRecord {
        no_inventory: Some(crate::stack::inventory::NO_INVENTORY.to_string()),
        ..record(&[])
    };
    let kept = outside_record(&flux_marked("a"), &teardown(vec![claim(&stack, Some(&nothing))]));
    let expected = KeepReason::NoInventory {
        stack: stack.to_string(),
        why: "records no status.inventory".into(),
    };
    assert_eq!(kept.as_ref(), Some(&expected));
    assert_eq!(expected.rule(), "noInventory");
    assert_eq!(
        expected.to_string(),
        "Kustomization.kustomize.toolkit.fluxcd.io/flux-system/apps records no status.inventory: kustomize-controller deletes nothing without an inventory it can read"
    );
    // An orphan search under it: nothing is an orphan, whatever the desired set lacks.
    let recorded = Recorded::NoInventory {
        stack: "Kustomization flux-system/apps".into(),
        why: crate::stack::inventory::NO_INVENTORY.into(),
    };
    let context = Context {
        question: Question::Orphan {
            tracker: None,
            recorded: Some(&recorded),
            compared: true,
            stack: None,
            needs: None,
        },
        trackers: None,
    };
    let found = reason(&flux_marked("a"), &context).expect("kept");
    assert_eq!(found.rule(), "noInventory");
    // The record the plan reads from it says so too.
    assert_eq!(
        recorded.members([&flux_marked("a")]).no_inventory.as_deref(),
        Some("records no status.inventory")
    );
}

#[test]
fn an_orphan_search_with_a_record_keeps_what_it_does_not_hold_or_that_lost_its_mark() {
    let recorded = Recorded::Ids {
        ids: [ObjectId::new("", "ConfigMap", Some("web"), "a")].into(),
        inventory: "the inventory".into(),
        owner: Some(Tracker::parse("flux=apps.flux-system").expect("tracker")),
        denied: Default::default(),
    };
    let context = |compared| Context {
        question: Question::Orphan {
            tracker: None,
            recorded: Some(&recorded),
            compared,
            stack: None,
            needs: None,
        },
        trackers: None,
    };
    assert_eq!(outside_record(&flux_marked("a"), &context(true)), None);
    assert!(matches!(
        outside_record(&flux_marked("b"), &context(true)),
        Some(KeepReason::NotInInventory { .. })
    ));
    let unmarked = config_map("a", ObjectMeta::default());
    assert!(matches!(
        outside_record(&unmarked, &context(true)),
        Some(KeepReason::ToolWouldKeep { .. })
    ));
    assert_eq!(outside_record(&unmarked, &context(false)), None);
}

#[test]
fn terminating_objects_are_no_orphans_but_still_teardown_members() {
    let going = config_map(
        "a",
        ObjectMeta {
            deletion_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        },
    );
    assert_eq!(terminating(&going, &orphan_question()), Some(KeepReason::Terminating));
    assert_eq!(terminating(&going, &teardown(vec![])), None);
    assert_eq!(terminating(&flux_marked("b"), &orphan_question()), None);
}

#[test]
fn owned_objects_are_their_owners_and_a_teardown_leaves_only_controlled_ones() {
    let with = |controller| {
        config_map(
            "a",
            ObjectMeta {
                owner_references: Some(vec![owner(controller)]),
                ..Default::default()
            },
        )
    };
    let expected = Some(KeepReason::ControllerOwned {
        owner: "Deployment/web".into(),
    });
    assert_eq!(owned(&with(true), &orphan_question()), expected);
    assert_eq!(owned(&with(false), &orphan_question()), expected);
    assert_eq!(owned(&with(true), &teardown(vec![])), expected);
    assert_eq!(owned(&with(false), &teardown(vec![])), None);
}

#[test]
fn every_tools_keep_marker_keeps() {
    for (key, value, labelled) in [
        ("helm.sh/resource-policy", "keep", false),
        ("kustomize.toolkit.fluxcd.io/prune", "disabled", true),
        ("kustomize.toolkit.fluxcd.io/prune", "disabled", false),
    ] {
        let pairs = [(key, value)];
        let object = match labelled {
            true => config_map("a", meta(&pairs, &[])),
            false => config_map("a", meta(&[], &pairs)),
        };
        let found = keep_marked(&object, &orphan_question());
        assert!(matches!(found, Some(KeepReason::Keep { .. })), "{key}: {found:?}");
    }
    assert_eq!(keep_marked(&flux_marked("a"), &orphan_question()), None);
}

#[test]
fn a_flux_mark_without_its_namespace_is_always_ambiguous() {
    let name_only = config_map("a", meta(&[(FLUX_NAME, "apps")], &[]));
    assert!(matches!(
        ambiguous(&name_only, &orphan_question()),
        Some(KeepReason::AmbiguousMark { .. })
    ));
    let keys = [(Preset::Flux, value("apps", "flux-system"))];
    let trackers = Trackers::new(keys.iter());
    let with_index = Context {
        trackers: Some(&trackers),
        ..teardown(vec![])
    };
    // One stack of that name proves nothing: Flux writes the namespace label beside the name.
    assert!(ambiguous(&name_only, &with_index).is_some());
    assert_eq!(ambiguous(&flux_marked("a"), &with_index), None);
}

#[test]
fn an_argo_instance_label_is_ambiguous_only_where_applications_of_that_name_live_in_several_namespaces() {
    let instance = config_map("a", meta(&[("app.kubernetes.io/instance", "shop")], &[]));
    assert_eq!(ambiguous(&instance, &orphan_question()), None);
    let keys = [
        (Preset::ArgoCd, value("shop", "a")),
        (Preset::ArgoCd, value("shop", "b")),
    ];
    let trackers = Trackers::new(keys.iter());
    let context = Context {
        trackers: Some(&trackers),
        ..teardown(vec![])
    };
    let found = ambiguous(&instance, &context)
        .map(|r| r.to_string())
        .unwrap_or_default();
    assert!(found.contains("a, b"), "{found}");
}

#[test]
fn untracked_objects_are_never_a_teardowns() {
    let plain = config_map("a", ObjectMeta::default());
    assert_eq!(untracked(&plain, &teardown(vec![])), Some(KeepReason::Untracked));
    assert_eq!(untracked(&flux_marked("a"), &teardown(vec![])), None);
    assert_eq!(untracked(&plain, &orphan_question()), None);
}

#[test]
fn the_tools_own_rules_keep_helm_hooks() {
    let hook = config_map(
        "a",
        meta(
            &[("app.kubernetes.io/managed-by", "Helm")],
            &[
                ("meta.helm.sh/release-name", "web"),
                ("meta.helm.sh/release-namespace", "web"),
                ("helm.sh/hook", "pre-install"),
            ],
        ),
    );
    assert!(matches!(
        tool_rules(&hook, &teardown(vec![])),
        Some(KeepReason::ToolWouldKeep { .. })
    ));
    assert_eq!(tool_rules(&flux_marked("a"), &teardown(vec![])), None);
}

#[test]
fn a_stack_whose_tool_orphans_its_members_keeps_them() {
    let stack = stack();
    let leaving = Claim {
        leaves_members: Some("Flux would orphan it (spec.prune: false)"),
        ..claim(&stack, None)
    };
    let found = left_by_stack(&flux_marked("a"), &teardown(vec![leaving])).map(|r| r.to_string());
    assert_eq!(found.as_deref(), Some("Flux would orphan it (spec.prune: false)"));
    assert_eq!(
        left_by_stack(&flux_marked("a"), &teardown(vec![claim(&stack, None)])),
        None
    );
}

#[test]
fn a_stack_that_cannot_be_read_keeps_its_members() {
    let stack = stack();
    let unread = Claim {
        unreadable: Some("forbidden"),
        ..claim(&stack, None)
    };
    assert!(matches!(
        unreadable_record(&flux_marked("a"), &teardown(vec![unread])),
        Some(KeepReason::RecordUnreadable { .. })
    ));
}

#[test]
fn the_chain_asks_the_record_first_and_the_json_names_the_rule() {
    let stack = stack();
    let holds = record(&["a"]);
    let copy = config_map(
        "a-copy",
        meta(
            &[(FLUX_NAME, "apps"), (FLUX_NAMESPACE, "flux-system")],
            &[("helm.sh/resource-policy", "keep")],
        ),
    );
    let found = reason(&copy, &teardown(vec![claim(&stack, Some(&holds))])).expect("kept");
    assert_eq!(found.rule(), "notInInventory");
    assert_eq!(
        reason(&flux_marked("a"), &teardown(vec![claim(&stack, Some(&holds))])),
        None
    );
}

// The stacks a run deletes the members of (moved from the safeguards with `TornDown`).

use crate::model::trackers::{FLUX_HR_NAME, FLUX_HR_NAMESPACE, FLUX_KS_NAME, FLUX_KS_NAMESPACE, HELM_RELEASE_NAME};

fn key(preset: Preset, name: &str, namespace: Option<&str>) -> (Preset, MarkValue) {
    (
        preset,
        MarkValue {
            name: name.into(),
            namespace: namespace.map(str::to_string),
        },
    )
}

#[test]
fn an_object_another_live_stack_tracks_is_kept() {
    let torn_down = TornDown::new([key(Preset::Flux, "a", Some("flux-system"))]);
    let only_a = meta(&[(FLUX_KS_NAME, "a"), (FLUX_KS_NAMESPACE, "flux-system")], &[]);
    assert_eq!(tracked_elsewhere(&only_a, &torn_down), None);
    let also_h = meta(
        &[
            (FLUX_KS_NAME, "a"),
            (FLUX_KS_NAMESPACE, "flux-system"),
            (FLUX_HR_NAME, "h"),
            (FLUX_HR_NAMESPACE, "web"),
        ],
        &[],
    );
    let why = tracked_elsewhere(&also_h, &torn_down).unwrap().to_string();
    assert!(why.contains("flux-helm:web/h"), "{why}");
    let also_kpt = meta(
        &[(FLUX_KS_NAME, "a"), (FLUX_KS_NAMESPACE, "flux-system")],
        &[("config.k8s.io/owning-inventory", "inv-1")],
    );
    assert!(tracked_elsewhere(&also_kpt, &torn_down)
        .unwrap()
        .to_string()
        .contains("kpt:inv-1"));
    // Same name, other namespace: another stack.
    let other_ns = meta(&[(FLUX_KS_NAME, "a"), (FLUX_KS_NAMESPACE, "team-b")], &[]);
    assert!(tracked_elsewhere(&other_ns, &torn_down).is_some());
}

#[test]
fn the_helm_release_of_a_torn_down_helmrelease_is_covered_when_its_record_names_it() {
    let member = |release: &str| {
        meta(
            &[(FLUX_HR_NAME, "h"), (FLUX_HR_NAMESPACE, "web")],
            &[(HELM_RELEASE_NAME, release), ("meta.helm.sh/release-namespace", "web")],
        )
    };
    // helm-controller named the release `web-h` (targetNamespace `web`): the record says so.
    let torn_down = TornDown::new([
        key(Preset::FluxHelm, "h", Some("web")),
        key(Preset::Helm, "web-h", Some("web")),
    ]);
    assert_eq!(tracked_elsewhere(&member("web-h"), &torn_down), None);
    // Review finding F3: another live release whose name merely ends in `-h` is another stack.
    let other = tracked_elsewhere(&member("team-h"), &torn_down).map(|r| r.to_string());
    assert!(other.is_some_and(|why| why.contains("helm:web/team-h")));
    // No record read: the release is not known to be the HelmRelease's.
    let unrecorded = TornDown::new([key(Preset::FluxHelm, "h", Some("web"))]);
    assert!(tracked_elsewhere(&member("h"), &unrecorded).is_some());
}

#[test]
fn an_argo_cd_application_is_torn_down_by_its_full_identity() {
    let tracked = |instance: &str| {
        meta(
            &[],
            &[(
                "argocd.argoproj.io/tracking-id",
                &format!("{instance}:/ConfigMap:web/x"),
            )],
        )
    };
    let torn_down = TornDown::new([key(Preset::ArgoCd, "shop", Some("team-a"))]);
    assert_eq!(tracked_elsewhere(&tracked("team-a_shop"), &torn_down), None);
    // A name-only id belongs to the Application of that name in Argo CD's control-plane
    // namespace (argo-cd `util/argo/argo.go` `AppInstanceName`): never to `team-a/shop` once
    // a `team-a_...` id proves `team-a` is outside it.
    assert_eq!(tracked_elsewhere(&tracked("shop"), &torn_down), None);
    let outside = torn_down.clone().with_argocd_outside(["team-a".to_string()].into());
    let name_only = tracked_elsewhere(&tracked("shop"), &outside).unwrap().to_string();
    assert!(name_only.contains("argocd:shop"), "{name_only}");
    assert_eq!(tracked_elsewhere(&tracked("team-a_shop"), &outside), None);
    let other = tracked_elsewhere(&tracked("team-b_shop"), &torn_down)
        .unwrap()
        .to_string();
    assert!(other.contains("argocd:team-b/shop"), "{other}");
}

/// A compared stack named by `text` (`flux=NAME.NS`), with the marks its tool writes under
/// other names.
fn named_stack(text: &str, aliases: Vec<Mark>) -> ComparedStack {
    ComparedStack {
        tracker: Tracker::parse(text).expect("tracker"),
        aliases,
    }
}

/// [`marked_elsewhere`] asked by an orphan prune of `stack` with a desired set.
fn marked_elsewhere_of(object: &Listed, stack: &ComparedStack) -> Option<KeepReason> {
    let context = Context {
        question: Question::Orphan {
            tracker: Some(&stack.tracker),
            recorded: None,
            compared: true,
            stack: Some(stack),
            needs: None,
        },
        trackers: None,
    };
    marked_elsewhere(object, &context)
}

/// Property finding F1 (issue 24): an orphan prune of one named stack leaves what another stack
/// or tool marks too; the marks its tool writes under another name (a HelmRelease's Helm
/// release, named by its record) are its own.
#[test]
fn an_orphan_prune_of_one_stack_keeps_what_another_stack_or_tool_marks_too() {
    let (named, ask) = (named_stack, marked_elsewhere_of);
    let flux = named("flux=apps.flux-system", Vec::new());
    assert_eq!(ask(&flux_marked("only-flux"), &flux), None);
    let also_kpt = config_map(
        "also-kpt",
        meta(
            &[(FLUX_NAME, "apps"), (FLUX_NAMESPACE, "flux-system")],
            &[("config.k8s.io/owning-inventory", "inv-1")],
        ),
    );
    assert_eq!(
        ask(&also_kpt, &flux),
        Some(KeepReason::TrackedElsewhere {
            mark: "kpt:inv-1".to_string()
        })
    );
    // Named from the other side, the same object is the Flux stack's too.
    let kpt = named("kpt=inv-1", Vec::new());
    assert!(ask(&also_kpt, &kpt).is_some_and(|r| r.to_string().contains("flux:flux-system/apps")));
    // The whole chain answers the same, and only with a desired set to compare.
    let context = Context {
        question: Question::Orphan {
            tracker: Some(&flux.tracker),
            recorded: None,
            compared: true,
            stack: Some(&flux),
            needs: None,
        },
        trackers: None,
    };
    assert_eq!(
        reason(&also_kpt, &context).map(|r| r.rule()),
        Some("trackedElsewhere".into())
    );
}

/// Property finding F1 (issue 24), Helm: a HelmRelease's members carry its Helm release's
/// annotations: its own when its record names the release, another stack's when not.
#[test]
fn a_helmreleases_release_marks_are_its_own_only_by_its_record() {
    let (named, ask) = (named_stack, marked_elsewhere_of);
    let release_member = config_map(
        "chart-cm",
        meta(
            &[(FLUX_HR_NAME, "h"), (FLUX_HR_NAMESPACE, "web")],
            &[(HELM_RELEASE_NAME, "web-h"), ("meta.helm.sh/release-namespace", "web")],
        ),
    );
    let release = Mark {
        preset: Preset::Helm,
        value: MarkValue {
            name: "web-h".into(),
            namespace: Some("web".into()),
        },
    };
    assert_eq!(ask(&release_member, &named("flux-helm=h.web", vec![release])), None);
    assert!(ask(&release_member, &named("flux-helm=h.web", Vec::new())).is_some());
    // Named as the Helm release, a release a HelmRelease owns is that HelmRelease's stack: its
    // labels are the same stack's (issue 24, adversarial review), and only with that record.
    let owner = Mark {
        preset: Preset::FluxHelm,
        value: MarkValue {
            name: "h".into(),
            namespace: Some("web".into()),
        },
    };
    assert_eq!(ask(&release_member, &named("helm=web-h.web", vec![owner])), None);
    assert!(ask(&release_member, &named("helm=web-h.web", Vec::new()))
        .is_some_and(|r| r.to_string().contains("flux-helm:web/h")));
}

/// kpt's prune filters (cli-utils `pkg/apply/filter/local-namespaces-filter.go`,
/// `pkg/apply/filter/dependency-filter.go`): an orphan prune of a kpt stack keeps what the new
/// desired set needs — the Namespace its objects live in, what their `depends-on` names, the CRD
/// of their kind — and only for kpt: Flux and ApplySet prune have no such filter.
#[test]
fn a_kpt_orphan_prune_keeps_what_the_new_desired_set_needs() {
    use crate::cluster::discovery::{Catalog, DiscoverySource};
    use crate::stack::desired::{DesiredSet, Origin, Scopes};
    let manifests = crate::stack::manifest::parse_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: user\n  namespace: kns\n  annotations:\n    config.kubernetes.io/depends-on: /namespaces/default/ConfigMap/dep-target\n---\napiVersion: x.example.com/v1\nkind: Thing\nmetadata: {name: t, namespace: kns}\n",
        "next.yaml",
    )
    .expect("manifests");
    let catalog = Catalog::new(
        vec![kind("", "ConfigMap", true), kind("x.example.com", "Thing", true)],
        vec![],
        DiscoverySource::PerGroup,
    );
    let set = DesiredSet::from_manifests(
        &manifests,
        &Scopes::new(Some(&catalog), &manifests),
        "default",
        Origin::Manifests,
    );
    let kpt = Tracker::parse("kpt=inv-1").expect("tracker");
    let flux = Tracker::parse("flux=apps.flux-system").expect("tracker");
    let ask = |object: &Listed, tracker: &Tracker| {
        let context = Context {
            question: Question::Orphan {
                tracker: Some(tracker),
                recorded: None,
                compared: true,
                stack: None,
                needs: Some(&set.needs),
            },
            trackers: None,
        };
        reason(object, &context).map(|r| r.to_string())
    };
    let cluster_scoped = |group: &str, kind_name: &str, name: &str| {
        Listed::new(
            Arc::new(kind(group, kind_name, false)),
            ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..meta(&[], &[("config.k8s.io/owning-inventory", "inv-1")])
            },
        )
    };
    let namespace = cluster_scoped("", "Namespace", "kns");
    let crd = cluster_scoped(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "things.x.example.com",
    );
    let mut target = config_map("dep-target", meta(&[], &[("config.k8s.io/owning-inventory", "inv-1")]));
    target.meta.namespace = Some("default".into());
    let why = |object: &Listed| ask(object, &kpt).unwrap_or_default();
    assert!(
        why(&namespace).contains("namespace still in use: kns"),
        "{}",
        why(&namespace)
    );
    assert!(
        why(&target).contains("dependent scheduled for apply"),
        "{}",
        why(&target)
    );
    assert!(why(&target).contains("ConfigMap/kns/user"), "{}", why(&target));
    assert!(why(&crd).contains("dependent scheduled for apply"), "{}", why(&crd));
    assert!(why(&crd).contains("Thing.x.example.com/kns/t"), "{}", why(&crd));
    // What nothing desired needs is an orphan; Flux's prune keeps none of these.
    let mut other = namespace.clone();
    other.meta.name = Some("elsewhere".into());
    assert_eq!(ask(&other, &kpt), None);
    let unmarked = |object: &Listed| {
        let mut object = object.clone();
        object.meta.annotations = None;
        object
    };
    for object in [&namespace, &target, &crd] {
        assert_eq!(ask(&unmarked(object), &flux), None, "{}", object.id());
    }
}

/// Membership review 5, finding 1: Argo CD's cascade never deletes a CRD (argo-cd
/// `controller/appcontroller.go` `shouldBeDeleted`), so a teardown keeps it; an orphan search
/// (a sync's prune) does not.
#[test]
fn an_argo_cd_teardown_keeps_the_crds_of_its_application() {
    let mut crd_meta = meta(
        &[],
        &[(
            "argocd.argoproj.io/tracking-id",
            "shop:apiextensions.k8s.io/CustomResourceDefinition:shop/things.example.com",
        )],
    );
    crd_meta.name = Some("things.example.com".into());
    crd_meta.namespace = None;
    let crd = Listed::new(
        Arc::new(kind("apiextensions.k8s.io", "CustomResourceDefinition", false)),
        crd_meta,
    );
    assert!(matches!(
        tool_rules(&crd, &teardown(vec![])),
        Some(KeepReason::ToolWouldKeep { why }) if why.contains("never deletes a CRD")
    ));
    assert_eq!(tool_rules(&crd, &orphan_question()), None);
}

/// Membership review 6, F4: a member the stack's impersonated account may not delete stays, on
/// a teardown and in an orphan search alike, with the typed reason naming the account.
#[test]
fn what_the_impersonated_account_may_not_delete_is_kept_on_every_path() {
    let stack = stack();
    let id = ObjectId::new("", "ConfigMap", Some("web"), "a");
    let why = "system:serviceaccount:flux-system:deployer (spec.serviceAccountName) may not delete it".to_string();
    let limited = MemberRecord {
        denied: [(id.clone(), why.clone())].into(),
        ..record(&["a", "b"])
    };
    let context = teardown(vec![claim(&stack, Some(&limited))]);
    let expected = Some(KeepReason::ToolWouldKeep { why: why.clone() });
    assert_eq!(outside_record(&flux_marked("a"), &context), expected);
    assert_eq!(outside_record(&flux_marked("b"), &context), None);
    let recorded = Recorded::Ids {
        ids: [id.clone(), ObjectId::new("", "ConfigMap", Some("web"), "b")].into(),
        inventory: "the inventory".into(),
        owner: None,
        denied: [(id, why)].into(),
    };
    let search = Context {
        question: Question::Orphan {
            tracker: None,
            recorded: Some(&recorded),
            compared: true,
            stack: None,
            needs: None,
        },
        trackers: None,
    };
    assert_eq!(outside_record(&flux_marked("a"), &search), expected);
    assert_eq!(outside_record(&flux_marked("b"), &search), None);
}
