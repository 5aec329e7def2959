//! Desired sets a tool refuses to apply, and so prunes nothing from (membership review 24): the
//! orphans such a set would show are none. Each check reads the manifests as that tool does.

use std::collections::{HashMap, HashSet};

use petgraph::graphmap::DiGraphMap;

use super::needs::{mutation_sources, APPLY_TIME_MUTATION};
use crate::model::annotations::{parse_depends_on, KPT_DEPENDS_ON};
use crate::model::identity::ObjectId;
use crate::stack::manifest::Manifest;

/// Why kpt (cli-utils) refuses to apply these resolved objects, if it does: a
/// `config.kubernetes.io/depends-on` or `apply-time-mutation` that does not parse, names an
/// object twice, names one outside the set ("invalid object: … external dependency", checked
/// with the real `kpt live apply`), or closes a cycle (cli-utils `pkg/object/graph/depends.go`
/// `addDependsOnEdges`, `addApplyTimeMutationEdges`; `pkg/object/validation`). kpt then applies
/// nothing and prunes nothing.
pub fn kpt_rejects(resolved: &[(ObjectId, &Manifest)]) -> Option<String> {
    let ids: HashSet<&ObjectId> = resolved.iter().map(|(id, _)| id).collect();
    let mut order: DiGraphMap<usize, (), std::hash::RandomState> = DiGraphMap::new();
    let index: HashMap<&ObjectId, usize> = resolved.iter().enumerate().map(|(i, (id, _))| (id, i)).collect();
    for (id, manifest) in resolved {
        let mut named: Vec<ObjectId> = Vec::new();
        if let Some(value) = manifest.annotation(KPT_DEPENDS_ON) {
            match parse_depends_on(value) {
                Ok(references) => named.extend(references),
                Err(err) => return Some(format!("{id}: invalid {KPT_DEPENDS_ON} annotation: {err}")),
            }
        }
        if let Some(value) = manifest.annotation(APPLY_TIME_MUTATION) {
            let sources = mutation_sources(value);
            if sources.is_empty() {
                return Some(format!("{id}: invalid {APPLY_TIME_MUTATION} annotation"));
            }
            named.extend(sources);
        }
        let mut seen = HashSet::new();
        for dependency in named {
            if !seen.insert(dependency.clone()) {
                return Some(format!("{id} names {dependency} twice as a dependency"));
            }
            let Some(&to) = index.get(&dependency).filter(|_| ids.contains(&dependency)) else {
                return Some(format!("{id}: external dependency: {dependency} is not in the package"));
            };
            if let Some(&from) = index.get(id) {
                order.add_edge(from, to, ());
            }
        }
    }
    petgraph::algo::is_cyclic_directed(&order).then(|| "a dependency cycle among its objects".to_string())
}

/// Why kustomize-controller cannot build these manifests, if it cannot: two files of a path
/// without a kustomization define the same object (the same group, kind, namespace as written
/// and name). kustomize-controller generates a kustomization that lists every file (fluxcd/pkg
/// `kustomize/kustomize_generator.go` `generateKustomization`), and kustomize refuses an object
/// defined twice ("may not add resource with an already registered id"), so Flux applies and
/// prunes nothing. What a kustomization built holds no such pair.
pub fn flux_rejects(manifests: &[Manifest]) -> Option<String> {
    let mut seen: HashMap<(&str, &str, Option<&str>, &str), &str> = HashMap::new();
    for manifest in manifests.iter().filter(|m| !m.source.starts_with("kustomize ")) {
        let key = (
            manifest.group(),
            manifest.kind.as_str(),
            manifest.namespace.as_deref(),
            manifest.name.as_str(),
        );
        if let Some(first) = seen.insert(key, &manifest.source) {
            return Some(format!(
                "{} {} is defined twice ({first}, {}): kustomize refuses an object registered twice",
                manifest.kind, manifest.name, manifest.source
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::manifest::parse_text;

    fn resolved(manifests: &[Manifest]) -> Vec<(ObjectId, &Manifest)> {
        manifests
            .iter()
            .map(|m| (ObjectId::new(m.group(), &m.kind, m.namespace.as_deref(), &m.name), m))
            .collect()
    }

    /// Membership review 24, F1: kpt refuses a package whose dependency annotations name an
    /// object outside it, name one twice, do not parse, or close a cycle.
    #[test]
    fn kpt_refuses_dependencies_outside_twice_broken_or_circular() {
        let cm = |name: &str, depends: &str| {
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns1\n  annotations: {{config.kubernetes.io/depends-on: \"{depends}\"}}\n")
        };
        let plain = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: ns1}\n";
        let check = |text: String| {
            let manifests = parse_text(&text, "p.yaml").unwrap();
            kpt_rejects(&resolved(&manifests))
        };
        assert_eq!(check(cm("a", "/namespaces/ns1/ConfigMap/b") + plain), None);
        assert!(check(cm("a", "/namespaces/ns1/ConfigMap/ext") + plain).is_some_and(|w| w.contains("external")));
        assert!(
            check(cm("a", "/namespaces/ns1/ConfigMap/b,/namespaces/ns1/ConfigMap/b") + plain)
                .is_some_and(|w| w.contains("twice"))
        );
        assert!(check(cm("a", "ConfigMap/b") + plain).is_some_and(|w| w.contains("invalid")));
        let cycle = cm("a", "/namespaces/ns1/ConfigMap/c") + &cm("c", "/namespaces/ns1/ConfigMap/a");
        assert!(check(cycle).is_some_and(|w| w.contains("cycle")));
    }

    /// Membership review 24, F2: two files define one object: kustomize refuses the generated
    /// kustomization; a kustomization's own output is never judged so.
    #[test]
    fn flux_refuses_an_object_two_files_define() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n";
        let mut twice = parse_text(cm, "one.yaml").unwrap();
        twice.extend(parse_text(cm, "two.yaml").unwrap());
        assert!(flux_rejects(&twice).is_some_and(|w| w.contains("one.yaml") && w.contains("two.yaml")));
        let other = parse_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: m}\n",
            "three.yaml",
        )
        .unwrap();
        assert_eq!(flux_rejects(&[twice[0].clone(), other[0].clone()]), None);
        let built: Vec<Manifest> = twice
            .into_iter()
            .map(|mut m| {
                m.source = "kustomize dir".into();
                m
            })
            .collect();
        assert_eq!(flux_rejects(&built), None);
    }
}
