//! Generated worlds for the property tests of issue 29: stacks of several trackers, the objects
//! they mark and record, and everything around them (copies of marks, second tools' marks, keep
//! markers of every tool, owners, custom resources with their operator's finalizer, a Namespace
//! a stack tracks, a webhook configuration and an APIService with their backend Services, a
//! claim and its StorageClass), and, for an orphan prune, the new desired set (objects missing,
//! renamed, moved to another namespace, and a document of a kind the cluster does not serve). A
//! world renders as the manifests that make it ([`World::yaml`]), so that a failing case can be
//! replayed against a test cluster.
//!
//! Every format is the producer's own (see `../shared/trackers.md`): Flux
//! `status.inventory.entries[].id` (`<ns>_<name>_<group>_<Kind>`, fluxcd/pkg `ssa` `ObjMetadata`),
//! Helm release Secrets (helm/helm `pkg/storage/driver/secrets.go`: `sh.helm.release.v1.<name>.v<rev>`,
//! labels `owner=helm,name,status,version`, `data.release` = base64(gzip(JSON))), cli-utils/kpt
//! inventories (kubernetes-sigs/cli-utils `pkg/inventory/inventory-cm.go`: ConfigMap data keys are
//! `ObjMetadata` strings; kpt `ResourceGroup.spec.resources[]`), kubectl ApplySet parents
//! (kubernetes/kubectl `pkg/cmd/apply/applyset.go`: label `applyset.kubernetes.io/id` =
//! `applyset-` + base64url(sha256(`name.namespace.Kind.group`)) + `-v1`, annotations
//! `contains-group-kinds` and `additional-namespaces`).

pub mod oracle;
pub mod recheck;

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};

use kubectl_stack::model::identity::ObjectId;
use kubectl_stack::model::trackers::applyset_id;

pub const FLUX: &str = "kustomize.toolkit.fluxcd.io";
pub const FLUX_HR: &str = "helm.toolkit.fluxcd.io";
pub const FLUX_NS: &str = "flux-system";
pub const OPS: &str = "ops.example.com";
pub const APP: &str = "app";
/// The Namespace a stack may track: deleting it takes everything in it.
pub const TEAM: &str = "team";
pub const CRD: &str = "apiextensions.k8s.io";
pub const ARGO: &str = "argoproj.io";
pub const ARGO_NS: &str = "argocd";
pub const ADMISSION: &str = "admissionregistration.k8s.io";
pub const STORAGE: &str = "storage.k8s.io";
pub const APIREG: &str = "apiregistration.k8s.io";
/// The API group the operator serves through its APIService (an aggregated API).
pub const METRICS: &str = "metrics.ops.example.com";
/// A group no kind of the cluster is served in: a desired document of it cannot be resolved.
pub const UNSERVED: &str = "ops.example.org";
/// The special objects after the regular ones (CRD, operator, Namespace, webhook, its backend,
/// claim, StorageClass, APIService, its backend).
pub const SPECIALS: usize = 9;
pub const STACKS: usize = 4;
pub const OBJECTS: usize = 10;

/// The tool of a stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// A Flux Kustomization in `flux-system`.
    Flux,
    /// A Flux HelmRelease in `app`, installing Helm release `<name>` in `app`.
    FluxHelm,
    /// A cli-utils/kpt inventory object in `app` (ConfigMap or ResourceGroup).
    Kpt,
    /// A kubectl ApplySet parent Secret in `app`.
    ApplySet,
    /// An Argo CD Application in its control-plane namespace `argocd` (tracking ids name it by
    /// name alone: argo-cd `util/argo/argo.go` `AppInstanceName`). An object's "record" bit here
    /// says whether its tracking id names the object itself (else it is a copy naming another).
    ArgoCd,
    /// A kapp app `s<n>` in `app`: its app record is ConfigMap `app/s<n>` (label
    /// `kapp.k14s.io/is-app`, `data.spec` naming the label value, carvel-dev/kapp
    /// `pkg/kapp/app/labeled_app.go`, `recorded_app.go`); its objects carry label
    /// `kapp.k14s.io/app: <id>`. An object's "record" bit says whether its
    /// `kapp.k14s.io/identity` names the object itself (else a controller copied the label: kapp
    /// calls it transient). No teardown: kubectl-stack tears down no kapp app.
    Kapp,
    /// A Flux v1 sync set `s<n>` (one `fluxd` with `--sync-garbage-collection`, its Deployment
    /// `flux/s<n>`): its objects carry label `fluxcd.io/sync-gc-mark`, the sync set's mark for
    /// the object (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go` `makeGCMark`). An object's
    /// "record" bit says whether the mark was made for the object itself (else it was copied from
    /// another). No teardown.
    FluxV1,
}

/// The kapp app label value (`kapp.k14s.io/app`) of stack `index`.
pub fn kapp_id(index: usize) -> String {
    format!("17000001{index:02}")
}

/// fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go` `makeGCMark`: `sha256.` and the unpadded
/// base64url of sha256(sync set name, then the resource id), the resource id being
/// `<namespace>:<kind>/<name>` with the kind in lower case and `<cluster>` for a cluster-scoped
/// object (`pkg/resource/id.go` `MakeID`, `pkg/cluster/kubernetes/resource` `ClusterScope`).
pub fn flux_v1_gc_mark(sync_set: &str, id: &ObjectId) -> String {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    let resource = format!(
        "{}:{}/{}",
        id.namespace.as_deref().unwrap_or("<cluster>"),
        id.kind.to_lowercase(),
        id.name
    );
    let mut hasher = Sha256::new();
    hasher.update(sync_set.as_bytes());
    hasher.update(resource.as_bytes());
    format!(
        "sha256.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hasher.finalize())
    )
}

/// One generated stack.
#[derive(Debug, Clone)]
pub struct Stack {
    pub tool: Tool,
    /// Flux: `spec.prune`.
    pub prune: bool,
    /// Flux: `spec.deletionPolicy` (`None`: `MirrorPrune`, the default).
    pub policy: Option<&'static str>,
    /// Flux: a `status.inventory`; kpt: a ResourceGroup (else a ConfigMap inventory).
    pub has_record: bool,
    /// Flux HelmRelease: the statuses of its release's revisions, oldest first (none: no release Secret).
    pub revisions: Vec<&'static str>,
    /// ApplySet: `contains-group-kinds` (bits over [`APPLYSET_KINDS`]) and whether
    /// `additional-namespaces` names `team` and `ops`.
    pub kinds: u8,
    pub extra_namespaces: bool,
    /// ApplySet: a copy of the parent (same labels and annotations, another name) exists.
    pub copy: bool,
    /// Lower stacks of the same Flux kind it depends on (`spec.dependsOn`).
    pub depends_on: Vec<usize>,
    /// Flux (Kustomization or HelmRelease): prunes nothing here, as `spec.suspend: true` (its
    /// user suspended it) or `spec.kubeConfig` (it applies to another cluster) say.
    pub elsewhere: Elsewhere,
}

/// Why a Flux stack prunes nothing in this cluster (review findings of issue 24's last round).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elsewhere {
    /// It prunes here.
    No,
    /// `spec.suspend: true`, set by its user.
    Suspended,
    /// `spec.kubeConfig`: its objects live in another cluster.
    Remote,
}

/// The kinds an ApplySet parent may list, as `contains-group-kinds` writes them.
pub const APPLYSET_KINDS: [(&str, &str); 5] = [
    ("", "ConfigMap"),
    (OPS, "Gizmo"),
    ("apps", "Deployment"),
    (CRD, "CustomResourceDefinition"),
    ("", "Namespace"),
];

/// A mark of a tool none of the world's stacks is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign {
    /// A plain Helm release `other` (annotations `meta.helm.sh/release-name/-namespace`).
    Helm,
    /// Argo CD annotation tracking of Application `other`, naming the object itself.
    ArgoCd,
    /// kapp app label with the identity annotation naming the object itself.
    Kapp,
    /// Flux v1 stack label.
    FluxV1,
    /// A kpt `owning-inventory` of an inventory not in the world.
    Kpt,
}

/// Keep markers of every tool (label or annotation, key, value), from `../shared/trackers.md`.
pub const KEEP_MARKERS: [(bool, &str, &str); 10] = [
    (true, "kustomize.toolkit.fluxcd.io/prune", "disabled"),
    (false, "kustomize.toolkit.fluxcd.io/prune", "disabled"),
    (false, "kustomize.toolkit.fluxcd.io/reconcile", "disabled"),
    (false, "helm.sh/resource-policy", "keep"),
    (false, "cli-utils.sigs.k8s.io/on-remove", "keep"),
    (false, "client.lifecycle.config.k8s.io/deletion", "detach"),
    (false, "kapp.k14s.io/delete-strategy", "orphan"),
    (false, "argocd.argoproj.io/sync-options", "Prune=false"),
    (false, "flux.weave.works/ignore", "true"),
    (false, "fluxcd.io/ignore", "sync_only"),
];

/// What an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    ConfigMap,
    /// A custom resource of the operator's CRD, with its finalizer: `ops.example.com/cleanup`, or
    /// without a path (`gizmos.ops.example.com`, as Rook's `cephcluster.ceph.rook.io`).
    Gizmo {
        slashless: bool,
    },
    /// The operator's CRD `gizmos.ops.example.com`.
    Crd,
    /// The operator's Deployment `ops/operator`.
    Operator,
    /// Namespace `team`.
    Namespace,
    /// The operator's ValidatingWebhookConfiguration `gizmo-check` (intercepting Gizmo updates
    /// and deletes, `failurePolicy: Fail`), served by Service `ops/webhook`.
    Webhook,
    /// Service `ops/webhook`: the webhook's backend, selecting the operator's pods.
    Backend,
    /// PersistentVolumeClaim `app/data` of StorageClass `fast`.
    Claim,
    /// StorageClass `fast` (provisioner `csi.ops.example.com`).
    StorageClass,
    /// The operator's APIService `v1.metrics.ops.example.com` (kube-aggregator
    /// `apiregistration.k8s.io/v1`), served by Service `ops/metrics`.
    ApiService,
    /// Service `ops/metrics`: the APIService's backend, selecting the operator's pods.
    ApiBackend,
}

/// How an object is in the new desired set of the orphans entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DesiredAs {
    /// Not at all: the tool prunes it.
    Missing,
    /// Under its own identity.
    Same,
    /// Under another name (`<name>-v2`): its own name is missing, the tool prunes it.
    Renamed,
    /// In the other namespace (`app` and `team` swapped; a cluster-scoped object is renamed):
    /// its own identity is missing, the tool prunes it.
    Moved,
}

/// A document of the desired set whose kind the cluster does not serve (no CRD defines it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unserved {
    /// `Widget` of `ops.example.org`, `app/w1`: it stands for nothing that exists.
    Widget,
    /// The kind, namespace and name of regular object `like`, in group `ops.example.org` (an
    /// `apiVersion` typo): by full identity it is not that object.
    LookAlike { like: usize },
}

/// One generated object.
#[derive(Debug, Clone)]
pub struct Object {
    pub shape: Shape,
    /// Whether it exists (the operator and the Namespace may not).
    pub present: bool,
    /// It lives in `team` (else `app`); regular objects only.
    pub in_team: bool,
    /// Stacks whose mark it carries.
    pub marks: Vec<usize>,
    /// Stacks whose record lists it (bit per stack; for a HelmRelease, its latest revision).
    pub recorded: u8,
    /// A second tool's mark.
    pub foreign: Option<Foreign>,
    /// A keep marker (index into [`KEEP_MARKERS`]).
    pub keep: Option<usize>,
    /// `config.kubernetes.io/depends-on` another regular object (lower index).
    pub depends_on: Option<usize>,
    /// Owners (lower regular indices); the first is the controller when `controller`.
    pub owners: Vec<usize>,
    pub controller: bool,
    /// How it is in the new desired set of its stacks (the orphans entry point).
    pub desired: DesiredAs,
}

/// Which entry point runs on the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `prune TYPE/NAME`: tear the stack down.
    Teardown,
    /// `prune --tracker PRESET=VALUE` with the stack's record and a new desired set.
    Orphans,
}

/// A change made to the world between two waves of a teardown, before the re-check of the
/// next wave reads it again (`recheck::Recheck::judge`). Each makes more stay, never less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A keep marker ([`KEEP_MARKERS`]) is put on object `object`.
    Keep { object: usize, marker: usize },
    /// A Flux Kustomization's `spec.deletionPolicy` is set to `Orphan`.
    Orphan { stack: usize },
    /// A Flux Kustomization's `spec.prune` is set to `false` (its policy to `MirrorPrune`).
    NoPrune { stack: usize },
    /// Object `object` is re-marked: its marks are replaced by stack `stack`'s.
    Remark { object: usize, stack: usize },
    /// Object `object` gets stack `stack`'s mark besides its own.
    SecondMark { object: usize, stack: usize },
}

/// A generated world and what runs on it.
#[derive(Debug, Clone)]
pub struct World {
    pub stacks: Vec<Stack>,
    pub objects: Vec<Object>,
    /// The stack named.
    pub named: usize,
    /// Name the ApplySet parent's copy instead (when the named stack has one).
    pub name_copy: bool,
    pub entry: Entry,
    /// What changes between waves (a teardown's re-check), and after which wave (modulo the
    /// plan's waves).
    pub change: Option<(usize, Change)>,
    /// Orphans: a document of an unserved kind in the desired set.
    pub unserved: Option<Unserved>,
    /// Orphans: `--allow-unresolved` (compare anyway when the desired set has unserved kinds).
    pub allow_unresolved: bool,
}

fn change() -> impl Strategy<Value = Change> {
    let object = 0..OBJECTS + SPECIALS; // the regular objects and the special ones
    prop_oneof![
        2 => (object.clone(), 0..KEEP_MARKERS.len()).prop_map(|(object, marker)| Change::Keep { object, marker }),
        1 => (0..STACKS).prop_map(|stack| Change::Orphan { stack }),
        1 => (0..STACKS).prop_map(|stack| Change::NoPrune { stack }),
        1 => (object.clone(), 0..STACKS).prop_map(|(object, stack)| Change::Remark { object, stack }),
        1 => (object, 0..STACKS).prop_map(|(object, stack)| Change::SecondMark { object, stack }),
    ]
}

fn stack() -> impl Strategy<Value = Stack> {
    (
        prop_oneof![
            Just(Tool::Flux),
            Just(Tool::FluxHelm),
            Just(Tool::Kpt),
            Just(Tool::ApplySet),
            Just(Tool::ArgoCd),
            Just(Tool::Kapp),
            Just(Tool::FluxV1)
        ],
        any::<bool>(),
        prop_oneof![
            3 => Just(None),
            1 => Just(Some("Orphan")),
            1 => Just(Some("Delete")),
            1 => Just(Some("MirrorPrune")),
            1 => Just(Some("WaitForTermination")),
        ],
        prop::bool::weighted(0.8),
        prop::collection::vec(
            prop_oneof![
                3 => Just("deployed"),
                1 => Just("superseded"),
                1 => Just("failed"),
                1 => Just("pending-upgrade")
            ],
            0..3,
        ),
        any::<u8>(),
        any::<bool>(),
        prop::bool::weighted(0.3),
        prop::collection::vec(0..STACKS, 0..2),
        prop_oneof![
            8 => Just(Elsewhere::No),
            1 => Just(Elsewhere::Suspended),
            1 => Just(Elsewhere::Remote),
        ],
    )
        .prop_map(
            |(tool, prune, policy, has_record, revisions, kinds, extra_namespaces, copy, depends_on, elsewhere)| {
                Stack {
                    tool,
                    prune: prune || policy.is_none() && has_record,
                    policy,
                    has_record,
                    revisions,
                    kinds: kinds | 1,
                    extra_namespaces,
                    copy,
                    depends_on,
                    elsewhere,
                }
            },
        )
}

fn object(shape: Shape) -> impl Strategy<Value = Object> {
    (
        (
            prop::bool::weighted(if matches!(shape, Shape::ConfigMap | Shape::Gizmo { .. }) {
                1.0
            } else {
                0.7
            }),
            prop::bool::weighted(0.3),
            prop::collection::vec(0..STACKS, 0..3),
            prop::bool::weighted(0.8),
            any::<u8>(),
            prop::option::weighted(
                0.15,
                prop_oneof![
                    Just(Foreign::Helm),
                    Just(Foreign::ArgoCd),
                    Just(Foreign::Kapp),
                    Just(Foreign::FluxV1),
                    Just(Foreign::Kpt)
                ],
            ),
        ),
        (
            prop::option::weighted(0.15, 0..KEEP_MARKERS.len()),
            prop::option::weighted(0.25, 0..OBJECTS),
            prop::collection::vec(0..OBJECTS, 0..3),
            any::<bool>(),
            // Six in ten under its own identity, two missing, one renamed, one moved (a plain
            // range: cheaper to generate than a union, and it shrinks to "missing").
            (0u8..10).prop_map(|n| match n {
                0 | 1 => DesiredAs::Missing,
                2 => DesiredAs::Renamed,
                3 => DesiredAs::Moved,
                _ => DesiredAs::Same,
            }),
        ),
    )
        .prop_map(
            move |(
                (present, in_team, mut marks, in_record, stray, foreign),
                (keep, depends_on, owners, controller, desired),
            )| {
                marks.sort();
                marks.dedup();
                // What a torn-down Namespace holds is often nobody's (a cascade victim).
                if in_team && stray & 0x80 != 0 {
                    marks.clear();
                }
                let own: u8 = marks.iter().fold(0, |bits, s| bits | 1 << s);
                // Mostly its stacks' records list it; sometimes another record lists it too
                // (it lost the mark: a record the tool no longer acts on).
                let recorded = if in_record { own } else { 0 } | (stray & 0xf0) >> 4 & (stray & 0x0f);
                Object {
                    shape,
                    // Only the operator and the Namespace may be missing.
                    present: present || matches!(shape, Shape::ConfigMap | Shape::Gizmo { .. }),
                    in_team,
                    marks,
                    recorded,
                    foreign,
                    keep,
                    depends_on,
                    owners,
                    controller,
                    desired,
                }
            },
        )
}

/// The world generator.
pub fn world() -> impl Strategy<Value = World> {
    let regular = prop::collection::vec(
        prop_oneof![
            3 => Just(Shape::ConfigMap),
            1 => Just(Shape::Gizmo { slashless: false }),
            1 => Just(Shape::Gizmo { slashless: true }),
        ]
        .prop_flat_map(object),
        OBJECTS,
    );
    (
        prop::collection::vec(stack(), STACKS),
        regular,
        (object(Shape::Crd), object(Shape::Operator), object(Shape::Namespace)),
        (
            object(Shape::Webhook),
            object(Shape::Backend),
            object(Shape::Claim),
            object(Shape::StorageClass),
            object(Shape::ApiService),
            object(Shape::ApiBackend),
        ),
        0..STACKS,
        prop::bool::weighted(0.2),
        prop_oneof![3 => Just(Entry::Teardown), 1 => Just(Entry::Orphans)],
        prop::bool::weighted(0.3),
        prop::option::weighted(0.5, (0..4usize, change())),
        (
            prop::option::weighted(
                0.15,
                prop_oneof![
                    Just(Unserved::Widget),
                    (0..OBJECTS).prop_map(|like| Unserved::LookAlike { like })
                ],
            ),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                mut stacks,
                mut objects,
                (crd, operator, namespace),
                (webhook, backend, claim, class, api_service, api_backend),
                named,
                name_copy,
                entry,
                focus,
                change,
                (unserved, allow_unresolved),
            )| {
                for (index, stack) in stacks.iter_mut().enumerate() {
                    stack.depends_on.retain(|d| *d < index);
                    stack.depends_on.dedup();
                }
                let tools: Vec<Tool> = stacks.iter().map(|s| s.tool).collect();
                for stack in stacks.iter_mut() {
                    stack
                        .depends_on
                        .retain(|d| tools[*d] == stack.tool && matches!(stack.tool, Tool::Flux | Tool::FluxHelm));
                }
                for (index, object) in objects.iter_mut().enumerate() {
                    object.owners.retain(|o| *o < index);
                    object.owners.dedup();
                    object.depends_on = object.depends_on.filter(|target| *target < index);
                }
                let (mut crd, mut webhook, mut backend) = (crd, webhook, backend);
                let (mut api_service, mut api_backend) = (api_service, api_backend);
                for shipped in [&mut crd, &mut webhook, &mut backend, &mut api_service, &mut api_backend] {
                    if shipped.controller {
                        // Mostly the operator's stack ships its CRD (what infers the finalizer
                        // edge), its webhook, its APIService and their Services.
                        shipped.marks = operator.marks.clone();
                        shipped.recorded = operator.recorded;
                    }
                }
                let specials = [
                    crd,
                    operator,
                    namespace,
                    webhook,
                    backend,
                    claim,
                    class,
                    api_service,
                    api_backend,
                ];
                for mut special in specials {
                    special.in_team = false;
                    special.marks.truncate(1); // one stack's CRD, operator, Namespace
                    special.owners.clear();
                    special.depends_on = None;
                    objects.push(special);
                }
                if focus {
                    // Most of the world is the named stack's: whole teardowns, with the order
                    // among what they delete (custom resources before their operator) at stake.
                    for object in objects.iter_mut().filter(|o| !o.marks.is_empty()) {
                        object.marks = vec![named];
                        object.recorded |= 1 << named;
                    }
                }
                let name_copy = name_copy && stacks[named].tool == Tool::ApplySet && stacks[named].copy;
                // kubectl-stack tears down no kapp app or Flux v1 sync set: their orphans only.
                let entry = match stacks[named].tool {
                    Tool::Kapp | Tool::FluxV1 => Entry::Orphans,
                    _ => entry,
                };
                let orphans = entry == Entry::Orphans;
                World {
                    stacks,
                    objects,
                    named,
                    name_copy,
                    entry,
                    change,
                    unserved: unserved.filter(|_| orphans),
                    allow_unresolved: allow_unresolved && orphans,
                }
            },
        )
}

pub fn stack_name(index: usize) -> String {
    format!("s{index}")
}

/// The kpt inventory id of stack `index`.
pub fn inventory_id(index: usize) -> String {
    format!("inv-s{index}")
}

impl World {
    /// The world after `change`.
    pub fn changed(&self, change: Change) -> World {
        let mut next = self.clone();
        match change {
            Change::Keep { object, marker } => next.objects[object].keep = Some(marker),
            Change::Orphan { stack } => next.stacks[stack].policy = Some("Orphan"),
            Change::NoPrune { stack } => {
                next.stacks[stack].prune = false;
                next.stacks[stack].policy = Some("MirrorPrune");
            }
            Change::Remark { object, stack } => next.objects[object].marks = vec![stack],
            Change::SecondMark { object, stack } => {
                let marks = &mut next.objects[object].marks;
                if !marks.contains(&stack) {
                    marks.push(stack);
                    marks.sort();
                }
            }
        }
        next
    }

    /// The identity of object `index`.
    pub fn id(&self, index: usize) -> ObjectId {
        let object = &self.objects[index];
        let namespace = if object.in_team { TEAM } else { APP };
        let name = format!("o{index}");
        match object.shape {
            Shape::ConfigMap => ObjectId::new("", "ConfigMap", Some(namespace), &name),
            Shape::Gizmo { .. } => ObjectId::new(OPS, "Gizmo", Some(namespace), &name),
            Shape::Crd => ObjectId::new(CRD, "CustomResourceDefinition", None, &format!("gizmos.{OPS}")),
            Shape::Operator => ObjectId::new("apps", "Deployment", Some("ops"), "operator"),
            Shape::Namespace => ObjectId::new("", "Namespace", None, TEAM),
            Shape::Webhook => ObjectId::new(ADMISSION, "ValidatingWebhookConfiguration", None, "gizmo-check"),
            Shape::Backend => ObjectId::new("", "Service", Some("ops"), "webhook"),
            Shape::Claim => ObjectId::new("", "PersistentVolumeClaim", Some(APP), "data"),
            Shape::StorageClass => ObjectId::new(STORAGE, "StorageClass", None, "fast"),
            Shape::ApiService => ObjectId::new(APIREG, "APIService", None, &format!("v1.{METRICS}")),
            Shape::ApiBackend => ObjectId::new("", "Service", Some("ops"), "metrics"),
        }
    }

    /// The indices of the objects that exist.
    pub fn present(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.objects.len()).filter(|i| self.objects[*i].present)
    }

    /// The identity of stack `index`'s tracking object.
    pub fn tracker_id(&self, index: usize) -> ObjectId {
        let name = stack_name(index);
        match self.stacks[index].tool {
            Tool::Flux => ObjectId::new(FLUX, "Kustomization", Some(FLUX_NS), &name),
            Tool::FluxHelm => ObjectId::new(FLUX_HR, "HelmRelease", Some(APP), &name),
            Tool::Kpt if self.stacks[index].has_record => ObjectId::new("kpt.dev", "ResourceGroup", Some(APP), &name),
            Tool::Kpt => ObjectId::new("", "ConfigMap", Some(APP), &name),
            Tool::ApplySet => ObjectId::new("", "Secret", Some(APP), &name),
            Tool::ArgoCd => ObjectId::new(ARGO, "Application", Some(ARGO_NS), &name),
            Tool::Kapp => ObjectId::new("", "ConfigMap", Some(APP), &name),
            Tool::FluxV1 => ObjectId::new("apps", "Deployment", Some("flux"), &name),
        }
    }

    /// The ApplySet id of stack `index` (its parent's own).
    pub fn applyset_id(&self, index: usize) -> String {
        applyset_id(&stack_name(index), APP, "Secret", "")
    }

    /// Whether stack `stack`'s record lists object `index` (not for ApplySet: see `applyset_holds`).
    pub fn recorded(&self, stack: usize, index: usize) -> bool {
        self.objects[index].recorded & 1 << stack != 0
    }

    /// The object's labels and annotations.
    pub fn marks_of(&self, index: usize) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let object = &self.objects[index];
        let id = self.id(index);
        let mut labels = BTreeMap::new();
        let mut annotations = BTreeMap::new();
        for &stack in &object.marks {
            let name = stack_name(stack);
            match self.stacks[stack].tool {
                Tool::Flux => {
                    labels.insert(format!("{FLUX}/name"), name);
                    labels.insert(format!("{FLUX}/namespace"), FLUX_NS.into());
                }
                Tool::FluxHelm => {
                    labels.insert(format!("{FLUX_HR}/name"), name.clone());
                    labels.insert(format!("{FLUX_HR}/namespace"), APP.into());
                    annotations.insert("meta.helm.sh/release-name".into(), name);
                    annotations.insert("meta.helm.sh/release-namespace".into(), APP.into());
                    labels.insert("app.kubernetes.io/managed-by".into(), "Helm".into());
                }
                Tool::Kpt => {
                    annotations.insert("config.k8s.io/owning-inventory".into(), inventory_id(stack));
                }
                Tool::ApplySet => {
                    labels.insert("applyset.kubernetes.io/part-of".into(), self.applyset_id(stack));
                }
                // argo-cd `util/argo/resource_tracking.go`: `<app>:<group>/<Kind>:<namespace>/<name>`.
                // carvel-dev/kapp `pkg/kapp/resources/identity_annotation.go` (`v1Value`:
                // `v1;<namespace>/<group>/<Kind>/<name>;<apiVersion>`); a copy names another.
                Tool::Kapp => {
                    labels.insert("kapp.k14s.io/app".into(), kapp_id(stack));
                    let named = if self.recorded(stack, index) {
                        id.name.clone()
                    } else {
                        "copied-from".into()
                    };
                    annotations.insert(
                        "kapp.k14s.io/identity".into(),
                        format!(
                            "v1;{}/{}/{}/{named};{}",
                            id.namespace.as_deref().unwrap_or(""),
                            id.group,
                            id.kind,
                            api_version(&id.group, &id.kind)
                        ),
                    );
                }
                Tool::FluxV1 => {
                    let of = if self.recorded(stack, index) {
                        id.clone()
                    } else {
                        ObjectId {
                            name: "copied-from".into(),
                            ..id.clone()
                        }
                    };
                    labels.insert("fluxcd.io/sync-gc-mark".into(), flux_v1_gc_mark(&name, &of));
                }
                Tool::ArgoCd => {
                    let named = if self.recorded(stack, index) {
                        id.name.clone()
                    } else {
                        "copied-from".into()
                    };
                    annotations.insert(
                        "argocd.argoproj.io/tracking-id".into(),
                        format!(
                            "{name}:{}/{}:{}/{named}",
                            id.group,
                            id.kind,
                            id.namespace.as_deref().unwrap_or("")
                        ),
                    );
                }
            }
        }
        let namespace = id.namespace.clone().unwrap_or_default();
        match object.foreign {
            Some(Foreign::Helm) => {
                annotations.insert("meta.helm.sh/release-name".into(), "other".into());
                annotations.insert("meta.helm.sh/release-namespace".into(), APP.into());
            }
            Some(Foreign::ArgoCd) => {
                annotations.insert(
                    "argocd.argoproj.io/tracking-id".into(),
                    format!("other:{}/{}:{namespace}/{}", id.group, id.kind, id.name),
                );
            }
            Some(Foreign::Kapp) => {
                labels.insert("kapp.k14s.io/app".into(), "1700000000".into());
                annotations.insert(
                    "kapp.k14s.io/identity".into(),
                    format!("v1;{namespace}/{}/{}/{};v1", id.group, id.kind, id.name),
                );
            }
            Some(Foreign::FluxV1) => {
                labels.insert("flux.weave.works/stack".into(), "other".into());
            }
            Some(Foreign::Kpt) => {
                annotations.insert("config.k8s.io/owning-inventory".into(), "inv-other".into());
            }
            None => {}
        }
        if let Some(keep) = object.keep {
            let (label, key, value) = KEEP_MARKERS[keep];
            let map = if label { &mut labels } else { &mut annotations };
            map.insert(key.into(), value.into());
        }
        if let Some(target) = object.depends_on {
            let target = self.id(target);
            annotations.insert(
                "config.kubernetes.io/depends-on".into(),
                format!(
                    "{}/namespaces/{}/{}/{}",
                    target.group,
                    target.namespace.unwrap_or_default(),
                    target.kind,
                    target.name
                ),
            );
        }
        (labels, annotations)
    }

    /// The finalizers of object `index`.
    pub fn finalizers(&self, index: usize) -> Vec<String> {
        match self.objects[index].shape {
            Shape::Gizmo { slashless: false } => vec![format!("{OPS}/cleanup")],
            Shape::Gizmo { slashless: true } => vec![format!("gizmos.{OPS}")],
            _ => Vec::new(),
        }
    }

    /// `uid-<namespace>-<name>` of an object.
    pub fn uid(id: &ObjectId) -> String {
        format!("uid-{}-{}-{}", id.kind, id.namespace.as_deref().unwrap_or("-"), id.name)
    }

    /// The Flux inventory entry id of an object (`<ns>_<name>_<group>_<Kind>`).
    pub fn flux_entry(id: &ObjectId) -> String {
        format!(
            "{}_{}_{}_{}",
            id.namespace.as_deref().unwrap_or(""),
            id.name,
            id.group,
            id.kind
        )
    }

    /// The objects stack `stack`'s record lists (for a HelmRelease: its latest revision).
    pub fn record(&self, stack: usize) -> Vec<ObjectId> {
        self.present()
            .filter(|&i| self.recorded(stack, i))
            .map(|i| self.id(i))
            .collect()
    }

    /// The whole object of stack `index`'s tracking object (and of its ApplySet copy).
    pub fn tracker_body(&self, index: usize) -> Value {
        let stack = &self.stacks[index];
        let id = self.tracker_id(index);
        let mut object = json!({
            "apiVersion": api_version(&id.group, &id.kind),
            "kind": id.kind,
            "metadata": {"name": id.name, "namespace": id.namespace, "uid": World::uid(&id)},
        });
        let depends: Vec<Value> = stack
            .depends_on
            .iter()
            .map(|d| json!({"name": stack_name(*d)}))
            .collect();
        match stack.tool {
            Tool::Flux => {
                object["spec"] = json!({"prune": stack.prune, "interval": "10m", "sourceRef": {"kind": "GitRepository", "name": "repo"}, "dependsOn": depends});
                if let Some(policy) = stack.policy {
                    object["spec"]["deletionPolicy"] = json!(policy);
                }
                if stack.has_record {
                    let entries: Vec<Value> = self
                        .record(index)
                        .iter()
                        .map(|id| json!({"id": World::flux_entry(id), "v": "v1"}))
                        .collect();
                    object["status"] = json!({"inventory": {"entries": entries}});
                }
            }
            Tool::FluxHelm => {
                object["spec"] = json!({"interval": "10m", "chart": {"spec": {"chart": "c"}}, "dependsOn": depends});
                // helm-controller records what it installed (`status.history`, newest first, in
                // `status.storageNamespace`): what it uninstalls when the HelmRelease goes.
                if !stack.revisions.is_empty() {
                    object["status"] = json!({"storageNamespace": APP, "history": [{"name": stack_name(index)}]});
                }
            }
            Tool::Kpt => {
                object["metadata"]["labels"] = json!({"cli-utils.sigs.k8s.io/inventory-id": inventory_id(index)});
                let record = self.record(index);
                if stack.has_record {
                    let resources: Vec<Value> = record
                        .iter()
                        .map(|id| json!({"group": id.group, "kind": id.kind, "namespace": id.namespace.clone().unwrap_or_default(), "name": id.name}))
                        .collect();
                    object["spec"] = json!({"resources": resources});
                } else {
                    let data: BTreeMap<String, String> =
                        record.iter().map(|id| (World::flux_entry(id), String::new())).collect();
                    object["data"] = json!(data);
                }
            }
            Tool::Kapp => {
                object["metadata"]["labels"] = json!({"kapp.k14s.io/is-app": ""});
                object["data"] =
                    json!({"spec": json!({"labelKey": "kapp.k14s.io/app", "labelValue": kapp_id(index)}).to_string()});
            }
            Tool::FluxV1 => {
                let labels = json!({"app": format!("fluxd-{}", stack_name(index))});
                object["spec"] = json!({"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "flux", "image": "fluxcd/flux:1.25.4", "args": ["--sync-garbage-collection", format!("--k8s-secret-name={}", stack_name(index))]}]}}});
            }
            Tool::ArgoCd => {
                object["metadata"]["finalizers"] = json!(["resources-finalizer.argocd.argoproj.io"]);
                object["spec"] = json!({"project": "default", "destination": {"server": "https://kubernetes.default.svc"}, "source": {"repoURL": "https://example.com/repo.git", "path": "."}});
            }
            Tool::ApplySet => {
                object["type"] = json!("Opaque");
                object["metadata"]["labels"] = json!({"applyset.kubernetes.io/id": self.applyset_id(index)});
                object["metadata"]["annotations"] = json!({
                    "applyset.kubernetes.io/tooling": "kubectl/v1.32",
                    "applyset.kubernetes.io/contains-group-kinds": self.applyset_kinds(index).join(","),
                    "applyset.kubernetes.io/additional-namespaces": self.applyset_extra(index).join(","),
                });
            }
        }
        if matches!(stack.tool, Tool::Flux | Tool::FluxHelm) {
            match stack.elsewhere {
                Elsewhere::No => {}
                Elsewhere::Suspended => object["spec"]["suspend"] = json!(true),
                Elsewhere::Remote => object["spec"]["kubeConfig"] = json!({"secretRef": {"name": "prod-kubeconfig"}}),
            }
        }
        object
    }

    /// `contains-group-kinds` of an ApplySet stack (`Kind.group`, `Kind` for the core group).
    pub fn applyset_kinds(&self, index: usize) -> Vec<String> {
        APPLYSET_KINDS
            .iter()
            .enumerate()
            .filter(|(bit, _)| self.stacks[index].kinds & 1 << bit != 0)
            .map(|(_, (group, kind))| {
                if group.is_empty() {
                    kind.to_string()
                } else {
                    format!("{kind}.{group}")
                }
            })
            .collect()
    }

    /// `additional-namespaces` of an ApplySet stack.
    pub fn applyset_extra(&self, index: usize) -> Vec<String> {
        if self.stacks[index].extra_namespaces {
            vec![TEAM.into(), "ops".into()]
        } else {
            Vec::new()
        }
    }

    /// The Helm release Secrets of a HelmRelease stack, as helm stores them. Every revision
    /// records what the latest one does (older revisions differ only in status here).
    pub fn release_secrets(&self, index: usize) -> Vec<Value> {
        let name = stack_name(index);
        let manifest: String = self
            .record(index)
            .iter()
            .map(|id| {
                format!(
                    "---\napiVersion: {}\nkind: {}\nmetadata:\n  name: {}\n{}",
                    api_version(&id.group, &id.kind),
                    id.kind,
                    id.name,
                    id.namespace
                        .as_ref()
                        .map(|ns| format!("  namespace: {ns}\n"))
                        .unwrap_or_default()
                )
            })
            .collect();
        let revisions = &self.stacks[index].revisions;
        revisions
            .iter()
            .enumerate()
            .map(|(at, status)| {
                let version = at + 1;
                let body = json!({"name": name, "namespace": APP, "version": version, "info": {"status": status}, "manifest": manifest});
                json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                    "metadata": {
                        "name": format!("sh.helm.release.v1.{name}.v{version}"), "namespace": APP,
                        "labels": {"owner": "helm", "name": name, "status": status, "version": version.to_string()},
                    },
                    "data": {"release": helm_release_data(&body)},
                })
            })
            .collect()
    }

    /// The manifest of object `index`.
    pub fn object_body(&self, index: usize) -> Value {
        let id = self.id(index);
        let (labels, annotations) = self.marks_of(index);
        let owners: Vec<Value> = self.objects[index]
            .owners
            .iter()
            .enumerate()
            .map(|(position, owner)| {
                let owner_id = self.id(*owner);
                json!({
                    "apiVersion": api_version(&owner_id.group, &owner_id.kind),
                    "kind": owner_id.kind, "name": owner_id.name, "uid": World::uid(&owner_id),
                    "controller": position == 0 && self.objects[index].controller,
                })
            })
            .collect();
        let mut body = json!({
            "apiVersion": api_version(&id.group, &id.kind),
            "kind": id.kind,
            "metadata": {
                "name": id.name, "namespace": id.namespace, "uid": World::uid(&id),
                "labels": labels, "annotations": annotations,
                "ownerReferences": owners, "finalizers": self.finalizers(index),
            },
        });
        let fields = body.as_object_mut().expect("an object");
        for (key, value) in spec_of(self.objects[index].shape) {
            fields.insert(key.into(), value);
        }
        body
    }

    /// The world as the manifests that make it, then what runs on it, as YAML: a failing case
    /// prints it so that it can be replayed (`kubectl apply -f`, then the `run` line).
    pub fn yaml(&self) -> String {
        let mut documents: Vec<Value> = Vec::new();
        for index in 0..self.stacks.len() {
            documents.push(self.tracker_body(index));
            if self.stacks[index].tool == Tool::ApplySet && self.stacks[index].copy {
                let mut copy = self.tracker_body(index);
                copy["metadata"]["name"] = json!(format!("{}-copy", stack_name(index)));
                copy["metadata"]["uid"] = json!(format!("uid-copy-{index}"));
                documents.push(copy);
            }
            if self.stacks[index].tool == Tool::FluxHelm {
                documents.extend(self.release_secrets(index));
            }
        }
        documents.extend(self.present().map(|i| self.object_body(i)));
        let named = self.tracker_id(self.named);
        let run = match self.entry {
            Entry::Teardown => format!(
                "kubectl stack prune {}/{} -n {}",
                named.kind,
                named.name,
                named.namespace.unwrap_or_default()
            ),
            Entry::Orphans => {
                let documents = self.desired_documents();
                let mut flags = String::new();
                if documents.is_empty() {
                    flags.push_str(" --allow-empty");
                }
                if self.allow_unresolved {
                    flags.push_str(" --allow-unresolved");
                }
                format!(
                    "kubectl stack prune --tracker for {named}{flags} -f <the desired set below>, desired: {}",
                    documents.iter().map(document_identity).collect::<Vec<_>>().join(", ")
                )
            }
        };
        let copy = if self.name_copy {
            " (its ApplySet parent's copy)"
        } else {
            ""
        };
        let mut text = format!("# run: {run}{copy}\n");
        if let (Entry::Teardown, Some((after, change))) = (self.entry, self.change) {
            text.push_str(&format!(
                "# then, after wave {after} (modulo the plan's waves), before the re-check of the next: {change:?}\n"
            ));
        }
        for document in documents {
            text.push_str("---\n");
            text.push_str(&serde_saphyr::to_string(&document).unwrap_or_else(|e| format!("# {e}\n")));
        }
        if self.entry == Entry::Orphans {
            text.push_str("# the desired set (-f), commented out:\n");
            for document in self.desired_documents() {
                text.push_str("# ---\n");
                let yaml = serde_saphyr::to_string(&document).unwrap_or_else(|e| format!("{e}\n"));
                for line in yaml.lines() {
                    text.push_str(&format!("# {line}\n"));
                }
            }
        }
        text
    }

    /// The identity object `index` has in the new desired set, if it is in it (its own, or
    /// another: [`DesiredAs`]).
    pub fn desired_id(&self, index: usize) -> Option<ObjectId> {
        let id = self.id(index);
        let renamed = ObjectId {
            name: format!("{}-v2", id.name),
            ..id.clone()
        };
        match self.objects[index].desired {
            DesiredAs::Missing => None,
            DesiredAs::Same => Some(id),
            DesiredAs::Renamed => Some(renamed),
            DesiredAs::Moved => match id.namespace.as_deref() {
                None => Some(renamed),
                Some(namespace) => Some(ObjectId {
                    namespace: Some(if namespace == TEAM { APP } else { TEAM }.into()),
                    ..id
                }),
            },
        }
    }

    /// The documents of the new desired set (the orphans entry point's `-f`): each object that
    /// exists and is desired, as its manifest under the identity it has there, then the
    /// document of an unserved kind.
    pub fn desired_documents(&self) -> Vec<Value> {
        let mut documents: Vec<Value> = self
            .present()
            .filter_map(|index| {
                let id = self.desired_id(index)?;
                let mut body = self.object_body(index);
                let metadata = body["metadata"].as_object_mut()?;
                for generated in ["uid", "ownerReferences", "finalizers"] {
                    metadata.remove(generated);
                }
                metadata.insert("name".into(), json!(id.name));
                metadata.insert("namespace".into(), json!(id.namespace));
                Some(body)
            })
            .collect();
        let unserved = match self.unserved {
            None => None,
            Some(Unserved::Widget) => Some(ObjectId::new(UNSERVED, "Widget", Some(APP), "w1")),
            Some(Unserved::LookAlike { like }) => Some(ObjectId {
                group: UNSERVED.into(),
                ..self.id(like)
            }),
        };
        if let Some(id) = unserved {
            documents.push(json!({
                "apiVersion": format!("{UNSERVED}/v1"), "kind": id.kind,
                "metadata": {"name": id.name, "namespace": id.namespace},
            }));
        }
        documents
    }
}

/// The fields besides `metadata` of an object of this shape, as its producer writes them: a
/// Deployment's pod template (kubernetes `apps/v1`), a webhook configuration's `webhooks[]`
/// (`admissionregistration.k8s.io/v1`: `clientConfig.service`, `rules`, `failurePolicy`), a
/// Service's selector, a claim's `storageClassName`, a StorageClass's `provisioner`.
fn spec_of(shape: Shape) -> Vec<(&'static str, Value)> {
    let operator = json!({"app": "operator"});
    match shape {
        Shape::Operator => vec![(
            "spec",
            json!({"selector": {"matchLabels": operator}, "template": {"metadata": {"labels": operator}, "spec": {"containers": [{"name": "operator", "image": "ops/operator:1"}]}}}),
        )],
        Shape::Webhook => vec![(
            "webhooks",
            json!([{
                "name": "check.gizmos.ops.example.com",
                "clientConfig": {"service": {"namespace": "ops", "name": "webhook", "path": "/validate"}},
                "rules": [{"apiGroups": [OPS], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["gizmos"], "scope": "Namespaced"}],
                "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            }]),
        )],
        Shape::Backend => vec![(
            "spec",
            json!({"selector": operator, "ports": [{"port": 443, "targetPort": 9443}]}),
        )],
        Shape::Claim => vec![(
            "spec",
            json!({"storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}),
        )],
        Shape::StorageClass => vec![("provisioner", json!("csi.ops.example.com"))],
        // kube-aggregator `pkg/apis/apiregistration/v1` `APIServiceSpec`: `service` is a
        // `ServiceReference` (namespace, name, port); without one the group is served locally.
        Shape::ApiService => vec![(
            "spec",
            json!({"group": METRICS, "version": "v1", "service": {"namespace": "ops", "name": "metrics", "port": 443}, "groupPriorityMinimum": 100, "versionPriority": 100, "insecureSkipTLSVerify": true}),
        )],
        Shape::ApiBackend => vec![(
            "spec",
            json!({"selector": operator, "ports": [{"port": 443, "targetPort": 4443}]}),
        )],
        _ => Vec::new(),
    }
}

/// `Kind.group namespace/name` of a document, as it is written.
pub fn document_identity(document: &Value) -> String {
    let text = |pointer: &str| document.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    let namespace = match text("/metadata/namespace") {
        "" => String::new(),
        namespace => format!("{namespace}/"),
    };
    format!(
        "{} {} {namespace}{}",
        text("/apiVersion"),
        text("/kind"),
        text("/metadata/name")
    )
}

/// `apiVersion` of a kind here.
pub fn api_version(group: &str, kind: &str) -> String {
    match (group, kind) {
        ("", _) => "v1".into(),
        (FLUX, _) => format!("{FLUX}/v1"),
        (FLUX_HR, _) => format!("{FLUX_HR}/v2"),
        ("kpt.dev", _) | (ARGO, _) => format!("{group}/v1alpha1"),
        (group, _) => format!("{group}/v1"),
    }
}

/// Helm's encoding of a release (helm/helm `pkg/storage/driver/util.go` `encodeRelease`:
/// gzip, then base64; the API's base64 of `data` on top), as `tests/common` writes it.
pub fn helm_release_data(release: &Value) -> String {
    use base64::Engine;
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(release.to_string().as_bytes()).expect("gzip in memory");
    let engine = base64::engine::general_purpose::STANDARD;
    engine.encode(engine.encode(gz.finish().expect("gzip in memory")))
}
