//! The dependencies people declare in annotations: Argo CD sync waves, kapp change groups and
//! rules, and cli-utils `depends-on` references, parsed as their tools parse them.

use std::collections::{BTreeMap, HashMap};

use super::memberships::object_meta;
use super::{Edge, EdgeKind, NodeInput, ARGO_SYNC_WAVE, KAPP_CHANGE_GROUP, KAPP_CHANGE_RULE, KPT_DEPENDS_ON};
use crate::identity::ObjectId;
use crate::stack::trackers::{marks, Preset};

/// Argo CD: objects of one app in wave N depend on the objects of the nearest earlier wave
/// (earlier waves follow transitively). No annotation means wave 0.
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
        let wave = input
            .annotations
            .get(ARGO_SYNC_WAVE)
            .and_then(|w| w.trim().parse::<i64>().ok())
            .unwrap_or(0);
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
            groups.entry(group).or_default().push(index);
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
            for &other in groups.get(rule.group).map(Vec::as_slice).unwrap_or_default() {
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

/// A kapp change rule: `(upsert|delete) (after|before) (upserting|deleting) GROUP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KappRule<'a> {
    /// `upsert` or `delete`: what happens to the object.
    pub action: &'a str,
    /// `before` or `after`.
    pub order: &'a str,
    /// `upserting` or `deleting`: what happens to the group.
    pub target_action: &'a str,
    /// The change group.
    pub group: &'a str,
}

const KAPP_EXPECTED: &str = "expected \"(upsert|delete) (after|before) (upserting|deleting) GROUP\"";
const DEPENDS_ON_EXPECTED: &str = "expected <group>/<kind>/<name> or <group>/namespaces/<namespace>/<kind>/<name>";

/// What is wrong with a dependency annotation (a kapp change rule or a `depends-on` reference).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationError {
    /// A kapp change rule that is not four pieces.
    #[error("{count} piece(s), {KAPP_EXPECTED}")]
    KappPieces {
        /// How many pieces it has.
        count: usize,
    },
    /// A kapp change rule with a piece outside its fixed set, or an empty group.
    #[error("{KAPP_EXPECTED}")]
    KappUnknown,
    /// A namespaced `depends-on` reference without its `namespaces` field.
    #[error("reference {reference:?}: missing \"namespaces\" field, {DEPENDS_ON_EXPECTED}")]
    MissingNamespaces {
        /// The reference, trimmed.
        reference: String,
    },
    /// A `depends-on` reference of the wrong length, or with an empty kind or name.
    #[error("reference {reference:?}: {fields} field(s) or an empty kind or name, {DEPENDS_ON_EXPECTED}")]
    BadReference {
        /// The reference, trimmed.
        reference: String,
        /// How many `/`-separated fields it has.
        fields: usize,
    },
}

impl<'a> KappRule<'a> {
    /// Parses a rule as kapp does (`pkg/kapp/diffgraph/change_rule.go`: four pieces separated
    /// by one space, each from its fixed set, and a non-empty group).
    pub fn parse(value: &'a str) -> Result<Self, AnnotationError> {
        let pieces: Vec<&str> = value.trim().split(' ').collect();
        let [action, order, target_action, group] = pieces.as_slice() else {
            return Err(AnnotationError::KappPieces { count: pieces.len() });
        };
        let known = matches!(*action, "upsert" | "delete")
            && matches!(*order, "before" | "after")
            && matches!(*target_action, "upserting" | "deleting")
            && !group.is_empty();
        if !known {
            return Err(AnnotationError::KappUnknown);
        }
        Ok(Self {
            action,
            order,
            target_action,
            group,
        })
    }
}

/// Parses a `config.kubernetes.io/depends-on` value as cli-utils does
/// (`pkg/object/dependson/strings.go`): references separated by `,`, each
/// `<group>/<kind>/<name>` (cluster-scoped) or `<group>/namespaces/<namespace>/<kind>/<name>`.
pub fn parse_depends_on(value: &str) -> Result<Vec<ObjectId>, AnnotationError> {
    value
        .split(',')
        .map(|reference| {
            let fields = reference.trim().split('/').count();
            if fields == 5 && reference.trim().split('/').nth(1) != Some("namespaces") {
                return Err(AnnotationError::MissingNamespaces {
                    reference: reference.trim().to_string(),
                });
            }
            ObjectId::from_depends_on_ref(reference).ok_or_else(|| AnnotationError::BadReference {
                reference: reference.trim().to_string(),
                fields,
            })
        })
        .collect()
}

/// What is wrong with an object's dependency annotations (`depends-on`, kapp change rules),
/// each as (annotation, the text it holds, why).
pub fn malformed_annotations(annotations: &BTreeMap<String, String>) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for (key, value) in annotations {
        let problem = if key == KPT_DEPENDS_ON {
            parse_depends_on(value).err().map(|e| e.to_string())
        } else if key == KAPP_CHANGE_RULE || key.starts_with(&format!("{KAPP_CHANGE_RULE}.")) {
            KappRule::parse(value).err().map(|e| e.to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            found.push((key.clone(), value.clone(), problem));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kapp_rules_and_depends_on_parse_as_their_tools_do() {
        let rule = KappRule::parse("delete before deleting apps.big.co/db").unwrap();
        assert_eq!(
            (rule.action, rule.order, rule.target_action, rule.group),
            ("delete", "before", "deleting", "apps.big.co/db")
        );
        for bad in [
            "",
            "delete before db",
            "delete  before deleting g",
            "remove before deleting g",
            "delete before deleting g h",
        ] {
            assert!(KappRule::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_depends_on("cert-manager.io/ClusterIssuer/le, apps/namespaces/web/Deployment/api").unwrap(),
            vec![
                ObjectId::new("cert-manager.io", "ClusterIssuer", None, "le"),
                ObjectId::new("apps", "Deployment", Some("web"), "api")
            ]
        );
        let missing = parse_depends_on("apps/web/Deployment/api/x").unwrap_err().to_string();
        assert_eq!(
            missing,
            "reference \"apps/web/Deployment/api/x\": missing \"namespaces\" field, expected <group>/<kind>/<name> or \
             <group>/namespaces/<namespace>/<kind>/<name>"
        );
        assert_eq!(
            parse_depends_on("apps/Deployment").unwrap_err().to_string(),
            "reference \"apps/Deployment\": 2 field(s) or an empty kind or name, expected <group>/<kind>/<name> or \
             <group>/namespaces/<namespace>/<kind>/<name>"
        );
        assert_eq!(
            KappRule::parse("upsert after").unwrap_err().to_string(),
            "2 piece(s), expected \"(upsert|delete) (after|before) (upserting|deleting) GROUP\""
        );
        for bad in ["", "a,", "apps/Deployment", "apps//x", "a/b/c/d"] {
            assert!(parse_depends_on(bad).is_err(), "{bad:?}");
        }
        let mut annotations = BTreeMap::new();
        annotations.insert(KPT_DEPENDS_ON.to_string(), "/ConfigMap".to_string());
        annotations.insert(format!("{KAPP_CHANGE_RULE}.1"), "upsert after deleting g".to_string());
        annotations.insert(format!("{KAPP_CHANGE_RULE}.2"), "upsert after".to_string());
        let found: Vec<String> = malformed_annotations(&annotations)
            .into_iter()
            .map(|(key, _, _)| key)
            .collect();
        assert_eq!(found, vec![KPT_DEPENDS_ON.to_string(), format!("{KAPP_CHANGE_RULE}.2")]);
    }
}
