//! What the objects of a new desired set need to exist, as kpt (cli-utils) reads it from the
//! objects it applies: their `config.kubernetes.io/depends-on` references, the Namespaces they
//! live in, and the CRDs of their kinds (cli-utils `pkg/object/graph/depends.go`:
//! `addDependsOnEdges`, `addNamespaceEdges`, `addCRDEdges`). kpt never prunes what the objects it
//! applies need: `pkg/apply/filter/local-namespaces-filter.go` (`LocalNamespacesFilter`, "namespace
//! still in use") skips a Namespace that applied objects live in, and
//! `pkg/apply/filter/dependency-filter.go` (`DependencyFilter`) skips an object an applied object
//! depends on ("dependent scheduled for apply"). Flux (fluxcd/pkg `ssa`) and kubectl's ApplySet
//! prune have no such filter: only kpt's rule asks [`Needs`] (see [`crate::stack::keep::tool_rules`]).

use std::collections::{HashMap, HashSet};

use crate::model::annotations::{parse_depends_on, KPT_DEPENDS_ON};
use crate::model::identity::ObjectId;
use crate::stack::manifest::Manifest;

/// The annotation whose substitutions read fields of other objects at apply time (cli-utils
/// `pkg/object/mutation/annotation.go`); `pkg/object/graph/depends.go` `addApplyTimeMutationEdges`
/// makes each `sourceRef` a dependency, as `depends-on` does.
pub const APPLY_TIME_MUTATION: &str = "config.kubernetes.io/apply-time-mutation";

/// The objects an `apply-time-mutation` annotation reads (each substitution's `sourceRef`:
/// `group` or the group of `apiVersion`, `kind`, `namespace`, `name`). A value that does not
/// parse names nothing (cli-utils then adds no edge either).
pub fn mutation_sources(value: &str) -> Vec<ObjectId> {
    let Ok(serde_json::Value::Array(substitutions)) = serde_saphyr::from_str::<serde_json::Value>(value) else {
        return Vec::new();
    };
    substitutions
        .iter()
        .filter_map(|substitution| {
            let source = substitution.get("sourceRef")?;
            let field = |key: &str| source.get(key).and_then(serde_json::Value::as_str);
            let group = field("group")
                .or_else(|| field("apiVersion").map(|version| version.rsplit_once('/').map_or("", |(group, _)| group)));
            let (kind, name) = (field("kind")?, field("name")?);
            Some(ObjectId::new(
                group.unwrap_or(""),
                kind,
                field("namespace").filter(|n| !n.is_empty()),
                name,
            ))
        })
        .collect()
}

/// Why a desired object needs another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Objects of the desired set live in this Namespace.
    Namespace,
    /// A desired object depends on it: its `depends-on` names it.
    DependsOn {
        /// The desired object.
        dependent: ObjectId,
    },
    /// A desired object's `apply-time-mutation` reads a field of it.
    MutationSource {
        /// The desired object.
        dependent: ObjectId,
    },
    /// A desired object is a custom resource this CRD defines.
    Definition {
        /// The desired object.
        dependent: ObjectId,
    },
}

/// What the objects of a desired set need, by the identity of what they need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    needed: HashMap<ObjectId, Need>,
    /// The kinds each kapp app (by label value) lists when it deploys this set: its record's
    /// `usedGKs` and the set's own kinds ([`Needs::scope_kapp`]).
    kapp_kinds: HashMap<String, HashSet<(String, String)>>,
    /// The kinds each Argo CD stack's Argo CD never manages, by the name its tracking ids carry
    /// ([`Needs::scope_argo`]).
    argo_filters: HashMap<String, crate::stack::inventory::argo::ResourceFilter>,
    /// The (group, kind, version) the server serves for each kind served under several groups
    /// ([`crate::model::identity::SHARED_KINDS`]): kapp lists an app's object once through each
    /// ([`Needs::kapp_sees_own`]).
    shared_versions: HashSet<(String, String, String)>,
}

impl Needs {
    /// Adds what one resolved desired object needs: its Namespace, the CRD of its kind
    /// (`crd`: the CRD's name, `plural.group`, when its kind is a custom one the cluster
    /// serves) and what its `depends-on` names (parsed as cli-utils parses it; a malformed
    /// annotation names nothing, as cli-utils adds no edge for it).
    pub fn add(&mut self, id: &ObjectId, manifest: &Manifest, crd: Option<String>) {
        if let Some(namespace) = &id.namespace {
            self.insert(ObjectId::new("", "Namespace", None, namespace), Need::Namespace);
        }
        if let Some(crd) = crd {
            let definition = ObjectId::new("apiextensions.k8s.io", "CustomResourceDefinition", None, &crd);
            self.insert(definition, Need::Definition { dependent: id.clone() });
        }
        let references = manifest.annotation(KPT_DEPENDS_ON).map(parse_depends_on);
        for reference in references.into_iter().flat_map(Result::unwrap_or_default) {
            self.insert(reference, Need::DependsOn { dependent: id.clone() });
        }
        let sources = manifest.annotation(APPLY_TIME_MUTATION).map(mutation_sources);
        for source in sources.into_iter().flatten() {
            self.insert(source, Need::MutationSource { dependent: id.clone() });
        }
    }

    /// Adds a Namespace the tool keeps as in use besides those of the desired objects (the
    /// namespace of kpt's inventory object).
    pub fn add_namespace(&mut self, namespace: &str) {
        self.insert(ObjectId::new("", "Namespace", None, namespace), Need::Namespace);
    }

    fn insert(&mut self, id: ObjectId, need: Need) {
        self.needed.entry(id).or_insert(need);
    }

    /// Bounds what kapp app `app` lists when it deploys this set to `used` (its record's
    /// `usedGKs`) and `desired`, the (group, kind) of each new manifest as written (kapp's
    /// `newAndUsedGKs` reads each `apiVersion` as it is: an Ingress written as
    /// `extensions/v1beta1` lists `extensions` Ingresses); an empty scope lists every kind, as
    /// kapp's does.
    pub fn scope_kapp(
        &mut self,
        app: &str,
        used: &[(String, String)],
        desired: impl Iterator<Item = (String, String)>,
    ) {
        let mut kinds: HashSet<(String, String)> = used.iter().cloned().collect();
        kinds.extend(desired);
        if !kinds.is_empty() {
            self.kapp_kinds.insert(app.to_string(), kinds);
        }
    }

    /// Notes the (group, kind, version) the server serves, of those `served` holds, for the
    /// kinds served under several groups (what [`Needs::kapp_sees_own`] reads).
    pub fn note_shared_versions(&mut self, served: impl Iterator<Item = (String, String, String)>) {
        let shared = served.filter(|(group, kind, _)| !crate::model::identity::groups_sharing(group, kind).is_empty());
        self.shared_versions.extend(shared);
    }

    /// Whether kapp app `app`, deploying this set, takes an object of `kind` (listed under its
    /// canonical `group`, a kind served under several groups) whose `kapp.k14s.io/identity`
    /// names `named_group` and `api_version` for its own, or `None` when the server's versions
    /// of the kind were not noted ([`Needs::note_shared_versions`]). kapp lists the object once
    /// through each group and version that serves it in its scope, calls each copy whose group
    /// is not the one its identity names transient, and keeps, of the copies of one UID, the one
    /// whose `apiVersion` is the identity's, else the first listed (carvel-dev/kapp
    /// `pkg/kapp/resources/identified_resources_list.go` `List`, `pickPreferredVersions`;
    /// `identity_annotation.go` `Valid`, `MatchesVersion`): the copy is its own when one listed
    /// copy has the identity's group and version, or when every listed copy has its group. A
    /// mix, where discovery's order decides, is not taken for its own.
    pub fn kapp_sees_own(
        &self,
        app: &str,
        group: &str,
        kind: &str,
        named_group: &str,
        api_version: &str,
    ) -> Option<bool> {
        let sharing = crate::model::identity::groups_sharing(group, kind);
        let served: Vec<(&str, &str)> = self
            .shared_versions
            .iter()
            .filter(|(g, k, _)| k == kind && (g == group || sharing.contains(&g.as_str())))
            .map(|(g, _, v)| (g.as_str(), v.as_str()))
            .collect();
        if served.is_empty() {
            return None;
        }
        let scope = self.kapp_kinds.get(app);
        let in_scope = |g: &str| scope.is_none_or(|kinds| kinds.contains(&(g.to_string(), kind.to_string())));
        let listed: Vec<&(&str, &str)> = served.iter().filter(|(g, _)| in_scope(g)).collect();
        let as_recorded = listed
            .iter()
            .any(|(g, v)| *g == named_group && api_version == crate::model::identity::api_version(g, v));
        let only_its_group = !listed.is_empty() && listed.iter().all(|(g, _)| *g == named_group);
        Some(as_recorded || only_its_group)
    }

    /// Why kapp app `app` never lists an object of `kind` through `group` (the group its identity
    /// names, see [`Needs::kapp_sees_own`]) when it deploys this set (a kind outside its scope:
    /// [`Needs::scope_kapp`]), if it does not.
    pub fn unlisted_by_kapp(&self, app: &str, group: &str, kind: &str) -> Option<String> {
        let kinds = self.kapp_kinds.get(app)?;
        (!kinds.contains(&(group.to_string(), kind.to_string()))).then(|| {
            format!(
                "kapp: app {app} lists only the kinds its app record's usedGKs and the desired set hold, never {} (carvel-dev/kapp cmd/app/deploy.go newAndUsedGKs)",
                crate::model::identity::kind_with_group(kind, group)
            )
        })
    }

    /// Bounds what the Argo CD stack `app` manages, so prunes, to the kinds `filter` does not
    /// exclude.
    pub fn scope_argo(&mut self, app: &str, filter: &crate::stack::inventory::argo::ResourceFilter) {
        self.argo_filters.insert(app.to_string(), filter.clone());
    }

    /// Why the Argo CD stack `app` never prunes `id` (a kind its Argo CD never manages:
    /// [`Needs::scope_argo`]), if it does not.
    pub fn unmanaged_by_argo(&self, app: &str, id: &ObjectId) -> Option<String> {
        self.argo_filters.get(app)?.excludes(&id.group, &id.kind)
    }

    /// Adds every need of another desired set (a run that judges several stacks).
    pub fn extend(&mut self, other: &Needs) {
        for (id, need) in &other.needed {
            self.insert(id.clone(), need.clone());
        }
        for (app, filter) in &other.argo_filters {
            self.argo_filters.entry(app.clone()).or_insert_with(|| filter.clone());
        }
        for (app, kinds) in &other.kapp_kinds {
            self.kapp_kinds
                .entry(app.clone())
                .or_default()
                .extend(kinds.iter().cloned());
        }
    }

    /// Why the desired set needs this object, in kpt's words, if it does.
    pub fn why(&self, id: &ObjectId) -> Option<String> {
        Some(match self.needed.get(id)? {
            Need::Namespace => format!(
                "kpt: prune skipped: namespace still in use: {} (objects of the new desired set or its inventory live in it)",
                id.name
            ),
            Need::DependsOn { dependent } => {
                format!("kpt: prune skipped: dependent scheduled for apply: {dependent} depends on it (depends-on)")
            }
            Need::MutationSource { dependent } => {
                format!("kpt: prune skipped: dependent scheduled for apply: {dependent} reads it (apply-time-mutation)")
            }
            Need::Definition { dependent } => {
                format!("kpt: prune skipped: dependent scheduled for apply: {dependent} is of the kind it defines")
            }
        })
    }

    /// Whether nothing is needed.
    pub fn is_empty(&self) -> bool {
        self.needed.is_empty() && self.kapp_kinds.is_empty() && self.argo_filters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The annotation as the membership review wrote it, applied with the real kpt (which then
    /// skipped the prune of `src`: "dependent scheduled for apply").
    #[test]
    fn an_apply_time_mutation_names_its_sources() {
        let value = "- sourceRef:\n    kind: ConfigMap\n    name: src\n    namespace: k1\n  sourcePath: $.data.value\n  targetPath: $.data.copied\n- sourceRef: {apiVersion: apps/v1, kind: Deployment, name: d, namespace: k1}\n  sourcePath: $.spec.replicas\n  targetPath: $.data.n\n";
        assert_eq!(
            mutation_sources(value),
            [
                ObjectId::new("", "ConfigMap", Some("k1"), "src"),
                ObjectId::new("apps", "Deployment", Some("k1"), "d")
            ]
        );
        assert!(mutation_sources("not: [a list").is_empty());
        assert!(mutation_sources("- {sourcePath: x}").is_empty());
    }
}
