//! kapp versioned resources, read as kapp reads them (carvel-dev/kapp
//! `pkg/kapp/diff/versioned_resource.go` and `change_set_with_versioned_rs.go`). A manifest
//! annotated `kapp.k14s.io/versioned` is applied as `NAME-ver-N`, N one more than the newest
//! live version at each change. On each deploy kapp keeps the newest `kapp.k14s.io/num-versions`
//! (default 5) of the live versions of a base name still in the manifests and deletes the older
//! ones; a base name gone from the manifests loses every version. So a live `NAME-ver-N` among
//! the kept ones is desired, though no manifest names it (review 15: they were called orphans).
//!
//! Where kapp stops instead (a `num-versions` that is not a number of at least 1, a live version
//! that is not a number: kapp errors or panics), it deletes nothing of that base name, and every
//! version of it is kept here too.

use std::collections::HashMap;

use crate::cluster::collect::Listed;
use crate::model::annotations::go_atoi;
use crate::model::identity::ObjectId;
use crate::model::trackers::{marks, Preset};
use crate::stack::manifest::Manifest;

/// The annotation that makes kapp version a resource (its value is ignored).
pub const KAPP_VERSIONED: &str = "kapp.k14s.io/versioned";
/// How many versions kapp keeps (default [`DEFAULT_VERSIONS`]).
pub const KAPP_NUM_VERSIONS: &str = "kapp.k14s.io/num-versions";
/// kapp's default of [`KAPP_NUM_VERSIONS`].
pub const DEFAULT_VERSIONS: usize = 5;
/// What separates the base name from the version.
const VERSION_SEPARATOR: &str = "-ver-";

/// A versioned resource by its base name: group, kind, namespace, base name.
type BaseKey = (String, String, Option<String>, String);

/// A name split as kapp splits it (`BaseNameAndVersion`): the base before the last `-ver-`, and
/// the version after it (empty: no version).
fn split(name: &str) -> (&str, &str) {
    name.rsplit_once(VERSION_SEPARATOR).unwrap_or((name, ""))
}

fn key_of(id: &ObjectId) -> BaseKey {
    let (base, _) = split(&id.name);
    (
        id.group.clone(),
        id.kind.clone(),
        id.namespace.clone(),
        base.to_string(),
    )
}

/// What the desired manifests ask kapp to version: for each base name, how many live versions
/// kapp keeps, or `None` where it would stop (a `num-versions` it refuses).
#[derive(Debug, Clone, Default)]
pub struct VersionedDesired(HashMap<BaseKey, Option<usize>>);

impl VersionedDesired {
    /// Notes the manifest resolved to `id` if it is versioned. Of two manifests of one base name,
    /// the one keeping more wins (where kapp would stop, all are kept).
    pub fn add(&mut self, id: &ObjectId, manifest: &Manifest) {
        if manifest.annotation(KAPP_VERSIONED).is_none() {
            return;
        }
        let keep = match manifest.annotation(KAPP_NUM_VERSIONS) {
            None => Some(DEFAULT_VERSIONS),
            Some(text) => go_atoi(text)
                .filter(|n| *n >= 1)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        };
        let entry = self.0.entry(key_of(id)).or_insert(keep);
        *entry = match (*entry, keep) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
    }

    /// Whether nothing is versioned.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The live versions of each versioned resource of each kapp app, as listed: their numbers,
/// or `None` where one is no number (kapp panics sorting them and deletes nothing).
#[derive(Debug, Clone, Default)]
pub struct LiveVersions(HashMap<(String, BaseKey), Option<Vec<i64>>>);

/// The kapp app and the version of a live versioned resource kapp counts (`existingVersionedResources`:
/// annotated, named with a version, not transient, i.e. not made by a controller).
fn live_version(object: &Listed) -> Option<(String, BaseKey, &str)> {
    let annotated = object.meta.annotations.as_ref()?.contains_key(KAPP_VERSIONED);
    let (_, version) = split(object.name());
    if !annotated || version.is_empty() || object.controller_owner().is_some() {
        return None;
    }
    let app = marks(&object.meta)
        .into_iter()
        .find(|m| m.preset == Preset::Kapp)?
        .value
        .name;
    Some((app, key_of(&object.id()), version))
}

impl LiveVersions {
    /// The versions among the listed objects.
    pub fn of<'a>(objects: impl IntoIterator<Item = &'a Listed>) -> Self {
        let mut found: HashMap<(String, BaseKey), Option<Vec<i64>>> = HashMap::new();
        for object in objects {
            let Some((app, key, version)) = live_version(object) else {
                continue;
            };
            let versions = found.entry((app, key)).or_insert_with(|| Some(Vec::new()));
            match (versions.as_mut(), go_atoi(version)) {
                (Some(list), Some(number)) => list.push(number),
                _ => *versions = None,
            }
        }
        Self(found)
    }

    /// Whether kapp keeps this live object as a version of a versioned manifest of `desired`.
    pub fn keeps(&self, object: &Listed, desired: &VersionedDesired) -> bool {
        if desired.is_empty() {
            return false;
        }
        let Some((app, key, version)) = live_version(object) else {
            return false;
        };
        let Some(keep) = desired.0.get(&key) else {
            return false;
        };
        let (Some(keep), Some(Some(versions)), Some(version)) = (keep, self.0.get(&(app, key)), go_atoi(version))
        else {
            return true;
        };
        versions.iter().filter(|v| **v > version).count() < *keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::kind;
    use kube::core::ObjectMeta;
    use std::sync::Arc;

    fn live(name: &str, app: &str, versioned: bool) -> Listed {
        let annotations = versioned.then(|| [(KAPP_VERSIONED.to_string(), String::new())].into());
        Listed::new(
            Arc::new(kind("", "ConfigMap", true)),
            ObjectMeta {
                name: Some(name.into()),
                namespace: Some("kv".into()),
                uid: Some(name.into()),
                labels: Some([("kapp.k14s.io/app".to_string(), app.to_string())].into()),
                annotations,
                ..Default::default()
            },
        )
    }

    fn desired(name: &str, num_versions: Option<&str>) -> VersionedDesired {
        let mut annotations = serde_json::json!({ KAPP_VERSIONED: "" });
        if let Some(n) = num_versions {
            annotations[KAPP_NUM_VERSIONS] = n.into();
        }
        let manifest = Manifest {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: name.into(),
            namespace: Some("kv".into()),
            source: "test".into(),
            body: serde_json::json!({ "metadata": { "annotations": annotations } }),
        };
        let mut set = VersionedDesired::default();
        set.add(&ObjectId::new("", "ConfigMap", Some("kv"), name), &manifest);
        set
    }

    fn kept(objects: &[Listed], set: &VersionedDesired) -> Vec<String> {
        let versions = LiveVersions::of(objects);
        objects
            .iter()
            .filter(|o| versions.keeps(o, set))
            .map(|o| o.name().to_string())
            .collect()
    }

    #[test]
    fn kapp_keeps_the_newest_versions_of_a_versioned_manifest() {
        let objects: Vec<Listed> = (1..=7)
            .map(|n| live(&format!("settings-ver-{n}"), "a1", true))
            .chain([
                live("settings", "a1", true),
                live("settings-ver-9", "other-app", true),
                live("settings-ver-8", "a1", false),
            ])
            .collect();
        // Another app's versions are counted apart (they push none of these out); an object
        // without the annotation or without a version is none.
        assert_eq!(
            kept(&objects, &desired("settings", None)),
            [
                "settings-ver-3",
                "settings-ver-4",
                "settings-ver-5",
                "settings-ver-6",
                "settings-ver-7",
                "settings-ver-9"
            ]
        );
        assert_eq!(
            kept(&objects, &desired("settings", Some("2"))),
            ["settings-ver-6", "settings-ver-7", "settings-ver-9"]
        );
        // A versioned manifest named with a version has the same base name.
        assert_eq!(
            kept(&objects, &desired("settings-ver-1", Some("1"))),
            ["settings-ver-7", "settings-ver-9"]
        );
        // Gone from the manifests: every version goes, as kapp deletes them.
        assert!(kept(&objects, &desired("another", None)).is_empty());
        assert!(kept(&objects, &VersionedDesired::default()).is_empty());
    }

    #[test]
    fn where_kapp_would_stop_every_version_is_kept() {
        let objects: Vec<Listed> = (1..=7).map(|n| live(&format!("s-ver-{n}"), "a1", true)).collect();
        for refused in ["0", "-1", "two", " 2", ""] {
            assert_eq!(kept(&objects, &desired("s", Some(refused))).len(), 7, "{refused:?}");
        }
        let mut odd = objects.clone();
        odd.push(live("s-ver-x", "a1", true));
        assert_eq!(kept(&odd, &desired("s", Some("1"))).len(), 8);
    }
}
