//! Inferred edges: the order a teardown deadlocks on when nobody declared it, read from what the
//! objects themselves say (finalizers, webhook and APIService backends, volume drivers).
//!
//! Every inferred edge has its own [`EdgeKind`]. Inferred edges only order; they never make an
//! object part of a teardown (they live in [`Graph::inferred`], apart from the declared edges).
//! Declared edges win: an inferred edge that would close a cycle is dropped with a warning.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use petgraph::algo::{has_path_connecting, toposort, DfsSpace};
use petgraph::graph::NodeIndex;
use serde_json::Value;

use crate::graph::{object_meta, Edge, EdgeKind, Graph, NodeInput};
use crate::model::identity::ObjectId;
use crate::model::trackers::{marks, MarkValue, Preset};

mod rbac;
mod volumes;

pub use rbac::{
    aggregates, may_name_an_operator, role_ref, selector_matches, service_account_of, subject_binds, BOOTSTRAPPING,
};
use volumes::volume_edges;

/// The kinds whose whole objects inference reads (the rest needs only metadata). A CRD is read
/// trimmed to its conversion webhook ([`crate::graph::stayers::trimmed_crds`]).
pub const SPEC_KINDS: [(&str, &str); 19] = [
    ("", "Namespace"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("", "Service"),
    ("", "Pod"),
    ("", "PersistentVolume"),
    ("", "PersistentVolumeClaim"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("apiregistration.k8s.io", "APIService"),
    ("storage.k8s.io", "StorageClass"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
];

/// Workload kinds: what runs a controller.
const WORKLOAD_KINDS: [(&str, &str); 3] = [("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet")];

/// What runs a controller too when no other object made it (no owner): a bare ReplicaSet, Job
/// or Pod (order review 13: an operator run as a bare Pod was deleted beside the custom resource
/// it had to finalize). One a Deployment made is that Deployment's.
const BARE_WORKLOAD_KINDS: [(&str, &str); 3] = [("apps", "ReplicaSet"), ("batch", "Job"), ("", "Pod")];

/// Whether an object of this kind may run an operator: a workload ([`WORKLOAD_KINDS`]), or a
/// ReplicaSet, Job or Pod that no other object made (`owned`: it has an owner reference).
pub fn may_run_an_operator(group: &str, kind: &str, owned: bool) -> bool {
    WORKLOAD_KINDS.contains(&(group, kind)) || (!owned && BARE_WORKLOAD_KINDS.contains(&(group, kind)))
}

/// What runs pods a Service may select: the workloads, ReplicaSets, Jobs (by their pod
/// template's labels) and bare Pods (by their own labels).
pub const POD_KINDS: [(&str, &str); 6] = [
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("", "Pod"),
];

/// What a controller needs to run: its workloads, their ServiceAccounts, RBAC and Services.
const CONTROLLER_KINDS: [(&str, &str); 9] = [
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("", "ServiceAccount"),
    ("", "Service"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
];

/// Whether objects of this kind can run or serve a controller (a workload, its ServiceAccount,
/// RBAC, a Service): what a finalizer or a webhook can be matched to.
pub fn runs_controllers(id: &ObjectId) -> bool {
    CONTROLLER_KINDS
        .iter()
        .any(|(group, kind)| id.group == *group && id.kind == *kind)
}

/// Whether inference reads the whole object of this kind.
pub fn needs_spec(group: &str, kind: &str) -> bool {
    SPEC_KINDS.contains(&(group, kind))
}

/// What inference knows besides the objects.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// CRD object name (`plural.group`) of each custom (group, kind).
    pub crd_names: HashMap<(String, String), String>,
    /// Resource (plural) of each (group, kind), for webhook rules; guessed when absent.
    pub plurals: HashMap<(String, String), String>,
}

/// A stack an object belongs to: a tracker's mark, or (offline) the folder it was read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum StackKey {
    Mark(Preset, MarkValue),
    Folder(String),
}

/// The inputs indexed for the rules.
struct Objects<'a> {
    inputs: &'a [NodeInput],
    by_id: HashMap<&'a ObjectId, usize>,
    /// Each input's stacks ([`stack_keys`]) by number: those of input `i` are
    /// `stack_numbers[stack_starts[i]..stack_starts[i + 1]]`. Numbered, in one vector: the many
    /// objects of one stack hold no copy of its key each (issue 30).
    stack_starts: Vec<usize>,
    stack_numbers: Vec<usize>,
    /// The inputs of each stack, by number.
    by_stack: Vec<Vec<usize>>,
}

impl<'a> Objects<'a> {
    fn new(inputs: &'a [NodeInput]) -> Self {
        let by_id = inputs.iter().enumerate().map(|(i, input)| (&input.id, i)).collect();
        let mut numbers: HashMap<StackKey, usize> = HashMap::new();
        let mut by_stack: Vec<Vec<usize>> = Vec::new();
        let mut stack_starts = Vec::with_capacity(inputs.len() + 1);
        let mut stack_numbers = Vec::new();
        for (index, input) in inputs.iter().enumerate() {
            stack_starts.push(stack_numbers.len());
            for key in stack_keys(input) {
                let next = by_stack.len();
                let number = *numbers.entry(key).or_insert(next);
                if number == next {
                    by_stack.push(Vec::new());
                }
                by_stack[number].push(index);
                stack_numbers.push(number);
            }
        }
        stack_starts.push(stack_numbers.len());
        Self {
            inputs,
            by_id,
            stack_starts,
            stack_numbers,
            by_stack,
        }
    }

    fn find(&self, id: &ObjectId) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    fn is(&self, index: usize, kinds: &[(&str, &str)]) -> bool {
        let id = &self.inputs[index].id;
        kinds.contains(&(id.group.as_str(), id.kind.as_str()))
    }

    fn of_kind(&self, group: &'a str, kind: &'a str) -> impl Iterator<Item = usize> + 'a {
        let inputs = self.inputs;
        (0..inputs.len()).filter(move |&i| inputs[i].id.group == group && inputs[i].id.kind == kind)
    }

    /// The controller objects (workloads, ServiceAccounts, RBAC, Services) of the stacks `index`
    /// belongs to.
    fn controllers_of_stack(&self, index: usize) -> BTreeSet<usize> {
        self.stack_numbers[self.stack_starts[index]..self.stack_starts[index + 1]]
            .iter()
            .flat_map(|&number| &self.by_stack[number])
            .copied()
            .filter(|&other| other != index && (self.is(other, &CONTROLLER_KINDS) || self.runs_an_operator(other)))
            .collect()
    }

    /// Whether a node runs a controller: a workload ([`WORKLOAD_KINDS`]), or a bare ReplicaSet,
    /// Job or Pod ([`BARE_WORKLOAD_KINDS`]).
    fn runs_an_operator(&self, index: usize) -> bool {
        let id = &self.inputs[index].id;
        may_run_an_operator(&id.group, &id.kind, !self.inputs[index].owners.is_empty())
    }

    /// A Service (by namespace and name) and what serves it: the objects running pods its
    /// selector picks ([`POD_KINDS`]), or, for a Service without a selector, the Endpoints of its
    /// name and the EndpointSlices of its name or labelled with it (written by hand: nothing else
    /// fills them).
    fn service_backend(&self, namespace: Option<&str>, name: Option<&str>) -> Vec<usize> {
        let (Some(namespace), Some(name)) = (namespace, name) else {
            return Vec::new();
        };
        let Some(service) = self.find(&ObjectId::new("", "Service", Some(namespace), name)) else {
            return Vec::new();
        };
        let mut backend = vec![service];
        let selector = self.inputs[service]
            .body
            .as_ref()
            .and_then(|b| b.pointer("/spec/selector"))
            .and_then(Value::as_object);
        let Some(selector) = selector.filter(|s| !s.is_empty()) else {
            backend.extend(self.endpoints_of(namespace, name));
            return backend;
        };
        let in_namespace = |index: &usize| self.inputs[*index].id.namespace.as_deref() == Some(namespace);
        let picked = (0..self.inputs.len())
            .filter(|&index| self.is(index, &POD_KINDS))
            .filter(in_namespace)
            .filter(|&index| pod_labels(&self.inputs[index]).is_some_and(|labels| selects(selector, labels)));
        backend.extend(picked);
        backend
    }

    /// The Endpoints and EndpointSlices (nodes) of the selectorless Service `namespace/name`.
    fn endpoints_of<'s>(&'s self, namespace: &'s str, name: &'s str) -> impl Iterator<Item = usize> + 's {
        (0..self.inputs.len()).filter(move |&index| {
            let input = &self.inputs[index];
            let id = &input.id;
            id.namespace.as_deref() == Some(namespace)
                && match (id.group.as_str(), id.kind.as_str()) {
                    ("", "Endpoints") => id.name == name,
                    ("discovery.k8s.io", "EndpointSlice") => {
                        id.name == name
                            || input.labels.get("kubernetes.io/service-name").map(String::as_str) == Some(name)
                    }
                    _ => false,
                }
        })
    }
}

/// The Services (namespace, name) a webhook configuration or an APIService calls, read from its
/// whole body: each webhook's `clientConfig` ([`service_of_client_config`]) or the APIService's
/// `spec.service`. Empty for any other kind, or without a body.
pub fn services_called(input: &NodeInput) -> Vec<(String, String)> {
    let Some(body) = &input.body else {
        return Vec::new();
    };
    match (input.id.group.as_str(), input.id.kind.as_str()) {
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => body
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|webhook| webhook.get("clientConfig").and_then(service_of_client_config))
            .collect(),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => conversion_client_config(body)
            .and_then(service_of_client_config)
            .into_iter()
            .collect(),
        ("apiregistration.k8s.io", "APIService") => {
            let service = body.pointer("/spec/service").filter(|s| !s.is_null());
            let str_of = |key: &str| service?.get(key)?.as_str().map(str::to_string);
            str_of("namespace").zip(str_of("name")).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// The `clientConfig` of a CRD's conversion webhook, when its conversion strategy is `Webhook`:
/// `spec.conversion.webhook.clientConfig` (`apiextensions.k8s.io/v1`) or
/// `spec.conversion.webhookClientConfig` (`v1beta1`). The API server calls it to serve the CRD's
/// objects in any version but the stored one, and to delete them.
pub fn conversion_client_config(crd: &Value) -> Option<&Value> {
    let conversion = crd.pointer("/spec/conversion")?;
    if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
        return None;
    }
    conversion
        .pointer("/webhook/clientConfig")
        .or_else(|| conversion.get("webhookClientConfig"))
}

/// Whether the Service of `namespace` whose whole body is `service` selects the pods `input`
/// runs (a workload, a ReplicaSet, a Job, a Pod of that namespace): the rule inference serves
/// webhooks and APIServices by ([`Objects::service_backend`]). A Service without a selector
/// selects nothing.
pub fn service_selects(namespace: &str, service: &Value, input: &NodeInput) -> bool {
    let selector = service.pointer("/spec/selector").and_then(Value::as_object);
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return false;
    };
    let kind = (input.id.group.as_str(), input.id.kind.as_str());
    POD_KINDS.contains(&kind)
        && input.id.namespace.as_deref() == Some(namespace)
        && pod_labels(input).is_some_and(|labels| selects(selector, labels))
}

/// The labels of the pods an object runs: a Pod's own, else its pod template's.
fn pod_labels(input: &NodeInput) -> Option<BTreeMap<String, String>> {
    if (input.id.group.as_str(), input.id.kind.as_str()) == ("", "Pod") {
        return Some(BTreeMap::clone(&input.labels));
    }
    let labels = input
        .body
        .as_ref()?
        .pointer("/spec/template/metadata/labels")?
        .as_object()?;
    Some(
        labels
            .iter()
            .filter_map(|(key, value)| value.as_str().map(|v| (key.clone(), v.to_string())))
            .collect(),
    )
}

/// Whether a Service's selector picks pods with these labels.
fn selects(selector: &serde_json::Map<String, Value>, labels: BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(key, value)| labels.get(key).is_some_and(|v| value.as_str() == Some(v.as_str())))
}

fn stack_keys(input: &NodeInput) -> Vec<StackKey> {
    let meta = object_meta(input);
    let gc_mark = crate::model::trackers::flux_v1_gc_mark_of(&meta);
    let mut keys: Vec<StackKey> = marks(&meta)
        .into_iter()
        .map(|mark| match mark.preset {
            // A Flux v1 gc mark hashes the sync set with the object's own id (fluxcd/flux 1.x
            // `pkg/cluster/kubernetes/sync.go` `makeGCMark`): no two objects share it, so it
            // names no stack. Every gc-marked object counts as one stack here: an operator and
            // its CRD of one sync set stay together (a stack too many only adds needs).
            Preset::FluxV1 if gc_mark == Some(mark.value.name.as_str()) => StackKey::Mark(
                Preset::FluxV1,
                MarkValue {
                    name: FLUX_V1_GC_STACK.to_string(),
                    namespace: None,
                },
            ),
            _ => StackKey::Mark(mark.preset, mark.value),
        })
        .collect();
    // A gc-marked object whose Flux v1 mark is another (its legacy `flux.weave.works/stack`
    // label) is of the gc-marked stack too.
    let gc_stack = StackKey::Mark(
        Preset::FluxV1,
        MarkValue {
            name: FLUX_V1_GC_STACK.to_string(),
            namespace: None,
        },
    );
    if gc_mark.is_some() && !keys.contains(&gc_stack) {
        keys.push(gc_stack);
    }
    if let Some(folder) = &input.app {
        keys.push(StackKey::Folder(folder.clone()));
    }
    keys
}

/// The stack every Flux v1 gc-marked object counts in for inference (see [`stack_keys`]).
const FLUX_V1_GC_STACK: &str = "fluxcd.io/sync-gc-mark";

/// Every inferred edge of the inputs (input index = node index), before cycles are checked.
pub fn candidates(inputs: &[NodeInput], known: &Known) -> Vec<Edge> {
    let objects = Objects::new(inputs);
    let mut edges = Vec::new();
    finalizer_edges(&objects, known, &mut edges);
    webhook_edges(&objects, known, &mut edges);
    api_service_edges(&objects, &mut edges);
    conversion_edges(&objects, &mut edges);
    volume_edges(&objects, &mut edges);
    edges.retain(|e| e.from != e.to);
    edges.sort_by_key(|e| (e.from, e.to, e.kind));
    edges.dedup_by_key(|e| (e.from, e.to));
    edges
}

/// The edges from a backend's workloads to what they run with (see [`rbac::runtime_needs`]).
fn runs_with(objects: &Objects, backend: &[usize], edges: &mut Vec<Edge>) {
    runs_with_where(objects, backend.iter().copied(), edges, |_| true);
}

/// [`runs_with`] for the `workloads` among `candidates`, keeping the needs whose target `keep`
/// accepts.
fn runs_with_where(
    objects: &Objects,
    candidates: impl IntoIterator<Item = usize>,
    edges: &mut Vec<Edge>,
    keep: impl Fn(&NodeInput) -> bool,
) {
    for workload in candidates.into_iter().filter(|&i| objects.is(i, &POD_KINDS)) {
        let needs = rbac::runtime_needs(objects, workload)
            .into_iter()
            .filter(|&(_, to)| keep(&objects.inputs[to]));
        edges.extend(needs.map(|(from, to)| Edge {
            from,
            to,
            kind: EdgeKind::InferredRunsWith,
        }));
    }
}

fn push_all(edges: &mut Vec<Edge>, from: usize, to: impl IntoIterator<Item = usize>, kind: EdgeKind) {
    edges.extend(to.into_iter().map(|to| Edge { from, to, kind }));
}

/// The domain a finalizer names: `example.com` of `example.com/cleanup`, and the whole of a
/// finalizer without a path (Rook's `cephcluster.ceph.rook.io`). `None` for a name with no dot
/// (`kubernetes`, `foregroundDeletion`, `orphan`): it names no API group.
pub fn finalizer_domain(finalizer: &str) -> Option<&str> {
    let domain = finalizer.split_once('/').map_or(finalizer, |(domain, _)| domain);
    domain.contains('.').then_some(domain)
}

/// Whether a finalizer belongs to the controller of an API group: its domain is the group, a
/// subdomain of it (`cephcluster.ceph.rook.io` for `ceph.rook.io`, or a CRD's own name
/// `plural.group`) or a parent domain of it (`example.com` for `ops.example.com`). The one
/// matcher of finalizers to groups: inference, `stuck` and its diagnosis all ask it.
pub fn finalizer_names_group(finalizer: &str, group: &str) -> bool {
    let Some(domain) = finalizer_domain(finalizer) else {
        return false;
    };
    !group.is_empty()
        && (domain == group || domain.ends_with(&format!(".{group}")) || group.ends_with(&format!(".{domain}")))
}

/// Whether a finalizer names the CRD `plural.group` (see [`finalizer_names_group`]).
fn finalizer_matches_crd(finalizer: &str, crd_name: &str) -> bool {
    let group = crd_name.split_once('.').map(|(_, group)| group).unwrap_or("");
    finalizer_names_group(finalizer, group)
}

/// Whether a finalizer's domain is the CRD's group `plural.group` or a subdomain of it.
fn finalizer_in_crd_group(finalizer: &str, crd_name: &str) -> bool {
    let group = crd_name.split_once('.').map(|(_, group)| group).unwrap_or("");
    finalizer_domain(finalizer)
        .is_some_and(|domain| !group.is_empty() && (domain == group || domain.ends_with(&format!(".{group}"))))
}

/// 1. An object (a custom resource, or a built-in object an operator finalizes) whose finalizer
///    belongs to a CRD's API group depends on the controller
///    objects of the stack that holds that CRD; where that stack runs no controller (CRDs and
///    operator in different stacks), on those of the stacks whose workloads RBAC lets update the
///    group's objects ([`rbac`]). A custom resource whose CRD is no node (installed by Helm from
///    `crds/`, by an operator, or by a stack out of scope) whose finalizer names its own group
///    depends on the controllers RBAC names for that group ([`controllers_by_rbac`]). A finalizer
///    that names no CRD of the graph and no group of its object (Crossplane's
///    `finalizer.managedresource.crossplane.io` on an `s3.aws.upbound.io` Bucket, or a name
///    without a dot) falls back on RBAC too ([`by_rbac_fallback`]). An object tied to several
///    operators goes before them all and, while it stays, keeps them all.
fn finalizer_edges(objects: &Objects, known: &Known, edges: &mut Vec<Edge>) {
    let crds: Vec<usize> = objects
        .of_kind("apiextensions.k8s.io", "CustomResourceDefinition")
        .collect();
    let mut controllers: HashMap<usize, BTreeSet<usize>> = HashMap::new();
    let mut of_groups: HashMap<String, BTreeSet<usize>> = HashMap::new();
    let mut fallbacks: HashMap<Fallback, BTreeSet<usize>> = HashMap::new();
    for (index, input) in objects.inputs.iter().enumerate() {
        // An operator may finalize built-in objects too (Rook's Secrets and ConfigMaps): for
        // those only a finalizer of the CRD's own group or a subdomain of it counts, never a
        // parent domain (`kubernetes.io/pvc-protection` names no `x.kubernetes.io` operator).
        let custom = known
            .crd_names
            .contains_key(&(input.id.group.clone(), input.id.kind.clone()));
        for finalizer in &finalizers_of(input) {
            let mut named_crd = false;
            for &crd in &crds {
                let crd_name = &objects.inputs[crd].id.name;
                let matches = match custom {
                    true => finalizer_matches_crd(finalizer, crd_name),
                    false => finalizer_in_crd_group(finalizer, crd_name),
                };
                if matches {
                    named_crd = true;
                    let of_crd = controllers
                        .entry(crd)
                        .or_insert_with(|| controllers_of_crd(objects, crd));
                    push_all(edges, index, of_crd.iter().copied(), EdgeKind::InferredFinalizer);
                }
            }
            if named_crd {
                continue;
            }
            let group = &input.id.group;
            if custom && finalizer_names_group(finalizer, group) {
                let of_group = of_groups
                    .entry(group.clone())
                    .or_insert_with(|| controllers_by_rbac(objects, group));
                push_all(edges, index, of_group.iter().copied(), EdgeKind::InferredFinalizer);
                continue;
            }
            let Some(fallback) = Fallback::of(finalizer, &input.id, custom, known) else {
                continue;
            };
            let found = fallbacks
                .entry(fallback)
                .or_insert_with_key(|fallback| by_rbac_fallback(objects, fallback));
            push_all(edges, index, found.iter().copied(), EdgeKind::InferredFinalizer);
        }
    }
    // An operator RBAC names goes before its RBAC even when nothing it finalizes exists yet: a
    // custom resource made mid-run needs both (order review 8, and 21's T2).
    let operators: BTreeSet<usize> = controllers
        .values()
        .chain(of_groups.values())
        .chain(fallbacks.values())
        .flatten()
        .copied()
        .chain(rbac::operators_by_rbac(objects))
        .collect();
    operators_run_with(objects, &operators, edges);
}

/// The finalizers inference reads on an object: its `metadata.finalizers` and, on a Namespace
/// read whole, the `spec.finalizers` an operator serves ([`namespace_spec_finalizers`]). A
/// Namespace's `spec.finalizers` hold it in `Terminating` as its metadata ones do, until their
/// controller takes its entry out (`PUT .../namespaces/NAME/finalize`): while it stays, it needs
/// that controller (order review 9, F2).
pub fn finalizers_of(input: &NodeInput) -> Vec<String> {
    let mut finalizers = input.finalizers.clone();
    if (input.id.group.as_str(), input.id.kind.as_str()) == ("", "Namespace") {
        if let Some(body) = &input.body {
            for finalizer in namespace_spec_finalizers(body) {
                if !finalizers.contains(&finalizer) {
                    finalizers.push(finalizer);
                }
            }
        }
    }
    finalizers
}

/// The `spec.finalizers` of a Namespace (its whole body) that an operator serves: every one but
/// `kubernetes`, which the namespace controller of kube-controller-manager takes out once the
/// Namespace is empty ([`served_by_an_operator`]).
pub fn namespace_spec_finalizers(namespace: &Value) -> Vec<String> {
    strings(namespace.get("spec").unwrap_or(&Value::Null), "finalizers")
        .into_iter()
        .filter(|finalizer| served_by_an_operator(finalizer))
        .collect()
}

/// The finalizers that the garbage collector itself serves (`metadata.finalizers` of a
/// foreground or orphaning delete), and the Namespace finalizer of the control plane: no
/// operator removes them.
const CONTROL_PLANE_FINALIZERS: [&str; 3] = ["foregroundDeletion", "orphan", "kubernetes"];

/// Whether a finalizer is one an operator serves, as far as its name tells: any but the control
/// plane's own ([`CONTROL_PLANE_FINALIZERS`]). A finalizer without a dot names no group, but an
/// operator may use one all the same: inference ties it to its operator by RBAC
/// ([`finalizer_edges`]).
pub fn served_by_an_operator(finalizer: &str) -> bool {
    !CONTROL_PLANE_FINALIZERS.contains(&finalizer)
}

/// The finalizers of Kubernetes' own domains that the control plane itself removes
/// (kube-controller-manager's PVC and PV protection, `kubernetes/pkg/controller/volume/
/// {pvc,pv}protection`; the Job controller's pod tracking, `batch.kubernetes.io/job-tracking`;
/// the resource claim controller's `resource.kubernetes.io/delete-protection`): no workload of a
/// stack serves them. Any other finalizer of a Kubernetes domain on a built-in object may be an
/// add-on's (order review 12, F1): a cloud controller manager's
/// `service.kubernetes.io/load-balancer-cleanup`, the snapshot controller's
/// `snapshot.storage.kubernetes.io/pvc-as-source-protection`, a CSI provisioner's
/// `external-provisioner.volume.kubernetes.io/finalizer`; RBAC names it.
const CONTROL_PLANE_DOMAIN_FINALIZERS: [&str; 4] = [
    "kubernetes.io/pvc-protection",
    "kubernetes.io/pv-protection",
    "batch.kubernetes.io/job-tracking",
    "resource.kubernetes.io/delete-protection",
];

/// What the RBAC fallback of a finalizer asks ([`Fallback::of`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Fallback {
    /// The object's API group and resource (plural): its operator may update it.
    group: String,
    resource: String,
    /// A custom resource's (a rule for every resource of its group counts).
    custom: bool,
    /// A built-in object's finalizer domain, when it has one: the operator whose RBAC names that
    /// domain's group is preferred.
    domain: Option<String>,
}

impl Fallback {
    /// The RBAC fallback of a finalizer that named no CRD of the graph and no group of its
    /// object; `None` for a finalizer of the control plane's ([`CONTROL_PLANE_FINALIZERS`],
    /// [`CONTROL_PLANE_DOMAIN_FINALIZERS`]).
    fn of(finalizer: &str, id: &ObjectId, custom: bool, known: &Known) -> Option<Self> {
        if !served_by_an_operator(finalizer) || CONTROL_PLANE_DOMAIN_FINALIZERS.contains(&finalizer) {
            return None;
        }
        let domain = finalizer_domain(finalizer);
        Some(Self {
            group: id.group.clone(),
            resource: plural_of(known, &id.group, &id.kind),
            custom,
            domain: domain.filter(|_| !custom).map(str::to_string),
        })
    }
}

/// The controller objects that serve a finalizer by RBAC when it names no group of its object
/// (order review 7): a built-in object's, first those of the workloads whose RBAC names the
/// finalizer's domain as an operator's group ([`rbac::operators_of_domain`]); else, and for a
/// custom resource, those of the workloads whose RBAC lets update that object's kind
/// ([`rbac::writers_of`]: group and resource named, never through cluster-admin's `*`) — the
/// one who removes a finalizer must be allowed to update its object. Each with the controller
/// objects of its stack, as [`controllers_by_rbac`].
fn by_rbac_fallback(objects: &Objects, fallback: &Fallback) -> BTreeSet<usize> {
    let by_domain = fallback
        .domain
        .as_deref()
        .map(|domain| rbac::operators_of_domain(objects, domain))
        .unwrap_or_default();
    let workloads = match by_domain.is_empty() {
        false => by_domain,
        true => rbac::writers_of(objects, &fallback.group, &fallback.resource, fallback.custom),
    };
    with_their_stacks(objects, workloads)
}

/// `workloads` and the controller objects of their stacks.
fn with_their_stacks(objects: &Objects, workloads: BTreeSet<usize>) -> BTreeSet<usize> {
    let mut found = BTreeSet::new();
    for workload in workloads {
        found.insert(workload);
        found.extend(objects.controllers_of_stack(workload));
    }
    found
}

/// The edges from the operators that finalize objects to the permissions they finalize with
/// (order review 6, F-A): the ServiceAccount their pods run as, its bindings and their roles
/// ([`rbac::runtime_needs`], without the Secrets and ConfigMaps its pods read, which a running
/// operator no longer needs). A custom resource goes before its operator and the operator before
/// its RBAC, whichever stack holds it; an operator that stays keeps it.
fn operators_run_with(objects: &Objects, operators: &BTreeSet<usize>, edges: &mut Vec<Edge>) {
    runs_with_where(objects, operators.iter().copied(), edges, |need| {
        !matches!(need.id.kind.as_str(), "Secret" | "ConfigMap")
    });
}

/// The controller objects of a CRD: those of its stack, and those of the stacks of the
/// workloads RBAC names as its group's controller.
fn controllers_of_crd(objects: &Objects, crd: usize) -> BTreeSet<usize> {
    // The CRD's stack's workloads and, whether or not it runs any, the workloads RBAC names as
    // the group's controller: an unrelated workload shipped beside the CRDs must not hide the
    // operator of another stack (order review 8, F1). A candidate too many only adds needs.
    let own = objects.controllers_of_stack(crd);
    let group = objects.inputs[crd]
        .id
        .name
        .split_once('.')
        .map(|(_, group)| group)
        .unwrap_or("");
    let mut found = own;
    found.extend(controllers_by_rbac(objects, group));
    found
}

/// The workloads RBAC names as `group`'s controller ([`rbac::controllers_of_group`]) and the
/// controller objects of their stacks.
fn controllers_by_rbac(objects: &Objects, group: &str) -> BTreeSet<usize> {
    with_their_stacks(objects, rbac::controllers_of_group(objects, group))
}

/// 2. A webhook configuration goes before the Service that serves it and the workloads behind
///    that Service; objects its rules intercept for UPDATE or DELETE (with `failurePolicy: Fail`)
///    go before it.
fn webhook_edges(objects: &Objects, known: &Known, edges: &mut Vec<Edge>) {
    for kind in ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"] {
        for index in objects.of_kind("admissionregistration.k8s.io", kind) {
            let input = &objects.inputs[index];
            let Some(body) = &input.body else { continue };
            let legacy = body
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.ends_with("/v1beta1"));
            let webhooks = body
                .get("webhooks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for webhook in &webhooks {
                let (namespace, name) = webhook.get("clientConfig").and_then(service_of_client_config).unzip();
                let backend = objects.service_backend(namespace.as_deref(), name.as_deref());
                push_all(edges, index, backend.iter().copied(), EdgeKind::InferredWebhook);
                runs_with(objects, &backend, edges);
                let policy = webhook.get("failurePolicy").and_then(Value::as_str);
                let fails = policy.map_or(!legacy, |p| p == "Fail");
                if !fails {
                    continue;
                }
                let rules = webhook
                    .get("rules")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for (other, candidate) in objects.inputs.iter().enumerate() {
                    if other == index || backend.contains(&other) {
                        continue;
                    }
                    if rules.iter().any(|rule| intercepts(rule, &candidate.id, known)) {
                        edges.push(Edge {
                            from: other,
                            to: index,
                            kind: EdgeKind::InferredWebhookRule,
                        });
                    }
                }
            }
        }
    }
}

/// The Service (namespace, name) an admission webhook's `clientConfig` calls: its `service`, or
/// a `url` whose host is the Service's in-cluster name (`NAME.NAMESPACE.svc`, optionally followed
/// by the cluster domain, as `svc.cluster.local`), which is how the API server resolves it.
pub fn service_of_client_config(client_config: &Value) -> Option<(String, String)> {
    if let Some(service) = client_config.get("service") {
        let str_of = |key: &str| service.get(key).and_then(Value::as_str).map(str::to_string);
        return Some((str_of("namespace")?, str_of("name")?));
    }
    let url = client_config.get("url").and_then(Value::as_str)?;
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = host.split(':').next()?.trim_end_matches('.');
    let mut labels = host.split('.');
    let (name, namespace, svc) = (labels.next()?, labels.next()?, labels.next()?);
    let named = !name.is_empty() && !namespace.is_empty();
    (named && svc.eq_ignore_ascii_case("svc")).then(|| (namespace.to_string(), name.to_string()))
}

fn strings(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The resource (plural) of a kind: from discovery or the CRDs, else as Kubernetes guesses it.
pub fn plural_of(known: &Known, group: &str, kind: &str) -> String {
    if let Some(plural) = known.plurals.get(&(group.to_string(), kind.to_string())) {
        return plural.clone();
    }
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// Whether a webhook rule intercepts UPDATE or DELETE of this object.
fn intercepts(rule: &Value, id: &ObjectId, known: &Known) -> bool {
    let operations = strings(rule, "operations");
    if !operations
        .iter()
        .any(|o| matches!(o.as_str(), "UPDATE" | "DELETE" | "*"))
    {
        return false;
    }
    let groups = strings(rule, "apiGroups");
    if !groups.iter().any(|g| g == "*" || *g == id.group) {
        return false;
    }
    let plural = plural_of(known, &id.group, &id.kind);
    let resources = strings(rule, "resources");
    if !resources.iter().any(|r| r == "*" || r == "*/*" || *r == plural) {
        return false;
    }
    match rule.get("scope").and_then(Value::as_str) {
        Some("Namespaced") => id.namespace.is_some(),
        Some("Cluster") => id.namespace.is_none(),
        _ => true,
    }
}

/// 3. An APIService goes before the Service that serves it and the workloads behind it; objects
///    of the API group it serves go before it.
fn api_service_edges(objects: &Objects, edges: &mut Vec<Edge>) {
    for index in objects.of_kind("apiregistration.k8s.io", "APIService") {
        let Some(body) = &objects.inputs[index].body else {
            continue;
        };
        let Some(service) = body.pointer("/spec/service").filter(|s| !s.is_null()) else {
            continue; // served locally (a built-in group or a CRD's): no backend to outlive
        };
        let str_of = |key: &str| service.get(key).and_then(Value::as_str);
        let backend = objects.service_backend(str_of("namespace"), str_of("name"));
        runs_with(objects, &backend, edges);
        push_all(edges, index, backend, EdgeKind::InferredApiService);
        if let Some(group) = body.pointer("/spec/group").and_then(Value::as_str) {
            let served = (0..objects.inputs.len()).filter(|&i| i != index && objects.inputs[i].id.group == group);
            for other in served {
                edges.push(Edge {
                    from: other,
                    to: index,
                    kind: EdgeKind::InferredAggregatedApi,
                });
            }
        }
    }
}

/// 4. A CRD whose conversion webhook calls a Service ([`conversion_client_config`]) goes before
///    that Service and the workloads behind it: while the CRD is there, reading, writing and
///    deleting its objects in another version than the stored one calls that webhook.
fn conversion_edges(objects: &Objects, edges: &mut Vec<Edge>) {
    for index in objects.of_kind("apiextensions.k8s.io", "CustomResourceDefinition") {
        let Some(body) = &objects.inputs[index].body else {
            continue;
        };
        let Some((namespace, name)) = conversion_client_config(body).and_then(service_of_client_config) else {
            continue;
        };
        let backend = objects.service_backend(Some(&namespace), Some(&name));
        runs_with(objects, &backend, edges);
        push_all(edges, index, backend, EdgeKind::InferredWebhook);
    }
}

/// Adds the inferred edges that close no cycle with what is already there (declared edges win:
/// they are all there first), in order, a webhook's rule edges last; returns the dropped ones. An inferred edge that repeats a
/// declared one is not added.
pub fn add_acyclic(graph: &mut Graph, mut candidates: Vec<Edge>) -> Vec<Edge> {
    let declared: HashSet<(usize, usize)> = graph.edges.iter().map(|e| (e.from, e.to)).collect();
    candidates.retain(|e| e.from != e.to && !declared.contains(&(e.from, e.to)));
    graph.inferred = candidates;
    let order = crate::graph::plan::deletion_order(graph);
    if toposort(&order, None).is_ok() {
        return Vec::new();
    }
    let mut candidates = std::mem::take(&mut graph.inferred);
    // A webhook's rule edges (what it intercepts goes before it) yield to every other inferred
    // edge: a webhook that intercepts its own backend's Namespace must still go before that
    // backend, or every DELETE it matches fails once the backend is gone (review finding R2).
    candidates.sort_by_key(|e| e.kind == EdgeKind::InferredWebhookRule);
    let mut order = crate::graph::plan::deletion_order(graph);
    let mut space = DfsSpace::new(&order);
    let mut dropped = Vec::new();
    for edge in candidates {
        let (from, to) = (NodeIndex::new(edge.from), NodeIndex::new(edge.to));
        if has_path_connecting(&order, to, from, Some(&mut space)) {
            dropped.push(edge);
        } else {
            order.add_edge(from, to, ());
            graph.inferred.push(edge);
        }
    }
    dropped
}

#[cfg(test)]
mod tests;
