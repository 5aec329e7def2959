//! The dependency graph of manifests, with no cluster (`graph -f/-k`).

use std::collections::{HashMap, HashSet};

use crate::error::UserError;
use crate::graph::{build, BuildOptions, Graph, NodeInput};
use crate::model::identity::ObjectId;
use crate::stack::desired::{resolve, NamespaceRule, Scopes};
use crate::stack::manifest::Manifest;

/// The graph of manifests, with no cluster: scopes from the built-in table, the manifests' CRDs
/// and the `depends-on` references (a reference without `namespaces/` names a cluster-scoped
/// object); a dependency that no manifest declares is marked missing. A malformed `depends-on`
/// or kapp change rule is a usage error naming the file and line.
pub fn offline_graph(manifests: &[Manifest], namespace: &str, members: bool, infer: bool) -> Result<Graph, UserError> {
    check_dependency_annotations(manifests)?;
    let scopes = Scopes::new(None, manifests);
    let cluster_scoped = cluster_scoped_by_reference(manifests);
    let mut crd_names = HashMap::new();
    let mut inputs = Vec::new();
    let mut sources = Vec::new();
    for manifest in manifests {
        let Ok(mut id) = resolve(manifest, &scopes, NamespaceRule::Default(namespace)) else {
            continue;
        };
        if cluster_scoped.contains(&(id.group.clone(), id.kind.clone())) {
            id.namespace = None;
        }
        sources.push(manifest);
        if manifest.kind == "CustomResourceDefinition" {
            if let (Some(group), Some(kind)) = (manifest.str_at("/spec/group"), manifest.str_at("/spec/names/kind")) {
                crd_names.insert((group.to_string(), kind.to_string()), manifest.name.clone());
            }
        }
        let map = |pointer: &str| {
            manifest
                .body
                .pointer(pointer)
                .and_then(|v| serde_json::from_value::<std::collections::BTreeMap<String, String>>(v.clone()).ok())
                .unwrap_or_default()
                .into()
        };
        let body = crate::graph::infer::needs_spec(&id.group, &id.kind).then(|| manifest.body.clone());
        inputs.push(NodeInput {
            depends_on: NodeInput::flux_depends_on(&id, &manifest.body),
            id,
            uid: None,
            labels: map("/metadata/labels"),
            annotations: map("/metadata/annotations"),
            finalizers: strings_at(&manifest.body, "/metadata/finalizers"),
            body,
            app: Some(crate::stack::manifest::folder_of(&manifest.source)),
            // Manifests carry no UIDs: nothing dies by ownership offline.
            owners: Vec::new(),
            // Offline, no ServiceAccount is looked up.
            impersonation: Default::default(),
            unmapped: Default::default(),
        });
    }
    note_conflicting_duplicates(&inputs.iter().zip(sources).collect::<Vec<_>>());
    let plurals = crd_plurals(manifests);
    let options = BuildOptions {
        members,
        crd_names,
        infer,
        plurals,
        orphan_dependents: false,
    };
    let mut graph = build(&inputs, &options);
    graph.mark_referenced(|_| false);
    Ok(graph)
}

/// Refuses manifests whose `depends-on` or kapp change rules their own tools would reject
/// (cli-utils: "failed to parse object metadata"), naming each file and line.
fn check_dependency_annotations(manifests: &[Manifest]) -> Result<(), UserError> {
    let mut problems = Vec::new();
    for manifest in manifests {
        let annotations: std::collections::BTreeMap<String, String> = manifest
            .body
            .pointer("/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        for (key, value, why) in crate::graph::malformed_annotations(&annotations) {
            problems.push(format!(
                "{}: {} {}: invalid {key} {value:?}: {why}",
                crate::stack::manifest::locate(&manifest.source, &value),
                manifest.kind,
                manifest.name
            ));
        }
    }
    match problems.len() {
        0 => Ok(()),
        _ => Err(UserError::usage(problems.join("\n"))),
    }
}

/// Custom kinds that no manifest's CRD defines but that `depends-on` references name as
/// cluster-scoped (no `namespaces/` segment) and never as namespaced. Offline, nothing else
/// tells their scope: cli-utils writes a reference by the object's real scope.
fn cluster_scoped_by_reference(manifests: &[Manifest]) -> HashSet<(String, String)> {
    let defined: HashSet<(&str, &str)> = manifests
        .iter()
        .filter(|m| m.kind == "CustomResourceDefinition")
        .filter_map(|crd| Some((crd.str_at("/spec/group")?, crd.str_at("/spec/names/kind")?)))
        .collect();
    let mut cluster = HashSet::new();
    let mut namespaced = HashSet::new();
    for manifest in manifests {
        let Some(value) = manifest.annotation(crate::graph::KPT_DEPENDS_ON) else {
            continue;
        };
        for id in crate::graph::parse_depends_on(value).unwrap_or_default() {
            let custom = id.group.contains('.') && !id.group.ends_with(".k8s.io");
            if !custom || defined.contains(&(id.group.as_str(), id.kind.as_str())) {
                continue;
            }
            let key = (id.group.clone(), id.kind.clone());
            if id.namespace.is_some() {
                namespaced.insert(key);
            } else {
                cluster.insert(key);
            }
        }
    }
    cluster.retain(|key| !namespaced.contains(key));
    cluster
}

/// The strings of an array field (missing, or not strings: none).
fn strings_at(body: &serde_json::Value, pointer: &str) -> Vec<String> {
    body.pointer(pointer)
        .and_then(serde_json::Value::as_array)
        .map(|items| items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The resource (plural) of each kind the manifests' CRDs define.
fn crd_plurals(manifests: &[Manifest]) -> HashMap<(String, String), String> {
    manifests
        .iter()
        .filter(|m| m.kind == "CustomResourceDefinition")
        .filter_map(|crd| {
            let group = crd.str_at("/spec/group")?;
            let kind = crd.str_at("/spec/names/kind")?;
            let plural = crd.str_at("/spec/names/plural")?;
            Some(((group.to_string(), kind.to_string()), plural.to_string()))
        })
        .collect()
}

/// Two manifests that define the same object are merged into one node; when they define it
/// differently, says so (which files, and that the first one's labels and annotations win).
/// `defined` pairs each graph input with the manifest it was read from.
fn note_conflicting_duplicates(defined: &[(&NodeInput, &Manifest)]) {
    let mut first: HashMap<&ObjectId, &Manifest> = HashMap::new();
    for (input, manifest) in defined {
        match first.get(&input.id) {
            Some(earlier) if earlier.body != manifest.body => tracing::warn!(
                "{} is defined twice, differently: {} and {}; merged into one node (the dependencies of both; the first one's labels and annotations where they differ)",
                input.id,
                earlier.source,
                manifest.source
            ),
            Some(_) => {}
            None => {
                first.insert(&input.id, manifest);
            }
        }
    }
}
