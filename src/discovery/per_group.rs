//! Per-group discovery: `/api`, `/apis`, then each group version, with the retries and the
//! APIService checks that tell a down aggregated API from a transient failure.

use std::time::Duration;

use futures::{stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResourceList, GroupVersionForDiscovery,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::{Api, Client};

use super::{Catalog, DiscoveryFailure, DiscoverySource, ServerLists};
use crate::error::root_cause;
use crate::retry::{self, is_transient, with_attempts, with_budget, with_retries};

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
pub(super) async fn read_all_resources(
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

#[cfg(test)]
mod tests {
    use super::*;

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
