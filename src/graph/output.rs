//! Rendering the dependency graph: a tree like `flux tree`, Graphviz DOT, Mermaid, JSON, and
//! the deletion or apply waves.

use std::collections::HashSet;
use std::fmt::Write;

use serde_json::{json, Value};

use crate::graph::plan::{Cycle, Waves};
use crate::graph::{Graph, NodeStatus};

fn label(graph: &Graph, index: usize) -> String {
    let node = &graph.nodes[index];
    let marker = match node.status {
        NodeStatus::Selected => "",
        NodeStatus::External => " [external]",
        NodeStatus::Missing => " [missing]",
    };
    format!("{}{marker}", node.id)
}

/// A tree: each object nothing depends on, with its dependencies (and members) below it,
/// drawn with `├──`, `└──` and `│`. An object met again is printed once more, marked `(above)`.
pub fn tree(graph: &Graph) -> String {
    let has_parent: HashSet<usize> = graph
        .all_edges()
        .map(|e| e.to)
        .chain(graph.members.iter().map(|m| m.member))
        .collect();
    let mut roots: Vec<usize> = (0..graph.nodes.len())
        .filter(|i| !has_parent.contains(i) && graph.nodes[*i].status == NodeStatus::Selected)
        .collect();
    if roots.is_empty() && !graph.nodes.is_empty() {
        roots.push(0); // everything is in a cycle: start anywhere
    }
    roots.sort_by(|a, b| graph.nodes[*a].id.cmp(&graph.nodes[*b].id));
    let mut text = String::new();
    let mut printed = HashSet::new();
    for root in roots {
        let _ = writeln!(text, "{}", label(graph, root));
        printed.insert(root);
        subtree(graph, root, "", &mut printed, &mut vec![root], &mut text);
    }
    text
}

fn children(graph: &Graph, index: usize) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = graph
        .all_edges()
        .filter(|e| e.from == index)
        .map(|e| (e.to, format!(" ({})", e.kind.label())))
        .collect();
    found.sort_by(|a, b| graph.nodes[a.0].id.cmp(&graph.nodes[b.0].id));
    let mut members: Vec<(usize, String)> = graph
        .members_of(index)
        .into_iter()
        .map(|m| (m, String::new()))
        .collect();
    members.sort_by(|a, b| graph.nodes[a.0].id.cmp(&graph.nodes[b.0].id));
    found.extend(members);
    found
}

fn subtree(
    graph: &Graph,
    index: usize,
    prefix: &str,
    printed: &mut HashSet<usize>,
    path: &mut Vec<usize>,
    out: &mut String,
) {
    let kids = children(graph, index);
    for (position, (child, why)) in kids.iter().enumerate() {
        let last = position + 1 == kids.len();
        let (branch, indent) = if last {
            ("└── ", "    ")
        } else {
            ("├── ", "│   ")
        };
        let again = if path.contains(child) {
            " (cycle)"
        } else if printed.contains(child) && !children(graph, *child).is_empty() {
            " (above)"
        } else {
            ""
        };
        let _ = writeln!(out, "{prefix}{branch}{}{why}{again}", label(graph, *child));
        if again.is_empty() {
            printed.insert(*child);
            path.push(*child);
            subtree(graph, *child, &format!("{prefix}{indent}"), printed, path, out);
            path.pop();
        }
    }
}

fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Graphviz DOT.
pub fn dot(graph: &Graph) -> String {
    let mut text = String::with_capacity(graph.nodes.len() * 80 + graph.edges.len() * 40);
    text.push_str("digraph stack {\n  rankdir=LR;\n  node [shape=box, fontname=\"sans-serif\"];\n");
    for (index, node) in graph.nodes.iter().enumerate() {
        let style = match node.status {
            NodeStatus::Selected => "",
            NodeStatus::External => ", style=dashed",
            NodeStatus::Missing => ", style=dashed, color=red",
        };
        let _ = writeln!(text, "  n{index} [label={}{style}];", quote(&label(graph, index)));
    }
    for edge in graph.all_edges() {
        let _ = writeln!(
            text,
            "  n{} -> n{} [label={}];",
            edge.from,
            edge.to,
            quote(edge.kind.label())
        );
    }
    for membership in &graph.members {
        let _ = writeln!(
            text,
            "  n{} -> n{} [style=dotted, arrowhead=none];",
            membership.owner, membership.member
        );
    }
    text.push_str("}\n");
    text
}

/// Mermaid flowchart.
pub fn mermaid(graph: &Graph) -> String {
    let mut text = String::from("flowchart LR\n");
    for index in 0..graph.nodes.len() {
        let _ = writeln!(text, "  n{index}[\"{}\"]", label(graph, index).replace('"', "#quot;"));
    }
    for edge in graph.all_edges() {
        let _ = writeln!(text, "  n{} -->|{}| n{}", edge.from, edge.kind.label(), edge.to);
    }
    for membership in &graph.members {
        let _ = writeln!(text, "  n{} -.- n{}", membership.owner, membership.member);
    }
    for (index, node) in graph.nodes.iter().enumerate() {
        match node.status {
            NodeStatus::Missing => {
                let _ = writeln!(text, "  style n{index} stroke:#d00,stroke-dasharray: 5 5");
            }
            NodeStatus::External => {
                let _ = writeln!(text, "  style n{index} stroke-dasharray: 5 5");
            }
            NodeStatus::Selected => {}
        }
    }
    text
}

/// JSON: nodes, edges, members, and the waves or the cycle when given.
pub fn json(graph: &Graph, plan: Option<&Waves>, cycle: Option<&Cycle>) -> Value {
    let nodes: Vec<Value> = graph
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| {
            json!({"index": index, "group": node.id.group, "kind": node.id.kind, "namespace": node.id.namespace,
                   "name": node.id.name, "status": node.status})
        })
        .collect();
    let mut document = json!({"nodes": nodes, "edges": graph.all_edges().collect::<Vec<_>>(), "unordered": graph.unordered, "members": graph.members});
    if let Some(plan) = plan {
        document["waves"] = json!(plan.waves);
    }
    if let Some(cycle) = cycle {
        document["cycle"] = json!(cycle.path);
    }
    document
}

/// The waves as a table: WAVE, KIND, NAMESPACE, NAME.
pub fn waves_table(graph: &Graph, plan: &Waves) -> String {
    let rows = plan
        .waves
        .iter()
        .enumerate()
        .flat_map(|(wave, members)| {
            members.iter().map(move |&index| {
                let id = &graph.nodes[index].id;
                vec![
                    (wave + 1).to_string(),
                    id.kind_with_group(),
                    id.namespace.clone().unwrap_or_default(),
                    id.name.clone(),
                ]
            })
        })
        .collect();
    crate::render::table(&["WAVE", "KIND", "NAMESPACE", "NAME"], rows)
}

/// The WHY of a planned object: why it is in the plan, then, when inferred edges or a cascade
/// victim's edges place it before other planned objects, the first of each (`member of …; before
/// Deployment.apps/op/ctl (inferred: finalizer)`).
pub fn plan_why(graph: &Graph, index: usize, planned: &HashSet<usize>, why: Option<&String>) -> String {
    let reasons = why
        .cloned()
        .into_iter()
        .chain(graph.inferred_reason(index, planned))
        .chain(graph.victim_reason(index, planned))
        .filter(|reason| !reason.is_empty());
    reasons.collect::<Vec<_>>().join("; ")
}

/// A cycle as a path: `A -> B -> C -> A`.
pub fn cycle_path(graph: &Graph, cycle: &Cycle) -> String {
    let mut names: Vec<String> = cycle.path.iter().map(|&i| graph.nodes[i].id.to_string()).collect();
    if let Some(first) = names.first().cloned() {
        names.push(first);
    }
    names.join(" -> ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{build, BuildOptions, NodeInput};
    use crate::model::identity::ObjectId;

    fn sample() -> Graph {
        let mut app = NodeInput {
            id: ObjectId::new("", "ConfigMap", Some("t"), "app"),
            ..Default::default()
        };
        app.annotations_mut().insert(
            "config.kubernetes.io/depends-on".into(),
            "/namespaces/t/ConfigMap/db,/namespaces/t/ConfigMap/gone".into(),
        );
        let db = NodeInput {
            id: ObjectId::new("", "ConfigMap", Some("t"), "db"),
            ..Default::default()
        };
        let mut graph = build(&[app, db], &BuildOptions::default());
        graph.mark_referenced(|_| false);
        graph
    }

    #[test]
    fn tree_draws_guides_and_markers() {
        let text = tree(&sample());
        assert_eq!(
            text,
            "ConfigMap/t/app\n├── ConfigMap/t/db (depends-on)\n└── ConfigMap/t/gone [missing] (depends-on)\n"
        );
    }

    #[test]
    fn dot_and_mermaid_name_every_node_and_edge() {
        let graph = sample();
        let dot = dot(&graph);
        assert!(dot.starts_with("digraph stack {"));
        assert!(dot.contains("n0 -> n1 [label=\"depends-on\"]"));
        assert!(dot.contains("color=red"));
        let mermaid = mermaid(&graph);
        assert!(mermaid.contains("n0 -->|depends-on| n1"));
    }
}
