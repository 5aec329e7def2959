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

/// Whether kapp never lists objects of this group and kind: core `v1` Events and
/// ComponentStatuses (carvel-dev/kapp `pkg/kapp/resources/identified_resources_list.go` `List`,
/// "eliminating events"); an Event is listed through `events.k8s.io` only.
pub fn kapp_never_lists(group: &str, kind: &str) -> bool {
    group.is_empty() && matches!(kind, "Event" | "ComponentStatus")
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
    /// The kinds each kapp app (by label value) may list when it deploys this set, one scope
    /// per app record: its `usedGKs` and the set's own kinds ([`Needs::scope_kapp`]).
    kapp_kinds: HashMap<String, Vec<HashSet<(String, String)>>>,
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

    /// Bounds what kapp app `app` lists when it deploys this set, for each of its app records'
    /// `used` kinds (`usedGKs`), to those and `desired`, the (group, kind) of each new manifest as
    /// written (kapp's `newAndUsedGKs` reads each `apiVersion` as it is: an Ingress written as
    /// `extensions/v1beta1` lists `extensions` Ingresses). kapp adds Pods when it follows their
    /// logs (`--logs`, the default) and lists every kind for an empty scope: an empty scope is
    /// taken as Pods only, what it lists either way; a Pod outside a scope is taken as unlisted
    /// (carvel-dev/kapp `pkg/kapp/cmd/app/deploy.go` `newAndUsedGKs`,
    /// `identified_resources_list.go` `List`: `len(GKsScope) > 0`).
    pub fn scope_kapp(
        &mut self,
        app: &str,
        used: &[Vec<(String, String)>],
        desired: impl Iterator<Item = (String, String)>,
    ) {
        if used.is_empty() {
            return;
        }
        let desired: HashSet<(String, String)> = desired.collect();
        let scopes = used.iter().map(|kinds| {
            let mut scope: HashSet<(String, String)> = kinds.iter().cloned().collect();
            scope.extend(desired.iter().cloned());
            if scope.is_empty() {
                scope.insert((String::new(), "Pod".to_string()));
            }
            scope
        });
        self.kapp_kinds.entry(app.to_string()).or_default().extend(scopes);
    }

    /// Notes the (group, kind, version) the server serves, of those `served` holds, for the
    /// kinds served under several groups (what [`Needs::kapp_sees_own`] reads).
    pub fn note_shared_versions(&mut self, served: impl Iterator<Item = (String, String, String)>) {
        let shared = served.filter(|(group, kind, _)| !crate::model::identity::groups_sharing(group, kind).is_empty());
        self.shared_versions.extend(shared);
    }

    /// Whether kapp app `app`, deploying this set, takes an object of `kind` (listed under its
    /// canonical `group`, a kind served under several groups) whose `kapp.k14s.io/identity`
    /// names `named_group` and `api_version` for its own, whichever app record it reads; `None`
    /// when the server's versions of the kind were not noted ([`Needs::note_shared_versions`]).
    /// kapp lists the object once through each group and version that serves it in its scope
    /// (never core `v1` Events: [`kapp_never_lists`]), calls each copy whose group is not the one
    /// its identity names transient, and keeps, of the copies of one UID, the one whose
    /// `apiVersion` is the identity's, else the first by `apiVersion` (carvel-dev/kapp
    /// `pkg/kapp/resources/identified_resources_list.go` `List`, `pickPreferredVersions`;
    /// `identity_annotation.go` `Valid`, `MatchesVersion`).
    pub fn kapp_sees_own(
        &self,
        app: &str,
        group: &str,
        kind: &str,
        named_group: &str,
        api_version: &str,
    ) -> Option<bool> {
        let sharing = crate::model::identity::groups_sharing(group, kind);
        let mut served: Vec<(&str, &str)> = self
            .shared_versions
            .iter()
            .filter(|(g, k, _)| k == kind && (g == group || sharing.contains(&g.as_str())))
            .map(|(g, _, v)| (g.as_str(), v.as_str()))
            .collect();
        if served.is_empty() {
            return None;
        }
        served.retain(|(g, _)| !kapp_never_lists(g, kind));
        served.sort_by_key(|(g, v)| crate::model::identity::api_version(g, v));
        let every_kind = [None];
        let scopes: Vec<Option<&HashSet<(String, String)>>> = match self.kapp_kinds.get(app) {
            Some(scopes) if !scopes.is_empty() => scopes.iter().map(Some).collect(),
            _ => every_kind.to_vec(),
        };
        let own_under = |scope: Option<&HashSet<(String, String)>>| {
            let in_scope = |g: &str| scope.is_none_or(|kinds| kinds.contains(&(g.to_string(), kind.to_string())));
            let listed: Vec<&(&str, &str)> = served.iter().filter(|(g, _)| in_scope(g)).collect();
            let as_recorded = listed
                .iter()
                .any(|(g, v)| *g == named_group && api_version == crate::model::identity::api_version(g, v));
            as_recorded || listed.first().is_some_and(|(g, _)| *g == named_group)
        };
        Some(scopes.into_iter().all(own_under))
    }

    /// Why kapp app `app` never lists an object of `kind` through `group` (the group its identity
    /// names, see [`Needs::kapp_sees_own`]) when it deploys this set (a kind outside the scope
    /// of one of its app records: [`Needs::scope_kapp`]), if it does not.
    pub fn unlisted_by_kapp(&self, app: &str, group: &str, kind: &str) -> Option<String> {
        let scopes = self.kapp_kinds.get(app)?;
        let key = (group.to_string(), kind.to_string());
        scopes.iter().any(|kinds| !kinds.contains(&key)).then(|| {
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
        for (app, scopes) in &other.kapp_kinds {
            self.kapp_kinds
                .entry(app.clone())
                .or_default()
                .extend(scopes.iter().cloned());
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

    /// Review 33, F5: a record with an empty `usedGKs` and an empty new set lists Pods only
    /// (kapp adds them for their logs, and lists every kind for an empty scope: Pods either way).
    #[test]
    fn an_empty_kapp_scope_lists_pods_only() {
        let mut needs = Needs::default();
        needs.scope_kapp("1", &[Vec::new()], std::iter::empty());
        assert!(needs.unlisted_by_kapp("1", "", "Secret").is_some());
        assert_eq!(needs.unlisted_by_kapp("1", "", "Pod"), None);
        let mut unbounded = Needs::default();
        unbounded.scope_kapp("1", &[], std::iter::empty());
        assert_eq!(
            unbounded.unlisted_by_kapp("1", "", "Secret"),
            None,
            "no record holds usedGKs"
        );
    }

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
