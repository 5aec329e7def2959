//! Per-group discovery: `/api`, `/apis`, then each group version, with the retries and the
//! APIService checks that tell a down aggregated API from a transient failure.

use std::collections::HashSet;
use std::time::Duration;

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResourceList, GroupVersionForDiscovery,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::{Api, Client};

use super::lists::group_versions_of;
use super::{Catalog, DiscoveryFailure, DiscoverySource, ServerLists};
use crate::cluster::retry::{self, is_transient, with_attempts, with_budget, with_retries};
use crate::error::{is_not_found, root_cause};

/// How many group versions are discovered at once on the per-group path.
const DISCOVERY_CONCURRENCY: usize = 16;

/// Per-group discovery: `/api`, `/apis`, then every group version concurrently. A group version
/// that fails is recorded in `failures`, never silently dropped.
pub async fn discover_per_group(client: &Client) -> Result<Catalog, kube::Error> {
    Ok(read_per_group(client).await?.catalog(DiscoverySource::PerGroup))
}

/// `/api` and `/apis` as one group list, the core group first (named `""`), as client-go does.
pub(super) async fn read_groups(client: &Client, attempts: u32) -> Result<APIGroupList, kube::Error> {
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

/// Why one group version's resources could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unread {
    /// The server answered 404: the group version is not served, perhaps no longer (its CRD
    /// was deleted after the group list was read).
    pub(super) not_found: bool,
    /// What the server or the connection said, and which APIService is down.
    pub(super) message: String,
}

impl Unread {
    fn of(err: &kube::Error) -> Self {
        Self {
            not_found: is_not_found(err),
            message: root_cause(err),
        }
    }

    /// The failure to report for this group version.
    pub(super) fn failure(self, group_version: &str) -> DiscoveryFailure {
        DiscoveryFailure {
            group_version: group_version.to_string(),
            message: self.message,
        }
    }
}

/// Each group version's resources, or why they could not be read.
pub(super) type Answers = Vec<(String, Result<APIResourceList, Unread>)>;

/// One group version's resources (`v1` is the core group).
async fn read_resources(client: &Client, group_version: &str, attempts: u32) -> Result<APIResourceList, Unread> {
    let answer = if group_version.contains('/') {
        with_attempts("discovery", attempts, || client.list_api_group_resources(group_version)).await
    } else {
        with_attempts("discovery", attempts, || client.list_core_api_resources(group_version)).await
    };
    let err = match answer {
        Ok(list) => return Ok(list),
        Err(err) => err,
    };
    let mut unread = Unread::of(&err);
    // Name the APIService when it says it is down, as the patient path does.
    if let Availability::Down(why) = api_service_availability(client, group_version).await {
        unread.message = format!("{why} ({})", unread.message);
    }
    Err(unread)
}

/// Reads these group versions concurrently.
pub(super) async fn read_all_resources(client: &Client, group_versions: Vec<String>, attempts: u32) -> Answers {
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
    let answers: Answers = stream::iter(group_versions_of(&groups))
        .map(|group_version| async move {
            let answer = group_version_resources(client, !group_version.contains('/'), &group_version).await;
            (group_version, answer)
        })
        .buffer_unordered(DISCOVERY_CONCURRENCY)
        .collect()
        .await;
    Ok(settle(client, groups, answers).await)
}

/// The lists from the group list and the answers. A group version that answered 404 and is no
/// longer in a fresh group list was removed while discovery ran (its CRD deleted between `/apis`
/// and `/apis/GROUP/VERSION`): it is gone, with no kinds to list, not a failure. One that is
/// still listed (or when the group list cannot be read again) stays a failure.
async fn settle(client: &Client, groups: APIGroupList, mut answers: Answers) -> ServerLists {
    let any_not_found = answers
        .iter()
        .any(|(_, answer)| matches!(answer, Err(unread) if unread.not_found));
    let gone = if !any_not_found {
        HashSet::new()
    } else {
        // A CRD being added or removed is served and listed a moment apart: let it settle, ask
        // the group versions that answered 404 once more, then read the group list again.
        tokio::time::sleep(SETTLE).await;
        for (group_version, answer) in answers.iter_mut() {
            if matches!(answer, Err(unread) if unread.not_found) {
                *answer = group_version_resources(client, !group_version.contains('/'), group_version).await;
            }
        }
        let still: Vec<&str> = answers
            .iter()
            .filter(|(_, answer)| matches!(answer, Err(unread) if unread.not_found))
            .map(|(group_version, _)| group_version.as_str())
            .collect();
        match read_groups(client, 2).await {
            Ok(fresh) => gone_group_versions(&still, &fresh),
            Err(err) => {
                tracing::debug!("could not read the group list again ({err}): 404s stay failures");
                HashSet::new()
            }
        }
    };
    for group_version in &gone {
        tracing::info!("{group_version} was removed while discovery ran: it has no kinds to list");
    }
    let resources = answers
        .into_iter()
        .filter(|(group_version, _)| !gone.contains(group_version))
        .map(|(group_version, answer)| {
            let answer = answer.map_err(|unread| unread.failure(&group_version));
            (group_version, answer)
        })
        .collect();
    ServerLists {
        groups: without_group_versions(groups, &gone),
        resources,
    }
}

/// How long a CRD's group version may take to be both served and listed (or neither).
const SETTLE: Duration = Duration::from_millis(1000);

/// The group versions of `not_found` that a fresh group list no longer has.
fn gone_group_versions(not_found: &[&str], fresh: &APIGroupList) -> HashSet<String> {
    let served: HashSet<&str> = fresh
        .groups
        .iter()
        .flat_map(|g| g.versions.iter().map(|v| v.group_version.as_str()))
        .collect();
    not_found
        .iter()
        .filter(|group_version| !served.contains(**group_version))
        .map(|group_version| group_version.to_string())
        .collect()
}

/// The group list without these group versions: a group left with none is dropped, one whose
/// preferred version went prefers its first remaining version.
fn without_group_versions(mut groups: APIGroupList, gone: &HashSet<String>) -> APIGroupList {
    if gone.is_empty() {
        return groups;
    }
    for group in &mut groups.groups {
        group.versions.retain(|v| !gone.contains(&v.group_version));
        if group
            .preferred_version
            .as_ref()
            .is_some_and(|p| gone.contains(&p.group_version))
        {
            group.preferred_version = group.versions.first().cloned();
        }
    }
    groups.groups.retain(|g| !g.versions.is_empty());
    groups
}

/// How long a group version whose APIService cannot be read is retried: a user who may not read
/// APIServices cannot tell a down aggregated API from a transient failure.
const UNKNOWN_API_SERVICE_BUDGET: Duration = Duration::from_secs(5);

/// One group version's resources. A transient failure is retried for the whole retry budget,
/// unless the group version is served by an aggregated API whose APIService reports
/// `Available=False`: that one is down for good, and is given up at once and named.
async fn group_version_resources(client: &Client, core: bool, group_version: &str) -> Result<APIResourceList, Unread> {
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
        Availability::Down(why) => {
            return Err(Unread {
                not_found: false,
                message: format!("{why} ({})", root_cause(&first)),
            })
        }
        _ if !is_transient(&first) => return Err(Unread::of(&first)),
        Availability::Up => retry::budget(),
        Availability::Unknown => UNKNOWN_API_SERVICE_BUDGET,
    };
    tracing::info!("discovery of {group_version}: transient failure ({first}); retrying");
    with_budget("discovery", budget, fetch)
        .await
        .map_err(|err| Unread::of(&err))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, versions: &[&str]) -> APIGroup {
        let entry = |version: &&str| GroupVersionForDiscovery {
            group_version: format!("{name}/{version}"),
            version: version.to_string(),
        };
        APIGroup {
            name: name.into(),
            preferred_version: versions.first().map(entry),
            versions: versions.iter().map(entry).collect(),
            server_address_by_client_cidrs: None,
        }
    }

    #[test]
    fn a_404_for_a_group_version_no_longer_listed_is_gone_and_one_still_listed_is_not() {
        let fresh = APIGroupList {
            groups: vec![group("apps", &["v1"]), group("still.example.com", &["v1"])],
        };
        let gone = gone_group_versions(&["widgets.example.com/v1", "still.example.com/v1"], &fresh);
        assert_eq!(gone, HashSet::from(["widgets.example.com/v1".to_string()]));
    }

    #[test]
    fn gone_group_versions_leave_the_group_list() {
        let groups = APIGroupList {
            groups: vec![
                group("apps", &["v1"]),
                group("widgets.example.com", &["v1"]),
                group("gadgets.example.com", &["v2", "v1"]),
            ],
        };
        let gone = HashSet::from([
            "widgets.example.com/v1".to_string(),
            "gadgets.example.com/v2".to_string(),
        ]);
        let left = without_group_versions(groups, &gone);
        let names: Vec<&str> = left.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["apps", "gadgets.example.com"]);
        let gadgets = &left.groups[1];
        assert_eq!(gadgets.versions.len(), 1);
        assert_eq!(
            gadgets.preferred_version.as_ref().map(|v| v.group_version.as_str()),
            Some("gadgets.example.com/v1")
        );
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
}
