//! The dependencies people declare in annotations, as their tools parse them: cli-utils
//! `depends-on` references, kapp change rules and groups, Argo CD sync waves.

use std::collections::BTreeMap;

use crate::model::identity::ObjectId;

/// kpt / cli-utils explicit dependency annotation.
pub const KPT_DEPENDS_ON: &str = "config.kubernetes.io/depends-on";
/// Argo CD sync wave annotation.
pub const ARGO_SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// Helm hook weight annotation: Argo CD's wave when `sync-wave` is missing or not a number.
pub const HELM_HOOK_WEIGHT: &str = "helm.sh/hook-weight";
/// kapp change group annotation (also `kapp.k14s.io/change-group.<suffix>`).
pub const KAPP_CHANGE_GROUP: &str = "kapp.k14s.io/change-group";
/// kapp change rule annotation (also `kapp.k14s.io/change-rule.<suffix>`).
pub const KAPP_CHANGE_RULE: &str = "kapp.k14s.io/change-rule";

/// Argo CD's sync wave of an object, as gitops-engine reads it (`pkg/sync/syncwaves/waves.go`,
/// `Wave`): `sync-wave` when Go's `strconv.Atoi` takes it (a sign and digits, no whitespace, in
/// range), else `helm.sh/hook-weight` the same way (`pkg/sync/hook/helm`, `Weight`), else 0.
pub fn argo_sync_wave(annotations: &BTreeMap<String, String>) -> i64 {
    [ARGO_SYNC_WAVE, HELM_HOOK_WEIGHT]
        .iter()
        .find_map(|key| annotations.get(*key).and_then(|value| go_atoi(value)))
        .unwrap_or(0)
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign and decimal digits, nothing else.
pub fn go_atoi(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    match !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        true => text.parse().ok(),
        false => None,
    }
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

    /// Review 15: Argo CD falls back to the Helm hook weight when `sync-wave` is missing or not
    /// a number as Go's `strconv.Atoi` reads one (which trims nothing).
    #[test]
    fn the_argo_wave_is_read_as_gitops_engine_reads_it() {
        let wave = |pairs: &[(&str, &str)]| {
            let annotations: BTreeMap<String, String> =
                pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            argo_sync_wave(&annotations)
        };
        assert_eq!(wave(&[]), 0);
        assert_eq!(wave(&[(ARGO_SYNC_WAVE, "-3")]), -3);
        assert_eq!(wave(&[(ARGO_SYNC_WAVE, "+7"), (HELM_HOOK_WEIGHT, "2")]), 7);
        assert_eq!(wave(&[(HELM_HOOK_WEIGHT, "5")]), 5);
        for unread in [
            " 1",
            "1 ",
            "1.0",
            "",
            "+",
            "-",
            "0x1",
            "1_0",
            "99999999999999999999",
            "\u{0661}",
        ] {
            assert_eq!(
                wave(&[(ARGO_SYNC_WAVE, unread), (HELM_HOOK_WEIGHT, "4")]),
                4,
                "{unread:?}"
            );
            assert_eq!(wave(&[(HELM_HOOK_WEIGHT, unread)]), 0, "{unread:?}");
        }
    }

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
