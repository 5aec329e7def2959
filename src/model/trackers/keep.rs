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
    let eq = |wanted: &'static str| move |v: &str| equal_fold(v, wanted);
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
/// `pkg/action/resource_policy.go` `filterManifestsToKeep`: `strings.ToLower(strings.TrimSpace(v))`):
/// `" Keep"` keeps, and so does `"\u{212A}eep"` (Go lowercases the Kelvin sign to `k`).
pub fn helm_keeps(policy: &str) -> bool {
    equal_fold(policy.trim(), "keep")
}

/// Whether `value` equals the ASCII word `wanted` under Unicode simple case folding, as Go's
/// `strings.EqualFold` decides it (fluxcd/pkg `ssa` `AnyInMetadata` compares keep markers so):
/// rune by rune, a letter matches its other case, and the only non-ASCII runes that fold to
/// ASCII letters, `ſ` (U+017F, to `s`) and the Kelvin sign (U+212A, to `k`), match them. A
/// wider match keeps more, never less.
pub fn equal_fold(value: &str, wanted: &str) -> bool {
    let folded = |c: char| match c {
        '\u{017F}' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    };
    value.chars().count() == wanted.chars().count()
        && value.chars().zip(wanted.chars()).all(|(a, b)| folded(a) == folded(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::meta;

    #[test]
    fn keep_values_fold_as_go_folds_them() {
        // Go: strings.EqualFold("di\u017Fabled", "disabled") and
        // strings.ToLower("\u212Aeep") == "keep" are both true.
        let kept = [
            meta(&[], &[("kustomize.toolkit.fluxcd.io/prune", "di\u{017F}abled")]),
            meta(&[], &[("kustomize.toolkit.fluxcd.io/prune", "DISABLED")]),
            meta(&[], &[("helm.sh/resource-policy", " \u{212A}eep ")]),
            meta(&[], &[("kapp.k14s.io/delete-strategy", "Orphan")]),
        ];
        for meta in kept {
            assert!(keep_marker(&meta).is_some(), "{:?}", meta.annotations);
        }
        let pruned = [
            meta(&[], &[("kustomize.toolkit.fluxcd.io/prune", "disable")]),
            meta(&[], &[("kustomize.toolkit.fluxcd.io/prune", "disabledx")]),
            meta(&[], &[("helm.sh/resource-policy", "kee")]),
        ];
        for meta in pruned {
            assert!(keep_marker(&meta).is_none(), "{:?}", meta.annotations);
        }
        assert!(!equal_fold("dis\u{00E4}bled", "disabled"));
    }

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
