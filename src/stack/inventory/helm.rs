//! Helm releases: the last deployed revision's manifest, read from its release Secrets; and the
//! Helm release a Flux HelmRelease manages.

use std::io::Read;

use base64::Engine;
use kube::api::DynamicObject;
use serde_json::Value;

use super::{served, Inventory, StackRecord, Unloaded};
use crate::cluster::retry::with_retries;
use crate::cluster::session::Session;
use crate::error::{is_not_found, UserError};
use crate::model::trackers::{MarkValue, Preset, Tracker};
use crate::stack::classify::Recorded;
use crate::stack::desired::{DesiredSet, Origin, Scopes};
use crate::stack::manifest::{parse_text_by_document, Document, Manifest};

mod revision;
use revision::Unchosen;

/// The API group of Flux HelmReleases.
const FLUX_HR_GROUP: &str = "helm.toolkit.fluxcd.io";

/// The Helm release a Flux HelmRelease manages, as helm-controller names it (fluxcd/helm-controller
/// `api/v2*/helmrelease_types.go`: `GetReleaseName` is `spec.releaseName`, else
/// `[<targetNamespace>-]<name>`; `GetReleaseNamespace` is `spec.targetNamespace`, else the
/// HelmRelease's namespace; `GetStorageNamespace` is `spec.storageNamespace`, else the
/// HelmRelease's namespace), read as `--tracker helm=` reads a release. No HelmRelease (or no
/// such kind served): no record. One that cannot be read, or whose release name is longer
/// than Helm allows (helm-controller shortens it with a hash): an error.
pub(super) async fn flux_helm_record(
    session: &Session,
    name: &str,
    namespace: &str,
    revision: HelmRevision,
) -> Result<StackRecord, UserError> {
    let Some(kind) = session.catalog.get(FLUX_HR_GROUP, "HelmRelease") else {
        return Ok(StackRecord::default());
    };
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, Some(namespace));
    let object = match with_retries("get HelmRelease", || api.get(name)).await {
        Ok(object) => object,
        Err(err) if is_not_found(&err) => return Ok(StackRecord::default()),
        Err(err) => {
            return Err(UserError::refused(format!(
                "HelmRelease {namespace}/{name} cannot be read ({}): its Helm release decides what helm-controller would prune",
                session.connection.explain(&err).message
            )))
        }
    };
    let id = crate::model::identity::ObjectId::new(FLUX_HR_GROUP, "HelmRelease", Some(namespace), name);
    let (release, storage) = match revision {
        // An upgrade (what an orphan prune compares with) prunes nothing here when the stack is
        // suspended or applies to another cluster.
        HelmRevision::LastDeployed => {
            if let Some(why) = crate::stack::members::flux_acts_elsewhere(
                &id,
                &object.data,
                false,
                &super::impersonation_of(session, &id, &object.data).await,
            ) {
                return Err(super::prunes_nothing(&why));
            }
            let named = helm_release_of(name, namespace, &object.data)?;
            (named.release, named.storage)
        }
        // An uninstall takes the release its status records (see `uninstalled_release_of`).
        HelmRevision::Latest => match uninstalled_release_of(&object.data) {
            Some(found) => found,
            None => {
                let named = helm_release_of(name, namespace, &object.data)?;
                (named.release, named.storage)
            }
        },
    };
    match load_release(session, &release, &storage, revision, false).await {
        Ok(mut found) => {
            // helm-controller deletes through the account it impersonates: what that account may
            // not delete stays (see `impersonation_over`), on uninstall and upgrade alike.
            if let Recorded::Ids { ids, denied, .. } = &mut found.recorded {
                match super::impersonation_over(session, &id, &object.data, ids.clone()).await {
                    crate::stack::members::Impersonation::Limited(limited) => denied.extend(limited),
                    crate::stack::members::Impersonation::Unreadable(why) => {
                        return Err(UserError::refused(format!(
                            "HelmRelease {namespace}/{name}: what its spec.serviceAccountName may delete is unknown ({why})"
                        )))
                    }
                    _ => {}
                }
            }
            // The release is named by the namespace its objects' `meta.helm.sh/release-namespace`
            // carries (the release's own, `spec.targetNamespace`), not by where it is stored.
            let release_mark = found.tracker.value.clone();
            let mut record: StackRecord = found.into();
            record.helm_release = release_mark;
            record.orphans_dependents = (revision == HelmRevision::Latest)
                .then(|| uninstall_orphans(&object.data, &id))
                .flatten();
            record.flux_helm_release = Some(MarkValue {
                name: name.to_string(),
                namespace: Some(namespace.to_string()),
            });
            Ok(record)
        }
        Err(Unloaded::Absent(err)) => Err(no_helm_release(&release, &err)),
        Err(Unloaded::Failed(err)) => Err(err),
    }
}

/// Why helm-controller uninstalls a HelmRelease (`id`, whole `object`) with
/// `propagationPolicy: Orphan`, if it does: its `spec.uninstall.deletionPropagation`
/// (fluxcd/helm-controller `internal/action/uninstall.go`: `uninstall.DeletionPropagation`;
/// membership review 30, F3).
fn uninstall_orphans(object: &Value, id: &crate::model::identity::ObjectId) -> Option<String> {
    let propagation = object.pointer("/spec/uninstall/deletionPropagation")?.as_str()?;
    propagation.eq_ignore_ascii_case("orphan").then(|| {
        format!("{id} sets spec.uninstall.deletionPropagation: orphan: helm-controller uninstalls with propagationPolicy Orphan")
    })
}

/// The record of Helm release `release` (stored in `namespace`) when a Flux HelmRelease owns it:
/// that HelmRelease's record ([`flux_helm_record`]: its `spec.suspend`, `spec.kubeConfig` and
/// `spec.serviceAccountName` apply, and its marks are the same stack), whichever preset names
/// the release. Only helm-controller upgrades or uninstalls a release a HelmRelease manages, so
/// what `helm upgrade` would prune of it alone is not what happens to it. `None` when no
/// HelmRelease owns it (see [`owns_release`]); refused when the HelmRelease's cannot be listed
/// (whether one owns it is then unknown), or when its status records the release but its spec
/// now names another (helm-controller then uninstalls this one: `ReleaseTargetChanged`).
pub(super) async fn owned_release_record(
    session: &Session,
    release: &str,
    namespace: &str,
    revision: HelmRevision,
) -> Result<Option<StackRecord>, UserError> {
    let Some(kind) = session.catalog.get(FLUX_HR_GROUP, "HelmRelease") else {
        return Ok(None);
    };
    let listed = crate::cluster::collect::list_objects(&session.connection.client, kind, None, None)
        .await
        .map_err(|err| {
            UserError::refused(format!(
                "whether a Flux HelmRelease manages Helm release {namespace}/{release} is unknown: HelmReleases cannot be listed ({})",
                session.connection.explain(&err).message
            ))
            .hint("only helm-controller upgrades a release a HelmRelease manages; grant list on helmreleases.helm.toolkit.fluxcd.io")
        })?;
    let mut owners = listed.iter().filter_map(|object| {
        let name = object.metadata.name.as_deref()?;
        let own_namespace = object.metadata.namespace.as_deref()?;
        owns_release(name, own_namespace, &object.data, release, namespace)
            .then(|| (name.to_string(), own_namespace.to_string()))
    });
    let Some((name, own_namespace)) = owners.next() else {
        return Ok(None);
    };
    if let Some((other, other_namespace)) = owners.next() {
        return Err(UserError::refused(format!(
            "Helm release {namespace}/{release} is claimed by HelmReleases {own_namespace}/{name} and {other_namespace}/{other}: which one helm-controller acts for is unknown"
        )));
    }
    let record = flux_helm_record(session, &name, &own_namespace, revision).await?;
    let asked = MarkValue {
        name: release.to_string(),
        namespace: Some(namespace.to_string()),
    };
    if record.helm_release.as_ref() != Some(&asked) {
        return Err(UserError::refused(format!(
            "Helm release {namespace}/{release} is recorded by HelmRelease {own_namespace}/{name}, whose spec now names another release: helm-controller uninstalls this one on its next reconcile"
        )));
    }
    tracing::info!("Helm release {namespace}/{release} is managed by HelmRelease {own_namespace}/{name}: its record and policy apply");
    Ok(Some(record))
}

/// Whether HelmRelease `namespace/name` owns Helm release `release` of namespace
/// `release_namespace` (the one its objects' `meta.helm.sh/release-namespace` names, wherever
/// the release is stored), as helm-controller marks it: its status records the release
/// (fluxcd/helm-controller `api/v2` `HelmReleaseStatus.history`, the snapshots of the releases it
/// made, each with its `name` and `namespace`; `internal/action/verify.go` `VerifySnapshot` reads
/// the release by those and acts only on one whose digest it observed), or, before its first
/// status, its spec names it ([`helm_release_of`]). helm-controller writes no mark on the release
/// Secret itself.
pub(super) fn owns_release(
    name: &str,
    namespace: &str,
    object: &Value,
    release: &str,
    release_namespace: &str,
) -> bool {
    let spec_named = helm_release_of(name, namespace, object);
    let spec_namespace = spec_named.as_ref().ok().map(|named| named.namespace.as_str());
    let recorded = object
        .pointer("/status/history")
        .and_then(Value::as_array)
        .is_some_and(|history| {
            history.iter().any(|snapshot| {
                let snapshot_namespace = snapshot
                    .get("namespace")
                    .and_then(Value::as_str)
                    .filter(|ns| !ns.is_empty())
                    .or(spec_namespace);
                snapshot.get("name").and_then(Value::as_str) == Some(release)
                    && snapshot_namespace == Some(release_namespace)
            })
        });
    let named = spec_named
        .as_ref()
        .is_ok_and(|named| named.release == release && named.namespace == release_namespace);
    recorded || named
}

/// The Helm release a HelmRelease manages, as helm-controller names and places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReleaseName {
    /// The release's name (`GetReleaseName`).
    pub release: String,
    /// The namespace its storage Secrets are in (`GetStorageNamespace`).
    pub storage: String,
    /// The namespace it installs into, which its objects' `meta.helm.sh/release-namespace`
    /// names (`GetReleaseNamespace`).
    pub namespace: String,
}

/// The Helm release a HelmRelease manages, as helm-controller names and places it
/// (fluxcd/helm-controller `api/v2/helmrelease_types.go` `GetReleaseName`: `spec.releaseName`,
/// else `<targetNamespace>-<name>`, else `<name>`; `GetStorageNamespace`: `spec.storageNamespace`,
/// else the HelmRelease's namespace; `GetReleaseNamespace`: `spec.targetNamespace`, else the
/// HelmRelease's namespace). A name longer than Helm's 53 characters is shortened by
/// helm-controller with a hash: refused.
pub(super) fn helm_release_of(name: &str, namespace: &str, object: &Value) -> Result<ReleaseName, UserError> {
    let spec = |field: &str| {
        object
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let target = spec("targetNamespace");
    let release = spec("releaseName").unwrap_or_else(|| match &target {
        Some(target) => format!("{target}-{name}"),
        None => name.to_string(),
    });
    if release.len() > 53 {
        return Err(UserError::refused(format!(
            "HelmRelease {namespace}/{name}: release name {release:?} is longer than 53 characters, and helm-controller shortens it"
        )));
    }
    Ok(ReleaseName {
        release,
        storage: spec("storageNamespace").unwrap_or_else(|| namespace.to_string()),
        namespace: target.unwrap_or_else(|| namespace.to_string()),
    })
}

/// The release helm-controller uninstalls when a HelmRelease is deleted: the latest of its
/// `status.history`, in `status.storageNamespace` (fluxcd/helm-controller
/// `internal/reconcile/uninstall.go`: `Status.History.Latest()`; `reconcileReleaseDeletion`
/// uses the storage namespace of the status, and skips the uninstall without one: see
/// [`crate::stack::members::orphans_members`]). `None` when the status records neither.
fn uninstalled_release_of(object: &Value) -> Option<(String, String)> {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    Some((text("/status/history/0/name")?, text("/status/storageNamespace")?))
}

/// The status label of a release Secret.
fn release_status(secret: &DynamicObject) -> Option<&str> {
    secret.metadata.labels.as_ref()?.get("status").map(String::as_str)
}

/// The record of a release whose latest revision is uninstalled: it holds nothing.
fn already_uninstalled(release: &str, namespace: &str, version: i64) -> Inventory {
    Inventory {
        recorded: Recorded::Ids {
            ids: Default::default(),
            inventory: format!("Helm release {namespace}/{release} v{version} (already uninstalled)"),
            owner: None,
            denied: Default::default(),
        },
        tracker: Tracker {
            preset: Preset::Helm,
            value: Some(MarkValue {
                name: release.to_string(),
                namespace: Some(namespace.to_string()),
            }),
        },
        target_namespace: None,
        default_namespace: Some(namespace.to_string()),
        renamed_by: None,
        record_namespace: None,
    }
}

/// No Helm release record to read: Helm deletes only through an upgrade's diff against its
/// release (helm/helm v3 `pkg/action/upgrade.go`), never by label, so nothing is an orphan.
pub(super) fn no_helm_release(release: &str, err: &UserError) -> UserError {
    UserError::refused(format!(
        "no Helm release {release} to compare with ({}): Helm deletes only what its release records, so nothing of it is an orphan",
        err.message
    ))
    .hint("kubectl-stack reads releases from Secrets (Helm's default driver); a release stored in ConfigMaps or SQL cannot be read")
}

/// Helm v3 (helm/helm `pkg/action/upgrade.go`, `pkg/storage/storage.go` `Deployed`): an upgrade
/// deletes what the last *deployed* revision's manifest has and the new one lacks; a pending or
/// failed revision above it is not the current release (a rollback needs the deployed objects).
/// Hooks are kept out of the manifest, so they are never in the record.
/// Which revision of a Helm release is its record: an upgrade prunes against the last
/// *deployed* one (helm/helm v3 `pkg/action/upgrade.go`); `helm uninstall` (what helm-controller
/// runs when a HelmRelease is deleted) deletes what the *latest* revision records, whatever its
/// status (`pkg/action/uninstall.go` `Run`: `SortByRevision(rels); rel := rels[len(rels)-1]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelmRevision {
    /// The last deployed revision: what an upgrade compares with.
    LastDeployed,
    /// The latest revision: what an uninstall deletes.
    Latest,
}

/// A plain Helm release's record, as `helm upgrade` or `helm uninstall` reads it (see
/// [`revision::choose`]: `helm upgrade` refuses a pending release).
pub(super) async fn load_helm(
    session: &Session,
    release: &str,
    namespace: &str,
    revision: HelmRevision,
) -> Result<Inventory, Unloaded> {
    load_release(session, release, namespace, revision, true).await
}

/// A Helm release's record; `helm_upgrade`: compared as `helm upgrade` itself compares (a Flux
/// HelmRelease's release is compared as helm-controller does).
async fn load_release(
    session: &Session,
    release: &str,
    namespace: &str,
    revision: HelmRevision,
    helm_upgrade: bool,
) -> Result<Inventory, Unloaded> {
    let history = release_history(session, release, namespace).await?;
    let chosen = match revision::choose(history, revision, helm_upgrade) {
        Ok(chosen) => chosen,
        Err(Unchosen::NoRevision) => {
            return Err(Unloaded::Absent(
                UserError::failed(format!("no release Secret for Helm release {namespace}/{release}"))
                    .hint("Helm keeps sh.helm.release.v1.<name>.v<revision> Secrets in the release namespace"),
            ))
        }
        Err(unchosen) => {
            return Err(
                UserError::refused(format!("Helm release {namespace}/{release} {unchosen}"))
                    .hint("see `helm history`; roll back or finish the pending operation first")
                    .into(),
            )
        }
    };
    let version = chosen.version;
    if revision == HelmRevision::Latest && chosen.status == "uninstalled" {
        // `helm uninstall --keep-history` left it: uninstalling again deletes nothing (helm/helm
        // `pkg/action/uninstall.go`: "the release named %q is already deleted").
        return Ok(already_uninstalled(release, namespace, version));
    }
    let decoded = chosen.body;
    let manifest = decoded.get("manifest").and_then(Value::as_str).unwrap_or_default();
    let release_namespace = release_namespace_of(&decoded, namespace);
    let documents = parse_text_by_document(manifest, &format!("helm release {namespace}/{release} v{version}"))?;
    let all: Vec<Manifest> = documents.iter().flat_map(|d| d.manifests.iter().cloned()).collect();
    let record = format!("Helm release {namespace}/{release} v{version}");
    let (hooks, documents) = match revision {
        HelmRevision::Latest => uninstall_documents(documents, &record)?,
        HelmRevision::LastDeployed => (Vec::new(), documents),
    };
    let (kept, manifests) = split_kept(documents);
    let upgrade_unserved = (revision == HelmRevision::LastDeployed)
        .then(|| unserved_entries(&all, &session.catalog))
        .flatten();
    let unserved = upgrade_unserved.or_else(|| unserved_entries(&manifests, &session.catalog));
    let scopes = Scopes::new(Some(&session.catalog), &all);
    let ids_of = |manifests: &[Manifest]| {
        DesiredSet::from_manifests(
            manifests,
            &scopes,
            &release_namespace,
            Origin::Inventory(record.clone()),
        )
        .ids
    };
    let (set, kept, hooks) = (ids_of(&manifests), ids_of(&kept), ids_of(&hooks));
    let denied = denied_by_helm(&record, &kept, &hooks);
    let ids = set.into_iter().chain(kept).chain(hooks).collect();
    Ok(Inventory {
        recorded: release_record(ids, record, unserved, denied),
        tracker: Tracker {
            preset: Preset::Helm,
            value: Some(MarkValue {
                name: release.to_string(),
                namespace: Some(release_namespace.clone()),
            }),
        },
        target_namespace: None,
        default_namespace: Some(release_namespace),
        renamed_by: None,
        record_namespace: None,
    })
}

/// The namespace Helm builds a release's manifests in: the release body's own (helm/helm
/// `pkg/kube/client.go` `Build`: `NamespaceParam(...).DefaultNamespace()`), which is the storage
/// namespace (`stored_in`) unless the release was stored elsewhere (Flux `storageNamespace`).
fn release_namespace_of(decoded: &Value, stored_in: &str) -> String {
    decoded
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(stored_in)
        .to_string()
}

/// What a release records: its manifest's objects, or nothing when the manifest holds a kind
/// the cluster does not serve (`unserved`): Helm then builds no objects and deletes nothing,
/// on uninstall ("unable to build kubernetes objects for delete") and on upgrade ("current
/// release manifest contains removed kubernetes api(s)"; helm/helm `pkg/action`).
fn release_record(
    ids: std::collections::HashSet<crate::model::identity::ObjectId>,
    record: String,
    unserved: Option<String>,
    denied: std::collections::BTreeMap<crate::model::identity::ObjectId, String>,
) -> Recorded {
    match unserved {
        Some(entries) => Recorded::NoInventory {
            why: format!(
                "holds {entries} in its manifest, a kind or version the cluster does not serve: Helm builds none of its objects and deletes nothing of it, on uninstall or upgrade; serve that kind again (or fix the release with the helm-mapkubeapis plugin), then prune"
            ),
            stack: record,
        },
        None => Recorded::Ids {
            ids,
            inventory: record,
            // Helm deletes what the old manifest has and the new one lacks, marked or not.
            owner: None,
            // What the manifest marks keep: in the release, never deleted by Helm.
            denied,
        },
    }
}

/// The `apiVersion`/`kind` of the manifests whose kind the cluster does not serve at that
/// version, sorted and comma-separated; `None` when it serves them all. A removed version of a
/// kind still served under another (`apps/v1beta1` Deployment, `apps/v1` served) is unserved too:
/// Helm builds a release's objects with a RESTMapper at the manifest's own version (helm/helm
/// `pkg/kube/client.go` `Build`, through cli-runtime's resource builder: `RESTMapping(gvk.GroupKind(),
/// gvk.Version)`), which fails for it ("no matches for kind"), and the whole build fails: on
/// upgrade "current release manifest contains removed kubernetes api(s)" (`pkg/action/upgrade.go`),
/// on uninstall "unable to build kubernetes objects for delete" (`pkg/action/uninstall.go`).
fn unserved_entries(
    manifests: &[crate::stack::manifest::Manifest],
    catalog: &crate::cluster::discovery::Catalog,
) -> Option<String> {
    let mut unserved: Vec<String> = manifests
        .iter()
        .filter(|m| {
            let (group, version) = m.api_version.rsplit_once('/').unwrap_or(("", m.api_version.as_str()));
            !catalog.serves_version(group, &m.kind, version)
        })
        .map(|m| format!("{} {}", m.api_version, m.kind))
        .collect();
    unserved.sort();
    unserved.dedup();
    (!unserved.is_empty()).then(|| unserved.join(", "))
}

/// Every stored revision of a release, as Helm's Secrets driver reads them (helm/helm
/// `pkg/storage/driver/secrets.go` `Query`): the Secrets labelled `owner=helm,name=<release>`
/// in the storage namespace, whatever their type, each with its body decoded. Helm skips a
/// Secret it cannot decode; here one makes the whole history unreadable, as which revision Helm
/// would then read is what a restored or hand-edited Secret may have changed.
async fn release_history(
    session: &Session,
    release: &str,
    namespace: &str,
) -> Result<Vec<revision::Stored<Value>>, UserError> {
    let secrets = served(session, "", "Secret")?;
    let labels = format!("owner=helm,name={release}");
    let query = crate::cluster::collect::ListQuery {
        namespace: Some(namespace),
        labels: Some(&labels),
        ..Default::default()
    };
    let releases = crate::cluster::collect::list_query(&session.connection.client, secrets, &query)
        .await
        .map_err(|err| session.connection.explain(&err))?;
    releases
        .into_iter()
        .map(|secret| -> Result<revision::Stored<Value>, UserError> {
            let name = secret.metadata.name.clone().unwrap_or_default();
            let body = helm_release(&secret).map_err(|why| {
                UserError::failed(format!(
                    "cannot read Helm release {namespace}/{release} (Secret {name}): {why}"
                ))
            })?;
            Ok(revision::Stored {
                label_status: release_status(&secret).map(str::to_string),
                version: body.get("version").and_then(Value::as_i64).unwrap_or(0),
                status: body
                    .pointer("/info/status")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                secret: name,
                body,
            })
        })
        .collect()
}

/// A release's manifests split into those Helm keeps and the others. Helm keeps what its
/// manifest marks `helm.sh/resource-policy: keep`, read from the head of each document of the
/// release manifest (helm/helm `pkg/action/resource_policy.go` `filterManifestsToKeep`; a
/// `List`'s head keeps all its items): never a member to delete, whatever the live object says.
/// An item that marks itself is kept too (Helm would delete it with its List; keeping it is the
/// safe side).
fn split_kept(documents: Vec<Document>) -> (Vec<Manifest>, Vec<Manifest>) {
    let (mut kept, mut deleted) = (Vec::new(), Vec::new());
    for document in documents {
        let head_keeps = document
            .head_annotations
            .get(HELM_RESOURCE_POLICY)
            .and_then(Value::as_str)
            .is_some_and(crate::model::trackers::helm_keeps);
        for manifest in document.manifests {
            let keeps = manifest
                .annotation(HELM_RESOURCE_POLICY)
                .is_some_and(crate::model::trackers::helm_keeps);
            if head_keeps || keeps {
                kept.push(manifest);
            } else {
                deleted.push(manifest);
            }
        }
    }
    (kept, deleted)
}

/// Why Helm deletes none of `kept` (marked `helm.sh/resource-policy: keep` in the manifest) nor
/// of `hooks` (uninstall never deletes a hook).
fn denied_by_helm(
    record: &str,
    kept: &std::collections::HashSet<crate::model::identity::ObjectId>,
    hooks: &std::collections::HashSet<crate::model::identity::ObjectId>,
) -> std::collections::BTreeMap<crate::model::identity::ObjectId, String> {
    let kept_why = format!(
        "{record} marks it {HELM_RESOURCE_POLICY}: keep in its manifest: Helm keeps it on uninstall and upgrade"
    );
    let hook_why = format!(
        "{record} lists it as a hook (helm.sh/hook in its document's head): helm uninstall never deletes a hook"
    );
    let kept = kept.iter().map(|id| (id.clone(), kept_why.clone()));
    kept.chain(hooks.iter().map(|id| (id.clone(), hook_why.clone())))
        .collect()
}

/// The documents of a release manifest as `helm uninstall` reads them (helm/helm
/// `pkg/action/uninstall.go` `deleteRelease`: `releaseutil.SortManifests(..., UninstallOrder)`),
/// split into its hooks' manifests and the rest (membership review 13, F2):
/// - a document whose head carries `helm.sh/hook` is a hook (`pkg/releaseutil/manifest_sorter.go`
///   `sort`), a `List`'s head for all its items: uninstall deletes none of it;
/// - a head Helm cannot read as `SimpleHead` (an annotation or a name that is no string) fails the
///   sort, and uninstall stops with "corrupted release record" and deletes nothing: refused.
fn uninstall_documents(documents: Vec<Document>, record: &str) -> Result<(Vec<Manifest>, Vec<Document>), UserError> {
    let unreadable = documents
        .iter()
        .find(|d| d.head_annotations.values().any(|v| !v.is_string()));
    if let Some(document) = unreadable {
        let source = document.manifests.first().map(|m| m.source.clone()).unwrap_or_default();
        return Err(UserError::refused(format!(
            "{record} is a corrupted release record for helm uninstall ({source} has an annotation that is no string): Helm deletes none of it, and neither does kubectl-stack"
        ))
        .hint("fix the release with Helm (`helm rollback`, `helm upgrade`) before tearing it down"));
    }
    let (hooks, rest): (Vec<Document>, Vec<Document>) = documents
        .into_iter()
        .partition(|d| d.head_annotations.contains_key(HELM_HOOK));
    Ok((hooks.into_iter().flat_map(|d| d.manifests).collect(), rest))
}

/// Helm's hook annotation.
const HELM_HOOK: &str = "helm.sh/hook";

/// Helm's keep policy annotation.
const HELM_RESOURCE_POLICY: &str = "helm.sh/resource-policy";

/// The most a Helm release may decompress to: a Secret holds at most 1 MiB, and a release's
/// JSON compresses about tenfold; more is a decompression bomb, not a release.
const MAX_RELEASE_BYTES: u64 = 64 << 20;

/// Why a Helm release Secret's release cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseUnreadable {
    /// The Secret has no `data.release`.
    #[error("no data.release")]
    Missing,
    /// One of the two base64 layers does not decode.
    #[error("{layer} is not base64: {source}")]
    NotBase64 {
        /// Which layer: the API's (`data.release`) or Helm's (`release`).
        layer: &'static str,
        /// The decoder's error.
        source: base64::DecodeError,
    },
    /// The gzip stream does not decompress.
    #[error("release is not gzip: {0}")]
    NotGzip(std::io::Error),
    /// It decompresses to more than a release can be: a decompression bomb.
    #[error("release is larger than {} MiB once decompressed (a release Secret holds at most 1 MiB)", MAX_RELEASE_BYTES >> 20)]
    TooLarge,
    /// The decompressed release is not JSON.
    #[error("release is not JSON: {0}")]
    NotJson(serde_json::Error),
}

/// The `manifest` of a Helm release Secret: `data.release` is base64 (the API's) of base64
/// (Helm's) of gzip of JSON. The Secret's data is never printed.
#[cfg(test)]
fn helm_manifest(secret: &DynamicObject) -> Result<String, ReleaseUnreadable> {
    Ok(helm_release(secret)?
        .get("manifest")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

/// The release JSON of a Helm release Secret (see [`helm_manifest`]).
fn helm_release(secret: &DynamicObject) -> Result<Value, ReleaseUnreadable> {
    let engine = base64::engine::general_purpose::STANDARD;
    let field = secret
        .data
        .pointer("/data/release")
        .and_then(Value::as_str)
        .ok_or(ReleaseUnreadable::Missing)?;
    let helm_encoded = engine.decode(field).map_err(|source| ReleaseUnreadable::NotBase64 {
        layer: "data.release",
        source,
    })?;
    let compressed = engine
        .decode(&helm_encoded)
        .map_err(|source| ReleaseUnreadable::NotBase64 {
            layer: "release",
            source,
        })?;
    let json = if compressed.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(compressed.as_slice())
            .take(MAX_RELEASE_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(ReleaseUnreadable::NotGzip)?;
        if text.len() as u64 > MAX_RELEASE_BYTES {
            return Err(ReleaseUnreadable::TooLarge);
        }
        text
    } else {
        compressed
    };
    serde_json::from_slice(&json).map_err(ReleaseUnreadable::NotJson)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::manifest::parse_text;
    use std::io::Write;

    #[test]
    fn a_helmreleases_release_is_named_as_helm_controller_names_it() {
        let of = |spec: Value| helm_release_of("web", "apps", &serde_json::json!({ "spec": spec })).unwrap();
        let named = |release: &str, storage: &str, namespace: &str| ReleaseName {
            release: release.to_string(),
            storage: storage.to_string(),
            namespace: namespace.to_string(),
        };
        assert_eq!(of(serde_json::json!({})), named("web", "apps", "apps"));
        assert_eq!(
            of(serde_json::json!({"targetNamespace": "shop"})),
            named("shop-web", "apps", "shop")
        );
        assert_eq!(
            of(serde_json::json!({"targetNamespace": "shop", "releaseName": "store"})),
            named("store", "apps", "shop")
        );
        assert_eq!(
            of(serde_json::json!({"storageNamespace": "helm"})),
            named("web", "helm", "apps")
        );
        assert_eq!(of(serde_json::json!({"releaseName": ""})), named("web", "apps", "apps"));
        let long = "x".repeat(50);
        let refused = helm_release_of(&long, "apps", &serde_json::json!({"spec": {"targetNamespace": "shop"}}));
        assert_eq!(refused.unwrap_err().code, crate::error::exit::REFUSED);
    }

    /// Issue 24 (adversarial review): a HelmRelease owns the release its status records (a
    /// `status.history` snapshot's name and namespace), or, before its first status, the one its
    /// spec names; a release only alike in name is not its own. The namespace is the release's
    /// own (`spec.targetNamespace`), which its objects' marks carry, not the storage's (review
    /// 19, M-F4).
    #[test]
    fn a_helmrelease_owns_the_release_its_status_records_or_its_spec_names() {
        let status = serde_json::json!({
            "spec": {"releaseName": "renamed"},
            "status": {"storageNamespace": "s2", "history": [{"name": "hr", "version": 1}]}
        });
        assert!(owns_release("hr", "s2", &status, "hr", "s2"));
        // Its spec's new name is its own as well (helm-controller moves to it).
        assert!(owns_release("hr", "s2", &status, "renamed", "s2"));
        assert!(!owns_release("hr", "s2", &status, "hr", "other"));
        assert!(!owns_release("hr", "s2", &status, "hr2", "s2"));
        let fresh = serde_json::json!({"spec": {"targetNamespace": "shop"}});
        assert!(owns_release("web", "apps", &fresh, "shop-web", "shop"));
        assert!(!owns_release("web", "apps", &fresh, "shop-web", "apps"));
        assert!(!owns_release("web", "apps", &fresh, "web", "apps"));
        let stored_apart = serde_json::json!({
            "spec": {"targetNamespace": "shop", "storageNamespace": "helm"},
            "status": {"storageNamespace": "helm", "history": [{"name": "shop-web", "namespace": "shop", "version": 1}]}
        });
        assert!(owns_release("web", "apps", &stored_apart, "shop-web", "shop"));
        assert!(!owns_release("web", "apps", &stored_apart, "shop-web", "helm"));
    }

    #[test]
    fn a_release_whose_manifest_holds_an_unserved_kind_records_nothing() {
        let catalog = crate::cluster::discovery::Catalog::new(
            vec![crate::cluster::fixtures::kind("", "ConfigMap", true)],
            vec![],
            crate::cluster::discovery::DiscoverySource::PerGroup,
        );
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: nope.io/v1\nkind: Gadget\nmetadata: {name: g}\n";
        let manifests = parse_text(text, "test").unwrap();
        let unserved = unserved_entries(&manifests, &catalog);
        assert_eq!(unserved.as_deref(), Some("nope.io/v1 Gadget"));
        assert!(unserved_entries(&manifests[..1], &catalog).is_none());
        // A removed version of a kind still served under another: Helm cannot map it either.
        let removed = parse_text("apiVersion: v1beta1\nkind: ConfigMap\nmetadata: {name: a}\n", "test").unwrap();
        assert_eq!(
            unserved_entries(&removed, &catalog).as_deref(),
            Some("v1beta1 ConfigMap")
        );
        let recorded = release_record(
            Default::default(),
            "Helm release apps/web v1".into(),
            unserved,
            Default::default(),
        );
        match recorded {
            Recorded::NoInventory { why, .. } => assert!(why.contains("nope.io/v1 Gadget"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn helm_release_secret_decodes() {
        let release =
            serde_json::json!({"name": "web", "manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"});
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(release.to_string().as_bytes()).unwrap();
        let engine = base64::engine::general_purpose::STANDARD;
        let helm = engine.encode(gz.finish().unwrap());
        let api = engine.encode(helm);
        let secret: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sh.helm.release.v1.web.v1"},
            "data": {"release": api}
        }))
        .unwrap();
        assert!(helm_manifest(&secret).unwrap().contains("kind: ConfigMap"));
    }

    #[test]
    fn a_decompression_bomb_is_refused_within_its_bound() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..(MAX_RELEASE_BYTES >> 20) + 2 {
            gz.write_all(&zeros).unwrap();
        }
        let engine = base64::engine::general_purpose::STANDARD;
        let api = engine.encode(engine.encode(gz.finish().unwrap()));
        let secret: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sh.helm.release.v1.bomb.v1"},
            "data": {"release": api}
        }))
        .unwrap();
        let refused = helm_manifest(&secret).unwrap_err();
        assert!(matches!(refused, ReleaseUnreadable::TooLarge), "{refused}");
        assert!(refused.to_string().contains("larger than"), "{refused}");
    }
}
