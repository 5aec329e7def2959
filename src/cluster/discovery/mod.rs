//! Discovery: every kind the server serves, each exactly once, at the version to use.
//!
//! Aggregated discovery (two requests) where the server has it; per-group discovery where it
//! does not. A server older than 1.26 answers the aggregated request with a plain group list,
//! which parses as *no groups and no error*: that answer is never trusted as an empty cluster.
//!
//! The kinds and the catalog are here; the reading is split by source: `aggregated` (one
//! document for all groups), `per_group` (one request per group version), `cache` (kubectl's
//! disk cache), all producing the same [`ServerLists`] (`lists`).

mod aggregated;
mod cache;
mod lists;
mod per_group;
mod watch;

pub use aggregated::{discover_aggregated, read_aggregated};
pub use cache::{cache_dir_for, default_cache_root, discover_cached, CacheUse, DiskCache, CACHE_TTL};
pub use lists::ServerLists;
pub use per_group::{discover_per_group, read_per_group};
pub use watch::KindsWatch;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::core::Version;
use kube::discovery::ApiResource;
use kube::Client;

/// One kind the server serves, at the version kubectl-stack uses for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KindInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// The version used to read and delete it.
    pub version: String,
    /// The kind, e.g. `Deployment`.
    pub kind: String,
    /// The plural resource name, e.g. `deployments`.
    pub plural: String,
    /// The singular resource name, e.g. `deployment` (may be empty on old servers).
    pub singular: String,
    /// Short names, e.g. `deploy`.
    pub short_names: Vec<String>,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
    /// The verbs the server allows, e.g. `list`, `delete`, `watch`.
    pub verbs: Vec<String>,
}

impl KindInfo {
    /// The kube `ApiResource` for dynamic requests.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        crate::model::identity::api_version(&self.group, &self.version)
    }

    /// Whether the server allows a verb on this kind.
    pub fn can(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// The name of the CRD that defines this kind, `plural.group` (custom kinds only).
    pub fn crd_name(&self) -> String {
        crate::model::identity::crd_name(&self.plural, &self.group)
    }

    /// The resource type kubectl takes on the command line: `plural.group`, or `plural` for core.
    pub fn resource_type(&self) -> String {
        crate::model::identity::resource_type(&self.plural, &self.group)
    }

    /// `Kind.group`, or `Kind` for the core group, as kubectl prints kinds.
    pub fn kind_with_group(&self) -> String {
        crate::model::identity::kind_with_group(&self.kind, &self.group)
    }
}

/// A group version whose discovery failed (e.g. an aggregated APIService that is down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryFailure {
    /// `group/version`, or `v1` for core.
    pub group_version: String,
    /// What the server said.
    pub message: String,
}

/// How the catalog was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoverySource {
    /// Aggregated discovery (Kubernetes >= 1.26 with apidiscovery v2).
    Aggregated,
    /// One request per group version.
    PerGroup,
    /// kubectl's disk cache (`--cache-dir`), group versions it lacked asked for.
    DiskCache,
}

/// Every kind the server serves, each once.
#[derive(Debug, Clone)]
pub struct Catalog {
    kinds: Vec<Arc<KindInfo>>,
    by_group_kind: HashMap<(String, String), usize>,
    /// Every version that serves each (group, kind), the chosen one included: what a tool's
    /// RESTMapper can map an object written at another version to (see [`Catalog::serves_version`]).
    versions: HashMap<(String, String), Vec<String>>,
    /// Group versions that could not be discovered; their kinds are missing from the catalog.
    pub failures: Vec<DiscoveryFailure>,
    /// How the catalog was obtained.
    pub source: DiscoverySource,
}

impl Catalog {
    /// Builds a catalog from already chosen kinds (sorted: core group first, then by group and kind).
    pub fn new(mut kinds: Vec<KindInfo>, failures: Vec<DiscoveryFailure>, source: DiscoverySource) -> Self {
        kinds.sort_by(|a, b| (&a.group, &a.kind).cmp(&(&b.group, &b.kind)));
        let kinds: Vec<Arc<KindInfo>> = kinds.into_iter().map(Arc::new).collect();
        let by_group_kind = kinds
            .iter()
            .enumerate()
            .map(|(index, k)| ((k.group.clone(), k.kind.clone()), index))
            .collect();
        let versions = kinds
            .iter()
            .map(|k| ((k.group.clone(), k.kind.clone()), vec![k.version.clone()]))
            .collect();
        Self {
            kinds,
            by_group_kind,
            versions,
            failures,
            source,
        }
    }

    /// The catalog, knowing that each `(group, kind, version)` of `served` is served too (a kind
    /// served at several versions is chosen at one: see [`choose_kinds`]).
    pub fn with_versions(mut self, served: impl IntoIterator<Item = (String, String, String)>) -> Self {
        for (group, kind, version) in served {
            let known = self.versions.entry((group, kind)).or_default();
            if !known.contains(&version) {
                known.push(version);
            }
        }
        self
    }

    /// Every `(group, kind, version)` this catalog knows to be served.
    pub fn served_versions(&self) -> impl Iterator<Item = (String, String, String)> + '_ {
        self.versions.iter().flat_map(|((group, kind), versions)| {
            versions
                .iter()
                .map(move |version| (group.clone(), kind.clone(), version.clone()))
        })
    }

    /// Whether the server serves `kind` of `group` at `version`: what a tool that maps an object
    /// by its recorded `apiVersion` (a RESTMapper's `RESTMapping(groupKind, version)`: Helm's
    /// `Build`, Flux's controller-runtime client) can read and delete it with. The group is the
    /// one recorded, exactly ([`Catalog::serves`]): a mapper maps no `extensions` Deployment
    /// where `extensions` no longer serves it, whatever `apps` serves (membership review 31,
    /// F1). An empty `version` maps to the preferred one, so it is served whenever the kind is.
    pub fn serves_version(&self, group: &str, kind: &str, version: &str) -> bool {
        let Some(found) = self.exact(group, kind) else {
            return false;
        };
        version.is_empty()
            || self
                .versions
                .get(&(found.group.clone(), found.kind.clone()))
                .is_some_and(|versions| versions.iter().any(|v| v == version))
    }

    /// All kinds, core group first, then by group and kind.
    pub fn kinds(&self) -> &[Arc<KindInfo>] {
        &self.kinds
    }

    /// The kinds that can be listed. A kind served under two groups (Ingress as
    /// `networking.k8s.io` and `extensions`) is listed once, under its canonical group when the
    /// server serves that: the same objects answer under both.
    pub fn listable(&self) -> impl Iterator<Item = &Arc<KindInfo>> {
        self.kinds.iter().filter(|k| k.can("list") && !self.served_elsewhere(k))
    }

    /// Whether the objects of this kind are served, and listed, under its canonical group.
    fn served_elsewhere(&self, kind: &KindInfo) -> bool {
        let canonical = crate::model::identity::canonical_group(&kind.group, &kind.kind);
        canonical != kind.group && self.exact(canonical, &kind.kind).is_some_and(|k| k.can("list"))
    }

    fn exact(&self, group: &str, kind: &str) -> Option<&Arc<KindInfo>> {
        self.by_group_kind
            .get(&(group.to_string(), kind.to_string()))
            .map(|&index| &self.kinds[index])
    }

    /// Whether the server serves `kind` under exactly this `group`, as a REST mapper maps a
    /// recorded group-kind (kubectl's ApplySet, cli-utils' inventory, Flux's inventory): a kind
    /// that only another group serves (`Deployment.extensions` on a cluster that serves
    /// `Deployment.apps` alone) is not mapped (membership review 31, F1).
    pub fn serves(&self, group: &str, kind: &str) -> bool {
        self.exact(group, kind).is_some()
    }

    /// The kind with this group and kind name; for a kind served under two groups, the other
    /// group's when this one is not served.
    pub fn get(&self, group: &str, kind: &str) -> Option<&Arc<KindInfo>> {
        self.exact(group, kind).or_else(|| {
            crate::model::identity::groups_sharing(group, kind)
                .into_iter()
                .find_map(|other| self.exact(other, kind))
        })
    }

    /// Resolves what a user typed for a kind, as kubectl does: `deployments`, `deployment`,
    /// `Deployment`, `deploy`, `deployments.apps`, `deployment.v1.apps`. Core group wins ties.
    pub fn resolve(&self, typed: &str) -> Option<&Arc<KindInfo>> {
        let typed_lower = typed.to_ascii_lowercase();
        let (name, group) = match typed_lower.split_once('.') {
            Some((name, rest)) => (name.to_string(), Some(rest.to_string())),
            None => (typed_lower.clone(), None),
        };
        let group_matches = |k: &KindInfo| match &group {
            None => true,
            Some(g) => k.group == *g || format!("{}.{}", k.version, k.group) == *g,
        };
        let name_matches = |k: &KindInfo| {
            k.plural == name
                || k.singular == name
                || k.kind.to_ascii_lowercase() == name
                || k.short_names.iter().any(|s| s.to_ascii_lowercase() == name)
        };
        self.kinds.iter().find(|k| group_matches(k) && name_matches(k))
    }
}

/// One resource of one group version, as discovery reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedResource {
    /// Plural resource name; subresources contain a `/`.
    pub plural: String,
    /// Singular name (may be empty).
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Allowed verbs.
    pub verbs: Vec<String>,
    /// Short names.
    pub short_names: Vec<String>,
}

/// What one group serves, version by version.
#[derive(Debug, Clone, Default)]
pub struct ServedGroup {
    /// Group name; empty for core.
    pub group: String,
    /// The server's preferred version, if it named one.
    pub preferred: Option<String>,
    /// Each version and its resources.
    pub versions: Vec<(String, Vec<ServedResource>)>,
}

/// Chooses each kind of a group once: at the preferred version when that version serves it,
/// otherwise at the newest (most stable, highest) version that does. Subresources are skipped.
pub fn choose_kinds(group: &ServedGroup) -> Vec<KindInfo> {
    let mut versions: Vec<&(String, Vec<ServedResource>)> = group.versions.iter().collect();
    versions.sort_by_key(|(version, _)| {
        let preferred = group.preferred.as_deref() == Some(version.as_str());
        (
            std::cmp::Reverse(preferred),
            std::cmp::Reverse(Version::parse(version).priority()),
        )
    });
    let mut seen = HashSet::new();
    let mut chosen = Vec::new();
    for (version, resources) in versions {
        for resource in resources {
            if resource.plural.contains('/') || !seen.insert(resource.kind.clone()) {
                continue;
            }
            chosen.push(KindInfo {
                group: group.group.clone(),
                version: version.clone(),
                kind: resource.kind.clone(),
                plural: resource.plural.clone(),
                singular: resource.singular.clone(),
                short_names: resource.short_names.clone(),
                namespaced: resource.namespaced,
                verbs: resource.verbs.clone(),
            });
        }
    }
    chosen
}

/// Discovers every kind the server serves (no cache).
pub async fn discover(client: &Client) -> Result<Catalog, kube::Error> {
    let (lists, source) = read_lists(client).await?;
    Ok(lists.catalog(source))
}

/// Discovery as lists, aggregated where the server has it, per group otherwise.
pub async fn read_lists(client: &Client) -> Result<(ServerLists, DiscoverySource), kube::Error> {
    match read_aggregated(client).await {
        Ok(Some(lists)) => return Ok((lists, DiscoverySource::Aggregated)),
        Ok(None) => {
            tracing::debug!("aggregated discovery unusable; falling back to per-group discovery")
        }
        Err(kube::Error::Api(status)) => {
            tracing::debug!(
                "aggregated discovery refused ({}); falling back to per-group discovery",
                status.message
            )
        }
        Err(err) => return Err(err),
    }
    Ok((read_per_group(client).await?, DiscoverySource::PerGroup))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
    };

    fn resource(plural: &str, kind: &str) -> ServedResource {
        ServedResource {
            plural: plural.into(),
            singular: String::new(),
            kind: kind.into(),
            namespaced: true,
            verbs: vec!["list".into(), "delete".into()],
            short_names: vec![],
        }
    }

    #[test]
    fn preferred_version_wins_when_it_serves_the_kind() {
        let group = ServedGroup {
            group: "example.com".into(),
            preferred: Some("v1".into()),
            versions: vec![
                ("v2beta1".into(), vec![resource("widgets", "Widget")]),
                (
                    "v1".into(),
                    vec![resource("widgets", "Widget"), resource("widgets/status", "Widget")],
                ),
            ],
        };
        let kinds = choose_kinds(&group);
        assert_eq!(kinds.len(), 1);
        assert_eq!(kinds[0].version, "v1");
    }

    /// A RESTMapper maps an object only at a version the server serves for its kind: the catalog
    /// chooses one version per kind but knows every served one.
    #[test]
    fn every_served_version_of_a_kind_is_known() {
        let lists = ServerLists {
            groups: APIGroupList {
                groups: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroup {
                    name: "example.com".into(),
                    preferred_version: Some(GroupVersionForDiscovery {
                        group_version: "example.com/v1".into(),
                        version: "v1".into(),
                    }),
                    versions: ["v1", "v2beta1"]
                        .into_iter()
                        .map(|v| GroupVersionForDiscovery {
                            group_version: format!("example.com/{v}"),
                            version: v.into(),
                        })
                        .collect(),
                    server_address_by_client_cidrs: None,
                }],
            },
            resources: ["v1", "v2beta1"]
                .into_iter()
                .map(|v| {
                    let list = APIResourceList {
                        group_version: format!("example.com/{v}"),
                        resources: vec![APIResource {
                            name: "widgets".into(),
                            kind: "Widget".into(),
                            namespaced: true,
                            singular_name: "widget".into(),
                            verbs: vec!["list".into()],
                            ..Default::default()
                        }],
                    };
                    (format!("example.com/{v}"), Ok(list))
                })
                .collect(),
        };
        let catalog = lists.catalog(DiscoverySource::PerGroup);
        assert_eq!(catalog.get("example.com", "Widget").unwrap().version, "v1");
        assert!(catalog.serves_version("example.com", "Widget", "v1"));
        assert!(catalog.serves_version("example.com", "Widget", "v2beta1"));
        assert!(catalog.serves_version("example.com", "Widget", ""));
        assert!(!catalog.serves_version("example.com", "Widget", "v1beta1"));
        assert!(!catalog.serves_version("example.com", "Gadget", "v1"));
        // A catalog built from chosen kinds alone knows each at its own version.
        let chosen = Catalog::new(
            vec![crate::cluster::fixtures::kind("apps", "Deployment", true)],
            vec![],
            DiscoverySource::PerGroup,
        );
        assert!(chosen.serves_version("apps", "Deployment", "v1"));
        assert!(!chosen.serves_version("apps", "Deployment", "v1beta1"));
        let more = chosen.with_versions([("apps".to_string(), "Deployment".to_string(), "v1beta2".to_string())]);
        assert!(more.serves_version("apps", "Deployment", "v1beta2"));
    }

    #[test]
    fn kind_served_only_by_a_non_preferred_version_is_kept_at_the_newest() {
        let group = ServedGroup {
            group: "example.com".into(),
            preferred: Some("v1".into()),
            versions: vec![
                ("v1".into(), vec![resource("widgets", "Widget")]),
                ("v1alpha1".into(), vec![resource("gadgets", "Gadget")]),
                ("v1beta2".into(), vec![resource("gadgets", "Gadget")]),
                ("v1beta1".into(), vec![resource("gadgets", "Gadget")]),
            ],
        };
        let kinds = choose_kinds(&group);
        let gadget = kinds.iter().find(|k| k.kind == "Gadget").unwrap();
        assert_eq!(gadget.version, "v1beta2");
        assert_eq!(kinds.len(), 2);
    }

    #[test]
    fn subresources_are_not_kinds() {
        let group = ServedGroup {
            group: String::new(),
            preferred: Some("v1".into()),
            versions: vec![(
                "v1".into(),
                vec![resource("pods/log", "Pod"), resource("pods/status", "Pod")],
            )],
        };
        assert!(choose_kinds(&group).is_empty());
    }

    #[test]
    fn resolve_matches_kubectl_spellings() {
        let mut deploy = KindInfo {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            singular: "deployment".into(),
            short_names: vec!["deploy".into()],
            namespaced: true,
            verbs: vec!["list".into()],
        };
        let catalog = Catalog::new(vec![deploy.clone()], vec![], DiscoverySource::PerGroup);
        for typed in [
            "deployments",
            "deployment",
            "Deployment",
            "deploy",
            "deployments.apps",
            "deployment.v1.apps",
        ] {
            assert_eq!(
                catalog.resolve(typed).map(|k| k.kind.as_str()),
                Some("Deployment"),
                "{typed}"
            );
        }
        assert!(catalog.resolve("deployments.extensions").is_none());
        assert!(catalog.resolve("deployment.v2.apps").is_none(), "a version not served");
        assert!(catalog.resolve("deploys").is_none());
        // By (group, kind): the group is part of the identity.
        assert_eq!(
            catalog.get("apps", "Deployment").map(|k| k.plural.as_str()),
            Some("deployments")
        );
        assert!(catalog.get("", "Deployment").is_none());
        // extensions/Deployment is the same stored object as apps/Deployment (identity's
        // SHARED_KINDS): asked by either group, the served one answers.
        assert_eq!(
            catalog.get("extensions", "Deployment").map(|k| k.group.as_str()),
            Some("apps")
        );
        assert!(catalog.get("example.com", "Deployment").is_none());
        // A catalog of two groups with the same kind resolves the group it is told.
        let apps = deploy.clone();
        deploy.group = "example.com".into();
        deploy.version = "v1alpha1".into();
        let both = Catalog::new(vec![apps, deploy], vec![], DiscoverySource::PerGroup);
        assert_eq!(
            both.resolve("deployments.example.com").map(|k| k.group.as_str()),
            Some("example.com")
        );
        assert_eq!(both.resolve("deployments.apps").map(|k| k.group.as_str()), Some("apps"));
    }
}
