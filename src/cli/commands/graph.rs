//! `kubectl stack graph`: the dependency graph, live or from manifests, and its waves.

use std::collections::HashSet;

use crate::cli::list_options;
use crate::cli::{GlobalArgs, GraphArgs, GraphOutput, Order};
use crate::cluster::session::{resolve_selection, Session};
use crate::error::{exit, UserError};
use crate::graph::live::{deletion_graph, live_graph_with};
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
            let options = list_options(&args.tuning);
            let deleting = matches!(args.order, Some(Order::Delete));
            let mut live = match deleting {
                true => deletion_graph(&session, wanted, args.members, options, infer).await?,
                false => live_graph_with(&session, wanted, args.members, options, infer).await?,
            };
            if deleting {
                add_cascades(&session, &mut live, options).await?;
                live.drop_unrelated_stayers(&session).await;
                outside_selection(&mut live);
            }
            gaps = std::mem::take(&mut live.gaps);
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

/// What deleting the selected objects would take beyond them, found as prune finds it
/// ([`crate::prune::cascade::find_cascades`]: cascade victims and what they own, the Namespaces
/// and CRDs that die with them, the operators their controllers made), as nodes of the graph:
/// `--order delete` then orders by every route an object dies by, as prune does (order review
/// 17, F3).
async fn add_cascades(
    session: &Session,
    live: &mut crate::graph::live::LiveGraph,
    options: crate::cluster::collect::ListOptions,
) -> Result<(), UserError> {
    let planned: Vec<(crate::model::identity::ObjectId, String)> = live
        .graph
        .nodes
        .iter()
        .filter(|n| n.status == crate::graph::NodeStatus::Selected && !live.stayers.contains(&n.id))
        .filter_map(|n| Some((n.id.clone(), n.uid.clone()?)))
        .collect();
    let torn_down = crate::stack::keep::TornDown::default();
    let kept = HashSet::new();
    let counted = crate::prune::cascade::owners::Counted {
        torn_down: &torn_down,
        kept: &kept,
    };
    let client = &session.connection.client;
    let (_, taken) =
        crate::prune::cascade::find_cascades(client, &session.catalog, planned, &counted, options, false).await;
    live.add_victims(session, taken).await?;
    Ok(())
}

/// The nodes a deletion graph holds only to be asked what they need (the stayers, which no
/// cascade takes) are outside the selection: they are shown, and keep what they need, but are
/// not deleted.
fn outside_selection(live: &mut crate::graph::live::LiveGraph) {
    for node in live
        .graph
        .nodes
        .iter_mut()
        .filter(|node| live.stayers.contains(&node.id))
    {
        node.status = crate::graph::NodeStatus::External;
    }
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
