//! The stacks a teardown names: `TYPE/NAME`, or `TYPE` with `-l`; a named stack already gone
//! is found again by its members' marks.

use crate::cluster::collect::{collect_kinds, ListScope, Listed};
use crate::cluster::session::{resolve_typed, Session};
use crate::error::UserError;
use crate::graph::{Graph, NodeStatus};
use crate::model::identity::ObjectId;
use crate::model::trackers::{MarkValue, Preset, Selection};
use crate::prune::teardown::{members_of_gone, Kept, Snapshot};

use super::PlanRequest;

/// The nodes the user named, with why each is chosen. A named stack that is already gone (a
/// teardown run again after a partial one) is found again by its members' marks.
pub(super) async fn named_targets(
    session: &Session,
    request: &PlanRequest,
    snapshot: &Snapshot<'_>,
    gone: &mut Vec<(Preset, MarkValue)>,
    kept: &mut Vec<Kept>,
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
            found.extend(find_named(snapshot, graph, &id, gone, kept, request.leftovers)?);
        }
    }
    Ok(found)
}

fn find_named(
    snapshot: &Snapshot,
    graph: &Graph,
    id: &ObjectId,
    gone: &mut Vec<(Preset, MarkValue)>,
    kept: &mut Vec<Kept>,
    leftovers: bool,
) -> Result<Vec<(usize, String)>, UserError> {
    if let Some(index) = graph
        .find(id)
        .filter(|&i| graph.nodes[i].status == NodeStatus::Selected)
    {
        return Ok(vec![(index, "named".to_string())]);
    }
    let flux_kind = Some((id.group.as_str(), id.kind.as_str()));
    let preset = Preset::ALL.into_iter().find(|p| p.flux_kind() == flux_kind);
    let left = match preset {
        Some(preset) => {
            let key = (
                preset,
                MarkValue {
                    name: id.name.clone(),
                    namespace: id.namespace.clone(),
                },
            );
            let left = members_of_gone(snapshot, &key);
            if leftovers && !left.is_empty() {
                gone.push(key);
            }
            left
        }
        None => Vec::new(),
    };
    if left.is_empty() {
        return Err(UserError::failed(format!("{id} not found")).hint(
            "name a Kustomization, HelmRelease, inventory object or ApplySet parent in -n NAMESPACE (it may already be gone)",
        ));
    }
    if !leftovers {
        // The stack's tracking object goes after its members: when it is gone, what still
        // carries its mark was kept by the run that deleted it (a keep marker, `prune: false`,
        // outside its record), or it was deleted outside kubectl-stack. Not its members to take.
        tracing::warn!(
            "{id} is already gone; the {} object(s) that still carry its mark are kept (the run that deleted it kept them, or it was deleted by other means): add --leftovers to delete them",
            left.len()
        );
        kept.extend(left.into_iter().map(|index| Kept {
            id: graph.nodes[index].id.clone(),
            reason: crate::stack::keep::KeepReason::Leftover { stack: id.to_string() },
        }));
        return Ok(Vec::new());
    }
    tracing::warn!(
        "{id} is already gone; --leftovers: tearing down the {} object(s) that still carry its mark",
        left.len()
    );
    Ok(left
        .into_iter()
        .map(|index| (index, format!("left behind by {id}, already gone (--leftovers)")))
        .collect())
}
