//! What stays and may need what a teardown deletes, defined once: the plan
//! ([`crate::graph::live::planning_graph`]) and the re-check before every wave
//! (`prune::recheck::dependents`) list the same objects, by the same functions, and infer their
//! needs through the same builder ([`crate::graph::build`]), so that an object that needs a
//! planned one keeps it with the same reason whether it was there at plan time or came later.
//!
//! An untracked object is a stayer when
//! - its kind is one of [`STAYER_KINDS`]: webhook configurations and APIServices (an operator
//!   makes them at run time, as Kyverno and cert-manager do; they need their backend Service and
//!   workloads), PersistentVolumeClaims and PersistentVolumes (they need their StorageClass and
//!   CSI driver). They are few: every one is listed whole, in every namespace, as their needs are
//!   read from their spec;
//! - or it carries a finalizer that names an API group's controller
//!   ([`needs_its_controller`]): while it stays, it needs the operator that serves that group;
//! - or it declares what it needs itself, with `config.kubernetes.io/depends-on`
//!   ([`declares_a_need`]): while it stays, the objects it names stay (order review 6, F2);
//! - or it is a Service a stayer calls, or runs the pods such a Service selects
//!   ([`backends`]): the chain from a webhook to a tracked Deployment goes through it (F4).

use std::collections::HashSet;
use std::sync::Arc;

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::cluster::collect::{collect_where, list_objects, Collection, ListOptions, ListScope, Listed};
use crate::cluster::discovery::KindInfo;
use crate::cluster::session::Session;
use crate::error::is_forbidden;
use crate::graph::{NodeInput, KPT_DEPENDS_ON};

mod backends;

pub use backends::backends;

/// The kinds whose every object is a stayer (see the module documentation): cluster-scoped or
/// few, and each in need of what its spec names.
pub const STAYER_KINDS: [(&str, &str); 5] = [
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("apiregistration.k8s.io", "APIService"),
    ("", "PersistentVolumeClaim"),
    ("", "PersistentVolume"),
];

/// Whether objects of this kind are stayers whatever they carry ([`STAYER_KINDS`]).
pub fn is_stayer_kind(group: &str, kind: &str) -> bool {
    STAYER_KINDS.contains(&(group, kind))
}

/// Whether an object carries a finalizer that names an API group's controller (see
/// [`crate::graph::infer::finalizer_domain`]), or one without a dot that the control plane does not
/// serve ([`crate::graph::infer::served_by_an_operator`]): tracked or not, while it stays it needs the
/// operator that serves it.
pub fn needs_its_controller(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .iter()
        .flatten()
        .any(|f| crate::graph::infer::served_by_an_operator(f))
}

/// Whether an untracked object is a stayer by what it carries: a finalizer that names an API
/// group's controller ([`needs_its_controller`]) or its own `config.kubernetes.io/depends-on`.
/// While it stays, it keeps what it needs; the plan and the re-check list it by this predicate.
pub fn declares_a_need(meta: &ObjectMeta) -> bool {
    needs_its_controller(meta)
        || meta
            .annotations
            .as_ref()
            .is_some_and(|annotations| annotations.contains_key(KPT_DEPENDS_ON))
}

/// A kind of [`STAYER_KINDS`] that could not be listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unlisted {
    /// `Kind.group`.
    pub kind: String,
    /// Whether the user may not list it (the plan reports it; the re-check, which saw the plan
    /// accept it, does not report it again).
    pub forbidden: bool,
    /// Why, for the warning.
    pub why: String,
}

/// The objects of [`STAYER_KINDS`], whole.
#[derive(Debug, Default)]
pub struct Whole {
    /// Each object with its whole body (`apiVersion` set, as inference reads it).
    pub objects: Vec<(Listed, Value)>,
    /// The kinds that could not be listed: what their objects need is unknown.
    pub unlisted: Vec<Unlisted>,
    /// The CRDs without a conversion webhook, trimmed as [`trimmed_crds`] reads them: the body of
    /// a CRD that is a node for another reason (inference reads nothing more of it).
    pub crd_bodies: std::collections::HashMap<crate::model::identity::ObjectId, Value>,
}

/// One kind's whole objects, or why they could not be listed.
type Listing = Result<Vec<kube::api::DynamicObject>, kube::Error>;

/// Lists every object of [`STAYER_KINDS`] that the server serves, whole, in every namespace.
pub async fn list_whole(session: &Session) -> Whole {
    let kinds: Vec<Arc<KindInfo>> = STAYER_KINDS
        .iter()
        .filter_map(|(group, kind)| session.catalog.get(group, kind).cloned())
        .collect();
    let client = &session.connection.client;
    let listed: Vec<(Arc<KindInfo>, Listing)> = stream::iter(kinds)
        .map(|kind| async move {
            // Each page is retried (`list_objects`).
            let found = list_objects(client, &kind, None, None).await;
            (kind, found)
        })
        .buffer_unordered(STAYER_KINDS.len())
        .collect()
        .await;
    let mut whole = Whole::default();
    for (kind, found) in listed {
        match found {
            Ok(objects) => whole.objects.extend(objects.into_iter().map(|object| {
                let mut body = object.data;
                if let Some(fields) = body.as_object_mut() {
                    fields.insert("apiVersion".into(), kind.api_version().into());
                }
                (Listed::new(kind.clone(), object.metadata), body)
            })),
            Err(err) => whole.unlisted.push(Unlisted {
                kind: kind.kind_with_group(),
                forbidden: is_forbidden(&err),
                why: crate::error::root_cause(&err),
            }),
        }
    }
    conversion_crds(session, &mut whole).await;
    finalized_namespaces(session, &mut whole).await;
    operator_rbac(session, &mut whole).await;
    operator_workloads(session, &mut whole).await;
    whole.objects.sort_by_key(|(listed, _)| listed.id());
    whole.objects.dedup_by_key(|(listed, _)| listed.id());
    whole
}

/// Adds to `whole` the workloads, tracked or not, that run with a ServiceAccount bound by one
/// of the bindings [`operator_rbac`] kept: an operator installed by hand, that no stack tracks,
/// is then a node that stays, and keeps the RBAC it runs with, which a stack may track (order
/// review 10: a tracked ClusterRole was deleted beside the custom resource its untracked
/// operator had to finalize). Listed in the namespaces of those accounts only. A namespace the
/// user may not list workloads in is warned about, as before this listing existed.
async fn operator_workloads(session: &Session, whole: &mut Whole) {
    let subjects = bound_subjects(whole);
    let Some(namespaces) = subject_namespaces(&subjects) else {
        return;
    };
    tracing::debug!("stayers: {} subject(s) of operator RBAC", subjects.len());
    let bound = |account: &(String, String)| {
        subjects
            .iter()
            .any(|(subject, namespace)| crate::graph::infer::subject_binds(subject, namespace.as_deref(), account))
    };
    // What runs pods; a ReplicaSet, Job or Pod only when bare
    // ([`crate::graph::infer::may_run_an_operator`]).
    for (group, kind) in crate::graph::infer::POD_KINDS {
        let Some(info) = session.catalog.get(group, kind).cloned() else {
            continue;
        };
        for namespace in &namespaces {
            let objects = match list_objects(&session.connection.client, &info, namespace.as_deref(), None).await {
                Ok(objects) => objects,
                Err(err) if is_forbidden(&err) => {
                    tracing::warn!(
                        "cannot list {} in {}: an operator there that no stack tracks is not found ({})",
                        info.kind_with_group(),
                        namespace.as_deref().unwrap_or("every namespace"),
                        crate::error::root_cause(&err)
                    );
                    continue;
                }
                Err(err) => {
                    whole.unlisted.push(Unlisted {
                        kind: info.kind_with_group(),
                        forbidden: false,
                        why: crate::error::root_cause(&err),
                    });
                    continue;
                }
            };
            for object in objects.into_iter().filter(|o| {
                let owned = o.metadata.owner_references.as_ref().is_some_and(|r| !r.is_empty());
                crate::graph::infer::may_run_an_operator(group, kind, owned)
            }) {
                let mut body = object.data;
                if let Some(fields) = body.as_object_mut() {
                    fields.insert("apiVersion".into(), info.api_version().into());
                }
                let listed = Listed::new(info.clone(), object.metadata);
                if crate::graph::infer::service_account_of(&listed, &body).is_some_and(|account| bound(&account)) {
                    tracing::debug!("stayers: {} runs with operator RBAC", listed.id());
                    whole.objects.push((listed, body));
                }
            }
        }
    }
}

/// The subjects of the bindings among `whole`, each with its binding's namespace (`None` for a
/// ClusterRoleBinding).
fn bound_subjects(whole: &Whole) -> Vec<(Value, Option<String>)> {
    whole
        .objects
        .iter()
        .filter(|(listed, _)| listed.kind.group == "rbac.authorization.k8s.io" && listed.kind.kind.ends_with("Binding"))
        .flat_map(|(listed, body)| {
            let namespace = listed.meta.namespace.clone();
            body.get("subjects")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(move |subject| (subject.clone(), namespace.clone()))
        })
        .collect()
}

/// Where the ServiceAccounts `subjects` may bind live, as the RBAC authorizer reads them (see
/// `infer::subject_binds`): a ServiceAccount's namespace (its binding's by default), that of a
/// `User` `system:serviceaccount:NS:NAME` or a `Group` `system:serviceaccounts:NS`; every
/// namespace (`None`) for the `Group` `system:serviceaccounts`. `None` when they bind no
/// ServiceAccount.
fn subject_namespaces(subjects: &[(Value, Option<String>)]) -> Option<std::collections::BTreeSet<Option<String>>> {
    let mut namespaces = std::collections::BTreeSet::new();
    for (subject, binding_namespace) in subjects {
        let field = |key: &str| subject.get(key).and_then(Value::as_str);
        let name = field("name").unwrap_or_default();
        let namespace = match field("kind") {
            Some("ServiceAccount") => field("namespace")
                .map(str::to_string)
                .or_else(|| binding_namespace.clone()),
            Some("User") => name
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.split_once(':'))
                .map(|(namespace, _)| namespace.to_string()),
            Some("Group") if name == "system:serviceaccounts" => return Some([None].into()),
            Some("Group") => name.strip_prefix("system:serviceaccounts:").map(str::to_string),
            _ => None,
        };
        if let Some(namespace) = namespace {
            namespaces.insert(Some(namespace));
        }
    }
    (!namespaces.is_empty()).then_some(namespaces)
}

/// Adds to `whole` every Namespace whose `spec.finalizers` hold one an operator serves
/// ([`crate::graph::infer::namespace_spec_finalizers`]: any but `kubernetes`), whole, tracked or not:
/// while it stays, it needs that operator, as an object whose `metadata.finalizers` name it
/// ([`declares_a_need`], which reads metadata only) does (order review 9, F2).
async fn finalized_namespaces(session: &Session, whole: &mut Whole) {
    let Some(kind) = session.catalog.get("", "Namespace").cloned() else {
        return;
    };
    match list_objects(&session.connection.client, &kind, None, None).await {
        Ok(objects) => whole.objects.extend(
            objects
                .into_iter()
                .filter(|object| !crate::graph::infer::namespace_spec_finalizers(&object.data).is_empty())
                .map(|object| {
                    let mut body = object.data;
                    if let Some(fields) = body.as_object_mut() {
                        fields.insert("apiVersion".into(), kind.api_version().into());
                    }
                    (Listed::new(kind.clone(), object.metadata), body)
                }),
        ),
        Err(err) => whole.unlisted.push(Unlisted {
            kind: kind.kind_with_group(),
            forbidden: is_forbidden(&err),
            why: crate::error::root_cause(&err),
        }),
    }
}

/// The RBAC kinds, roles first.
const RBAC_KINDS: [&str; 4] = ["ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"];

/// Adds to `whole` the Roles and ClusterRoles that may name an operator
/// ([`crate::graph::infer::may_name_an_operator`]: they let update an operator's API group, or write
/// resources they name) and the bindings that grant them, tracked or not: what ties a custom
/// resource's finalizer to the workload bound to them when no stack holds both its CRD and its
/// operator (order review 6, F-B), a finalizer that names no group of its object to the
/// workloads that may update it, and a volume to the provisioner that serves its driver (order
/// review 7).
async fn operator_rbac(session: &Session, whole: &mut Whole) {
    let mut roles: HashSet<(String, Option<String>, String)> = HashSet::new();
    for kind in RBAC_KINDS {
        let Some(info) = session.catalog.get("rbac.authorization.k8s.io", kind).cloned() else {
            continue;
        };
        let objects = match list_objects(&session.connection.client, &info, None, None).await {
            Ok(objects) => objects,
            Err(err) => {
                whole.unlisted.push(Unlisted {
                    kind: info.kind_with_group(),
                    forbidden: is_forbidden(&err),
                    why: crate::error::root_cause(&err),
                });
                continue;
            }
        };
        let kept_roles = match kind.ends_with("Binding") {
            false => naming_roles(&objects, kind == "ClusterRole"),
            true => Vec::new(),
        };
        for (index, object) in objects.into_iter().enumerate() {
            let namespace = object.metadata.namespace.clone();
            let name = object.metadata.name.clone().unwrap_or_default();
            let kept = match kind.ends_with("Binding") {
                false => kept_roles.get(index).copied().unwrap_or(false),
                true => crate::graph::infer::role_ref(&object.data).is_some_and(|(role, role_name)| {
                    let scope = namespace.clone().filter(|_| role == "Role");
                    roles.contains(&(role, scope, role_name))
                }),
            };
            if !kept {
                continue;
            }
            if !kind.ends_with("Binding") {
                roles.insert((kind.to_string(), namespace, name));
            }
            let mut body = object.data;
            if let Some(fields) = body.as_object_mut() {
                fields.insert("apiVersion".into(), info.api_version().into());
            }
            whole.objects.push((Listed::new(info.clone(), object.metadata), body));
        }
    }
}

/// Which of the Roles or ClusterRoles `listed` may name an operator
/// ([`crate::graph::infer::may_name_an_operator`]) and, for ClusterRoles (`cluster`), which aggregate one
/// that does, up the chain ([`crate::graph::infer::aggregates`]): a binding of such an aggregated
/// ClusterRole grants what its pieces grant (order review 9, F1). A default role of the control
/// plane ([`crate::graph::infer::BOOTSTRAPPING`]) names no operator by its built-in grants, nor by what
/// it aggregates.
fn naming_roles(listed: &[kube::api::DynamicObject], cluster: bool) -> Vec<bool> {
    let default = |object: &kube::api::DynamicObject| {
        let labels = object.metadata.labels.as_ref();
        let (key, value) = crate::graph::infer::BOOTSTRAPPING;
        labels.and_then(|l| l.get(key)).is_some_and(|v| v == value)
    };
    let mut kept: Vec<bool> = listed
        .iter()
        .map(|object| crate::graph::infer::may_name_an_operator(&object.data, default(object)))
        .collect();
    if !cluster {
        return kept;
    }
    let aggregating: Vec<usize> = (0..listed.len())
        .filter(|&i| !default(&listed[i]) && listed[i].data.get("aggregationRule").is_some())
        .collect();
    let labels: Vec<std::collections::BTreeMap<String, String>> = listed
        .iter()
        .map(|object| object.metadata.labels.clone().unwrap_or_default())
        .collect();
    loop {
        let added: Vec<usize> = aggregating
            .iter()
            .copied()
            .filter(|&role| !kept[role])
            .filter(|&role| {
                (0..listed.len()).any(|piece| {
                    kept[piece]
                        && piece != role
                        && crate::graph::infer::aggregates(
                            &listed[role].data,
                            listed[piece].metadata.name.as_deref().unwrap_or_default(),
                            &labels[piece],
                        )
                })
            })
            .collect();
        if added.is_empty() {
            return kept;
        }
        for role in added {
            kept[role] = true;
        }
    }
}

/// Adds to `whole` every CRD whose conversion webhook calls a Service
/// ([`crate::graph::infer::conversion_client_config`]), with only that stanza of its body
/// ([`trimmed_crds`]), and the trimmed bodies of the others to [`Whole::crd_bodies`]. While it
/// stays, such a CRD needs that Service and what serves it (order review 6, F-D).
async fn conversion_crds(session: &Session, whole: &mut Whole) {
    let Some(kind) = session.catalog.get(CRD.0, CRD.1).cloned() else {
        return;
    };
    match trimmed_crds(session, &kind).await {
        Ok(found) => {
            for (object, body) in found {
                match body.pointer("/spec/conversion").is_some() {
                    true => whole.objects.push((object, body)),
                    false => {
                        whole.crd_bodies.insert(object.id(), body);
                    }
                }
            }
        }
        Err(err) => whole.unlisted.push(Unlisted {
            kind: kind.kind_with_group(),
            forbidden: is_forbidden(&err),
            why: crate::error::root_cause(&err),
        }),
    }
}

/// Every CRD (`kind`), with only what inference reads of its body: its `apiVersion` and, when
/// its conversion webhook calls a Service, its `spec.conversion`. CRD bodies are large (their
/// schemas), so each page is trimmed as it arrives. The one source of a CRD's conversion edge,
/// for the plan, the re-check ([`list_whole`]) and `graph` ([`crate::graph::live::attach_specs`]).
pub async fn trimmed_crds(session: &Session, kind: &Arc<KindInfo>) -> Result<Vec<(Listed, Value)>, kube::Error> {
    let mut found = Vec::new();
    let take = |page: Vec<kube::api::DynamicObject>| {
        for object in page {
            let mut body = serde_json::json!({"apiVersion": kind.api_version(), "spec": {}});
            if let Some(conversion) = conversion_stanza(&object.data) {
                body["spec"]["conversion"] = conversion;
            }
            found.push((Listed::new(kind.clone(), object.metadata), body));
        }
    };
    let query = crate::cluster::collect::ListQuery::default();
    crate::cluster::collect::list_object_pages(&session.connection.client, kind, &query, take).await?;
    Ok(found)
}

/// A CRD's `spec.conversion`, when it calls a webhook backed by a Service.
fn conversion_stanza(crd: &Value) -> Option<Value> {
    let client_config = crate::graph::infer::conversion_client_config(crd)?;
    crate::graph::infer::service_of_client_config(client_config)?;
    crd.pointer("/spec/conversion").cloned()
}

/// The graph input of a stayer listed whole: its metadata and its body, which inference reads.
pub fn input_of_whole(object: &Listed, body: &Value) -> NodeInput {
    NodeInput {
        body: Some(body.clone()),
        ..crate::graph::live::input_from_listed(object)
    }
}

/// The kinds the given CRDs (by name, `plural.group`) serve.
pub fn kinds_of_crds(session: &Session, crds: &HashSet<String>) -> Vec<Arc<KindInfo>> {
    session
        .catalog
        .listable()
        .filter(|k| crds.contains(k.crd_name().as_str()))
        .cloned()
        .collect()
}

/// The names of the tracked CRDs among `objects`: their custom resources are looked for in every
/// namespace ([`list_finalized`]).
pub fn tracked_crds<'a>(objects: impl IntoIterator<Item = &'a Listed>) -> HashSet<String> {
    let tracking = crate::model::trackers::Selection {
        tracking_objects: true,
        ..Default::default()
    };
    objects
        .into_iter()
        .filter(|o| (o.kind.group.as_str(), o.kind.kind.as_str()) == CRD)
        .filter(|o| tracking.matches(&o.meta))
        .map(|o| o.name().to_string())
        .collect()
}

/// The group and kind of a CustomResourceDefinition.
const CRD: (&str, &str) = ("apiextensions.k8s.io", "CustomResourceDefinition");

/// The stayers by what they carry ([`declares_a_need`]: a finalizer naming a controller, their own
/// `depends-on`), as the plan and the re-check both look for
/// them: with `in_scope`, those of every listable kind in `scope`; and those of the `everywhere`
/// kinds (the custom resources of the tracked CRDs, [`kinds_of_crds`]) in every namespace. The
/// re-check's own listing covers the first part already (the same predicate over the same kinds
/// in the same scope), so it asks only for the second, and only when its scope is a namespace.
pub async fn list_finalized(
    session: &Session,
    scope: &ListScope,
    in_scope: bool,
    everywhere: Vec<Arc<KindInfo>>,
) -> Collection {
    let client = &session.connection.client;
    let options = ListOptions::default();
    let scoped: Vec<Arc<KindInfo>> = match in_scope {
        true => session.catalog.listable().cloned().collect(),
        false => Vec::new(),
    };
    let everywhere_needed = !everywhere.is_empty() && matches!(scope, ListScope::Namespace(_));
    let everywhere = match everywhere_needed {
        true => everywhere,
        false => Vec::new(),
    };
    let (mut found, elsewhere) = futures::join!(
        collect_where(client, &scoped, scope, declares_a_need, options),
        collect_where(client, &everywhere, &ListScope::AllNamespaces, declares_a_need, options)
    );
    found.objects.extend(elsewhere.objects);
    found.failures.extend(elsewhere.failures);
    found.not_served.extend(elsewhere.not_served);
    let relist = |again: Vec<Arc<KindInfo>>| async move {
        collect_where(client, &again, &ListScope::AllNamespaces, declares_a_need, options).await
    };
    session.settle_not_served(&mut found, relist).await;
    let mut seen = HashSet::new();
    found.objects.retain(|o| seen.insert(o.id()));
    found
}
