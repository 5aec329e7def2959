//! Object identity: (group, kind, namespace, name), and the textual forms tools write it in.

use std::fmt;

/// The identity of an object: what a prune must get exactly right.
/// `namespace` is `None` for cluster-scoped objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ObjectId {
    /// API group; empty for core.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace; `None` when cluster-scoped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectId {
    /// A new identity. The group is made canonical (see [`canonical_group`]): an object served
    /// under two groups has one identity, whichever group a manifest or an inventory names.
    pub fn new(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self {
            group: canonical_group(group, kind).to_string(),
            kind: kind.to_string(),
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_string),
            name: name.to_string(),
        }
    }

    /// Parses a cli-utils `ObjMetadata` string, as Flux writes it in `status.inventory` and
    /// cli-utils/kpt in ConfigMap inventories: `<namespace>_<name>_<group>_<Kind>` (core group
    /// and cluster scope are empty fields). As cli-utils' `ParseObjMetadata`
    /// (kubernetes-sigs/cli-utils `pkg/object/objmetadata.go`): the namespace ends at the first
    /// `_`, the kind starts after the last, the group after the next-to-last; the rest is the
    /// name, in which `__` stands for `:` (RBAC names such as `system:controller:x`). A name
    /// that still holds `_` after that is rejected, as cli-utils rejects it.
    pub fn from_flux_inventory_id(id: &str) -> Option<Self> {
        let (namespace, rest) = id.split_once('_')?;
        let (rest, kind) = rest.rsplit_once('_')?;
        let (name, group) = rest.rsplit_once('_')?;
        let name = name.replace(RBAC_COLON, ":");
        if kind.is_empty() || name.is_empty() || name.contains('_') {
            return None;
        }
        Some(Self::new(group, kind, Some(namespace), &name))
    }

    /// The cli-utils `ObjMetadata` string of this object (Flux inventory entry id, ConfigMap
    /// inventory key): `:` in the names of RBAC kinds is written `__`, as cli-utils does.
    pub fn to_flux_inventory_id(&self) -> String {
        let name = if is_rbac_kind(&self.group, &self.kind) {
            self.name.replace(':', RBAC_COLON)
        } else {
            self.name.clone()
        };
        format!(
            "{}_{}_{}_{}",
            self.namespace.as_deref().unwrap_or(""),
            name,
            self.group,
            self.kind
        )
    }

    /// Parses one cli-utils/kpt `config.kubernetes.io/depends-on` reference:
    /// `<group>/namespaces/<ns>/<Kind>/<name>` or `<group>/<Kind>/<name>` (core group empty).
    pub fn from_depends_on_ref(reference: &str) -> Option<Self> {
        let parts: Vec<&str> = reference.trim().split('/').collect();
        match parts.as_slice() {
            [group, "namespaces", namespace, kind, name] if !kind.is_empty() && !name.is_empty() => {
                Some(Self::new(group, kind, Some(namespace), name))
            }
            [group, kind, name] if !kind.is_empty() && !name.is_empty() => Some(Self::new(group, kind, None, name)),
            _ => None,
        }
    }

    /// `Kind.group` (or `Kind` for core).
    pub fn kind_with_group(&self) -> String {
        kind_with_group(&self.kind, &self.group)
    }

    /// `kind.group/name`, as `kubectl get -o name` prints it.
    pub fn kubectl_name(&self) -> String {
        let kind = self.kind.to_ascii_lowercase();
        if self.group.is_empty() {
            format!("{kind}/{}", self.name)
        } else {
            format!("{kind}.{}/{}", self.group, self.name)
        }
    }
}

/// `group/version`, or `version` for the core group: an `apiVersion`.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// `Kind.group`, or `Kind` for the core group.
pub fn kind_with_group(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

impl fmt::Display for ObjectId {
    /// `Kind.group/namespace/name`, or `Kind.group/name` when cluster-scoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{}/{}/{}", self.kind_with_group(), namespace, self.name),
            None => write!(f, "{}/{}", self.kind_with_group(), self.name),
        }
    }
}

/// How cli-utils writes `:` in the names of RBAC objects inside an `ObjMetadata` string.
const RBAC_COLON: &str = "__";

/// The RBAC kinds whose names may hold `:` (cli-utils' `RBACGroupKind`).
fn is_rbac_kind(group: &str, kind: &str) -> bool {
    group == "rbac.authorization.k8s.io"
        && matches!(kind, "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding")
}

/// Kinds the API server serves under more than one group: the same stored object answers under
/// each (an Ingress applied as `networking.k8s.io/v1` is also `extensions/v1beta1`'s; an Event
/// written as `events.k8s.io/v1` is also core `v1`'s). The first group is canonical.
/// Source: the API server's cohabitating resources (kubernetes
/// `pkg/kubeapiserver/default_storage_factory_builder.go`, `AddCohabitatingResources`, v1.20).
pub const SHARED_KINDS: &[(&str, &[&str], &str)] = &[
    ("networking.k8s.io", &["extensions"], "Ingress"),
    ("networking.k8s.io", &["extensions"], "NetworkPolicy"),
    ("apps", &["extensions"], "Deployment"),
    ("apps", &["extensions"], "DaemonSet"),
    ("apps", &["extensions"], "ReplicaSet"),
    ("policy", &["extensions"], "PodSecurityPolicy"),
    ("", &["events.k8s.io"], "Event"),
];

/// The canonical group of a (group, kind): the one group an object served under several groups
/// is known by (see [`SHARED_KINDS`]); any other (group, kind) is its own.
pub fn canonical_group<'a>(group: &'a str, kind: &str) -> &'a str {
    SHARED_KINDS
        .iter()
        .find(|(_, aliases, shared)| *shared == kind && aliases.contains(&group))
        .map(|(canonical, _, _)| *canonical)
        .unwrap_or(group)
}

/// The group an inventory id `<namespace>_<name>_<group>_<Kind>` records, as written (an
/// [`ObjectId`] made of it holds the canonical one).
pub fn recorded_group(entry: &str) -> Option<&str> {
    let mut fields = entry.rsplitn(3, '_');
    fields.next()?;
    let group = fields.next()?;
    fields.next().map(|_| group)
}

/// The other groups that serve the same objects as (group, kind), canonical group first.
pub fn groups_sharing(group: &str, kind: &str) -> Vec<&'static str> {
    let canonical = canonical_group(group, kind);
    SHARED_KINDS
        .iter()
        .filter(|(c, _, shared)| *shared == kind && *c == canonical)
        .flat_map(|(c, aliases, _)| std::iter::once(*c).chain(aliases.iter().copied()))
        .filter(|g| *g != group)
        .collect()
}

/// The name of the CustomResourceDefinition that defines a custom kind: `plural.group` (the API
/// server accepts a CRD only under that name).
pub fn crd_name(plural: &str, group: &str) -> String {
    format!("{plural}.{group}")
}

/// A kind's resource type as kubectl takes it on the command line (`TYPE/NAME`): `plural.group`,
/// or `plural` for the core group.
pub fn resource_type(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        crd_name(plural, group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flux_inventory_ids_round_trip() {
        let service = ObjectId::from_flux_inventory_id("default_podinfo__Service").unwrap();
        assert_eq!(service, ObjectId::new("", "Service", Some("default"), "podinfo"));
        let role = ObjectId::from_flux_inventory_id("_admin_rbac.authorization.k8s.io_ClusterRole").unwrap();
        assert_eq!(
            role,
            ObjectId::new("rbac.authorization.k8s.io", "ClusterRole", None, "admin")
        );
        assert_eq!(
            role.to_flux_inventory_id(),
            "_admin_rbac.authorization.k8s.io_ClusterRole"
        );
        assert_eq!(service.to_flux_inventory_id(), "default_podinfo__Service");
        assert!(ObjectId::from_flux_inventory_id("nonsense").is_none());
    }

    #[test]
    fn depends_on_refs_parse() {
        assert_eq!(
            ObjectId::from_depends_on_ref("/namespaces/test/Pod/pod-a").unwrap(),
            ObjectId::new("", "Pod", Some("test"), "pod-a")
        );
        assert_eq!(
            ObjectId::from_depends_on_ref("apiextensions.k8s.io/CustomResourceDefinition/crontabs.example.com")
                .unwrap(),
            ObjectId::new(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                None,
                "crontabs.example.com"
            )
        );
        assert!(ObjectId::from_depends_on_ref("apps/Deployment").is_none());
    }

    #[test]
    fn crd_names_and_resource_types() {
        assert_eq!(
            crd_name("crontabs", "stable.example.com"),
            "crontabs.stable.example.com"
        );
        assert_eq!(resource_type("deployments", "apps"), "deployments.apps");
        assert_eq!(resource_type("configmaps", ""), "configmaps");
    }

    #[test]
    fn display_and_names() {
        let id = ObjectId::new("apps", "Deployment", Some("web"), "api");
        assert_eq!(id.to_string(), "Deployment.apps/web/api");
        assert_eq!(id.kubectl_name(), "deployment.apps/api");
        assert_eq!(
            ObjectId::new("", "Namespace", Some(""), "web").to_string(),
            "Namespace/web"
        );
    }

    #[test]
    fn rbac_names_with_colons_round_trip_as_cli_utils_writes_them() {
        // Flux/cli-utils write ClusterRole system:x:reader as `_system__x__reader_rbac.authorization.k8s.io_ClusterRole`.
        let written = "_system__x__reader_rbac.authorization.k8s.io_ClusterRole";
        let role = ObjectId::from_flux_inventory_id(written).unwrap();
        assert_eq!(
            role,
            ObjectId::new("rbac.authorization.k8s.io", "ClusterRole", None, "system:x:reader")
        );
        assert_eq!(role.to_flux_inventory_id(), written);
        let binding = ObjectId::new(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            Some("kube-system"),
            "system:b",
        );
        assert_eq!(
            ObjectId::from_flux_inventory_id(&binding.to_flux_inventory_id()),
            Some(binding)
        );
        // cli-utils rejects a name that keeps a `_` (too many fields).
        assert!(ObjectId::from_flux_inventory_id("ns_a___b__ConfigMap").is_none());
        assert!(ObjectId::from_flux_inventory_id("ns_x_y_z_apps_Deployment").is_none());
        // Names of other kinds are written as they are.
        let cm = ObjectId::new("", "ConfigMap", Some("web"), "a.b-c");
        assert_eq!(cm.to_flux_inventory_id(), "web_a.b-c__ConfigMap");
        assert_eq!(ObjectId::from_flux_inventory_id("web_a.b-c__ConfigMap"), Some(cm));
    }

    #[test]
    fn an_object_served_under_two_groups_has_one_identity() {
        let ingress = ObjectId::new("networking.k8s.io", "Ingress", Some("web"), "shop");
        assert_eq!(ObjectId::new("extensions", "Ingress", Some("web"), "shop"), ingress);
        assert_eq!(
            ObjectId::from_flux_inventory_id("web_shop_extensions_Ingress"),
            Some(ingress.clone())
        );
        assert_eq!(
            ObjectId::from_depends_on_ref("extensions/namespaces/web/Ingress/shop"),
            Some(ingress)
        );
        let event = ObjectId::new("events.k8s.io", "Event", Some("web"), "e1");
        assert_eq!(event, ObjectId::new("", "Event", Some("web"), "e1"));
        assert_eq!(event.kind_with_group(), "Event");
        // Groups that only share a kind name stay apart.
        assert_ne!(
            ObjectId::new("example.com", "Ingress", Some("web"), "shop").group,
            "networking.k8s.io"
        );
        assert_eq!(recorded_group("web_d1_extensions_Deployment"), Some("extensions"));
        assert_eq!(recorded_group("web_a__ConfigMap"), Some(""));
        assert_eq!(recorded_group("_ClusterRole"), None);
        assert_eq!(groups_sharing("networking.k8s.io", "Ingress"), vec!["extensions"]);
        assert_eq!(groups_sharing("extensions", "Ingress"), vec!["networking.k8s.io"]);
        assert!(groups_sharing("", "ConfigMap").is_empty());
    }
}
