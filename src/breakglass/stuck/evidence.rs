//! Every read a diagnosis makes, and nothing else: [`gather`] collects what the cluster says about
//! one stuck object into an [`Evidence`], which the pure rules of [`super`], [`super::waits`] and
//! [`super::controllers`] then judge (as kube-runtime's conditions are written). What many objects
//! share (Flux objects, CRDs, a namespace's content, Pods, workloads) is read once per
//! [`DiagnosisContext`].

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;

use super::controllers::{self, Controller, Workload};
use super::waits;
use crate::cluster::collect::{api_for, Collection, ListScope, Listed};
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_not_found, root_cause, LookupError};
use crate::model::identity::ObjectId;
use crate::model::trackers::marks;

/// Whether a tracking object could be found.
#[derive(Debug, Clone)]
pub(super) enum Lookup {
    /// It is there, with its body.
    Found(Box<(Listed, Value)>),
    /// It is not (404).
    Gone,
    /// It could not be read (403 or another failure): unknown, never "gone".
    Unknown(LookupError),
}

/// One object read by name.
#[derive(Debug, Clone)]
pub(super) enum Read<T> {
    /// It is there.
    Found(T),
    /// It is not (404).
    Gone,
    /// It could not be read: the root cause.
    Failed(String),
    /// The server does not serve its kind.
    NotServed,
}

/// Deployments, StatefulSets and DaemonSets everywhere, or why they could not be listed.
pub(super) type Workloads = Result<Arc<Vec<Workload>>, LookupError>;

/// What was read for one finalizer, by the rule that explains it.
#[derive(Debug, Clone)]
pub(super) enum FinalizerEvidence {
    /// `foregroundDeletion`: the objects among which the dependents are (a namespaced owner's
    /// namespace content, or a cluster-scoped owner's dependents everywhere).
    Foreground(Arc<Collection>),
    /// `orphan`: as for `foregroundDeletion`.
    Orphan(Arc<Collection>),
    /// `customresourcecleanup.apiextensions.k8s.io`: the CRD and its instances.
    CrdCleanup(CrdCleanup),
    /// `kubernetes.io/pvc-protection`: the Pods of the claim's namespace.
    PvcProtection {
        /// The Pods, or why they could not be listed.
        pods: Result<Arc<Vec<DynamicObject>>, LookupError>,
        /// The Pod kind, when served.
        pod_kind: Option<Arc<KindInfo>>,
    },
    /// `kubernetes.io/pv-protection`: the volume and the claim it is bound to.
    PvProtection(Box<PvProtection>),
    /// A finalizer a known controller removes, and the workloads that may run it.
    Controller {
        /// The controller.
        controller: Controller,
        /// Every workload, or why they could not be listed.
        workloads: Workloads,
    },
    /// No installed API group or known controller accounts for it.
    Unaccounted,
    /// The finalizer's domain names a CRD's group: the CRD, its stack, the workloads.
    CrdController {
        /// The CRD's name.
        crd: String,
        /// Who tracks it (its marks, comma-separated; empty when untracked).
        tracked: String,
        /// Every workload (not read when the CRD is untracked).
        workloads: Option<Workloads>,
    },
    /// Accounted for, but nothing more is known.
    Unexplained,
}

/// What the CRD cleanup finalizer waits for, as read.
#[derive(Debug, Clone)]
pub(super) enum CrdCleanup {
    /// The CRD could not be read: why.
    Unreadable(LookupError),
    /// The CRD's spec names no kind.
    NoKind,
    /// The CRD, its kind and its instances (with the kinds that could not be listed).
    Listed {
        /// The CRD, whole.
        crd: Box<DynamicObject>,
        /// The kind it defines.
        kind: Arc<KindInfo>,
        /// Its instances everywhere.
        instances: Collection,
    },
}

/// What the PV protection finalizer waits for, as read.
#[derive(Debug, Clone)]
pub(super) struct PvProtection {
    /// The volume, or why it could not be read.
    pub volume: Result<DynamicObject, LookupError>,
    /// The claim it is bound to; `None` when not read (the volume is not bound to a named claim).
    pub claim: Option<Read<Listed>>,
}

/// A Pod being deleted with no finalizers, and the node it is scheduled to.
#[derive(Debug, Clone)]
pub(super) struct PodEvidence {
    /// The Pod, whole.
    pub pod: DynamicObject,
    /// Its node; `None` when it has none.
    pub node: Option<Read<DynamicObject>>,
}

/// A GitOps object that tracks the stuck object, and its dependencies.
#[derive(Debug, Clone)]
pub(super) struct TrackerEvidence {
    /// The tracker.
    pub tracker: ObjectId,
    /// It, as looked up.
    pub lookup: Lookup,
    /// Its `dependsOn`, each looked up (read only when the tracker is there and not deleting).
    pub dependencies: Vec<(ObjectId, Lookup)>,
}

/// A Flux object being deleted: its dependencies and its kubeConfig Secret.
#[derive(Debug, Clone)]
pub(super) struct FluxEvidence {
    /// Its `dependsOn`, each looked up.
    pub dependencies: Vec<(ObjectId, Lookup)>,
    /// `spec.kubeConfig.secretRef`: namespace, name, and the Secret's metadata as read.
    pub kubeconfig_secret: Option<(String, String, Read<()>)>,
}

/// A Namespace being deleted, as read.
#[derive(Debug, Clone)]
pub(super) enum NamespaceEvidence {
    /// The server does not serve Namespaces.
    NotServed,
    /// It could not be read: why.
    Unreadable(LookupError),
    /// It, the unavailable APIServices, and what remains in it.
    Read {
        /// The Namespace, whole.
        namespace: Box<DynamicObject>,
        /// Unavailable APIServices: name and why.
        unavailable_api_services: Vec<(String, String)>,
        /// Every object in it (metadata).
        content: Arc<Collection>,
    },
}

/// Everything read about one stuck object: a diagnosis is a pure function of it.
#[derive(Debug, Clone, Default)]
pub(super) struct Evidence {
    /// Each finalizer, with what was read for it.
    pub finalizers: Vec<(String, FinalizerEvidence)>,
    /// A Pod being deleted without finalizers.
    pub pod: Option<PodEvidence>,
    /// Its GitOps trackers.
    pub trackers: Vec<TrackerEvidence>,
    /// A Flux object's own needs.
    pub flux: Option<FluxEvidence>,
    /// A Namespace's conditions and content.
    pub namespace: Option<NamespaceEvidence>,
}

/// Shared facts for diagnosing many objects, fetched once, and what was looked up on the way.
pub struct DiagnosisContext {
    /// Flux Kustomizations and HelmReleases, with their whole body: listed everywhere, or read
    /// one by one where listing everywhere was not allowed.
    flux: HashMap<ObjectId, Lookup>,
    /// Unavailable APIServices: name and why.
    unavailable_api_services: Vec<(String, String)>,
    /// CustomResourceDefinitions, whole.
    crds: Vec<DynamicObject>,
    /// Every object in a namespace (metadata), by namespace.
    namespace_content: HashMap<String, Arc<Collection>>,
    /// Objects anywhere that refer to a cluster-scoped owner, by the owner's UID.
    cluster_dependents: HashMap<String, Arc<Collection>>,
    /// Pods by namespace, whole, or why they could not be listed.
    pods: HashMap<String, Result<Arc<Vec<DynamicObject>>, LookupError>>,
    /// Deployments, StatefulSets and DaemonSets everywhere, or why they could not be listed.
    workloads: Option<Workloads>,
}

impl DiagnosisContext {
    /// Fetches the Flux objects, APIService availability and CRDs.
    pub async fn load(session: &Session) -> Self {
        let everywhere = Session {
            scope: ListScope::AllNamespaces,
            ..session.clone()
        };
        let flux = crate::graph::live::flux_objects(&everywhere).await.unwrap_or_default();
        let flux = flux
            .into_iter()
            .map(|(object, body)| (object.id(), Lookup::Found(Box::new((object, body)))))
            .collect();
        let unavailable_api_services = list_all(session, "apiregistration.k8s.io", "APIService")
            .await
            .into_iter()
            .filter_map(|service| {
                Some((
                    service.metadata.name.clone().unwrap_or_default(),
                    super::unavailable(&service.data)?,
                ))
            })
            .collect();
        let crds = list_all(session, "apiextensions.k8s.io", "CustomResourceDefinition").await;
        Self {
            flux,
            unavailable_api_services,
            crds,
            namespace_content: HashMap::new(),
            cluster_dependents: HashMap::new(),
            pods: HashMap::new(),
            workloads: None,
        }
    }

    /// A Flux object: from the listing, else read on its own (the user may read its namespace
    /// without listing everywhere). Forbidden or failed reads are unknown, never gone.
    async fn flux_object(&mut self, session: &Session, id: &ObjectId) -> Lookup {
        if let Some(found) = self.flux.get(id) {
            return found.clone();
        }
        let lookup = match session.catalog.get(&id.group, &id.kind) {
            None => Lookup::Gone,
            Some(kind) => {
                let api = api_for(&session.connection.client, kind, id.namespace.as_deref());
                match with_retries("get", || api.get(&id.name)).await {
                    Ok(object) => Lookup::Found(Box::new((Listed::new(kind.clone(), object.metadata), object.data))),
                    Err(err) if is_not_found(&err) => Lookup::Gone,
                    Err(err) => Lookup::Unknown(LookupError::from_request(&err)),
                }
            }
        };
        self.flux.insert(id.clone(), lookup.clone());
        lookup
    }

    /// Each object, looked up.
    async fn flux_objects(&mut self, session: &Session, ids: Vec<ObjectId>) -> Vec<(ObjectId, Lookup)> {
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            let lookup = self.flux_object(session, &id).await;
            found.push((id, lookup));
        }
        found
    }

    /// Every object in a namespace (metadata only), listed once.
    async fn namespace_content(&mut self, session: &Session, namespace: &str) -> Arc<Collection> {
        if let Some(found) = self.namespace_content.get(namespace) {
            return Arc::clone(found);
        }
        let kinds: Vec<_> = session.catalog.listable().filter(|k| k.namespaced).cloned().collect();
        let scope = ListScope::Namespace(namespace.to_string());
        let collection = crate::cluster::collect::collect_kinds(
            &session.connection.client,
            &kinds,
            &scope,
            &crate::model::trackers::Selection::everything(),
            Default::default(),
        )
        .await;
        let collection = Arc::new(collection);
        self.namespace_content
            .insert(namespace.to_string(), Arc::clone(&collection));
        collection
    }

    /// The objects among which an owner's dependents are: owner references never cross
    /// namespaces, so a namespaced owner's are beside it; a cluster-scoped owner's are listed
    /// everywhere (only those that refer to it are kept), once per owner.
    async fn dependents(&mut self, session: &Session, owner: &Listed) -> Arc<Collection> {
        if let Some(namespace) = owner.namespace() {
            return self.namespace_content(session, namespace).await;
        }
        let uid = owner.uid().to_string();
        if let Some(found) = self.cluster_dependents.get(&uid) {
            return Arc::clone(found);
        }
        let kinds: Vec<_> = session.catalog.listable().cloned().collect();
        let refers = |meta: &kube::core::ObjectMeta| {
            meta.owner_references
                .iter()
                .flatten()
                .any(|reference| reference.uid == uid)
        };
        let found = crate::cluster::collect::collect_where(
            &session.connection.client,
            &kinds,
            &ListScope::AllNamespaces,
            refers,
            Default::default(),
        )
        .await;
        let found = Arc::new(found);
        self.cluster_dependents.insert(uid, Arc::clone(&found));
        found
    }

    /// Pods of a namespace, whole, listed once.
    async fn pods_in(&mut self, session: &Session, namespace: &str) -> Result<Arc<Vec<DynamicObject>>, LookupError> {
        if let Some(found) = self.pods.get(namespace) {
            return found.clone();
        }
        let found = match session.catalog.get("", "Pod") {
            None => Err(LookupError::NotServed("Pods".into())),
            Some(kind) => {
                crate::cluster::collect::list_objects(&session.connection.client, kind, Some(namespace), None)
                    .await
                    .map(Arc::new)
                    .map_err(|err| LookupError::Failed(root_cause(&err)))
            }
        };
        self.pods.insert(namespace.to_string(), found.clone());
        found
    }

    /// Every Deployment, StatefulSet and DaemonSet, listed once; an error when one kind could
    /// not be listed (then whether a controller runs is not known).
    async fn workloads(&mut self, session: &Session) -> Workloads {
        if let Some(found) = &self.workloads {
            return found.clone();
        }
        let mut found = Vec::new();
        let mut failure = None;
        for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
            let Some(info) = session.catalog.get("apps", kind) else {
                continue;
            };
            match crate::cluster::collect::list_objects(&session.connection.client, info, None, None).await {
                Ok(objects) => found.extend(objects.iter().map(|o| Workload::from(kind, o))),
                Err(err) => {
                    failure = Some(LookupError::Unlisted {
                        kinds: format!("{kind}s"),
                        cause: root_cause(&err),
                    });
                    break;
                }
            }
        }
        let result = match failure {
            Some(why) => Err(why),
            None => Ok(Arc::new(found)),
        };
        self.workloads = Some(result.clone());
        result
    }
}

/// Every object of a cluster-wide kind; nothing when it is not served or may not be listed
/// (a diagnosis then simply has less to say).
async fn list_all(session: &Session, group: &str, kind: &str) -> Vec<DynamicObject> {
    let Some(info) = session.catalog.get(group, kind) else {
        return Vec::new();
    };
    crate::cluster::collect::list_objects(&session.connection.client, info, None, None)
        .await
        .unwrap_or_default()
}

/// Reads one object by name, or why not (any failure, 404 included: its root cause).
async fn get(
    session: &Session,
    kind: &KindInfo,
    namespace: Option<&str>,
    name: &str,
) -> Result<DynamicObject, LookupError> {
    let api = api_for(&session.connection.client, kind, namespace);
    with_retries("get", || api.get(name))
        .await
        .map_err(|err| LookupError::Failed(root_cause(&err)))
}

/// Reads one object by name: found, gone (404), or why not.
async fn read(session: &Session, kind: &KindInfo, namespace: Option<&str>, name: &str) -> Read<DynamicObject> {
    let api = api_for(&session.connection.client, kind, namespace);
    match with_retries("get", || api.get(name)).await {
        Ok(object) => Read::Found(object),
        Err(err) if is_not_found(&err) => Read::Gone,
        Err(err) => Read::Failed(root_cause(&err)),
    }
}

/// Reads an object's metadata by name, when its kind is served.
async fn read_metadata(session: &Session, group: &str, kind: &str, namespace: &str, name: &str) -> Read<Listed> {
    let Some(info) = session.catalog.get(group, kind) else {
        return Read::NotServed;
    };
    let api = api_for(&session.connection.client, info, Some(namespace));
    match with_retries("get", || api.get_metadata(name)).await {
        Ok(found) => Read::Found(Listed::new(Arc::clone(info), found.metadata)),
        Err(err) if is_not_found(&err) => Read::Gone,
        Err(err) => Read::Failed(root_cause(&err)),
    }
}

/// Reads everything a diagnosis of `object` needs, in the order the rules consider it: each
/// finalizer, a Pod's node, its trackers, a Flux object's needs, a Namespace's state.
pub(super) async fn gather(session: &Session, context: &mut DiagnosisContext, object: &Listed) -> Evidence {
    let mut evidence = Evidence::default();
    for finalizer in object.finalizers() {
        let found = finalizer_evidence(session, context, object, finalizer).await;
        evidence.finalizers.push((finalizer.clone(), found));
    }
    if object.finalizers().is_empty() && object.kind.group.is_empty() && object.kind.kind == "Pod" {
        evidence.pod = pod_evidence(session, object).await;
    }
    for mark in marks(&object.meta) {
        let Some((group, kind)) = mark.preset.flux_kind() else {
            continue;
        };
        let tracker = ObjectId::new(group, kind, mark.value.namespace.as_deref(), &mark.value.name);
        let lookup = context.flux_object(session, &tracker).await;
        let dependencies = match &lookup {
            Lookup::Found(found) if !found.0.is_terminating() => {
                let ids = crate::graph::NodeInput::flux_depends_on(&tracker, &found.1);
                context.flux_objects(session, ids).await
            }
            _ => Vec::new(),
        };
        evidence.trackers.push(TrackerEvidence {
            tracker,
            lookup,
            dependencies,
        });
    }
    let id = object.id();
    if crate::model::trackers::FLUX_KINDS.contains(&(id.group.as_str(), id.kind.as_str())) {
        if let Lookup::Found(found) = context.flux_object(session, &id).await {
            evidence.flux = Some(flux_evidence(session, context, id.clone(), found.1).await);
        }
    }
    if id.group.is_empty() && id.kind == "Namespace" {
        let namespace = namespace_evidence(session, context, &id.name).await;
        // Its `spec.finalizers` an operator serves wait for that operator as its metadata ones
        // do (order review 9, F2): each is explained by the same rules.
        let spec_finalizers = match &namespace {
            NamespaceEvidence::Read { namespace, .. } => {
                crate::graph::infer::namespace_spec_finalizers(&namespace.data)
            }
            _ => Vec::new(),
        };
        for finalizer in spec_finalizers {
            if evidence.finalizers.iter().all(|(known, _)| *known != finalizer) {
                let found = finalizer_evidence(session, context, object, &finalizer).await;
                evidence.finalizers.push((finalizer, found));
            }
        }
        evidence.namespace = Some(namespace);
    }
    evidence
}

/// What was read for one finalizer: the rule that explains it decides what to read.
async fn finalizer_evidence(
    session: &Session,
    context: &mut DiagnosisContext,
    object: &Listed,
    finalizer: &str,
) -> FinalizerEvidence {
    match finalizer {
        "foregroundDeletion" => return FinalizerEvidence::Foreground(context.dependents(session, object).await),
        "orphan" => return FinalizerEvidence::Orphan(context.dependents(session, object).await),
        "customresourcecleanup.apiextensions.k8s.io" => {
            return FinalizerEvidence::CrdCleanup(crd_cleanup(session, context, object).await)
        }
        "kubernetes.io/pvc-protection" => {
            let namespace = object.namespace().unwrap_or_default().to_string();
            return FinalizerEvidence::PvcProtection {
                pods: context.pods_in(session, &namespace).await,
                pod_kind: session.catalog.get("", "Pod").cloned(),
            };
        }
        "kubernetes.io/pv-protection" => {
            return FinalizerEvidence::PvProtection(Box::new(pv_protection(session, object).await))
        }
        _ => {}
    }
    if let Some(controller) = controllers::known_for(finalizer, &object.kind.group, &object.kind.kind) {
        let workloads = context.workloads(session).await;
        return FinalizerEvidence::Controller { controller, workloads };
    }
    if !super::finalizer_accounted(finalizer, &session.catalog) {
        return FinalizerEvidence::Unaccounted;
    }
    if let Some((crd, tracked)) = super::crd_for_finalizer(&context.crds, finalizer, &object.kind) {
        let workloads = if tracked.is_empty() {
            None
        } else {
            Some(context.workloads(session).await)
        };
        return FinalizerEvidence::CrdController {
            crd,
            tracked,
            workloads,
        };
    }
    FinalizerEvidence::Unexplained
}

/// The CRD (listed already, else read) and its instances everywhere.
async fn crd_cleanup(session: &Session, context: &DiagnosisContext, object: &Listed) -> CrdCleanup {
    let listed = context
        .crds
        .iter()
        .find(|crd| crd.metadata.uid.as_deref() == Some(object.uid()))
        .cloned();
    let crd = match listed {
        Some(crd) => crd,
        None => match get(session, &object.kind, None, object.name()).await {
            Ok(crd) => crd,
            Err(why) => return CrdCleanup::Unreadable(why),
        },
    };
    let Some(kind) = waits::kind_of_crd(&session.catalog, &crd) else {
        return CrdCleanup::NoKind;
    };
    let instances = crate::cluster::collect::collect_kinds(
        &session.connection.client,
        std::slice::from_ref(&kind),
        &ListScope::AllNamespaces,
        &crate::model::trackers::Selection::everything(),
        Default::default(),
    )
    .await;
    CrdCleanup::Listed {
        crd: Box::new(crd),
        kind,
        instances,
    }
}

/// The volume, and (when it is bound to a named claim) that claim.
async fn pv_protection(session: &Session, object: &Listed) -> PvProtection {
    let volume = match get(session, &object.kind, None, object.name()).await {
        Ok(volume) => volume,
        Err(why) => {
            return PvProtection {
                volume: Err(why),
                claim: None,
            }
        }
    };
    let claim = match waits::bound_claim(&volume) {
        Some((namespace, name)) => Some(read_metadata(session, "", "PersistentVolumeClaim", &namespace, &name).await),
        None => None,
    };
    PvProtection {
        volume: Ok(volume),
        claim,
    }
}

/// A Pod being deleted without finalizers: it, and its node (when it has one).
async fn pod_evidence(session: &Session, object: &Listed) -> Option<PodEvidence> {
    let Ok(pod) = get(session, &object.kind, object.namespace(), object.name()).await else {
        return None;
    };
    let node_name = waits::pod_node(&pod).to_string();
    let node = if node_name.is_empty() {
        None
    } else {
        Some(match session.catalog.get("", "Node") {
            None => Read::NotServed,
            Some(nodes) => read(session, nodes, None, &node_name).await,
        })
    };
    Some(PodEvidence { pod, node })
}

/// A Flux object's dependencies and its kubeConfig Secret.
async fn flux_evidence(session: &Session, context: &mut DiagnosisContext, id: ObjectId, body: Value) -> FluxEvidence {
    let ids = crate::graph::NodeInput::flux_depends_on(&id, &body);
    let dependencies = context.flux_objects(session, ids).await;
    let kubeconfig_secret = match body.pointer("/spec/kubeConfig/secretRef/name").and_then(Value::as_str) {
        None => None,
        Some(secret) => {
            let namespace = id.namespace.as_deref().unwrap_or("default").to_string();
            let read = read_metadata(session, "", "Secret", &namespace, secret).await;
            let read = match read {
                Read::Found(_) => Read::Found(()),
                Read::Gone => Read::Gone,
                Read::Failed(why) => Read::Failed(why),
                Read::NotServed => Read::NotServed,
            };
            Some((namespace, secret.to_string(), read))
        }
    };
    FluxEvidence {
        dependencies,
        kubeconfig_secret,
    }
}

/// A Namespace, the unavailable APIServices, and what remains in it.
async fn namespace_evidence(session: &Session, context: &mut DiagnosisContext, name: &str) -> NamespaceEvidence {
    let Some(namespaces) = session.catalog.get("", "Namespace") else {
        return NamespaceEvidence::NotServed;
    };
    let namespace = match get(session, namespaces, None, name).await {
        Ok(namespace) => namespace,
        Err(why) => return NamespaceEvidence::Unreadable(why),
    };
    NamespaceEvidence::Read {
        namespace: Box::new(namespace),
        unavailable_api_services: context.unavailable_api_services.clone(),
        content: context.namespace_content(session, name).await,
    }
}

/// Hand-built evidence for the rules' unit tests.
#[cfg(test)]
pub(super) mod test_support {
    use std::sync::Arc;

    use kube::api::DynamicObject;
    use kube::core::ObjectMeta;

    use crate::cluster::collect::Listed;
    use crate::cluster::discovery::KindInfo;

    /// A served kind.
    pub fn kind(group: &str, kind: &str, plural: &str, namespaced: bool) -> Arc<KindInfo> {
        Arc::new(KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            short_names: vec![],
            namespaced,
            verbs: vec!["list".into(), "get".into()],
        })
    }

    /// A whole object from its JSON.
    pub fn object(json: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json).unwrap()
    }

    /// An object's metadata, as listed, from the JSON of its `metadata`.
    pub fn listed(kind: &Arc<KindInfo>, meta: serde_json::Value) -> Listed {
        let meta: ObjectMeta = serde_json::from_value(meta).unwrap();
        Listed::new(Arc::clone(kind), meta)
    }
}
