//! Discovery as the server sends it: the group list and each group version's resources.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResource, APIResourceList};

use super::{choose_kinds, Catalog, DiscoveryFailure, DiscoverySource, ServedGroup, ServedResource};

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
        let versions: Vec<(String, String, String)> = served
            .iter()
            .flat_map(|group| {
                group.versions.iter().flat_map(move |(version, resources)| {
                    resources
                        .iter()
                        .filter(|r| !r.plural.contains('/'))
                        .map(move |r| (group.group.clone(), r.kind.clone(), version.clone()))
                })
            })
            .collect();
        Catalog::new(kinds, failures, source).with_versions(versions)
    }

    /// Every group version of the group list, in order.
    pub(super) fn group_versions(&self) -> Vec<String> {
        group_versions_of(&self.groups)
    }
}

/// Every group version of a group list, in order.
pub(super) fn group_versions_of(groups: &APIGroupList) -> Vec<String> {
    groups
        .groups
        .iter()
        .flat_map(|g| g.versions.iter().map(|v| v.group_version.clone()))
        .collect()
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
