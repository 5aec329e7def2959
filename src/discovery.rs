//! Discovery: every kind the server serves, each exactly once, at the version to use.
//!
//! Aggregated discovery (two requests) where the server has it; per-group discovery where it
//! does not. A server older than 1.26 answers the aggregated request with a plain group list,
//! which parses as *no groups and no error*: that answer is never trusted as an empty cluster.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::core::discovery::v2::{APIGroupDiscovery, APIResourceDiscovery};
use kube::core::Version;
use kube::discovery::ApiResource;
use kube::{Api, Client};

use crate::error::root_cause;
use crate::retry::{self, is_transient, with_attempts, with_budget, with_retries};

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

    /// The name of the CRD that defines this kind, `plural.group` (custom kinds only).
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
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
    /// kubectl's disk cache (`--cache-dir`), group versions it lacked asked for.
    DiskCache,
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

    /// The kinds that can be listed. A kind served under two groups (Ingress as
    /// `networking.k8s.io` and `extensions`) is listed once, under its canonical group when the
    /// server serves that: the same objects answer under both.
    pub fn listable(&self) -> impl Iterator<Item = &Arc<KindInfo>> {
        self.kinds.iter().filter(|k| k.can("list") && !self.served_elsewhere(k))
    }

    /// Whether the objects of this kind are served, and listed, under its canonical group.
    fn served_elsewhere(&self, kind: &KindInfo) -> bool {
        let canonical = crate::identity::canonical_group(&kind.group, &kind.kind);
        canonical != kind.group && self.exact(canonical, &kind.kind).is_some_and(|k| k.can("list"))
    }

    fn exact(&self, group: &str, kind: &str) -> Option<&Arc<KindInfo>> {
        self.by_group_kind
            .get(&(group.to_string(), kind.to_string()))
            .map(|&index| &self.kinds[index])
    }

    /// The kind with this group and kind name; for a kind served under two groups, the other
    /// group's when this one is not served.
    pub fn get(&self, group: &str, kind: &str) -> Option<&Arc<KindInfo>> {
        self.exact(group, kind).or_else(|| {
            crate::identity::groups_sharing(group, kind)
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

/// How many group versions are discovered at once on the per-group path.
const DISCOVERY_CONCURRENCY: usize = 16;

/// Discovers every kind the server serves (no cache).
pub async fn discover(client: &Client) -> Result<Catalog, kube::Error> {
    let (lists, source) = read_lists(client).await?;
    Ok(lists.catalog(source))
}

/// Aggregated discovery; `None` when the answer is unusable (no core group, or no groups at all).
pub async fn discover_aggregated(client: &Client) -> Result<Option<Catalog>, kube::Error> {
    Ok(read_aggregated(client)
        .await?
        .map(|lists| lists.catalog(DiscoverySource::Aggregated)))
}

/// Aggregated discovery as group and resource lists (the shape kubectl caches); `None` when the
/// answer is unusable (no core group, or no groups at all).
pub async fn read_aggregated(client: &Client) -> Result<Option<ServerLists>, kube::Error> {
    let core = with_retries("aggregated discovery /api", || {
        client.list_core_api_versions_aggregated()
    })
    .await?;
    let groups = with_retries("aggregated discovery /apis", || client.list_api_groups_aggregated()).await?;
    let core_served = core.items.iter().any(|g| !g.versions.is_empty());
    if !core_served {
        return Ok(None);
    }
    Ok(Some(lists_from_aggregated(
        core.items.iter().chain(groups.items.iter()),
    )))
}

/// Converts aggregated discovery documents to the per-group lists, as client-go does: versions
/// in the server's order of preference (the first served one preferred), subresources as
/// `resource/subresource` entries, a stale version as a failure.
fn lists_from_aggregated<'a>(documents: impl Iterator<Item = &'a APIGroupDiscovery>) -> ServerLists {
    let mut groups = Vec::new();
    let mut resources = Vec::new();
    for discovered in documents {
        let name = discovered
            .metadata
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default();
        let mut versions = Vec::new();
        let mut preferred = None;
        for version in &discovered.versions {
            let Some(version_name) = version.version.clone() else {
                continue;
            };
            let entry = GroupVersionForDiscovery {
                group_version: group_version(&name, &version_name),
                version: version_name,
            };
            if version.freshness.as_deref() == Some("Stale") {
                resources.push((
                    entry.group_version.clone(),
                    Err(DiscoveryFailure {
                        group_version: entry.group_version.clone(),
                        message: "discovery document is stale (the serving APIService is unavailable)".to_string(),
                    }),
                ));
            } else {
                preferred.get_or_insert_with(|| entry.clone());
                let list = APIResourceList {
                    group_version: entry.group_version.clone(),
                    resources: version.resources.iter().flat_map(resources_from_aggregated).collect(),
                };
                resources.push((entry.group_version.clone(), Ok(list)));
            }
            versions.push(entry);
        }
        groups.push(APIGroup {
            name,
            preferred_version: preferred,
            versions,
            server_address_by_client_cidrs: None,
        });
    }
    ServerLists {
        groups: APIGroupList { groups },
        resources,
    }
}

/// A resource and its subresources as per-group discovery lists them.
fn resources_from_aggregated(resource: &APIResourceDiscovery) -> Vec<APIResource> {
    let (Some(plural), Some(kind)) = (
        resource.resource.clone(),
        resource.response_kind.as_ref().and_then(|k| k.kind.clone()),
    ) else {
        return Vec::new();
    };
    let namespaced = resource.scope.as_deref() == Some("Namespaced");
    let non_empty = |values: &Vec<String>| (!values.is_empty()).then(|| values.clone());
    let mut found = vec![APIResource {
        name: plural.clone(),
        singular_name: resource.singular_resource.clone().unwrap_or_default(),
        namespaced,
        kind: kind.clone(),
        verbs: resource.verbs.clone(),
        short_names: non_empty(&resource.short_names),
        categories: non_empty(&resource.categories),
        ..Default::default()
    }];
    for sub in &resource.subresources {
        let Some(name) = sub.subresource.clone() else {
            continue;
        };
        found.push(APIResource {
            name: format!("{plural}/{name}"),
            namespaced,
            kind: sub
                .response_kind
                .as_ref()
                .and_then(|k| k.kind.clone())
                .unwrap_or_else(|| kind.clone()),
            verbs: sub.verbs.clone(),
            ..Default::default()
        });
    }
    found
}

/// Per-group discovery: `/api`, `/apis`, then every group version concurrently. A group version
/// that fails is recorded in `failures`, never silently dropped.
pub async fn discover_per_group(client: &Client) -> Result<Catalog, kube::Error> {
    Ok(read_per_group(client).await?.catalog(DiscoverySource::PerGroup))
}

/// Discovery as the server sends it per group: the group list (the core group first, named
/// `""`, as client-go lists it) and each group version's resources. This is what kubectl's
/// disk cache holds, file by file.
#[derive(Debug, Clone)]
pub struct ServerLists {
    /// Every group, with its versions and preferred version.
    pub groups: APIGroupList,
    /// Each group version's resources, or why they could not be read.
    pub resources: Vec<(String, Result<APIResourceList, DiscoveryFailure>)>,
}

impl ServerLists {
    /// The catalog: each kind once, failures named.
    pub fn catalog(&self, source: DiscoverySource) -> Catalog {
        let mut served: Vec<ServedGroup> = self
            .groups
            .groups
            .iter()
            .map(|g| ServedGroup {
                group: g.name.clone(),
                preferred: g.preferred_version.as_ref().map(|v| v.version.clone()),
                versions: Vec::new(),
            })
            .collect();
        let group_of: HashMap<&str, usize> = self
            .groups
            .groups
            .iter()
            .enumerate()
            .flat_map(|(index, g)| g.versions.iter().map(move |v| (v.group_version.as_str(), index)))
            .collect();
        let mut failures = Vec::new();
        for (group_version, answer) in &self.resources {
            match (answer, group_of.get(group_version.as_str())) {
                (Ok(list), Some(&index)) => {
                    let version = group_version.rsplit('/').next().unwrap_or(group_version).to_string();
                    let resources = list.resources.iter().map(served_from_list).collect();
                    served[index].versions.push((version, resources));
                }
                (Err(failure), _) => failures.push(failure.clone()),
                (Ok(_), None) => {}
            }
        }
        failures.sort_by(|a, b| a.group_version.cmp(&b.group_version));
        let kinds = served.iter().flat_map(choose_kinds).collect();
        Catalog::new(kinds, failures, source)
    }

    /// Every group version of the group list, in order.
    fn group_versions(&self) -> Vec<String> {
        self.groups
            .groups
            .iter()
            .flat_map(|g| g.versions.iter().map(|v| v.group_version.clone()))
            .collect()
    }
}

fn served_from_list(resource: &APIResource) -> ServedResource {
    ServedResource {
        plural: resource.name.clone(),
        singular: resource.singular_name.clone(),
        kind: resource.kind.clone(),
        namespaced: resource.namespaced,
        verbs: resource.verbs.clone(),
        short_names: resource.short_names.clone().unwrap_or_default(),
    }
}

/// `/api` and `/apis` as one group list, the core group first (named `""`), as client-go does.
async fn read_groups(client: &Client, attempts: u32) -> Result<APIGroupList, kube::Error> {
    let (core_versions, api_groups) = futures::try_join!(
        with_attempts("discovery /api", attempts, || client.list_core_api_versions()),
        with_attempts("discovery /apis", attempts, || client.list_api_groups()),
    )?;
    let core_versions: Vec<GroupVersionForDiscovery> = core_versions
        .versions
        .iter()
        .map(|v| GroupVersionForDiscovery {
            group_version: v.clone(),
            version: v.clone(),
        })
        .collect();
    let core = APIGroup {
        name: String::new(),
        preferred_version: core_versions.first().cloned(),
        versions: core_versions,
        server_address_by_client_cidrs: None,
    };
    let mut groups = vec![core];
    groups.extend(api_groups.groups);
    Ok(APIGroupList { groups })
}

/// One group version's resources (`v1` is the core group).
async fn read_resources(
    client: &Client,
    group_version: &str,
    attempts: u32,
) -> Result<APIResourceList, DiscoveryFailure> {
    let answer = if group_version.contains('/') {
        with_attempts("discovery", attempts, || client.list_api_group_resources(group_version)).await
    } else {
        with_attempts("discovery", attempts, || client.list_core_api_resources(group_version)).await
    };
    let err = match answer {
        Ok(list) => return Ok(list),
        Err(err) => err,
    };
    // Name the APIService when it says it is down, as the patient path does.
    let message = match api_service_availability(client, group_version).await {
        Availability::Down(why) => format!("{why} ({})", root_cause(&err)),
        _ => root_cause(&err),
    };
    Err(DiscoveryFailure {
        group_version: group_version.to_string(),
        message,
    })
}

/// Reads these group versions concurrently.
async fn read_all_resources(
    client: &Client,
    group_versions: Vec<String>,
    attempts: u32,
) -> Vec<(String, Result<APIResourceList, DiscoveryFailure>)> {
    stream::iter(group_versions)
        .map(|group_version| async move {
            let answer = read_resources(client, &group_version, attempts).await;
            (group_version, answer)
        })
        .buffer_unordered(DISCOVERY_CONCURRENCY)
        .collect()
        .await
}

/// Per-group discovery, kept as the server sent it.
pub async fn read_per_group(client: &Client) -> Result<ServerLists, kube::Error> {
    // Tries are bounded by the retry budget, not counted.
    let groups = read_groups(client, u32::MAX).await?;
    let mut lists = ServerLists {
        groups,
        resources: Vec::new(),
    };
    lists.resources = stream::iter(lists.group_versions())
        .map(|group_version| async move {
            let answer = group_version_resources(client, !group_version.contains('/'), &group_version)
                .await
                .map_err(|message| DiscoveryFailure {
                    group_version: group_version.clone(),
                    message,
                });
            (group_version, answer)
        })
        .buffer_unordered(DISCOVERY_CONCURRENCY)
        .collect()
        .await;
    Ok(lists)
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

/// How long kubectl trusts a discovery cache file after writing it: 6 hours, judged file by file
/// by modification time (k8s.io/cli-runtime `pkg/genericclioptions/config_flags.go`,
/// `toDiscoveryClient`; k8s.io/client-go `discovery/cached/disk/cached_discovery.go`,
/// `getCachedFile`). client-go's own default of 10 minutes is not what kubectl uses.
pub const CACHE_TTL: Duration = Duration::from_secs(6 * 60 * 60);

/// kubectl's default cache folder: `$KUBECACHEDIR`, else `~/.kube/cache`.
pub fn default_cache_root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KUBECACHEDIR").filter(|d| !d.is_empty()) {
        return Some(dir.into());
    }
    let home = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".kube").join("cache"))
}

/// The folder kubectl keeps one server's discovery in: `ROOT/discovery/HOST`, where HOST is the
/// server URL without its scheme and every character other than ASCII letters, digits, `_`,
/// `(`, `)`, `/` and `.` becomes `_` (client-go `computeDiscoverCacheDir`), e.g.
/// `https://127.0.0.1:6443` -> `127.0.0.1_6443`. A path in the URL makes sub-folders, as there.
pub fn cache_dir_for(root: &Path, server: &str) -> PathBuf {
    let schemeless = server.replacen("https://", "", 1).replacen("http://", "", 1);
    let safe: String = schemeless
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_/.()".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Go's filepath.Join cleans the result: empty and `.` segments vanish, `..` goes up.
    let mut dir = root.join("discovery");
    let mut depth = 0;
    for segment in safe.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if depth > 0 {
                    dir.pop();
                    depth -= 1;
                }
            }
            name => {
                dir.push(name);
                depth += 1;
            }
        }
    }
    dir
}

/// kubectl's discovery cache for one server: `servergroups.json` (an `APIGroupList`, the core
/// group first) and `GROUP/VERSION/serverresources.json` (`v1/...` for core; an
/// `APIResourceList`), JSON, written atomically (temporary file, then rename) with mode 0660 in
/// folders of mode 0750, each file fresh for [`CACHE_TTL`] after it was written.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
    ttl: Duration,
}

impl DiskCache {
    /// The cache for `server` under a cache root (`--cache-dir`).
    pub fn for_server(root: &Path, server: &str) -> Self {
        Self {
            dir: cache_dir_for(root, server),
            ttl: CACHE_TTL,
        }
    }

    /// The server's cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn groups_path(&self) -> PathBuf {
        self.dir.join("servergroups.json")
    }

    fn resources_path(&self, group_version: &str) -> PathBuf {
        let mut path = self.dir.clone();
        path.extend(group_version.split('/'));
        path.join("serverresources.json")
    }

    /// A cache file, when it exists, is fresh and parses.
    fn read_fresh<T: serde::de::DeserializeOwned>(&self, path: &Path) -> Option<T> {
        let file = std::fs::File::open(path).ok()?;
        let written = file.metadata().ok()?.modified().ok()?;
        if SystemTime::now() > written + self.ttl {
            tracing::debug!("discovery cache {} expired", path.display());
            return None;
        }
        serde_json::from_reader(std::io::BufReader::new(file))
            .map_err(|err| tracing::debug!("discovery cache {} unreadable: {err}", path.display()))
            .ok()
    }

    /// The cached group list, if fresh.
    pub fn groups(&self) -> Option<APIGroupList> {
        self.read_fresh(&self.groups_path())
    }

    /// The cached resources of a group version, if fresh.
    pub fn resources(&self, group_version: &str) -> Option<APIResourceList> {
        self.read_fresh(&self.resources_path(group_version))
    }

    /// Writes what discovery found, as client-go does: the group list and every group version
    /// that answered with resources (none for a failed or empty one).
    pub fn write(&self, lists: &ServerLists) -> std::io::Result<()> {
        for (group_version, answer) in &lists.resources {
            if let Ok(list) = answer {
                self.write_resources(group_version, list)?;
            }
        }
        if !lists.groups.groups.is_empty() {
            write_atomically(&self.groups_path(), &serde_json::to_vec(&lists.groups)?)?;
        }
        Ok(())
    }

    /// Writes one group version's resources (unless there are none).
    pub fn write_resources(&self, group_version: &str, list: &APIResourceList) -> std::io::Result<()> {
        if list.resources.is_empty() {
            return Ok(());
        }
        write_atomically(&self.resources_path(group_version), &serde_json::to_vec(list)?)
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o750);
    builder.create(dir)?;
    let nanos = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("cache");
    let temporary = dir.join(format!("{name}.{}{nanos}", std::process::id()));
    let written = std::fs::write(&temporary, bytes).and_then(|()| {
        #[cfg(unix)]
        std::fs::set_permissions(&temporary, std::os::unix::fs::PermissionsExt::from_mode(0o660))?;
        std::fs::rename(&temporary, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// How far discovery may rely on the disk cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheUse {
    /// Ask the server, then refresh the cache: for what plans deletions or changes (`prune`,
    /// `orphans`, `unstick`), where a stale catalog could hide the members of a kind.
    #[default]
    Refresh,
    /// Fresh cache files, once the server's group list (`/api`, `/apis`) matches them and every
    /// CRD it has is in them (`list`, `graph`, `stuck`); anything else asks the server.
    Revalidate,
    /// Fresh cache files as kubectl trusts them (completion).
    Trust,
}

/// Discovers through kubectl's disk cache (`None`: no cache at all). Group versions the cache
/// lacks are asked for and added to it; a missing or stale group list, or a failed
/// revalidation, means full discovery, which rewrites the cache.
pub async fn discover_cached(
    client: &Client,
    cache: Option<&DiskCache>,
    usage: CacheUse,
) -> Result<Catalog, kube::Error> {
    let Some(cache) = cache else {
        return discover(client).await;
    };
    if usage != CacheUse::Refresh {
        if let Some(catalog) = from_cache(client, cache, usage).await {
            return Ok(catalog);
        }
    }
    let (lists, source) = read_lists(client).await?;
    if let Err(err) = cache.write(&lists) {
        tracing::debug!("could not write the discovery cache {}: {err}", cache.dir().display());
    }
    Ok(lists.catalog(source))
}

async fn from_cache(client: &Client, cache: &DiskCache, usage: CacheUse) -> Option<Catalog> {
    let groups = cache.groups()?;
    let mut lists = ServerLists {
        groups,
        resources: Vec::new(),
    };
    let mut missing = Vec::new();
    for group_version in lists.group_versions() {
        match cache.resources(&group_version) {
            Some(list) => lists.resources.push((group_version, Ok(list))),
            None => missing.push(group_version),
        }
    }
    if !missing.is_empty() {
        tracing::debug!("discovery cache lacks {}; asking the server", missing.join(", "));
        let attempts = if usage == CacheUse::Trust { 1 } else { 2 };
        let fetched = read_all_resources(client, missing, attempts).await;
        for (group_version, answer) in &fetched {
            if let Ok(list) = answer {
                let _ = cache.write_resources(group_version, list);
            }
        }
        lists.resources.extend(fetched);
    }
    let catalog = lists.catalog(DiscoverySource::DiskCache);
    if usage == CacheUse::Revalidate && !still_current(client, &lists.groups, &catalog).await {
        return None;
    }
    tracing::debug!("discovery from the cache in {}", cache.dir().display());
    Some(catalog)
}

/// Whether a cached catalog still describes the server: the same groups, versions and preferred
/// versions, and every CRD's kind in it. Any error counts as "no".
async fn still_current(client: &Client, cached: &APIGroupList, catalog: &Catalog) -> bool {
    let (live, crds) = futures::join!(read_groups(client, 2), crd_names(client, catalog));
    let (Ok(live), Ok(crds)) = (live, crds) else {
        tracing::debug!("discovery cache not revalidated: the server did not answer");
        return false;
    };
    if group_summary(&live) != group_summary(cached) {
        tracing::debug!("discovery cache is stale: the server's groups or versions changed");
        return false;
    }
    let served: HashSet<(&str, &str)> = catalog
        .kinds()
        .iter()
        .map(|k| (k.plural.as_str(), k.group.as_str()))
        .collect();
    let unknown: Vec<&String> = crds
        .iter()
        .filter(|name| {
            let (plural, group) = name.split_once('.').unwrap_or((name.as_str(), ""));
            !served.contains(&(plural, group))
        })
        .collect();
    if !unknown.is_empty() {
        tracing::debug!("discovery cache is stale: it lacks the CRDs {unknown:?}");
        return false;
    }
    true
}

type GroupSummary = Vec<(String, Vec<String>, Option<String>)>;

fn group_summary(groups: &APIGroupList) -> GroupSummary {
    let mut summary: GroupSummary = groups
        .groups
        .iter()
        .map(|g| {
            let mut versions: Vec<String> = g.versions.iter().map(|v| v.group_version.clone()).collect();
            versions.sort();
            (
                g.name.clone(),
                versions,
                g.preferred_version.as_ref().map(|v| v.group_version.clone()),
            )
        })
        .collect();
    summary.sort();
    summary
}

/// The names (`plural.group`) of every CRD, read as metadata only.
async fn crd_names(client: &Client, catalog: &Catalog) -> Result<Vec<String>, kube::Error> {
    let Some(kind) = catalog.get("apiextensions.k8s.io", "CustomResourceDefinition") else {
        return Ok(Vec::new());
    };
    let api = crate::collect::api_for(client, kind, None);
    let mut params = kube::api::ListParams::default().limit(500);
    let mut names = Vec::new();
    loop {
        let page = with_attempts("list CRDs", 2, || api.list_metadata(&params)).await?;
        names.extend(page.items.into_iter().filter_map(|crd| crd.metadata.name));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params.continue_token = Some(token),
            _ => return Ok(names),
        }
    }
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
        let lists = lists_from_aggregated(answer.items.iter());
        let catalog = lists.catalog(DiscoverySource::Aggregated);
        assert_eq!(catalog.kinds().len(), 1);
        let deployment = &catalog.kinds()[0];
        assert_eq!(
            (
                deployment.kind.as_str(),
                deployment.version.as_str(),
                deployment.namespaced
            ),
            ("Deployment", "v1", true)
        );
        assert_eq!(deployment.short_names, vec!["deploy"]);
        assert_eq!(catalog.failures.len(), 1);
        assert_eq!(catalog.failures[0].group_version, "metrics.k8s.io/v1beta1");
        // What kubectl's cache holds for it: the subresource as `deployments/status`.
        let apps = lists.resources[0].1.as_ref().unwrap();
        let names: Vec<&str> = apps.resources.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["deployments", "deployments/status"]);
        assert_eq!(
            lists.groups.groups[0].preferred_version.as_ref().unwrap().group_version,
            "apps/v1"
        );
    }

    #[test]
    fn cache_folders_are_named_as_kubectl_names_them() {
        let root = Path::new("/home/u/.kube/cache");
        for (server, folder) in [
            ("https://127.0.0.1:6443", "127.0.0.1_6443"),
            ("http://localhost:8080", "localhost_8080"),
            ("https://[::1]:6443", "___1__6443"),
            (
                "https://rancher.example.com/k8s/clusters/c-m-x1",
                "rancher.example.com/k8s/clusters/c_m_x1",
            ),
            ("https://api.example.com:443/", "api.example.com_443"),
        ] {
            assert_eq!(
                cache_dir_for(root, server),
                root.join("discovery").join(folder),
                "{server}"
            );
        }
    }

    fn lists() -> ServerLists {
        let group = |name: &str, version: &str| APIGroup {
            name: name.into(),
            preferred_version: Some(GroupVersionForDiscovery {
                group_version: group_version(name, version),
                version: version.into(),
            }),
            versions: vec![GroupVersionForDiscovery {
                group_version: group_version(name, version),
                version: version.into(),
            }],
            server_address_by_client_cidrs: None,
        };
        let resource = |name: &str, kind: &str| APIResource {
            name: name.into(),
            kind: kind.into(),
            namespaced: true,
            verbs: vec!["list".into()],
            ..Default::default()
        };
        ServerLists {
            groups: APIGroupList {
                groups: vec![group("", "v1"), group("apps", "v1"), group("metrics.k8s.io", "v1beta1")],
            },
            resources: vec![
                (
                    "v1".into(),
                    Ok(APIResourceList {
                        group_version: "v1".into(),
                        resources: vec![resource("configmaps", "ConfigMap")],
                    }),
                ),
                (
                    "apps/v1".into(),
                    Ok(APIResourceList {
                        group_version: "apps/v1".into(),
                        resources: vec![resource("deployments", "Deployment")],
                    }),
                ),
                (
                    "metrics.k8s.io/v1beta1".into(),
                    Err(DiscoveryFailure {
                        group_version: "metrics.k8s.io/v1beta1".into(),
                        message: "503".into(),
                    }),
                ),
            ],
        }
    }

    #[test]
    fn the_cache_is_written_and_read_in_kubectls_layout() {
        let root = std::env::temp_dir().join(format!("discovery-cache-{}", std::process::id()));
        let cache = DiskCache::for_server(&root, "https://127.0.0.1:6443");
        cache.write(&lists()).unwrap();
        let dir = root.join("discovery/127.0.0.1_6443");
        let groups: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("servergroups.json")).unwrap()).unwrap();
        assert_eq!(groups["kind"], "APIGroupList");
        assert_eq!(groups["apiVersion"], "v1");
        assert_eq!(groups["groups"][0]["name"], "");
        let core: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("v1/serverresources.json")).unwrap()).unwrap();
        assert_eq!(core["kind"], "APIResourceList");
        assert_eq!(core["groupVersion"], "v1");
        assert_eq!(core["resources"][0]["singularName"], "");
        assert!(dir.join("apps/v1/serverresources.json").is_file());
        assert!(
            !dir.join("metrics.k8s.io").exists(),
            "a failed group version is not cached"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir.join("servergroups.json")), 0o660);
            assert_eq!(mode(&dir.join("apps/v1")), 0o750);
        }
        assert_eq!(cache.groups().unwrap().groups.len(), 3);
        assert_eq!(cache.resources("apps/v1").unwrap().resources[0].kind, "Deployment");
        assert!(cache.resources("metrics.k8s.io/v1beta1").is_none());

        // Past the TTL, a file is not used.
        let old = DiskCache {
            ttl: Duration::ZERO,
            ..cache.clone()
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(old.groups().is_none());
        let _ = std::fs::remove_dir_all(&root);
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
