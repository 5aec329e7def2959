//! The one paginated lister: every LIST request is made here, from a [`ListQuery`], page by
//! page (`continue` tokens), each page retried by the policy in [`crate::cluster::retry`].

use std::future::Future;

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ObjectList, PartialObjectMeta};
use kube::Client;

use super::{ListOptions, ListScope};
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_attempts;

/// The dynamic API for a kind in a scope.
pub fn api_for(client: &Client, kind: &KindInfo, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = kind.api_resource();
    match namespace {
        Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

/// What to list of one kind, and how: the one description every LIST request is made from.
#[derive(Debug, Clone)]
pub struct ListQuery<'a> {
    /// The namespace (ignored for a cluster-scoped kind); `None` lists every namespace.
    pub namespace: Option<&'a str>,
    /// A label selector, sent to the server.
    pub labels: Option<&'a str>,
    /// A field selector, sent to the server.
    pub fields: Option<&'a str>,
    /// Page size (`limit`).
    pub page_size: u32,
    /// Stop after the first page (a quick answer, e.g. for shell completion).
    pub first_page_only: bool,
    /// Tries of each page: `u32::MAX` retries transient failures for the whole retry budget
    /// ([`crate::cluster::retry`]); 1 tries once.
    pub attempts: u32,
}

impl Default for ListQuery<'_> {
    fn default() -> Self {
        Self {
            namespace: None,
            labels: None,
            fields: None,
            page_size: ListOptions::default().page_size,
            first_page_only: false,
            attempts: u32::MAX,
        }
    }
}

impl ListQuery<'_> {
    /// The first page's request parameters.
    fn params(&self) -> ListParams {
        let mut params = ListParams::default().limit(self.page_size);
        if let Some(labels) = self.labels {
            params = params.labels(labels);
        }
        if let Some(fields) = self.fields {
            params = params.fields(fields);
        }
        params
    }
}

impl ListScope {
    /// The namespace to list in; `None` for every namespace.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            ListScope::Namespace(ns) => Some(ns.as_str()),
            ListScope::AllNamespaces => None,
        }
    }
}

/// The one pagination loop: fetches page after page (`continue` tokens) with `fetch`, each page
/// tried as `query.attempts` says, and hands each page's items to `take` as it arrives.
async fn paginate<T, F, Fut>(
    what: &str,
    query: &ListQuery<'_>,
    fetch: F,
    mut take: impl FnMut(Vec<T>),
) -> Result<(), kube::Error>
where
    T: Clone,
    F: Fn(ListParams) -> Fut,
    Fut: Future<Output = Result<ObjectList<T>, kube::Error>>,
{
    let mut params = query.params();
    loop {
        let page = with_attempts(what, query.attempts, || fetch(params.clone())).await?;
        take(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() && !query.first_page_only => params.continue_token = Some(token),
            _ => return Ok(()),
        }
    }
}

/// Lists the metadata of one kind, page by page, handing each page to `take`.
pub async fn list_metadata_pages(
    client: &Client,
    kind: &KindInfo,
    query: &ListQuery<'_>,
    take: impl FnMut(Vec<PartialObjectMeta<DynamicObject>>),
) -> Result<(), kube::Error> {
    let api = api_for(client, kind, query.namespace);
    let api = &api;
    let what = format!("list {}", kind.kind_with_group());
    paginate(
        &what,
        query,
        |params| async move { api.list_metadata(&params).await },
        take,
    )
    .await
}

/// Lists whole objects of one kind (not only metadata), as `query` says: for the few kinds
/// whose spec or status matters (Flux objects, inventories, Helm releases, APIServices).
pub async fn list_query(
    client: &Client,
    kind: &KindInfo,
    query: &ListQuery<'_>,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let api = api_for(client, kind, query.namespace);
    let api = &api;
    let what = format!("list {}", kind.kind_with_group());
    let mut found = Vec::new();
    paginate(
        &what,
        query,
        |params| async move { api.list(&params).await },
        |items| found.extend(items),
    )
    .await?;
    Ok(found)
}

/// Lists whole objects of one kind, page by page, handing each page to `take` as it arrives: a
/// caller that keeps only a part of each object holds one page of whole objects at a time.
pub async fn list_object_pages(
    client: &Client,
    kind: &KindInfo,
    query: &ListQuery<'_>,
    take: impl FnMut(Vec<DynamicObject>),
) -> Result<(), kube::Error> {
    let api = api_for(client, kind, query.namespace);
    let api = &api;
    let what = format!("list {}", kind.kind_with_group());
    paginate(&what, query, |params| async move { api.list(&params).await }, take).await
}

/// Lists whole objects of one kind (not only metadata), paginated, each page retried.
pub async fn list_objects(
    client: &Client,
    kind: &KindInfo,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let query = ListQuery {
        namespace,
        labels: label_selector,
        ..ListQuery::default()
    };
    list_query(client, kind, &query).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake server: three pages of two items, linked by `continue` tokens; records each
    /// request's token and fails the first `failures` requests with a 503.
    struct FakePages {
        requests: std::sync::Mutex<Vec<Option<String>>>,
        failures: std::sync::atomic::AtomicU32,
    }

    impl FakePages {
        fn new(failures: u32) -> Self {
            Self {
                requests: std::sync::Mutex::new(Vec::new()),
                failures: std::sync::atomic::AtomicU32::new(failures),
            }
        }

        async fn fetch(&self, params: ListParams) -> Result<ObjectList<String>, kube::Error> {
            self.requests.lock().unwrap().push(params.continue_token.clone());
            if self.failures.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                self.failures.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                return Err(kube::Error::Api(
                    kube::core::Status::failure("unavailable", "ServiceUnavailable")
                        .with_code(503)
                        .boxed(),
                ));
            }
            let page: usize = params.continue_token.as_deref().map_or(0, |t| t.parse().unwrap());
            let next = (page < 2).then(|| (page + 1).to_string());
            Ok(ObjectList {
                types: Default::default(),
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta {
                    continue_: next,
                    ..Default::default()
                },
                items: vec![format!("{page}a"), format!("{page}b")],
            })
        }
    }

    #[tokio::test]
    async fn pagination_follows_continue_tokens_to_the_last_page() {
        let server = FakePages::new(0);
        let mut items = Vec::new();
        let query = ListQuery::default();
        paginate("list fakes", &query, |p| server.fetch(p), |page| items.extend(page))
            .await
            .unwrap();
        assert_eq!(items, ["0a", "0b", "1a", "1b", "2a", "2b"]);
        assert_eq!(
            *server.requests.lock().unwrap(),
            [None, Some("1".to_string()), Some("2".to_string())]
        );
    }

    #[tokio::test]
    async fn a_first_page_only_query_sends_one_request() {
        let server = FakePages::new(0);
        let mut items = Vec::new();
        let query = ListQuery {
            first_page_only: true,
            ..ListQuery::default()
        };
        paginate("list fakes", &query, |p| server.fetch(p), |page| items.extend(page))
            .await
            .unwrap();
        assert_eq!(items, ["0a", "0b"]);
        assert_eq!(server.requests.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_transient_failure_is_retried_unless_one_attempt_is_allowed() {
        let server = FakePages::new(1);
        let mut items = Vec::new();
        paginate(
            "list fakes",
            &ListQuery::default(),
            |p| server.fetch(p),
            |page| items.extend(page),
        )
        .await
        .unwrap();
        assert_eq!(items.len(), 6);
        assert_eq!(server.requests.lock().unwrap().len(), 4, "one retry of the first page");

        let once = FakePages::new(1);
        let query = ListQuery {
            attempts: 1,
            ..ListQuery::default()
        };
        let result = paginate("list fakes", &query, |p| once.fetch(p), |_: Vec<String>| {}).await;
        assert!(result.is_err());
        assert_eq!(once.requests.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_query_sends_its_selectors_and_page_size() {
        let query = ListQuery {
            labels: Some("owner=helm"),
            fields: Some("type=helm.sh/release.v1"),
            page_size: 7,
            ..ListQuery::default()
        };
        let params = query.params();
        assert_eq!(params.label_selector.as_deref(), Some("owner=helm"));
        assert_eq!(params.field_selector.as_deref(), Some("type=helm.sh/release.v1"));
        assert_eq!(params.limit, Some(7));
        assert_eq!(ListScope::Namespace("web".into()).namespace(), Some("web"));
        assert_eq!(ListScope::AllNamespaces.namespace(), None);
    }
}
