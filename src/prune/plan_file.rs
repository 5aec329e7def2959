//! Saved plans (`prune --plan-out FILE`, then `prune --plan FILE`): the two-step flow where a CI
//! job writes the plan, a person reads it, and the same plan runs. The file holds the context,
//! the server, how the plan was asked for, every planned object with its UID, wave and reason,
//! what is kept, the cascade victims and the parents. Executing it plans again from the live
//! cluster and refuses when anything differs from the file: another server, an object whose UID
//! changed (re-created under the same name), one that left or joined the plan (a new dependent),
//! a new cascade victim or parent, or an object that moved to another wave.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{json, Value};

use crate::error::UserError;
use crate::model::identity::ObjectId;
use crate::prune::teardown::PrunePlan;

/// The `apiVersion` of a saved plan.
pub const API_VERSION: &str = "kubectl-stack.dev/v1";
/// The `kind` of a saved plan.
pub const KIND: &str = "PrunePlan";

/// How a plan was asked for: what `--plan` re-plans with when the command names nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The stacks named (TYPE/NAME, or TYPE with a selector); empty for an orphan prune.
    pub targets: Vec<String>,
    /// The namespace the names were resolved in.
    pub namespace: String,
    /// The selector (`-l`), if any.
    pub selector: Option<String>,
    /// For an orphan prune, the digest of the desired set the orphans were judged against
    /// ([`crate::prune::orphans::DesiredDigest`]): `--plan` runs only against the same one.
    pub desired: Option<String>,
}

/// Where a plan runs.
#[derive(Debug, Clone)]
pub struct Place<'a> {
    /// The kubeconfig context.
    pub context: &'a str,
    /// The API server URL.
    pub server: &'a str,
}

/// The saved plan as JSON.
pub fn to_json(plan: &PrunePlan, place: &Place, request: &Request) -> Value {
    let waves: Vec<Value> = plan
        .waves
        .iter()
        .enumerate()
        .flat_map(|(wave, targets)| {
            targets
                .iter()
                .map(move |t| json!({"id": t.id, "uid": t.uid, "wave": wave + 1, "why": t.why}))
        })
        .collect();
    let kept: Vec<Value> = plan
        .kept
        .iter()
        .map(|k| crate::stack::keep::kept_json(&k.id, &k.reason))
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "context": place.context,
        "server": place.server,
        "request": {"targets": request.targets, "namespace": request.namespace, "selector": request.selector, "desired": request.desired},
        "objects": waves,
        "kept": kept,
        "cascades": plan.cascades,
        "parents": plan.parents,
        "warnings": plan.warnings,
    })
}

/// Writes the saved plan.
pub fn write(path: &Path, plan: &PrunePlan, place: &Place, request: &Request) -> Result<(), UserError> {
    let text = serde_json::to_string_pretty(&to_json(plan, place, request))
        .map_err(|err| UserError::failed(format!("cannot encode the plan: {err}")))?;
    std::fs::write(path, text + "\n")
        .map_err(|err| UserError::failed(format!("cannot write the plan to {}: {err}", path.display())))
}

/// One planned object of a saved plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedObject {
    /// The UID planned.
    pub uid: String,
    /// The wave (from 1).
    pub wave: usize,
}

/// A saved plan, as read back.
#[derive(Debug, Clone, Default)]
pub struct Saved {
    /// The API server it was made against.
    pub server: String,
    /// The context it was made with.
    pub context: String,
    /// How it was asked for.
    pub request: Request,
    /// The planned objects.
    pub objects: HashMap<ObjectId, SavedObject>,
    /// The UIDs of the accepted cascade victims.
    pub victims: HashSet<String>,
    /// The parents found.
    pub parents: HashSet<ObjectId>,
}

fn object_id(value: &Value) -> Option<ObjectId> {
    Some(ObjectId::new(
        value.get("group")?.as_str()?,
        value.get("kind")?.as_str()?,
        value.get("namespace").and_then(Value::as_str),
        value.get("name")?.as_str()?,
    ))
}

fn text(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Why a document is not a saved plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanFileError {
    /// Another `apiVersion` or `kind`.
    #[error("not a saved plan (apiVersion {API_VERSION}, kind {KIND})")]
    NotAPlan,
    /// An entry of `objects` has no `id`.
    #[error("an object without an id")]
    NoId,
    /// An entry of `objects` has no `wave`.
    #[error("an object without a wave")]
    NoWave,
    /// A wave number larger than this machine counts.
    #[error("{0}")]
    WaveOutOfRange(#[from] std::num::TryFromIntError),
}

/// Parses a saved plan.
pub fn parse(document: &Value) -> Result<Saved, PlanFileError> {
    if document.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION)
        || document.get("kind").and_then(Value::as_str) != Some(KIND)
    {
        return Err(PlanFileError::NotAPlan);
    }
    let list = |key: &str| document.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    let mut objects = HashMap::new();
    for entry in list("objects") {
        let id = entry.get("id").and_then(object_id).ok_or(PlanFileError::NoId)?;
        let wave = entry.get("wave").and_then(Value::as_u64).ok_or(PlanFileError::NoWave)?;
        let saved = SavedObject {
            uid: text(&entry, "/uid"),
            wave: usize::try_from(wave)?,
        };
        objects.insert(id, saved);
    }
    let victims = list("cascades")
        .iter()
        .flat_map(|c| c.get("victims").and_then(Value::as_array).cloned().unwrap_or_default())
        .map(|v| text(&v, "/uid"))
        .collect();
    let parents = list("parents")
        .iter()
        .filter_map(|p| p.get("id").and_then(object_id))
        .collect();
    let request = Request {
        targets: document
            .pointer("/request/targets")
            .and_then(Value::as_array)
            .map(|targets| targets.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        namespace: text(document, "/request/namespace"),
        selector: document
            .pointer("/request/selector")
            .and_then(Value::as_str)
            .map(str::to_string),
        desired: document
            .pointer("/request/desired")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    Ok(Saved {
        server: text(document, "/server"),
        context: text(document, "/context"),
        request,
        objects,
        victims,
        parents,
    })
}

/// The largest plan file read: a plan of 100,000 objects is about 30 MiB.
const MAX_PLAN_BYTES: u64 = 256 << 20;

/// Reads a saved plan from a file. The file is parsed as it is read (a device that streams
/// bytes forever, `/dev/zero`, is refused at its first byte, never read into memory whole), and
/// never past [`MAX_PLAN_BYTES`].
pub fn read(path: &Path) -> Result<Saved, UserError> {
    use std::io::Read;
    let cannot = |err: std::io::Error| UserError::failed(format!("cannot read the plan {}: {err}", path.display()));
    let too_large = || {
        UserError::usage(format!(
            "{} is larger than {} MiB: not a plan kubectl-stack wrote",
            path.display(),
            MAX_PLAN_BYTES >> 20
        ))
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    if file.metadata().map_err(cannot)?.len() > MAX_PLAN_BYTES {
        return Err(too_large());
    }
    let mut bounded = std::io::BufReader::new(file).take(MAX_PLAN_BYTES + 1);
    let document: Value = serde_json::from_reader(&mut bounded).map_err(|err| match bounded.limit() {
        0 => too_large(),
        _ => UserError::usage(format!("{} is not JSON: {err}", path.display())),
    })?;
    parse(&document).map_err(|why| UserError::usage(format!("{}: {why}", path.display())))
}

/// Refuses (exit 4) to run a saved orphan plan against another desired set than the one it was
/// made from (`-f`/`-k`/`--inventory` given again, resolved again): the plan that runs must be
/// the plan that was reviewed, for the reasons that were reviewed. `now` is the digest of the
/// desired set given now (`None` for a teardown).
pub fn refuse_other_desired(saved: &Saved, now: Option<&str>) -> Result<(), UserError> {
    let why = match (saved.request.desired.as_deref(), now) {
        (Some(then), Some(now)) if then == now => return Ok(()),
        (None, None) => return Ok(()),
        (Some(_), Some(_)) => "the desired set given now (-f/-k/--inventory, resolved in the cluster) differs from the one the plan was made from",
        (Some(_), None) => "the plan was made from a desired set (-f/-k/--inventory), and none is given now",
        (None, Some(_)) => "the plan records no desired set to compare with the one given now",
    };
    crate::say!("changed: {why}");
    Err(UserError::refused(format!("{why}: nothing was deleted"))
        .hint("give the same -f/-k/--inventory flags as for --plan-out, or save a new plan with --plan-out"))
}

/// What differs between a saved plan and the plan made now on `server`; empty when the saved
/// plan still holds exactly.
pub fn changes(saved: &Saved, fresh: &PrunePlan, server: &str) -> Vec<String> {
    let mut found = Vec::new();
    if saved.server != server {
        found.push(format!(
            "the server is {server}, the plan was made against {} (context {})",
            saved.server, saved.context
        ));
    }
    let mut now: HashMap<&ObjectId, (&str, usize)> = HashMap::new();
    for (wave, targets) in fresh.waves.iter().enumerate() {
        for target in targets {
            now.insert(&target.id, (target.uid.as_str(), wave + 1));
        }
    }
    let mut saved_ids: Vec<&ObjectId> = saved.objects.keys().collect();
    saved_ids.sort();
    for id in saved_ids {
        let planned = &saved.objects[id];
        match now.get(id) {
            None => found.push(format!("{id} is no longer in the plan")),
            Some((uid, _)) if *uid != planned.uid => found.push(format!(
                "{id} has UID {uid}, the plan has {}: it was re-created under the same name",
                planned.uid
            )),
            Some((_, wave)) if *wave != planned.wave => {
                found.push(format!("{id} moved from wave {} to wave {wave}", planned.wave))
            }
            Some(_) => {}
        }
    }
    for target in fresh.waves.iter().flatten() {
        if !saved.objects.contains_key(&target.id) {
            found.push(format!("{} is new in the plan ({})", target.id, target.why));
        }
    }
    for cascade in &fresh.cascades {
        for victim in cascade.victims.iter().filter(|v| !saved.victims.contains(&v.uid)) {
            found.push(format!(
                "deleting {} would now also take {} ({}), which the plan does not name",
                cascade.holder, victim.id, victim.why
            ));
        }
    }
    for parent in fresh.parents.iter().filter(|p| !saved.parents.contains(&p.id)) {
        found.push(format!("{} is a new parent of the plan", parent.id));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::discovery::KindInfo;
    use crate::prune::execute::Target;
    use std::sync::Arc;

    /// Issue 26 item 6: a device that streams bytes forever is refused at its first byte, and a
    /// file over the bound is refused by its size, before anything is read.
    #[test]
    fn endless_and_oversized_plan_files_are_refused_without_reading_them() {
        let started = std::time::Instant::now();
        let endless = read(Path::new("/dev/zero"))
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(endless.contains("is not JSON"), "{endless}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let dir = std::env::temp_dir().join(format!("plan-bound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sparse = dir.join("huge.json");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(MAX_PLAN_BYTES + 1)
            .unwrap();
        let huge = read(&sparse).err().map(|e| e.message).unwrap_or_default();
        assert!(huge.contains("larger than 256 MiB"), "{huge}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn target(name: &str, uid: &str) -> Target {
        Target {
            id: ObjectId::new("", "ConfigMap", Some("shop"), name),
            kind: Arc::new(KindInfo {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                singular: "configmap".into(),
                short_names: vec![],
                namespaced: true,
                verbs: vec![],
            }),
            uid: uid.into(),
            why: "member".into(),
            terminating: false,
            finalizers: vec![],
            tracked_by: String::new(),
        }
    }

    #[test]
    fn a_saved_plan_round_trips_and_every_change_is_named() {
        let plan = PrunePlan {
            waves: vec![vec![target("a", "uid-a")], vec![target("b", "uid-b")]],
            ..Default::default()
        };
        let place = Place {
            context: "ci",
            server: "https://k:6443",
        };
        let request = Request {
            targets: vec!["kustomization/s".into()],
            namespace: "flux-system".into(),
            selector: None,
            desired: None,
        };
        let saved = parse(&to_json(&plan, &place, &request)).unwrap();
        assert_eq!(saved.request, request);
        assert_eq!(saved.context, "ci");
        assert!(changes(&saved, &plan, "https://k:6443").is_empty());

        assert_eq!(changes(&saved, &plan, "https://other:6443").len(), 1);
        let recreated = PrunePlan {
            waves: vec![vec![target("a", "uid-a2")], vec![target("b", "uid-b")]],
            ..Default::default()
        };
        let found = changes(&saved, &recreated, "https://k:6443");
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("re-created"), "{found:?}");
        let grown = PrunePlan {
            waves: vec![
                vec![target("a", "uid-a"), target("c", "uid-c")],
                vec![target("b", "uid-b")],
            ],
            ..Default::default()
        };
        let found = changes(&saved, &grown, "https://k:6443");
        assert_eq!(found, vec!["ConfigMap/shop/c is new in the plan (member)".to_string()]);
        assert_eq!(
            parse(&json!({"kind": "Other"})).unwrap_err().to_string(),
            format!("not a saved plan (apiVersion {API_VERSION}, kind {KIND})")
        );
        let document = |objects| json!({"apiVersion": API_VERSION, "kind": KIND, "objects": objects});
        let no_wave = document(json!([{"id": {"group": "", "kind": "ConfigMap", "name": "c"}}]));
        assert_eq!(parse(&no_wave).unwrap_err().to_string(), "an object without a wave");
        assert_eq!(
            parse(&document(json!([{"wave": 0}]))).unwrap_err().to_string(),
            "an object without an id"
        );
    }

    #[test]
    fn an_orphan_plan_runs_only_against_the_desired_set_it_was_made_from() {
        let request = Request {
            desired: Some("d1".into()),
            ..Default::default()
        };
        let place = Place {
            context: "ci",
            server: "https://k:6443",
        };
        let saved = parse(&to_json(&PrunePlan::default(), &place, &request)).unwrap();
        assert_eq!(saved.request.desired.as_deref(), Some("d1"));
        assert!(refuse_other_desired(&saved, Some("d1")).is_ok());
        let other = refuse_other_desired(&saved, Some("d2")).unwrap_err();
        assert_eq!(other.code, crate::error::exit::REFUSED);
        assert!(other.message.contains("differs"), "{}", other.message);
        assert!(refuse_other_desired(&saved, None).is_err());
        let teardown = parse(&to_json(&PrunePlan::default(), &place, &Request::default())).unwrap();
        assert!(refuse_other_desired(&teardown, None).is_ok());
        assert!(refuse_other_desired(&teardown, Some("d1")).is_err());
    }
}
