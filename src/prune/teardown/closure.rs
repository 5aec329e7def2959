//! What a teardown takes: the named stacks, their members, and what explicitly depends on them;
//! and the members of a named stack whose tracking object is already gone.

use std::collections::HashMap;

use super::Snapshot;
use crate::graph::{EdgeKind, Graph, NodeStatus};
use crate::model::trackers::{marks, MarkValue, Preset};
use crate::stack::keep::TornDown;

/// The named nodes, their members, and everything that depends on any of them through an
/// explicit dependency, transitively. Each chosen node says why it was chosen.
pub fn teardown_closure(graph: &Graph, named: &[usize]) -> HashMap<usize, String> {
    let mut chosen: HashMap<usize, String> = named.iter().map(|&i| (i, "named".to_string())).collect();
    let mut queue: Vec<usize> = named.to_vec();
    while let Some(current) = queue.pop() {
        let mut add = |index: usize, why: String, queue: &mut Vec<usize>| {
            if graph.nodes[index].status == NodeStatus::Selected && !chosen.contains_key(&index) {
                chosen.insert(index, why);
                queue.push(index);
            }
        };
        for member in graph.members_of(current) {
            add(member, format!("member of {}", graph.nodes[current].id), &mut queue);
        }
        // Only explicit dependencies pull dependents in. An object that merely lives in a
        // Namespace, or is an instance of a CRD, being torn down belongs to its own stack: it is
        // not deleted, and it keeps its Namespace or CRD alive.
        let explicit = |e: &&crate::graph::Edge| e.to == current && e.kind.is_declared();
        for edge in graph.edges.iter().filter(explicit) {
            add(
                edge.from,
                format!("depends on {} ({})", graph.nodes[current].id, edge.kind.label()),
                &mut queue,
            );
        }
    }
    chosen
}

/// The members, still in the graph, of a stack whose tracking object is already gone (a teardown
/// run again after a partial one): the objects that carry its full mark. A mark that names its
/// stack by name only could belong to a live stack of that name elsewhere: it never counts here.
pub fn members_of_gone(snapshot: &Snapshot, key: &(Preset, MarkValue)) -> Vec<usize> {
    let gone = TornDown::new([key.clone()]);
    snapshot
        .graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.status == NodeStatus::Selected)
        .filter(|(_, node)| {
            snapshot.objects.get(&node.id).is_some_and(|o| {
                marks(&o.meta)
                    .iter()
                    .any(|m| gone.covers(m) && m.value.namespace.is_some())
            })
        })
        .map(|(index, _)| index)
        .collect()
}

impl EdgeKind {
    /// Whether people declared this dependency (dependsOn, depends-on, sync waves, kapp rules),
    /// rather than it following from where an object lives (its Namespace, its CRD).
    pub fn is_declared(self) -> bool {
        !matches!(self, EdgeKind::Namespace | EdgeKind::Crd) && !self.is_inferred()
    }
}
