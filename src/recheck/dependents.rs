//! The re-check's look for new dependents: between the plan and a wave, an object the plan does
//! not delete (another stack's, a newcomer) may have started to depend on an object of the wave.
//! Just before the wave, the objects that can declare such a dependency are listed again and the
//! planner's rule, [`crate::safeguards::needed_by_staying`], is applied to the wave once more.
//!
//! Every declared edge of [`crate::graph`] has its source here: Flux `spec.dependsOn` (the
//! Kustomizations and HelmReleases in scope, whole objects), `config.kubernetes.io/depends-on`,
//! kapp `change-rule` and `change-group` annotations, and Argo CD sync waves (the objects of the
//! wave's applications). As at plan time, only tracked objects and tracking objects are nodes;
//! Namespace and CRD contents are the re-check's other half ([`crate::cascade::contents`]). The
//! listing is metadata only, and only the objects that declare something are kept.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::core::ObjectMeta;

use crate::collect::{collect_where, list_objects, ListFailure, ListOptions, ListScope, Listed};
use crate::error::is_forbidden;
use crate::graph::{build, BuildOptions, NodeInput, NodeStatus, KPT_DEPENDS_ON};
use crate::safeguards::{dies_with_plan, needed_by_staying};
use crate::session::Session;
use crate::trackers::{marks, Preset, Selection, FLUX_KINDS};

/// What was listed again: the objects that declare dependencies, and the Flux objects with their
/// `spec.dependsOn`.
#[derive(Debug, Default)]
pub struct Declaring {
    /// Each object with the Flux `spec.dependsOn` it holds (empty for other kinds).
    pub objects: Vec<(Listed, Vec<crate::identity::ObjectId>)>,
    /// Kinds that could not be listed again, for another reason than being forbidden (a kind the
    /// user may not list was not seen at plan time either).
    pub failed: Vec<String>,
}

/// The Argo CD applications the objects belong to (their sync waves order them).
pub fn argo_apps<'a>(objects: impl IntoIterator<Item = &'a ObjectMeta>) -> HashSet<String> {
    objects
        .into_iter()
        .flat_map(marks)
        .filter(|m| m.preset == Preset::ArgoCd)
        .map(|m| m.value.name)
        .collect()
}

/// Whether an object declares something that can make it depend on another object (besides Flux
/// `spec.dependsOn`, which is read from the whole object): `depends-on`, a kapp change rule or
/// group, or a sync wave in one of `apps`.
pub fn declares(meta: &ObjectMeta, apps: &HashSet<String>) -> bool {
    let annotated = meta.annotations.as_ref().is_some_and(|annotations| {
        annotations
            .keys()
            .any(|k| k == KPT_DEPENDS_ON || k.starts_with("kapp.k14s.io/change-"))
    });
    annotated
        || (!apps.is_empty()
            && marks(meta)
                .iter()
                .any(|m| m.preset == Preset::ArgoCd && apps.contains(&m.value.name)))
}

/// Whether an object carries a finalizer that names an API group's controller (see
/// [`crate::infer::finalizer_domain`]): tracked or not, while it stays it needs the operator that
/// serves that group, as the planning graph's finalized custom resources do.
pub fn finalized_by_a_controller(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .iter()
        .flatten()
        .any(|f| crate::infer::finalizer_domain(f).is_some())
}

const CRD: (&str, &str) = ("apiextensions.k8s.io", "CustomResourceDefinition");

/// Lists again, in `scope`, the tracked and tracking objects that declare a dependency (see
/// [`declares`]), the objects a controller finalizes (see [`finalized_by_a_controller`]) and
/// every CRD (what ties a finalizer to its operator), and the Flux Kustomizations and
/// HelmReleases with their `spec.dependsOn`.
pub async fn relist(
    session: &Session,
    catalog: &crate::discovery::Catalog,
    scope: &ListScope,
    options: ListOptions,
    apps: &HashSet<String>,
) -> Declaring {
    // As the teardown's plan sees them: tracked objects and tracking objects.
    let selection = Selection {
        tracking_objects: true,
        ..Default::default()
    };
    let kinds: Vec<Arc<crate::discovery::KindInfo>> = catalog
        .listable()
        .filter(|k| !FLUX_KINDS.contains(&(k.group.as_str(), k.kind.as_str())))
        .cloned()
        .collect();
    let keep =
        move |meta: &ObjectMeta| (selection.matches(meta) && declares(meta, apps)) || finalized_by_a_controller(meta);
    let client = &session.connection.client;
    let (crds, others): (Vec<_>, Vec<_>) = kinds
        .into_iter()
        .partition(|k| (k.group.as_str(), k.kind.as_str()) == CRD);
    let mut listed = collect_where(client, &others, scope, &keep, options).await;
    let relist = |again: Vec<Arc<crate::discovery::KindInfo>>| {
        let keep = &keep;
        async move { collect_where(client, &again, scope, keep, options).await }
    };
    session.settle_not_served(&mut listed, relist).await;
    let every_crd = collect_where(client, &crds, scope, &|_: &ObjectMeta| true, options).await;
    listed.objects.extend(every_crd.objects);
    listed.failures.extend(every_crd.failures);
    let mut found = Declaring {
        objects: listed.objects.into_iter().map(|o| (o, Vec::new())).collect(),
        failed: listed
            .failures
            .iter()
            .filter(|f| f.failure != ListFailure::Forbidden)
            .map(|f| f.kind.kind_with_group())
            .collect(),
    };
    let namespace = match scope {
        ListScope::Namespace(ns) => Some(ns.as_str()),
        ListScope::AllNamespaces => None,
    };
    for (group, kind) in FLUX_KINDS {
        let Some(info) = catalog.get(group, kind) else {
            continue;
        };
        match list_objects(client, info, namespace, None).await {
            Ok(objects) => found.objects.extend(objects.into_iter().map(|o| {
                let listed = Listed::new(info.clone(), o.metadata);
                let depends_on = NodeInput::flux_depends_on(&listed.id(), &o.data);
                (listed, depends_on)
            })),
            Err(err) if is_forbidden(&err) => {}
            Err(_) => found.failed.push(info.kind_with_group()),
        }
    }
    found
}

/// Where each planned object stands as a wave is about to be deleted.
#[derive(Debug, Default)]
pub struct Standing {
    /// UIDs deleted by an earlier wave or about to be deleted by this one: they keep nothing.
    pub leaving: HashSet<String>,
    /// UIDs the plan still deletes (not dropped, not withheld): what they own dies with them.
    pub planned: HashSet<String>,
    /// UIDs of the cascade victims the plan accepted whose Namespace or CRD it still deletes:
    /// they die with it, and keep nothing.
    pub victims: HashSet<String>,
}

/// The wave's `candidates` (objects as they are now) that an object that stays depends on, by
/// UID, each with the reason: the planner's needed-by-staying rule over `declaring`, on a graph
/// built as the plan's was (`options`: [`BuildOptions::for_catalog`], inference included, so that
/// a custom resource made since the plan keeps the operator its finalizer names).
pub fn needed_now(
    declaring: &[(Listed, Vec<crate::identity::ObjectId>)],
    candidates: &[Listed],
    standing: &Standing,
    options: &BuildOptions,
) -> BTreeMap<String, String> {
    let inputs: Vec<NodeInput> = candidates
        .iter()
        .map(|o| (o, &[][..]))
        .chain(declaring.iter().map(|(o, deps)| (o, deps.as_slice())))
        .map(|(object, depends_on)| input_of(object, depends_on))
        .collect();
    let graph = build(&inputs, options);
    let objects: HashMap<crate::identity::ObjectId, &Listed> = declaring
        .iter()
        .map(|(o, _)| (o.id(), o))
        .chain(candidates.iter().map(|o| (o.id(), o)))
        .collect();
    let owners_of: HashMap<String, Vec<String>> = objects
        .values()
        .map(|o| {
            let owners = o
                .meta
                .owner_references
                .iter()
                .flatten()
                .map(|r| r.uid.clone())
                .collect();
            (o.uid().to_string(), owners)
        })
        .collect();
    let wave: HashSet<usize> = candidates.iter().filter_map(|o| graph.find(&o.id())).collect();
    let stays = |index: usize| {
        graph.nodes[index].status == NodeStatus::Selected
            && objects.get(&graph.nodes[index].id).is_some_and(|o| {
                !standing.leaving.contains(o.uid())
                    && !standing.victims.contains(o.uid())
                    && !dies_with_plan(&o.meta, &standing.planned, &owners_of)
            })
    };
    needed_by_staying(&graph, &wave, stays)
        .into_iter()
        .filter_map(|(index, why)| {
            let object = objects.get(&graph.nodes[index].id)?;
            Some((object.uid().to_string(), format!("{why} (found by the re-check)")))
        })
        .collect()
}

fn input_of(object: &Listed, depends_on: &[crate::identity::ObjectId]) -> NodeInput {
    NodeInput {
        depends_on: depends_on.to_vec(),
        ..crate::live::input_from_listed(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{kind, meta};
    use crate::identity::ObjectId;
    use crate::trackers::{FLUX_KS_NAME, FLUX_KS_NAMESPACE};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn config_map(name: &str, stack: &str, annotations: &[(&str, &str)]) -> Listed {
        let mut meta = meta(
            &[(FLUX_KS_NAME, stack), (FLUX_KS_NAMESPACE, "flux-system")],
            annotations,
        );
        meta.name = Some(name.into());
        meta.namespace = Some("shop".into());
        meta.uid = Some(format!("uid-{name}"));
        Listed::new(Arc::new(kind("", "ConfigMap", true)), meta)
    }

    fn depends_on(name: &str) -> (&'static str, String) {
        (KPT_DEPENDS_ON, format!("/namespaces/shop/ConfigMap/{name}"))
    }

    #[test]
    fn a_new_dependent_of_another_stack_keeps_the_planned_object() {
        let base = config_map("base", "a", &[]);
        let other = config_map("other-base", "a", &[]);
        let (key, value) = depends_on("base");
        let newcomer = config_map("newcomer", "b", &[(key, &value)]);
        let standing = Standing {
            leaving: ["uid-base".into(), "uid-other-base".into()].into(),
            planned: ["uid-base".into(), "uid-other-base".into()].into(),
            victims: HashSet::new(),
        };
        let needed = needed_now(
            &[(newcomer, Vec::new())],
            &[base, other],
            &standing,
            &BuildOptions::default(),
        );
        assert_eq!(needed.keys().collect::<Vec<_>>(), vec!["uid-base"]);
        let why = &needed["uid-base"];
        assert!(why.contains("needed by ConfigMap/shop/newcomer"), "{why}");
        assert!(why.contains("found by the re-check"), "{why}");
    }

    #[test]
    fn what_leaves_or_dies_with_the_plan_keeps_nothing() {
        let base = config_map("base", "a", &[]);
        let (key, value) = depends_on("base");
        // Deleted by an earlier wave (or server dry-run): it is gone for the plan.
        let earlier = config_map("earlier", "a", &[(key, &value)]);
        // Owned by a planned object: it goes with its owner.
        let mut owned = config_map("owned", "b", &[(key, &value)]);
        owned.meta.owner_references = Some(vec![OwnerReference {
            uid: "uid-owner".into(),
            ..Default::default()
        }]);
        let standing = Standing {
            leaving: ["uid-base".into(), "uid-earlier".into()].into(),
            planned: ["uid-base".into(), "uid-earlier".into(), "uid-owner".into()].into(),
            victims: HashSet::new(),
        };
        let declaring = [(earlier, Vec::new()), (owned, Vec::new())];
        assert!(needed_now(&declaring, &[base], &standing, &BuildOptions::default()).is_empty());
    }

    #[test]
    fn a_flux_depends_on_and_a_kapp_rule_count_too() {
        let mut ks_meta = meta(&[], &[]);
        ks_meta.name = Some("base".into());
        ks_meta.namespace = Some("flux-system".into());
        ks_meta.uid = Some("uid-ks-base".into());
        let ks_kind = Arc::new(kind("kustomize.toolkit.fluxcd.io", "Kustomization", true));
        let base = Listed::new(ks_kind.clone(), ks_meta.clone());
        ks_meta.name = Some("app".into());
        ks_meta.uid = Some("uid-ks-app".into());
        let app = Listed::new(ks_kind, ks_meta);
        let app_depends = vec![ObjectId::new(
            "kustomize.toolkit.fluxcd.io",
            "Kustomization",
            Some("flux-system"),
            "base",
        )];
        let grouped = config_map("grouped", "a", &[("kapp.k14s.io/change-group", "db")]);
        let rule = config_map(
            "ruled",
            "b",
            &[("kapp.k14s.io/change-rule", "delete before deleting db")],
        );
        let standing = Standing {
            leaving: ["uid-ks-base".into(), "uid-grouped".into()].into(),
            planned: ["uid-ks-base".into(), "uid-grouped".into()].into(),
            victims: HashSet::new(),
        };
        let declaring = [(app, app_depends), (rule, Vec::new())];
        let needed = needed_now(&declaring, &[base, grouped], &standing, &BuildOptions::default());
        assert_eq!(needed.keys().collect::<Vec<_>>(), vec!["uid-grouped", "uid-ks-base"]);
        assert!(needed["uid-ks-base"].contains("dependsOn"), "{needed:?}");
        assert!(needed["uid-grouped"].contains("change-rule"), "{needed:?}");
    }

    /// Adversarial review, finding 7: a custom resource made since the plan, with the finalizer
    /// of the operator the wave deletes, keeps it — the re-check infers as the plan did.
    #[test]
    fn a_custom_resource_made_since_the_plan_keeps_the_operator_its_finalizer_names() {
        let group = "ops.example.com";
        let in_stack = |group_kind: (&str, &str, bool), namespace: Option<&str>, name: &str, stack: &str| {
            let mut meta = meta(&[(FLUX_KS_NAME, stack), (FLUX_KS_NAMESPACE, "flux-system")], &[]);
            meta.name = Some(name.into());
            meta.namespace = namespace.map(Into::into);
            meta.uid = Some(format!("uid-{name}"));
            let (g, k, namespaced) = group_kind;
            Listed::new(Arc::new(kind(g, k, namespaced)), meta)
        };
        let crd = in_stack(
            ("apiextensions.k8s.io", "CustomResourceDefinition", false),
            None,
            "gizmos.ops.example.com",
            "op",
        );
        let operator = in_stack(("apps", "Deployment", true), Some("op"), "controller", "op");
        let mut late = in_stack((group, "Gizmo", true), Some("other"), "late", "other");
        late.meta.finalizers = Some(vec![format!("{group}/cleanup")]);
        assert!(finalized_by_a_controller(&late.meta));
        assert!(!finalized_by_a_controller(&operator.meta));
        let standing = Standing {
            leaving: ["uid-controller".into()].into(),
            planned: ["uid-controller".into(), "uid-gizmos.ops.example.com".into()].into(),
            victims: HashSet::new(),
        };
        let declaring = [(crd, Vec::new()), (late, Vec::new())];
        let mut options = BuildOptions {
            infer: true,
            ..BuildOptions::default()
        };
        options
            .crd_names
            .insert((group.into(), "Gizmo".into()), "gizmos.ops.example.com".into());
        let needed = needed_now(&declaring, std::slice::from_ref(&operator), &standing, &options);
        assert_eq!(needed.keys().collect::<Vec<_>>(), vec!["uid-controller"]);
        let why = &needed["uid-controller"];
        assert!(why.contains("needed by Gizmo.ops.example.com/other/late"), "{why}");
        assert!(why.contains("finalizer"), "{why}");
        // A cascade victim the plan accepted dies with its CRD: it keeps nothing.
        let dying = Standing {
            victims: ["uid-late".into()].into(),
            ..standing
        };
        assert!(needed_now(&declaring, std::slice::from_ref(&operator), &dying, &options).is_empty());
        options.infer = false;
        assert!(needed_now(&declaring, &[operator], &dying, &options).is_empty());
    }

    #[test]
    fn only_objects_that_declare_something_are_kept_from_the_relist() {
        let apps: HashSet<String> = ["shop".to_string()].into();
        assert!(declares(&meta(&[], &[(KPT_DEPENDS_ON, "/ConfigMap/x")]), &apps));
        assert!(declares(&meta(&[], &[("kapp.k14s.io/change-rule.1", "x")]), &apps));
        assert!(!declares(&meta(&[("app", "x")], &[]), &apps));
        let in_app = meta(&[], &[("argocd.argoproj.io/tracking-id", "shop:/ConfigMap:ns/x")]);
        assert!(declares(&in_app, &apps));
        assert!(!declares(&in_app, &HashSet::new()));
    }
}
