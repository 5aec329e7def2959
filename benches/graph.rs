//! Benchmark: 10,000 nodes and ~30,000 edges built, planned into deletion waves and rendered as
//! DOT (the README's performance figure), with bounds that fail the run.
//!
//! - `cargo bench --bench graph` (optimised): best of 5 must stay within 3x the README's 31 ms.
//! - `cargo test --bench graph` (the smoke form CI runs, unoptimised): 10,000 nodes under
//!   [`SMOKE_LIMIT`], 2 s (about 0.25 s here), and 20,000 nodes under 8 times the time of 5,000
//!   (no quadratic step), best of two runs. The README states the same bounds.
//!
//! Times are the thread's CPU time where Linux tells it, so a busy machine does not fail them.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use kubectl_stack::graph::{build, BuildOptions, NodeInput};
use kubectl_stack::model::identity::ObjectId;

/// The README's measured figure for 10,000 nodes, optimised.
const README_MS: f64 = 31.0;

/// The smoke form's bound for 10,000 nodes, unoptimised (the header's and the README's).
const SMOKE_LIMIT: Duration = Duration::from_secs(2);

/// `nodes` ConfigMaps, each depending on three earlier ones: a deep DAG.
fn inputs(nodes: usize) -> Vec<NodeInput> {
    (0..nodes)
        .map(|i| {
            let mut input = NodeInput {
                id: ObjectId::new("", "ConfigMap", Some("bench"), &format!("n{i}")),
                ..Default::default()
            };
            let deps: Vec<String> = [1usize, 7, 101]
                .iter()
                .filter(|&&d| d <= i)
                .map(|d| format!("/namespaces/bench/ConfigMap/n{}", i - d))
                .collect();
            input
                .annotations_mut()
                .insert("config.kubernetes.io/depends-on".into(), deps.join(","));
            input
        })
        .collect()
}

/// CPU time of this thread (Linux), so that a busy machine does not fail the bounds.
fn cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// Builds, plans and renders once; checks the result and returns how long it took: CPU time
/// where the system tells it, wall time otherwise.
fn once(inputs: &[NodeInput]) -> Duration {
    let cpu_start = cpu_time();
    let start = Instant::now();
    let graph = build(inputs, &BuildOptions::default());
    let targets: HashSet<usize> = (0..graph.nodes.len()).collect();
    let plan = kubectl_stack::graph::plan::plan_deletion(&graph, &targets).expect("acyclic");
    let dot = kubectl_stack::graph::output::dot(&graph);
    let wall = start.elapsed();
    let elapsed = match (cpu_start, cpu_time()) {
        (Some(before), Some(after)) => after.saturating_sub(before),
        _ => wall,
    };
    let nodes = inputs.len();
    assert_eq!(graph.nodes.len(), nodes);
    assert_eq!(graph.edges.len(), 3 * nodes - 1 - 7 - 101);
    assert_eq!(plan.waves.iter().map(Vec::len).sum::<usize>(), nodes);
    // n{i} depends on n{i-1}: one wave per node.
    assert_eq!(plan.waves.len(), nodes);
    assert_eq!(dot.matches(" -> ").count(), graph.edges.len());
    println!(
        "graph: {} nodes, {} edges, {} waves, {} bytes of DOT in {:.1} ms CPU ({:.1} ms wall)",
        graph.nodes.len(),
        graph.edges.len(),
        plan.waves.len(),
        dot.len(),
        elapsed.as_secs_f64() * 1000.0,
        wall.as_secs_f64() * 1000.0
    );
    elapsed
}

fn bench() {
    let inputs = inputs(10_000);
    let runs = 5;
    let best = (0..runs).map(|_| once(&inputs)).min().unwrap_or_default();
    let best_ms = best.as_secs_f64() * 1000.0;
    println!("best of {runs}: {best_ms:.1} ms (README: {README_MS} ms)");
    assert!(
        best_ms < 3.0 * README_MS,
        "10,000 nodes took {best_ms:.1} ms, more than 3x the README's {README_MS} ms"
    );
}

fn smoke() {
    // The absolute bound first: a quadratic step fails here, before minutes of larger runs.
    let first = once(&inputs(10_000));
    assert!(
        first < SMOKE_LIMIT,
        "10,000 nodes took {first:?} (unoptimised), more than {SMOKE_LIMIT:?}"
    );
    // Four times the nodes: about four times the time when linear, sixteen when quadratic.
    // Best of two each: one slow run on a busy machine must not look like a regression.
    let best_of_two = |nodes: usize| {
        let inputs = inputs(nodes);
        once(&inputs).min(once(&inputs))
    };
    let small = best_of_two(5_000);
    let large = best_of_two(20_000);
    let ratio = large.as_secs_f64() / small.as_secs_f64();
    println!("smoke: 20,000 nodes took {ratio:.2}x the time of 5,000");
    assert!(
        ratio < 8.0,
        "four times the nodes took {ratio:.2}x the time: something grows faster than n log n"
    );
}

fn main() {
    if std::env::args().any(|arg| arg == "--bench") {
        bench();
    } else {
        smoke();
    }
}
