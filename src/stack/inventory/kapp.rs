//! kapp: the app record a stack's `kapp.k14s.io/app` label names, read for the namespace its
//! manifests written without one are deployed to. `kapp deploy -a APP -n NS` keeps the app
//! record (a ConfigMap labelled `kapp.k14s.io/is-app`, its `data.spec` the JSON app meta with
//! `labelValue`, the id every resource's label carries: carvel-dev/kapp `pkg/kapp/app/app_meta.go`)
//! in NS, and places a namespace-less manifest in NS too (`pkg/kapp/cmd/app/deploy.go`:
//! `PrepareResourcesOpts.DefaultNamespace` is the app's namespace; `pkg/kapp/app/preparation.go`
//! `placeIntoNamespace`), never in the context's (membership review 16, F2). `--into-ns` and
//! `--map-ns` leave no trace on the cluster and cannot be followed.

use serde_json::Value;

use super::{list_labelled, served, StackRecord};
use crate::cluster::session::Session;
use crate::error::UserError;

/// The label of a kapp app record.
pub const KAPP_IS_APP: &str = "kapp.k14s.io/is-app";

/// The record of the kapp app whose resources carry `kapp.k14s.io/app=<label_value>`: its app
/// record's namespace as the default of namespace-less manifests. Without an app record of that
/// id nothing is known (the manifests take `-n`'s namespace); records of that id in several
/// namespaces are refused.
pub async fn kapp_record(session: &Session, label_value: &str) -> Result<StackRecord, UserError> {
    let config_maps = served(session, "", "ConfigMap")?;
    let records = list_labelled(session, config_maps, KAPP_IS_APP).await?;
    let mut namespaces: Vec<String> = records
        .iter()
        .filter(|record| label_value_of(&record.data).as_deref() == Some(label_value))
        .filter_map(|record| record.metadata.namespace.clone())
        .collect();
    namespaces.sort();
    namespaces.dedup();
    match namespaces.as_slice() {
        [] => Ok(StackRecord::default()),
        [namespace] => {
            tracing::info!(
                "kapp app {label_value}: namespaced manifests without a namespace are compared in {namespace}, its app record's (kapp deploy's --into-ns or --map-ns cannot be seen)"
            );
            Ok(StackRecord {
                default_namespace: Some(namespace.clone()),
                ..StackRecord::default()
            })
        }
        several => Err(UserError::refused(format!(
            "kapp app records of id {label_value} are in {} namespaces ({}): which namespace kapp gives a manifest without one is not known",
            several.len(),
            several.join(", ")
        ))
        .hint("write metadata.namespace in each namespaced manifest")),
    }
}

/// The `labelValue` of an app record's `data.spec`, when it reads as kapp's app meta.
fn label_value_of(data: &Value) -> Option<String> {
    let spec = data.pointer("/data/spec").and_then(Value::as_str)?;
    let meta: Value = serde_json::from_str(spec).ok()?;
    meta.get("labelValue").and_then(Value::as_str).map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_app_meta_is_read_as_kapp_writes_it() {
        let record = |spec: &str| serde_json::json!({ "data": { "spec": spec } });
        assert_eq!(
            label_value_of(&record(
                r#"{"labelKey":"kapp.k14s.io/app","labelValue":"1700000002","lastChangeName":"x"}"#
            )),
            Some("1700000002".to_string())
        );
        for hostile in ["", "{", "[]", r#"{"labelValue":7}"#, "null"] {
            assert_eq!(label_value_of(&record(hostile)), None, "{hostile:?}");
        }
        assert_eq!(label_value_of(&serde_json::json!({ "data": {} })), None);
    }
}
