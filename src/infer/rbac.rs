//! Which workloads run the controller of an API group, read from RBAC: a Deployment,
//! StatefulSet or DaemonSet whose ServiceAccount is bound to a Role or ClusterRole that may
//! update or patch that group's objects (a controller that removes its finalizers must). Where a
//! CRD and its operator live in different stacks (Flux's usual `infra-crds` and
//! `infra-controllers`), this is what ties a custom resource's finalizer to the operator.
//!
//! Only an explicit grant counts: a role granting every group (`apiGroups: ["*"]`, as
//! cluster-admin does) names no controller in particular.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;

use super::{Objects, WORKLOAD_KINDS};
use crate::graph::NodeInput;
use crate::identity::ObjectId;

const RBAC: &str = "rbac.authorization.k8s.io";

/// A ServiceAccount: (namespace, name).
type Account = (String, String);

/// A role: (kind, namespace for a Role, name).
type RoleKey = (String, Option<String>, String);

fn strings_at(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether a role's rules let it update or patch objects of `group` (or their finalizers).
fn grants_updates(role: &NodeInput, group: &str) -> bool {
    let Some(rules) = role
        .body
        .as_ref()
        .and_then(|b| b.get("rules"))
        .and_then(Value::as_array)
    else {
        return false;
    };
    rules.iter().any(|rule| {
        let groups = strings_at(rule, "apiGroups");
        let verbs = strings_at(rule, "verbs");
        groups.iter().any(|g| g == group) && verbs.iter().any(|v| matches!(v.as_str(), "update" | "patch" | "*"))
    })
}

/// Whether a Role or ClusterRole (its whole body) lets update or patch the objects of an API
/// group an operator may serve: a group with a dot that is not one of Kubernetes' own
/// (`*.k8s.io`, `*.kubernetes.io`). Such a role, and the bindings that grant it, tie a finalizer
/// of that group to the workloads bound to it, tracked or not ([`crate::stayers`]).
pub fn grants_an_operator_group(role: &Value) -> bool {
    let rules = role.get("rules").and_then(Value::as_array).into_iter().flatten();
    rules.into_iter().any(|rule| {
        let verbs = strings_at(rule, "verbs");
        let updates = verbs.iter().any(|v| matches!(v.as_str(), "update" | "patch" | "*"));
        updates
            && strings_at(rule, "apiGroups")
                .iter()
                .any(|group| group.contains('.') && !group.ends_with(".k8s.io") && !group.ends_with(".kubernetes.io"))
    })
}

/// The (kind, name) of the role a RoleBinding or ClusterRoleBinding (its whole body) grants.
pub fn role_ref(binding: &Value) -> Option<(String, String)> {
    let field = |key: &str| binding.pointer(&format!("/roleRef/{key}")).and_then(Value::as_str);
    Some((field("kind")?.to_string(), field("name")?.to_string()))
}

/// The roles that may update `group`'s objects.
fn granting_roles(objects: &Objects, group: &str) -> HashSet<RoleKey> {
    objects
        .inputs
        .iter()
        .filter(|input| input.id.group == RBAC && matches!(input.id.kind.as_str(), "Role" | "ClusterRole"))
        .filter(|input| grants_updates(input, group))
        .map(|input| (input.id.kind.clone(), input.id.namespace.clone(), input.id.name.clone()))
        .collect()
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

/// The ServiceAccounts bound to one of `roles`.
fn bound_accounts(objects: &Objects, roles: &HashSet<RoleKey>) -> HashSet<Account> {
    let mut accounts = HashSet::new();
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
        for subject in subjects.filter(|s| s.get("kind").and_then(Value::as_str) == Some("ServiceAccount")) {
            let namespace = subject
                .get("namespace")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| binding.id.namespace.clone());
            if let (Some(namespace), Some(name)) = (namespace, subject.get("name").and_then(Value::as_str)) {
                accounts.insert((namespace, name.to_string()));
            }
        }
    }
    accounts
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
    let roles = granting_roles(objects, group);
    if roles.is_empty() {
        return BTreeSet::new();
    }
    let accounts = bound_accounts(objects, &roles);
    (0..objects.inputs.len())
        .filter(|&index| objects.is(index, &WORKLOAD_KINDS))
        .filter(|&index| account_of(&objects.inputs[index]).is_some_and(|a| accounts.contains(&a)))
        .collect()
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
        }
    }
    needs
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

/// The RoleBindings and ClusterRoleBindings (nodes) that bind `account`.
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
                    .filter(|s| s.get("kind").and_then(Value::as_str) == Some("ServiceAccount"))
                    .any(|subject| {
                        let namespace = subject
                            .get("namespace")
                            .and_then(Value::as_str)
                            .or(binding.id.namespace.as_deref());
                        namespace == Some(account.0.as_str())
                            && subject.get("name").and_then(Value::as_str) == Some(account.1.as_str())
                    })
        })
        .collect()
}
