//! Which workloads run the controller of an API group, read from RBAC: a Deployment,
//! StatefulSet or DaemonSet whose ServiceAccount is bound to a Role or ClusterRole that may
//! update or patch that group's objects (a controller that removes its finalizers must). Where a
//! CRD and its operator live in different stacks (Flux's usual `infra-crds` and
//! `infra-controllers`), this is what ties a custom resource's finalizer to the operator.
//!
//! Only an explicit grant counts: a role granting every group (`apiGroups: ["*"]`, as
//! cluster-admin does) names no controller in particular.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::Value;

use super::Objects;
use crate::graph::NodeInput;
use crate::model::identity::ObjectId;

const RBAC: &str = "rbac.authorization.k8s.io";

/// A ServiceAccount: (namespace, name).
pub(crate) type Account = (String, String);

/// A role: (kind, namespace for a Role, name).
type RoleKey = (String, Option<String>, String);

fn strings_at(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// One question the inference asks of RBAC about a role's rules. Every question that ties a
/// workload to what it controls is one of these, and the roles read whole with the stayers are
/// those for which some question could answer yes ([`may_name_an_operator`]), so the two never
/// disagree (order review 11: an operator of a `*.k8s.io` group was found by one and not read by
/// the other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask<'a> {
    /// May update or patch the objects of this API group (a CRD's group: its controller).
    UpdatesGroup(&'a str),
    /// May update or patch objects of an operator's API group (not one of Kubernetes' own) that
    /// is this finalizer domain or a parent of it.
    OperatesDomain(&'a str),
    /// May update or patch this resource of this group (or its `finalizers`), group and
    /// resource named; a rule for every resource of the group counts with `any_resource`.
    UpdatesResource {
        /// The resource's API group.
        group: &'a str,
        /// The resource's plural.
        resource: &'a str,
        /// Whether `resources: ["*"]` of that group counts.
        any_resource: bool,
    },
    /// May update or patch the objects of some operator's API group (not one of Kubernetes'
    /// own): the workloads bound so run an operator, whether or not any object it finalizes
    /// exists yet (order review 8 and 21: a custom resource made mid-run needs it and its RBAC).
    UpdatesAnOperatorGroup,
    /// May `create` (or `delete`) PersistentVolumes, as an external provisioner must do both:
    /// RBAC grants the union of every rule of every role bound to an account, so each verb is
    /// asked alone and the accounts that get both are the provisioners (order review 12, F3).
    WritesVolumes(&'static str),
}

impl Ask<'_> {
    /// Whether `rule` answers yes, in a role that is (`default`) or is not one of the control
    /// plane's defaults ([`BOOTSTRAPPING`]). A default role answers only for an operator's own
    /// group: its built-in grants name no operator, but a role labelled so that grants an
    /// operator's group still counts (a label must not hide an operator). A rule for every group
    /// (`apiGroups: ["*"]`, as cluster-admin's) never answers.
    pub(super) fn accepts(&self, rule: &Value, default: bool) -> bool {
        match *self {
            Ask::UpdatesGroup(group) => {
                (!default || is_operator_group(group)) && updates(rule) && names_group(rule, |g| g == group)
            }
            Ask::OperatesDomain(domain) => {
                updates(rule)
                    && names_group(rule, |g| {
                        is_operator_group(g) && (domain == g || domain.ends_with(&format!(".{g}")))
                    })
            }
            Ask::UpdatesResource {
                group,
                resource,
                any_resource,
            } => !default && rule_grants(rule, group, resource, any_resource, &["update", "patch"]),
            Ask::UpdatesAnOperatorGroup => updates(rule) && names_group(rule, is_operator_group),
            Ask::WritesVolumes(verb) => !default && rule_grants(rule, "", "persistentvolumes", false, &[verb]),
        }
    }

    /// Every question `rule` could answer yes to: asked of the groups and resources it names.
    /// Complete, as each question needs its group (and resource) named by the rule.
    fn answerable_by(rule: &Value) -> Vec<(String, Option<String>)> {
        let groups = strings_at(rule, "apiGroups");
        let resources: Vec<String> = strings_at(rule, "resources")
            .into_iter()
            .map(|r| subresource_of(&r).map(str::to_string).unwrap_or(r))
            .collect();
        let mut pairs: Vec<(String, Option<String>)> = Vec::new();
        for group in groups.into_iter().filter(|g| g != "*") {
            pairs.push((group.clone(), None));
            pairs.extend(resources.iter().map(|r| (group.clone(), Some(r.clone()))));
        }
        pairs
    }
}

/// Whether a rule grants `update`, `patch` or `*`.
fn updates(rule: &Value) -> bool {
    strings_at(rule, "verbs")
        .iter()
        .any(|v| matches!(v.as_str(), "update" | "patch" | "*"))
}

/// Whether a rule names (explicitly, not by `*`) a group `wanted` accepts.
fn names_group(rule: &Value, wanted: impl Fn(&str) -> bool) -> bool {
    strings_at(rule, "apiGroups").iter().any(|g| g != "*" && wanted(g))
}

/// Whether a Role or ClusterRole (its whole body) may tie a finalizer, a custom resource or a
/// volume to the workloads bound to it, and so is read whole with the stayers, tracked or not:
/// some [`Ask`] the inference puts accepts one of its rules. `default` tells a role of the
/// control plane's own defaults ([`BOOTSTRAPPING`]).
pub fn may_name_an_operator(role: &Value, default: bool) -> bool {
    rules_of(role).any(|rule| {
        PROVISIONING_VERBS
            .iter()
            .any(|verb| Ask::WritesVolumes(verb).accepts(rule, default))
            || Ask::answerable_by(rule).iter().any(|(group, resource)| match resource {
                None => {
                    Ask::UpdatesGroup(group).accepts(rule, default) || Ask::OperatesDomain(group).accepts(rule, default)
                }
                Some(resource) => [false, true].into_iter().any(|any_resource| {
                    Ask::UpdatesResource {
                        group,
                        resource,
                        any_resource,
                    }
                    .accepts(rule, default)
                }),
            })
    })
}

/// What an external provisioner does to PersistentVolumes: both, through any of its roles.
const PROVISIONING_VERBS: [&str; 2] = ["create", "delete"];

/// The label the API server puts on the roles and bindings it makes by itself.
pub const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

fn rules_of(role: &Value) -> impl Iterator<Item = &Value> {
    role.get("rules").and_then(Value::as_array).into_iter().flatten()
}

/// Whether a role is one of the control plane's defaults ([`BOOTSTRAPPING`]).
fn is_default_role(role: &NodeInput) -> bool {
    role.labels.get(BOOTSTRAPPING.0).map(String::as_str) == Some(BOOTSTRAPPING.1)
}

/// Whether one rule grants one of `verbs` (or `*`) on `resource` of `group`, both named
/// explicitly: a rule for every group (`apiGroups: ["*"]`, as cluster-admin's) never counts, and
/// one for every resource of the group (`resources: ["*"]`) only with `any_resource`.
fn rule_grants(rule: &Value, group: &str, resource: &str, any_resource: bool, verbs: &[&str]) -> bool {
    let verbs_granted = strings_at(rule, "verbs");
    let verb_ok = verbs_granted.iter().any(|v| v == "*" || verbs.contains(&v.as_str()));
    let group_ok = names_group(rule, |g| g == group);
    let resource_ok = strings_at(rule, "resources")
        .iter()
        .any(|r| r == resource || subresource_of(r) == Some(resource) || (any_resource && r == "*"));
    verb_ok && group_ok && resource_ok
}

/// The resource whose finalizers a rule's resource lets write: `widgets/finalizers` (what the
/// API server checks when an update changes `metadata.finalizers` with OwnerReferencesPermission-
/// Enforcement) or `namespaces/finalize` (the only way to remove a Namespace's
/// `spec.finalizers`: order review 12, F2).
fn subresource_of(resource: &str) -> Option<&str> {
    resource
        .strip_suffix("/finalizers")
        .or_else(|| resource.strip_suffix("/finalize"))
}

/// The (kind, name) of the role a RoleBinding or ClusterRoleBinding (its whole body) grants.
pub fn role_ref(binding: &Value) -> Option<(String, String)> {
    let field = |key: &str| binding.pointer(&format!("/roleRef/{key}")).and_then(Value::as_str);
    Some((field("kind")?.to_string(), field("name")?.to_string()))
}

/// The Role or ClusterRole a RoleBinding or ClusterRoleBinding grants (its `roleRef`): a Role is
/// in the binding's namespace, a ClusterRole has none. `None` without a body.
fn role_of(binding: &NodeInput) -> Option<ObjectId> {
    let body = binding.body.as_ref()?;
    let field = |key: &str| {
        body.pointer(&format!("/roleRef/{key}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let kind = field("kind");
    let namespace = binding.id.namespace.as_deref().filter(|_| kind == "Role");
    Some(ObjectId::new(RBAC, kind, namespace, field("name")))
}

/// The ServiceAccounts bound to one of `roles`, as the API server's authorizer matches a
/// binding's subjects (see [`binds`]).
fn bound_accounts(objects: &Objects, roles: &HashSet<RoleKey>) -> Bound {
    let mut bound = Bound::default();
    let bindings = objects.inputs.iter().filter(|input| {
        input.id.group == RBAC && matches!(input.id.kind.as_str(), "RoleBinding" | "ClusterRoleBinding")
    });
    for binding in bindings {
        let Some(body) = binding.body.as_ref() else { continue };
        let Some(role) = role_of(binding) else { continue };
        if !roles.contains(&(role.kind, role.namespace, role.name)) {
            continue;
        }
        let subjects = body.get("subjects").and_then(Value::as_array).into_iter().flatten();
        bound
            .subjects
            .extend(subjects.map(|s| (s.clone(), binding.id.namespace.clone())));
    }
    bound
}

/// The subjects of the bindings that grant a role, with each binding's namespace.
#[derive(Default)]
struct Bound {
    subjects: Vec<(Value, Option<String>)>,
}

impl Bound {
    /// Whether one of the subjects binds `account`.
    fn contains(&self, account: &Account) -> bool {
        self.subjects
            .iter()
            .any(|(subject, namespace)| binds(subject, namespace.as_deref(), account))
    }
}

/// Whether a binding's subject (in a binding of `namespace`) names ServiceAccount `account`, as
/// the API server's RBAC authorizer decides (kubernetes `pkg/registry/rbac/validation/rule.go`
/// `appliesToUser`): a `ServiceAccount` subject (its namespace defaulting to the binding's), the
/// `User` `system:serviceaccount:NS:NAME`, or the `Group` `system:serviceaccounts:NS` or
/// `system:serviceaccounts`. `system:authenticated` and the like grant everyone and name no
/// account in particular.
fn binds(subject: &Value, namespace: Option<&str>, account: &Account) -> bool {
    let field = |key: &str| subject.get(key).and_then(Value::as_str);
    let name = field("name").unwrap_or_default();
    match field("kind") {
        Some("ServiceAccount") => field("namespace").or(namespace) == Some(account.0.as_str()) && name == account.1,
        Some("User") => name == format!("system:serviceaccount:{}:{}", account.0, account.1),
        Some("Group") => name == "system:serviceaccounts" || name == format!("system:serviceaccounts:{}", account.0),
        _ => false,
    }
}

/// The pod spec of an object that runs pods: a bare Pod's `spec`, else the pod template of a
/// Deployment, StatefulSet, DaemonSet, ReplicaSet or Job.
fn pod_spec(input: &NodeInput) -> Option<&Value> {
    let pointer = match (input.id.group.as_str(), input.id.kind.as_str()) {
        ("", "Pod") => "/spec",
        _ => "/spec/template/spec",
    };
    input.body.as_ref()?.pointer(pointer)
}

/// The ServiceAccount `(namespace, name)` a workload listed whole runs with.
pub fn service_account_of(object: &crate::cluster::collect::Listed, body: &Value) -> Option<Account> {
    account_of(&NodeInput {
        body: Some(body.clone()),
        ..crate::graph::live::input_from_listed(object)
    })
}

/// Whether a binding's `subject` (the binding in `namespace`, `None` for a
/// ClusterRoleBinding) grants to `account`, as the RBAC authorizer decides ([`binds`]).
pub fn subject_binds(subject: &Value, namespace: Option<&str>, account: &Account) -> bool {
    binds(subject, namespace, account)
}

/// The ServiceAccount a workload's pods run as (`default` when unset).
fn account_of(workload: &NodeInput) -> Option<Account> {
    let namespace = workload.id.namespace.clone()?;
    let spec = pod_spec(workload)?;
    let name = ["serviceAccountName", "serviceAccount"]
        .iter()
        .find_map(|key| spec.get(*key).and_then(Value::as_str).filter(|s| !s.is_empty()))
        .unwrap_or("default");
    Some((namespace, name.to_string()))
}

/// The workloads that run the controller of `group`, as RBAC says (see the module).
pub(super) fn controllers_of_group(objects: &Objects, group: &str) -> BTreeSet<usize> {
    workloads_of_roles(objects, roles_where(objects, Ask::UpdatesGroup(group)))
}

/// The workloads whose ServiceAccount is bound to one of `roles`.
fn workloads_of_roles(objects: &Objects, roles: HashSet<RoleKey>) -> BTreeSet<usize> {
    if roles.is_empty() {
        return BTreeSet::new();
    }
    let roles = with_aggregating(objects, roles);
    let accounts = bound_accounts(objects, &roles);
    (0..objects.inputs.len())
        .filter(|&index| objects.runs_an_operator(index))
        .filter(|&index| account_of(&objects.inputs[index]).is_some_and(|a| accounts.contains(&a)))
        .collect()
}

/// The roles (nodes) one of whose rules answers `ask` yes ([`Ask::accepts`]).
fn roles_where(objects: &Objects, ask: Ask) -> HashSet<RoleKey> {
    objects
        .inputs
        .iter()
        .filter(|input| input.id.group == RBAC && matches!(input.id.kind.as_str(), "Role" | "ClusterRole"))
        .filter(|input| {
            let default = is_default_role(input);
            input
                .body
                .as_ref()
                .is_some_and(|body| rules_of(body).any(|rule| ask.accepts(rule, default)))
        })
        .map(|input| (input.id.kind.clone(), input.id.namespace.clone(), input.id.name.clone()))
        .collect()
}

/// The workloads RBAC lets remove a finalizer from an object of `resource` (its plural) in
/// `group`: bound to a role that may `update` or `patch` it (or its `finalizers` subresource),
/// group and resource named explicitly. A rule for every group (cluster-admin's `*`) names no
/// operator in particular, and would tie every object to every workload bound to it: it never
/// counts. A rule for every resource of a named group counts for a custom group
/// (`any_resource`: an operator's own group, as Crossplane's RBAC manager grants a provider),
/// never for a built-in one (`""`, `apps`: every built-in object at once), nor does a default
/// role of the control plane ([`BOOTSTRAPPING`]).
pub(super) fn writers_of(objects: &Objects, group: &str, resource: &str, any_resource: bool) -> BTreeSet<usize> {
    let ask = Ask::UpdatesResource {
        group,
        resource,
        any_resource,
    };
    workloads_of_roles(objects, roles_where(objects, ask))
}

/// The workloads RBAC names as the operator of a finalizer's domain: bound to a role that may
/// update or patch the objects of an operator's API group (not one of Kubernetes' own) that is
/// that domain or a parent of it (`ops.example.com` for `ops.example.com/cleanup` or
/// `x.ops.example.com`). How a finalizer on a built-in object (a Secret) names the operator whose
/// CRD is no node of the graph.
pub(super) fn operators_of_domain(objects: &Objects, domain: &str) -> BTreeSet<usize> {
    workloads_of_roles(objects, roles_where(objects, Ask::OperatesDomain(domain)))
}

/// The workloads RBAC names as an operator of any operator's API group
/// ([`Ask::UpdatesAnOperatorGroup`]), whether or not an object they finalize exists yet.
pub(super) fn operators_by_rbac(objects: &Objects) -> BTreeSet<usize> {
    workloads_of_roles(objects, roles_where(objects, Ask::UpdatesAnOperatorGroup))
}

/// Whether an API group may be an operator's: it has a dot and is none of Kubernetes' own
/// (`*.k8s.io`, `*.kubernetes.io`).
fn is_operator_group(group: &str) -> bool {
    group.contains('.') && !group.ends_with(".k8s.io") && !group.ends_with(".kubernetes.io")
}

/// The workloads that provision and delete volumes (an external provisioner, as a CSI driver's
/// controller runs one): a container runs the `csi-provisioner` sidecar image
/// (`registry.k8s.io/sig-storage/csi-provisioner:TAG`), or RBAC lets them `create` and `delete`
/// PersistentVolumes by name (kubernetes-csi/external-provisioner `deploy/kubernetes/rbac.yaml`,
/// `external-provisioner-runner`). A default role of the control plane (the volume binder's)
/// never counts.
pub(super) fn provisioner_workloads(objects: &Objects) -> BTreeSet<usize> {
    let [create, delete] =
        PROVISIONING_VERBS.map(|verb| workloads_of_roles(objects, roles_where(objects, Ask::WritesVolumes(verb))));
    let mut found: BTreeSet<usize> = create.intersection(&delete).copied().collect();
    found.extend(
        (0..objects.inputs.len())
            .filter(|&index| objects.runs_an_operator(index))
            .filter(|&index| pod_spec(&objects.inputs[index]).is_some_and(runs_a_csi_provisioner)),
    );
    found
}

/// Whether a pod spec runs the CSI external-provisioner sidecar: a container image whose last
/// path segment, without its tag or digest, is `csi-provisioner`.
fn runs_a_csi_provisioner(spec: &Value) -> bool {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|key| spec.get(*key).and_then(Value::as_array))
        .flatten()
        .filter_map(|container| container.get("image").and_then(Value::as_str))
        .any(|image| {
            let image = image.split('@').next().unwrap_or(image);
            let last = image.rsplit('/').next().unwrap_or(image);
            last.split(':').next() == Some("csi-provisioner")
        })
}

/// Whether a workload names the volume driver `driver` in what it runs with: its labels or its
/// pods' labels (`app.kubernetes.io/instance: hostpath.csi.k8s.io`), or a container's command,
/// arguments or environment values (`--drivername=hostpath.csi.k8s.io`, a registration path
/// `/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock`, `PROVISIONER_NAME`), as a whole word
/// between separators other than `.`, `-` and `_`.
pub(super) fn names_driver(workload: &NodeInput, driver: &str) -> bool {
    let word = |text: &str| {
        text == driver
            || text
                .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
                .any(|part| part == driver)
    };
    if workload.labels.values().any(|v| word(v)) {
        return true;
    }
    let Some(body) = workload.body.as_ref() else {
        return false;
    };
    let template_labels = body
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    if template_labels
        .into_iter()
        .flatten()
        .any(|(_, v)| v.as_str().is_some_and(word))
    {
        return true;
    }
    let Some(spec) = pod_spec(workload) else {
        return false;
    };
    ["initContainers", "containers"]
        .iter()
        .filter_map(|key| spec.get(*key).and_then(Value::as_array))
        .flatten()
        .any(|container| {
            let texts = ["command", "args"]
                .iter()
                .flat_map(|key| strings_at(container, key))
                .chain(
                    container
                        .get("env")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|variable| variable.get("value").and_then(Value::as_str).map(str::to_string)),
                );
            texts.into_iter().any(|text| word(&text))
        })
}

/// What a workload needs to run besides its Service (review finding F10 of issue 25): the
/// ServiceAccount its pods run as, the RoleBindings and ClusterRoleBindings that bind that
/// account and the Roles and ClusterRoles they grant, and the Secrets and ConfigMaps its pods
/// read ([`read_by_pods`]: a webhook's TLS Secret, its settings, its image pull Secret). Only
/// objects that are nodes, as
/// `(from, to)` pairs: the workload needs each, and a binding needs its role. A backend that
/// stays (a webhook or APIService that stays needs it) keeps them; deleted, it goes first.
pub(super) fn runtime_needs(objects: &Objects, workload: usize) -> Vec<(usize, usize)> {
    let input = &objects.inputs[workload];
    let Some(account) = account_of(input) else {
        return Vec::new();
    };
    let namespace = account.0.clone();
    let mut needs: Vec<(usize, usize)> = Vec::new();
    let mut need = |id: ObjectId| {
        if let Some(index) = objects.find(&id).filter(|&i| i != workload) {
            needs.push((workload, index));
        }
    };
    need(ObjectId::new("", "ServiceAccount", Some(&namespace), &account.1));
    for (kind, name) in pod_spec(input).map(read_by_pods).unwrap_or_default() {
        need(ObjectId::new("", kind, Some(&namespace), &name));
    }
    for binding in bindings_of(objects, &account) {
        needs.push((workload, binding));
        if let Some(role) = role_of(&objects.inputs[binding]).and_then(|role| objects.find(&role)) {
            needs.push((binding, role));
            needs.extend(aggregation_needs(objects, role));
        }
    }
    needs
}

/// The ClusterRoles (nodes) a ClusterRole (node) `role` aggregates, down the chain, as `(from,
/// to)` pairs: an aggregated ClusterRole needs each ClusterRole whose rules the clusterrole
/// aggregation controller copies into it ([`aggregates`]) and which, deleted, takes its rules
/// away from the workloads bound to it (order review 9, F1).
fn aggregation_needs(objects: &Objects, role: usize) -> Vec<(usize, usize)> {
    let mut needs = Vec::new();
    let mut seen = BTreeSet::from([role]);
    let mut pending = vec![role];
    while let Some(aggregated) = pending.pop() {
        let input = &objects.inputs[aggregated];
        let Some(body) = input.body.as_ref().filter(|_| is_cluster_role(input)) else {
            continue;
        };
        if body.get("aggregationRule").is_none() {
            continue;
        }
        for piece in cluster_roles(objects) {
            let labels = &objects.inputs[piece].labels;
            if piece != aggregated && aggregates(body, &objects.inputs[piece].id.name, labels) {
                needs.push((aggregated, piece));
                if seen.insert(piece) {
                    pending.push(piece);
                }
            }
        }
    }
    needs
}

fn is_cluster_role(input: &NodeInput) -> bool {
    input.id.group == RBAC && input.id.kind == "ClusterRole"
}

/// The ClusterRoles among the nodes.
fn cluster_roles<'o>(objects: &'o Objects) -> impl Iterator<Item = usize> + 'o {
    (0..objects.inputs.len()).filter(|&index| is_cluster_role(&objects.inputs[index]))
}

/// `roles` and the ClusterRoles (nodes) that aggregate one of them, up the chain: the
/// clusterrole aggregation controller copies a ClusterRole's rules into every ClusterRole whose
/// `aggregationRule` selects it ([`aggregates`]), so that a binding of the aggregated role grants
/// what the piece grants (order review 9, F1). The control plane's default roles
/// ([`BOOTSTRAPPING`]: `admin`, `edit`, `view` aggregate what is labelled for them) never count
/// here, as they never name an operator in [`writers_of`].
fn with_aggregating(objects: &Objects, mut roles: HashSet<RoleKey>) -> HashSet<RoleKey> {
    let aggregating: Vec<&NodeInput> = cluster_roles(objects)
        .map(|index| &objects.inputs[index])
        .filter(|input| !is_default_role(input))
        .filter(|input| input.body.as_ref().is_some_and(|b| b.get("aggregationRule").is_some()))
        .collect();
    if aggregating.is_empty() {
        return roles;
    }
    let key = |input: &NodeInput| (input.id.kind.clone(), input.id.namespace.clone(), input.id.name.clone());
    loop {
        let pieces: Vec<&NodeInput> = cluster_roles(objects)
            .map(|index| &objects.inputs[index])
            .filter(|input| roles.contains(&key(input)))
            .collect();
        let added: Vec<RoleKey> = aggregating
            .iter()
            .filter(|role| !roles.contains(&key(role)))
            .filter(|role| {
                role.body.as_ref().is_some_and(|body| {
                    pieces
                        .iter()
                        .any(|piece| aggregates(body, &piece.id.name, &piece.labels))
                })
            })
            .map(|role| key(role))
            .collect();
        if added.is_empty() {
            return roles;
        }
        roles.extend(added);
    }
}

/// Whether the ClusterRole whose whole body is `aggregated` aggregates the ClusterRole `name`
/// labelled `labels`, as kube-controller-manager's clusterrole aggregation controller decides
/// (kubernetes `pkg/controller/clusterroleaggregation`): one of its
/// `aggregationRule.clusterRoleSelectors` selects those labels ([`selector_matches`]), and it is
/// not that ClusterRole itself. A selector the controller cannot read makes it give up the whole
/// role: it aggregates nothing.
pub fn aggregates(aggregated: &Value, name: &str, labels: &BTreeMap<String, String>) -> bool {
    if aggregated.pointer("/metadata/name").and_then(Value::as_str) == Some(name) {
        return false;
    }
    let selectors = aggregated
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let mut found = false;
    for selector in selectors {
        match selector_matches(selector, labels) {
            Some(matches) => found |= matches,
            None => return false,
        }
    }
    found
}

/// Whether a label selector (`metav1.LabelSelector`: its `matchLabels` and `matchExpressions`,
/// all of them) selects `labels`, as apimachinery's `LabelSelectorAsSelector` reads it: `In` (the
/// key is there with one of the values), `NotIn` (the key is absent or has none of them),
/// `Exists`, `DoesNotExist`; an empty selector selects everything. `None` for a selector it
/// rejects (an unknown operator, `In` or `NotIn` without values, `Exists` or `DoesNotExist` with
/// some, a value that is not a string).
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> Option<bool> {
    let selector = selector.as_object()?;
    let mut matches = true;
    if let Some(match_labels) = selector.get("matchLabels").filter(|v| !v.is_null()) {
        for (key, value) in match_labels.as_object()? {
            matches &= labels.get(key).map(String::as_str) == Some(value.as_str()?);
        }
    }
    let no_expressions = Vec::new();
    let expressions = match selector.get("matchExpressions").filter(|v| !v.is_null()) {
        Some(expressions) => expressions.as_array()?,
        None => &no_expressions,
    };
    for expression in expressions {
        let key = expression.get("key").and_then(Value::as_str)?;
        let values: Vec<&str> = match expression.get("values").filter(|v| !v.is_null()) {
            Some(values) => values.as_array()?.iter().map(Value::as_str).collect::<Option<_>>()?,
            None => Vec::new(),
        };
        let value = labels.get(key).map(String::as_str);
        matches &= match expression.get("operator").and_then(Value::as_str)? {
            "In" if !values.is_empty() => value.is_some_and(|v| values.contains(&v)),
            "NotIn" if !values.is_empty() => value.is_none_or(|v| !values.contains(&v)),
            "Exists" if values.is_empty() => value.is_some(),
            "DoesNotExist" if values.is_empty() => value.is_none(),
            _ => return None,
        };
    }
    Some(matches)
}

/// The name at `pointer` in `value`, when it is a non-empty string.
fn name_at(value: &Value, pointer: &str) -> Option<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The Secrets and ConfigMaps the pods of a pod spec read, `(kind, name)`: those their volumes
/// mount (projected sources too), those their containers and init containers take their
/// environment from (`envFrom`, `env[].valueFrom`), and their image pull Secrets. A pod whose
/// ConfigMap or Secret is gone does not start again (`CreateContainerConfigError`).
pub(super) fn read_by_pods(spec: &Value) -> Vec<(&'static str, String)> {
    let items = |value: &Value, key: &str| -> Vec<Value> {
        value.get(key).and_then(Value::as_array).cloned().unwrap_or_default()
    };
    let mut found = Vec::new();
    let mut add = |kind: &'static str, name: Option<String>| found.extend(name.map(|n| (kind, n)));
    for volume in items(spec, "volumes") {
        add("Secret", name_at(&volume, "/secret/secretName"));
        add("ConfigMap", name_at(&volume, "/configMap/name"));
        let projected = volume.pointer("/projected/sources").and_then(Value::as_array);
        for source in projected.into_iter().flatten() {
            add("Secret", name_at(source, "/secret/name"));
            add("ConfigMap", name_at(source, "/configMap/name"));
        }
    }
    for pull in items(spec, "imagePullSecrets") {
        add("Secret", name_at(&pull, "/name"));
    }
    let containers = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|key| items(spec, key));
    for container in containers {
        for source in items(&container, "envFrom") {
            add("ConfigMap", name_at(&source, "/configMapRef/name"));
            add("Secret", name_at(&source, "/secretRef/name"));
        }
        for variable in items(&container, "env") {
            add("ConfigMap", name_at(&variable, "/valueFrom/configMapKeyRef/name"));
            add("Secret", name_at(&variable, "/valueFrom/secretKeyRef/name"));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The RoleBindings and ClusterRoleBindings (nodes) that bind `account` (see [`binds`]).
fn bindings_of(objects: &Objects, account: &Account) -> Vec<usize> {
    (0..objects.inputs.len())
        .filter(|&index| {
            let binding = &objects.inputs[index];
            binding.id.group == RBAC
                && matches!(binding.id.kind.as_str(), "RoleBinding" | "ClusterRoleBinding")
                && binding
                    .body
                    .as_ref()
                    .and_then(|body| body.get("subjects"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|subject| binds(subject, binding.id.namespace.as_deref(), account))
        })
        .collect()
}
