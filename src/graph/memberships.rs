//! Memberships of the graph: which node tracks which, by the marks and records of
//! [`crate::stack::members`].

use std::collections::HashMap;

use super::Membership;
use crate::model::trackers::{MarkValue, Preset};
use crate::stack::members::{
    argocd_outside_namespaces, full_marks, name_only_may_name, object_meta, owner_mark, NodeInput,
};

/// Which node tracks which: each node's marks matched with the tracking objects' own keys.
pub(super) fn memberships(inputs: &[NodeInput]) -> Vec<Membership> {
    let owners: HashMap<(Preset, MarkValue), usize> = inputs
        .iter()
        .enumerate()
        .filter_map(|(index, input)| owner_mark(input).map(|key| (key, index)))
        .collect();
    let metas: Vec<kube::core::ObjectMeta> = inputs.iter().map(object_meta).collect();
    let outside = argocd_outside_namespaces(&metas);
    let mut found = Vec::new();
    for (member, meta) in metas.iter().enumerate() {
        for mark in full_marks(meta) {
            let exact = owners.get(&(mark.preset, mark.value.clone()));
            // A mark that records no namespace (kpt, ApplySet, Argo CD) names its owner by name
            // alone; when owners of that name live in several namespaces it is ambiguous and
            // hangs under none of them.
            let owner = exact.or_else(|| {
                mark.value.namespace.is_none().then(|| {
                    let mut candidates = owners
                        .iter()
                        .filter(|(key, _)| name_only_may_name(&mark, key, &outside))
                        .map(|(_, i)| i);
                    let first = candidates.next();
                    candidates.next().is_none().then_some(first).flatten()
                })?
            });
            if let Some(&owner) = owner {
                if owner != member {
                    found.push(Membership { owner, member });
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::test_inputs::{ks, node};
    use crate::graph::{build, BuildOptions};
    use crate::stack::members::*;

    #[test]
    fn a_flux_stack_that_is_suspended_or_remote_or_never_installed_leaves_its_members() {
        let stack = |kind: &str, body: serde_json::Value| {
            let group = if kind == "HelmRelease" {
                "helm.toolkit.fluxcd.io"
            } else {
                "kustomize.toolkit.fluxcd.io"
            };
            let mut input = node(group, kind, Some("flux"), "s");
            input.body = Some(body);
            input
        };
        let why = |input: &NodeInput| orphans_members(input).unwrap_or_default();
        let installed = serde_json::json!({"storageNamespace": "web", "history": [{"name": "s"}]});
        assert_eq!(
            orphans_members(&stack("Kustomization", serde_json::json!({"spec": {"prune": true}}))),
            None
        );
        assert_eq!(
            orphans_members(&stack(
                "HelmRelease",
                serde_json::json!({"spec": {}, "status": installed})
            )),
            None
        );
        let remote = serde_json::json!({"spec": {"prune": true, "kubeConfig": {"secretRef": {"name": "k"}}}});
        assert!(why(&stack("Kustomization", remote)).contains("spec.kubeConfig"));
        let remote = serde_json::json!({"spec": {"kubeConfig": {"secretRef": {"name": "k"}}}, "status": installed});
        assert!(why(&stack("HelmRelease", remote)).contains("spec.kubeConfig"));
        let paused = serde_json::json!({"spec": {"prune": true, "suspend": true}});
        assert!(why(&stack("Kustomization", paused.clone())).contains("suspended"));
        // A deletion policy the stack states is named first (a user who set it mid-run also
        // changed the spec, so the run's suspension is no longer proven: both leave the members).
        let orphaning = serde_json::json!({"spec": {"prune": true, "suspend": true, "deletionPolicy": "Orphan"}});
        assert!(why(&stack("Kustomization", orphaning)).contains("deletionPolicy=Orphan"));
        // A suspension this tool set is lifted before the stack goes.
        let mut lifted = stack("Kustomization", paused);
        lifted
            .annotations_mut()
            .insert(crate::prune::suspend::SUSPENDED_BY.into(), "kubectl-stack".into());
        assert_eq!(orphans_members(&lifted), None);
        assert!(why(&stack("HelmRelease", serde_json::json!({"spec": {}}))).contains("status.storageNamespace"));
        // Not a Flux stack: no policy.
        let mut other = node("", "ConfigMap", Some("web"), "c");
        other.body = Some(serde_json::json!({"spec": {"suspend": true}}));
        assert_eq!(orphans_members(&other), None);
    }

    /// kustomize-controller prunes nothing when it cannot impersonate the ServiceAccount
    /// `spec.serviceAccountName` names (fluxcd/pkg `runtime/client/impersonator.go`
    /// `CanImpersonate`; kustomize-controller `finalize`): only an account found lets it prune.
    #[test]
    fn a_kustomization_whose_service_account_is_missing_prunes_nothing() {
        let mut input = node("kustomize.toolkit.fluxcd.io", "Kustomization", Some("team"), "apps");
        input.body = Some(serde_json::json!({"spec": {"prune": true, "serviceAccountName": "deployer"}}));
        let with = |impersonation: Impersonation| {
            let mut input = input.clone();
            input.impersonation = impersonation;
            orphans_members(&input)
        };
        assert_eq!(with(Impersonation::Found), None);
        assert!(with(Impersonation::Missing).unwrap().contains("team/deployer"));
        assert!(with(Impersonation::Missing).unwrap().contains("does not exist"));
        assert!(with(Impersonation::Unreadable("forbidden".into()))
            .unwrap()
            .contains("forbidden"));
        assert!(with(Impersonation::NotLookedUp).is_some());
        // No account named: nothing to impersonate, nothing looked up.
        input.body = Some(serde_json::json!({"spec": {"prune": true, "serviceAccountName": ""}}));
        assert_eq!(orphans_members(&input), None);
    }

    /// helm-controller impersonates a HelmRelease's `spec.serviceAccountName` in the HelmRelease's
    /// namespace, and skips `helm uninstall` when that account is not found (fluxcd/helm-controller
    /// `reconcileReleaseDeletion`): the same rule as a Kustomization's, named for helm-controller.
    #[test]
    fn a_helmrelease_whose_service_account_is_missing_uninstalls_nothing() {
        let mut input = node("helm.toolkit.fluxcd.io", "HelmRelease", Some("team"), "web");
        let installed = serde_json::json!({"storageNamespace": "team", "history": [{"name": "web"}]});
        input.body = Some(serde_json::json!({"spec": {"serviceAccountName": "deployer"}, "status": installed}));
        assert_eq!(
            service_account_named(&input.id, input.body.as_ref().unwrap()),
            Some("deployer")
        );
        let with = |impersonation: Impersonation| {
            let mut input = input.clone();
            input.impersonation = impersonation;
            orphans_members(&input)
        };
        assert_eq!(with(Impersonation::Found), None);
        assert_eq!(with(Impersonation::Limited(Default::default())), None);
        let missing = with(Impersonation::Missing).unwrap();
        assert!(missing.contains("team/deployer"), "{missing}");
        assert!(missing.contains("helm-controller cannot impersonate it"), "{missing}");
        assert!(with(Impersonation::NotLookedUp).is_some());
        // Not a Flux stack: its spec.serviceAccountName (a Pod's, say) names nothing impersonated.
        let pod = node("", "Pod", Some("team"), "p");
        assert_eq!(
            service_account_named(&pod.id, &serde_json::json!({"spec": {"serviceAccountName": "x"}})),
            None
        );
    }

    /// An inventory present without entries is a record that holds nothing (kustomize-controller
    /// `finalizerShouldDeleteResources`: no entries, nothing deleted), never a missing one.
    #[test]
    fn an_empty_flux_inventory_is_a_record_of_nothing() {
        let with = |status: serde_json::Value| {
            let mut input = node("kustomize.toolkit.fluxcd.io", "Kustomization", Some("flux"), "apps");
            input.body = Some(serde_json::json!({"spec": {"prune": true}, "status": status}));
            flux_inventory_of(&input).map(|record| (record.ids.len(), record.no_inventory.is_some()))
        };
        assert_eq!(with(serde_json::json!({"inventory": {}})), Some((0, false)));
        assert_eq!(
            with(serde_json::json!({"inventory": {"entries": null}})),
            Some((0, false))
        );
        assert_eq!(
            with(serde_json::json!({"inventory": {"entries": []}})),
            Some((0, false))
        );
        // No inventory at all: a record of nothing too, that says so (kustomize-controller
        // `finalizerShouldDeleteResources`: `obj.Status.Inventory == nil` deletes nothing).
        assert_eq!(with(serde_json::json!({})), Some((0, true)));
        // An entry kustomize-controller cannot read: nothing either, and it says so.
        assert_eq!(
            with(serde_json::json!({"inventory": {"entries": [{"id": "bad", "v": "v1"}]}})),
            Some((0, true))
        );
        assert_eq!(
            with(serde_json::json!({"inventory": {"entries": [{"id": "flux_a__ConfigMap", "v": "v1"}]}})),
            Some((1, false))
        );
    }

    #[test]
    fn argo_cd_applications_of_one_name_in_two_namespaces_keep_their_own_members() {
        let app = |ns: &str| node("argoproj.io", "Application", Some(ns), "shop");
        let member = |name: &str, instance: &str| {
            let mut input = node("", "ConfigMap", Some("web"), name);
            input.annotations_mut().insert(
                "argocd.argoproj.io/tracking-id".into(),
                format!("{instance}:/ConfigMap:web/{name}"),
            );
            input
        };
        let inputs = vec![
            app("team-a"),
            app("team-b"),
            member("of-a", "team-a_shop"),
            member("of-b", "team-b_shop"),
            member("name-only", "shop"),
            node("argoproj.io", "Application", Some("argocd"), "solo"),
            member("of-solo", "solo"),
        ];
        let graph = build(
            &inputs,
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        let mut found: Vec<(usize, usize)> = graph.members.iter().map(|m| (m.owner, m.member)).collect();
        found.sort();
        // `shop` alone could be either Application: it hangs under neither.
        assert_eq!(found, vec![(0, 2), (1, 3), (5, 6)]);
        let team_a = owner_mark(&inputs[0]).unwrap();
        assert_eq!(team_a.1.namespace.as_deref(), Some("team-a"));
        let mark = full_marks(&object_meta(&inputs[2])).remove(0);
        assert_eq!(
            (mark.value.name.as_str(), mark.value.namespace.as_deref()),
            ("shop", Some("team-a"))
        );
    }

    #[test]
    fn members_hang_under_their_tracking_objects() {
        let usage = ks("usage", &[]);
        let mut cm = node("", "ConfigMap", Some("shop"), "settings");
        cm.labels_mut()
            .insert("kustomize.toolkit.fluxcd.io/name".into(), "usage".into());
        cm.labels_mut()
            .insert("kustomize.toolkit.fluxcd.io/namespace".into(), "flux-system".into());
        let stranger = node("", "ConfigMap", Some("shop"), "stranger");
        let graph = build(
            &[usage, cm, stranger],
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        assert_eq!(graph.members, vec![Membership { owner: 0, member: 1 }]);
    }
}
