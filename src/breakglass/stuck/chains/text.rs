//! A report of chains as text (a tree per chain, its cut and `unstick` command) and as JSON.

use std::fmt::Write;

use serde_json::{json, Value};

use super::{children, edges_from, unstick_command, Chain, Edge, Entry, Report, MAX_FOLLOWED};
use crate::cluster::collect::Listed;
use crate::model::identity::ObjectId;
use crate::render;

fn details(entry: &Entry, prefix: &str, out: &mut String) {
    let mut finalizers: Vec<String> = entry.object.finalizers().to_vec();
    finalizers.extend(
        entry
            .diagnosis
            .spec_finalizers
            .iter()
            .map(|f| format!("{f} (spec.finalizers)")),
    );
    let finalizers = if finalizers.is_empty() {
        "<none>".to_string()
    } else {
        finalizers.join(", ")
    };
    let terminating = render::age(entry.object.meta.deletion_timestamp.as_ref());
    let _ = writeln!(out, "{prefix}terminating:  {terminating}");
    let _ = writeln!(out, "{prefix}finalizers:   {finalizers}");
    let _ = writeln!(out, "{prefix}tracked by:   {}", entry.tracked_by);
    if entry.diagnosis.findings.is_empty() {
        let _ = writeln!(
            out,
            "{prefix}diagnosis:    none found (the finalizers' controllers may be slow or down)"
        );
    } else {
        let _ = writeln!(out, "{prefix}diagnosis:");
        for finding in &entry.diagnosis.findings {
            let _ = writeln!(out, "{prefix}  - {}", finding.text);
        }
    }
}

fn subtree(report: &Report, node: usize, prefix: &str, path: &mut Vec<usize>, out: &mut String) {
    let mut kids: Vec<&Edge> = edges_from(&report.edges, node).iter().collect();
    kids.sort_by_key(|e| report.entries[e.to].object.id());
    for (position, edge) in kids.iter().enumerate() {
        let last = position + 1 == kids.len();
        let (branch, indent) = if last {
            ("└── ", "    ")
        } else {
            ("├── ", "│   ")
        };
        let child = edge.to;
        let id = report.entries[child].object.id();
        if path.contains(&child) {
            let _ = writeln!(out, "{prefix}{branch}{id} ({}) [cycle]", edge.finalizer);
            continue;
        }
        let _ = writeln!(out, "{prefix}{branch}{id} ({})", edge.finalizer);
        let inner = format!("{prefix}{indent}");
        let guide = if children(&report.edges, child).is_empty() {
            "    "
        } else {
            "│   "
        };
        details(&report.entries[child], &format!("{inner}{guide}"), out);
        path.push(child);
        subtree(report, child, &inner, path, out);
        path.pop();
    }
}

/// The report as text: each chain as a tree (a lone object as one block), each object with its
/// finalizers and diagnosis, then the chain's cause and the `unstick` command for just it.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for (position, chain) in report.chains.iter().enumerate() {
        if position > 0 {
            out.push('\n');
        }
        let root = &report.entries[chain.root];
        let _ = writeln!(out, "{}", root.object.id());
        let guide = if children(&report.edges, chain.root).is_empty() {
            "  "
        } else {
            "│   "
        };
        details(root, guide, &mut out);
        subtree(report, chain.root, "", &mut vec![chain.root], &mut out);
        render_cut(report, chain, &mut out);
    }
    for cycle in &report.cycles {
        let names: Vec<String> = cycle
            .iter()
            .map(|i| report.entries[*i].object.id().to_string())
            .collect();
        let _ = writeln!(
            out,
            "cycle: {} wait for each other; none can finish first",
            names.join(", ")
        );
    }
    if report.truncated {
        let _ = writeln!(
            out,
            "(stopped following chains after {MAX_FOLLOWED} more objects; name fewer objects to see the rest)"
        );
    }
    out
}

fn render_cut(report: &Report, chain: &Chain, out: &mut String) {
    let is_chain = chain.members.len() > 1;
    for cut in &chain.cuts {
        let entry = &report.entries[cut.entry];
        if cut.finalizers.is_empty() {
            if is_chain {
                let _ = writeln!(
                    out,
                    "  cause: {}, which waits for objects that are not being deleted (see its diagnosis)",
                    entry.object.id()
                );
            }
            continue;
        }
        let command = unstick_command(&entry.object, &cut.finalizers);
        if is_chain {
            let _ = writeln!(
                out,
                "  cause: {} (finalizer {}); removing only that releases the chain of {} objects:",
                entry.object.id(),
                cut.finalizers.join(", "),
                chain.members.len()
            );
        } else {
            let _ = writeln!(out, "  if its controller cannot finish, break glass with:");
        }
        let _ = writeln!(out, "    {command}");
    }
}

fn entry_json(report: &Report, index: usize) -> Value {
    let entry = &report.entries[index];
    let object = &entry.object;
    let findings: Vec<Value> = entry
        .diagnosis
        .findings
        .iter()
        .map(|f| {
            let waits: Vec<ObjectId> = f.waits_for.iter().map(Listed::id).collect();
            json!({"finalizer": f.finalizer, "text": f.text, "waitsFor": waits})
        })
        .collect();
    let diagnoses: Vec<&str> = entry.diagnosis.findings.iter().map(|f| f.text.as_str()).collect();
    json!({
        "apiVersion": object.kind.api_version(), "kind": object.kind.kind, "namespace": object.namespace(),
        "name": object.name(), "uid": object.uid(), "deletionTimestamp": object.meta.deletion_timestamp,
        "terminatingFor": render::age(object.meta.deletion_timestamp.as_ref()), "finalizers": object.finalizers(),
        "specFinalizers": entry.diagnosis.spec_finalizers, "trackedBy": entry.tracked_by,
        "diagnoses": diagnoses, "findings": findings,
    })
}

/// The report as JSON: `stuck` (every object, with its findings), `edges` (who waits for whom,
/// through which finalizer), `chains` (root, members, leaves with the `unstick` command) and
/// `cycles`.
pub fn to_json(report: &Report) -> Value {
    let id = |i: usize| report.entries[i].object.id();
    let stuck: Vec<Value> = (0..report.entries.len()).map(|i| entry_json(report, i)).collect();
    let edges: Vec<Value> = report
        .edges
        .iter()
        .map(|e| json!({"from": id(e.from), "to": id(e.to), "finalizer": e.finalizer}))
        .collect();
    let chains: Vec<Value> = report
        .chains
        .iter()
        .map(|chain| {
            let members: Vec<ObjectId> = chain.members.iter().map(|m| id(*m)).collect();
            let cuts: Vec<Value> = chain
                .cuts
                .iter()
                .map(|cut| {
                    let command = (!cut.finalizers.is_empty())
                        .then(|| unstick_command(&report.entries[cut.entry].object, &cut.finalizers));
                    json!({"object": id(cut.entry), "finalizers": cut.finalizers, "command": command})
                })
                .collect();
            json!({"root": id(chain.root), "objects": members, "cut": cuts})
        })
        .collect();
    let cycles: Vec<Vec<ObjectId>> = report
        .cycles
        .iter()
        .map(|cycle| cycle.iter().map(|i| id(*i)).collect())
        .collect();
    json!({"stuck": stuck, "edges": edges, "chains": chains, "cycles": cycles, "truncated": report.truncated})
}
