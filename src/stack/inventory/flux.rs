//! Flux Kustomizations: their `status.inventory` and `spec.targetNamespace`.

use std::collections::HashSet;

use kube::api::DynamicObject;
use serde_json::Value;

use super::{Inventory, StackRecord};
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_not_found, UserError};
use crate::model::identity::ObjectId;
use crate::model::trackers::{MarkValue, Preset, Tracker, FLUX_KUSTOMIZATION};
use crate::stack::classify::Recorded;
use crate::stack::members::Impersonation;

/// A Flux Kustomization as the orphan rules read it.
pub struct FluxStack {
    /// Its `status.inventory`, as kustomize-controller reads it (see [`flux_record`]): one that
    /// records none, or an entry it cannot read, is a record of nothing.
    pub inventory: Inventory,
    /// Its `spec.targetNamespace`, when set (an empty one sets nothing, as in Flux).
    pub target_namespace: Option<String>,
    /// `spec.prune: false`: Flux deletes nothing it applied (fluxcd/kustomize-controller
    /// `internal/controller/kustomization_controller.go` `prune`: `if !obj.Spec.Prune { return }`).
    pub prune_disabled: bool,
    /// The fields of its spec that change the names of what it builds and that `-f`/`-k` do not
    /// reproduce (see [`renaming_fields`]).
    pub renames: Vec<&'static str>,
    /// The values of [`FluxStack::renames`], as JSON (see [`StackRecord::build_overrides`]).
    pub overrides: Option<String>,
    /// Why it prunes nothing in this cluster (suspended, `spec.kubeConfig`: see
    /// [`crate::stack::members::flux_acts_elsewhere`]).
    pub acts_elsewhere: Option<String>,
}

/// The spec fields of a Kustomization that kustomize-controller adds to the build and that can
/// change an object's name (fluxcd/pkg `kustomize/kustomize_generator.go` `GenerateManifest`:
/// `NamePrefix`, `NameSuffix`, `Patches`, `Components`; `postBuild` substitutes variables after
/// the build, names included). A desired set read from `-f`/`-k` lacks them, so its names are
/// not Flux's: comparing them would call everything an orphan.
pub const RENAMING_FIELDS: [&str; 5] = ["namePrefix", "nameSuffix", "patches", "components", "postBuild"];

/// Which [`RENAMING_FIELDS`] a Kustomization sets (non-empty).
fn renaming_fields(kustomization: &DynamicObject) -> Vec<&'static str> {
    RENAMING_FIELDS
        .into_iter()
        .filter(|field| {
            kustomization
                .data
                .pointer(&format!("/spec/{field}"))
                .is_some_and(is_set)
        })
        .collect()
}

/// The values of the [`RENAMING_FIELDS`] a Kustomization sets, as JSON; `None` when it sets none.
fn renaming_values(kustomization: &DynamicObject) -> Option<String> {
    let set: serde_json::Map<String, Value> = renaming_fields(kustomization)
        .into_iter()
        .filter_map(|field| {
            let value = kustomization.data.pointer(&format!("/spec/{field}"))?;
            Some((field.to_string(), value.clone()))
        })
        .collect();
    (!set.is_empty()).then(|| Value::Object(set).to_string())
}

/// Whether a spec field holds something (an empty string, list or map sets nothing).
pub(super) fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(fields) => !fields.is_empty(),
        _ => true,
    }
}

impl FluxStack {
    pub(super) fn into_record(self) -> StackRecord {
        StackRecord {
            recorded: Some(self.inventory.recorded),
            namespace_required: self
                .target_namespace
                .is_none()
                .then_some(crate::stack::desired::NoNamespace::Flux),
            target_namespace: self.target_namespace,
            default_namespace: None,
            helm_release: None,
            flux_helm_release: None,
            renamed_by: None,
            record_namespace: None,
            build_overrides: self.overrides,
            path_reading: None,
            kapp_kinds: None,
            argo_filter: None,
            orphans_dependents: None,
        }
    }
}

/// Reads a Flux Kustomization: its inventory and target namespace. `None` when the cluster
/// serves no Kustomizations or this one does not exist; a refusal (exit 4) when it exists but
/// cannot be read (forbidden, the server failing): guessing its inventory or target namespace
/// could make what Flux keeps look like orphans.
pub async fn read_flux(session: &Session, name: &str, namespace: &str) -> Result<Option<FluxStack>, UserError> {
    let (group, kind) = FLUX_KUSTOMIZATION;
    let Some(kind) = session.catalog.get(group, kind) else {
        return Ok(None);
    };
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, Some(namespace));
    let object = match with_retries("get Kustomization", || api.get(name)).await {
        Ok(object) => object,
        Err(err) if is_not_found(&err) => return Ok(None),
        Err(err) => {
            return Err(UserError::refused(format!(
                "Kustomization {namespace}/{name} cannot be read ({}): its inventory and targetNamespace decide what Flux would prune",
                session.connection.explain(&err).message
            ))
            .hint("allow `get` on kustomizations.kustomize.toolkit.fluxcd.io, or retry when the API server answers"))
        }
    };
    let target_namespace = target_namespace_of(&object);
    let prune_disabled = object.data.pointer("/spec/prune").and_then(Value::as_bool) == Some(false);
    let id = ObjectId::new(group, FLUX_KUSTOMIZATION.1, Some(namespace), name);
    let impersonation = impersonation_of(session, &id, &object.data).await;
    let mut inventory = flux_inventory(&object, name, namespace, target_namespace.clone());
    if let Recorded::Ids { denied, .. } = &mut inventory.recorded {
        if let Impersonation::Limited(limited) = &impersonation {
            denied.clone_from(limited);
        }
        denied.extend(unmapped_entries(&object.data, &session.catalog));
    }
    Ok(Some(FluxStack {
        acts_elsewhere: crate::stack::members::flux_acts_elsewhere(&id, &object.data, false, &impersonation),
        inventory,
        target_namespace,
        prune_disabled,
        renames: renaming_fields(&object),
        overrides: renaming_values(&object),
    }))
}

/// Looks up the ServiceAccount a Flux Kustomization or HelmRelease (`id`, its whole object
/// `body`) impersonates (`spec.serviceAccountName`), as kustomize-controller's `CanImpersonate`
/// and helm-controller's `reconcileReleaseDeletion` do: a GET in the stack's namespace. The one
/// lookup every path that reads a Flux stack makes; the rule is
/// [`crate::stack::members::flux_acts_elsewhere`]. `NotLookedUp` when it names none. A Kustomization's
/// members are its `status.inventory`, each asked of the API server as the account
/// ([`impersonation_over`]); a HelmRelease's are its Helm release's, asked where that release is
/// read (`flux_helm_record`).
pub async fn impersonation_of(session: &Session, id: &ObjectId, body: &Value) -> Impersonation {
    let members = match flux_record(body) {
        FluxRecord::Ids(members) if crate::stack::members::flux_controller(id) == Some("kustomize-controller") => {
            members
        }
        _ => HashSet::new(),
    };
    impersonation_over(session, id, body, members).await
}

/// [`impersonation_of`] for the `members` its tool would delete: `Limited` with those the
/// impersonated account may not delete (a SubjectAccessReview per member, [`delete_review`]).
/// The one SubjectAccessReview path, for a Kustomization's inventory and a HelmRelease's Helm
/// release alike: helm-controller runs `helm uninstall` and `helm upgrade` with the impersonated
/// client (fluxcd/helm-controller `buildRESTClientGetter`), and Helm's deletes go on past one that
/// fails (helm/helm `pkg/kube/client.go` `Delete`: every resource is tried, errors collected), so
/// a member it may not delete stays.
pub async fn impersonation_over(
    session: &Session,
    id: &ObjectId,
    body: &Value,
    members: HashSet<ObjectId>,
) -> Impersonation {
    let Some(account) = crate::stack::members::service_account_named(id, body) else {
        return Impersonation::NotLookedUp;
    };
    let Some(kind) = session.catalog.get("", "ServiceAccount") else {
        return Impersonation::Unreadable("the cluster serves no ServiceAccounts".to_string());
    };
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, id.namespace.as_deref());
    match with_retries("get ServiceAccount", || api.get_metadata_opt(account)).await {
        Ok(Some(_)) => {}
        Ok(None) => return Impersonation::Missing,
        Err(err) => return Impersonation::Unreadable(session.connection.explain(&err).message),
    }
    if members.is_empty() {
        return Impersonation::Found;
    }
    let user = format!(
        "system:serviceaccount:{}:{account}",
        id.namespace.as_deref().unwrap_or_default()
    );
    let controller = crate::stack::members::flux_controller(id).unwrap_or("its controller");
    match denied_deletes(session, &user, controller, members).await {
        Ok(denied) if denied.is_empty() => Impersonation::Found,
        Ok(denied) => Impersonation::Limited(denied),
        Err(err) => Impersonation::Unreadable(format!(
            "whether it may delete its members could not be asked ({})",
            crate::error::root_cause(&err)
        )),
    }
}

/// The SubjectAccessReview of `user` deleting `member` (of resource `plural`). The API server
/// gives an impersonated `system:serviceaccount:NS:NAME` (fluxcd/pkg `runtime/client`
/// impersonation sets only the user) the groups `system:serviceaccounts`,
/// `system:serviceaccounts:NS` and `system:authenticated` (k8s.io/apiserver
/// `WithImpersonation`): a RoleBinding to any of them lets it delete.
fn delete_review(
    user: &str,
    member: &ObjectId,
    plural: &str,
) -> k8s_openapi::api::authorization::v1::SubjectAccessReview {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let mut groups = Vec::new();
    if let Some(namespace) = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(namespace, _)| namespace)
    {
        groups.push("system:serviceaccounts".to_string());
        groups.push(format!("system:serviceaccounts:{namespace}"));
    }
    groups.push("system:authenticated".to_string());
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            groups: Some(groups),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("delete".to_string()),
                group: Some(member.group.clone()),
                resource: Some(plural.to_string()),
                namespace: member.namespace.clone(),
                name: Some(member.name.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The members an account may not delete, each with why.
type DeniedDeletes = std::collections::BTreeMap<ObjectId, String>;

/// The recorded members that `user` (the ServiceAccount a Flux stack impersonates) may not
/// delete, each with why, asked of the API server with a SubjectAccessReview per member: the
/// authorizer `controller`'s impersonated DELETE meets (see [`delete_review`]). A member
/// of a kind not served is not asked (it is gone, nothing to delete). An error when a review
/// cannot be made: whether its prune would delete anything is then unknown.
async fn denied_deletes(
    session: &Session,
    user: &str,
    controller: &str,
    members: HashSet<ObjectId>,
) -> Result<DeniedDeletes, kube::Error> {
    use futures::stream::{StreamExt, TryStreamExt};
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let api: kube::Api<SubjectAccessReview> = kube::Api::all(session.connection.client.clone());
    let asks = members.into_iter().filter_map(|member| {
        let kind = session.catalog.get(&member.group, &member.kind)?;
        let review = delete_review(user, &member, &kind.plural);
        Some((member, review))
    });
    let answers: Vec<(ObjectId, bool)> = futures::stream::iter(asks)
        .map(|(member, review)| {
            let api = api.clone();
            async move {
                let params = kube::api::PostParams::default();
                let answer = with_retries("review access", || api.create(&params, &review)).await;
                answer.map(|done| (member, done.status.is_some_and(|s| s.allowed)))
            }
        })
        .buffer_unordered(8)
        .try_collect()
        .await?;
    Ok(answers
        .into_iter()
        .filter(|(_, allowed)| !allowed)
        .map(|(member, _)| {
            let why = format!("{user} (spec.serviceAccountName) may not delete {member}: {controller}, impersonating it, fails to delete it and it stays");
            (member, why)
        })
        .collect())
}

/// A Kustomization's `spec.targetNamespace`; an empty one sets nothing (fluxcd/pkg
/// `kustomize/kustomize_generator.go` sets the kustomization's `namespace:` to it, and kustomize
/// leaves namespaces alone when that is empty).
fn target_namespace_of(kustomization: &DynamicObject) -> Option<String> {
    kustomization
        .data
        .pointer("/spec/targetNamespace")
        .and_then(Value::as_str)
        .filter(|target| !target.is_empty())
        .map(str::to_string)
}

/// What kustomize-controller makes of a Kustomization that records no `status.inventory`.
pub const NO_INVENTORY: &str = "records no status.inventory";

/// A Flux Kustomization's `status.inventory` as kustomize-controller reads it, the one reading
/// every path shares (orphans, a teardown's members, the re-check, a rerun).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FluxRecord {
    /// The identities it recorded: on deletion its finalizer deletes only these, on apply it
    /// prunes only these (none, for an inventory without entries).
    Ids(HashSet<ObjectId>),
    /// It deletes nothing of the stack, and why: no `status.inventory` at all, or an entry
    /// `inventory.List` cannot read.
    Nothing(String),
}

/// Reads a Kustomization's `status.inventory` (`body`, the whole object). kustomize-controller
/// deletes nothing of a Kustomization without one: its finalizer's
/// `finalizerShouldDeleteResources` ("A suspended Kustomization or one without an inventory will
/// not delete resources": `obj.Status.Inventory == nil` returns false), and on apply
/// `inventory.Diff` of an absent old inventory is empty (fluxcd/kustomize-controller
/// `internal/controller/kustomization_controller.go`). An entry that cannot be read makes
/// `inventory.List` fail (cli-utils `ParseObjMetadata`, e.g. an RBAC name with `_`:
/// fluxcd/kustomize-controller#901), so it deletes nothing either.
pub fn flux_record(body: &Value) -> FluxRecord {
    let Some(entries) = crate::stack::members::flux_inventory_entries(body) else {
        return FluxRecord::Nothing(NO_INVENTORY.to_string());
    };
    let read: Result<HashSet<ObjectId>, &str> = entries
        .iter()
        .map(|entry| {
            let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
            ObjectId::from_flux_inventory_id(id).ok_or(id)
        })
        .collect();
    match read {
        Ok(ids) => FluxRecord::Ids(ids),
        Err(entry) => FluxRecord::Nothing(format!(
            "records status.inventory entry {entry:?}, which is not <namespace>_<name>_<group>_<Kind>"
        )),
    }
}

/// The entries of a Kustomization's `status.inventory` (`body`, the whole object) recorded at a
/// version the cluster no longer serves while it serves their kind at another (`v1beta1` removed,
/// `v1` served), each with why: kustomize-controller cannot delete them. Its prune and its
/// finalizer build each entry at its recorded version (`inventory.List`: the entry's `v`) and
/// delete it through fluxcd/pkg `ssa` `DeleteAll`, which GETs each object first: a version the
/// RESTMapper cannot map fails that GET ("query failed": a `NoKindMatchError` is no NotFound),
/// and `DeleteAll` goes on to the next entry, so that member stays while the others are deleted
/// (fluxcd/pkg `ssa/manager_delete.go` `Delete`, `DeleteAll`). An entry of a kind not served at
/// all is no object to delete, and one without a version maps to the preferred one.
pub fn unmapped_entries(
    body: &Value,
    catalog: &crate::cluster::discovery::Catalog,
) -> std::collections::BTreeMap<ObjectId, String> {
    let Some(entries) = crate::stack::members::flux_inventory_entries(body) else {
        return Default::default();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let entry_id = entry.get("id").and_then(Value::as_str)?;
            let id = ObjectId::from_flux_inventory_id(entry_id)?;
            // The group as recorded (the id makes it canonical).
            let group = crate::model::identity::recorded_group(entry_id)
                .map_or_else(|| id.group.clone(), str::to_string);
            let version = entry.get("v").and_then(Value::as_str).unwrap_or_default();
            let unmapped =
                catalog.get(&id.group, &id.kind).is_some() && !catalog.serves_version(&group, &id.kind, version);
            unmapped.then(|| {
                let api_version = crate::model::identity::api_version(&group, version);
                let why = format!(
                    "status.inventory records {id} at {api_version}, a version the cluster no longer serves: kustomize-controller cannot map it, fails to delete it, and it stays"
                );
                (id, why)
            })
        })
        .collect()
}

/// Flux v2 (fluxcd/kustomize-controller `internal/controller/kustomization_controller.go`:
/// `staleObjects := inventory.Diff(oldInventory, newInventory)`, then `prune`): the objects
/// deleted are those of the previous `status.inventory` that the new inventory lacks. One that
/// records none, or an entry it cannot read, deletes nothing ([`flux_record`]).
fn flux_inventory(object: &DynamicObject, name: &str, namespace: &str, target_namespace: Option<String>) -> Inventory {
    let tracker = Tracker {
        preset: Preset::Flux,
        value: Some(MarkValue {
            name: name.to_string(),
            namespace: Some(namespace.to_string()),
        }),
    };
    let recorded = match flux_record(&object.data) {
        FluxRecord::Ids(ids) => Recorded::Ids {
            ids,
            inventory: format!("the inventory of Kustomization {namespace}/{name}"),
            owner: Some(tracker.clone()),
            denied: Default::default(),
        },
        FluxRecord::Nothing(why) => Recorded::NoInventory {
            stack: format!("Kustomization {namespace}/{name}"),
            why,
        },
    };
    Inventory {
        recorded,
        tracker,
        target_namespace,
        default_namespace: None,
        renamed_by: None,
        record_namespace: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_review_gives_the_service_account_the_groups_the_api_server_gives_it() {
        let member = ObjectId {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("web".into()),
            name: "front".into(),
        };
        let review = delete_review("system:serviceaccount:flux-apps:deployer", &member, "deployments");
        let body = serde_json::to_value(&review).expect("serializable");
        assert_eq!(body["spec"]["user"], "system:serviceaccount:flux-apps:deployer");
        assert_eq!(
            body["spec"]["groups"],
            serde_json::json!([
                "system:serviceaccounts",
                "system:serviceaccounts:flux-apps",
                "system:authenticated"
            ])
        );
        assert_eq!(
            body["spec"]["resourceAttributes"],
            serde_json::json!({"verb": "delete", "group": "apps", "resource": "deployments", "namespace": "web", "name": "front"})
        );
    }

    /// kustomize-controller deletes each inventory entry at its recorded version (fluxcd/pkg
    /// `ssa` `DeleteAll`): one the cluster no longer serves while it serves the kind at another
    /// fails to map and stays; the others are deleted as before.
    #[test]
    fn an_inventory_entry_at_a_version_no_longer_served_is_one_its_tool_cannot_delete() {
        let catalog = crate::cluster::discovery::Catalog::new(
            vec![
                crate::cluster::fixtures::kind("", "ConfigMap", true),
                crate::cluster::fixtures::kind("example.com", "Widget", true),
            ],
            vec![],
            crate::cluster::discovery::DiscoverySource::PerGroup,
        )
        .with_versions([("example.com".to_string(), "Widget".to_string(), "v2".to_string())]);
        let body = serde_json::json!({"status": {"inventory": {"entries": [
            {"id": "web_a__ConfigMap", "v": "v1"},
            {"id": "web_old_example.com_Widget", "v": "v1beta1"},
            {"id": "web_new_example.com_Widget", "v": "v2"},
            {"id": "web_plain_example.com_Widget", "v": ""},
            {"id": "web_g_nope.io_Gadget", "v": "v1"},
        ]}}});
        let unmapped = unmapped_entries(&body, &catalog);
        let old = ObjectId::new("example.com", "Widget", Some("web"), "old");
        assert_eq!(unmapped.keys().collect::<Vec<_>>(), vec![&old]);
        assert!(unmapped[&old].contains("example.com/v1beta1"), "{}", unmapped[&old]);
        assert!(unmapped_entries(&serde_json::json!({}), &catalog).is_empty());
    }

    #[test]
    fn a_target_namespace_is_read_and_an_empty_one_sets_nothing() {
        let kustomization = |spec: serde_json::Value| DynamicObject {
            types: None,
            metadata: Default::default(),
            data: serde_json::json!({ "spec": spec }),
        };
        let with_target = kustomization(serde_json::json!({"targetNamespace": "apps"}));
        assert_eq!(target_namespace_of(&with_target).as_deref(), Some("apps"));
        assert_eq!(
            target_namespace_of(&kustomization(serde_json::json!({"targetNamespace": ""}))),
            None
        );
        assert_eq!(target_namespace_of(&kustomization(serde_json::json!({}))), None);
        let recorded = flux_inventory(
            &DynamicObject {
                data: serde_json::json!({"status": {"inventory": {"entries": [{"id": "apps_a__ConfigMap", "v": "v1"}]}}}),
                ..with_target.clone()
            },
            "ks",
            "flux-system",
            Some("apps".into()),
        );
        assert_eq!(recorded.target_namespace.as_deref(), Some("apps"));
        let Recorded::Ids { ids, .. } = &recorded.recorded else {
            panic!("a Flux inventory records identities");
        };
        assert!(ids.contains(&ObjectId::new("", "ConfigMap", Some("apps"), "a")));
    }
}
