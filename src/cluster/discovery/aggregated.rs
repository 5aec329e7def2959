//! Aggregated discovery (apidiscovery v2, Kubernetes >= 1.26): every group in two requests.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
};
use kube::core::discovery::v2::{APIGroupDiscovery, APIResourceDiscovery};
use kube::Client;

use super::{Catalog, DiscoveryFailure, DiscoverySource, ServerLists};
use crate::cluster::retry::with_retries;
use crate::model::identity::api_version as group_version;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
