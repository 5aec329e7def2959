//! The stacks a teardown names: `TYPE/NAME`, or `TYPE` with `-l`; a named stack already gone
//! is found again by its members' marks.

use crate::collect::{collect_kinds, ListScope, Listed};
use crate::error::UserError;
use crate::graph::{Graph, NodeStatus};
use crate::identity::ObjectId;
use crate::session::{resolve_typed, Session};
use crate::teardown::{members_of_gone, Snapshot};
use crate::trackers::{MarkValue, Preset, Selection, FLUX_KINDS};

use super::PlanRequest;

/// The nodes the user named, with why each is chosen. A named stack that is already gone (a
/// teardown run again after a partial one) is found again by its members' marks.
pub(super) async fn named_targets(
    session: &Session,
    request: &PlanRequest,
    snapshot: &Snapshot<'_>,
    gone: &mut Vec<(Preset, MarkValue)>,
) -> Result<Vec<(usize, String)>, UserError> {
    let graph = snapshot.graph;
    let mut found = Vec::new();
    for target in &request.targets {
        let (kind, id) = resolve_typed(session, target)?;
        let ids: Vec<ObjectId> = match (id, &request.selector) {
            (Some(id), _) => vec![id],
            (None, Some(selector)) => {
                let namespace = session.connection.namespace.clone();
                let selection = Selection::new(Some(selector.clone()), None);
                let listed = collect_kinds(
                    &session.connection.client,
                    std::slice::from_ref(&kind),
                    &ListScope::Namespace(namespace),
                    &selection,
                    request.list,
                )
                .await;
                if let Some(failure) = listed.failures.first() {
                    return Err(UserError::failed(format!(
                        "cannot list {}: {:?}",
                        failure.kind.kind_with_group(),
                        failure.failure
                    )));
                }
                listed.objects.iter().map(Listed::id).collect()
            }
            (None, None) => {
                return Err(UserError::usage(format!(
                    "{target}: give TYPE/NAME, or TYPE with -l SELECTOR"
                )))
            }
        };
        for id in ids {
            found.extend(find_named(snapshot, graph, &id, gone)?);
        }
    }
    Ok(found)
}

fn find_named(
    snapshot: &Snapshot,
    graph: &Graph,
    id: &ObjectId,
    gone: &mut Vec<(Preset, MarkValue)>,
) -> Result<Vec<(usize, String)>, UserError> {
    if let Some(index) = graph
        .find(id)
        .filter(|&i| graph.nodes[i].status == NodeStatus::Selected)
    {
        return Ok(vec![(index, "named".to_string())]);
    }
    let is_flux = FLUX_KINDS.contains(&(id.group.as_str(), id.kind.as_str()));
    let preset = if id.kind == "Kustomization" {
        Preset::Flux
    } else {
        Preset::FluxHelm
    };
    let key = (
        preset,
        MarkValue {
            name: id.name.clone(),
            namespace: id.namespace.clone(),
        },
    );
    let left = if is_flux {
        members_of_gone(snapshot, &key)
    } else {
        Vec::new()
    };
    if left.is_empty() {
        return Err(UserError::failed(format!("{id} not found")).hint(
            "name a Kustomization, HelmRelease, inventory object or ApplySet parent in -n NAMESPACE (it may already be gone)",
        ));
    }
    tracing::warn!(
        "{id} is already gone; tearing down the {} object(s) that still carry its mark",
        left.len()
    );
    gone.push(key);
    Ok(left
        .into_iter()
        .map(|index| (index, format!("member of {id} (already gone)")))
        .collect())
}
