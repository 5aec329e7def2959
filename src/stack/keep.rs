//! The one keep chain: every reason not to delete an object that a prune would otherwise take,
//! as an ordered list of rules. `orphans` (what is an orphan), a teardown (which members of the
//! stacks torn down go) and the re-check before each wave (whether a planned object still goes)
//! all ask [`reason`]; a path that needs a rule adds it here, so every path gets it (cli-utils
//! `pkg/apply/filter`: one filter, one function, one test).
//!
//! Each rule reads one object and the [`Context`] of the question: which stacks claim the object
//! (with their tools' records and policies), the record of an orphan search, and the tracking
//! objects of the cluster. The answer is a [`KeepReason`]: the plan, its JSON, the orphan report
//! and the README name the same reasons. The rules that look at the plan as a whole (what stays
//! keeps what it needs, a Namespace that holds what stays) are in `prune::safeguards` and
//! answer with the same type.

use std::collections::{HashMap, HashSet};
use std::fmt;

use kube::core::ObjectMeta;
use serde::Serialize;

use crate::cluster::collect::Listed;
use crate::model::identity::ObjectId;
use crate::model::trackers::{keep_marker, Mark, MarkValue, Preset, Tracker};
use crate::stack::classify::Recorded;
use crate::stack::desired::Needs;
use crate::stack::members::{full_mark, full_marks, MemberRecord};
use crate::stack::policy::{owned_by, tool_keeps};

/// Why an object is not deleted (or, in an orphan search, not called an orphan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum KeepReason {
    /// A controller made it (it inherited the stack's labels); its owner decides its fate.
    ControllerOwned {
        /// `Kind/name` of the controller.
        owner: String,
    },
    /// Already being deleted (listed apart).
    Terminating,
    /// A tool's keep marker says never to prune it.
    Keep {
        /// The marker, `key=value`.
        marker: String,
    },
    /// A controller derived it from a tracked object without an ownerReference (a Service's
    /// Endpoints, a StatefulSet's claims): it goes with its source.
    Derived {
        /// `Kind/name` of the source.
        source: String,
    },
    /// Its mark names a stack by name alone where the stack lives in a namespace.
    AmbiguousMark {
        /// The mark.
        mark: String,
        /// The namespaces where stacks of that name live, when known.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        namespaces: Vec<String>,
    },
    /// Not in the tool's record of what it applied: the tool never deletes it.
    NotInInventory {
        /// The record.
        inventory: String,
    },
    /// The Flux Kustomization that marks it records no `status.inventory` (or an entry
    /// kustomize-controller cannot read): kustomize-controller deletes nothing without one
    /// (`finalizerShouldDeleteResources`; see [`crate::stack::inventory::flux_record`]).
    NoInventory {
        /// The stack.
        stack: String,
        /// What its record lacks.
        why: String,
    },
    /// The tracking tool's own rules would not delete it.
    ToolWouldKeep {
        /// Why, with the tool's rule.
        why: String,
    },
    /// The record of the stack that marks it cannot be read: whether that tool would delete it
    /// is unknown.
    RecordUnreadable {
        /// The stack, and why it cannot be read.
        why: String,
    },
    /// No tool tracks it: it only depends on what is torn down.
    Untracked,
    /// Another stack or tool, whose members this run does not delete, tracks it too.
    TrackedElsewhere {
        /// The other stack's mark.
        mark: String,
    },
    /// Something that stays needs it (declared, structural or inferred edge).
    Needed {
        /// What needs it.
        by: String,
        /// The edge, as `graph` labels it.
        edge: String,
    },
    /// A Namespace or CRD that holds an object that stays (its deletion would take it).
    Holds {
        /// What it holds.
        held: String,
    },
    /// A CRD none of whose versions is served: what it would take cannot be listed.
    ContentUnlistable,
    /// `--keep-cascading`: its deletion would take what the plan does not delete.
    Cascading {
        /// What it would take.
        takes: String,
    },
    /// In the record of a stack torn down but no member of it here: it carries none of the
    /// stack's marks (a teardown deletes only what they mark).
    RecordedUnmarked {
        /// The record.
        inventory: String,
    },
    /// Still carries the mark of a named stack that is already gone (`--leftovers` takes it).
    Leftover {
        /// The gone stack.
        stack: String,
    },
}

impl fmt::Display for KeepReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepReason::ControllerOwned { owner } => write!(f, "controlled by {owner}"),
            KeepReason::Terminating => write!(f, "already being deleted"),
            KeepReason::Keep { marker } => write!(f, "keep marker {marker}"),
            KeepReason::Derived { source } => write!(f, "derived from {source} by its controller"),
            KeepReason::AmbiguousMark { mark, namespaces } if namespaces.is_empty() => {
                write!(f, "ambiguous mark {mark}: its stack's namespace is not recorded")
            }
            KeepReason::AmbiguousMark { mark, namespaces } => write!(
                f,
                "ambiguous mark {mark}: stacks of that name live in {}",
                namespaces.join(", ")
            ),
            KeepReason::NotInInventory { inventory } => {
                write!(f, "not in {inventory}: its tool deletes only what its record holds")
            }
            // A Flux Kustomization's; a gone kpt inventory's or ApplySet parent's `why` names its tool.
            KeepReason::NoInventory { stack, why } if stack.starts_with("Kustomization") => write!(
                f,
                "{stack} {why}: kustomize-controller deletes nothing without an inventory it can read"
            ),
            KeepReason::NoInventory { stack, why } => write!(f, "{stack} {why}"),
            KeepReason::ToolWouldKeep { why } => write!(f, "{why}"),
            KeepReason::RecordUnreadable { why } => write!(f, "unknown: {why}"),
            KeepReason::Untracked => write!(
                f,
                "no tool tracks it: it only depends on what is torn down, and is not a teardown's to delete"
            ),
            KeepReason::TrackedElsewhere { mark } => write!(f, "also tracked by {mark}, which this run does not prune"),
            KeepReason::Needed { by, edge } => write!(f, "needed by {by}, which is not pruned ({edge})"),
            KeepReason::Holds { held } => write!(f, "holds {held}, which is not pruned"),
            KeepReason::ContentUnlistable => {
                write!(f, "its custom resources cannot be listed (no version is served)")
            }
            KeepReason::Cascading { takes } => {
                write!(f, "--keep-cascading: its deletion would also take {takes}")
            }
            KeepReason::RecordedUnmarked { inventory } => write!(
                f,
                "in {inventory} but carries none of its stack's marks: a teardown deletes only what its stack marks"
            ),
            KeepReason::Leftover { stack } => {
                write!(f, "left behind by {stack}, already gone (--leftovers deletes it)")
            }
        }
    }
}

impl KeepReason {
    /// The rule's name, as the JSON `reason` field and the README print it.
    pub fn rule(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_string))
            .unwrap_or_default()
    }
}

/// A kept object in JSON (plan lines, plan files): its id, the rule (`reason`, the same name as
/// in `orphans -o json`) with the rule's fields, and the reason as the table prints it
/// (`message`).
pub fn kept_json(id: &ObjectId, reason: &KeepReason) -> serde_json::Value {
    let mut value = serde_json::json!({"id": id, "message": reason.to_string()});
    if let (Some(fields), Ok(serde_json::Value::Object(rule))) = (value.as_object_mut(), serde_json::to_value(reason)) {
        fields.extend(rule);
    }
    value
}

/// The tracking objects of the cluster by preset and name: what a mark that records no
/// namespace may refer to.
#[derive(Debug, Clone, Default)]
pub struct Trackers {
    namespaces_by_name: HashMap<(Preset, String), HashSet<Option<String>>>,
}

impl Trackers {
    /// Indexes the tracking objects' keys.
    pub fn new<'a>(keys: impl IntoIterator<Item = &'a (Preset, MarkValue)>) -> Self {
        let mut namespaces_by_name: HashMap<(Preset, String), HashSet<Option<String>>> = HashMap::new();
        for (preset, value) in keys {
            namespaces_by_name
                .entry((*preset, value.name.clone()))
                .or_default()
                .insert(value.namespace.clone());
        }
        Self { namespaces_by_name }
    }
}

/// A stack torn down that claims the object (its mark is on it), as its tool's record and
/// policy say.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The stack's tracking object.
    pub stack: &'a ObjectId,
    /// What its tool recorded as its members; `None` when it keeps no record (its marks decide).
    pub record: Option<&'a MemberRecord>,
    /// Why its tool would leave its members behind when it is deleted (Flux `spec.prune: false`,
    /// `deletionPolicy: Orphan`), if it would.
    pub leaves_members: Option<&'a str>,
    /// Why its record or policy could not be read, if it could not.
    pub unreadable: Option<&'a str>,
}

/// The stacks a run deletes the members of (a teardown's stacks, or the one stack an orphan
/// prune compares), by the mark their members carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TornDown {
    keys: HashSet<(Preset, MarkValue)>,
    /// Namespaces Argo CD proves are outside its control plane (see
    /// [`crate::stack::members::argocd_outside_namespaces`]): an Application there owns no name-only id.
    argocd_outside: HashSet<String>,
}

impl TornDown {
    /// The stacks of these tracking objects (see [`crate::stack::members::owner_mark`]).
    pub fn new(keys: impl IntoIterator<Item = (Preset, MarkValue)>) -> Self {
        Self {
            keys: keys.into_iter().collect(),
            argocd_outside: HashSet::new(),
        }
    }

    /// The same stacks, knowing which namespaces Argo CD proves are outside its control plane
    /// (see [`crate::stack::members::argocd_outside_namespaces`]): a name-only tracking id is never
    /// covered by an Application torn down in one of them.
    pub fn with_argocd_outside(mut self, namespaces: HashSet<String>) -> Self {
        self.argocd_outside = namespaces;
        self
    }

    /// Whether no stack is torn down (an orphan prune).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether a stack of this tool and name (in any namespace) is torn down.
    pub fn names(&self, preset: Preset, name: &str) -> bool {
        self.keys.iter().any(|(p, value)| *p == preset && value.name == name)
    }

    /// Whether the stack this mark names is torn down. A mark that records no namespace (kpt,
    /// ApplySet, Argo CD) names its stack by name alone.
    pub fn covers(&self, mark: &Mark) -> bool {
        let mark = full_mark(mark.clone());
        // kustomize-controller and helm-controller delete only what carries both of their owner
        // labels (fluxcd/pkg `ssa/manager_delete.go`: `Inclusions` as a label selector): a Flux
        // mark without its namespace label is never theirs to delete.
        let needs_namespace = matches!(mark.preset, Preset::Flux | Preset::FluxHelm);
        self.keys.iter().any(|key| {
            let (preset, value) = key;
            let by_name = mark.value.namespace.is_none()
                && !needs_namespace
                && crate::stack::members::name_only_may_name(&mark, key, &self.argocd_outside);
            *preset == mark.preset
                && value.name == mark.value.name
                && (by_name || value.namespace == mark.value.namespace)
        })
    }
}

/// A run deletes an object only when every stack that tracks it is one it deletes the members
/// of: a teardown's stacks, an orphan prune's stack (whose desired set says nothing of another
/// stack's or tool's wishes). The
/// Helm release a torn-down Flux HelmRelease installs counts as that HelmRelease's when its
/// record names it (the release helm-controller names: fluxcd/helm-controller `api/v2`
/// `HelmRelease.GetReleaseName` and `GetStorageNamespace`, see
/// [`crate::stack::members::MemberRecord::aliases`]); a release only alike in name is another stack.
pub fn tracked_elsewhere(meta: &ObjectMeta, torn_down: &TornDown) -> Option<KeepReason> {
    full_marks(meta)
        .iter()
        .find(|mark| !torn_down.covers(mark))
        .map(|mark| KeepReason::TrackedElsewhere { mark: mark.to_string() })
}

/// The one stack an orphan prune compares with its desired set: the tracker the user named, and
/// the marks its tool writes under another tool's name (a Flux HelmRelease's Helm release, as its
/// record names it: see [`MemberRecord::aliases`]).
#[derive(Debug, Clone)]
pub struct ComparedStack {
    /// The tracker named (`--tracker PRESET=VALUE`, its namespace defaulted).
    pub tracker: Tracker,
    /// Marks of other tools that are this stack's own.
    pub aliases: Vec<Mark>,
}

impl ComparedStack {
    /// The marks on `meta` that name another stack or tool: an object carries one mark per tool,
    /// so the named tool's mark is the stack's own when the tracker matches the object.
    pub fn others(&self, meta: &ObjectMeta) -> Vec<Mark> {
        let matched = self.tracker.matches(meta);
        crate::model::trackers::marks(meta)
            .into_iter()
            .filter(|mark| !(matched && mark.preset == self.tracker.preset))
            .filter(|mark| {
                !self
                    .aliases
                    .iter()
                    .any(|alias| alias.preset == mark.preset && mark.value.satisfies(&alias.value))
            })
            .collect()
    }
}

/// What is being asked.
#[derive(Debug, Clone)]
pub enum Question<'a> {
    /// Is a tracked object that the desired set lacks an orphan?
    Orphan {
        /// The tracker the user named (its tool's rules apply besides the marking tools').
        tracker: Option<&'a Tracker>,
        /// The record of the stack the desired set describes, when one was read.
        recorded: Option<&'a Recorded>,
        /// Whether a new desired set was given (a record alone compares with nothing).
        compared: bool,
        /// The stack the desired set describes, when one was named: what another stack or tool
        /// also marks is not its alone to prune.
        stack: Option<&'a ComparedStack>,
        /// What the objects of the new desired set need (kpt prunes none of it: see
        /// [`kpt_needed`]), when a desired set was given.
        needs: Option<&'a Needs>,
    },
    /// Does a member of the stacks torn down go with them? `claims`: those stacks that mark it.
    Teardown {
        /// The stacks torn down that mark it.
        claims: Vec<Claim<'a>>,
    },
}

/// The context of one question: the question and the cluster's tracking objects, when listed.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// What is asked.
    pub question: Question<'a>,
    /// The tracking objects of the cluster (`None`: not listed; a name-only Flux or Helm mark is
    /// then always ambiguous).
    pub trackers: Option<&'a Trackers>,
}

/// One rule of the chain.
pub type Rule = fn(&Listed, &Context) -> Option<KeepReason>;

/// The chain, in order: the first rule that answers gives the reason.
pub const CHAIN: [(&str, Rule); 10] = [
    ("record", outside_record),
    ("terminating", terminating),
    ("owner", owned),
    ("keep marker", keep_marked),
    ("ambiguous mark", ambiguous),
    ("untracked", untracked),
    ("tool's rules", tool_rules),
    ("other stacks", marked_elsewhere),
    ("stack's policy", left_by_stack),
    ("record readable", unreadable_record),
];

/// The first reason of the chain to keep `object`, or `None` when nothing keeps it.
pub fn reason(object: &Listed, context: &Context) -> Option<KeepReason> {
    CHAIN.iter().find_map(|(_, rule)| rule(object, context))
}

/// Rule: only what a tool's record holds is that tool's to delete. An orphan search with a
/// record: not in it, or no longer carrying the tool's mark (Flux deletes only stale objects with
/// its labels, cli-utils only those whose `owning-inventory` is the inventory). A teardown: when
/// every stack that claims the object keeps a record and none holds it (a copy of the marks, an
/// object a controller labelled): kustomize-controller deletes its `status.inventory`,
/// helm-controller its release's manifest, cli-utils its inventory, kubectl its ApplySet's kinds
/// and namespaces. A stack with no record leaves its marks to decide; a Flux Kustomization with
/// no `status.inventory` it can read keeps everything ([`KeepReason::NoInventory`]).
pub fn outside_record(object: &Listed, context: &Context) -> Option<KeepReason> {
    match &context.question {
        Question::Orphan {
            recorded: Some(Recorded::NoInventory { stack, why }),
            ..
        } => Some(KeepReason::NoInventory {
            stack: stack.clone(),
            why: why.clone(),
        }),
        Question::Orphan {
            recorded: Some(recorded),
            compared,
            ..
        } => {
            if !recorded.holds(object) {
                return Some(KeepReason::NotInInventory {
                    inventory: recorded.name().to_string(),
                });
            }
            if let Some(why) = recorded.denied().get(&object.id()) {
                return Some(KeepReason::ToolWouldKeep { why: why.clone() });
            }
            (*compared && !recorded.still_marked(object)).then(|| KeepReason::ToolWouldKeep {
                why: format!(
                    "in {} but no longer carries the tool's mark: the tool deletes only objects that still do",
                    recorded.name()
                ),
            })
        }
        Question::Orphan { recorded: None, .. } => None,
        Question::Teardown { claims } => {
            let id = object.id();
            // A stack whose tool may not delete it (its impersonated account is denied) leaves it.
            if let Some(why) = claims.iter().find_map(|c| c.record?.denied.get(&id)) {
                return Some(KeepReason::ToolWouldKeep { why: why.clone() });
            }
            let outside = !claims.is_empty()
                && claims
                    .iter()
                    .all(|claim| claim.record.is_some_and(|record| !record.ids.contains(&id)));
            if !outside {
                return None;
            }
            let no_inventory = claims.iter().find_map(|c| {
                let why = c.record?.no_inventory.as_ref()?;
                Some(KeepReason::NoInventory {
                    stack: c.stack.to_string(),
                    why: why.clone(),
                })
            });
            Some(no_inventory.unwrap_or_else(|| {
                KeepReason::NotInInventory {
                    inventory: claims
                        .iter()
                        .find_map(|c| c.record.map(|r| r.name.clone()))
                        .unwrap_or_default(),
                }
            }))
        }
    }
}

/// Rule: an object already being deleted is no orphan (a prune waits for it; listed apart). In a
/// teardown it is a member like any other: the run waits for it to go.
pub fn terminating(object: &Listed, context: &Context) -> Option<KeepReason> {
    (matches!(context.question, Question::Orphan { .. }) && object.is_terminating()).then_some(KeepReason::Terminating)
}

/// Rule: an object that belongs to an owner is the owner's. An orphan search leaves any owned
/// object alone (the garbage collector removes it with its owner; Flux v1, Argo CD and kapp leave
/// owned objects alone: [`owned_by`]); a teardown leaves to its controller what a controller
/// made (an ownerReference with `controller: true`), while a record that lists an object with a
/// plain owner deletes it.
pub fn owned(object: &Listed, context: &Context) -> Option<KeepReason> {
    let owner = match context.question {
        Question::Orphan { .. } => owned_by(object),
        Question::Teardown { .. } => controller_of(&object.meta),
    };
    owner.map(|owner| KeepReason::ControllerOwned { owner })
}

/// The controller of an object (its ownerReference with `controller: true`), `Kind/name`.
pub fn controller_of(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| format!("{}/{}", o.kind, o.name))
}

/// Rule: a tool's keep marker (`helm.sh/resource-policy: keep`, `kustomize.toolkit.fluxcd.io/prune:
/// disabled`, ...) keeps the object.
pub fn keep_marked(object: &Listed, _context: &Context) -> Option<KeepReason> {
    keep_marker(&object.meta).map(|marker| KeepReason::Keep { marker })
}

/// Rule: see [`ambiguous_mark`].
pub fn ambiguous(object: &Listed, context: &Context) -> Option<KeepReason> {
    ambiguous_mark(&object.meta, context.trackers)
}

/// A mark that names its stack by name alone where the stack lives in a namespace: which stack
/// it means cannot be told, so the object is never acted on. Flux (Kustomization and
/// HelmRelease labels) and Helm (release annotations) always write the namespace beside the
/// name: a mark without it is always ambiguous. An Argo CD instance label names its Application
/// by name: ambiguous when Applications of that name live in several namespaces (`trackers`).
pub fn ambiguous_mark(meta: &ObjectMeta, trackers: Option<&Trackers>) -> Option<KeepReason> {
    full_marks(meta).into_iter().find_map(|mark| {
        if mark.value.namespace.is_some() {
            return None;
        }
        let always = matches!(mark.preset, Preset::Flux | Preset::FluxHelm | Preset::Helm);
        let mut namespaces: Vec<String> = trackers
            .and_then(|t| t.namespaces_by_name.get(&(mark.preset, mark.value.name.clone())))
            .map(|found| found.iter().flatten().cloned().collect())
            .unwrap_or_default();
        namespaces.sort();
        let several = namespaces.len() > 1 && (always || mark.preset == Preset::ArgoCd);
        (always || several).then(|| KeepReason::AmbiguousMark {
            mark: mark.to_string(),
            namespaces,
        })
    })
}

/// Rule: a teardown deletes what a tool tracks; an object no tool marks (it only depends on what
/// is torn down) is not a teardown's. (An orphan search plans untracked objects only with
/// `--untracked`.)
pub fn untracked(object: &Listed, context: &Context) -> Option<KeepReason> {
    let teardown = matches!(context.question, Question::Teardown { .. });
    let untracked =
        !crate::model::trackers::is_tracked(&object.meta) && crate::stack::members::tracker_key(object).is_none();
    (teardown && untracked).then_some(KeepReason::Untracked)
}

/// Rule: an orphan prune of one stack leaves what another stack or tool marks too (see
/// [`ComparedStack::others`]): that one's desired set was not given, so whether its tool would prune
/// the object is unknown. A teardown asks the same question over the plan as a whole, as the
/// stacks it keeps change what is torn down (`prune::teardown`).
pub fn marked_elsewhere(object: &Listed, context: &Context) -> Option<KeepReason> {
    match &context.question {
        Question::Orphan {
            stack: Some(stack),
            compared: true,
            ..
        } => stack
            .others(&object.meta)
            .first()
            .map(|mark| KeepReason::TrackedElsewhere {
                mark: full_mark(mark.clone()).to_string(),
            }),
        _ => None,
    }
}

/// Rule: the tracking tools' own rules (Argo CD `Prune=false`, Helm hooks, kapp, Flux v1 gc
/// marks: [`crate::stack::policy`]; kpt's prune filters: [`kpt_needed`]), asked for every tool that
/// marks the object and the one named.
pub fn tool_rules(object: &Listed, context: &Context) -> Option<KeepReason> {
    let (tracker, needs) = match &context.question {
        Question::Orphan { tracker, needs, .. } => (*tracker, *needs),
        Question::Teardown { .. } => (None, None),
    };
    tool_keeps(object, tracker, needs)
        .or_else(|| kpt_needed(object, context))
        .or_else(|| kapp_unlisted(object, context))
        .or_else(|| argo_unmanaged(object, context))
        .or_else(|| argocd_teardown_keeps(object, context))
        .map(|why| KeepReason::ToolWouldKeep { why })
}

/// Argo CD's cascade when an Application is deleted (argo-cd `controller/appcontroller.go`
/// `shouldBeDeleted`: `!kube.IsCRD(obj)`): it never deletes a CustomResourceDefinition (that
/// would take every custom resource of it), although its sync prunes one. A teardown of an
/// Argo CD stack keeps its CRDs so.
pub fn argocd_teardown_keeps(object: &Listed, context: &Context) -> Option<String> {
    let Question::Teardown { .. } = &context.question else {
        return None;
    };
    let is_crd = object.kind.group == "apiextensions.k8s.io" && object.kind.kind == "CustomResourceDefinition";
    let argo = crate::model::trackers::marks(&object.meta)
        .iter()
        .any(|mark| mark.preset == Preset::ArgoCd);
    (is_crd && argo).then(|| "Argo CD never deletes a CRD when its Application is deleted".to_string())
}

/// kpt's prune filters, in an orphan search of a kpt stack (the tracker named, or the object's
/// own mark): kpt never prunes what the objects it applies need. A Namespace that objects of
/// the new desired set live in (cli-utils `pkg/apply/filter/local-namespaces-filter.go`,
/// "namespace still in use"), and an object a desired object depends on, explicitly
/// (`depends-on`) or as the CRD of its kind (`pkg/apply/filter/dependency-filter.go`: a
/// dependent scheduled for apply skips the prune). Teardowns delete every member, as
/// `kpt live destroy` does, which has neither filter. Flux and kubectl ApplySet prune have none.
pub fn kpt_needed(object: &Listed, context: &Context) -> Option<String> {
    let Question::Orphan {
        tracker,
        needs: Some(needs),
        ..
    } = &context.question
    else {
        return None;
    };
    let kpt = tracker.is_some_and(|t| t.preset == Preset::Kpt)
        || crate::model::trackers::marks(&object.meta)
            .iter()
            .any(|mark| mark.preset == Preset::Kpt);
    kpt.then(|| needs.why(&object.id())).flatten()
}

/// Rule: kapp's deploy lists an app's objects of the kinds its app record's `usedGKs` and the
/// desired set hold only (see [`crate::stack::desired::Needs::scope_kapp`]): an object of another
/// kind is never seen, so never pruned (membership review 27, F1).
pub fn kapp_unlisted(object: &Listed, context: &Context) -> Option<String> {
    let Question::Orphan { needs: Some(needs), .. } = &context.question else {
        return None;
    };
    let group = crate::stack::policy::kapp_group(object, Some(needs)).unwrap_or(&object.kind.group);
    crate::model::trackers::marks(&object.meta)
        .iter()
        .filter(|mark| mark.preset == Preset::Kapp)
        .find_map(|mark| needs.unlisted_by_kapp(&mark.value.name, group, &object.kind.kind))
}

/// Rule: Argo CD never manages, so never prunes, an object of a kind its core exclusions or its
/// control plane's `resource.exclusions` / `resource.inclusions` leave out (see
/// [`crate::stack::desired::Needs::scope_argo`]; membership review 30, F1).
pub fn argo_unmanaged(object: &Listed, context: &Context) -> Option<String> {
    let Question::Orphan { needs: Some(needs), .. } = &context.question else {
        return None;
    };
    crate::model::trackers::marks(&object.meta)
        .iter()
        .filter(|mark| mark.preset == Preset::ArgoCd)
        .find_map(|mark| needs.unmanaged_by_argo(&mark.value.name, &object.id()))
}

/// Rule: a member of a stack torn down whose tool would leave it behind when the stack is
/// deleted (Flux `spec.prune: false`, `spec.deletionPolicy: Orphan`: see
/// [`crate::stack::members::orphans_members`]) is kept, as that tool would keep it.
pub fn left_by_stack(_object: &Listed, context: &Context) -> Option<KeepReason> {
    let Question::Teardown { claims } = &context.question else {
        return None;
    };
    claims
        .iter()
        .find_map(|c| c.leaves_members)
        .map(|why| KeepReason::ToolWouldKeep { why: why.to_string() })
}

/// Rule: when the record or policy of a stack that claims the object cannot be read, what its
/// tool would do is unknown: the object is kept.
pub fn unreadable_record(_object: &Listed, context: &Context) -> Option<KeepReason> {
    let Question::Teardown { claims } = &context.question else {
        return None;
    };
    claims.iter().find_map(|c| {
        c.unreadable.map(|why| KeepReason::RecordUnreadable {
            why: format!("its stack {} could not be read ({why})", c.stack),
        })
    })
}

#[cfg(test)]
mod tests;
