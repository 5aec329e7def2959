//! Desired sets a tool refuses to apply, and so prunes nothing from (membership review 24): the
//! orphans such a set would show are none. Each check reads the manifests as that tool does.

use std::collections::{HashMap, HashSet};

use petgraph::graphmap::DiGraphMap;

use super::needs::{mutation_sources, APPLY_TIME_MUTATION};
use crate::model::annotations::{parse_depends_on, KPT_DEPENDS_ON};
use crate::model::identity::ObjectId;
use crate::stack::manifest::Manifest;

/// What one desired object's dependency annotations name (`config.kubernetes.io/depends-on`,
/// `apply-time-mutation`), or why they cannot be read (cli-utils then refuses the object: "invalid
/// annotation").
pub type Dependencies = Result<Vec<ObjectId>, Unreadable>;

/// A dependency annotation cli-utils cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// `config.kubernetes.io/depends-on` does not parse.
    #[error("invalid {KPT_DEPENDS_ON} annotation: {0}")]
    DependsOn(String),
    /// `config.kubernetes.io/apply-time-mutation` names no source.
    #[error("invalid {APPLY_TIME_MUTATION} annotation")]
    Mutation,
}

/// The dependencies of one manifest (see [`Dependencies`]).
pub fn dependencies_of(manifest: &Manifest) -> Option<Dependencies> {
    let depends = manifest.annotation(KPT_DEPENDS_ON);
    let mutation = manifest.annotation(APPLY_TIME_MUTATION);
    if depends.is_none() && mutation.is_none() {
        return None;
    }
    let mut named = Vec::new();
    if let Some(value) = depends {
        match parse_depends_on(value) {
            Ok(references) => named.extend(references),
            Err(err) => return Some(Err(Unreadable::DependsOn(err.to_string()))),
        }
    }
    if let Some(value) = mutation {
        let sources = mutation_sources(value);
        if sources.is_empty() {
            return Some(Err(Unreadable::Mutation));
        }
        named.extend(sources);
    }
    Some(Ok(named))
}

/// Why kpt (cli-utils) refuses to apply the desired objects, if it does, given what each
/// depends on (`dependencies`) and what it may depend on (`known`: the desired objects, and the
/// objects of its inventory, whose prune it then skips, `pkg/apply/filter/dependency-filter.go`):
/// an annotation that does not parse, names an object twice, names one it may not ("invalid
/// object: … external dependency", checked with the real `kpt live apply`), or closes a cycle
/// (cli-utils `pkg/object/graph/depends.go`, `pkg/object/validation`). kpt then applies nothing
/// and prunes nothing.
pub fn kpt_rejects(dependencies: &[(ObjectId, Dependencies)], known: impl Fn(&ObjectId) -> bool) -> Option<String> {
    let mut order: DiGraphMap<usize, (), std::hash::RandomState> = DiGraphMap::new();
    let mut index: HashMap<&ObjectId, usize> = HashMap::new();
    for (id, named) in dependencies {
        let named = match named {
            Ok(named) => named,
            Err(why) => return Some(format!("{id}: {why}")),
        };
        let mut seen = HashSet::new();
        for dependency in named {
            if !seen.insert(dependency) {
                return Some(format!("{id} names {dependency} twice as a dependency"));
            }
            if !known(dependency) {
                return Some(format!(
                    "{id}: external dependency: {dependency} is neither in the package nor in its inventory"
                ));
            }
            let next = index.len();
            let from = *index.entry(id).or_insert(next);
            let next = index.len();
            let to = *index.entry(dependency).or_insert(next);
            order.add_edge(from, to, ());
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

    fn dependencies(manifests: &[Manifest]) -> Vec<(ObjectId, Dependencies)> {
        manifests
            .iter()
            .filter_map(|m| {
                let id = ObjectId::new(m.group(), &m.kind, m.namespace.as_deref(), &m.name);
                Some((id, dependencies_of(m)?))
            })
            .collect()
    }

    /// Membership review 24, F1: kpt refuses a package whose dependency annotations name an
    /// object neither in it nor in its inventory, name one twice, do not parse, or close a cycle.
    #[test]
    fn kpt_refuses_dependencies_outside_twice_broken_or_circular() {
        let cm = |name: &str, depends: &str| {
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns1\n  annotations: {{config.kubernetes.io/depends-on: \"{depends}\"}}\n")
        };
        let in_inventory = ObjectId::new("", "ConfigMap", Some("ns1"), "old");
        let check = |text: String| {
            let manifests = parse_text(&text, "p.yaml").unwrap();
            let ids: HashSet<ObjectId> = manifests
                .iter()
                .map(|m| ObjectId::new(m.group(), &m.kind, m.namespace.as_deref(), &m.name))
                .collect();
            kpt_rejects(&dependencies(&manifests), |id| ids.contains(id) || *id == in_inventory)
        };
        let plain = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: ns1}\n".to_string();
        assert_eq!(check(cm("a", "/namespaces/ns1/ConfigMap/b") + &plain), None);
        // An object of its inventory: kpt keeps it ("dependent scheduled for apply").
        assert_eq!(check(cm("a", "/namespaces/ns1/ConfigMap/old")), None);
        assert!(check(cm("a", "/namespaces/ns1/ConfigMap/ext") + &plain).is_some_and(|w| w.contains("external")));
        let twice = cm("a", "/namespaces/ns1/ConfigMap/b,/namespaces/ns1/ConfigMap/b") + &plain;
        assert!(check(twice).is_some_and(|w| w.contains("twice")));
        assert!(check(cm("a", "ConfigMap/b") + &plain).is_some_and(|w| w.contains("invalid")));
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
