//! kapp: where a kapp app's manifests written without a namespace go. `kapp deploy -a APP -n NS`
//! places such a manifest in NS (carvel-dev/kapp `pkg/kapp/cmd/app/deploy.go`:
//! `PrepareResourcesOpts.DefaultNamespace` is the `-n` flag; `pkg/kapp/app/preparation.go`
//! `placeIntoNamespace`), and the cluster keeps no trace of NS: the app record (a ConfigMap
//! labelled `kapp.k14s.io/is-app`) may live elsewhere (`--app-namespace`, kapp v0.61+), and
//! `--into-ns` and `--map-ns` move resources further. So only the user's `-n` can say it, as
//! kapp's own `-n` was given (membership reviews 16 F2 and 17 F1: the context's namespace, then
//! the app record's, were taken, and a still-wanted object was pruned).

use kube::api::ListParams;
use serde_json::Value;

use super::StackRecord;
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::UserError;
use crate::stack::desired::NoNamespace;

/// The label of kapp's app record ConfigMaps (carvel-dev/kapp `pkg/kapp/app/recorded_app.go`).
const IS_APP: &str = "kapp.k14s.io/is-app";
/// The label kapp marks an app's resources with, by default (`AppMeta.LabelKey`).
const APP_LABEL: &str = "kapp.k14s.io/app";

/// The record of kapp app `app` (the value of its resources' `kapp.k14s.io/app` label) for its
/// namespace-less manifests: `-n`'s namespace when the user gave one (the default,
/// [`StackRecord::namespace_rule`]'s fallback); else none is known, and such a manifest is
/// unplaced ([`NoNamespace::Kapp`]). `comparing` (an orphan comparison): kapp finds an app's
/// resources by the label value its app record holds (`AppMeta.LabelValue`, in the record's
/// `data.spec`), and a record made again gets a new one (`recorded_app.go` `CreateOrUpdate`:
/// the time in nanoseconds), so without a record holding `app` no kapp run prunes them
/// (membership review 19, F5).
///
/// A record's `usedGKs` (the kinds of what its last deploy applied) bounds what `kapp deploy`
/// lists, and so prunes, to those kinds and the new set's (`pkg/kapp/cmd/app/deploy.go`
/// `newAndUsedGKs`, `IdentifiedResourcesListOpts.GKsScope`; `pkg/kapp/resources/
/// identified_resources.go` `List`): [`StackRecord::kapp_kinds`] (membership review 27, F1).
pub async fn kapp_record(session: &Session, app: &str, comparing: bool) -> Result<StackRecord, UserError> {
    let mut kapp_kinds = None;
    if comparing {
        let records = app_records(session, app).await?;
        if records.is_empty() {
            return Err(super::prunes_nothing(&format!(
                "no kapp app record (a ConfigMap labelled {IS_APP}) holds label value {app}: kapp finds an app's resources by that value alone, and no kapp run prunes these"
            )));
        }
        kapp_kinds = used_kinds(&records).map(|kinds| (app.to_string(), kinds));
    }
    Ok(StackRecord {
        namespace_required: (!session.connection.namespace_given).then_some(NoNamespace::Kapp),
        kapp_kinds,
        ..StackRecord::default()
    })
}

/// The kinds the `usedGKs` of each app record holds, one scope per record that holds one (any
/// of them may be the one a deploy reads: membership review 28; an object counts as kapp's only
/// as every one of them would list it: review 33); `None` when none holds one (an app recorded
/// before kapp kept them: its deploy lists every kind). Keys are read as Go's `encoding/json`
/// reads them, whatever their case.
fn used_kinds(records: &[Value]) -> Option<Vec<Vec<(String, String)>>> {
    let scopes: Vec<Vec<(String, String)>> = records
        .iter()
        .filter_map(|meta| {
            let used = field(meta, "usedGKs")?.as_array()?;
            let kind = |entry: &Value, key: &str| {
                field(entry, key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let kinds: std::collections::BTreeSet<_> = used
                .iter()
                .map(|entry| (kind(entry, "Group"), kind(entry, "Kind")))
                .collect();
            Some(kinds.into_iter().collect())
        })
        .collect();
    (!scopes.is_empty()).then_some(scopes)
}

/// A field of a JSON object by its name, compared as Go's `encoding/json` does (an exact match
/// first, then one whatever its case).
fn field<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    let fields = object.as_object()?;
    fields.get(name).or_else(|| {
        fields
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    })
}

/// The `AppMeta` of every app record, of any namespace, that holds `app` as its resources'
/// label value.
async fn app_records(session: &Session, app: &str) -> Result<Vec<Value>, UserError> {
    let Some(kind) = session.catalog.get("", "ConfigMap") else {
        return Ok(Vec::new());
    };
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, None);
    let params = ListParams::default().labels(IS_APP);
    let records = with_retries("list kapp app records", || api.list(&params))
        .await
        .map_err(|err| {
            UserError::refused(format!(
                "kapp's app records cannot be listed ({}): whether kapp would prune these objects is unknown",
                session.connection.explain(&err).message
            ))
            .hint("allow list on configmaps in every namespace (kapp's app records may live in any)")
        })?;
    Ok(records
        .items
        .iter()
        .filter_map(|record| {
            let spec = record.data.pointer("/data/spec").and_then(Value::as_str)?;
            serde_json::from_str::<Value>(spec).ok()
        })
        .filter(|meta| holds_app(meta, app))
        .collect())
}

/// Whether an app record's `AppMeta` marks its resources with `kapp.k14s.io/app=app`.
fn holds_app(meta: &Value, app: &str) -> bool {
    let text = |key: &str| meta.get(key).and_then(Value::as_str);
    text("labelValue") == Some(app) && text("labelKey").is_none_or(|key| key == APP_LABEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_records_used_kinds_bound_what_kapp_lists() {
        let record = |spec: &str| serde_json::from_str::<Value>(spec).unwrap();
        let scoped = record(
            r#"{"labelValue":"1","usedGKs":[{"Group":"","Kind":"ConfigMap"},{"Group":"apps","Kind":"Deployment"}]}"#,
        );
        let old = record(r#"{"labelValue":"1"}"#);
        let none = record(r#"{"labelValue":"1","usedGKs":[]}"#);
        let both = vec![("".into(), "ConfigMap".into()), ("apps".into(), "Deployment".into())];
        assert_eq!(used_kinds(std::slice::from_ref(&scoped)), Some(vec![both.clone()]));
        assert_eq!(used_kinds(std::slice::from_ref(&old)), None);
        assert_eq!(used_kinds(&[none]), Some(vec![Vec::new()]));
        assert_eq!(used_kinds(&[old, scoped.clone()]), Some(vec![both.clone()]));
        // Membership review 28: two records of the value keep what either would not list, and
        // keys are read whatever their case (as Go's encoding/json reads them).
        let other = record(r#"{"labelValue":"1","UsedGks":[{"group":"","kind":"ConfigMap"}]}"#);
        assert_eq!(
            used_kinds(&[scoped, other]),
            Some(vec![both, vec![("".into(), "ConfigMap".into())]])
        );
    }

    #[test]
    fn an_app_record_holds_the_app_by_its_label_value_and_key() {
        let meta = |json: &str| serde_json::from_str::<Value>(json).unwrap();
        assert!(holds_app(
            &meta(r#"{"labelKey":"kapp.k14s.io/app","labelValue":"17"}"#),
            "17"
        ));
        assert!(holds_app(&meta(r#"{"labelValue":"17"}"#), "17"));
        assert!(!holds_app(
            &meta(r#"{"labelKey":"kapp.k14s.io/app","labelValue":"18"}"#),
            "17"
        ));
        assert!(!holds_app(&meta(r#"{"labelKey":"other/app","labelValue":"17"}"#), "17"));
        assert!(!holds_app(&meta(r#"{"labelValue":17}"#), "17"));
    }
}
