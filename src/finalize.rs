//! Break-glass: removing finalizers from objects already being deleted, safely. Every change is
//! a JSON patch that first `test`s the finalizer list as read, so a controller that changed it in
//! between wins; namespaces' `spec.finalizers` go through the `/finalize` subresource with the
//! resourceVersion as read. A backup of every object is written before anything is touched.

use std::io::Write;
use std::path::{Path, PathBuf};

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::collect::api_for;
use crate::discovery::KindInfo;
use crate::error::{api_status, root_cause};

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
            object
                .data
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .map(|f| f.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default()
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
    #[error("its finalizers changed since they were read (a controller is at work?); nothing was changed")]
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

/// Applies the change: the guarded JSON patch on `metadata.finalizers`, then, for a namespace,
/// `PUT /finalize` with `spec.finalizers` reduced and the resourceVersion as read.
pub async fn apply_change(
    client: &Client,
    kind: &KindInfo,
    object: &DynamicObject,
    change: &FinalizerChange,
    dry_run: bool,
) -> Result<(), UnstickError> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let api = api_for(client, kind, object.metadata.namespace.as_deref());
    if change.current != change.remaining {
        let patch =
            finalizer_patch(&change.current, &change.remaining).map_err(|e| UnstickError::Failed(e.to_string()))?;
        let params = PatchParams {
            dry_run,
            ..Default::default()
        };
        api.patch(&name, &params, &Patch::Json::<()>(patch))
            .await
            .map_err(|err| classify(&err))?;
    }
    if change.spec_current != change.spec_remaining {
        let mut body = object.clone();
        body.metadata.finalizers = Some(change.remaining.clone());
        body.data["spec"]["finalizers"] = json!(change.spec_remaining);
        let params = PostParams {
            dry_run,
            ..Default::default()
        };
        api.replace_subresource("finalize", &name, &params, &body)
            .await
            .map_err(|err| classify(&err))?;
    }
    Ok(())
}

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
    }
    if let Some(fields) = value.as_object_mut() {
        fields.remove("status");
    }
    value
}

/// Writes one backup file per object (YAML, mode 0600) into `dir`; returns the paths.
pub fn write_backups(
    dir: &Path,
    objects: &[(DynamicObject, std::sync::Arc<KindInfo>)],
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (object, kind) in objects {
        let namespace = object.metadata.namespace.as_deref().unwrap_or("_cluster");
        let name = object.metadata.name.as_deref().unwrap_or("unnamed");
        let group = if kind.group.is_empty() {
            "core"
        } else {
            kind.group.as_str()
        };
        let path = dir.join(format!(
            "{}.{group}_{namespace}_{name}.yaml",
            kind.kind.to_ascii_lowercase()
        ));
        let manifest = backup_manifest(object, kind);
        let text = serde_saphyr::to_string(&manifest).map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&path)?;
        writeln!(
            file,
            "# kubectl-stack backup of {} {namespace}/{name}, taken before removing finalizers.",
            kind.kind_with_group()
        )?;
        writeln!(file, "# Re-create with: kubectl apply -f {}", path.display())?;
        file.write_all(text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
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
        let dir = std::env::temp_dir().join(format!("stack-backup-test-{}", std::process::id()));
        let written = write_backups(&dir, &[(object(&["a"], None), std::sync::Arc::new(kind))]).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&written[0]).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        let text = std::fs::read_to_string(&written[0]).unwrap();
        assert!(text.contains("kind: Namespace"), "{text}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
