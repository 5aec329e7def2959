//! Cascade victims as nodes: what a planned Namespace or CRD takes with it although the plan
//! does not delete it (see `prune::cascade`). They never join a plan. A victim dies when a
//! planned Namespace or CRD it lives in is deleted, and stays otherwise; what dies goes before
//! what it needs, victims included, so the holder that takes a victim is ordered by the victim's
//! edges.

use std::collections::{HashMap, HashSet};

use super::{EdgeKind, Graph, Owner};

/// Adds to `entry` each of `takers` it lacks; whether any was new.
fn add_takers(entry: &mut Vec<usize>, takers: &[usize]) -> bool {
    let mut grown = false;
    for &taker in takers {
        if !entry.contains(&taker) {
            entry.push(taker);
            grown = true;
        }
    }
    grown
}

/// An order a cascade victim imposes on two planned nodes: `before` is gone before `after` is
/// deleted. Either the victim needs `after` and `holder` (= `before`) takes it, or `before`
/// needs the victim and `holder` (= `after`) takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct VictimOrder {
    /// What goes first.
    pub before: usize,
    /// What is deleted once `before` is gone.
    pub after: usize,
    /// The victim.
    pub victim: usize,
    /// The planned Namespace or CRD that takes it.
    pub holder: usize,
    /// The victim's edge.
    pub kind: EdgeKind,
    /// What the victim needs, when that dies too, taken by `after` (order review 19, H): the
    /// custom resource one planned owner takes needs the operator another planned owner takes.
    pub needed: Option<usize>,
}

impl Graph {
    /// The cascade victims ([`Graph::victims`]) that die with the plan, each with the planned
    /// Namespaces and CRDs (`planned`) whose deletion takes it: the targets of its structural
    /// edges. A victim none of whose holders is planned stays; any other node is never taken
    /// (what a stack tracks keeps its Namespace or CRD instead). One pass over the edges.
    ///
    /// A node that dies by ownership ([`Graph::dying_by_owners`]) is a victim too, taken by its
    /// planned owners (or by the holders of its owners that are victims).
    pub fn dying_victims(&self, planned: impl Fn(usize) -> bool) -> HashMap<usize, Vec<usize>> {
        let mut held = self.held_victims(&planned);
        // A Namespace or CRD that dies unplanned takes its content too, and what that owns
        // (review 16, F1 and F3): grown until nothing more dies.
        loop {
            let dying = self.dying_with(&planned, &held);
            if !self.hold_content_of(&dying, &planned, &mut held) {
                return dying;
            }
        }
    }

    /// Adds to `held` the victims a dying victim Namespace or CRD (`dying`) holds, taken by the
    /// planned objects that take it; whether any was new.
    fn hold_content_of(
        &self,
        dying: &HashMap<usize, Vec<usize>>,
        planned: &dyn Fn(usize) -> bool,
        held: &mut HashMap<usize, Vec<usize>>,
    ) -> bool {
        let mut grown = false;
        for edge in &self.edges {
            if !matches!(edge.kind, EdgeKind::Namespace | EdgeKind::Crd)
                || planned(edge.from)
                || planned(edge.to)
                || !self.victims.contains(&edge.from)
            {
                continue;
            }
            let Some(takers) = dying.get(&edge.to) else { continue };
            grown |= add_takers(held.entry(edge.from).or_default(), takers);
        }
        // A volume the PV controller reclaims once a claim that dies unplanned is gone (a planned
        // owner's child) is held by that claim's takers (order review 28, F2).
        for edge in self.needs() {
            if edge.kind != EdgeKind::InferredVolume || planned(edge.to) || !self.victims.contains(&edge.to) {
                continue;
            }
            let Some(takers) = dying.get(&edge.from) else { continue };
            grown |= add_takers(held.entry(edge.to).or_default(), takers);
        }
        grown
    }

    /// What dies with the plan given the victims `held` by dying Namespaces and CRDs: by
    /// ownership or held, each with the planned objects that take it.
    fn dying_with(
        &self,
        planned: &dyn Fn(usize) -> bool,
        held: &HashMap<usize, Vec<usize>>,
    ) -> HashMap<usize, Vec<usize>> {
        let held = held.clone();
        let mut dying = self.owned_victims(planned, &held);
        // What dies by ownership is taken by a planned Namespace or CRD it lives in as well,
        // whichever goes first: both take it.
        for edge in &self.edges {
            if matches!(edge.kind, EdgeKind::Namespace | EdgeKind::Crd) && planned(edge.to) {
                if let Some(holders) = dying.get_mut(&edge.from) {
                    holders.push(edge.to);
                }
            }
        }
        for (victim, holders) in held {
            let all = dying.entry(victim).or_default();
            all.extend(holders);
            all.sort_unstable();
            all.dedup();
        }
        dying
    }

    /// The cascade victims of the planned Namespaces and CRDs, each with those that take it.
    fn held_victims(&self, planned: &dyn Fn(usize) -> bool) -> HashMap<usize, Vec<usize>> {
        let mut dying: HashMap<usize, Vec<usize>> = HashMap::new();
        if self.victims.is_empty() {
            return dying;
        }
        for edge in &self.edges {
            if matches!(edge.kind, EdgeKind::Namespace | EdgeKind::Crd)
                && self.victims.contains(&edge.from)
                && planned(edge.to)
            {
                dying.entry(edge.from).or_default().push(edge.to);
            }
        }
        // A dying volume (a victim node: the PV controller reclaims it once its claim is gone) is
        // held by its claim, planned or held so in turn (order review 27, F1).
        for edge in self.needs() {
            if edge.kind != EdgeKind::InferredVolume || !self.victims.contains(&edge.to) {
                continue;
            }
            let holders = match planned(edge.from) {
                true => vec![edge.from],
                false => dying.get(&edge.from).cloned().unwrap_or_default(),
            };
            if !holders.is_empty() {
                dying.entry(edge.to).or_default().extend(holders);
            }
        }
        dying
    }

    /// The nodes, not planned themselves, that die with the plan by ownership, as the garbage
    /// collector decides: every owner is planned, a cascade victim of a planned Namespace or CRD,
    /// or dies so in turn ([`Graph::owners`]; an owner that is no node counts as live, an
    /// ownership cycle proves nothing). Each with the planned objects whose deletion takes it.
    ///
    /// With `--cascade=orphan` ([`Graph::orphan_dependents`]) a planned owner takes nothing:
    /// the garbage collector removes its reference, so it is no owner any more, and what has no
    /// other owner stays. A Namespace's or CRD's content still dies with it (its controller
    /// deletes it whatever the policy the Namespace or CRD was deleted with), and so does what
    /// every remaining owner of which is such content.
    pub fn dying_by_owners(&self, planned: impl Fn(usize) -> bool) -> HashMap<usize, Vec<usize>> {
        let held = self.held_victims(&planned);
        self.owned_victims(&planned, &held)
    }

    fn owned_victims(
        &self,
        planned: &dyn Fn(usize) -> bool,
        held: &HashMap<usize, Vec<usize>>,
    ) -> HashMap<usize, Vec<usize>> {
        let chain = OwnerChain {
            graph: self,
            planned,
            held,
            by_uid: self.outside_uids(),
        };
        self.owners
            .keys()
            .filter(|&&index| !planned(index))
            .filter_map(|&index| {
                let mut roots = chain.planned_owners(&Owner::Node(index), &mut HashSet::new())?;
                roots.sort_unstable();
                roots.dedup();
                Some((index, roots))
            })
            .collect()
    }

    /// Sets the owners of a node built without them (a referenced node, whose metadata was read
    /// after the build): `owners` are UIDs, matched to the nodes by theirs.
    pub fn set_owners(&mut self, index: usize, owners: &[String]) {
        if owners.is_empty() {
            return;
        }
        let found = owners
            .iter()
            .map(
                |uid| match self.nodes.iter().position(|n| n.uid.as_deref() == Some(uid.as_str())) {
                    Some(node) => Owner::Node(node),
                    None => Owner::Outside(uid.clone()),
                },
            )
            .collect();
        self.owners.insert(index, found);
    }

    /// Rule "what dies goes before what it needs", for the cascade victims: a victim is deleted
    /// through the planned Namespace or CRD that takes it, so that holder goes before every
    /// planned object the victim needs (a CRD before the operator its custom resources'
    /// finalizer names), and every planned object that needs the victim goes before the holder.
    /// Every edge orders (as in [`crate::graph::plan::deletion_order`]).
    pub fn victim_orders(&self, planned: &HashSet<usize>) -> Vec<VictimOrder> {
        let holders = self.dying_victims(|index| planned.contains(&index));
        let mut found = Vec::new();
        for edge in self.all_edges() {
            if let Some(taken_by) = holders.get(&edge.from) {
                if planned.contains(&edge.to) && !taken_by.contains(&edge.to) {
                    found.extend(taken_by.iter().map(|&holder| VictimOrder {
                        before: holder,
                        after: edge.to,
                        victim: edge.from,
                        holder,
                        kind: edge.kind,
                        needed: None,
                    }));
                }
            }
            if let Some(taken_by) = holders.get(&edge.to) {
                if planned.contains(&edge.from) {
                    found.extend(
                        taken_by
                            .iter()
                            .filter(|&&holder| holder != edge.from)
                            .map(|&holder| VictimOrder {
                                before: edge.from,
                                after: holder,
                                victim: edge.to,
                                holder,
                                kind: edge.kind,
                                needed: None,
                            }),
                    );
                }
            }
        }
        found.extend(self.early_orders(planned));
        found.extend(self.dying_need_orders(planned, &holders));
        found.sort();
        found.dedup();
        found
    }

    /// What no order of waves can help (order review 20, V; review 22, F2): a node that dies
    /// with the plan (through its owners, its Namespace or its CRD) and carries the finalizer of
    /// an operator the same planned deletion takes — the operator itself when planned (its
    /// Deployment controller-owns the custom resource), or its planned owner (a planned object
    /// controls the operator, and the operator the resource). The garbage collector deletes them
    /// together, and nothing may be left to finalize it. Each as (the node, the operator it
    /// needs, the planned object whose deletion takes both).
    pub fn needs_its_taker(&self, planned: &HashSet<usize>) -> Vec<(usize, usize, usize)> {
        let holders = self.dying_victims(|index| planned.contains(&index));
        if holders.is_empty() {
            return Vec::new();
        }
        let early = self.early_takers(planned);
        let takers = |index: usize| -> Vec<usize> {
            let dying = holders.get(&index).or_else(|| early.get(&index)).into_iter().flatten();
            planned.get(&index).into_iter().chain(dying).copied().collect()
        };
        let mut found: Vec<(usize, usize, usize)> = self
            .needs()
            .filter(|edge| edge.kind == EdgeKind::InferredFinalizer)
            .filter_map(|edge| {
                let of_victim = holders.get(&edge.from)?;
                let taker = takers(edge.to).into_iter().find(|taker| of_victim.contains(taker))?;
                Some((edge.from, edge.to, taker))
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Rule "what dies goes before what it needs", for planned nodes the garbage collector takes
    /// before their own wave: an operator Deployment owned by a planned object of an earlier wave
    /// (OLM's ClusterServiceVersion) dies with that owner, so every planned object that needs it
    /// goes before the owner (order review 5, finding 2).
    /// The planned nodes that die before their own wave, each with the planned objects whose
    /// deletion takes them: through their owners (an operator Deployment a planned
    /// ClusterServiceVersion owns), or with a Namespace or CRD that dies unplanned (an operator
    /// in the Namespace a planned tenant made).
    pub fn early_takers(&self, planned: &HashSet<usize>) -> HashMap<usize, Vec<usize>> {
        if !self.owners.keys().any(|index| planned.contains(index)) && self.victims.is_empty() {
            return HashMap::new();
        }
        let is_planned = |index: usize| planned.contains(&index);
        let held = self.held_victims(&is_planned);
        let chain = OwnerChain {
            graph: self,
            planned: &is_planned,
            held: &held,
            by_uid: self.outside_uids(),
        };
        let mut early: HashMap<usize, Vec<usize>> = self
            .owners
            .keys()
            .filter(|index| planned.contains(index))
            .filter_map(|&index| {
                let roots = chain.planned_owners(&Owner::Node(index), &mut HashSet::new())?;
                let roots: Vec<usize> = roots.into_iter().filter(|&root| root != index).collect();
                (!roots.is_empty()).then_some((index, roots))
            })
            .collect();
        // A planned object in a Namespace (or of a CRD) that dies unplanned dies with it, before
        // its own wave (review 16, F3: an operator in a tenant's Namespace).
        let dying = self.dying_victims(is_planned);
        for edge in &self.edges {
            if !matches!(edge.kind, EdgeKind::Namespace | EdgeKind::Crd) || !planned.contains(&edge.from) {
                continue;
            }
            let Some(takers) = dying.get(&edge.to).filter(|_| !planned.contains(&edge.to)) else {
                continue;
            };
            let roots = early.entry(edge.from).or_default();
            roots.extend(takers.iter().filter(|&&taker| taker != edge.from));
            roots.sort_unstable();
            roots.dedup();
        }
        early.retain(|_, roots| !roots.is_empty());
        early
    }

    /// Rule "what dies goes before what it needs", where both die before their own waves or
    /// with no wave of their own (order review 19, H1 and H3): a custom resource taken by one
    /// planned object (its owner, its Namespace, its CRD) that needs an operator another planned
    /// object takes, or that dies with a planned Namespace before its own wave. What takes the
    /// one that needs goes before what takes the one needed, unless the same deletion takes both.
    fn dying_need_orders(&self, planned: &HashSet<usize>, holders: &HashMap<usize, Vec<usize>>) -> Vec<VictimOrder> {
        let early = self.early_takers(planned);
        let takers = |index: usize| holders.get(&index).or_else(|| early.get(&index));
        let mut found = Vec::new();
        for edge in self.all_edges() {
            let (Some(first), Some(second)) = (takers(edge.from), takers(edge.to)) else {
                continue;
            };
            for &before in first {
                for &after in second {
                    if before == after || first.contains(&after) || second.contains(&before) {
                        continue;
                    }
                    found.push(VictimOrder {
                        before,
                        after,
                        victim: edge.from,
                        holder: before,
                        kind: edge.kind,
                        needed: Some(edge.to),
                    });
                }
            }
        }
        found
    }

    fn early_orders(&self, planned: &HashSet<usize>) -> Vec<VictimOrder> {
        let early = self.early_takers(planned);
        if early.is_empty() {
            return Vec::new();
        }
        let mut found = Vec::new();
        for edge in self.all_edges().filter(|e| planned.contains(&e.from)) {
            let Some(owners) = early.get(&edge.to) else { continue };
            found.extend(
                owners
                    .iter()
                    .filter(|&&owner| owner != edge.from)
                    .map(|&owner| VictimOrder {
                        before: edge.from,
                        after: owner,
                        victim: edge.to,
                        holder: owner,
                        kind: edge.kind,
                        needed: None,
                    }),
            );
        }
        found
    }

    /// The node of each UID, as the owners of objects that are no nodes are resolved (empty
    /// when there are none: the graph's own owners are resolved already).
    fn outside_uids(&self) -> HashMap<&str, usize> {
        if self.outside_owners.is_empty() {
            return HashMap::new();
        }
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(index, node)| node.uid.as_deref().map(|uid| (uid, index)))
            .collect()
    }

    /// Why a planned node goes before another because of a cascade victim (see
    /// [`Graph::victim_orders`]), e.g. `before Deployment.apps/op/ctl (its deletion takes
    /// Gizmo.example.com/app/g, which needs it: inferred: finalizer)`, with how many more.
    pub fn victim_reason(&self, index: usize, planned: &HashSet<usize>) -> Option<String> {
        let mut found: Vec<VictimOrder> = self
            .victim_orders(planned)
            .into_iter()
            .filter(|o| o.before == index)
            .collect();
        found.sort_by(|a, b| self.nodes[a.after].id.cmp(&self.nodes[b.after].id));
        found.dedup_by_key(|o| o.after);
        let first = found.first()?;
        let (after, victim) = (&self.nodes[first.after].id, &self.nodes[first.victim].id);
        let how = if let Some(needed) = first.needed {
            let needed = &self.nodes[needed].id;
            format!("its deletion takes {victim}, which needs {needed}, which that deletion takes")
        } else if first.holder == index {
            format!("its deletion takes {victim}, which needs it")
        } else {
            format!("that deletion takes {victim}, which it needs")
        };
        let more = match found.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        Some(format!("before {after} ({how}: {}){more}", first.kind.label()))
    }
}

/// The garbage collector's all-owners rule over the graph's owners and the owners of the
/// objects between them that are no nodes ([`Graph::outside_owners`]).
struct OwnerChain<'a> {
    graph: &'a Graph,
    planned: &'a dyn Fn(usize) -> bool,
    held: &'a HashMap<usize, Vec<usize>>,
    by_uid: HashMap<&'a str, usize>,
}

impl OwnerChain<'_> {
    /// The owners of a node, or of an object that is no node, as far as they are known.
    fn owners_of(&self, owned: &Owner) -> Option<Vec<Owner>> {
        match owned {
            Owner::Node(index) => self.graph.owners.get(index).cloned(),
            Owner::Outside(uid) => self.graph.outside_owners.get(uid).map(|owners| {
                owners
                    .iter()
                    .map(|uid| match self.by_uid.get(uid.as_str()) {
                        Some(&node) => Owner::Node(node),
                        None => Owner::Outside(uid.clone()),
                    })
                    .collect()
            }),
        }
    }

    /// Whether the garbage collector never deletes `owned` by its owners: a cluster-scoped node
    /// with a namespaced node among its owners (the rule of
    /// `never_collected` of the prune layer's owner cascades, which the owned listings apply, read
    /// here from the nodes' identities). An owner that is no node proves nothing here: one of
    /// the wrong scope is never read, and counts as live.
    fn never_collected(&self, owned: &Owner, owners: &[Owner]) -> bool {
        let cluster_scoped = |node: usize| self.graph.nodes[node].id.namespace.is_none();
        matches!(owned, Owner::Node(node) if cluster_scoped(*node))
            && owners
                .iter()
                .any(|owner| matches!(owner, Owner::Node(node) if !cluster_scoped(*node)))
    }

    /// The planned objects whose deletion takes `owned` through its owners (see
    /// [`Graph::dying_by_owners`]); `None` when it has no known owner or one of its owners lives.
    /// An ownership cycle proves nothing.
    fn planned_owners(&self, owned: &Owner, on_path: &mut HashSet<Owner>) -> Option<Vec<usize>> {
        let mut owners = self.owners_of(owned)?;
        if self.never_collected(owned, &owners) {
            return None;
        }
        if self.graph.orphan_dependents {
            // Deleted with propagation policy `Orphan`, a planned owner leaves its dependents:
            // the garbage collector removes its reference from them.
            owners.retain(|owner| !matches!(owner, Owner::Node(node) if (self.planned)(*node)));
        }
        if owners.is_empty() {
            return None;
        }
        if !on_path.insert(owned.clone()) {
            return None;
        }
        let mut roots = Some(Vec::new());
        for owner in &owners {
            let found = match owner {
                // A planned owner, or a victim a planned Namespace or CRD holds, goes with its own
                // planned owners too, whichever comes first: each of them takes what it owns.
                Owner::Node(node) if (self.planned)(*node) || self.held.contains_key(node) => {
                    let mut takers = match (self.planned)(*node) {
                        true => vec![*node],
                        false => self.held.get(node).cloned().unwrap_or_default(),
                    };
                    takers.extend(self.planned_owners(owner, on_path).unwrap_or_default());
                    Some(takers)
                }
                other => self.planned_owners(other, on_path),
            };
            match (found, roots.as_mut()) {
                (Some(found), Some(roots)) => roots.extend(found),
                _ => {
                    roots = None;
                    break;
                }
            }
        }
        on_path.remove(owned);
        roots
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::plan::plan_deletion;
    use crate::graph::{build, BuildOptions, NodeInput};
    use crate::model::identity::ObjectId;

    const CRD: &str = "apiextensions.k8s.io";

    fn input(group: &str, kind: &str, namespace: Option<&str>, name: &str, stack: Option<&str>) -> NodeInput {
        let mut input = NodeInput {
            id: ObjectId::new(group, kind, namespace, name),
            ..Default::default()
        };
        if let Some(stack) = stack {
            input
                .labels_mut()
                .insert(crate::model::trackers::FLUX_KS_NAME.into(), stack.into());
            input
                .labels_mut()
                .insert(crate::model::trackers::FLUX_KS_NAMESPACE.into(), "flux-system".into());
        }
        input
    }

    /// Inference on, with the CRD of `Gizmo.example.com` known.
    fn gizmo_options() -> BuildOptions {
        BuildOptions {
            infer: true,
            crd_names: [(
                ("example.com".to_string(), "Gizmo".to_string()),
                "gizmos.example.com".to_string(),
            )]
            .into(),
            ..Default::default()
        }
    }

    /// Stack `op`: a CRD and its operator; `stray`, an untracked custom resource with the
    /// operator's finalizer in a Namespace the plan does not touch.
    fn operator_and_stray(stray_is_victim: bool) -> Graph {
        let mut stray = input("example.com", "Gizmo", Some("app"), "stray", None);
        stray.finalizers.push("example.com/cleanup".into());
        let inputs = [
            input(CRD, "CustomResourceDefinition", None, "gizmos.example.com", Some("op")),
            input("apps", "Deployment", Some("op"), "controller", Some("op")),
            stray,
        ];
        let options = gizmo_options();
        let mut graph = build(&inputs, &options);
        if stray_is_victim {
            graph.victims.insert(2);
        }
        graph
    }

    fn names(graph: &Graph, planned: &HashSet<usize>) -> Vec<Vec<String>> {
        plan_deletion(graph, planned)
            .unwrap()
            .waves
            .iter()
            .map(|w| w.iter().map(|&i| graph.nodes[i].id.name.clone()).collect())
            .collect()
    }

    /// Findings 3 and 4: `child` dies with its only owner `parent` (planned), as the garbage
    /// collector decides; with a second, live owner it does not. What it needs orders `parent`
    /// before it, and a need of something that stays on it keeps `parent`.
    #[test]
    fn what_dies_with_a_planned_owner_is_a_victim_of_it() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let parent = with_uid(input("", "ConfigMap", Some("app"), "parent", Some("a")), "uid-parent");
        let mut child = with_uid(input("", "ConfigMap", Some("app"), "child", None), "uid-child");
        child.owners.push("uid-parent".into());
        child.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "/namespaces/app/ConfigMap/base".into(),
        );
        let base = with_uid(input("", "ConfigMap", Some("app"), "base", Some("a")), "uid-base");
        let mut stayer = with_uid(input("", "ConfigMap", Some("app"), "stayer", Some("b")), "uid-stayer");
        stayer.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "/namespaces/app/ConfigMap/child".into(),
        );
        let graph = build(&[parent, child.clone(), base, stayer], &BuildOptions::default());
        let (parent, child_index, base, stayer) = (0, 1, 2, 3);
        let planned: HashSet<usize> = [parent, base].into();
        let dying = graph.dying_victims(|i| planned.contains(&i));
        assert_eq!(dying.get(&child_index), Some(&vec![parent]));
        let orders = graph.victim_orders(&planned);
        assert!(
            orders
                .iter()
                .any(|o| o.before == parent && o.after == base && o.victim == child_index),
            "{orders:?}"
        );
        let order = plan_deletion(&graph, &planned).unwrap();
        let wave_of = |i: usize| order.waves.iter().position(|w| w.contains(&i));
        assert!(wave_of(parent) < wave_of(base));
        let needed = crate::prune::safeguards::needed_by_staying(&graph, &planned, |i| i == stayer);
        let why = needed.get(&parent).map(ToString::to_string).unwrap_or_default();
        assert!(
            why.contains("needed by ConfigMap/app/stayer") && why.contains("ConfigMap/app/child dies with it"),
            "{why}"
        );

        // A second owner that lives keeps it: it dies with nothing.
        child.owners.push("uid-elsewhere".into());
        let with_live_owner = build(
            &[
                with_uid(input("", "ConfigMap", Some("app"), "parent", Some("a")), "uid-parent"),
                child,
            ],
            &BuildOptions::default(),
        );
        assert!(with_live_owner.dying_by_owners(|i| i == 0).is_empty());
    }

    /// Issue 29's generated worlds: an object dies by every route at once. `leaf` is owned by
    /// `mid` (planned, wave 2 by its own need) which is owned by `root` (planned): the garbage
    /// collector takes `mid`, then `leaf`, with `root`; and `leaf` lives in Namespace `team`,
    /// planned too. What needs `leaf` goes before all three.
    #[test]
    fn what_needs_an_object_goes_before_every_route_that_takes_it() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let root = with_uid(input("", "ConfigMap", Some("app"), "root", Some("a")), "uid-root");
        let mut mid = with_uid(input("", "ConfigMap", Some("app"), "mid", Some("a")), "uid-mid");
        mid.owners.push("uid-root".into());
        let mut leaf = with_uid(input("", "ConfigMap", Some("team"), "leaf", None), "uid-leaf");
        leaf.owners.push("uid-mid".into());
        let team = with_uid(input("", "Namespace", None, "team", Some("a")), "uid-team");
        let mut user = with_uid(input("", "ConfigMap", Some("app"), "user", Some("a")), "uid-user");
        user.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "/namespaces/team/ConfigMap/leaf".into(),
        );
        let graph = build(&[root, mid, leaf, team, user], &BuildOptions::default());
        let (root, mid, leaf, team, user) = (0, 1, 2, 3, 4);
        let planned: HashSet<usize> = [root, mid, team, user].into();
        let mut takers = graph
            .dying_victims(|i| planned.contains(&i))
            .remove(&leaf)
            .unwrap_or_default();
        takers.sort_unstable();
        assert_eq!(takers, vec![root, mid, team]);
        let order = plan_deletion(&graph, &planned).unwrap();
        let wave_of = |i: usize| order.waves.iter().position(|w| w.contains(&i));
        for taker in [root, mid, team] {
            assert!(wave_of(user) < wave_of(taker), "{:?}", order.waves);
        }
    }

    /// Issue 25: with `--cascade=orphan` a planned owner takes nothing by ownership. An
    /// untracked webhook owned by a planned ClusterRole that needs a planned Service stays (the
    /// garbage collector orphans it), so it is no victim, orders nothing, and keeps the Service;
    /// a ConfigMap the ClusterRole owns in a planned Namespace still dies with the Namespace.
    #[test]
    fn with_cascade_orphan_what_a_planned_owner_owns_stays_and_keeps_what_it_needs() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let graph_with = |orphan_dependents: bool| {
            let role = with_uid(
                input(
                    "rbac.authorization.k8s.io",
                    "ClusterRole",
                    None,
                    "t13-admission",
                    Some("kyv"),
                ),
                "uid-role",
            );
            let service = with_uid(input("", "Service", Some("t13"), "kyverno-svc", Some("kyv")), "uid-svc");
            let namespace = with_uid(input("", "Namespace", None, "t13", Some("kyv")), "uid-ns");
            let mut webhook = with_uid(
                input(
                    "admissionregistration.k8s.io",
                    "ValidatingWebhookConfiguration",
                    None,
                    "t13-resource-validate",
                    None,
                ),
                "uid-webhook",
            );
            webhook.owners.push("uid-role".into());
            webhook.annotations_mut().insert(
                crate::graph::KPT_DEPENDS_ON.into(),
                "/namespaces/t13/Service/kyverno-svc".into(),
            );
            let mut content = with_uid(input("", "ConfigMap", Some("t13"), "content", None), "uid-content");
            content.owners.push("uid-role".into());
            let options = BuildOptions {
                orphan_dependents,
                ..Default::default()
            };
            let mut graph = build(&[role, service, namespace, webhook, content], &options);
            graph.victims.insert(4);
            graph
        };
        let (role, service, namespace, webhook, content) = (0, 1, 2, 3, 4);
        let planned: HashSet<usize> = [role, service, namespace].into();

        // Background (the default): the webhook dies with its ClusterRole, which goes before the
        // Service the webhook needs.
        let taking = graph_with(false);
        let dying = taking.dying_victims(|i| planned.contains(&i));
        assert_eq!(dying.get(&webhook), Some(&vec![role]));
        assert_eq!(dying.get(&content), Some(&vec![role, namespace]));
        assert!(taking
            .victim_orders(&planned)
            .iter()
            .any(|o| o.before == role && o.after == service && o.victim == webhook));

        // Orphan: the webhook stays; it keeps the Service, and orders nothing.
        let orphaning = graph_with(true);
        assert!(orphaning.dying_by_owners(|i| planned.contains(&i)).is_empty());
        let dying = orphaning.dying_victims(|i| planned.contains(&i));
        assert_eq!(dying.get(&webhook), None);
        assert_eq!(
            dying.get(&content),
            Some(&vec![namespace]),
            "a Namespace takes its content"
        );
        assert!(!orphaning.victim_orders(&planned).iter().any(|o| o.victim == webhook));
        let needed = crate::prune::safeguards::needed_by_staying(&orphaning, &planned, |i| i == webhook);
        assert!(needed.contains_key(&service), "{needed:?}");
    }

    /// A referenced object (a depends-on target that is no input) lives in its Namespace too.
    #[test]
    fn a_referenced_object_has_its_namespace_edge() {
        let mut user = input("", "ConfigMap", Some("app"), "user", Some("a"));
        user.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "/namespaces/team/ConfigMap/target".into(),
        );
        let graph = build(
            &[user, input("", "Namespace", None, "team", Some("a"))],
            &BuildOptions::default(),
        );
        let target = graph
            .find(&ObjectId::new("", "ConfigMap", Some("team"), "target"))
            .unwrap();
        assert!(graph
            .edges
            .iter()
            .any(|e| e.from == target && e.to == 1 && e.kind == EdgeKind::Namespace));
    }

    /// Order review 5, finding 2: a planned operator Deployment owned by a planned object (OLM's
    /// ClusterServiceVersion) dies with that owner, whatever its own wave: what needs it goes
    /// before the owner.
    #[test]
    fn what_needs_a_planned_object_its_owner_takes_early_goes_before_that_owner() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let csv = with_uid(input("", "ConfigMap", Some("op"), "csv", Some("a")), "uid-csv");
        let mut operator = with_uid(
            input("", "ConfigMap", Some("op"), "operator", Some("a")),
            "uid-operator",
        );
        operator.owners.push("uid-csv".into());
        let mut widget = with_uid(input("", "ConfigMap", Some("op"), "widget", Some("a")), "uid-widget");
        widget.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "/namespaces/op/ConfigMap/operator".into(),
        );
        let graph = build(&[csv, operator, widget], &BuildOptions::default());
        let (csv, operator, widget) = (0, 1, 2);
        let planned: HashSet<usize> = [csv, operator, widget].into();
        let order = plan_deletion(&graph, &planned).unwrap();
        let wave_of = |i: usize| order.waves.iter().position(|w| w.contains(&i));
        assert!(wave_of(widget) < wave_of(csv), "{:?}", order.waves);
        assert!(wave_of(widget) < wave_of(operator), "{:?}", order.waves);
        let why = graph.victim_reason(widget, &planned).unwrap_or_default();
        assert!(
            why.contains("ConfigMap/op/csv") && why.contains("takes ConfigMap/op/operator"),
            "{why}"
        );
    }

    /// Issue 29's F3: a node dies with a planned owner through an owner that is no node (a
    /// ReplicaSet between a Deployment and a Pod), when the graph knows that owner's owners.
    #[test]
    fn an_owner_chain_through_an_object_that_is_no_node_is_followed() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let parent = with_uid(input("", "ConfigMap", Some("app"), "parent", Some("a")), "uid-parent");
        let mut child = with_uid(input("", "ConfigMap", Some("app"), "child", None), "uid-child");
        child.owners.push("uid-middle".into());
        let mut graph = build(&[parent, child], &BuildOptions::default());
        assert!(
            graph.dying_by_owners(|i| i == 0).is_empty(),
            "an unknown owner counts as live"
        );
        graph
            .outside_owners
            .insert("uid-middle".into(), vec!["uid-parent".into()]);
        assert_eq!(graph.dying_by_owners(|i| i == 0).get(&1), Some(&vec![0]));
        graph
            .outside_owners
            .insert("uid-middle".into(), vec!["uid-parent".into(), "uid-live".into()]);
        assert!(graph.dying_by_owners(|i| i == 0).is_empty(), "a second owner lives");
        graph
            .outside_owners
            .insert("uid-middle".into(), vec!["uid-child".into()]);
        assert!(graph.dying_by_owners(|i| i == 0).is_empty(), "a cycle proves nothing");
    }

    /// Order review 32: a cluster-scoped node whose owners include a namespaced node is never
    /// the garbage collector's (`OwnerRefInvalidNamespace`), whatever its other owners; a
    /// cluster-scoped owner takes its cluster-scoped dependent as before.
    #[test]
    fn a_cluster_scoped_node_naming_a_namespaced_owner_never_dies_by_it() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let config_map = with_uid(input("", "ConfigMap", Some("app"), "settings", Some("a")), "uid-cm");
        let namespace = with_uid(input("", "Namespace", None, "owner", Some("a")), "uid-ns");
        let rbac = "rbac.authorization.k8s.io";
        let mut invalid = with_uid(input(rbac, "ClusterRole", None, "invalid", Some("b")), "uid-invalid");
        invalid.owners.push("uid-cm".into());
        let mut valid = with_uid(input(rbac, "ClusterRole", None, "valid", Some("b")), "uid-valid");
        valid.owners.push("uid-ns".into());
        let mut both = with_uid(input(rbac, "ClusterRole", None, "both", Some("b")), "uid-both");
        both.owners.extend(["uid-ns".to_string(), "uid-cm".to_string()]);
        let graph = build(&[config_map, namespace, invalid, valid, both], &BuildOptions::default());
        let dying = graph.dying_by_owners(|i| i < 2);
        let named = |index: usize| graph.nodes[index].id.name.clone();
        let mut names: Vec<String> = dying.keys().map(|&i| named(i)).collect();
        names.sort();
        assert_eq!(names, ["valid"], "{dying:?}");
    }

    #[test]
    fn a_crd_whose_victim_needs_the_operator_goes_before_the_operator() {
        let planned: HashSet<usize> = [0, 1].into();
        // Without the victim as a node, nothing orders them: one wave, and the custom resource
        // the CRD takes hangs on its finalizer once the operator is gone.
        let alone = operator_and_stray(false);
        assert_eq!(names(&alone, &planned), [["gizmos.example.com", "controller"]]);
        assert!(alone.victim_orders(&planned).is_empty());

        let graph = operator_and_stray(true);
        assert_eq!(graph.dying_victims(|i| planned.contains(&i)), [(2, vec![0])].into());
        assert_eq!(names(&graph, &planned), [["gizmos.example.com"], ["controller"]]);
        assert_eq!(
            graph.victim_reason(0, &planned).as_deref(),
            Some("before Deployment.apps/op/controller (its deletion takes Gizmo.example.com/app/stray, which needs it: inferred: finalizer)")
        );
        assert_eq!(graph.victim_reason(1, &planned), None);
        // A CRD the plan keeps takes nothing: the custom resource stays, and orders nothing.
        let only_operator: HashSet<usize> = [1].into();
        assert!(graph.dying_victims(|i| only_operator.contains(&i)).is_empty());
        assert!(graph.victim_orders(&only_operator).is_empty());
    }

    /// Order review 19, H3: planned `owner-a` takes the custom resource `cr` (its only owner),
    /// planned `owner-b` takes the operator `controller` that `cr`'s finalizer names. What takes
    /// the custom resource goes first; apart, nothing orders the two owners.
    #[test]
    fn what_takes_a_victim_goes_before_what_takes_the_victim_it_needs() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let mut cr = with_uid(input("example.com", "Gizmo", Some("app"), "cr", None), "uid-cr");
        cr.finalizers.push("example.com/cleanup".into());
        cr.owners.push("uid-a".into());
        let mut controller = with_uid(
            input("apps", "Deployment", Some("op"), "controller", Some("op")),
            "uid-ctl",
        );
        controller.owners.push("uid-b".into());
        let inputs = [
            with_uid(input("example.com", "Owner", None, "owner-a", Some("s")), "uid-a"),
            with_uid(input("example.com", "Owner", None, "owner-b", Some("s")), "uid-b"),
            cr,
            controller,
            input(CRD, "CustomResourceDefinition", None, "gizmos.example.com", Some("op")),
        ];
        let options = gizmo_options();
        let graph = build(&inputs, &options);
        assert!(
            graph
                .all_edges()
                .any(|e| e.from == 2 && e.to == 3 && e.kind == EdgeKind::InferredFinalizer),
            "{:?}",
            graph.edges
        );
        let planned: HashSet<usize> = [0, 1].into();
        assert_eq!(names(&graph, &planned), [["owner-a"], ["owner-b"]]);
        assert_eq!(
            graph.victim_reason(0, &planned).as_deref(),
            Some("before Owner.example.com/owner-b (its deletion takes Gizmo.example.com/app/cr, which needs Deployment.apps/op/controller, which that deletion takes: inferred: finalizer)")
        );
        // Only one owner planned: the other's victim stays, and nothing is ordered.
        assert!(graph.victim_orders(&[0].into()).is_empty());
    }

    /// Order review 20, V: the operator's Deployment controller-owns a custom resource that
    /// carries its own finalizer. Deleting the Deployment takes the resource only once the
    /// Deployment is gone, and nothing finalizes it then: no order helps, and the plan says so.
    /// Apart from its owner (another planned object takes it) it orders as any victim.
    #[test]
    fn a_victim_that_needs_the_very_object_that_takes_it_is_told() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let mut cr = with_uid(input("example.com", "Gizmo", Some("op"), "default", None), "uid-cr");
        cr.finalizers.push("example.com/cleanup".into());
        cr.owners.push("uid-ctl".into());
        let inputs = [
            with_uid(
                input("apps", "Deployment", Some("op"), "controller", Some("op")),
                "uid-ctl",
            ),
            cr,
            input(CRD, "CustomResourceDefinition", None, "gizmos.example.com", Some("op")),
        ];
        let options = gizmo_options();
        let graph = build(&inputs, &options);
        let planned: HashSet<usize> = [0].into();
        assert_eq!(graph.needs_its_taker(&planned), [(1, 0, 0)]);
        let (_, told) = crate::graph::plan::plan_deletion_told(&graph, &planned).unwrap();
        assert!(
            told.iter().any(|t| t.starts_with(
                "Gizmo.example.com/op/default dies with Deployment.apps/op/controller, which finalizes it"
            )),
            "{told:?}"
        );
        // Not planned, the Deployment takes nothing, and nothing is told.
        assert!(graph.needs_its_taker(&HashSet::new()).is_empty());

        // Review 22, F2: a planned Gadget controls the Deployment; deleting the Gadget takes the
        // Deployment and, through it, the resource.
        let mut owned_inputs = inputs.to_vec();
        owned_inputs[0].owners.push("uid-gadget".into());
        owned_inputs.push(with_uid(
            input("example.com", "Gadget", Some("op"), "owner", Some("op")),
            "uid-gadget",
        ));
        let graph = build(&owned_inputs, &options);
        let planned: HashSet<usize> = [3].into();
        assert_eq!(graph.needs_its_taker(&planned), [(1, 0, 3)]);
        let (_, told) = crate::graph::plan::plan_deletion_told(&graph, &planned).unwrap();
        assert!(
            told.iter().any(|t| t.starts_with("Gizmo.example.com/op/default and Deployment.apps/op/controller, which finalizes it (inferred: finalizer), both die with Gadget.example.com/op/owner")),
            "{told:?}"
        );
    }

    /// Order review 24: planned `owner` controls Namespace `tenant`, which no stack tracks; the
    /// operator `opo` lives in it as plain content (no owner of its own); `user`, which stays,
    /// needs `opo`. The Namespace dies with `owner`, and `opo` with it, so `owner` is kept (it
    /// was deleted with `--allow-cascade`, and `user` left waiting on what no longer runs).
    #[test]
    fn a_need_in_a_namespace_that_dies_with_a_planned_owner_keeps_that_owner() {
        let with_uid = |mut input: NodeInput, uid: &str| {
            input.uid = Some(uid.to_string());
            input
        };
        let owner = with_uid(input("example.com", "Gadget", None, "owner", Some("s")), "uid-owner");
        let mut tenant = with_uid(input("", "Namespace", None, "tenant", None), "uid-tenant");
        tenant.owners.push("uid-owner".into());
        let opo = with_uid(input("apps", "Deployment", Some("tenant"), "opo", None), "uid-opo");
        let mut user = with_uid(input("", "ConfigMap", Some("app"), "user", None), "uid-user");
        user.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "apps/namespaces/tenant/Deployment/opo".into(),
        );
        let mut graph = build(&[owner, tenant, opo, user], &BuildOptions::default());
        graph.victims.extend([1, 2]);
        let planned: HashSet<usize> = [0].into();
        let needed = crate::prune::safeguards::needed_by_staying(&graph, &planned, |i| i == 3);
        let why = needed.get(&0).map(ToString::to_string).unwrap_or_default();
        assert!(
            why.contains("needed by ConfigMap/app/user") && why.contains("Deployment.apps/tenant/opo dies with it"),
            "{why}"
        );
    }

    /// Order review 28, F2: claim `data` dies as planned `owner`'s child; the PV controller then
    /// reclaims volume `pv`, which owns ConfigMap `cm`, which owns ServiceAccount `sa`; `user`,
    /// which stays, needs `sa`. The volume dies with the claim's takers, and so does what it owns
    /// two owners further, so `owner` is kept.
    #[test]
    fn a_need_a_reclaimed_volume_of_a_planned_owners_claim_owns_keeps_that_owner() {
        let with_uid = |mut input: NodeInput, uid: &str, owner: Option<&str>| {
            input.uid = Some(uid.to_string());
            input.owners.extend(owner.map(str::to_string));
            input
        };
        let owner = with_uid(
            input("example.com", "Gadget", None, "owner", Some("s")),
            "uid-owner",
            None,
        );
        let mut claim = with_uid(
            input("", "PersistentVolumeClaim", Some("app"), "data", None),
            "uid-claim",
            Some("uid-owner"),
        );
        claim.body = Some(serde_json::json!({"spec": {"volumeName": "pv"}}));
        let volume = with_uid(input("", "PersistentVolume", None, "pv", None), "uid-pv", None);
        let config = with_uid(
            input("", "ConfigMap", Some("app"), "cm", None),
            "uid-cm",
            Some("uid-pv"),
        );
        let account = with_uid(
            input("", "ServiceAccount", Some("app"), "sa", None),
            "uid-sa",
            Some("uid-cm"),
        );
        let mut user = with_uid(input("", "ConfigMap", Some("app"), "user", None), "uid-user", None);
        user.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "/namespaces/app/ServiceAccount/sa".into(),
        );
        let options = BuildOptions {
            infer: true,
            ..Default::default()
        };
        let mut graph = build(&[owner, claim, volume, config, account, user], &options);
        graph.victims.extend([1, 2, 3, 4]);
        let planned: HashSet<usize> = [0].into();
        let dying = graph.dying_victims(|i| planned.contains(&i));
        for victim in [1, 2, 3, 4] {
            assert_eq!(dying.get(&victim), Some(&vec![0]), "{victim}: {dying:?}");
        }
        let needed = crate::prune::safeguards::needed_by_staying(&graph, &planned, |i| i == 5);
        let why = needed.get(&0).map(ToString::to_string).unwrap_or_default();
        assert!(why.contains("needed by ConfigMap/app/user"), "{why}");
    }

    #[test]
    fn what_needs_a_victim_goes_before_the_namespace_that_takes_it() {
        // A planned ConfigMap elsewhere depends on an untracked one in a planned Namespace.
        let mut user = input("", "ConfigMap", Some("web"), "user", Some("s"));
        user.annotations_mut().insert(
            crate::graph::KPT_DEPENDS_ON.into(),
            "/namespaces/data/ConfigMap/base".into(),
        );
        let inputs = [
            input("", "Namespace", None, "data", Some("s")),
            user,
            input("", "ConfigMap", Some("data"), "base", None),
        ];
        let mut graph = build(&inputs, &BuildOptions::default());
        graph.victims.insert(2);
        let planned: HashSet<usize> = [0, 1].into();
        assert_eq!(names(&graph, &planned), [["user"], ["data"]]);
        assert!(graph.victim_reason(1, &planned).unwrap().starts_with(
            "before Namespace/data (that deletion takes ConfigMap/data/base, which it needs: depends-on)"
        ));
    }

    #[test]
    fn a_victim_that_needs_what_its_own_namespace_holds_cannot_be_ordered() {
        // The operator lives in the Namespace that takes the custom resource: no order of waves
        // helps, and none is made up (the plan stays acyclic).
        let mut stray = input("example.com", "Gizmo", Some("op"), "stray", None);
        stray.finalizers.push("example.com/cleanup".into());
        let inputs = [
            input("", "Namespace", None, "op", Some("op")),
            input("apps", "Deployment", Some("op"), "controller", Some("op")),
            input(CRD, "CustomResourceDefinition", None, "gizmos.example.com", Some("op")),
            stray,
        ];
        let options = gizmo_options();
        let mut graph = build(&inputs, &options);
        graph.victims.insert(3);
        let planned: HashSet<usize> = [0, 1, 2].into();
        let waves = names(&graph, &planned);
        assert_eq!(waves.concat().len(), 3, "{waves:?}");
        // The CRD still goes before the operator.
        let wave_of = |name: &str| waves.iter().position(|w| w.iter().any(|n| n == name)).unwrap();
        assert!(wave_of("gizmos.example.com") < wave_of("controller"), "{waves:?}");
    }
}
