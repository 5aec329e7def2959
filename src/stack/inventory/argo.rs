//! Argo CD: the Application a stack's marks name, read for what decides which objects its
//! manifests stand for, and whether Argo CD prunes at all. A namespaced manifest written without
//! a namespace is Argo CD's in the Application's `spec.destination.namespace` (gitops-engine
//! `pkg/sync/reconcile.go` `Reconcile`: `text.FirstNonEmpty(obj.GetNamespace(), namespace)`,
//! called by argo-cd `controller/state.go` with `app.Spec.Destination.Namespace`), never in `-n`'s
//! or the context's (membership review 15). A name-only tracking id names the Application of that
//! name in the control-plane namespace only (argo-cd `util/argo/argo.go` `AppInstanceName`), the
//! namespace that holds Argo CD's `argocd-cm` ConfigMap (review 17, F2); and
//! `spec.syncPolicy.syncOptions: [Prune=false]` keeps every resource of the Application (argo-cd
//! `docs/user-guide/sync-options.md`, "No Prune Resources": review 17, F3). An Application whose
//! `spec.destination` is another cluster reads and prunes live objects there only (argo-cd
//! `controller/state.go` `CompareAppState` lists them from the destination cluster's cache):
//! nothing of it here is an orphan (review 19, F1). Kustomize overrides in its source
//! (`namePrefix`, `nameSuffix`, `namespace`, `patches`, `components`: argo-cd
//! `docs/user-guide/kustomize.md`), a Helm chart or Helm options, and a config management
//! plugin make it build other names than the files hold, as a Flux Kustomization's overrides
//! do, and `-f`/`-k` do not reproduce them (reviews 19 F2 and 20 G1).

use kube::api::{DynamicObject, ListParams};
use serde_json::Value;

use super::StackRecord;
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_not_found, UserError};
use crate::stack::desired::NoNamespace;

/// The Application's group and kind.
const APPLICATION: (&str, &str) = ("argoproj.io", "Application");
/// The ConfigMap that marks Argo CD's control-plane namespace.
const ARGOCD_CM: &str = "argocd-cm";

/// The record of the Argo CD stack `app` (the name its tracking id or instance label carries:
/// `NAME`, or `NAMESPACE_NAME` for an Application outside the control-plane namespace): the
/// destination namespace as the default of namespace-less manifests; with none, or no telling
/// which Application it is, such a manifest is unplaced. Without the Application kind nothing is
/// known and the manifests take `-n`'s namespace. `comparing` (an orphan comparison, not a
/// teardown): an Application that prunes nothing is refused ([`super::prunes_nothing`]).
pub async fn argo_record(session: &Session, app: &str, comparing: bool) -> Result<StackRecord, UserError> {
    if session.catalog.get(APPLICATION.0, APPLICATION.1).is_none() {
        return Ok(StackRecord::default());
    }
    let applications = find_applications(session, app).await?;
    if let Some(keeping) = applications.iter().find(|a| comparing && prunes_none(a)) {
        return Err(super::prunes_nothing(&format!(
            "Application {} sets Prune=false in spec.syncPolicy.syncOptions: Argo CD prunes none of its resources",
            name_of(keeping)
        )));
    }
    if let Some(why) = applications.iter().filter(|_| comparing).find_map(deploys_elsewhere) {
        return Err(super::prunes_nothing(&why));
    }
    let built_as = built_as(&applications);
    let overrides = StackRecord {
        renamed_by: renamed_by(&applications),
        build_overrides: sources_of(&applications, built_as.as_deref()),
        // No Application: nothing is built, and what its objects are is told elsewhere.
        path_reading: (!applications.is_empty()).then_some(super::PathReading::ArgoCd { built_as }),
        ..StackRecord::default()
    };
    let mut destinations: Vec<Option<&str>> = applications.iter().map(destination_of).collect();
    destinations.sort();
    destinations.dedup();
    let unplaced = |by| StackRecord {
        namespace_required: Some(by),
        ..overrides.clone()
    };
    match destinations.as_slice() {
        [] => Ok(unplaced(NoNamespace::ArgoCdUnknown)),
        // Argo CD syncs nothing of an Application whose manifest has no namespace then.
        [None] => Ok(unplaced(NoNamespace::ArgoCd)),
        [Some(namespace)] => Ok(StackRecord {
            default_namespace: Some(namespace.to_string()),
            ..overrides.clone()
        }),
        _ => Err(UserError::refused(format!(
            "{} Applications are named {app}, with different spec.destination.namespace: which namespace Argo CD gives a manifest without one is not known",
            applications.len()
        ))
        .hint("write metadata.namespace in each namespaced manifest, or name the Application as NAMESPACE_NAME")),
    }
}

/// `NAMESPACE/NAME` of an Application.
fn name_of(application: &DynamicObject) -> String {
    format!(
        "{}/{}",
        application.metadata.namespace.as_deref().unwrap_or_default(),
        application.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The address Argo CD gives the cluster it runs in (argo-cd `common/common.go`
/// `KubernetesInternalAPIServerAddr`), and that cluster's name (`InClusterName`).
const IN_CLUSTER: (&str, &str) = ("https://kubernetes.default.svc", "in-cluster");

/// Why an Application prunes nothing in this cluster: its `spec.destination` is another one (or
/// none: Argo CD then syncs nothing of it).
fn deploys_elsewhere(application: &DynamicObject) -> Option<String> {
    let field = |name: &str| {
        application
            .data
            .pointer(&format!("/spec/destination/{name}"))
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
    };
    let elsewhere = match (field("server"), field("name")) {
        (Some(server), _) if server.trim_end_matches('/') == IN_CLUSTER.0 => return None,
        (None, Some(name)) if name == IN_CLUSTER.1 => return None,
        (Some(server), _) => format!("spec.destination.server {server}"),
        (None, Some(name)) => format!("spec.destination.name {name}"),
        (None, None) => "no spec.destination.server or name".to_string(),
    };
    Some(format!(
        "Application {} deploys to another cluster than the one it runs in ({elsewhere}): Argo CD reads and prunes its resources there, none here",
        name_of(application)
    ))
}

/// The kustomize overrides of an Application's sources that change what it builds beyond its
/// files (argo-cd `docs/user-guide/kustomize.md`).
const RENAMING_OVERRIDES: [&str; 5] = ["namePrefix", "nameSuffix", "namespace", "patches", "components"];

/// An Application's sources, each with where it is: `spec.source`, and each of `spec.sources`.
fn sources(application: &DynamicObject) -> impl Iterator<Item = (String, &Value)> {
    let single = application
        .data
        .pointer("/spec/source")
        .map(|source| ("spec.source".to_string(), source));
    let many = application
        .data
        .pointer("/spec/sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(index, source)| (format!("spec.sources[{index}]"), source));
    single.into_iter().chain(many)
}

/// What of one source makes Argo CD build other names than the files hold: its kustomize
/// overrides ([`RENAMING_OVERRIDES`]); a Helm chart (`chart`) or Helm options (`helm`: the
/// release name, values and parameters it renders with, argo-cd `docs/user-guide/helm.md`); a
/// config management plugin (`plugin`: whatever it outputs). Each as `PATH.FIELD`.
fn build_inputs(path: &str, source: &Value) -> Vec<String> {
    let overrides = RENAMING_OVERRIDES
        .iter()
        .filter(|field| {
            source
                .pointer(&format!("/kustomize/{field}"))
                .is_some_and(super::flux::is_set)
        })
        .map(|field| format!("{path}.kustomize.{field}"));
    let tools = ["chart", "helm", "plugin"]
        .into_iter()
        .filter(|field| source.get(*field).is_some_and(super::flux::is_set))
        .map(|field| format!("{path}.{field}"));
    overrides.chain(tools).collect()
}

/// Why the Applications build names that `-f`/`-k` do not reproduce: what of their sources
/// builds beyond the files ([`build_inputs`]; see [`super::refuse_renamed`]).
fn renamed_by(applications: &[DynamicObject]) -> Option<String> {
    applications.iter().find_map(|application| {
        let set: Vec<String> = sources(application)
            .flat_map(|(path, source)| build_inputs(&path, source))
            .collect();
        (!set.is_empty()).then(|| format!("Application {} builds with {}", name_of(application), set.join(", ")))
    })
}

/// What the Applications build from, and as what Argo CD built them, as JSON (see
/// [`StackRecord::build_overrides`]): a source or a source type changed since the plan builds
/// another desired set.
fn sources_of(applications: &[DynamicObject], built_as: Option<&[String]>) -> Option<String> {
    let all: Vec<&Value> = applications
        .iter()
        .flat_map(|application| sources(application).map(|(_, source)| source))
        .collect();
    (!all.is_empty()).then(|| {
        let sources = Value::from(all.into_iter().cloned().collect::<Vec<_>>());
        serde_json::json!({"sources": sources, "builtAs": built_as}).to_string()
    })
}

/// As what Argo CD built each Application's sources, as its controller records it
/// (`status.sourceTypes` of a multi-source Application, else `status.sourceType`: `Directory`,
/// `Kustomize`, `Helm`, `Plugin`; argo-cd `pkg/apis/application/v1alpha1/types.go`
/// `ApplicationStatus`, written from the repo-server's answer, so it holds what the source
/// type detection decided — `argocd-cm`'s `kustomize.enable`, a discovered config management
/// plugin — not only what the spec says). `None` when an Application records none, or when there
/// is no Application: how it builds is then not known.
fn built_as(applications: &[DynamicObject]) -> Option<Vec<String>> {
    if applications.is_empty() {
        return None;
    }
    let mut types = Vec::new();
    for application in applications {
        let many: Vec<String> = application
            .data
            .pointer("/status/sourceTypes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        let one = application
            .data
            .pointer("/status/sourceType")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        match (many.is_empty(), one) {
            (false, _) => types.extend(many),
            (true, Some(one)) => types.push(one),
            (true, None) => return None,
        }
    }
    types.sort();
    types.dedup();
    Some(types)
}

/// The destination namespace of an Application, when it names one.
fn destination_of(application: &DynamicObject) -> Option<&str> {
    application
        .data
        .pointer("/spec/destination/namespace")
        .and_then(Value::as_str)
        .filter(|namespace| !namespace.is_empty())
}

/// Whether an Application's own sync options keep every resource from pruning.
fn prunes_none(application: &DynamicObject) -> bool {
    application
        .data
        .pointer("/spec/syncPolicy/syncOptions")
        .and_then(Value::as_array)
        .is_some_and(|options| {
            options
                .iter()
                .filter_map(Value::as_str)
                .any(|o| o.trim() == "Prune=false")
        })
}

/// The Applications `app` names: the one of `NAMESPACE_NAME`, else those of that name in a
/// control-plane namespace ([`control_plane_namespaces`]).
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
    let control = control_plane_namespaces(session).await;
    let api = crate::cluster::collect::api_for(client, kind, None);
    let params = ListParams::default().fields(&format!("metadata.name={app}"));
    match with_retries("list Applications", || api.list(&params)).await {
        Ok(list) => Ok(list
            .items
            .into_iter()
            .filter(|a| a.metadata.namespace.as_ref().is_some_and(|ns| control.contains(ns)))
            .collect()),
        Err(err) => Err(unreadable(err)),
    }
}

/// The namespaces that hold Argo CD's `argocd-cm` ConfigMap: its control planes. None when it
/// cannot be listed (no Application is then told by a name-only id).
async fn control_plane_namespaces(session: &Session) -> Vec<String> {
    let Some(kind) = session.catalog.get("", "ConfigMap") else {
        return Vec::new();
    };
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, None);
    let params = ListParams::default().fields(&format!("metadata.name={ARGOCD_CM}"));
    match with_retries("list argocd-cm", || api.list_metadata(&params)).await {
        Ok(list) => list.items.into_iter().filter_map(|cm| cm.metadata.namespace).collect(),
        Err(err) => {
            tracing::debug!("cannot list the {ARGOCD_CM} ConfigMaps: {err}");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn application(spec: Value) -> DynamicObject {
        let mut object = DynamicObject::new(
            "app",
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "argoproj.io",
                "v1alpha1",
                "Application",
            )),
        );
        object.metadata.namespace = Some("argocd".into());
        object.data = serde_json::json!({ "spec": spec });
        object
    }

    /// Reviews 19 F2 and 20 G1: what builds beyond the files is named where it is.
    #[test]
    fn what_builds_beyond_the_files_is_named_by_its_place() {
        let plain = application(serde_json::json!({"source": {"repoURL": "r", "path": "."}}));
        assert_eq!(renamed_by(&[plain]), None);
        let empty_helm = application(serde_json::json!({"source": {"path": ".", "helm": {}}}));
        assert_eq!(renamed_by(&[empty_helm]), None);
        let cases = [
            (
                serde_json::json!({"source": {"kustomize": {"namePrefix": "p-"}}}),
                "spec.source.kustomize.namePrefix",
            ),
            (
                serde_json::json!({"source": {"chart": "web", "helm": {"releaseName": "prod"}}}),
                "spec.source.chart, spec.source.helm",
            ),
            (
                serde_json::json!({"source": {"plugin": {"name": "envsubst"}}}),
                "spec.source.plugin",
            ),
            (
                serde_json::json!({"sources": [{"path": "."}, {"kustomize": {"nameSuffix": "-x"}}]}),
                "spec.sources[1].kustomize.nameSuffix",
            ),
        ];
        for (spec, said) in cases {
            let why = renamed_by(&[application(spec.clone())]).unwrap_or_default();
            assert_eq!(why, format!("Application argocd/app builds with {said}"), "{spec}");
        }
    }
}
