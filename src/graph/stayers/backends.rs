//! The backends of the stayers that no stack tracks: a webhook configuration or an APIService that
//! stays calls a Service, and that Service's selector picks the workloads that serve it. When the
//! Service is untracked it is no node of a teardown's graph, and the tracked Deployment behind it
//! would lose the webhook's need (order review 6, F4). The plan ([`crate::graph::live::planning_graph`])
//! and the re-check before every wave read them by this one function, whole, so that inference
//! ([`crate::graph::infer`], rules 2 and 3) sees the whole chain.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use futures::{stream, StreamExt};
use serde_json::Value;

use super::{Unlisted, Whole};
use crate::cluster::collect::{api_for, list_objects, Listed};
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_forbidden, is_not_found};
use crate::graph::infer::{service_selects, services_called, POD_KINDS};
use crate::graph::NodeInput;
use crate::model::identity::ObjectId;

/// The Services the webhook configurations and APIServices among `inputs` call that are no
/// input, read whole, and the objects of their namespaces that run the pods their selectors pick
/// ([`POD_KINDS`]) and are no input either. A Service that does not exist is left out (the graph
/// marks a missing reference apart); one that cannot be read, or a kind that cannot be listed,
/// is in [`Whole::unlisted`]: what the webhook needs is unknown.
pub async fn backends(session: &Session, inputs: &[NodeInput]) -> Whole {
    let known: HashSet<&ObjectId> = inputs.iter().map(|i| &i.id).collect();
    let wanted: BTreeSet<(String, String)> = inputs
        .iter()
        .flat_map(services_called)
        .filter(|(namespace, name)| !known.contains(&ObjectId::new("", "Service", Some(namespace), name)))
        .collect();
    let mut whole = Whole::default();
    let services = read_services(session, wanted, &mut whole).await;
    let mut by_namespace: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for (object, body) in &services {
        if let Some(namespace) = &object.meta.namespace {
            by_namespace.entry(namespace.clone()).or_default().push(body);
        }
    }
    for (namespace, bodies) in by_namespace {
        let picked = picked_in(session, &namespace, &bodies, &mut whole.unlisted).await;
        whole
            .objects
            .extend(picked.into_iter().filter(|(o, _)| !known.contains(&o.id())));
    }
    whole.objects.extend(services);
    whole.objects.sort_by_key(|(listed, _)| listed.id());
    whole.objects.dedup_by_key(|(listed, _)| listed.id());
    whole
}

/// Reads each Service (namespace, name) whole.
async fn read_services(
    session: &Session,
    wanted: BTreeSet<(String, String)>,
    whole: &mut Whole,
) -> Vec<(Listed, Value)> {
    let Some(kind) = session.catalog.get("", "Service").cloned() else {
        return Vec::new();
    };
    let client = &session.connection.client;
    let read: Vec<Result<Option<(Listed, Value)>, kube::Error>> = stream::iter(wanted)
        .map(|(namespace, name)| {
            let kind = kind.clone();
            async move {
                let api = api_for(client, &kind, Some(&namespace));
                match with_retries("get a webhook's Service", || api.get(&name)).await {
                    Ok(object) => Ok(Some(whole_of(&kind, object))),
                    Err(err) if is_not_found(&err) => Ok(None),
                    Err(err) => Err(err),
                }
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut found = Vec::new();
    for result in read {
        match result {
            Ok(service) => found.extend(service),
            Err(err) => whole.unlisted.push(unlisted(&kind.kind_with_group(), &err)),
        }
    }
    found
}

/// The objects of `namespace` that run the pods one of `services` selects, whole.
async fn picked_in(
    session: &Session,
    namespace: &str,
    services: &[&Value],
    unlisted_kinds: &mut Vec<Unlisted>,
) -> Vec<(Listed, Value)> {
    let mut picked = Vec::new();
    for (group, kind) in POD_KINDS {
        let Some(info) = session.catalog.get(group, kind).cloned() else {
            continue;
        };
        match list_objects(&session.connection.client, &info, Some(namespace), None).await {
            Ok(objects) => picked.extend(
                objects
                    .into_iter()
                    .map(|object| whole_of(&info, object))
                    .filter(|(object, _)| !made_by_a_picked_kind(object))
                    .filter(|(object, body)| {
                        let input = super::input_of_whole(object, body);
                        services
                            .iter()
                            .any(|service| service_selects(namespace, service, &input))
                    }),
            ),
            Err(err) => unlisted_kinds.push(unlisted(&info.kind_with_group(), &err)),
        }
    }
    picked
}

/// Whether an object is made by another of [`POD_KINDS`] (a Deployment's ReplicaSets, their
/// Pods, a Job's Pods): that owner carries the same pod labels and is picked instead.
fn made_by_a_picked_kind(object: &Listed) -> bool {
    object.meta.owner_references.iter().flatten().any(|owner| {
        let group = owner.api_version.rsplit_once('/').map_or("", |(group, _)| group);
        POD_KINDS.contains(&(group, owner.kind.as_str()))
    })
}

/// A listed object and its whole body, `apiVersion` set as inference reads it.
fn whole_of(
    kind: &std::sync::Arc<crate::cluster::discovery::KindInfo>,
    object: kube::api::DynamicObject,
) -> (Listed, Value) {
    let mut body = object.data;
    if let Some(fields) = body.as_object_mut() {
        fields.insert("apiVersion".into(), kind.api_version().into());
    }
    (Listed::new(kind.clone(), object.metadata), body)
}

/// A kind that could not be read, and why.
fn unlisted(kind: &str, err: &kube::Error) -> Unlisted {
    Unlisted {
        kind: kind.to_string(),
        forbidden: is_forbidden(err),
        why: crate::error::root_cause(err),
    }
}
