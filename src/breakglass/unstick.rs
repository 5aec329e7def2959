//! Break-glass: removing finalizers from objects already being deleted, safely. Every change is
//! a JSON patch that first `test`s the finalizer list as read, so a controller that changed it in
//! between wins; namespaces' `spec.finalizers` go through the `/finalize` subresource with the
//! resourceVersion as read. A backup of every object is written before anything is touched.

use std::io::Write;
use std::path::{Path, PathBuf};

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::cluster::collect::api_for;
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::error::{api_status, is_not_found, root_cause};

/// Which finalizers to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Only these.
    Named(Vec<String>),
    /// Every one.
    All,
}

/// What removing finalizers from one object means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizerChange {
    /// `metadata.finalizers` as read.
    pub current: Vec<String>,
    /// `metadata.finalizers` afterwards.
    pub remaining: Vec<String>,
    /// Namespace `spec.finalizers` as read (empty for other kinds).
    pub spec_current: Vec<String>,
    /// Namespace `spec.finalizers` afterwards.
    pub spec_remaining: Vec<String>,
}

impl FinalizerChange {
    /// Works out the change for an object as read.
    pub fn plan(object: &DynamicObject, is_namespace: bool, removal: &Removal) -> Self {
        let current = object.metadata.finalizers.clone().unwrap_or_default();
        let spec_current: Vec<String> = if is_namespace {
            string_list(object.data.pointer("/spec/finalizers"))
        } else {
            Vec::new()
        };
        let keep = |finalizer: &String| match removal {
            Removal::All => false,
            Removal::Named(names) => !names.contains(finalizer),
        };
        Self {
            remaining: current.iter().filter(|f| keep(f)).cloned().collect(),
            spec_remaining: spec_current.iter().filter(|f| keep(f)).cloned().collect(),
            current,
            spec_current,
        }
    }

    /// The finalizers that would be removed.
    pub fn removed(&self) -> Vec<String> {
        let gone = |before: &[String], after: &[String]| -> Vec<String> {
            before.iter().filter(|f| !after.contains(f)).cloned().collect()
        };
        let mut removed = gone(&self.current, &self.remaining);
        removed.extend(gone(&self.spec_current, &self.spec_remaining));
        removed
    }

    /// Whether anything would change.
    pub fn is_noop(&self) -> bool {
        self.removed().is_empty()
    }
}

/// The JSON patch: `test` that the finalizers are still exactly `current`, then set them.
pub fn finalizer_patch(current: &[String], remaining: &[String]) -> Result<json_patch::Patch, serde_json::Error> {
    serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": current},
        {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
    ]))
}

/// Why a removal did not happen.
#[derive(Debug, thiserror::Error)]
pub enum UnstickError {
    /// The finalizers (or the namespace) changed since they were read.
    #[error("its finalizers changed since they were read (a controller is at work?)")]
    Changed,
    /// Anything else.
    #[error("{0}")]
    Failed(String),
}

fn classify(err: &kube::Error) -> UnstickError {
    match api_status(err) {
        // A failed `test` op is 422 (Invalid) on most servers, 409 where the patch conflicts.
        Some(409) | Some(422) => UnstickError::Changed,
        _ => UnstickError::Failed(root_cause(err)),
    }
}

/// What was really changed on one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Finalizers removed from `metadata.finalizers`.
    pub metadata_removed: Vec<String>,
    /// Finalizers removed from a Namespace's `spec.finalizers`.
    pub spec_removed: Vec<String>,
    /// The object was gone when read again between the two steps.
    pub gone: bool,
}

impl Applied {
    /// Every finalizer removed.
    pub fn removed(&self) -> Vec<String> {
        let mut removed = self.metadata_removed.clone();
        removed.extend(self.spec_removed.iter().cloned());
        removed
    }

    /// What was done, in words: `removed a, b from metadata.finalizers; ...` or `nothing was changed`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.metadata_removed.is_empty() {
            parts.push(format!(
                "removed {} from metadata.finalizers",
                self.metadata_removed.join(", ")
            ));
        }
        if !self.spec_removed.is_empty() {
            parts.push(format!("removed {} from spec.finalizers", self.spec_removed.join(", ")));
        }
        if self.gone {
            parts.push("it is gone".to_string());
        }
        if parts.is_empty() {
            "nothing was changed".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// A removal that stopped: what had been done before, and why it stopped.
#[derive(Debug, thiserror::Error)]
#[error("{error} ({})", done.describe())]
pub struct Stopped {
    /// What was changed before it stopped.
    pub done: Applied,
    /// Why it stopped.
    pub error: UnstickError,
}

fn stopped(done: &Applied, error: UnstickError) -> Stopped {
    Stopped {
        done: done.clone(),
        error,
    }
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// What reading an object again says of a PATCH whose answer was lost.
enum Landed {
    /// The object has exactly the finalizers the PATCH asked for: it was applied.
    Applied,
    /// The object is gone (its last finalizer was removed, and it was deleted).
    Gone,
}

/// For a PATCH that failed without an answer from the API (not an API status: a reset or a
/// timeout), reads the object again: `Some` when it shows what the PATCH did, `None` when the
/// PATCH did not land (or it cannot be told), and the error stands.
async fn outcome_of_lost_patch(
    api: &kube::Api<DynamicObject>,
    name: &str,
    before: &DynamicObject,
    remaining: &[String],
    err: &kube::Error,
) -> Option<Landed> {
    if matches!(err, kube::Error::Api(_)) {
        return None;
    }
    match with_retries("get", || api.get_opt(name)).await {
        Ok(None) => Some(Landed::Gone),
        Ok(Some(now)) if now.metadata.uid != before.metadata.uid => Some(Landed::Gone),
        Ok(Some(now)) => (now.metadata.finalizers.clone().unwrap_or_default() == remaining).then_some(Landed::Applied),
        Err(_) => None,
    }
}

/// Applies the change: the guarded JSON patch on `metadata.finalizers`, then, for a namespace,
/// `PUT /finalize` with `spec.finalizers` reduced. Between the two steps the namespace is read
/// again (the patch changed its resourceVersion): if its UID or `spec.finalizers` changed
/// meanwhile, the second step is not made. Returns exactly what was changed, also when it stops.
pub async fn apply_change(
    client: &Client,
    kind: &KindInfo,
    object: &DynamicObject,
    change: &FinalizerChange,
    dry_run: bool,
) -> Result<Applied, Stopped> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let api = api_for(client, kind, object.metadata.namespace.as_deref());
    let mut done = Applied::default();
    if change.current != change.remaining {
        let patch = finalizer_patch(&change.current, &change.remaining)
            .map_err(|e| stopped(&done, UnstickError::Failed(e.to_string())))?;
        let params = PatchParams {
            dry_run,
            ..Default::default()
        };
        if let Err(err) = api.patch(&name, &params, &Patch::Json::<()>(patch)).await {
            // An answer lost on the way back (a reset, a timeout): the server may have acted.
            // What is true is read again, never guessed.
            match outcome_of_lost_patch(&api, &name, object, &change.remaining, &err).await {
                Some(Landed::Gone) => {
                    done.gone = true;
                    return Ok(done);
                }
                Some(Landed::Applied) => {
                    tracing::info!("{name}: the PATCH's answer was lost, and reading it again shows it was applied")
                }
                None => return Err(stopped(&done, classify(&err))),
            }
        }
        done.metadata_removed = change
            .current
            .iter()
            .filter(|f| !change.remaining.contains(f))
            .cloned()
            .collect();
    }
    if change.spec_current == change.spec_remaining {
        return Ok(done);
    }
    let mut body = if dry_run || done.metadata_removed.is_empty() {
        // Nothing was written yet: the object as read, with its resourceVersion, is the guard.
        let mut body = object.clone();
        body.metadata.finalizers = Some(change.remaining.clone());
        body
    } else {
        match with_retries("get", || api.get(&name)).await {
            Ok(fresh) => fresh,
            Err(err) if is_not_found(&err) => {
                done.gone = true;
                return Ok(done);
            }
            Err(err) => return Err(stopped(&done, UnstickError::Failed(root_cause(&err)))),
        }
    };
    if body.metadata.uid != object.metadata.uid
        || string_list(body.data.pointer("/spec/finalizers")) != change.spec_current
    {
        return Err(stopped(&done, UnstickError::Changed));
    }
    body.data["spec"]["finalizers"] = json!(change.spec_remaining);
    let params = PostParams {
        dry_run,
        ..Default::default()
    };
    api.replace_subresource("finalize", &name, &params, &body)
        .await
        .map_err(|err| stopped(&done, classify(&err)))?;
    done.spec_removed = change
        .spec_current
        .iter()
        .filter(|f| !change.spec_remaining.contains(f))
        .cloned()
        .collect();
    Ok(done)
}

/// The annotation where `kubectl apply` keeps a copy of the whole object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Server-set fields dropped from a backup so that `kubectl apply -f` re-creates the object.
const SERVER_FIELDS: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "generation",
    "selfLink",
];

/// The object as a manifest that `kubectl apply -f` re-creates.
pub fn backup_manifest(object: &DynamicObject, kind: &KindInfo) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    value["apiVersion"] = json!(kind.api_version());
    value["kind"] = json!(kind.kind);
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_FIELDS {
            metadata.remove(*field);
        }
        // A second, plaintext copy of the object (a Secret's data included) that re-creating
        // it does not need.
        if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove(LAST_APPLIED);
        }
    }
    if let Some(fields) = value.as_object_mut() {
        fields.remove("status");
    }
    value
}

/// Creates this run's backup directory: `BASE/unstick-STAMP` (or `…-2`, `…-3`, … when taken),
/// mode 0700, created exclusively: a run never writes into a directory that already existed, so
/// no backup is ever overwritten. `BASE` is created (mode 0700) when missing.
pub fn create_run_dir(base: &Path, stamp: &str) -> std::io::Result<PathBuf> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(base)?;
    let mut exclusive = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        exclusive.mode(0o700);
    }
    for attempt in 1..=1000 {
        let name = if attempt == 1 {
            format!("unstick-{stamp}")
        } else {
            format!("unstick-{stamp}-{attempt}")
        };
        let dir = base.join(name);
        match exclusive.create(&dir) {
            Ok(()) => {
                restrict(&dir, 0o700)?;
                return Ok(dir);
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other(format!(
        "no free backup directory name under {}",
        base.display()
    )))
}

/// Sets exactly these permission bits (the umask may have taken some away; none are added
/// beyond them).
fn restrict(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Creates a file that did not exist (never follows or truncates an existing one), mode 0600.
fn create_exclusive(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    restrict(path, 0o600)?;
    Ok(file)
}

/// Writes one backup file per object (YAML, mode 0600, each created exclusively) into `dir`,
/// which [`create_run_dir`] made for this run; returns the paths, in the objects' order.
pub fn write_backups(
    dir: &Path,
    objects: &[(DynamicObject, std::sync::Arc<KindInfo>)],
) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (object, kind) in objects {
        let namespace = object.metadata.namespace.as_deref().unwrap_or("_cluster");
        let name = object.metadata.name.as_deref().unwrap_or("unnamed");
        let group = if kind.group.is_empty() {
            "core"
        } else {
            kind.group.as_str()
        };
        let stem = format!("{}.{group}_{namespace}_{name}", kind.kind.to_ascii_lowercase());
        let manifest = backup_manifest(object, kind);
        let text = serde_saphyr::to_string(&manifest).map_err(|e| std::io::Error::other(e.to_string()))?;
        let (path, mut file) = open_new_in(dir, &stem)?;
        writeln!(
            file,
            "# kubectl-stack backup of {} {namespace}/{name}, taken before removing finalizers.",
            kind.kind_with_group()
        )?;
        writeln!(file, "# Re-create with: kubectl apply -f {}", path.display())?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        written.push(path);
    }
    Ok(written)
}

/// `DIR/STEM.yaml`, or `DIR/STEM-2.yaml`, … : the first name that does not exist yet.
fn open_new_in(dir: &Path, stem: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    for attempt in 1..=1000 {
        let path = if attempt == 1 {
            dir.join(format!("{stem}.yaml"))
        } else {
            dir.join(format!("{stem}-{attempt}.yaml"))
        };
        match create_exclusive(&path) {
            Ok(file) => return Ok((path, file)),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other(format!("no free backup file name for {stem}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(finalizers: &[&str], spec_finalizers: Option<&[&str]>) -> DynamicObject {
        let mut value = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "x", "uid": "u", "resourceVersion": "5", "finalizers": finalizers,
                         "deletionTimestamp": "2026-01-01T00:00:00Z"},
        });
        if let Some(spec) = spec_finalizers {
            value["spec"] = json!({"finalizers": spec});
            value["status"] = json!({"phase": "Terminating"});
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn named_and_all_removals() {
        let o = object(&["a/x", "b/y"], None);
        let named = FinalizerChange::plan(&o, false, &Removal::Named(vec!["a/x".into()]));
        assert_eq!(named.remaining, vec!["b/y"]);
        assert_eq!(named.removed(), vec!["a/x"]);
        let all = FinalizerChange::plan(&o, false, &Removal::All);
        assert!(all.remaining.is_empty());
        let none = FinalizerChange::plan(&o, false, &Removal::Named(vec!["c/z".into()]));
        assert!(none.is_noop());
    }

    #[test]
    fn namespaces_spec_finalizers_are_planned_apart() {
        let o = object(&[], Some(&["kubernetes"]));
        let change = FinalizerChange::plan(&o, true, &Removal::Named(vec!["kubernetes".into()]));
        assert_eq!(change.spec_current, vec!["kubernetes"]);
        assert!(change.spec_remaining.is_empty());
        assert_eq!(change.removed(), vec!["kubernetes"]);
    }

    #[test]
    fn the_patch_tests_before_it_replaces() {
        let patch = finalizer_patch(&["a".into(), "b".into()], &["b".into()]).unwrap();
        let value = serde_json::to_value(&patch).unwrap();
        assert_eq!(value[0]["op"], "test");
        assert_eq!(value[0]["value"], json!(["a", "b"]));
        assert_eq!(value[1]["op"], "replace");
        assert_eq!(value[1]["value"], json!(["b"]));
    }

    #[test]
    fn backups_leave_out_the_plaintext_last_applied_copy() {
        let secret: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "n", "annotations": {
                LAST_APPLIED: "{\"stringData\":{\"password\":\"hunter2\"}}", "team": "a"}},
            "data": {"password": "aHVudGVyMg=="},
        }))
        .unwrap();
        let kind = KindInfo {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
            plural: "secrets".into(),
            singular: "secret".into(),
            short_names: vec![],
            namespaced: true,
            verbs: vec![],
        };
        let manifest = backup_manifest(&secret, &kind);
        assert_eq!(manifest["metadata"]["annotations"], json!({"team": "a"}));
        assert_eq!(manifest["data"]["password"], "aHVudGVyMg==", "what re-creates it stays");
    }

    #[test]
    fn backups_drop_server_fields() {
        let kind = KindInfo {
            group: String::new(),
            version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            singular: "namespace".into(),
            short_names: vec![],
            namespaced: false,
            verbs: vec![],
        };
        let manifest = backup_manifest(&object(&["a"], Some(&["kubernetes"])), &kind);
        assert!(manifest["metadata"].get("uid").is_none());
        assert!(manifest["metadata"].get("resourceVersion").is_none());
        assert!(manifest["metadata"].get("deletionTimestamp").is_none());
        assert!(manifest.get("status").is_none());
        assert_eq!(manifest["metadata"]["finalizers"], json!(["a"]));
        let base = std::env::temp_dir().join(format!("stack-backup-test-{}", std::process::id()));
        let dir = create_run_dir(&base, "20260101T000000Z").unwrap();
        let again = create_run_dir(&base, "20260101T000000Z").unwrap();
        assert_ne!(dir, again, "a second run gets a new directory");
        let kind = std::sync::Arc::new(kind);
        let pair = (object(&["a"], None), kind);
        let written = write_backups(&dir, &[pair.clone(), pair]).unwrap();
        assert_eq!(written.len(), 2);
        assert_ne!(
            written[0], written[1],
            "the same object twice is written twice, never over itself"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&written[0]), 0o600);
            assert_eq!(mode(&dir), 0o700);
        }
        let text = std::fs::read_to_string(&written[0]).unwrap();
        assert!(text.contains("kind: Namespace"), "{text}");
        let _ = std::fs::remove_dir_all(base);
    }
}
