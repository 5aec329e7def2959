//! Parents that would resurrect what a teardown deletes. A tracking object in the plan (a
//! Kustomization, a HelmRelease, an Argo CD Application) that a live reconciler outside the plan
//! applies (it carries that parent's mark) comes back at the parent's next reconcile. Suspending
//! a Flux parent that its own parent applies does not hold: the grandparent reverts
//! `spec.suspend` (fluxcd/flux2#3462). So the parents are found up the whole chain, and a
//! parent counts as held only when it is suspended and every parent above it is held too.
//!
//! Only reconcilers re-create: Flux Kustomizations and HelmReleases, and Argo CD Applications
//! (which kubectl-stack cannot suspend). kpt inventories, ApplySet parents, kapp and Helm
//! releases re-create nothing by themselves.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::core::ObjectMeta;
use kube::Client;
use serde::Serialize;

use crate::cluster::collect::{api_for, Listed};
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::model::identity::ObjectId;
use crate::model::trackers::{Mark, Preset, FLUX_KINDS};
use crate::stack::keep::TornDown;
use crate::stack::members::full_marks;
use crate::stack::members::tracker_key;

/// A live reconciler outside the plan that applies a planned object or another such parent.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Parent {
    /// The parent.
    pub id: ObjectId,
    /// Its kind.
    #[serde(skip)]
    pub kind: Arc<KindInfo>,
    /// Its UID.
    pub uid: String,
    /// What it applies: planned objects, or parents below it.
    pub applies: Vec<ObjectId>,
    /// Whether it applies a planned object itself (not only a parent).
    pub applies_planned: bool,
    /// `spec.suspend` as read before the run (`None` until read; Argo CD has none).
    pub suspended: Option<bool>,
}

impl Parent {
    /// Whether kubectl-stack can suspend it (a Flux object).
    pub fn suspendable(&self) -> bool {
        FLUX_KINDS.contains(&(self.id.group.as_str(), self.id.kind.as_str()))
    }
}

/// Whether a mark's tool reconciles (re-applies what it tracks by itself).
fn reconciles(mark: &Mark) -> bool {
    matches!(mark.preset, Preset::Flux | Preset::FluxHelm | Preset::ArgoCd)
}

/// The live tracking object a mark names, among the listed objects.
fn parent_of<'a>(mark: &Mark, trackers: &HashMap<(Preset, String), Vec<&'a Listed>>) -> Option<&'a Listed> {
    trackers
        .get(&(mark.preset, mark.value.name.clone()))?
        .iter()
        .copied()
        .find(|o| mark.value.namespace.is_none() || o.namespace() == mark.value.namespace.as_deref())
}

/// The parents of the planned tracking objects, up their chains. `planned` are the planned
/// objects; `objects` every listed object (the parents are among them).
pub fn find_parents<'a>(
    planned: impl IntoIterator<Item = &'a Listed>,
    objects: impl IntoIterator<Item = &'a Listed>,
    torn_down: &TornDown,
) -> Vec<Parent> {
    let mut trackers: HashMap<(Preset, String), Vec<&Listed>> = HashMap::new();
    for object in objects {
        if let Some((preset, value)) = tracker_key(object) {
            trackers.entry((preset, value.name)).or_default().push(object);
        }
    }
    let planned: Vec<&Listed> = planned.into_iter().collect();
    let planned_ids: HashSet<ObjectId> = planned.iter().map(|o| o.id()).collect();
    let mut found: BTreeMap<ObjectId, Parent> = BTreeMap::new();
    let mut queue: Vec<(&Listed, bool)> = planned
        .into_iter()
        .filter(|o| tracker_key(o).is_some())
        .map(|o| (o, true))
        .collect();
    while let Some((child, child_planned)) = queue.pop() {
        for mark in full_marks(&child.meta) {
            if !reconciles(&mark) || torn_down.covers(&mark) {
                continue;
            }
            let Some(parent) = parent_of(&mark, &trackers) else {
                continue;
            };
            let id = parent.id();
            if planned_ids.contains(&id) || id == child.id() {
                continue;
            }
            let first_visit = !found.contains_key(&id);
            let entry = found.entry(id.clone()).or_insert_with(|| Parent {
                id,
                kind: parent.kind.clone(),
                uid: parent.uid().to_string(),
                applies: Vec::new(),
                applies_planned: false,
                suspended: None,
            });
            if !entry.applies.contains(&child.id()) {
                entry.applies.push(child.id());
            }
            entry.applies_planned |= child_planned;
            if first_visit {
                queue.push((parent, false));
            }
        }
    }
    found.into_values().collect()
}

/// The live reconciler that keeps re-creating an object (for `stuck` and the blockers report):
/// the tracking object, among `listed`, of a Flux or Argo CD mark the object carries, when that
/// tracking object is not being deleted itself. Returns it with the mark that names it.
pub fn recreating_parent<'a>(
    meta: &ObjectMeta,
    listed: impl IntoIterator<Item = &'a Listed>,
) -> Option<(ObjectId, String)> {
    let mut trackers: HashMap<(Preset, String), Vec<&Listed>> = HashMap::new();
    for object in listed {
        if let Some((preset, value)) = tracker_key(object) {
            trackers.entry((preset, value.name)).or_default().push(object);
        }
    }
    full_marks(meta).into_iter().filter(reconciles).find_map(|mark| {
        let parent = parent_of(&mark, &trackers).filter(|p| !p.is_terminating())?;
        Some((parent.id(), mark.to_string()))
    })
}

/// A Flux parent whose `spec.suspend` could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot read {parent}: {cause}")]
pub struct SuspendReadError {
    /// The parent.
    pub parent: ObjectId,
    /// The root cause.
    pub cause: String,
}

/// Reads `spec.suspend` of every Flux parent.
pub async fn read_suspended(client: &Client, parents: &mut [Parent]) -> Result<(), SuspendReadError> {
    for parent in parents.iter_mut().filter(|p| p.suspendable()) {
        let api = api_for(client, &parent.kind, parent.id.namespace.as_deref());
        let current = with_retries("get", || api.get_opt(&parent.id.name))
            .await
            .map_err(|err| SuspendReadError {
                parent: parent.id.clone(),
                cause: crate::error::root_cause(&err),
            })?;
        parent.suspended = Some(
            current
                .and_then(|o| o.data.pointer("/spec/suspend").and_then(serde_json::Value::as_bool))
                .unwrap_or(false),
        );
    }
    Ok(())
}

/// The parents whose suspension does not hold: not suspended, or applied by a parent whose own
/// suspension does not hold (it would revert theirs). Those that apply a planned object would
/// re-create it.
pub fn not_held(parents: &[Parent]) -> Vec<&Parent> {
    let by_id: HashMap<&ObjectId, &Parent> = parents.iter().map(|p| (&p.id, p)).collect();
    let mut above: HashMap<&ObjectId, Vec<&ObjectId>> = HashMap::new();
    for parent in parents {
        for child in &parent.applies {
            above.entry(child).or_default().push(&parent.id);
        }
    }
    let holds = |start: &ObjectId| {
        let mut queue = vec![start];
        let mut seen = HashSet::new();
        while let Some(current) = queue.pop() {
            if !seen.insert(current) {
                continue;
            }
            if by_id.get(current).and_then(|p| p.suspended) != Some(true) {
                return false;
            }
            queue.extend(above.get(current).cloned().unwrap_or_default());
        }
        true
    };
    parents.iter().filter(|p| p.applies_planned && !holds(&p.id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trackers::{FLUX_KS_NAME, FLUX_KS_NAMESPACE};
    use kube::core::ObjectMeta;

    fn ks(name: &str, parent: Option<&str>) -> Listed {
        let labels = parent.map(|p| {
            [
                (FLUX_KS_NAME.to_string(), p.to_string()),
                (FLUX_KS_NAMESPACE.to_string(), "flux-system".to_string()),
            ]
            .into()
        });
        Listed::new(
            Arc::new(KindInfo {
                group: "kustomize.toolkit.fluxcd.io".into(),
                version: "v1".into(),
                kind: "Kustomization".into(),
                plural: "kustomizations".into(),
                singular: "kustomization".into(),
                short_names: vec![],
                namespaced: true,
                verbs: vec![],
            }),
            ObjectMeta {
                name: Some(name.into()),
                namespace: Some("flux-system".into()),
                uid: Some(format!("uid-{name}")),
                labels,
                ..Default::default()
            },
        )
    }

    #[test]
    fn the_live_parent_that_keeps_recreating_an_object_is_named() {
        let objects = [ks("root", None), ks("apps", Some("root"))];
        let (parent, mark) = recreating_parent(&objects[1].meta, &objects).unwrap();
        assert_eq!(parent.name, "root");
        assert_eq!(mark, "flux:flux-system/root");
        assert!(recreating_parent(&objects[0].meta, &objects).is_none());
        let mut dying = objects[0].clone();
        dying.meta.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(
            recreating_parent(&objects[1].meta, [&dying]).is_none(),
            "a parent being deleted re-creates nothing"
        );
    }

    #[test]
    fn parents_are_found_up_the_chain_and_hold_only_when_all_above_are_suspended() {
        let objects = [ks("root", None), ks("apps", Some("root")), ks("shop", Some("apps"))];
        let parents = find_parents([&objects[2]], &objects, &TornDown::default());
        let names: Vec<(&str, bool)> = parents
            .iter()
            .map(|p| (p.id.name.as_str(), p.applies_planned))
            .collect();
        assert_eq!(names, vec![("apps", true), ("root", false)]);
        let with = |apps: bool, root: bool| {
            let mut parents = parents.clone();
            parents[0].suspended = Some(apps);
            parents[1].suspended = Some(root);
            not_held(&parents).iter().map(|p| p.id.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(with(false, false), vec!["apps"]);
        assert_eq!(with(true, false), vec!["apps"], "root would revert the suspend of apps");
        assert!(with(true, true).is_empty());
        // A parent torn down too is no parent.
        let torn_down = TornDown::new([tracker_key(&objects[1]).unwrap()]);
        let none = find_parents([&objects[2], &objects[1]], &objects, &torn_down);
        assert_eq!(
            none.iter().map(|p| p.id.name.as_str()).collect::<Vec<_>>(),
            vec!["root"]
        );
    }
}
