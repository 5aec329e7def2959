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
    /// A new identity.
    pub fn new(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self {
            group: group.to_string(),
            kind: kind.to_string(),
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_string),
            name: name.to_string(),
        }
    }

    /// Parses a Flux inventory entry id: `<namespace>_<name>_<group>_<Kind>` (core group and
    /// cluster scope are empty fields).
    pub fn from_flux_inventory_id(id: &str) -> Option<Self> {
        // Names and namespaces cannot contain '_', groups cannot either: split from both ends.
        let mut parts = id.rsplitn(3, '_');
        let kind = parts.next()?;
        let group = parts.next()?;
        let rest = parts.next()?;
        let (namespace, name) = rest.split_once('_')?;
        if kind.is_empty() || name.is_empty() {
            return None;
        }
        Some(Self::new(group, kind, Some(namespace), name))
    }

    /// The Flux inventory entry id of this object.
    pub fn to_flux_inventory_id(&self) -> String {
        format!(
            "{}_{}_{}_{}",
            self.namespace.as_deref().unwrap_or(""),
            self.name,
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
        crate::discovery::kind_with_group(&self.kind, &self.group)
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

impl fmt::Display for ObjectId {
    /// `Kind.group/namespace/name`, or `Kind.group/name` when cluster-scoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{}/{}/{}", self.kind_with_group(), namespace, self.name),
            None => write!(f, "{}/{}", self.kind_with_group(), self.name),
        }
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
    fn display_and_names() {
        let id = ObjectId::new("apps", "Deployment", Some("web"), "api");
        assert_eq!(id.to_string(), "Deployment.apps/web/api");
        assert_eq!(id.kubectl_name(), "deployment.apps/api");
        assert_eq!(
            ObjectId::new("", "Namespace", Some(""), "web").to_string(),
            "Namespace/web"
        );
    }
}
