//! `kubectl stack graph`: the dependency graph, live or from manifests, and its waves.

use std::collections::HashSet;

use crate::cli::list_options;
use crate::cli::{GlobalArgs, GraphArgs, GraphOutput, Order};
use crate::cluster::session::{resolve_selection, Session};
use crate::error::{exit, UserError};
use crate::graph::live::live_graph_with;
use crate::graph::offline::offline_graph;
use crate::graph::output;
use crate::graph::plan::{plan_apply, plan_deletion, Cycle, Waves};
use crate::graph::Graph;
use crate::prune::orphans::read_manifests;
use crate::render;
use crate::stack::listing::incomplete;

/// Runs `graph`.
pub async fn run(global: &GlobalArgs, args: GraphArgs) -> anyhow::Result<u8> {
    let manifests = read_manifests(&(&args.manifests).into(), crate::stack::manifest::Reading::View)?;
    let infer = !args.no_infer;
    let mut gaps = Vec::new();
    let graph = match manifests {
        Some(manifests) => offline_graph(
            &manifests,
            global.namespace.as_deref().unwrap_or("default"),
            args.members,
            infer,
        )?,
        None => {
            let session = Session::open(global).await?;
            let mut selection = crate::cli::selection(&args.selection)?;
            resolve_selection(&mut selection, &session)?;
            let wanted = (selection.tracker.is_some() || selection.user_selector.is_some()).then_some(selection);
            let live = live_graph_with(&session, wanted, args.members, list_options(&args.tuning), infer).await?;
            gaps = live.gaps;
            live.graph
        }
    };
    report_references(&graph);
    let all: HashSet<usize> = graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.status == crate::graph::NodeStatus::Selected)
        .map(|(i, _)| i)
        .collect();
    let planned = match args.order {
        Some(Order::Apply) => plan_apply(&graph, &all),
        _ => plan_deletion(&graph, &all),
    };
    let (plan, cycle) = match planned {
        Ok(plan) => (Some(plan), None),
        Err(cycle) => (None, Some(cycle)),
    };
    render::emit(&render_graph(&graph, &args, plan.as_ref(), cycle.as_ref())?)?;
    if let Some(cycle) = &cycle {
        crate::say!("error: dependency cycle: {}", output::cycle_path(&graph, cycle));
        return Ok(exit::CYCLE);
    }
    incomplete(&gaps)?;
    Ok(exit::OK)
}

fn render_graph(
    graph: &Graph,
    args: &GraphArgs,
    plan: Option<&Waves>,
    cycle: Option<&Cycle>,
) -> Result<String, UserError> {
    Ok(match (args.output, args.order, plan) {
        (GraphOutput::Json, order, _) => {
            render::json(&render::document("Graph", output::json(graph, order.and(plan), cycle)))?
        }
        (GraphOutput::Tree, Some(_), Some(plan)) => output::waves_table(graph, plan),
        (GraphOutput::Tree, _, _) => output::tree(graph),
        (GraphOutput::Dot, _, _) => output::dot(graph),
        (GraphOutput::Mermaid, _, _) => output::mermaid(graph),
    })
}

fn report_references(graph: &Graph) {
    for node in graph.referenced() {
        match node.status {
            crate::graph::NodeStatus::Missing => tracing::warn!("dependency {} does not exist", node.id),
            _ => tracing::info!("dependency {} is outside the selection", node.id),
        }
    }
}
