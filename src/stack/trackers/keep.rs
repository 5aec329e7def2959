//! The markers with which each tool says "never prune this".

use std::collections::BTreeMap;

use kube::core::ObjectMeta;

/// Why an object must never be pruned: the tool marker that says so, e.g.
/// `helm.sh/resource-policy=keep`.
pub fn keep_marker(meta: &ObjectMeta) -> Option<String> {
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    let found = |map: &BTreeMap<String, String>, key: &str, accept: &dyn Fn(&str) -> bool| {
        map.get(key).filter(|v| accept(v)).map(|v| format!("{key}={v}"))
    };
    let eq = |wanted: &'static str| move |v: &str| v.eq_ignore_ascii_case(wanted);
    let either = |key: &str, accept: &dyn Fn(&str) -> bool| {
        found(annotations, key, accept).or_else(|| found(labels, key, accept))
    };
    either("kustomize.toolkit.fluxcd.io/prune", &eq("disabled"))
        .or_else(|| either("kustomize.toolkit.fluxcd.io/reconcile", &eq("disabled")))
        .or_else(|| either("kustomize.toolkit.fluxcd.io/ssa", &eq("ignore")))
        .or_else(|| {
            found(annotations, "flux.weave.works/ignore", &|v| {
                v == "true" || v == "sync_only"
            })
        })
        .or_else(|| found(annotations, "fluxcd.io/ignore", &|v| v == "true" || v == "sync_only"))
        .or_else(|| found(annotations, "cli-utils.sigs.k8s.io/on-remove", &eq("keep")))
        .or_else(|| found(annotations, "client.lifecycle.config.k8s.io/deletion", &eq("detach")))
        .or_else(|| found(annotations, "kapp.k14s.io/delete-strategy", &eq("orphan")))
        .or_else(|| found(annotations, "argocd.argoproj.io/sync-options", &argo_keeps))
        .or_else(|| found(annotations, "helm.sh/resource-policy", &helm_keeps))
}

/// Argo CD's `Prune=false`/`Delete=false` keep; `Prune=confirm`/`Delete=confirm` wait for a
/// human (argo-cd `docs/user-guide/sync-options.md`): a confirmation is not consent, so they keep too.
fn argo_keeps(options: &str) -> bool {
    options
        .split(',')
        .map(str::trim)
        .any(|o| matches!(o, "Prune=false" | "Delete=false" | "Prune=confirm" | "Delete=confirm"))
}

/// Helm trims and lowercases the policy before comparing it with `keep` (helm/helm v3
/// `pkg/action/resource_policy.go` `filterManifestsToKeep`): `" Keep"` keeps.
fn helm_keeps(policy: &str) -> bool {
    policy.trim().eq_ignore_ascii_case("keep")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::meta;

    #[test]
    fn keep_markers_of_every_tool() {
        let kept = [
            meta(&[("kustomize.toolkit.fluxcd.io/prune", "disabled")], &[]),
            meta(&[], &[("kustomize.toolkit.fluxcd.io/prune", "disabled")]),
            meta(&[], &[("kustomize.toolkit.fluxcd.io/reconcile", "disabled")]),
            meta(&[], &[("kustomize.toolkit.fluxcd.io/ssa", "Ignore")]),
            meta(&[], &[("flux.weave.works/ignore", "true")]),
            meta(&[], &[("fluxcd.io/ignore", "sync_only")]),
            meta(&[], &[("cli-utils.sigs.k8s.io/on-remove", "keep")]),
            meta(&[], &[("client.lifecycle.config.k8s.io/deletion", "detach")]),
            meta(&[], &[("kapp.k14s.io/delete-strategy", "orphan")]),
            meta(
                &[],
                &[("argocd.argoproj.io/sync-options", "ServerSideApply=true,Prune=false")],
            ),
            meta(&[], &[("argocd.argoproj.io/sync-options", "Delete=false")]),
            meta(&[], &[("helm.sh/resource-policy", "keep")]),
        ];
        for object in &kept {
            assert!(keep_marker(object).is_some(), "{object:?}");
        }
        assert!(keep_marker(&meta(&[], &[("argocd.argoproj.io/sync-options", "Prune=true")])).is_none());
        assert!(keep_marker(&meta(&[], &[("fluxcd.io/ignore", "false")])).is_none());
        assert!(keep_marker(&meta(&[("app", "x")], &[])).is_none());
    }
}
