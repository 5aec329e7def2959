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

/// The ServiceAccount a workload's pods run as (`default` when unset).
fn account_of(workload: &NodeInput) -> Option<Account> {
    let namespace = workload.id.namespace.clone()?;
    let spec = workload.body.as_ref()?.pointer("/spec/template/spec")?;
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
/// mount (volumes, projected sources: a webhook's TLS Secret). Only objects that are nodes, as
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
    for (kind, name) in mounted(input) {
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

/// The Secrets and ConfigMaps a workload's pods mount: `(kind, name)`.
fn mounted(workload: &NodeInput) -> Vec<(&'static str, String)> {
    let Some(volumes) = workload
        .body
        .as_ref()
        .and_then(|b| b.pointer("/spec/template/spec/volumes"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let projected = volumes
        .iter()
        .filter_map(|v| v.pointer("/projected/sources").and_then(Value::as_array))
        .flatten();
    let named = |source: &Value, key: &str, field: &str| {
        source
            .get(key)
            .and_then(|s| s.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut found = Vec::new();
    for volume in volumes {
        found.extend(named(volume, "secret", "secretName").map(|n| ("Secret", n)));
        found.extend(named(volume, "configMap", "name").map(|n| ("ConfigMap", n)));
    }
    for source in projected {
        found.extend(named(source, "secret", "name").map(|n| ("Secret", n)));
        found.extend(named(source, "configMap", "name").map(|n| ("ConfigMap", n)));
    }
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
