//! Argo CD: the Application a stack's marks name, read for what decides which objects its
//! manifests stand for. A namespaced manifest written without a namespace is Argo CD's in the
//! Application's `spec.destination.namespace` (gitops-engine `pkg/sync/reconcile.go`
//! `Reconcile`: `text.FirstNonEmpty(obj.GetNamespace(), namespace)`, called by argo-cd
//! `controller/state.go` with `app.Spec.Destination.Namespace`), never in `-n`'s or the
//! context's (membership review 15: the live object in the destination was pruned under `-A`).

use kube::api::{DynamicObject, ListParams};
use serde_json::Value;

use super::StackRecord;
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_not_found, UserError};
use crate::stack::desired::NoNamespace;

/// The Application's group and kind.
const APPLICATION: (&str, &str) = ("argoproj.io", "Application");

/// The record of the Argo CD stack `app` (the name its tracking id or instance label carries:
/// `NAME`, or `NAMESPACE_NAME` for an Application outside the control-plane namespace): the
/// destination namespace as the default of namespace-less manifests; with none, such a manifest
/// is unplaced ([`NoNamespace::ArgoCd`]: Argo CD syncs and prunes nothing of the Application).
/// Without the Application (no Argo CD here, or none of that name), nothing is known and the
/// manifests take `-n`'s namespace; Applications of that name that disagree are refused.
pub async fn argo_record(session: &Session, app: &str) -> Result<StackRecord, UserError> {
    let applications = find_applications(session, app).await?;
    let mut destinations: Vec<Option<&str>> = applications.iter().map(destination_of).collect();
    destinations.sort();
    destinations.dedup();
    match destinations.as_slice() {
        [] => Ok(StackRecord::default()),
        // Argo CD syncs nothing of an Application whose manifest has no namespace then.
        [None] => Ok(StackRecord {
            namespace_required: Some(NoNamespace::ArgoCd),
            ..StackRecord::default()
        }),
        [Some(namespace)] => Ok(StackRecord {
            default_namespace: Some(namespace.to_string()),
            ..StackRecord::default()
        }),
        _ => Err(UserError::refused(format!(
            "{} Applications are named {app}, with different spec.destination.namespace: which namespace Argo CD gives a manifest without one is not known",
            applications.len()
        ))
        .hint("write metadata.namespace in each namespaced manifest, or name the Application as NAMESPACE_NAME")),
    }
}

/// The destination namespace of an Application, when it names one.
fn destination_of(application: &DynamicObject) -> Option<&str> {
    application
        .data
        .pointer("/spec/destination/namespace")
        .and_then(Value::as_str)
        .filter(|namespace| !namespace.is_empty())
}

/// The Applications `app` may name: the one of `NAMESPACE_NAME`, else every one of that name.
async fn find_applications(session: &Session, app: &str) -> Result<Vec<DynamicObject>, UserError> {
    let Some(kind) = session.catalog.get(APPLICATION.0, APPLICATION.1) else {
        return Ok(Vec::new());
    };
    let unreadable = |err: kube::Error| {
        UserError::refused(format!(
            "Application {app} cannot be read ({}): its spec.destination.namespace decides which objects the manifests are",
            session.connection.explain(&err).message
        ))
        .hint("allow `get` and `list` on applications.argoproj.io, or retry when the API server answers")
    };
    let client = &session.connection.client;
    if let Some((namespace, name)) = app
        .split_once('_')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
    {
        let api = crate::cluster::collect::api_for(client, kind, Some(namespace));
        return match with_retries("get Application", || api.get(name)).await {
            Ok(found) => Ok(vec![found]),
            Err(err) if is_not_found(&err) => Ok(Vec::new()),
            Err(err) => Err(unreadable(err)),
        };
    }
    let api = crate::cluster::collect::api_for(client, kind, None);
    let params = ListParams::default().fields(&format!("metadata.name={app}"));
    match with_retries("list Applications", || api.list(&params)).await {
        Ok(list) => Ok(list.items),
        Err(err) => Err(unreadable(err)),
    }
}
