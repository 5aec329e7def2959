//! Chains of stuck objects: which one waits for which (an owner for its dependents, a CRD for its
//! instances, a Namespace for its content, a claim for its Pods), followed down to the leaves, and
//! the smallest cut: the leaf finalizers whose removal releases a whole chain, with the exact
//! `kubectl stack unstick` command for just those.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::{diagnose, Diagnosis, DiagnosisContext};

mod text;

use crate::cluster::collect::{api_for, Listed};
use crate::cluster::discovery::KindInfo;
use crate::error::{is_not_found, root_cause};
use crate::model::identity::ObjectId;
pub use text::{render_text, to_json};

use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;

/// At most this many objects are added to those asked about when following chains.
const MAX_FOLLOWED: usize = 2_000;

/// One stuck object and why.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The object, as read.
    pub object: Listed,
    /// Why it is stuck.
    pub diagnosis: Diagnosis,
    /// Who tracks it, as the TRACKED-BY column says.
    pub tracked_by: String,
}

impl Entry {
    /// `metadata.finalizers`, then a Namespace's `spec.finalizers`.
    pub fn all_finalizers(&self) -> Vec<String> {
        let mut all: Vec<String> = self.object.finalizers().to_vec();
        for finalizer in &self.diagnosis.spec_finalizers {
            if !all.contains(finalizer) {
                all.push(finalizer.clone());
            }
        }
        all
    }

    /// The finalizers that wait for nothing we can see: the ones to remove when this object is
    /// the cause (its other finalizers wait for other objects, which go first).
    pub fn leaf_finalizers(&self) -> Vec<String> {
        let waiting: HashSet<&str> = self
            .diagnosis
            .findings
            .iter()
            .filter(|f| !f.waits_for.is_empty())
            .filter_map(|f| f.finalizer.as_deref())
            .collect();
        self.all_finalizers()
            .into_iter()
            .filter(|f| !waiting.contains(f.as_str()))
            .collect()
    }
}

/// One object waits for another through one of its finalizers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The index of the waiting object.
    pub from: usize,
    /// The index of the object waited for.
    pub to: usize,
    /// The finalizer that waits.
    pub finalizer: String,
}

/// The smallest cut of a chain at one object: the finalizers to remove there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The index of the object.
    pub entry: usize,
    /// The finalizers to remove from it (empty when what it waits for is not a finalizer, e.g.
    /// a Pod that still uses a claim).
    pub finalizers: Vec<String>,
}

/// Stuck objects linked by what waits for what, from one root.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The object nothing else waits for (in a pure cycle, one of its members).
    pub root: usize,
    /// Every object of the chain, root first.
    pub members: Vec<usize>,
    /// Where to cut: the leaves (or, for a cycle with no leaf, one link of it).
    pub cuts: Vec<Cut>,
}

/// What `stuck` found: the objects, what waits for what, the chains and the cycles.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every stuck object looked at (those asked about, then those their chains lead to).
    pub entries: Vec<Entry>,
    /// Who waits for whom.
    pub edges: Vec<Edge>,
    /// The chains, one per root.
    pub chains: Vec<Chain>,
    /// Objects that wait for each other, each cycle once.
    pub cycles: Vec<Vec<usize>>,
    /// Whether more objects were linked than were followed.
    pub truncated: bool,
}

/// Diagnoses the objects and follows what they wait for: every object waited for that is itself
/// being deleted is diagnosed too, until the leaves; then links them into chains.
pub async fn explain(session: &Session, context: &mut DiagnosisContext, objects: Vec<Listed>) -> Report {
    let mut entries: Vec<Entry> = Vec::new();
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let asked = objects.len();
    let mut queue: VecDeque<Listed> = objects.into();
    let mut truncated = false;
    while let Some(object) = queue.pop_front() {
        if !seen.insert(object.id()) {
            continue;
        }
        if entries.len() >= asked + MAX_FOLLOWED {
            truncated = true;
            break;
        }
        let diagnosis = diagnose(session, context, &object).await;
        for finding in &diagnosis.findings {
            queue.extend(finding.waits_for.iter().filter(|w| w.is_terminating()).cloned());
        }
        entries.push(Entry {
            tracked_by: crate::stack::listing::tracked_by(&object),
            object,
            diagnosis,
        });
    }
    let mut report = link(entries);
    report.truncated = truncated;
    report
}

/// Explains the objects a prune reported as blockers (read again: they may have moved on):
/// each one's chain down to its leaves, for `prune` to print with [`render_text`].
pub async fn explain_blockers(session: &Session, blockers: &[(Arc<KindInfo>, ObjectId)]) -> Report {
    let mut objects = Vec::new();
    for (kind, id) in blockers {
        let api = api_for(&session.connection.client, kind, id.namespace.as_deref());
        match with_retries("get", || api.get_metadata(&id.name)).await {
            Ok(found) => objects.push(Listed::new(Arc::clone(kind), found.metadata)),
            Err(err) if is_not_found(&err) => {}
            Err(err) => tracing::warn!("{id} could not be read again: {}", root_cause(&err)),
        }
    }
    let mut context = DiagnosisContext::load(session).await;
    explain(session, &mut context, objects).await
}

/// Links diagnosed objects: an edge wherever a finding waits for another entry; then the
/// chains from each root, their cuts, and the cycles.
pub fn link(entries: Vec<Entry>) -> Report {
    let index: HashMap<ObjectId, usize> = entries.iter().enumerate().map(|(i, e)| (e.object.id(), i)).collect();
    let mut edges: Vec<Edge> = Vec::new();
    let mut linked: HashSet<(usize, usize)> = HashSet::new();
    for (from, entry) in entries.iter().enumerate() {
        for finding in &entry.diagnosis.findings {
            for waited in &finding.waits_for {
                let Some(&to) = index.get(&waited.id()) else {
                    continue;
                };
                if linked.insert((from, to)) {
                    edges.push(Edge {
                        from,
                        to,
                        finalizer: finding.finalizer.clone().unwrap_or_default(),
                    });
                }
            }
        }
    }
    // Sorted by the waiting object, so that each one's edges are found by binary search.
    edges.sort_by_key(|e| (e.from, e.to));
    let cycles = find_cycles(entries.len(), &edges);
    let mut report = Report {
        entries,
        edges,
        cycles,
        ..Default::default()
    };
    report.chains = chains(&report);
    report
}

/// The edges from one object (`edges` is sorted by `from`).
fn edges_from(edges: &[Edge], from: usize) -> &[Edge] {
    let start = edges.partition_point(|e| e.from < from);
    let end = edges.partition_point(|e| e.from <= from);
    &edges[start..end]
}

fn children(edges: &[Edge], from: usize) -> Vec<usize> {
    edges_from(edges, from).iter().map(|e| e.to).collect()
}

/// Strongly connected components of more than one object (or an object waiting for itself).
fn find_cycles(count: usize, edges: &[Edge]) -> Vec<Vec<usize>> {
    let mut graph = petgraph::graph::DiGraph::<usize, ()>::new();
    let nodes: Vec<_> = (0..count).map(|i| graph.add_node(i)).collect();
    for edge in edges {
        graph.add_edge(nodes[edge.from], nodes[edge.to], ());
    }
    let mut cycles: Vec<Vec<usize>> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .map(|component| {
            let mut members: Vec<usize> = component.into_iter().map(|n| graph[n]).collect();
            members.sort_unstable();
            members
        })
        .filter(|members| members.len() > 1 || edges_from(edges, members[0]).iter().any(|e| e.to == members[0]))
        .collect();
    cycles.sort();
    cycles
}

/// Every object reachable from `root`, root first, each once.
fn reachable(edges: &[Edge], root: usize) -> Vec<usize> {
    let mut order = vec![root];
    let mut seen: HashSet<usize> = HashSet::from([root]);
    let mut next = 0;
    while next < order.len() {
        for child in children(edges, order[next]) {
            if seen.insert(child) {
                order.push(child);
            }
        }
        next += 1;
    }
    order
}

/// One chain per root (objects nothing waits for, sorted by identity); objects only reachable
/// through a cycle get the cycle's first member as their root.
fn chains(report: &Report) -> Vec<Chain> {
    let waited: HashSet<usize> = report.edges.iter().map(|e| e.to).collect();
    let mut roots: Vec<usize> = (0..report.entries.len()).filter(|i| !waited.contains(i)).collect();
    roots.sort_by_key(|i| report.entries[*i].object.id());
    let mut covered: HashSet<usize> = HashSet::new();
    let mut found = Vec::new();
    for root in roots {
        let members = reachable(&report.edges, root);
        covered.extend(members.iter().copied());
        found.push(chain(report, root, members));
    }
    for cycle in &report.cycles {
        if !covered.contains(&cycle[0]) {
            let members = reachable(&report.edges, cycle[0]);
            covered.extend(members.iter().copied());
            found.push(chain(report, cycle[0], members));
        }
    }
    found
}

fn chain(report: &Report, root: usize, members: Vec<usize>) -> Chain {
    let mut cuts: Vec<Cut> = members
        .iter()
        .filter(|m| children(&report.edges, **m).is_empty())
        .map(|&entry| Cut {
            entry,
            finalizers: report.entries[entry].leaf_finalizers(),
        })
        .collect();
    if cuts.is_empty() {
        // No leaf: everything waits in a circle. Cutting one link breaks it.
        if let Some(edge) = report.edges.iter().find(|e| e.from == root && members.contains(&e.to)) {
            cuts.push(Cut {
                entry: root,
                finalizers: vec![edge.finalizer.clone()],
            });
        }
    }
    Chain { root, members, cuts }
}

/// `kubectl stack unstick [-n NS] TYPE/NAME --finalizer F …` for exactly these finalizers.
pub fn unstick_command(object: &Listed, finalizers: &[String]) -> String {
    let typed = object.kind.resource_type();
    let mut command = String::from("kubectl stack unstick");
    if let Some(namespace) = object.namespace() {
        command.push_str(&format!(" -n {namespace}"));
    }
    command.push_str(&format!(" {typed}/{}", object.name()));
    for finalizer in finalizers {
        command.push_str(&format!(" --finalizer {finalizer}"));
    }
    command
}

/// The chain that starts at an object (it is a root when nothing in the report waits for it):
/// the objects it waits for, transitively, and the cuts. `None` when it waits for nobody stuck.
pub fn chain_below(report: &Report, id: &ObjectId) -> Option<Chain> {
    let root = report.entries.iter().position(|e| e.object.id() == *id)?;
    if children(&report.edges, root).is_empty() {
        return None;
    }
    let members = reachable(&report.edges, root);
    Some(chain(report, root, members))
}

/// The distinct finalizers a set of cuts names, for messages.
pub fn cut_finalizers(cuts: &[Cut]) -> BTreeSet<String> {
    cuts.iter().flat_map(|c| c.finalizers.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breakglass::stuck::Finding;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::core::ObjectMeta;

    fn kind() -> Arc<KindInfo> {
        Arc::new(KindInfo {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            singular: "configmap".into(),
            short_names: vec![],
            namespaced: true,
            verbs: vec!["list".into()],
        })
    }

    fn listed(name: &str, finalizers: &[&str]) -> Listed {
        let meta = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
            deletion_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        };
        Listed::new(kind(), meta)
    }

    fn entry(name: &str, finalizers: &[&str], waits: &[(&str, &[&str])]) -> Entry {
        let findings = waits
            .iter()
            .map(|(finalizer, names)| Finding {
                finalizer: Some(finalizer.to_string()),
                text: format!("{finalizer}: waits"),
                waits_for: names.iter().map(|n| listed(n, &[])).collect(),
            })
            .collect();
        Entry {
            object: listed(name, finalizers),
            diagnosis: Diagnosis {
                findings,
                spec_finalizers: vec![],
            },
            tracked_by: "<none>".into(),
        }
    }

    #[test]
    fn a_three_level_chain_has_one_root_one_leaf_and_one_command() {
        let report = link(vec![
            entry("c", &["example.com/hold"], &[]),
            entry("a", &["foregroundDeletion"], &[("foregroundDeletion", &["b"])]),
            entry("b", &["foregroundDeletion"], &[("foregroundDeletion", &["c"])]),
        ]);
        assert_eq!(report.chains.len(), 1);
        let chain = &report.chains[0];
        assert_eq!(report.entries[chain.root].object.name(), "a");
        assert_eq!(chain.members.len(), 3);
        assert_eq!(chain.cuts.len(), 1);
        assert_eq!(report.entries[chain.cuts[0].entry].object.name(), "c");
        assert_eq!(chain.cuts[0].finalizers, vec!["example.com/hold"]);
        assert!(report.cycles.is_empty());
        let text = render_text(&report);
        assert!(
            text.contains("    kubectl stack unstick -n ns configmaps/c --finalizer example.com/hold\n"),
            "{text}"
        );
        assert!(text.contains("└── ConfigMap/ns/b (foregroundDeletion)"), "{text}");
        assert!(text.contains("    └── ConfigMap/ns/c (foregroundDeletion)"), "{text}");
        assert!(!text.contains("--all-finalizers"), "{text}");
        let json = to_json(&report);
        assert_eq!(json["edges"].as_array().unwrap().len(), 2);
        assert_eq!(json["edges"][0]["finalizer"], "foregroundDeletion");
        assert_eq!(json["chains"][0]["cut"][0]["object"]["name"], "c");
    }

    #[test]
    fn cycles_are_reported_and_cut_at_one_link() {
        let report = link(vec![
            entry("x", &["foregroundDeletion"], &[("foregroundDeletion", &["y"])]),
            entry("y", &["foregroundDeletion"], &[("foregroundDeletion", &["x"])]),
        ]);
        assert_eq!(report.cycles, vec![vec![0, 1]]);
        assert_eq!(report.chains.len(), 1);
        assert_eq!(report.chains[0].cuts.len(), 1);
        assert_eq!(report.chains[0].cuts[0].finalizers, vec!["foregroundDeletion"]);
        let text = render_text(&report);
        assert!(
            text.contains("cycle: ConfigMap/ns/x, ConfigMap/ns/y wait for each other"),
            "{text}"
        );
        assert!(text.contains("[cycle]"), "{text}");
        assert_eq!(to_json(&report)["cycles"][0].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_leaf_waiting_for_a_live_object_has_no_finalizer_to_cut() {
        let report = link(vec![
            entry(
                "claim",
                &["kubernetes.io/pvc-protection"],
                &[("kubernetes.io/pvc-protection", &["pod"])],
            ),
            entry(
                "ns-like",
                &["foregroundDeletion"],
                &[("foregroundDeletion", &["claim"])],
            ),
        ]);
        let chain = &report.chains[0];
        assert_eq!(chain.cuts[0].finalizers, Vec::<String>::new());
        let text = render_text(&report);
        assert!(
            text.contains("which waits for objects that are not being deleted"),
            "{text}"
        );
        assert!(!text.contains("kubectl stack unstick"), "{text}");
    }

    #[test]
    fn chain_below_names_what_a_non_leaf_waits_for() {
        let report = link(vec![
            entry("a", &["foregroundDeletion"], &[("foregroundDeletion", &["b"])]),
            entry("b", &["example.com/hold"], &[]),
        ]);
        let below = chain_below(&report, &report.entries[0].object.id()).unwrap();
        assert_eq!(below.cuts[0].finalizers, vec!["example.com/hold"]);
        assert!(chain_below(&report, &report.entries[1].object.id()).is_none());
        assert_eq!(cut_finalizers(&below.cuts).len(), 1);
    }
}
