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

mod resources;

use kube::api::{DynamicObject, ListParams};
use serde_json::Value;

pub use resources::ResourceFilter;

use super::StackRecord;
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_not_found, UserError};
use crate::model::trackers::ARGOCD_TRACKING_ID;
use crate::stack::desired::NoNamespace;
use crate::stack::policy::ARGOCD_INSTALLATION_ID;

/// The Application's group and kind.
const APPLICATION: (&str, &str) = ("argoproj.io", "Application");
/// The ConfigMap that marks Argo CD's control-plane namespace.
const ARGOCD_CM: &str = "argocd-cm";

/// The record of the Argo CD stack `value` (the name its tracking id or instance label carries:
/// `NAME`, or `NAMESPACE_NAME` for an Application outside the control-plane namespace; or the
/// Application's own name and namespace, for a teardown): the
/// destination namespace as the default of namespace-less manifests; with none, or no telling
/// which Application it is, such a manifest is unplaced. Without the Application kind nothing is
/// known and the manifests take `-n`'s namespace. `comparing` (an orphan comparison, not a
/// teardown): an Application that prunes nothing is refused ([`super::prunes_nothing`]). One whose
/// objects its Argo CD may track otherwise than by a tracking id that names them
/// ([`tracks_otherwise`]) is refused whether compared or torn down.
pub async fn argo_record(
    session: &Session,
    value: &crate::model::trackers::MarkValue,
    comparing: bool,
) -> Result<StackRecord, UserError> {
    if session.catalog.get(APPLICATION.0, APPLICATION.1).is_none() {
        return Ok(StackRecord::default());
    }
    // Without the settings which objects its Argo CD tracks is unknown: nothing of it is judged
    // (an orphan) or deleted (a teardown's member).
    let planes = control_planes(session).await?;
    // A teardown names the Application itself, with its namespace: outside every control plane
    // it is named as its tracking ids name it, `NAMESPACE_NAME` (membership review 28, F1). (A
    // comparison's namespace is `-n`'s default, not the Application's.)
    let app = match &value.namespace {
        Some(namespace) if !comparing && !planes.iter().any(|p| &p.namespace == namespace) => {
            format!("{namespace}_{}", value.name)
        }
        _ => value.name.clone(),
    };
    let app = app.as_str();
    let applications = find_applications(session, app, &planes).await?;
    if let Some(why) = tracks_otherwise(&applications, &planes) {
        return Err(match comparing {
            true => super::prunes_nothing(&why),
            false => UserError::refused(format!(
                "{why}: which objects it deletes with its Application is not known"
            ))
            .hint("delete them with Argo CD (`argocd app delete --cascade`), which knows its settings"),
        });
    }
    let filter = resource_filter(&applications, &planes, comparing)?;
    refuse_prunes_nothing(&applications, comparing)?;
    let built_as = built_as(&applications);
    let overrides = StackRecord {
        argo_filter: Some((value.name.clone(), filter)),
        orphans_dependents: orphans_dependents(&applications, comparing),
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

/// The kinds the deciding control planes' Argo CD never manages (membership review 30, F1): its
/// Applications prune no member of them. Settings Argo CD cannot read refuse the stack.
fn resource_filter(
    applications: &[DynamicObject],
    planes: &[ControlPlane],
    comparing: bool,
) -> Result<ResourceFilter, UserError> {
    let mut filter = ResourceFilter::default();
    for plane in deciding(applications, planes) {
        if let Err(err) = filter.add(plane.exclusions.as_deref(), plane.inclusions.as_deref()) {
            let why = format!(
                "{err} (in {}): Argo CD loads no settings then, and syncs nothing",
                plane.namespace
            );
            return Err(match comparing {
                true => super::prunes_nothing(&why),
                false => UserError::refused(why),
            });
        }
    }
    Ok(filter)
}

/// Refuses a comparison with an Application that prunes nothing here: `Prune=false`, or a
/// destination in another cluster.
fn refuse_prunes_nothing(applications: &[DynamicObject], comparing: bool) -> Result<(), UserError> {
    if !comparing {
        return Ok(());
    }
    if let Some(keeping) = applications.iter().find(|a| prunes_none(a)) {
        return Err(super::prunes_nothing(&format!(
            "Application {} sets Prune=false in spec.syncPolicy.syncOptions: Argo CD prunes none of its resources",
            name_of(keeping)
        )));
    }
    match applications.iter().find_map(deploys_elsewhere) {
        Some(why) => Err(super::prunes_nothing(&why)),
        None => Ok(()),
    }
}

/// Why Argo CD prunes the Applications' resources with `propagationPolicy: Orphan`
/// (`PrunePropagationPolicy=orphan`), when comparing (membership review 30, F3).
fn orphans_dependents(applications: &[DynamicObject], comparing: bool) -> Option<String> {
    let orphaning = applications
        .iter()
        .find(|a| comparing && has_sync_option(a, "PrunePropagationPolicy=orphan"))?;
    Some(format!(
        "Application {} sets PrunePropagationPolicy=orphan: Argo CD prunes with propagationPolicy Orphan",
        name_of(orphaning)
    ))
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
    has_sync_option(application, "Prune=false")
}

/// Whether an Application's `spec.syncPolicy.syncOptions` hold `option`.
fn has_sync_option(application: &DynamicObject, option: &str) -> bool {
    application
        .data
        .pointer("/spec/syncPolicy/syncOptions")
        .and_then(Value::as_array)
        .is_some_and(|options| options.iter().filter_map(Value::as_str).any(|o| o.trim() == option))
}

/// The Applications `app` names: the one of `NAMESPACE_NAME`, else those of that name in a
/// control-plane namespace (one of `planes`: [`control_planes`]).
async fn find_applications(
    session: &Session,
    app: &str,
    planes: &[ControlPlane],
) -> Result<Vec<DynamicObject>, UserError> {
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
        Ok(list) => Ok(list
            .items
            .into_iter()
            .filter(|a| {
                let namespace = a.metadata.namespace.as_deref();
                planes.iter().any(|p| Some(p.namespace.as_str()) == namespace)
            })
            .collect()),
        Err(err) => Err(unreadable(err)),
    }
}

/// An Argo CD control plane (a namespace holding its `argocd-cm` ConfigMap) with the settings
/// of that ConfigMap that decide which objects its Applications track (argo-cd
/// `util/settings/settings.go`: `installationID`, `application.resourceTrackingMethod`; read by
/// `util/argo/resource_tracking.go` `GetAppName` and `getAppInstanceValue`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ControlPlane {
    namespace: String,
    /// `installationID`: set, Argo CD tracks only the objects annotated with that very id.
    installation_id: Option<String>,
    /// `application.resourceTrackingMethod`: `label` tracks by the instance label alone.
    tracking_method: Option<String>,
    /// `resource.exclusions` and `resource.inclusions`: the kinds it never manages
    /// ([`ResourceFilter`]).
    exclusions: Option<String>,
    inclusions: Option<String>,
}

impl ControlPlane {
    /// Of an `argocd-cm` ConfigMap.
    fn of(config_map: &DynamicObject) -> Option<Self> {
        let setting = |key: &str| {
            config_map
                .data
                .pointer(&format!("/data/{}", key.replace('~', "~0").replace('/', "~1")))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(str::to_string)
        };
        Some(Self {
            namespace: config_map.metadata.namespace.clone()?,
            installation_id: setting("installationID"),
            tracking_method: setting("application.resourceTrackingMethod"),
            exclusions: setting("resource.exclusions"),
            inclusions: setting("resource.inclusions"),
        })
    }

    /// Why its Applications track other objects than kubectl-stack reads as theirs (an object
    /// whose `argocd.argoproj.io/tracking-id` names itself, and no installation id), if they do.
    fn tracks_otherwise(&self) -> Option<String> {
        let namespace = &self.namespace;
        if let Some(id) = &self.installation_id {
            return Some(format!(
                "{ARGOCD_CM} in {namespace} sets installationID {id}: that Argo CD tracks only objects annotated {ARGOCD_INSTALLATION_ID}={id} (argo-cd util/argo/resource_tracking.go getAppInstanceValue), which kubectl-stack does not model"
            ));
        }
        (self.tracking_method.as_deref() == Some(TRACKING_BY_LABEL)).then(|| {
            format!(
                "{ARGOCD_CM} in {namespace} sets application.resourceTrackingMethod: label: that Argo CD tracks by the instance label alone, not by {ARGOCD_TRACKING_ID} (argo-cd util/argo/resource_tracking.go GetAppName), which kubectl-stack does not model"
            )
        })
    }
}

/// The tracking method that reads the instance label alone.
const TRACKING_BY_LABEL: &str = "label";

/// Argo CD's control planes: the namespaces that hold its `argocd-cm` ConfigMap, with its
/// tracking settings. None when the ConfigMap kind is not served; an error when they cannot be
/// listed (which objects an Application tracks is then unknown).
async fn control_planes(session: &Session) -> Result<Vec<ControlPlane>, UserError> {
    let Some(kind) = session.catalog.get("", "ConfigMap") else {
        return Ok(Vec::new());
    };
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, None);
    let params = ListParams::default().fields(&format!("metadata.name={ARGOCD_CM}"));
    match with_retries("list argocd-cm", || api.list(&params)).await {
        Ok(list) => Ok(list.items.iter().filter_map(ControlPlane::of).collect()),
        Err(err) => Err(UserError::refused(format!(
            "Argo CD's {ARGOCD_CM} ConfigMaps cannot be listed ({}): which objects an Application tracks depends on their installationID and application.resourceTrackingMethod",
            session.connection.explain(&err).message
        ))
        .hint("allow `list` on configmaps in every namespace, or retry when the API server answers")),
    }
}

/// Why the objects the Argo CD stack's marks name may not be the `applications`' as
/// kubectl-stack reads them (membership review 26, F1): Applications of that name in more than
/// one control plane (each Argo CD writes the same name-only tracking id), or a control plane
/// whose settings may decide for the stack ([`deciding`]) that tracks otherwise
/// ([`ControlPlane::tracks_otherwise`]), or an Application that sets `spec.trackingMethod: label`.
fn tracks_otherwise(applications: &[DynamicObject], planes: &[ControlPlane]) -> Option<String> {
    let homes = homes(applications, planes);
    if homes.len() > 1 {
        let names: Vec<&str> = homes.iter().map(|p| p.namespace.as_str()).collect();
        return Some(format!(
            "Applications of this name live in {} Argo CD control planes ({}), and each writes the same tracking id: which one's objects the desired set stands for is not known",
            homes.len(),
            names.join(", ")
        ));
    }
    if let Some(why) = deciding(applications, planes).find_map(ControlPlane::tracks_otherwise) {
        return Some(why);
    }
    applications.iter().find_map(|application| {
        let method = application.data.pointer("/spec/trackingMethod").and_then(Value::as_str);
        (method.map(str::trim) == Some(TRACKING_BY_LABEL)).then(|| {
            format!(
                "Application {} sets spec.trackingMethod: label: it tracks by the instance label alone, which kubectl-stack does not model",
                name_of(application)
            )
        })
    })
}

/// The control planes that hold one of the `applications`, by namespace.
fn homes<'a>(applications: &[DynamicObject], planes: &'a [ControlPlane]) -> Vec<&'a ControlPlane> {
    let mut homes: Vec<&ControlPlane> = planes
        .iter()
        .filter(|plane| {
            applications
                .iter()
                .any(|a| a.metadata.namespace.as_deref() == Some(plane.namespace.as_str()))
        })
        .collect();
    homes.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    homes
}

/// The control planes whose settings may decide what the `applications` track: those that
/// hold them when each lives in one; every control plane when one lives in another namespace
/// (its control plane is not recorded on it); none when there is no such Application (no Argo CD
/// then tracks anything under its name).
fn deciding<'a>(applications: &[DynamicObject], planes: &'a [ControlPlane]) -> impl Iterator<Item = &'a ControlPlane> {
    let in_a_plane = |a: &DynamicObject| {
        planes
            .iter()
            .any(|p| a.metadata.namespace.as_deref() == Some(p.namespace.as_str()))
    };
    let anywhere = !applications.iter().all(in_a_plane);
    let homes = homes(applications, planes);
    planes
        .iter()
        .filter(move |plane| anywhere || homes.iter().any(|home| home.namespace == plane.namespace))
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

    fn plane(namespace: &str, data: Value) -> ControlPlane {
        let mut config_map = DynamicObject::new(
            ARGOCD_CM,
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap")),
        );
        config_map.metadata.namespace = Some(namespace.into());
        config_map.data = serde_json::json!({ "data": data });
        ControlPlane::of(&config_map).unwrap()
    }

    /// Membership review 26, F1: the control plane's settings that make its Applications track
    /// other objects are read, and so is an Application of the name in two control planes.
    #[test]
    fn control_planes_that_track_otherwise_are_told() {
        let mut app = application(serde_json::json!({"source": {"path": "."}}));
        let home = plane("argocd", serde_json::json!({}));
        assert_eq!(
            tracks_otherwise(std::slice::from_ref(&app), std::slice::from_ref(&home)),
            None
        );
        let annotation = plane(
            "argocd",
            serde_json::json!({"application.resourceTrackingMethod": "annotation+label"}),
        );
        assert_eq!(annotation.tracks_otherwise(), None);
        let blank = plane("argocd", serde_json::json!({"installationID": " "}));
        assert_eq!(blank.tracks_otherwise(), None);
        let installed = plane("argocd", serde_json::json!({"installationID": "inst1"}));
        assert!(installed.tracks_otherwise().unwrap().contains("installationID inst1"));
        let labelled = plane(
            "argocd",
            serde_json::json!({"application.resourceTrackingMethod": "label"}),
        );
        assert!(labelled.tracks_otherwise().unwrap().contains("instance label alone"));
        // A control plane that holds none of the Applications does not decide for them...
        let elsewhere = plane("argocd-b", serde_json::json!({"installationID": "b"}));
        let planes = [home.clone(), elsewhere.clone()];
        assert_eq!(tracks_otherwise(std::slice::from_ref(&app), &planes), None);
        // ...unless the Application is in none (its control plane is then not known).
        app.metadata.namespace = Some("apps".into());
        assert!(tracks_otherwise(std::slice::from_ref(&app), &planes).is_some());
        // No Application of the name: no control plane tracks anything under it.
        assert_eq!(tracks_otherwise(&[], &planes), None);
        // Two control planes each with an Application of the name.
        let mut first = application(serde_json::json!({}));
        let mut second = first.clone();
        first.metadata.namespace = Some("argocd".into());
        second.metadata.namespace = Some("argocd-c".into());
        let third = plane("argocd-c", serde_json::json!({}));
        let why = tracks_otherwise(&[first.clone(), second], &[home.clone(), third]).unwrap();
        assert!(why.contains("2 Argo CD control planes (argocd, argocd-c)"), "{why}");
        first.data = serde_json::json!({"spec": {"trackingMethod": "label"}});
        assert!(tracks_otherwise(&[first], &[home])
            .unwrap()
            .contains("spec.trackingMethod"));
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
