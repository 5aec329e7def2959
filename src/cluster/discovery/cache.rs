//! kubectl's discovery cache on disk (`--cache-dir`): read, revalidated and written as kubectl does.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList};
use kube::Client;

use super::per_group::{read_all_resources, read_groups};
use super::{discover, read_lists, Catalog, DiscoverySource, ServerLists};
use crate::cluster::retry::with_attempts;

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
        if fetched
            .iter()
            .any(|(_, answer)| matches!(answer, Err(unread) if unread.not_found))
        {
            // The cached group list names a group version the server no longer serves.
            tracing::debug!("discovery cache is stale: a group version it lists is gone");
            return None;
        }
        for (group_version, answer) in fetched {
            if let Ok(list) = &answer {
                let _ = cache.write_resources(&group_version, list);
            }
            let answer = answer.map_err(|unread| unread.failure(&group_version));
            lists.resources.push((group_version, answer));
        }
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
    // CRDs are cluster-scoped: the API of every namespace is theirs.
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &kind.api_resource());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::discovery::DiscoveryFailure;
    use crate::model::identity::api_version as group_version;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIResource, GroupVersionForDiscovery};

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
}
