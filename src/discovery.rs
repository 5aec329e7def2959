//! Discovery: every kind the server serves, each exactly once, at the version to use.
//!
//! Aggregated discovery (two requests) where the server has it; per-group discovery where it
//! does not. A server older than 1.26 answers the aggregated request with a plain group list,
//! which parses as *no groups and no error*: that answer is never trusted as an empty cluster.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::core::discovery::v2::{APIGroupDiscovery, APIResourceDiscovery};
use kube::core::Version;
use kube::discovery::ApiResource;
use kube::{Api, Client};

use crate::error::root_cause;
use crate::retry::{self, is_transient, with_budget, with_retries};

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
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether the server allows a verb on this kind.
    pub fn can(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// `Kind.group`, or `Kind` for the core group, as kubectl prints kinds.
    pub fn kind_with_group(&self) -> String {
        kind_with_group(&self.kind, &self.group)
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
}

/// Every kind the server serves, each once.
#[derive(Debug, Clone)]
pub struct Catalog {
    kinds: Vec<Arc<KindInfo>>,
    by_group_kind: HashMap<(String, String), usize>,
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
        Self {
            kinds,
            by_group_kind,
            failures,
            source,
        }
    }

    /// All kinds, core group first, then by group and kind.
    pub fn kinds(&self) -> &[Arc<KindInfo>] {
        &self.kinds
    }

    /// The kinds that can be listed.
    pub fn listable(&self) -> impl Iterator<Item = &Arc<KindInfo>> {
        self.kinds.iter().filter(|k| k.can("list"))
    }

    /// The kind with this group and kind name.
    pub fn get(&self, group: &str, kind: &str) -> Option<&Arc<KindInfo>> {
        self.by_group_kind
            .get(&(group.to_string(), kind.to_string()))
            .map(|&index| &self.kinds[index])
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

/// How many group versions are discovered at once on the per-group path.
const DISCOVERY_CONCURRENCY: usize = 16;

/// Discovers every kind the server serves.
pub async fn discover(client: &Client) -> Result<Catalog, kube::Error> {
    match discover_aggregated(client).await {
        Ok(Some(catalog)) => return Ok(catalog),
        Ok(None) => {
            tracing::debug!("aggregated discovery unusable; falling back to per-group discovery")
        }
        // The server answered but cannot do aggregated discovery (e.g. 404/406): ask per group.
        Err(kube::Error::Api(status)) => {
            tracing::debug!(
                "aggregated discovery refused ({}); falling back to per-group discovery",
                status.message
            )
        }
        // A server that did not answer at all will not answer per group either.
        Err(err) => return Err(err),
    }
    discover_per_group(client).await
}

/// Aggregated discovery; `None` when the answer is unusable (no core group, or no groups at all).
pub async fn discover_aggregated(client: &Client) -> Result<Option<Catalog>, kube::Error> {
    let core = with_retries("aggregated discovery /api", || {
        client.list_core_api_versions_aggregated()
    })
    .await?;
    let groups = with_retries("aggregated discovery /apis", || client.list_api_groups_aggregated()).await?;
    let core_served = core.items.iter().any(|g| !g.versions.is_empty());
    if !core_served {
        return Ok(None);
    }
    let mut kinds = Vec::new();
    let mut failures = Vec::new();
    for discovered in core.items.iter().chain(groups.items.iter()) {
        let (served, stale) = served_group_from_aggregated(discovered);
        failures.extend(stale);
        kinds.extend(choose_kinds(&served));
    }
    Ok(Some(Catalog::new(kinds, failures, DiscoverySource::Aggregated)))
}

fn served_group_from_aggregated(discovered: &APIGroupDiscovery) -> (ServedGroup, Vec<DiscoveryFailure>) {
    let group = discovered
        .metadata
        .as_ref()
        .and_then(|m| m.name.clone())
        .unwrap_or_default();
    let mut failures = Vec::new();
    let mut versions = Vec::new();
    for version in &discovered.versions {
        let Some(name) = version.version.clone() else {
            continue;
        };
        if version.freshness.as_deref() == Some("Stale") {
            failures.push(DiscoveryFailure {
                group_version: group_version(&group, &name),
                message: "discovery document is stale (the serving APIService is unavailable)".to_string(),
            });
            continue;
        }
        let resources = version.resources.iter().filter_map(served_from_aggregated).collect();
        versions.push((name, resources));
    }
    // Aggregated discovery lists versions in descending preference: the first is preferred.
    let preferred = versions.first().map(|(v, _)| v.clone());
    (
        ServedGroup {
            group,
            preferred,
            versions,
        },
        failures,
    )
}

fn served_from_aggregated(resource: &APIResourceDiscovery) -> Option<ServedResource> {
    let plural = resource.resource.clone()?;
    let response_kind = resource.response_kind.as_ref()?;
    Some(ServedResource {
        plural,
        singular: resource.singular_resource.clone().unwrap_or_default(),
        kind: response_kind.kind.clone()?,
        namespaced: resource.scope.as_deref() == Some("Namespaced"),
        verbs: resource.verbs.clone(),
        short_names: resource.short_names.clone(),
    })
}

/// Per-group discovery: `/api`, `/apis`, then every group version concurrently. A group version
/// that fails is recorded in `failures`, never silently dropped.
pub async fn discover_per_group(client: &Client) -> Result<Catalog, kube::Error> {
    let core_versions = with_retries("discovery /api", || client.list_core_api_versions()).await?;
    let api_groups = with_retries("discovery /apis", || client.list_api_groups()).await?;

    let mut groups: Vec<ServedGroup> = vec![ServedGroup {
        group: String::new(),
        preferred: core_versions.versions.first().cloned(),
        versions: Vec::new(),
    }];
    let mut requests: Vec<(usize, String)> = core_versions.versions.iter().map(|v| (0, v.clone())).collect();
    for api_group in api_groups.groups {
        let index = groups.len();
        requests.extend(api_group.versions.iter().map(|v| (index, v.group_version.clone())));
        groups.push(ServedGroup {
            group: api_group.name.clone(),
            preferred: api_group.preferred_version.map(|v| v.version),
            versions: Vec::new(),
        });
    }

    let answers: Vec<_> = stream::iter(requests)
        .map(|(index, group_version)| async move {
            let answer = group_version_resources(client, index == 0, &group_version).await;
            (index, group_version, answer)
        })
        .buffer_unordered(DISCOVERY_CONCURRENCY)
        .collect()
        .await;

    let mut failures = Vec::new();
    for (index, group_version, answer) in answers {
        match answer {
            Ok(list) => {
                let version = group_version.rsplit('/').next().unwrap_or(&group_version).to_string();
                let resources = list
                    .resources
                    .into_iter()
                    .map(|r| ServedResource {
                        plural: r.name,
                        singular: r.singular_name,
                        kind: r.kind,
                        namespaced: r.namespaced,
                        verbs: r.verbs,
                        short_names: r.short_names.unwrap_or_default(),
                    })
                    .collect();
                groups[index].versions.push((version, resources));
            }
            Err(message) => failures.push(DiscoveryFailure { group_version, message }),
        }
    }
    failures.sort_by(|a, b| a.group_version.cmp(&b.group_version));
    let kinds = groups.iter().flat_map(choose_kinds).collect();
    Ok(Catalog::new(kinds, failures, DiscoverySource::PerGroup))
}

/// How long a group version whose APIService cannot be read is retried: a user who may not read
/// APIServices cannot tell a down aggregated API from a transient failure.
const UNKNOWN_API_SERVICE_BUDGET: Duration = Duration::from_secs(5);

/// One group version's resources. A transient failure is retried for the whole retry budget,
/// unless the group version is served by an aggregated API whose APIService reports
/// `Available=False`: that one is down for good, and is given up at once and named.
async fn group_version_resources(client: &Client, core: bool, group_version: &str) -> Result<APIResourceList, String> {
    let fetch = || async {
        if core {
            client.list_core_api_resources(group_version).await
        } else {
            client.list_api_group_resources(group_version).await
        }
    };
    let first = match fetch().await {
        Ok(list) => return Ok(list),
        Err(err) => err,
    };
    let availability = if core {
        Availability::Up
    } else {
        api_service_availability(client, group_version).await
    };
    let budget = match availability {
        Availability::Down(why) => return Err(format!("{why} ({})", root_cause(&first))),
        _ if !is_transient(&first) => return Err(root_cause(&first)),
        Availability::Up => retry::budget(),
        Availability::Unknown => UNKNOWN_API_SERVICE_BUDGET,
    };
    tracing::info!("discovery of {group_version}: transient failure ({first}); retrying");
    with_budget("discovery", budget, fetch)
        .await
        .map_err(|err| root_cause(&err))
}

/// What the APIService behind a group version says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Availability {
    /// No APIService condition says it is down (or the group is served locally).
    Up,
    /// `Available=False`: the reason and message, naming the APIService.
    Down(String),
    /// The APIService could not be read (e.g. 403).
    Unknown,
}

/// Reads the APIService `VERSION.GROUP` (`v1beta1.metrics.k8s.io`) and its `Available` condition.
async fn api_service_availability(client: &Client, group_version: &str) -> Availability {
    let Some((group, version)) = group_version.split_once('/') else {
        return Availability::Up;
    };
    let name = format!("{version}.{group}");
    let api: Api<APIService> = Api::all(client.clone());
    match with_retries("get APIService", || api.get_opt(&name)).await {
        Ok(Some(service)) => availability_of(&name, &service),
        Ok(None) => Availability::Up,
        Err(err) => {
            tracing::debug!("cannot read APIService {name}: {err}");
            Availability::Unknown
        }
    }
}

fn availability_of(name: &str, service: &APIService) -> Availability {
    let conditions = service.status.as_ref().and_then(|s| s.conditions.as_ref());
    let down = conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Available" && c.status == "False");
    match down {
        Some(condition) => Availability::Down(format!(
            "APIService {name} is not available: {}: {}",
            condition.reason.as_deref().unwrap_or("no reason"),
            condition.message.as_deref().unwrap_or("no message")
        )),
        None => Availability::Up,
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn aggregated_answers_are_read_and_stale_versions_reported() {
        let answer: kube::core::discovery::v2::APIGroupDiscoveryList = serde_json::from_value(serde_json::json!({
            "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "items": [
                {"metadata": {"name": "apps"}, "versions": [
                    {"version": "v1", "freshness": "Current", "resources": [
                        {"resource": "deployments", "scope": "Namespaced", "singularResource": "deployment",
                         "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                         "verbs": ["list", "delete"], "shortNames": ["deploy"],
                         "subresources": [{"subresource": "status"}]}]}]},
                {"metadata": {"name": "metrics.k8s.io"}, "versions": [
                    {"version": "v1beta1", "freshness": "Stale", "resources": []}]}
            ]
        }))
        .unwrap();
        let (apps, none) = served_group_from_aggregated(&answer.items[0]);
        assert!(none.is_empty());
        let kinds = choose_kinds(&apps);
        assert_eq!(kinds.len(), 1);
        assert_eq!(
            (kinds[0].kind.as_str(), kinds[0].version.as_str(), kinds[0].namespaced),
            ("Deployment", "v1", true)
        );
        assert_eq!(kinds[0].short_names, vec!["deploy"]);
        let (_, stale) = served_group_from_aggregated(&answer.items[1]);
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].group_version, "metrics.k8s.io/v1beta1");
    }

    #[test]
    fn an_api_service_is_down_only_when_it_says_available_false() {
        let service = |conditions: serde_json::Value| -> APIService {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": "v1beta1.metrics.k8s.io"},
                "spec": {"groupPriorityMinimum": 100, "versionPriority": 100},
                "status": {"conditions": conditions}
            }))
            .unwrap()
        };
        let down = service(serde_json::json!([{"type": "Available", "status": "False",
            "reason": "FailedDiscoveryCheck", "message": "no endpoints"}]));
        assert_eq!(
            availability_of("v1beta1.metrics.k8s.io", &down),
            Availability::Down(
                "APIService v1beta1.metrics.k8s.io is not available: FailedDiscoveryCheck: no endpoints".into()
            )
        );
        let up = service(serde_json::json!([{"type": "Available", "status": "True"}]));
        assert_eq!(availability_of("v1beta1.metrics.k8s.io", &up), Availability::Up);
        assert_eq!(
            availability_of("v1beta1.metrics.k8s.io", &service(serde_json::json!([]))),
            Availability::Up
        );
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
        deploy.kind = "Other".into();
        assert!(catalog.get("apps", "Deployment").is_some());
    }
}
