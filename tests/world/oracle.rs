//! Reference oracles, written apart from the production code: what each tool's own garbage
//! collector would delete given its record (and, for orphans, the new desired set), and what the
//! Kubernetes garbage collector and the API server's cascades take with what is deleted. They
//! read the world as its manifests say (labels and annotations as rendered), never through
//! `kubectl_stack`'s parsers.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::{
    flux_v1_gc_mark, inventory_id, kapp_id, stack_name, Elsewhere, Shape, Tool, World, APP, APPLYSET_KINDS, FLUX,
    FLUX_HR, FLUX_NS, OPS, TEAM, UNSERVED,
};
use kubectl_stack::model::identity::ObjectId;

/// Who marks an object, read from its rendered metadata: the world's stacks, and whether a tool
/// with no stack in the world (or a mark of no stack here) marks it too.
pub struct Marking {
    pub stacks: Vec<usize>,
    pub other: bool,
}

/// The stacks and other tools whose marks object `index` carries.
pub fn marking(world: &World, index: usize) -> Marking {
    let (labels, annotations) = world.marks_of(index);
    let label = |key: &str| labels.get(key).map(String::as_str);
    let annotation = |key: &str| annotations.get(key).map(String::as_str);
    let mut stacks = Vec::new();
    for (stack, spec) in world.stacks.iter().enumerate() {
        let name = stack_name(stack);
        let marks = match spec.tool {
            // Both owner labels (fluxcd/pkg `ssa` owner labels; kustomize-controller deletes by both).
            Tool::Flux => {
                label(&format!("{FLUX}/name")) == Some(&name) && label(&format!("{FLUX}/namespace")) == Some(FLUX_NS)
            }
            Tool::FluxHelm => {
                label(&format!("{FLUX_HR}/name")) == Some(&name) && label(&format!("{FLUX_HR}/namespace")) == Some(APP)
            }
            Tool::Kpt => annotation("config.k8s.io/owning-inventory") == Some(&inventory_id(stack)),
            Tool::ApplySet => label("applyset.kubernetes.io/part-of") == Some(&world.applyset_id(stack)),
            Tool::Kapp => label("kapp.k14s.io/app") == Some(&kapp_id(stack)),
            // The sync set's mark for the object itself or for another (a copied label).
            Tool::FluxV1 => label("fluxcd.io/sync-gc-mark").is_some_and(|mark| {
                let id = world.id(index);
                let copied = ObjectId {
                    name: "copied-from".into(),
                    ..id.clone()
                };
                mark == flux_v1_gc_mark(&name, &id) || mark == flux_v1_gc_mark(&name, &copied)
            }),
            Tool::ArgoCd => annotation("argocd.argoproj.io/tracking-id")
                .and_then(|id| id.split_once(':'))
                .is_some_and(|(app, _)| app == name),
        };
        if marks {
            stacks.push(stack);
        }
    }
    // A Helm release other than the one a marking HelmRelease installs (helm-controller names it
    // `<name>` without a targetNamespace: fluxcd/helm-controller `GetReleaseName`).
    let helm_other = annotation("meta.helm.sh/release-name").is_some_and(|release| {
        !stacks
            .iter()
            .any(|s| world.stacks[*s].tool == Tool::FluxHelm && stack_name(*s) == release)
    });
    let kpt_other = annotation("config.k8s.io/owning-inventory").is_some_and(|id| {
        !stacks
            .iter()
            .any(|s| world.stacks[*s].tool == Tool::Kpt && inventory_id(*s) == id)
    });
    let other = helm_other
        || kpt_other
        || annotation("argocd.argoproj.io/tracking-id")
            .is_some_and(|_| !stacks.iter().any(|s| world.stacks[*s].tool == Tool::ArgoCd))
        || label("kapp.k14s.io/app").is_some_and(|_| !stacks.iter().any(|s| world.stacks[*s].tool == Tool::Kapp))
        || label("fluxcd.io/sync-gc-mark")
            .is_some_and(|_| !stacks.iter().any(|s| world.stacks[*s].tool == Tool::FluxV1))
        // Flux v1's legacy stack label is Flux v1's own mark: a sync set that marks the object
        // with its gc mark for the object itself collects it whatever that label says
        // (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go` `AllowedForGC` reads the gc mark
        // alone).
        || label("flux.weave.works/stack").is_some_and(|_| !stacks.iter().any(|s| world.stacks[*s].tool == Tool::FluxV1));
    Marking { stacks, other }
}

/// Whether any tool's keep marker is on the object (`../shared/trackers.md`, "keep" rows: an
/// object so marked is never pruned by kubectl-stack either).
pub fn keep_marked(world: &World, index: usize) -> bool {
    world.objects[index].keep.is_some()
}

/// kustomize-controller, deleting Kustomization `stack`
/// (fluxcd/kustomize-controller `internal/controller/kustomization_controller.go` `finalize`,
/// `finalizerShouldDeleteResources`): only when `deletionPolicy` says so (`MirrorPrune`, the
/// default, follows `spec.prune`; `Delete`, `WaitForTermination` delete; `Orphan` keeps), only
/// `status.inventory` entries that still carry its owner labels. Without a `status.inventory`,
/// kubectl-stack falls back to the labels (README, Known gaps): allowed, and no more.
fn flux_deletes(world: &World, stack: usize, index: usize) -> bool {
    let spec = &world.stacks[stack];
    let deletes = match spec.policy.unwrap_or("MirrorPrune") {
        "MirrorPrune" => spec.prune,
        "Delete" | "WaitForTermination" => true,
        _ => false,
    };
    deletes && spec.elsewhere == Elsewhere::No && (!spec.has_record || world.recorded(stack, index))
}

/// `helm uninstall` (what helm-controller runs when a HelmRelease is deleted; helm/helm
/// `pkg/action/uninstall.go` `Run`: the *latest* revision, whatever its status, and
/// `pkg/action/resource_policy.go` for `helm.sh/resource-policy: keep`): what that revision's
/// manifest lists. No release Secret: nothing.
/// A suspended HelmRelease, or one that installs into another cluster (`spec.kubeConfig`),
/// uninstalls nothing here (fluxcd/helm-controller `reconcileDelete`, `buildRESTClientGetter`).
fn helm_uninstall_deletes(world: &World, stack: usize, index: usize) -> bool {
    let spec = &world.stacks[stack];
    !spec.revisions.is_empty() && spec.elsewhere == Elsewhere::No && world.recorded(stack, index)
}

/// cli-utils/kpt destroy (kubernetes-sigs/cli-utils `pkg/apply/destroyer.go`, `pkg/apply/prune`
/// and `pkg/inventory/policy.go` `CanPrune` with the default `InventoryPolicyMustMatch`): the
/// inventory's objects whose `config.k8s.io/owning-inventory` is this inventory.
fn kpt_deletes(world: &World, stack: usize, index: usize) -> bool {
    world.recorded(stack, index)
}

/// kubectl ApplySet prune (kubernetes/kubectl `pkg/cmd/apply/applyset_pruner.go`
/// `FindAllObjectsToPrune`): members (`part-of` this id) of the parent's `contains-group-kinds`,
/// in the parent's namespace and its `additional-namespaces` (cluster-scoped: by kind alone).
pub fn applyset_holds(world: &World, stack: usize, id: &ObjectId) -> bool {
    let spec = &world.stacks[stack];
    let kind_listed = APPLYSET_KINDS
        .iter()
        .enumerate()
        .any(|(bit, (group, kind))| spec.kinds & 1 << bit != 0 && id.group == *group && id.kind == *kind);
    let namespace_listed = match id.namespace.as_deref() {
        None => true,
        Some(APP) => true,
        Some(other) => spec.extra_namespaces && (other == TEAM || other == "ops"),
    };
    kind_listed && namespace_listed
}

/// Whether stack `stack`'s tool, deleting the whole stack, deletes object `index` (which it marks).
pub fn tool_deletes(world: &World, stack: usize, index: usize) -> bool {
    match world.stacks[stack].tool {
        Tool::Flux => flux_deletes(world, stack, index),
        Tool::FluxHelm => helm_uninstall_deletes(world, stack, index),
        Tool::Kpt => kpt_deletes(world, stack, index),
        Tool::ApplySet => applyset_holds(world, stack, &world.id(index)),
        Tool::ArgoCd => argocd_deletes(world, stack, index),
        // Never torn down (no teardown of theirs exists).
        Tool::Kapp | Tool::FluxV1 => false,
    }
}

/// kapp deploy (carvel-dev/kapp `pkg/kapp/cmd/app/deploy.go`, existing resources of the app
/// label not in the new configuration are deleted) skips transient resources: those whose
/// `kapp.k14s.io/identity` does not name the resource itself
/// (`pkg/kapp/resources/identity_annotation.go` `Valid`); `kapp.k14s.io/delete-strategy:
/// orphan` (docs/apply.md) is a keep marker.
fn kapp_prunes(world: &World, stack: usize, index: usize) -> bool {
    world.recorded(stack, index)
}

/// Flux v1 garbage collection (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go`
/// `collectGarbage`, `AllowedForGC`): an object not in git whose `fluxcd.io/sync-gc-mark` is
/// `makeGCMark(syncSet, its own resource id)`; a copied mark does not qualify.
fn flux_v1_collects(world: &World, stack: usize, index: usize) -> bool {
    world.recorded(stack, index)
}

/// Argo CD deleting an Application with `resources-finalizer.argocd.argoproj.io` (argo-cd
/// `controller/appcontroller.go` `finalizeApplicationDeletion`) and pruning (gitops-engine
/// `pkg/sync`): the resources it manages, those whose tracking id names the object itself
/// (`controller/state.go` `isSelfReferencedObj`: a copied annotation is not its resource).
fn argocd_deletes(world: &World, stack: usize, index: usize) -> bool {
    world.recorded(stack, index)
}

/// The stacks a teardown of the named one takes: it and what depends on it (`spec.dependsOn`),
/// transitively. Naming a copy of an ApplySet parent names no stack.
pub fn torn_down(world: &World) -> HashSet<usize> {
    if world.name_copy {
        return HashSet::new();
    }
    let mut torn: HashSet<usize> = [world.named].into();
    loop {
        let before = torn.len();
        for (index, stack) in world.stacks.iter().enumerate() {
            if stack.depends_on.iter().any(|d| torn.contains(d)) {
                torn.insert(index);
            }
        }
        if torn.len() == before {
            return torn;
        }
    }
}

/// Invariant 1 for a teardown: may the plan delete object `index`? Only when no keep marker is on
/// it, no tool outside the teardown marks it, and every stack that marks it is torn down and
/// would delete it itself.
pub fn teardown_allows(world: &World, torn: &HashSet<usize>, index: usize) -> bool {
    let marking = marking(world, index);
    !keep_marked(world, index)
        && !marking.other
        && !marking.stacks.is_empty()
        && marking
            .stacks
            .iter()
            .all(|s| torn.contains(s) && tool_deletes(world, *s, index))
}

/// Invariant 1 for an orphan prune of the named stack with its record and the new desired set:
/// its tool would prune the object on its next apply (Flux: in `status.inventory` and not built
/// again, kustomize-controller `prune`; Helm upgrade: in the last *deployed* revision and not in
/// the new manifest, helm/helm `pkg/action/upgrade.go`; kpt: in the inventory, owning-inventory
/// this one, not applied again; ApplySet: a member of its kinds and namespaces, not applied
/// again), no keep marker is on it, and no other stack or tool marks it (whether that one would
/// prune it is unknown: it was given no desired set).
pub fn orphan_allows(world: &World, index: usize, strict: bool) -> bool {
    let stack = world.named;
    let spec = &world.stacks[stack];
    let marking = marking(world, index);
    let prunes = match spec.tool {
        // Flux prunes only with `spec.prune` (kustomize-controller `prune`); without a
        // `status.inventory`, kubectl-stack falls back to the labels (README, Known gaps).
        // A suspended stack is not reconciled; one with `spec.kubeConfig` prunes elsewhere.
        Tool::Flux => {
            spec.prune && spec.elsewhere == Elsewhere::No && (!spec.has_record || world.recorded(stack, index))
        }
        Tool::FluxHelm => {
            spec.revisions.contains(&"deployed") && spec.elsewhere == Elsewhere::No && world.recorded(stack, index)
        }
        Tool::Kpt => world.recorded(stack, index),
        Tool::ApplySet => applyset_holds(world, stack, &world.id(index)),
        Tool::ArgoCd => argocd_deletes(world, stack, index),
        Tool::Kapp => kapp_prunes(world, stack, index),
        Tool::FluxV1 => flux_v1_collects(world, stack, index),
    };
    // `strict: false` leaves out the other marks (finding F1, fixed: the caller always asks
    // with `strict: true`).
    !keep_marked(world, index)
        && (!strict || !marking.other && marking.stacks == [stack])
        && marking.stacks.contains(&stack)
        && prunes
        && {
            let documents = documents(world);
            // kpt also keeps what the new set needs (its filters): the other tools do not.
            let needed = spec.tool == Tool::Kpt && kpt_needed(world, &documents, index);
            !desired(world, &documents, index) && !needed
        }
}

/// A document of the new desired set, read as written: (group of its `apiVersion`, kind,
/// namespace, name), and the document.
type Document = ((String, String, Option<String>, String), Value);

/// The documents of the new desired set.
fn documents(world: &World) -> Vec<Document> {
    world
        .desired_documents()
        .into_iter()
        .map(|document| {
            let text = |pointer: &str| document.pointer(pointer).and_then(Value::as_str).map(str::to_string);
            let api_version = text("/apiVersion").unwrap_or_default();
            let group = api_version
                .rsplit_once('/')
                .map(|(group, _)| group.to_string())
                .unwrap_or_default();
            let identity = (
                group,
                text("/kind").unwrap_or_default(),
                text("/metadata/namespace"),
                text("/metadata/name").unwrap_or_default(),
            );
            (identity, document)
        })
        .collect()
}

/// Whether the tools can apply a document: its kind is served. None of group `ops.example.org`
/// is (the world serves no kind of it, and no CRD of the desired set defines one). The tools
/// fail on such a document rather than prune anything (kustomize-controller's server-side
/// dry-run of the whole set, fluxcd/pkg `ssa/manager_apply.go`; kubectl apply returns the
/// mapping error before its prune, `pkg/cmd/apply/apply.go` `Run`; Helm's upgrade fails building
/// the manifest, "resource mapping not found"; cli-utils' validator, `pkg/object/validation`,
/// `ExitEarly`), or Flux v1 drops it from the sync set before its checksums
/// (`pkg/cluster/kubernetes/manifests.go` `setEffectiveNamespaces`: "will be excluded until its
/// scope is available"). kubectl-stack refuses such a set; with `--allow-unresolved` the user
/// vouches that the kind will be served, and the comparison stands on the documents that
/// resolve: a document of an unserved kind keeps nothing, whatever else it names.
fn served(identity: &(String, String, Option<String>, String)) -> bool {
    identity.0 != UNSERVED
}

/// Whether the new desired set holds object `index`, as the named stack's tool tells objects
/// apart: by full identity (group, kind, namespace, name: Flux `ObjMetadata`, Helm's and kpt's
/// `ObjMetadata`, ApplySet's group-kind and name, Argo CD's and kapp's resource keys); Flux v1
/// by `<namespace>:<kind>/<name>` alone (fluxcd/flux 1.x `pkg/resource/id.go` `MakeID`, the keys
/// of `collectGarbage`'s `checksums`). An object renamed or moved there is missing under its
/// own identity: the tool prunes it.
fn desired(world: &World, documents: &[Document], index: usize) -> bool {
    let id = world.id(index);
    let flux_v1 = world.stacks[world.named].tool == Tool::FluxV1;
    documents.iter().any(|(identity, _)| {
        let (group, kind, namespace, name) = identity;
        served(identity)
            && (flux_v1 || *group == id.group)
            && if flux_v1 {
                kind.eq_ignore_ascii_case(&id.kind)
            } else {
                *kind == id.kind
            }
            && *namespace == id.namespace
            && *name == id.name
    })
}

/// kpt's prune filters on the new desired set (kubernetes-sigs/cli-utils
/// `pkg/apply/filter/local-namespaces-filter.go`: a Namespace an applied document lives in;
/// `pkg/apply/filter/dependency-filter.go` with `pkg/object/graph/depends.go`: what an applied
/// document names in `config.kubernetes.io/depends-on`, and the CRD of an applied document's
/// custom kind): kpt keeps it.
fn kpt_needed(world: &World, documents: &[Document], index: usize) -> bool {
    let id = world.id(index);
    documents
        .iter()
        .filter(|(identity, _)| served(identity))
        .any(|((group, kind, namespace, _), document)| {
            let lives_in =
                id.group.is_empty() && id.kind == "Namespace" && namespace.as_deref() == Some(id.name.as_str());
            let defines = id.kind == "CustomResourceDefinition"
                && group == OPS
                && kind == "Gizmo"
                && id.name == format!("gizmos.{OPS}");
            // `<group>/namespaces/<namespace>/<Kind>/<name>`, or `<group>/<Kind>/<name>`.
            let depends = document
                .pointer("/metadata/annotations/config.kubernetes.io~1depends-on")
                .and_then(Value::as_str)
                .is_some_and(|references| {
                    references.split(',').any(|reference| {
                        let fields: Vec<&str> = reference.trim().split('/').collect();
                        let (group, namespace, kind, name) = match fields[..] {
                            [group, "namespaces", namespace, kind, name] => (group, Some(namespace), kind, name),
                            [group, kind, name] => (group, None, kind, name),
                            _ => return false,
                        };
                        group == id.group && namespace == id.namespace.as_deref() && kind == id.kind && name == id.name
                    })
                });
            lives_in || defines || depends
        })
}

/// What dies when `planned` is deleted, as the API server and the garbage collector decide
/// (kubernetes `pkg/controller/namespace/deletion` deletes everything in a deleted Namespace;
/// `apiextensions-apiserver` `crdFinalizer` deletes every custom resource of a deleted CRD;
/// `pkg/controller/garbagecollector` deletes a dependent once **all** its owners are gone).
/// Returns each dead object with how it died.
pub fn dead(world: &World, planned: &HashSet<ObjectId>) -> BTreeMap<usize, Death> {
    let namespace_goes = planned.contains(&ObjectId::new("", "Namespace", None, TEAM));
    let crd_goes = planned.iter().any(|id| id.kind == "CustomResourceDefinition");
    let mut found: BTreeMap<usize, Death> = BTreeMap::new();
    for index in world.present() {
        let id = world.id(index);
        let death = if planned.contains(&id) {
            Some(Death::Planned)
        } else if namespace_goes && id.namespace.as_deref() == Some(TEAM)
            || crd_goes && matches!(world.objects[index].shape, Shape::Gizmo { .. })
        {
            Some(Death::Cascade)
        } else {
            None
        };
        if let Some(death) = death {
            found.insert(index, death);
        }
    }
    loop {
        let before = found.len();
        for index in world.present() {
            let owners = &world.objects[index].owners;
            if !found.contains_key(&index) && !owners.is_empty() && owners.iter().all(|o| found.contains_key(o)) {
                found.insert(index, Death::Owners);
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// How an object dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// The plan deletes it.
    Planned,
    /// A planned Namespace or CRD takes it.
    Cascade,
    /// All of its owners die (the garbage collector).
    Owners,
}

/// Whether every owner of object `index` dies (it goes with them whatever else happens).
pub fn owners_die(world: &World, index: usize, dead: &BTreeMap<usize, Death>) -> bool {
    let owners = &world.objects[index].owners;
    !owners.is_empty() && owners.iter().all(|o| dead.contains_key(o))
}

/// What an APIService that stays needs, as (APIService, what, why): the Service its
/// `spec.service` names and the operator whose pods that Service selects (kubernetes
/// kube-aggregator `pkg/apis/apiregistration/v1/types.go`: `APIServiceSpec.Service` is a
/// `ServiceReference`, namespace and name, to which the API server proxies every request of the
/// group; `pkg/controllers/status` (`AvailableConditionController`) sets `Available=False` when
/// that Service or its endpoints are gone, and discovery of the group then fails: the
/// namespace controller cannot finish deleting any Namespace, the garbage collector's and every
/// client's discovery of all groups fails). When both die, the APIService must go first.
pub fn api_service_needs(world: &World) -> Vec<(usize, usize, &'static str)> {
    let position = |shape| world.objects.iter().position(|o| o.shape == shape && o.present);
    let mut needs = Vec::new();
    if let (Some(api), Some(backend)) = (position(Shape::ApiService), position(Shape::ApiBackend)) {
        needs.push((api, backend, "the Service its APIService proxies to"));
        if let Some(operator) = position(Shape::Operator) {
            needs.push((api, operator, "the operator behind its APIService's Service"));
        }
    }
    needs
}
