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

use futures::StreamExt;
use kube::Client;

use super::owners::Counted;
use super::{why_it_counts, Cascade, Planned, Victim, SERVICE_ACCOUNT_TOKEN, SERVICE_ACCOUNT_UID};
use crate::cluster::collect::{api_for, list_metadata_pages, ListQuery, Listed};
use crate::cluster::discovery::{Catalog, KindInfo};
use crate::cluster::retry::with_retries;
use crate::error::is_not_found;
use crate::model::identity::ObjectId;
use crate::prune::safeguards::SERVICE_ACCOUNT_NAME;

/// A dying object whose deletion makes a controller delete others by name (a ServiceAccount, a
/// Service, a Node: planned itself, or dying as a planned owner's child), with the planned object
/// charged with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taker {
    /// The dying object.
    pub id: ObjectId,
    /// Its UID.
    pub uid: String,
    /// The planned object whose deletion takes it (itself when planned).
    pub holder: ObjectId,
}

/// How many reads of what a controller deletes by name run at once.
const CONCURRENT_READS: usize = 16;

/// The kind whose objects a controller would delete by name could not be read.
#[derive(Debug, Clone, Copy)]
struct Unread(&'static str);

/// What the controllers delete by name with the takers ([`named_cascades`]).
#[derive(Debug, Default)]
pub struct ByName {
    /// What counts, as cascades of the planned objects charged, with the victims as listed;
    /// what could not be read, as their unlisted kinds.
    pub cascades: Vec<(Cascade, Vec<Listed>)>,
    /// Everything taken, counted or not, as cascades of the planned objects charged: walked for
    /// what it owns ([`super::victims_dependents`]), as a dying volume is.
    pub walked: Vec<Cascade>,
}

/// The takers of the plan: its objects (`names`, by UID) of a kind a controller deletes others
/// with by name, and those of `owned` that die with it as a planned owner's children (order
/// review 31, F2).
pub fn takers(owned: &[Listed], planned: &Planned, names: &HashMap<String, ObjectId>) -> Vec<Taker> {
    let mut found: Vec<Taker> = names
        .iter()
        .filter(|(_, id)| takes_by_name(id))
        .map(|(uid, id)| Taker {
            id: id.clone(),
            uid: uid.clone(),
            holder: id.clone(),
        })
        .collect();
    let children = super::owners::dying_owned(owned, planned, names, takes_by_name);
    found.extend(children.into_iter().map(|(id, uid, holder)| Taker { id, uid, holder }));
    found
}

/// Whether a controller deletes others by name once an object of this kind is gone.
fn takes_by_name(id: &ObjectId) -> bool {
    is_core(id, "ServiceAccount") || is_core(id, "Service") || (id.group.is_empty() && id.kind == "Node")
}

/// What the token, endpoints and pod garbage controllers delete by name with the `takers` (see
/// the module): what counts, and everything taken. What could not be read is an unlisted kind of
/// the charged object's cascade: it is never clean.
pub async fn named_cascades(
    client: &Client,
    catalog: &Catalog,
    planned: &Planned,
    takers: &[Taker],
    counted: &Counted<'_>,
) -> ByName {
    let mut found = ByName::default();
    let made = |o: &Listed| counted.counts_as_made(o);
    let accounts: Vec<&Taker> = takers.iter().filter(|t| is_core(&t.id, "ServiceAccount")).collect();
    if let (false, Some(secret)) = (accounts.is_empty(), catalog.get("", "Secret")) {
        for (taker, taken) in tokens_taken(client, secret, &accounts).await {
            found.add(taker, taken, planned, &made);
        }
    }
    if let Some(endpoints) = catalog.get("", "Endpoints") {
        let services: Vec<&Taker> = takers.iter().filter(|t| is_core(&t.id, "Service")).collect();
        let ids: Vec<ObjectId> = services.iter().map(|t| t.id.clone()).collect();
        let read: Vec<_> = futures::stream::iter(ids)
            .map(|id| async move { endpoints_taken(client, endpoints, &id).await })
            .buffered(CONCURRENT_READS)
            .collect()
            .await;
        for (taker, taken) in services.iter().zip(read) {
            found.add(taker, taken, planned, &made);
        }
    }
    if let Some(pod) = catalog.get("", "Pod") {
        let nodes: Vec<&Taker> = takers
            .iter()
            .filter(|t| t.id.group.is_empty() && t.id.kind == "Node")
            .collect();
        let ids: Vec<ObjectId> = nodes.iter().map(|t| t.id.clone()).collect();
        let listed: Vec<_> = futures::stream::iter(ids)
            .map(|id| async move { pods_taken(client, pod, &id).await })
            .buffered(CONCURRENT_READS)
            .collect()
            .await;
        for (taker, taken) in nodes.iter().zip(listed) {
            found.add(taker, taken, planned, &|o: &Listed| counted.counts(o));
        }
    }
    found
}

impl ByName {
    /// The cascades of [`ByName::walked`] narrowed to what owns something: the victims some
    /// object of `owned` (everything with an owner reference where their dependents can be, as
    /// listed) names as an owner. Only those need walking for what they own; `None` (nothing
    /// was listed): all of them.
    pub fn owning(&self, owned: Option<&[Listed]>) -> Vec<Cascade> {
        let Some(owned) = owned else {
            return self.walked.clone();
        };
        let owners: HashSet<&str> = owned
            .iter()
            .flat_map(|o| o.meta.owner_references.iter().flatten().map(|r| r.uid.as_str()))
            .collect();
        self.walked
            .iter()
            .filter_map(|cascade| {
                let victims: Vec<Victim> = cascade
                    .victims
                    .iter()
                    .filter(|v| owners.contains(v.uid.as_str()))
                    .cloned()
                    .collect();
                (!victims.is_empty()).then(|| Cascade {
                    victims,
                    ..cascade.clone()
                })
            })
            .collect()
    }

    /// Adds what `taker` takes (`Err`: the kind that could not be read), of which what `counts`.
    fn add(
        &mut self,
        taker: &Taker,
        taken: Result<Vec<Listed>, Unread>,
        planned: &Planned,
        counts: &dyn Fn(&Listed) -> bool,
    ) {
        let taken = match taken {
            Ok(taken) => taken,
            Err(Unread(kind)) => {
                self.cascades.push(unlisted(&taker.holder, kind));
                return;
            }
        };
        let taken: Vec<Listed> = taken
            .into_iter()
            .filter(|o| !planned.uids.contains(o.uid()) && !o.is_terminating())
            .collect();
        if taken.is_empty() {
            return;
        }
        self.walked.push(Cascade {
            holder: taker.holder.clone(),
            victims: taken.iter().map(|o| victim_of(o, "uncounted")).collect(),
            unlisted: Vec::new(),
        });
        self.cascades
            .extend(cascade_of(&taker.holder, taken.iter(), planned, counts));
    }
}

/// The Pods bound to a Node, listed in every namespace (`Err`: the kind that could not be read).
async fn pods_taken(client: &Client, pod: &Arc<KindInfo>, node: &ObjectId) -> Result<Vec<Listed>, Unread> {
    let fields = format!("spec.nodeName={}", node.name);
    list_by_field(client, pod, None, &fields).await.map_err(|err| {
        tracing::warn!("cannot list the Pods bound to {node}: {err}");
        Unread("Pod")
    })
}

fn is_core(id: &ObjectId, kind: &str) -> bool {
    id.group.is_empty() && id.kind == kind && id.namespace.is_some()
}

/// The token Secrets of the ServiceAccounts `accounts`, one listing of the token type per
/// namespace: for each account, its tokens or the kind that could not be listed.
async fn tokens_taken<'a>(
    client: &Client,
    secret: &Arc<KindInfo>,
    accounts: &[&'a Taker],
) -> Vec<(&'a Taker, Result<Vec<Listed>, Unread>)> {
    let mut by_namespace: BTreeMap<&str, Vec<&'a Taker>> = BTreeMap::new();
    for &account in accounts {
        by_namespace
            .entry(account.id.namespace.as_deref().unwrap_or_default())
            .or_default()
            .push(account);
    }
    let mut found = Vec::new();
    for (namespace, accounts) in by_namespace {
        let fields = format!("type={SERVICE_ACCOUNT_TOKEN}");
        match list_by_field(client, secret, Some(namespace), &fields).await {
            Ok(tokens) => found.extend(accounts.into_iter().map(|account| {
                let of_it = tokens
                    .iter()
                    .filter(|token| is_token_of(token, &account.id.name, &account.uid));
                (account, Ok(of_it.cloned().collect()))
            })),
            Err(err) => {
                tracing::warn!("cannot list the token Secrets of {namespace}: {err}");
                found.extend(accounts.into_iter().map(|account| (account, Err(Unread("Secret")))));
            }
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

/// The Endpoints of a Service's name, if any (`Err`: the kind that could not be read).
async fn endpoints_taken(
    client: &Client,
    endpoints: &Arc<KindInfo>,
    service: &ObjectId,
) -> Result<Vec<Listed>, Unread> {
    let api = api_for(client, endpoints, service.namespace.as_deref());
    match with_retries("get endpoints", || api.get_metadata(&service.name)).await {
        Ok(object) => Ok(vec![Listed::new(Arc::clone(endpoints), object.metadata)]),
        Err(err) if is_not_found(&err) => Ok(Vec::new()),
        Err(err) => {
            tracing::warn!("cannot read the Endpoints of {service}: {err}");
            Err(Unread("Endpoints"))
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
    let victims = counting.iter().map(|o| victim_of(o, &why_it_counts(o))).collect();
    let cascade = Cascade {
        holder: holder.clone(),
        victims,
        unlisted: Vec::new(),
    };
    Some((cascade, counting.into_iter().cloned().collect()))
}

/// `object` as a victim a controller deletes by name, counting for `why`.
fn victim_of(object: &Listed, why: &str) -> Victim {
    Victim {
        id: object.id(),
        uid: object.uid().to_string(),
        why: format!(
            "deleted by name with what the plan takes ({}): {why}",
            maker(&object.id())
        ),
    }
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
