//! The dependencies people declare in annotations: Argo CD sync waves, kapp change groups and
//! rules, and cli-utils `depends-on` references, parsed as their tools parse them.

use std::collections::{BTreeMap, HashMap};

use super::{Edge, EdgeKind, KappRule, NodeInput, KAPP_CHANGE_GROUP, KAPP_CHANGE_RULE};
use crate::model::annotations::argo_sync_wave;
use crate::model::trackers::{marks, Preset};
use crate::stack::members::object_meta;

/// Argo CD: objects of one app in wave N depend on the objects of the nearest earlier wave
/// (earlier waves follow transitively), each wave read as Argo CD reads it ([`argo_sync_wave`]).
pub(super) fn sync_wave_edges(inputs: &[NodeInput]) -> Vec<Edge> {
    let mut by_app: BTreeMap<String, BTreeMap<i64, Vec<usize>>> = BTreeMap::new();
    for (index, input) in inputs.iter().enumerate() {
        let meta = object_meta(input);
        let marked = marks(&meta).into_iter().find(|m| m.preset == Preset::ArgoCd);
        // Offline, git has no Argo CD mark: a folder rendered as one application counts.
        let app = match (marked, &input.app) {
            (Some(mark), _) => format!("app {}", mark.value.name),
            (None, Some(folder)) => format!("folder {folder}"),
            (None, None) => continue,
        };
        let wave = argo_sync_wave(&input.annotations);
        by_app.entry(app).or_default().entry(wave).or_default().push(index);
    }
    let mut edges = Vec::new();
    for waves in by_app.values() {
        let ordered: Vec<&Vec<usize>> = waves.values().collect();
        for pair in ordered.windows(2) {
            for &from in pair[1] {
                for &to in pair[0] {
                    edges.push(Edge {
                        from,
                        to,
                        kind: EdgeKind::SyncWave,
                    });
                }
            }
        }
    }
    edges
}

/// kapp: `change-rule: "<delete|upsert> <before|after> <deleting|upserting> <group>"`.
/// "delete before deleting G" and "upsert after upserting G" make the object depend on G's
/// members; "delete after deleting G" and "upsert before upserting G" the reverse.
pub(super) fn kapp_edges(inputs: &[NodeInput]) -> Vec<Edge> {
    let prefixed = |annotations: &BTreeMap<String, String>, key: &str| -> Vec<String> {
        annotations
            .iter()
            .filter(|(k, _)| *k == key || k.starts_with(&format!("{key}.")))
            .map(|(_, v)| v.trim().to_string())
            .collect()
    };
    let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
    for (index, input) in inputs.iter().enumerate() {
        for group in prefixed(&input.annotations, KAPP_CHANGE_GROUP) {
            if let Some(group) = kapp_group_name(&group, input) {
                groups.entry(group).or_default().push(index);
            }
        }
    }
    let mut edges = Vec::new();
    for (index, input) in inputs.iter().enumerate() {
        for rule in prefixed(&input.annotations, KAPP_CHANGE_RULE) {
            let Ok(rule) = KappRule::parse(&rule) else {
                continue;
            };
            // Only a rule between two deletions or two upserts orders the pair; "upsert after
            // deleting G" says nothing about which must outlive the other.
            let object_first = match (rule.action, rule.order, rule.target_action) {
                ("delete", "before", "deleting") | ("upsert", "after", "upserting") => true,
                ("delete", "after", "deleting") | ("upsert", "before", "upserting") => false,
                _ => continue,
            };
            let Some(group) = kapp_group_name(rule.group, input) else {
                continue;
            };
            for &other in groups.get(&group).map(Vec::as_slice).unwrap_or_default() {
                if other == index {
                    continue;
                }
                let (from, to) = if object_first { (index, other) } else { (other, index) };
                edges.push(Edge {
                    from,
                    to,
                    kind: EdgeKind::KappRule,
                });
            }
        }
    }
    edges
}

/// A kapp change group's name (in `change-group`, or the group a `change-rule` names) with its
/// placeholders replaced by the values of the object that carries the annotation, as kapp
/// replaces them (carvel-dev/kapp `pkg/kapp/diffgraph/change_group_name.go`: `{api-group}`,
/// `{kind}`, `{name}`, `{namespace}`, and a CRD's `{crd-kind}`, `{crd-group}`; order review 14,
/// F2). `None` where kapp fails the whole deploy instead (an unknown placeholder, or one without
/// a value for this object), with a warning: no edge is made of it.
pub(super) fn kapp_group_name(name: &str, input: &NodeInput) -> Option<String> {
    if !name.contains('{') {
        return Some(name.to_string());
    }
    let crd = |pointer: &str| {
        let is_crd = input.id.group == "apiextensions.k8s.io" && input.id.kind == "CustomResourceDefinition";
        let from_body = input
            .body
            .as_ref()
            .and_then(|b| b.pointer(pointer))
            .and_then(serde_json::Value::as_str);
        let group_from_name = || input.id.name.split_once('.').map(|(_, group)| group);
        match pointer {
            "/spec/group" => from_body.or_else(group_from_name),
            _ => from_body,
        }
        .filter(|_| is_crd)
        .unwrap_or_default()
        .to_string()
    };
    let value_of = |placeholder: &str| -> String {
        match placeholder {
            "{api-group}" => input.id.group.clone(),
            "{kind}" => input.id.kind.clone(),
            "{name}" => input.id.name.clone(),
            "{namespace}" => input.id.namespace.clone().unwrap_or_default(),
            "{crd-kind}" => crd("/spec/names/kind"),
            "{crd-group}" => crd("/spec/group"),
            _ => String::new(),
        }
    };
    let mut expanded = String::new();
    let mut rest = name;
    while let Some(start) = rest.find('{') {
        // kapp's `{.+?}`: the shortest run of at least one character up to a `}`.
        let Some(length) = rest[start + 1..]
            .char_indices()
            .skip(1)
            .find(|(_, c)| *c == '}')
            .map(|(i, _)| i)
        else {
            break;
        };
        let placeholder = &rest[start..start + 1 + length + 1];
        let value = value_of(placeholder);
        if value.is_empty() {
            tracing::warn!(
                "{}: kapp change group {name:?}: placeholder {placeholder} has no value for it (kapp fails such a deploy): no order is read from it",
                input.id
            );
            return None;
        }
        expanded.push_str(&rest[..start]);
        expanded.push_str(&value);
        rest = &rest[start + 1 + length + 1..];
    }
    expanded.push_str(rest);
    Some(expanded)
}
