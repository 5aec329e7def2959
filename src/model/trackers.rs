//! How each GitOps tool marks what it owns, and what it marks as never to be pruned.
//! Every label and annotation here comes from the tools' own documentation (see README).

use std::fmt;

use kube::core::ObjectMeta;

use crate::error::UserError;

mod keep;
mod selection;

pub use keep::{equal_fold, helm_keeps, keep_marker};
pub use selection::Selection;

/// Flux kustomize-controller labels.
pub const FLUX_KS_NAME: &str = "kustomize.toolkit.fluxcd.io/name";
/// Flux kustomize-controller namespace label.
pub const FLUX_KS_NAMESPACE: &str = "kustomize.toolkit.fluxcd.io/namespace";
/// Flux helm-controller name label.
pub const FLUX_HR_NAME: &str = "helm.toolkit.fluxcd.io/name";
/// Flux helm-controller namespace label.
pub const FLUX_HR_NAMESPACE: &str = "helm.toolkit.fluxcd.io/namespace";
/// Flux v1 stack label.
pub const FLUX_V1_STACK: &str = "flux.weave.works/stack";
/// Flux v1 (>= 1.13) garbage-collection mark label: a per-object hash, see [`flux_v1_gc_mark`].
pub const FLUX_V1_GC_MARK: &str = "fluxcd.io/sync-gc-mark";
/// The same mark under Flux v1's older policy prefix.
pub const FLUX_V1_GC_MARK_LEGACY: &str = "flux.weave.works/sync-gc-mark";
/// ApplySet member label.
pub const APPLYSET_PART_OF: &str = "applyset.kubernetes.io/part-of";
/// cli-utils / kpt owning inventory annotation.
pub const KPT_OWNING_INVENTORY: &str = "config.k8s.io/owning-inventory";
/// kapp app label.
pub const KAPP_APP: &str = "kapp.k14s.io/app";
/// Argo CD tracking annotation.
pub const ARGOCD_TRACKING_ID: &str = "argocd.argoproj.io/tracking-id";
/// Argo CD (label tracking mode) and many charts: instance label.
pub const ARGOCD_INSTANCE: &str = "app.kubernetes.io/instance";
/// Helm release name annotation.
pub const HELM_RELEASE_NAME: &str = "meta.helm.sh/release-name";
/// Helm release namespace annotation.
pub const HELM_RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";
/// Helm's managed-by label.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Flux's Kustomization kind (group, kind): what a `flux` mark names.
pub const FLUX_KUSTOMIZATION: (&str, &str) = ("kustomize.toolkit.fluxcd.io", "Kustomization");
/// Flux's HelmRelease kind (group, kind): what a `flux-helm` mark names.
pub const FLUX_HELM_RELEASE: (&str, &str) = ("helm.toolkit.fluxcd.io", "HelmRelease");
/// The Flux kinds that track stacks (whose full objects carry `spec.dependsOn` and `spec.suspend`).
pub const FLUX_KINDS: [(&str, &str); 2] = [FLUX_KUSTOMIZATION, FLUX_HELM_RELEASE];

/// A tool whose tracking kubectl-stack reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Preset {
    /// Flux v2 kustomize-controller.
    Flux,
    /// Flux v2 helm-controller.
    FluxHelm,
    /// Flux v1 stacks.
    FluxV1,
    /// kubectl ApplySet.
    ApplySet,
    /// cli-utils / kpt live.
    Kpt,
    /// Carvel kapp.
    Kapp,
    /// Argo CD.
    ArgoCd,
    /// Helm.
    Helm,
}

impl Preset {
    /// Every preset, in the order marks are reported.
    pub const ALL: [Preset; 8] = [
        Preset::Flux,
        Preset::FluxHelm,
        Preset::FluxV1,
        Preset::ApplySet,
        Preset::Kpt,
        Preset::Kapp,
        Preset::ArgoCd,
        Preset::Helm,
    ];

    /// The preset's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Flux => "flux",
            Preset::FluxHelm => "flux-helm",
            Preset::FluxV1 => "flux-v1",
            Preset::ApplySet => "applyset",
            Preset::Kpt => "kpt",
            Preset::Kapp => "kapp",
            Preset::ArgoCd => "argocd",
            Preset::Helm => "helm",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The Flux kind (group, kind) whose object a mark of this preset names: a Kustomization for
    /// `flux`, a HelmRelease for `flux-helm`; none for the other tools.
    pub fn flux_kind(self) -> Option<(&'static str, &'static str)> {
        match self {
            Preset::Flux => Some(FLUX_KUSTOMIZATION),
            Preset::FluxHelm => Some(FLUX_HELM_RELEASE),
            _ => None,
        }
    }

    /// Whether the preset's value names something in a namespace (`NAME[.NAMESPACE]`).
    fn value_has_namespace(self) -> bool {
        matches!(self, Preset::Flux | Preset::FluxHelm | Preset::Helm)
    }

    /// The mark this tool left on an object, if any (without regard to other tools).
    fn own_mark(self, meta: &ObjectMeta) -> Option<MarkValue> {
        let labels = meta.labels.as_ref();
        let annotations = meta.annotations.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).filter(|v| !v.is_empty());
        let annotation = |key: &str| annotations.and_then(|a| a.get(key)).filter(|v| !v.is_empty());
        match self {
            Preset::Flux => Some(MarkValue::named(label(FLUX_KS_NAME)?, label(FLUX_KS_NAMESPACE))),
            Preset::FluxHelm => Some(MarkValue::named(label(FLUX_HR_NAME)?, label(FLUX_HR_NAMESPACE))),
            Preset::FluxV1 => label(FLUX_V1_STACK)
                .or_else(|| label(FLUX_V1_GC_MARK))
                .or_else(|| label(FLUX_V1_GC_MARK_LEGACY))
                .map(|v| MarkValue::named(v, None)),
            Preset::ApplySet => label(APPLYSET_PART_OF).map(|v| MarkValue::named(v, None)),
            Preset::Kpt => annotation(KPT_OWNING_INVENTORY).map(|v| MarkValue::named(v, None)),
            Preset::Kapp => label(KAPP_APP).map(|v| MarkValue::named(v, None)),
            Preset::ArgoCd => match annotation(ARGOCD_TRACKING_ID) {
                Some(id) => id.split_once(':').map(|(app, _)| MarkValue::named(app, None)),
                None => label(ARGOCD_INSTANCE).map(|v| MarkValue::named(v, None)),
            },
            Preset::Helm => Some(MarkValue::named(
                annotation(HELM_RELEASE_NAME)?,
                annotation(HELM_RELEASE_NAMESPACE),
            )),
        }
    }

    /// Server-side label selector that narrows a list to this tool's objects (a superset of
    /// what `matches` accepts), when the tool's marker is a label.
    fn server_selector(self, value: Option<&MarkValue>) -> Option<String> {
        let pair = |key: &str, value: &str| format!("{key}={value}");
        match (self, value) {
            (Preset::Flux, Some(v)) => Some(join_selector(
                std::iter::once(pair(FLUX_KS_NAME, &v.name))
                    .chain(v.namespace.as_ref().map(|n| pair(FLUX_KS_NAMESPACE, n))),
            )),
            (Preset::Flux, None) => Some(FLUX_KS_NAME.to_string()),
            (Preset::FluxHelm, Some(v)) => Some(join_selector(
                std::iter::once(pair(FLUX_HR_NAME, &v.name))
                    .chain(v.namespace.as_ref().map(|n| pair(FLUX_HR_NAMESPACE, n))),
            )),
            (Preset::FluxHelm, None) => Some(FLUX_HR_NAME.to_string()),
            (Preset::ApplySet, Some(v)) => Some(pair(APPLYSET_PART_OF, &v.name)),
            (Preset::ApplySet, None) => Some(APPLYSET_PART_OF.to_string()),
            (Preset::Kapp, Some(v)) => Some(pair(KAPP_APP, &v.name)),
            (Preset::Kapp, None) => Some(KAPP_APP.to_string()),
            // Helm marks by its annotations; `app.kubernetes.io/managed-by=Helm` is a chart
            // convention, not Helm's mark, so it cannot narrow the list (issue 19, item 9).
            (Preset::FluxV1 | Preset::Kpt | Preset::ArgoCd | Preset::Helm, _) => None,
        }
    }
}

fn join_selector(parts: impl Iterator<Item = String>) -> String {
    parts.collect::<Vec<_>>().join(",")
}

/// The value of a tool's mark: an id or a name, with the namespace where the tool records one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MarkValue {
    /// Name or id.
    pub name: String,
    /// Namespace, where the tool records one.
    pub namespace: Option<String>,
}

impl MarkValue {
    fn named(name: &str, namespace: Option<&String>) -> Self {
        Self {
            name: name.to_string(),
            namespace: namespace.cloned(),
        }
    }

    /// Whether this recorded value is the stack `wanted` names (any namespace when it gives none).
    pub fn satisfies(&self, wanted: &MarkValue) -> bool {
        self.name == wanted.name && (wanted.namespace.is_none() || self.namespace == wanted.namespace)
    }
}

/// One tool's mark on an object, e.g. `flux:flux-system/apps`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mark {
    /// The tool.
    pub preset: Preset,
    /// What the tool recorded.
    pub value: MarkValue,
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value.namespace {
            Some(ns) => write!(f, "{}:{}/{}", self.preset.name(), ns, self.value.name),
            None => write!(f, "{}:{}", self.preset.name(), self.value.name),
        }
    }
}

/// Every tool mark on an object. The `app.kubernetes.io/instance` label counts for Argo CD only
/// when no other tool marked the object (Helm charts set it too).
pub fn marks(meta: &ObjectMeta) -> Vec<Mark> {
    let mut found: Vec<Mark> = Preset::ALL
        .into_iter()
        .filter(|p| *p != Preset::ArgoCd)
        .filter_map(|preset| preset.own_mark(meta).map(|value| Mark { preset, value }))
        .collect();
    if let Some(value) = argocd_mark(meta, found.is_empty()) {
        found.push(Mark {
            preset: Preset::ArgoCd,
            value,
        });
    }
    found
}

/// Every tool mark on an object, as `list` shows it in TRACKED-BY: `flux:ns/name,kpt:id`, or
/// `<none>`.
pub fn describe_marks(meta: &ObjectMeta) -> String {
    let found: Vec<String> = marks(meta).iter().map(ToString::to_string).collect();
    if found.is_empty() {
        "<none>".to_string()
    } else {
        found.join(",")
    }
}

/// Whether any tool marked the object: `!marks(meta).is_empty()` without building the marks
/// (this runs on every listed object when no stack is named).
pub fn is_tracked(meta: &ObjectMeta) -> bool {
    Preset::ALL.iter().any(|preset| preset.own_mark(meta).is_some())
}

/// Labels that make an object a tracking object: a cli-utils/kpt inventory (ConfigMap or
/// ResourceGroup) and a kubectl ApplySet parent. They carry no member mark themselves.
pub const TRACKING_OBJECT_LABELS: [&str; 2] = ["cli-utils.sigs.k8s.io/inventory-id", APPLYSET_ID];

/// The label an ApplySet parent carries its id in (KEP-3659): see [`applyset_id`].
pub const APPLYSET_ID: &str = "applyset.kubernetes.io/id";

/// Whether the object is an inventory object or ApplySet parent (see [`TRACKING_OBJECT_LABELS`]).
pub fn is_tracking_object(meta: &ObjectMeta) -> bool {
    meta.labels.as_ref().is_some_and(|labels| {
        TRACKING_OBJECT_LABELS
            .iter()
            .any(|key| labels.get(*key).is_some_and(|v| !v.is_empty()))
    })
}

fn argocd_mark(meta: &ObjectMeta, label_counts: bool) -> Option<MarkValue> {
    let tracked_by_annotation = meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ARGOCD_TRACKING_ID));
    if tracked_by_annotation || label_counts {
        Preset::ArgoCd.own_mark(meta)
    } else {
        None
    }
}

/// `--tracker PRESET[=VALUE]`: one tool's stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    /// The tool.
    pub preset: Preset,
    /// The stack (name, id) asked for; `None` means any stack of that tool.
    pub value: Option<MarkValue>,
}

impl Tracker {
    /// Parses `PRESET[=VALUE]`. `VALUE` is `NAME[.NAMESPACE]` or `NAMESPACE/NAME` for flux,
    /// flux-helm and helm; an id or name otherwise.
    pub fn parse(text: &str) -> Result<Self, UserError> {
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (text, None),
        };
        let preset = Preset::parse(name).ok_or_else(|| {
            let known: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
            UserError::usage(format!("unknown tracker preset {name:?}"))
                .hint(format!("use one of: {}", known.join(", ")))
        })?;
        let value = match value {
            None => None,
            Some("") => return Err(UserError::usage(format!("--tracker {name}= needs a value after '='"))),
            Some(v) if preset.value_has_namespace() => Some(split_name_namespace(v)),
            Some(v) => Some(MarkValue {
                name: v.to_string(),
                namespace: None,
            }),
        };
        Ok(Self { preset, value })
    }

    /// Whether the object carries this tracker's mark. A Flux v1 gc mark is a per-object hash:
    /// any gc-marked object matches here, and `stack::policy` checks that the mark is this
    /// sync set's mark for this very object.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        if let (Preset::FluxV1, Some(wanted)) = (self.preset, &self.value) {
            let stack = meta.labels.as_ref().and_then(|l| l.get(FLUX_V1_STACK));
            return stack == Some(&wanted.name) || flux_v1_gc_mark_of(meta).is_some();
        }
        let mark = if self.preset == Preset::ArgoCd {
            argocd_mark(meta, true)
        } else {
            self.preset.own_mark(meta)
        };
        match (mark, &self.value) {
            (Some(mark), Some(wanted)) => mark.satisfies(wanted),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The label selector the server can apply for this tracker, if any.
    pub fn server_selector(&self) -> Option<String> {
        self.preset.server_selector(self.value.as_ref())
    }

    /// A value given without a namespace means the current namespace, as `flux` and `helm`
    /// take it (`--tracker helm=redis -n team-a` is release `team-a/redis`, never `team-b/redis`).
    pub fn default_namespace(&mut self, current: &str) {
        if !self.preset.value_has_namespace() {
            return;
        }
        if let Some(value) = self.value.as_mut() {
            if value.namespace.is_none() {
                value.namespace = Some(current.to_string());
            }
        }
    }
}

/// The Flux v1 gc mark an object carries, if any.
pub fn flux_v1_gc_mark_of(meta: &ObjectMeta) -> Option<&str> {
    let labels = meta.labels.as_ref()?;
    labels
        .get(FLUX_V1_GC_MARK)
        .or_else(|| labels.get(FLUX_V1_GC_MARK_LEGACY))
        .map(String::as_str)
}

/// Flux v1's resource id, `<namespace>:<kind>/<name>` with the kind lowercased and `<cluster>`
/// for cluster-scoped objects (fluxcd/flux 1.x `pkg/resource/id.go` `MakeID`,
/// `pkg/cluster/kubernetes/sync.go` `kuberesource.ResourceID`).
pub fn flux_v1_resource_id(namespace: Option<&str>, kind: &str, name: &str) -> String {
    format!("{}:{}/{name}", namespace.unwrap_or("<cluster>"), kind.to_lowercase())
}

/// The gc mark Flux v1 writes on an object of sync set `sync_set`: `sha256.` + unpadded base64url
/// of sha256(sync set name + resource id) — object-specific, so that a copied label does not
/// make the copy collectable (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go` `makeGCMark`).
pub fn flux_v1_gc_mark(sync_set: &str, resource_id: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(sync_set.as_bytes());
    hasher.update(resource_id.as_bytes());
    format!(
        "sha256.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hasher.finalize())
    )
}

/// The ApplySet id of a parent object (KEP-3659): `applyset-` + unpadded base64url of
/// sha256(`<name>.<namespace>.<Kind>.<group>`) + `-v1`.
pub fn applyset_id(name: &str, namespace: &str, kind: &str, group: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{name}.{namespace}.{kind}.{group}").as_bytes());
    format!(
        "applyset-{}-v1",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

fn split_name_namespace(value: &str) -> MarkValue {
    if let Some((namespace, name)) = value.split_once('/') {
        return MarkValue {
            name: name.to_string(),
            namespace: Some(namespace.to_string()),
        };
    }
    match value.rsplit_once('.') {
        Some((name, namespace)) => MarkValue {
            name: name.to_string(),
            namespace: Some(namespace.to_string()),
        },
        None => MarkValue {
            name: value.to_string(),
            namespace: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cluster::fixtures::meta;

    #[test]
    fn flux_marks_name_a_kustomization_or_a_helm_release() {
        assert_eq!(
            Preset::Flux.flux_kind(),
            Some(("kustomize.toolkit.fluxcd.io", "Kustomization"))
        );
        assert_eq!(
            Preset::FluxHelm.flux_kind(),
            Some(("helm.toolkit.fluxcd.io", "HelmRelease"))
        );
        let others: Vec<Preset> = Preset::ALL.into_iter().filter(|p| p.flux_kind().is_some()).collect();
        assert_eq!(others, vec![Preset::Flux, Preset::FluxHelm]);
    }

    #[test]
    fn flux_tracker_matches_name_and_namespace() {
        let object = meta(&[(FLUX_KS_NAME, "apps"), (FLUX_KS_NAMESPACE, "flux-system")], &[]);
        assert!(Tracker::parse("flux=apps").unwrap().matches(&object));
        assert!(Tracker::parse("flux=apps.flux-system").unwrap().matches(&object));
        assert!(Tracker::parse("flux=flux-system/apps").unwrap().matches(&object));
        assert!(!Tracker::parse("flux=apps.other").unwrap().matches(&object));
        assert!(!Tracker::parse("flux=infra").unwrap().matches(&object));
        assert!(Tracker::parse("flux").unwrap().matches(&object));
        assert!(!Tracker::parse("flux-helm").unwrap().matches(&object));
        assert_eq!(
            Tracker::parse("flux=apps.flux-system")
                .unwrap()
                .server_selector()
                .unwrap(),
            "kustomize.toolkit.fluxcd.io/name=apps,kustomize.toolkit.fluxcd.io/namespace=flux-system"
        );
    }

    #[test]
    fn argocd_tracks_by_annotation_or_label() {
        let annotated = meta(&[], &[(ARGOCD_TRACKING_ID, "guestbook:apps/Deployment:web/ui")]);
        let labelled = meta(&[(ARGOCD_INSTANCE, "guestbook")], &[]);
        let tracker = Tracker::parse("argocd=guestbook").unwrap();
        assert!(tracker.matches(&annotated));
        assert!(tracker.matches(&labelled));
        assert!(!Tracker::parse("argocd=other").unwrap().matches(&annotated));
        assert_eq!(tracker.server_selector(), None);
    }

    #[test]
    fn helm_chart_instance_label_is_not_called_argocd() {
        let chart = meta(
            &[(ARGOCD_INSTANCE, "web"), (MANAGED_BY, "Helm")],
            &[(HELM_RELEASE_NAME, "web"), (HELM_RELEASE_NAMESPACE, "shop")],
        );
        let found: Vec<String> = marks(&chart).iter().map(ToString::to_string).collect();
        assert_eq!(found, vec!["helm:shop/web"]);
        assert!(Tracker::parse("helm=web.shop").unwrap().matches(&chart));
        assert!(!Tracker::parse("helm=web.other").unwrap().matches(&chart));
    }

    #[test]
    fn each_preset_reads_its_marker() {
        let cases = [
            (
                "flux-helm=podinfo",
                meta(&[(FLUX_HR_NAME, "podinfo"), (FLUX_HR_NAMESPACE, "web")], &[]),
            ),
            ("flux-v1=mystack", meta(&[(FLUX_V1_STACK, "mystack")], &[])),
            (
                "applyset=applyset-abc-v1",
                meta(&[(APPLYSET_PART_OF, "applyset-abc-v1")], &[]),
            ),
            ("kpt=inv-1", meta(&[], &[(KPT_OWNING_INVENTORY, "inv-1")])),
            ("kapp=123", meta(&[(KAPP_APP, "123")], &[])),
        ];
        for (tracker, object) in cases {
            let tracker = Tracker::parse(tracker).unwrap();
            assert!(tracker.matches(&object), "{tracker:?}");
            for other in Preset::ALL.iter().filter(|p| **p != tracker.preset) {
                assert!(
                    !Tracker {
                        preset: *other,
                        value: None
                    }
                    .matches(&object),
                    "{other:?} on {tracker:?}"
                );
            }
        }
    }

    #[test]
    fn applyset_id_matches_kubectl() {
        // Computed by kubectl 1.32 for `kubectl apply -n as1 --prune --applyset=myset`.
        assert_eq!(
            applyset_id("myset", "as1", "Secret", ""),
            "applyset-0Zqv7eVfPCxmh0VRYPZn6st-Gcl54_RDjPu4HYU8Ls4-v1"
        );
    }

    #[test]
    fn unknown_preset_is_a_usage_error() {
        let err = Tracker::parse("fluxx=a").unwrap_err();
        assert_eq!(err.code, crate::error::exit::USAGE);
        assert!(err.hint.unwrap().contains("flux-helm"));
    }
}
