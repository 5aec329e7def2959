//! What controllers delete by name when a planned object goes, beside the garbage collector
//! (order review 29, F1 and F2):
//! - the token controller deletes every token Secret of a ServiceAccount once it is gone: a Secret
//!   of its namespace of type `kubernetes.io/service-account-token` whose
//!   `kubernetes.io/service-account.name` is its name and whose `.uid`, when set, is its UID
//!   (kubernetes `pkg/controller/serviceaccount/tokens_controller.go` `deleteTokens`,
//!   `pkg/serviceaccount/util.go` `IsServiceAccountToken`), whatever the cascade policy;
//! - the endpoints controller deletes the Endpoints of a Service's namespace and name once the
//!   Service is gone, with a selector or without (`pkg/controller/endpoint/endpoints_controller.go`
//!   `syncService`);
//! - the pod garbage collector force-deletes every Pod bound to a Node that is gone
//!   (`pkg/controller/podgc/gc_controller.go` `gcOrphaned`; order review 30, F2).
//!
//! The first two controllers make what they delete so: such an object counts as a victim of the
//! planned ServiceAccount or Service only when a keep marker, the plan keeping it, or the mark of
//! a stack the plan does not tear down says it is someone's ([`Counted::counts_as_made`]); a Pod
//! counts as any owner's dependent does ([`Counted::counts`]: a bare Pod always). The plan and
//! the re-check before each wave ask this one function.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::Client;

use super::owners::Counted;
use super::{why_it_counts, Cascade, Planned, Victim, SERVICE_ACCOUNT_TOKEN, SERVICE_ACCOUNT_UID};
use crate::cluster::collect::{api_for, list_metadata_pages, ListQuery, Listed};
use crate::cluster::discovery::{Catalog, KindInfo};
use crate::cluster::retry::with_retries;
use crate::error::is_not_found;
use crate::model::identity::ObjectId;
use crate::prune::safeguards::SERVICE_ACCOUNT_NAME;

/// The cascades by name of the planned objects (`names`: each planned object by UID): for each
/// planned ServiceAccount its token Secrets, for each planned Service its Endpoints, that count
/// (see the module), each with its victims as listed. What could not be read is an unlisted kind
/// of the planned object's cascade: it is never clean.
pub async fn named_cascades(
    client: &Client,
    catalog: &Catalog,
    planned: &Planned,
    names: &HashMap<String, ObjectId>,
    counted: &Counted<'_>,
) -> Vec<(Cascade, Vec<Listed>)> {
    let mut found = Vec::new();
    let accounts: Vec<(&String, &ObjectId)> = names.iter().filter(|(_, id)| is_core(id, "ServiceAccount")).collect();
    if let (false, Some(secret)) = (accounts.is_empty(), catalog.get("", "Secret")) {
        found.extend(token_cascades(client, secret, &accounts, planned, counted).await);
    }
    let services = names.values().filter(|id| is_core(id, "Service"));
    if let Some(endpoints) = catalog.get("", "Endpoints") {
        for service in services {
            found.extend(endpoints_cascade(client, endpoints, service, planned, counted).await);
        }
    }
    let nodes = names.values().filter(|id| id.group.is_empty() && id.kind == "Node");
    if let Some(pod) = catalog.get("", "Pod") {
        for node in nodes {
            found.extend(pods_cascade(client, pod, node, planned, counted).await);
        }
    }
    found
}

/// The Pods bound to a planned Node, listed in every namespace.
async fn pods_cascade(
    client: &Client,
    pod: &Arc<KindInfo>,
    node: &ObjectId,
    planned: &Planned,
    counted: &Counted<'_>,
) -> Option<(Cascade, Vec<Listed>)> {
    let fields = format!("spec.nodeName={}", node.name);
    let pods = match list_by_field(client, pod, None, &fields).await {
        Ok(pods) => pods,
        Err(err) => {
            tracing::warn!("cannot list the Pods bound to {node}: {err}");
            return Some(unlisted(node, "Pod"));
        }
    };
    let counting = |o: &Listed| counted.counts(o);
    cascade_of(node, pods.iter(), planned, &counting)
}

fn is_core(id: &ObjectId, kind: &str) -> bool {
    id.group.is_empty() && id.kind == kind && id.namespace.is_some()
}

/// The token Secrets of the planned ServiceAccounts (`accounts`, by UID), one listing of the
/// token type per namespace.
async fn token_cascades(
    client: &Client,
    secret: &Arc<KindInfo>,
    accounts: &[(&String, &ObjectId)],
    planned: &Planned,
    counted: &Counted<'_>,
) -> Vec<(Cascade, Vec<Listed>)> {
    let mut by_namespace: BTreeMap<&str, Vec<(&String, &ObjectId)>> = BTreeMap::new();
    for &(uid, id) in accounts {
        by_namespace
            .entry(id.namespace.as_deref().unwrap_or_default())
            .or_default()
            .push((uid, id));
    }
    let mut found = Vec::new();
    for (namespace, accounts) in by_namespace {
        let fields = format!("type={SERVICE_ACCOUNT_TOKEN}");
        let tokens = match list_by_field(client, secret, Some(namespace), &fields).await {
            Ok(tokens) => tokens,
            Err(why) => {
                tracing::warn!("cannot list the token Secrets of {namespace}: {why}");
                found.extend(accounts.iter().map(|(_, id)| unlisted(id, "Secret")));
                continue;
            }
        };
        for (uid, account) in accounts {
            let taken = tokens.iter().filter(|token| is_token_of(token, &account.name, uid));
            found.extend(cascade_of(account, taken, planned, &|o: &Listed| {
                counted.counts_as_made(o)
            }));
        }
    }
    found
}

/// The objects of `kind` in `namespace` (every namespace with `None`) that the field selector
/// `fields` selects, as listed (metadata).
async fn list_by_field(
    client: &Client,
    kind: &Arc<KindInfo>,
    namespace: Option<&str>,
    fields: &str,
) -> Result<Vec<Listed>, kube::Error> {
    let query = ListQuery {
        namespace,
        fields: Some(fields),
        ..ListQuery::default()
    };
    let mut found = Vec::new();
    let take = |page: Vec<kube::core::PartialObjectMeta<kube::api::DynamicObject>>| {
        found.extend(page.into_iter().map(|o| Listed::new(Arc::clone(kind), o.metadata)));
    };
    list_metadata_pages(client, kind, &query, take).await?;
    Ok(found)
}

/// Whether a token Secret is the token controller's for the ServiceAccount of this name and UID:
/// it names the account, and its UID annotation, when set, is the account's.
fn is_token_of(token: &Listed, account: &str, uid: &str) -> bool {
    let annotation = |key: &str| {
        token
            .meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    };
    annotation(SERVICE_ACCOUNT_NAME) == Some(account)
        && annotation(SERVICE_ACCOUNT_UID).is_none_or(|u| u.is_empty() || u == uid)
}

/// The Endpoints of a planned Service's name, if any.
async fn endpoints_cascade(
    client: &Client,
    endpoints: &Arc<KindInfo>,
    service: &ObjectId,
    planned: &Planned,
    counted: &Counted<'_>,
) -> Option<(Cascade, Vec<Listed>)> {
    let api = api_for(client, endpoints, service.namespace.as_deref());
    match with_retries("get endpoints", || api.get_metadata(&service.name)).await {
        Ok(object) => {
            let listed = Listed::new(Arc::clone(endpoints), object.metadata);
            cascade_of(service, std::iter::once(&listed), planned, &|o: &Listed| {
                counted.counts_as_made(o)
            })
        }
        Err(err) if is_not_found(&err) => None,
        Err(err) => {
            tracing::warn!("cannot read the Endpoints of {service}: {err}");
            Some(unlisted(service, "Endpoints"))
        }
    }
}

/// The cascade of `holder` that takes `taken` by name: those of them that count.
fn cascade_of<'a>(
    holder: &ObjectId,
    taken: impl Iterator<Item = &'a Listed>,
    planned: &Planned,
    counts: &dyn Fn(&Listed) -> bool,
) -> Option<(Cascade, Vec<Listed>)> {
    let mut seen = HashSet::new();
    let counting: Vec<&Listed> = taken
        .filter(|o| !planned.uids.contains(o.uid()) && !o.is_terminating())
        .filter(|o| seen.insert(o.uid().to_string()) && counts(o))
        .collect();
    if counting.is_empty() {
        return None;
    }
    let victims = counting
        .iter()
        .map(|o| Victim {
            id: o.id(),
            uid: o.uid().to_string(),
            why: format!("deleted with it by name ({}): {}", maker(&o.id()), why_it_counts(o)),
        })
        .collect();
    let cascade = Cascade {
        holder: holder.clone(),
        victims,
        unlisted: Vec::new(),
    };
    Some((cascade, counting.into_iter().cloned().collect()))
}

/// Which controller deletes an object of this kind by name.
fn maker(id: &ObjectId) -> &'static str {
    match id.kind.as_str() {
        "Secret" => "the token controller",
        "Pod" => "the pod garbage collector",
        _ => "the endpoints controller",
    }
}

/// A cascade of `holder` whose `kind` could not be read.
fn unlisted(holder: &ObjectId, kind: &str) -> (Cascade, Vec<Listed>) {
    let cascade = Cascade {
        holder: holder.clone(),
        victims: Vec::new(),
        unlisted: vec![kind.to_string()],
    };
    (cascade, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::keep::TornDown;
    use kube::core::ObjectMeta;

    fn token(name: &str, annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> Listed {
        let map = |pairs: &[(&str, &str)]| Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        Listed::new(
            Arc::new(crate::cluster::fixtures::kind("", "Secret", true)),
            ObjectMeta {
                name: Some(name.into()),
                namespace: Some("t1".into()),
                uid: Some(format!("uid-{name}")),
                annotations: map(annotations),
                labels: map(labels),
                ..ObjectMeta::default()
            },
        )
    }

    #[test]
    fn a_token_is_its_accounts_by_name_and_by_uid_when_it_names_one() {
        let named = token("a", &[(SERVICE_ACCOUNT_NAME, "builder")], &[]);
        assert!(is_token_of(&named, "builder", "uid-sa"));
        assert!(!is_token_of(&named, "other", "uid-sa"));
        let with_uid = token(
            "b",
            &[(SERVICE_ACCOUNT_NAME, "builder"), (SERVICE_ACCOUNT_UID, "uid-sa")],
            &[],
        );
        assert!(is_token_of(&with_uid, "builder", "uid-sa"));
        let of_another = token(
            "c",
            &[(SERVICE_ACCOUNT_NAME, "builder"), (SERVICE_ACCOUNT_UID, "uid-old")],
            &[],
        );
        assert!(!is_token_of(&of_another, "builder", "uid-sa"), "a re-created account's");
        assert!(!is_token_of(&token("d", &[], &[]), "builder", "uid-sa"));
    }

    #[test]
    fn what_a_controller_deletes_by_name_counts_only_when_marked_as_someones() {
        let torn_down = TornDown::default();
        let kept = HashSet::new();
        let counted = Counted {
            torn_down: &torn_down,
            kept: &kept,
        };
        let holder = ObjectId::new("", "ServiceAccount", Some("t1"), "builder");
        let plain = token("plain", &[(SERVICE_ACCOUNT_NAME, "builder")], &[]);
        let marked = token(
            "marked",
            &[(SERVICE_ACCOUNT_NAME, "builder"), ("helm.sh/resource-policy", "keep")],
            &[],
        );
        let tracked = token(
            "tracked",
            &[(SERVICE_ACCOUNT_NAME, "builder")],
            &[
                ("kustomize.toolkit.fluxcd.io/name", "b"),
                ("kustomize.toolkit.fluxcd.io/namespace", "flux-system"),
            ],
        );
        let planned = Planned::default();
        assert!(
            cascade_of(&holder, [&plain].into_iter(), &planned, &|o: &Listed| counted
                .counts_as_made(o))
            .is_none()
        );
        let (cascade, taken) = cascade_of(
            &holder,
            [&plain, &marked, &tracked].into_iter(),
            &planned,
            &|o: &Listed| counted.counts_as_made(o),
        )
        .expect("two count");
        let names: Vec<&str> = cascade.victims.iter().map(|v| v.id.name.as_str()).collect();
        assert_eq!(names, ["marked", "tracked"]);
        assert_eq!(taken.len(), 2);
        assert!(
            cascade.victims[0].why.contains("the token controller"),
            "{}",
            cascade.victims[0].why
        );
        let kept: HashSet<ObjectId> = [plain.id()].into();
        let counted = Counted {
            torn_down: &torn_down,
            kept: &kept,
        };
        assert!(
            cascade_of(&holder, [&plain].into_iter(), &planned, &|o: &Listed| counted
                .counts_as_made(o))
            .is_some(),
            "kept by the plan"
        );
        let planned = Planned {
            uids: ["uid-marked".to_string()].into(),
            ..Planned::default()
        };
        let counted = Counted {
            torn_down: &torn_down,
            kept: &HashSet::new(),
        };
        assert!(
            cascade_of(&holder, [&marked].into_iter(), &planned, &|o: &Listed| counted
                .counts_as_made(o))
            .is_none(),
            "planned itself"
        );
    }
}
