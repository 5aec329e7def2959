//! Volumes go before their CSI driver: a claim or volume whose driver is deleted first is never
//! released (the driver's finalizers wait for a driver that is gone).

use std::collections::{BTreeSet, HashMap};

use super::{push_all, Objects};
use serde_json::Value;

use crate::graph::{Edge, EdgeKind, NodeInput};
use crate::model::identity::ObjectId;

/// Annotations that name the CSI driver of a PersistentVolumeClaim or PersistentVolume.
const DRIVER_ANNOTATIONS: [&str; 3] = [
    "pv.kubernetes.io/provisioned-by",
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
];

fn text_at<'v>(input: &'v NodeInput, pointer: &str) -> Option<&'v str> {
    input
        .body
        .as_ref()?
        .pointer(pointer)?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// The driver of a volume: its annotations, `spec.csi.driver`, its bound PersistentVolume's
/// driver, or its StorageClass's provisioner.
fn driver_of(objects: &Objects, index: usize) -> Option<String> {
    let input = &objects.inputs[index];
    if let Some(driver) = DRIVER_ANNOTATIONS.iter().find_map(|key| input.annotations.get(*key)) {
        return Some(driver.clone());
    }
    if let Some(driver) = text_at(input, "/spec/csi/driver") {
        return Some(driver.to_string());
    }
    if let Some(volume) = bound_volume(objects, index) {
        if let Some(driver) = driver_of_volume_only(objects, volume) {
            return Some(driver);
        }
    }
    let class = text_at(input, "/spec/storageClassName")?;
    let class = objects.find(&ObjectId::new("storage.k8s.io", "StorageClass", None, class))?;
    objects.inputs[class]
        .body
        .as_ref()?
        .get("provisioner")?
        .as_str()
        .map(str::to_string)
}

fn driver_of_volume_only(objects: &Objects, volume: usize) -> Option<String> {
    let input = &objects.inputs[volume];
    DRIVER_ANNOTATIONS
        .iter()
        .find_map(|key| input.annotations.get(*key).cloned())
        .or_else(|| text_at(input, "/spec/csi/driver").map(str::to_string))
}

/// The StorageClass a claim or volume names (`spec.storageClassName`), when it is in the graph.
/// The deprecated `volume.beta.kubernetes.io/storage-class` annotation names it too.
fn storage_class(objects: &Objects, volume: usize) -> Option<usize> {
    let input = &objects.inputs[volume];
    let name = text_at(input, "/spec/storageClassName").or_else(|| {
        input
            .annotations
            .get("volume.beta.kubernetes.io/storage-class")
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    })?;
    objects.find(&ObjectId::new("storage.k8s.io", "StorageClass", None, name))
}

/// The PersistentVolume a claim is bound to, when it is in the graph.
fn bound_volume(objects: &Objects, claim: usize) -> Option<usize> {
    let input = &objects.inputs[claim];
    if !input.id.group.is_empty() || input.id.kind != "PersistentVolumeClaim" {
        return None;
    }
    let name = text_at(input, "/spec/volumeName")?;
    objects.find(&ObjectId::new("", "PersistentVolume", None, name))
}

/// 4. PersistentVolumeClaims and PersistentVolumes go before the StorageClass their
///    `spec.storageClassName` names, and before their CSI driver: its CSIDriver, its
///    StorageClasses, the controller objects of the stacks that hold them, and the provisioner
///    workloads that serve it wherever they are ([`provisioners_of`]), with what those run with.
///    A claim goes before the volume it is bound to. While one stays, it keeps them all.
pub(super) fn volume_edges(objects: &Objects, edges: &mut Vec<Edge>) {
    let volumes: Vec<usize> = objects
        .of_kind("", "PersistentVolumeClaim")
        .chain(objects.of_kind("", "PersistentVolume"))
        .collect();
    if volumes.is_empty() {
        return;
    }
    let mut driver_objects: HashMap<String, BTreeSet<usize>> = HashMap::new();
    for index in objects.of_kind("storage.k8s.io", "CSIDriver") {
        driver_objects
            .entry(objects.inputs[index].id.name.clone())
            .or_default()
            .insert(index);
    }
    for index in objects.of_kind("storage.k8s.io", "StorageClass") {
        if let Some(provisioner) = objects.inputs[index]
            .body
            .as_ref()
            .and_then(|b| b.get("provisioner"))
            .and_then(Value::as_str)
        {
            driver_objects.entry(provisioner.to_string()).or_default().insert(index);
        }
    }
    let drivers: Vec<Option<String>> = volumes.iter().map(|&volume| driver_of(objects, volume)).collect();
    let known_drivers: BTreeSet<&str> = driver_objects
        .keys()
        .map(String::as_str)
        .chain(drivers.iter().flatten().map(String::as_str))
        .collect();
    let provisioners = super::rbac::provisioner_workloads(objects);
    let mut serving = BTreeSet::new();
    let mut driver_cache: HashMap<String, BTreeSet<usize>> = HashMap::new();
    for (volume, driver) in volumes.into_iter().zip(drivers.iter()) {
        if let Some(class) = storage_class(objects, volume) {
            edges.push(Edge {
                from: volume,
                to: class,
                kind: EdgeKind::InferredStorageClass,
            });
        }
        if let Some(bound) = bound_volume(objects, volume) {
            edges.push(Edge {
                from: volume,
                to: bound,
                kind: EdgeKind::InferredVolume,
            });
        }
        let Some(driver) = driver else {
            continue;
        };
        let targets = driver_cache.entry(driver.clone()).or_insert_with(|| {
            let own = driver_objects.get(driver).cloned().unwrap_or_default();
            let mut all = own.clone();
            for &object in &own {
                all.extend(objects.controllers_of_stack(object));
            }
            let by_workload = provisioners_of(objects, &provisioners, driver, &known_drivers, &all);
            serving.extend(by_workload.iter().copied());
            all.extend(super::with_their_stacks(objects, by_workload));
            all
        });
        push_all(edges, volume, targets.iter().copied(), EdgeKind::InferredStorageDriver);
    }
    super::operators_run_with(objects, &serving, edges);
}

/// The provisioner workloads ([`super::rbac::provisioner_workloads`]) that serve `driver`
/// (order review 7: a CSI driver's controller in another stack than its CSIDriver and
/// StorageClass): those that name it ([`super::rbac::names_driver`]: an argument, an
/// environment value, a label). When none does and `found` (the driver's objects and the
/// controllers of their stacks) holds no workload either, those that name no known driver at all
/// (AWS EBS's controller names its driver nowhere): a volume then keeps every such provisioner,
/// and goes before them all. A driver of the control plane's (`kubernetes.io/...`) has none.
fn provisioners_of(
    objects: &Objects,
    provisioners: &BTreeSet<usize>,
    driver: &str,
    known_drivers: &BTreeSet<&str>,
    found: &BTreeSet<usize>,
) -> BTreeSet<usize> {
    if driver.starts_with("kubernetes.io/") {
        return BTreeSet::new();
    }
    let names = |workload: usize, driver: &str| super::rbac::names_driver(&objects.inputs[workload], driver);
    let named: BTreeSet<usize> = provisioners.iter().copied().filter(|&p| names(p, driver)).collect();
    if !named.is_empty() || found.iter().any(|&index| objects.runs_an_operator(index)) {
        return named;
    }
    provisioners
        .iter()
        .copied()
        .filter(|&p| !known_drivers.iter().any(|known| names(p, known)))
        .collect()
}
