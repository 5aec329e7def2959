//! The planner: deletion waves from the dependency graph. Wave 1 holds what nothing depends
//! on; each later wave only what every earlier wave no longer needs. `graph --order` and `prune`
//! both plan with this one function.

use std::collections::{HashMap, HashSet, VecDeque};

use petgraph::algo::{has_path_connecting, tarjan_scc, DfsSpace};
use petgraph::graph::{DiGraph, NodeIndex};

use crate::graph::{EdgeKind, Graph};

/// The order the graph gives: node indices, wave by wave, each wave sorted by identity. What a
/// prune does with it is its one plan, `PrunePlan` (in `prune::teardown`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Waves {
    /// The waves, first to delete first.
    pub waves: Vec<Vec<usize>>,
}

/// A dependency cycle, as a path of node indices that returns to its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The nodes of the cycle in order; the first follows the last.
    pub path: Vec<usize>,
}

/// The "deleted before" relation of the graph: `a -> b` when `a` must be gone before `b` is
/// deleted. A dependency `from -> to` is such an edge. A tracking object (Kustomization,
/// HelmRelease, inventory) goes after its members, so that it, and its `dependsOn`, is still
/// there when a run is resumed; and when it depends on another (Flux `dependsOn`, an Argo CD
/// Application of a later sync wave than another), the other's members go after it.
///
/// A tracking object whose deletion deletes nothing itself ([`Graph::inert`]: a kpt inventory,
/// an ApplySet parent) and that tracks the Namespace it lives in goes after that Namespace, as
/// `kpt live destroy` does (cli-utils deletes the package's Namespaces, waits until they are
/// gone, then deletes the inventory object, which its Namespace already took): its own
/// Namespace edge is left out, or it would close the cycle inventory → Namespace → inventory.
pub fn deletion_order(graph: &Graph) -> DiGraph<usize, ()> {
    let mut order = DiGraph::with_capacity(graph.nodes.len(), graph.edges.len() + graph.members.len());
    let indices: Vec<NodeIndex> = (0..graph.nodes.len()).map(|i| order.add_node(i)).collect();
    let goes_with_its_namespace = |edge: &crate::graph::Edge| {
        edge.kind == EdgeKind::Namespace
            && graph.inert.contains_key(&edge.from)
            && graph
                .members
                .iter()
                .any(|m| m.owner == edge.from && m.member == edge.to)
    };
    for edge in graph.all_edges().filter(|e| !goes_with_its_namespace(e)) {
        order.add_edge(indices[edge.from], indices[edge.to], ());
    }
    for membership in &graph.members {
        order.add_edge(indices[membership.member], indices[membership.owner], ());
    }
    if !graph.members.is_empty() {
        // Flux `dependsOn`, and Argo CD sync waves between Applications (app of apps): Argo CD
        // deletes a later wave's Application, and with its resources finalizer all it holds,
        // before an earlier wave's (argoproj/argo-cd #3959; order review 14, F1).
        let between_stacks = |e: &&crate::graph::Edge| matches!(e.kind, EdgeKind::DependsOn | EdgeKind::SyncWave);
        for edge in graph.edges.iter().filter(between_stacks) {
            for member in graph.members_of(edge.to) {
                order.add_edge(indices[edge.from], indices[member], ());
            }
        }
    }
    order
}

/// Plans the deletion of `targets` (node indices). Orders through every node of the graph, so a
/// dependency that passes through an object outside the targets is still honoured. The order is
/// sorted through its strongly connected components (its condensation): a cycle among objects
/// the plan does not delete (say another package's inventory and the Namespace it lives in)
/// orders what passes through it as one node and fails nothing; only a cycle that holds a
/// target is reported, as a path through that target.
pub fn plan_deletion(graph: &Graph, targets: &HashSet<usize>) -> Result<Waves, Cycle> {
    plan_deletion_told(graph, targets).map(|(plan, _)| plan)
}

/// [`plan_deletion`], with what no order of waves can satisfy (see [`add_victim_orders`]), to
/// tell before asking.
pub fn plan_deletion_told(graph: &Graph, targets: &HashSet<usize>) -> Result<(Waves, Vec<String>), Cycle> {
    let mut order = deletion_order(graph);
    let unsatisfied = add_victim_orders(graph, targets, &mut order);
    layered(graph, targets, &order).map(|plan| (plan, unsatisfied))
}

fn layered(graph: &Graph, targets: &HashSet<usize>, order: &DiGraph<usize, ()>) -> Result<Waves, Cycle> {
    let layer = layers(order, targets)?;
    let deepest = targets.iter().map(|&t| layer[t]).max().unwrap_or(0);
    let mut waves: Vec<Vec<usize>> = vec![Vec::new(); deepest + 1];
    for &target in targets {
        waves[layer[target]].push(target);
    }
    waves.retain(|wave| !wave.is_empty());
    for wave in &mut waves {
        wave.sort_by(|a, b| graph.nodes[*a].id.cmp(&graph.nodes[*b].id));
    }
    Ok(Waves { waves })
}

/// The layer of every node of `order` (its longest path from a source, counted in strongly
/// connected components), or the cycle through the first target that lies in a cyclic
/// component (more than one node, or a node that needs itself).
fn layers(order: &DiGraph<usize, ()>, targets: &HashSet<usize>) -> Result<Vec<usize>, Cycle> {
    // Tarjan yields the components sinks first: reversed, each comes after all it depends on.
    let mut components = tarjan_scc(order);
    components.reverse();
    let mut component_of = vec![0usize; order.node_count()];
    for (c, members) in components.iter().enumerate() {
        let cyclic = members.len() > 1 || members.iter().any(|&n| order.contains_edge(n, n));
        if let Some(&target) = members.iter().find(|&&n| cyclic && targets.contains(&order[n])) {
            return Err(find_cycle(order, target));
        }
        for &node in members {
            component_of[node.index()] = c;
        }
    }
    let mut component_layer = vec![0usize; components.len()];
    for (c, members) in components.iter().enumerate() {
        let next = component_layer[c] + 1;
        for &node in members {
            for successor in order.neighbors(node) {
                let d = component_of[successor.index()];
                if d != c {
                    component_layer[d] = component_layer[d].max(next);
                }
            }
        }
    }
    Ok((0..order.node_count())
        .map(|n| component_layer[component_of[n]])
        .collect())
}

/// The order the planner sorts for `targets`: [`deletion_order`] and the orders the targets'
/// cascade victims impose. A reported [`Cycle`] is a cycle of this graph.
pub fn planning_order(graph: &Graph, targets: &HashSet<usize>) -> DiGraph<usize, ()> {
    let mut order = deletion_order(graph);
    add_victim_orders(graph, targets, &mut order);
    order
}

/// Adds the orders the cascade victims of the targets impose ([`Graph::victim_orders`]: the
/// Namespace or CRD that takes a victim goes before what the victim needs). One that would close
/// a cycle — a victim that needs what its own Namespace holds — is left out with a warning: no
/// order of waves helps it.
fn add_victim_orders(graph: &Graph, targets: &HashSet<usize>, order: &mut DiGraph<usize, ()>) -> Vec<String> {
    let orders = graph.victim_orders(targets);
    let mut unsatisfied: Vec<String> = graph
        .needs_its_taker(targets)
        .into_iter()
        .map(|(victim, needed, taker)| {
            let (victim, needed, taker) = (&graph.nodes[victim].id, &graph.nodes[needed].id, &graph.nodes[taker].id);
            let told = match needed == taker {
                true => format!(
                    "{victim} dies with {taker}, which finalizes it (inferred: finalizer): the garbage collector deletes it only once {taker} is gone, so it may hang on its finalizers; delete {victim} first, or keep {taker}"
                ),
                false => format!(
                    "{victim} and {needed}, which finalizes it (inferred: finalizer), both die with {taker}: the garbage collector deletes them together, so it may hang on its finalizers; delete {victim} first, or keep {taker}"
                ),
            };
            tracing::warn!("{told}");
            told
        })
        .collect();
    if orders.is_empty() {
        return unsatisfied;
    }
    let mut space = DfsSpace::new(&*order);
    for o in orders {
        let (before, after) = (NodeIndex::new(o.before), NodeIndex::new(o.after));
        if has_path_connecting(&*order, after, before, Some(&mut space)) {
            let told = format!(
                "{} goes with {} and {} ({}), but {} cannot be gone before {} is deleted: it may hang on its finalizers",
                graph.nodes[o.victim].id,
                graph.nodes[o.holder].id,
                if o.holder == o.before { "needs what a later wave deletes" } else { "is needed by what an earlier wave deletes" },
                o.kind.label(),
                graph.nodes[o.before].id,
                graph.nodes[o.after].id,
            );
            tracing::warn!("{told}");
            unsatisfied.push(told);
        } else {
            order.add_edge(before, after, ());
        }
    }
    unsatisfied.sort();
    unsatisfied.dedup();
    unsatisfied
}

/// The apply order: the deletion waves reversed.
pub fn plan_apply(graph: &Graph, targets: &HashSet<usize>) -> Result<Waves, Cycle> {
    let mut plan = plan_deletion(graph, targets)?;
    plan.waves.reverse();
    Ok(plan)
}

/// Finds a cycle through `start`: the shortest walk (breadth first, inside the strongly
/// connected component that holds it) from `start` back to it. In a strongly connected
/// component that walk always exists, so every step of the path is an edge of `order`, the path
/// closes, and it passes through `start` (the target a failed plan names).
fn find_cycle(order: &DiGraph<usize, ()>, start: NodeIndex) -> Cycle {
    let component = tarjan_scc(order)
        .into_iter()
        .find(|scc| scc.contains(&start) && (scc.len() > 1 || order.contains_edge(start, start)))
        .unwrap_or_else(|| vec![start]);
    let members: HashSet<NodeIndex> = component.iter().copied().collect();
    let first = start;
    let mut came_from: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = VecDeque::from([first]);
    let mut closing = None;
    while let Some(current) = queue.pop_front() {
        if order.contains_edge(current, first) {
            closing = Some(current);
            break;
        }
        for next in order.neighbors(current).filter(|n| members.contains(n)) {
            if next != first && !came_from.contains_key(&next) {
                came_from.insert(next, current);
                queue.push_back(next);
            }
        }
    }
    let mut path = Vec::new();
    let mut step = closing;
    while let Some(node) = step {
        path.push(order[node]);
        step = if node == first {
            None
        } else {
            came_from.get(&node).copied()
        };
    }
    if path.is_empty() {
        path.push(order[first]);
    }
    path.reverse();
    Cycle { path }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{build, BuildOptions, NodeInput};
    use crate::model::identity::ObjectId;

    fn cm(name: &str, depends_on: &[&str]) -> NodeInput {
        let mut input = NodeInput {
            id: ObjectId::new("", "ConfigMap", Some("t"), name),
            ..Default::default()
        };
        if !depends_on.is_empty() {
            let refs: Vec<String> = depends_on
                .iter()
                .map(|d| format!("/namespaces/t/ConfigMap/{d}"))
                .collect();
            input
                .annotations_mut()
                .insert(crate::graph::KPT_DEPENDS_ON.into(), refs.join(","));
        }
        input
    }

    fn names(graph: &Graph, plan: &Waves) -> Vec<Vec<String>> {
        plan.waves
            .iter()
            .map(|w| w.iter().map(|i| graph.nodes[*i].id.name.clone()).collect())
            .collect()
    }

    fn all(graph: &Graph) -> HashSet<usize> {
        (0..graph.nodes.len()).collect()
    }

    #[test]
    fn dependents_are_deleted_first() {
        // app -> db -> storage; cache independent.
        let graph = build(
            &[
                cm("storage", &[]),
                cm("db", &["storage"]),
                cm("app", &["db"]),
                cm("cache", &[]),
            ],
            &BuildOptions::default(),
        );
        let plan = plan_deletion(&graph, &all(&graph)).unwrap();
        assert_eq!(
            names(&graph, &plan),
            vec![vec!["app", "cache"], vec!["db"], vec!["storage"]]
        );
        let apply = plan_apply(&graph, &all(&graph)).unwrap();
        assert_eq!(names(&graph, &apply)[0], vec!["storage"]);
    }

    #[test]
    fn a_diamond_waits_for_both_sides() {
        let graph = build(
            &[
                cm("base", &[]),
                cm("left", &["base"]),
                cm("right", &["base"]),
                cm("top", &["left", "right"]),
                cm("slow", &["top"]),
            ],
            &BuildOptions::default(),
        );
        let plan = plan_deletion(&graph, &all(&graph)).unwrap();
        assert_eq!(
            names(&graph, &plan),
            vec![vec!["slow"], vec!["top"], vec!["left", "right"], vec!["base"]]
        );
    }

    #[test]
    fn cycles_are_reported_as_a_path() {
        let graph = build(
            &[cm("a", &["b"]), cm("b", &["c"]), cm("c", &["a"]), cm("d", &[])],
            &BuildOptions::default(),
        );
        let cycle = plan_deletion(&graph, &all(&graph)).unwrap_err();
        let mut path: Vec<String> = cycle.path.iter().map(|i| graph.nodes[*i].id.name.clone()).collect();
        assert_eq!(path.len(), 3);
        path.sort();
        assert_eq!(path, vec!["a", "b", "c"]);
        // The path really is a cycle: each depends on the next.
        for pair in cycle
            .path
            .windows(2)
            .chain(std::iter::once(&[cycle.path[2], cycle.path[0]][..]))
        {
            assert!(
                graph.edges.iter().any(|e| e.from == pair[0] && e.to == pair[1]),
                "{pair:?}"
            );
        }
    }

    #[test]
    fn self_dependency_is_a_cycle() {
        let graph = build(&[cm("a", &["a"])], &BuildOptions::default());
        assert_eq!(plan_deletion(&graph, &all(&graph)).unwrap_err().path, vec![0]);
    }

    #[test]
    fn order_passes_through_objects_outside_the_targets() {
        let graph = build(
            &[cm("a", &["x"]), cm("x", &["b"]), cm("b", &[])],
            &BuildOptions::default(),
        );
        let targets: HashSet<usize> = [0, 2].into_iter().collect();
        let plan = plan_deletion(&graph, &targets).unwrap();
        assert_eq!(names(&graph, &plan), vec![vec!["a"], vec!["b"]]);
    }

    #[test]
    fn missing_and_external_dependencies_are_nodes_not_waves() {
        let mut graph = build(&[cm("a", &["gone"]), cm("b", &[])], &BuildOptions::default());
        graph.mark_referenced(|_| false);
        assert_eq!(graph.referenced().count(), 1);
        let targets: HashSet<usize> = [0, 1].into_iter().collect();
        let plan = plan_deletion(&graph, &targets).unwrap();
        assert_eq!(names(&graph, &plan), vec![vec!["a", "b"]]);
    }

    #[test]
    fn stacks_go_whole_in_dependency_order_tracker_last() {
        let ks = |name: &str, deps: &[&str]| {
            let mut input = NodeInput {
                id: ObjectId::new(
                    "kustomize.toolkit.fluxcd.io",
                    "Kustomization",
                    Some("flux-system"),
                    name,
                ),
                ..Default::default()
            };
            input.depends_on = deps
                .iter()
                .map(|d| ObjectId::new("kustomize.toolkit.fluxcd.io", "Kustomization", Some("flux-system"), d))
                .collect();
            input
        };
        let member = |name: &str, stack: &str| {
            let mut input = NodeInput {
                id: ObjectId::new("", "ConfigMap", Some("shop"), name),
                ..Default::default()
            };
            input
                .labels_mut()
                .insert("kustomize.toolkit.fluxcd.io/name".into(), stack.into());
            input
                .labels_mut()
                .insert("kustomize.toolkit.fluxcd.io/namespace".into(), "flux-system".into());
            input
        };
        let graph = build(
            &[
                ks("usage", &["operator"]),
                ks("operator", &[]),
                member("cr", "usage"),
                member("controller", "operator"),
            ],
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        let plan = plan_deletion(&graph, &all(&graph)).unwrap();
        assert_eq!(
            names(&graph, &plan),
            vec![vec!["cr"], vec!["usage"], vec!["controller"], vec!["operator"]]
        );
    }

    /// Order review 14, F1: Argo CD deletes a later sync wave's Application, and with its
    /// resources finalizer everything it holds, before an earlier wave's (app of apps): the
    /// earlier Application's members go after the later one.
    #[test]
    fn an_earlier_sync_waves_application_keeps_its_members_until_the_later_one_is_gone() {
        let tracked = |group: &str, kind: &str, ns: &str, name: &str, app: &str, wave: Option<&str>| {
            let mut input = NodeInput {
                id: ObjectId::new(group, kind, Some(ns), name),
                ..Default::default()
            };
            let id = format!("{app}:{group}/{kind}:{ns}/{name}");
            input
                .annotations_mut()
                .insert("argocd.argoproj.io/tracking-id".into(), id);
            if let Some(wave) = wave {
                input
                    .annotations_mut()
                    .insert(crate::graph::ARGO_SYNC_WAVE.into(), wave.into());
            }
            input
        };
        let root = NodeInput {
            id: ObjectId::new("argoproj.io", "Application", Some("argocd"), "root"),
            ..Default::default()
        };
        let graph = build(
            &[
                root,
                tracked("argoproj.io", "Application", "argocd", "infra", "root", Some("0")),
                tracked("argoproj.io", "Application", "argocd", "apps", "root", Some("1")),
                tracked("", "Secret", "shop", "creds", "infra", None),
                tracked("", "ConfigMap", "shop", "bucket", "apps", None),
            ],
            &BuildOptions {
                members: true,
                ..Default::default()
            },
        );
        let plan = plan_deletion(&graph, &all(&graph)).unwrap();
        let wave = |name: &str| {
            plan.waves
                .iter()
                .position(|w| w.iter().any(|&i| graph.nodes[i].id.name == name))
                .unwrap()
        };
        assert!(wave("bucket") < wave("apps"), "{:?}", names(&graph, &plan));
        assert!(wave("apps") < wave("creds"), "{:?}", names(&graph, &plan));
        assert!(wave("creds") < wave("infra"), "{:?}", names(&graph, &plan));
    }

    #[test]
    fn cross_namespace_depends_on() {
        let ks = |ns: &str, name: &str, dep: Option<(&str, &str)>| {
            let mut input = NodeInput {
                id: ObjectId::new("kustomize.toolkit.fluxcd.io", "Kustomization", Some(ns), name),
                ..Default::default()
            };
            let body = match dep {
                Some((dep_ns, dep_name)) => {
                    serde_json::json!({"spec": {"dependsOn": [{"name": dep_name, "namespace": dep_ns}]}})
                }
                None => serde_json::json!({}),
            };
            input.depends_on = NodeInput::flux_depends_on(&input.id, &body);
            input
        };
        let graph = build(
            &[ks("team-a", "app", Some(("infra", "db"))), ks("infra", "db", None)],
            &BuildOptions::default(),
        );
        let plan = plan_deletion(&graph, &all(&graph)).unwrap();
        assert_eq!(names(&graph, &plan), vec![vec!["app"], vec!["db"]]);
    }

    /// Issue 25, item 1a: a cycle among objects the plan does not delete fails nothing, and
    /// what passes through it is still ordered.
    #[test]
    fn a_cycle_outside_the_targets_fails_nothing_and_still_orders_through() {
        // p <-> q is a cycle; x needs p, q needs y: x goes before y through the cycle.
        let graph = build(
            &[
                cm("p", &["q"]),
                cm("q", &["p", "y"]),
                cm("x", &["p"]),
                cm("y", &[]),
                cm("z", &[]),
            ],
            &BuildOptions::default(),
        );
        let targets: HashSet<usize> = ["x", "y", "z"]
            .iter()
            .filter_map(|n| graph.find(&ObjectId::new("", "ConfigMap", Some("t"), n)))
            .collect();
        let plan = plan_deletion(&graph, &targets).unwrap();
        assert_eq!(names(&graph, &plan), vec![vec!["x", "z"], vec!["y"]]);
    }

    /// A cycle that holds a target fails, and the reported path passes through a target.
    #[test]
    fn a_cycle_through_a_target_is_reported_through_it() {
        let graph = build(
            &[cm("a", &["b"]), cm("b", &["c"]), cm("c", &["b"]), cm("d", &[])],
            &BuildOptions::default(),
        );
        let c = graph.find(&ObjectId::new("", "ConfigMap", Some("t"), "c")).unwrap();
        let d = graph.find(&ObjectId::new("", "ConfigMap", Some("t"), "d")).unwrap();
        let cycle = plan_deletion(&graph, &[c, d].into_iter().collect()).unwrap_err();
        assert!(cycle.path.contains(&c), "{cycle:?}");
        assert_eq!(cycle.path.len(), 2, "{cycle:?}");
    }

    /// Issue 25, item 1b: a kpt package that holds the Namespace its own inventory lives in.
    /// `kpt live destroy` deletes the members (the ConfigMap before its Namespace), then the
    /// Namespace, then the inventory (which the Namespace already took): no cycle.
    #[test]
    fn a_kpt_inventory_goes_after_the_namespace_it_lives_in_and_tracks() {
        let owned = |input: &mut NodeInput| {
            input
                .annotations_mut()
                .insert("config.k8s.io/owning-inventory".into(), "inv-home".into());
        };
        let mut inventory = NodeInput {
            id: ObjectId::new("kpt.dev", "ResourceGroup", Some("home"), "inventory"),
            ..Default::default()
        };
        inventory
            .labels_mut()
            .insert("cli-utils.sigs.k8s.io/inventory-id".into(), "inv-home".into());
        let mut namespace = NodeInput {
            id: ObjectId::new("", "Namespace", None, "home"),
            ..Default::default()
        };
        owned(&mut namespace);
        let mut config_map = NodeInput {
            id: ObjectId::new("", "ConfigMap", Some("home"), "a"),
            ..Default::default()
        };
        owned(&mut config_map);
        let options = BuildOptions {
            members: true,
            ..Default::default()
        };
        let graph = build(&[inventory, namespace, config_map], &options);
        let plan = plan_deletion(&graph, &all(&graph)).unwrap();
        assert_eq!(names(&graph, &plan), vec![vec!["a"], vec!["home"], vec!["inventory"]]);
    }

    /// A component whose walk can run into a dead end (1 -> 2 -> 1 while 3 closes the cycle):
    /// every step of the reported cycle is an edge, whatever the nodes' indices and the order of
    /// the edges (both decide where a walk starts and which way it turns).
    #[test]
    fn a_reported_cycle_is_made_of_edges_and_closes() {
        let edges = [(0, 1), (1, 2), (2, 1), (1, 3), (3, 0)];
        let labellings = [
            [0, 1, 2, 3],
            [1, 2, 3, 0],
            [2, 3, 0, 1],
            [3, 0, 1, 2],
            [3, 2, 1, 0],
            [0, 3, 2, 1],
            [2, 0, 3, 1],
        ];
        for label in labellings {
            for reversed in [false, true] {
                let mut order: DiGraph<usize, ()> = DiGraph::new();
                let nodes: Vec<NodeIndex> = (0..4).map(|i| order.add_node(i)).collect();
                let mut listed = edges.to_vec();
                if reversed {
                    listed.reverse();
                }
                for (a, b) in listed {
                    order.add_edge(nodes[label[a]], nodes[label[b]], ());
                }
                let cycle = find_cycle(&order, nodes[label[2]]);
                assert!(cycle.path.len() >= 2, "{cycle:?}");
                for (i, &node) in cycle.path.iter().enumerate() {
                    let next = cycle.path[(i + 1) % cycle.path.len()];
                    assert!(
                        order.contains_edge(nodes[node], nodes[next]),
                        "{node} -> {next} in {cycle:?}"
                    );
                }
            }
        }
    }
}
