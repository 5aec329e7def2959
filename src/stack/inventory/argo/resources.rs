//! The kinds an Argo CD never manages, so never prunes (membership review 30, F1): its core
//! exclusions (Events, `events.k8s.io`, `metrics.k8s.io`, Leases) and its `argocd-cm`'s
//! `resource.exclusions` and `resource.inclusions` (argo-cd `util/settings/resources_filter.go`
//! `IsExcludedResource`, `util/settings/filtered_resource.go` `Match`). An object of such a kind
//! that carries an Application's tracking id is no member Argo CD would delete.
//!
//! Read conservatively, never to call more an orphan than Argo CD would prune: a rule's
//! `clusters` (or any other field: labels, annotations, selectors of later versions) may or may
//! not name this cluster, so an exclusion rule with one counts as excluding and an inclusion rule
//! with one proves nothing; a group pattern with glob syntax beyond `*` and `?` matches every
//! group when it excludes and none when it includes.

use std::collections::BTreeSet;

use serde_json::Value;

/// Argo CD's core exclusions (`coreExcludedResources`): (group pattern, kind or `*`).
const CORE_EXCLUDED: [(&str, &str); 4] = [
    ("events.k8s.io", "*"),
    ("metrics.k8s.io", "*"),
    ("", "Event"),
    ("coordination.k8s.io", "Lease"),
];

/// Why an `argocd-cm` setting cannot be read as Argo CD reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// It is no YAML.
    #[error("argocd-cm's {setting} cannot be read: {why}")]
    Unreadable {
        /// The setting.
        setting: &'static str,
        /// The parser's words.
        why: String,
    },
    /// It, or an item's field, is not of the shape Argo CD decodes.
    #[error("argocd-cm's {setting} is not a list of rules with lists of strings ({what})")]
    Shape {
        /// The setting.
        setting: &'static str,
        /// What is wrong.
        what: &'static str,
    },
}

/// One `resource.exclusions` / `resource.inclusions` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    groups: Vec<String>,
    kinds: Vec<String>,
    /// It has `clusters` or another field that narrows it to some objects or clusters.
    narrowed: bool,
}

/// What the deciding control planes' settings exclude from every Application's management.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceFilter {
    exclusions: Vec<Rule>,
    inclusions: Vec<Rule>,
}

impl ResourceFilter {
    /// Adds one `argocd-cm`'s `resource.exclusions` and `resource.inclusions` (YAML lists as
    /// Argo CD reads them); an error names the setting it cannot read (Argo CD fails to load
    /// its settings then, and syncs nothing).
    pub fn add(&mut self, exclusions: Option<&str>, inclusions: Option<&str>) -> Result<(), SettingError> {
        self.exclusions.extend(rules(exclusions, "resource.exclusions")?);
        self.inclusions.extend(rules(inclusions, "resource.inclusions")?);
        Ok(())
    }

    /// Why Argo CD never manages objects of (group, kind), if it does not.
    pub fn excludes(&self, group: &str, kind: &str) -> Option<String> {
        let shown = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        if CORE_EXCLUDED
            .iter()
            .any(|(g, k)| *g == group && (*k == "*" || *k == kind))
        {
            return Some(format!(
                "Argo CD never manages {shown} (a core exclusion: argo-cd util/settings/resources_filter.go coreExcludedResources), so never prunes it"
            ));
        }
        if self.exclusions.iter().any(|rule| rule.excludes(group, kind)) {
            return Some(format!(
                "argocd-cm's resource.exclusions exclude {shown}: Argo CD never manages it, so never prunes it"
            ));
        }
        let included = self.inclusions.iter().any(|rule| rule.includes(group, kind));
        (!self.inclusions.is_empty() && !included).then(|| {
            format!(
                "argocd-cm's resource.inclusions do not include {shown}: Argo CD never manages it, so never prunes it"
            )
        })
    }

    /// The kinds of `kinds` it excludes, for a record to carry (compared by the re-check).
    pub fn excluded<'a>(&self, kinds: impl Iterator<Item = (&'a str, &'a str)>) -> BTreeSet<(String, String)> {
        kinds
            .filter(|(group, kind)| self.excludes(group, kind).is_some())
            .map(|(group, kind)| (group.to_string(), kind.to_string()))
            .collect()
    }
}

impl Rule {
    fn kind_matches(&self, kind: &str) -> bool {
        self.kinds.is_empty() || self.kinds.iter().any(|k| k == "*" || k == kind)
    }

    /// As an exclusion: a narrowed rule, or a pattern this reader cannot read, excludes.
    fn excludes(&self, group: &str, kind: &str) -> bool {
        let group_matches = self.groups.is_empty() || self.groups.iter().any(|g| glob(g, group).unwrap_or(true));
        group_matches && self.kind_matches(kind)
    }

    /// As an inclusion: only a rule that surely applies includes.
    fn includes(&self, group: &str, kind: &str) -> bool {
        let group_matches = self.groups.is_empty() || self.groups.iter().any(|g| glob(g, group).unwrap_or(false));
        !self.narrowed && group_matches && self.kind_matches(kind)
    }
}

/// The rules of one setting.
fn rules(text: Option<&str>, setting: &'static str) -> Result<Vec<Rule>, SettingError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    let value: Value = serde_saphyr::from_str(text).map_err(|err| SettingError::Unreadable {
        setting,
        why: err.to_string(),
    })?;
    match value {
        Value::Array(items) => items.iter().map(|item| rule(item, setting)).collect(),
        Value::Null => Ok(Vec::new()),
        _ => Err(SettingError::Shape {
            setting,
            what: "not a list",
        }),
    }
}

fn rule(item: &Value, setting: &'static str) -> Result<Rule, SettingError> {
    let shape = |what| SettingError::Shape { setting, what };
    let Value::Object(fields) = item else {
        return Err(shape("an item is not a mapping"));
    };
    let strings = |key: &str| -> Result<Vec<String>, SettingError> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(values)) => values
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| shape("a list holds no string"))
                })
                .collect(),
            Some(_) => Err(shape("apiGroups or kinds is not a list")),
        }
    };
    let narrowed = fields.iter().any(|(key, value)| {
        !matches!(key.as_str(), "apiGroups" | "kinds") && !value.is_null() && value != &Value::Array(Vec::new())
    });
    Ok(Rule {
        groups: strings("apiGroups")?,
        kinds: strings("kinds")?,
        narrowed,
    })
}

/// Whether `text` matches the glob `pattern` (gobwas/glob without separators: `*` any run, `?`
/// one character); `None` when the pattern uses other glob syntax (`[`, `{`, `\`).
fn glob(pattern: &str, text: &str) -> Option<bool> {
    if pattern.contains(['[', ']', '{', '}', '\\']) {
        return None;
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    // Iterative wildcard matching with one backtrack point.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return Some(false);
        }
    }
    while p < pattern.len() && pattern[p] == '*' {
        p += 1;
    }
    Some(p == pattern.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default `resource.exclusions` of Argo CD's install manifests
    /// (`manifests/base/config/argocd-cm.yaml`), abridged.
    const SHIPPED: &str = "- apiGroups:\n  - ''\n  - discovery.k8s.io\n  kinds:\n  - Endpoints\n  - EndpointSlice\n- apiGroups:\n  - coordination.k8s.io\n  kinds:\n  - Lease\n- apiGroups:\n  - cilium.io\n  kinds:\n  - CiliumIdentity\n";

    #[test]
    fn core_and_configured_exclusions_are_never_managed() {
        let mut filter = ResourceFilter::default();
        assert!(filter.excludes("coordination.k8s.io", "Lease").is_some());
        assert!(filter.excludes("", "Event").is_some());
        assert!(filter.excludes("events.k8s.io", "Event").is_some());
        assert!(filter.excludes("metrics.k8s.io", "PodMetrics").is_some());
        assert!(filter.excludes("", "ConfigMap").is_none());
        filter.add(Some(SHIPPED), None).unwrap();
        assert!(filter.excludes("", "Endpoints").is_some());
        assert!(filter.excludes("discovery.k8s.io", "EndpointSlice").is_some());
        assert!(filter.excludes("cilium.io", "CiliumIdentity").is_some());
        assert!(filter.excludes("cilium.io", "CiliumNetworkPolicy").is_none());
        assert!(filter.excludes("", "ConfigMap").is_none());
        assert!(filter.excludes("apps", "Deployment").is_none());
    }

    #[test]
    fn patterns_clusters_and_inclusions_are_read_to_keep_more() {
        let mut filter = ResourceFilter::default();
        filter
            .add(
                Some("- apiGroups: ['*.crossplane.io']\n  kinds: ['*']\n- kinds: [Secret]\n  clusters: [https://other.example.com]\n"),
                None,
            )
            .unwrap();
        assert!(filter.excludes("pkg.crossplane.io", "Provider").is_some());
        assert!(filter.excludes("crossplane.io", "Provider").is_none());
        filter.add(Some("- apiGroups: ['{a,b}.example.com']\n"), None).unwrap();
        assert!(
            filter.excludes("", "Secret").is_some(),
            "a rule for some cluster may be this one's"
        );
        assert!(
            filter.excludes("whatever.io", "Thing").is_some(),
            "an unread pattern excludes"
        );
        let mut included = ResourceFilter::default();
        included
            .add(None, Some("- apiGroups: ['', apps]\n  kinds: [ConfigMap, Deployment]\n- apiGroups: [batch]\n  clusters: [in-cluster]\n"))
            .unwrap();
        assert!(included.excludes("", "ConfigMap").is_none());
        assert!(included.excludes("apps", "Deployment").is_none());
        assert!(included.excludes("", "Secret").is_some());
        assert!(
            included.excludes("batch", "Job").is_some(),
            "a narrowed inclusion proves nothing"
        );
    }

    #[test]
    fn settings_argo_cd_cannot_read_are_errors() {
        let mut filter = ResourceFilter::default();
        assert!(filter.add(Some("kinds: [Secret]"), None).is_err());
        assert!(filter.add(Some("- kinds: Secret"), None).is_err());
        assert!(filter.add(Some("- [1, 2"), None).is_err());
        assert!(filter.add(Some(""), Some("   ")).is_ok());
    }

    #[test]
    fn globs_match_as_gobwas_does_without_separators() {
        assert_eq!(glob("*", ""), Some(true));
        assert_eq!(glob("*.io", "cilium.io"), Some(true));
        assert_eq!(glob("a?c", "abc"), Some(true));
        assert_eq!(glob("a?c", "ac"), Some(false));
        assert_eq!(glob("*a*b", "xaxxb"), Some(true));
        assert_eq!(glob("apps", "apps.example.com"), Some(false));
        assert_eq!(glob("[ab].io", "a.io"), None);
    }
}
