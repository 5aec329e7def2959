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

/// The ServiceAccounts bound to one of `roles`.
fn bound_accounts(objects: &Objects, roles: &HashSet<RoleKey>) -> HashSet<Account> {
    let mut accounts = HashSet::new();
    let bindings = objects.inputs.iter().filter(|input| {
        input.id.group == RBAC && matches!(input.id.kind.as_str(), "RoleBinding" | "ClusterRoleBinding")
    });
    for binding in bindings {
        let Some(body) = binding.body.as_ref() else { continue };
        let role_kind = body
            .pointer("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let role_name = body
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // A RoleBinding's Role is in the binding's namespace; a ClusterRole has none.
        let role_namespace = (role_kind == "Role").then(|| binding.id.namespace.clone()).flatten();
        if !roles.contains(&(role_kind.to_string(), role_namespace, role_name.to_string())) {
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
