//! Collect: metadata-only, paginated lists of every listable kind, with bounded concurrency.
//! A kind that cannot be listed is reported, never taken as empty.

use std::collections::HashSet;
use std::sync::Arc;

use futures::{stream, StreamExt};
use kube::core::ObjectMeta;
use kube::Client;

use crate::cluster::discovery::{Catalog, KindInfo};
use crate::error::{api_status, is_forbidden, is_not_found, root_cause};
use crate::model::identity::ObjectId;
use crate::model::trackers::Selection;

mod pages;

pub use pages::{api_for, list_metadata_pages, list_object_pages, list_objects, list_query, ListQuery};

/// Annotations that hold a copy of an object's content (a Secret's data included), by name:
/// kubectl's (and Argo CD's client-side apply) last-applied copy; kapp's `original` copy and its
/// debugging diffs (k14s/kapp `pkg/kapp/diff/resource_with_history.go`: `original`,
/// `original-diff`, `original-diff-full`, `original-diff-md5`, all under the prefix below);
/// banzaicloud k8s-objectmatcher's (base64 of zip). Helm's annotations (`meta.helm.sh/*`,
/// `helm.sh/*`) and Argo CD's (`argocd.argoproj.io/*`) carry names and options only: Helm keeps
/// manifests in its release Secrets, which are never listed with their data.
const CONTENT_ANNOTATIONS: [&str; 3] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "banzaicloud.com/last-applied",
    "banzaicloud.io/last-applied",
];

/// kapp's annotations that keep the applied content and diffs of it.
const KAPP_ORIGINAL_PREFIX: &str = "kapp.k14s.io/original";

/// Longest annotation value that is decoded to look for a serialized object.
const MAX_DECODED_ANNOTATION: usize = 1 << 20;

/// Removes every annotation that can carry an object's content: the known ones by name, and any
/// other whose value is a serialized object (JSON or YAML with `apiVersion`/`kind`/`data`),
/// plainly, base64-encoded, or base64 of gzip. Such copies hold Secret data and are never needed.
///
/// A tracker's mark or option keeps its value whatever it looks like, except on a Secret
/// (`secret`), where a value that looks like a serialized object is dropped under any key: a
/// Secret's data is never printed, and its annotations are printed by key (membership review
/// 11).
pub fn drop_content_annotations(meta: &mut ObjectMeta, secret: bool) {
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, value| !carries_content(key, value, secret));
    }
}

/// The annotation keys of a Secret whose values are printed: the trackers' marks and options
/// (names, ids, waves, policies — what kubectl-stack reads), by prefix, and the ServiceAccount a
/// token Secret belongs to. A Secret's other annotation values are replaced with
/// [`REDACTED`]: a blocklist of encodings (base64 wrapped or unpadded, flow YAML, a JSON array)
/// always misses one, so for Secrets only what is known to be safe is shown.
const SAFE_SECRET_ANNOTATIONS: [&str; 13] = [
    "meta.helm.sh/",
    "helm.sh/",
    "argocd.argoproj.io/",
    "kapp.k14s.io/",
    "config.kubernetes.io/",
    "config.k8s.io/",
    "applyset.kubernetes.io/",
    "kustomize.toolkit.fluxcd.io/",
    "helm.toolkit.fluxcd.io/",
    "fluxcd.io/",
    "cli-utils.sigs.k8s.io/",
    "kubernetes.io/service-account.",
    "kustomize.config.k8s.io/",
];

/// What a Secret's annotation value not known to be safe is replaced with.
pub const REDACTED: &str = "<redacted: a Secret's annotation>";

/// Replaces the value of every annotation of a Secret that is not a tracker's mark or option
/// (see [`SAFE_SECRET_ANNOTATIONS`]).
fn redact_secret_annotations(meta: &mut ObjectMeta) {
    for (key, value) in meta.annotations.iter_mut().flatten() {
        let safe = SAFE_SECRET_ANNOTATIONS.iter().any(|prefix| key.starts_with(prefix))
            && !key.starts_with(KAPP_ORIGINAL_PREFIX);
        if !safe {
            *value = REDACTED.to_string();
        }
    }
}

/// A known content copy by name, or any other annotation whose value is a serialized object,
/// except a tracker's mark or option (the prefixes of [`SAFE_SECRET_ANNOTATIONS`]): what a rule
/// reads (a keep marker, an inventory id, sync options) is never dropped for what its value
/// happens to look like (membership review 10: `Prune=false,\nkind: x` still keeps, as Argo CD
/// splits it on commas; an inventory id that is base64 of `{"kind":123}` still names its stack).
fn carries_content(key: &str, value: &str, secret: bool) -> bool {
    let tracker_mark = !secret && SAFE_SECRET_ANNOTATIONS.iter().any(|prefix| key.starts_with(prefix));
    CONTENT_ANNOTATIONS.contains(&key)
        || key.starts_with(KAPP_ORIGINAL_PREFIX)
        || (!tracker_mark
            && (is_serialized_object(value.as_bytes())
                || decoded(value).is_some_and(|bytes| is_serialized_object(&bytes))))
}

/// JSON or YAML text of an object: a mapping with `apiVersion`, `kind`, `data` or `stringData`.
fn is_serialized_object(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let text = text.trim_start();
    if text.starts_with('{') {
        return serde_json::from_str::<serde_json::Value>(text).is_ok_and(|value| {
            value.as_object().is_some_and(|object| {
                ["apiVersion", "kind", "data", "stringData"]
                    .iter()
                    .any(|key| object.contains_key(*key))
            })
        });
    }
    // YAML: a document of several lines, one of them a top-level key of an object.
    text.contains('\n')
        && text.lines().any(|line| {
            ["apiVersion:", "kind:", "data:", "stringData:"]
                .iter()
                .any(|key| line.starts_with(key))
        })
}

/// The bytes of a base64 value (gunzipped when gzip), when it is one.
fn decoded(value: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    use std::io::Read;
    let value = value.trim();
    if value.len() < 16 || value.len() > MAX_DECODED_ANNOTATION {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(value).ok()?;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Some(bytes);
    }
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .take(MAX_DECODED_ANNOTATION as u64)
        .read_to_end(&mut unzipped)
        .ok()?;
    Some(unzipped)
}

/// One listed object: its kind and its metadata (managed fields and content copies dropped).
#[derive(Debug, Clone)]
pub struct Listed {
    /// The kind, at the version it was listed with.
    pub kind: Arc<KindInfo>,
    /// The object's metadata, boxed: a collection of many objects holds one pointer each in
    /// its vector (a vector of the large struct itself, grown by doubling, held several times
    /// its size), and each metadata exactly once.
    pub meta: Box<ObjectMeta>,
    /// The tools' marks as `list` shows them (TRACKED-BY,
    /// [`crate::model::trackers::describe_marks`]), kept when the labels and annotations they
    /// were read from are dropped ([`Trim::Marks`]); `None` otherwise.
    pub marks: Option<Box<str>>,
}

impl Listed {
    /// Wraps metadata, dropping what is large and never needed: managed fields, and every
    /// annotation that can carry the object's content ([`drop_content_annotations`]).
    pub fn new(kind: Arc<KindInfo>, mut meta: ObjectMeta) -> Self {
        meta.managed_fields = None;
        let secret = kind.group.is_empty() && kind.kind == "Secret";
        drop_content_annotations(&mut meta, secret);
        if secret {
            redact_secret_annotations(&mut meta);
        }
        Self {
            kind,
            meta: Box::new(meta),
            marks: None,
        }
    }

    /// [`Listed::new`], holding only what `trim` keeps.
    pub fn trimmed(kind: Arc<KindInfo>, mut meta: ObjectMeta, trim: Trim) -> Self {
        trim.apply(&mut meta);
        let mut listed = Self::new(kind, meta);
        if trim == Trim::Marks {
            // Described from the metadata as `new` left it (a Secret's annotations redacted).
            listed.marks = Some(crate::model::trackers::describe_marks(&listed.meta).into());
            listed.meta.labels = None;
            listed.meta.annotations = None;
        }
        listed
    }

    /// (group, kind, namespace, name).
    pub fn id(&self) -> ObjectId {
        ObjectId::new(
            &self.kind.group,
            &self.kind.kind,
            self.meta.namespace.as_deref(),
            self.meta.name.as_deref().unwrap_or_default(),
        )
    }

    /// The object's UID.
    pub fn uid(&self) -> &str {
        self.meta.uid.as_deref().unwrap_or_default()
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or_default()
    }

    /// The object's namespace, if namespaced.
    pub fn namespace(&self) -> Option<&str> {
        self.meta.namespace.as_deref()
    }

    /// Whether the object is being deleted.
    pub fn is_terminating(&self) -> bool {
        self.meta.deletion_timestamp.is_some()
    }

    /// The object's finalizers.
    pub fn finalizers(&self) -> &[String] {
        self.meta.finalizers.as_deref().unwrap_or_default()
    }

    /// The owner that controls this object (`controller: true`), if any.
    pub fn controller_owner(&self) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
        self.meta
            .owner_references
            .as_ref()?
            .iter()
            .find(|o| o.controller == Some(true))
    }
}

/// Why a kind could not be listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListFailure {
    /// The user may not list it (403).
    Forbidden,
    /// Anything else: the HTTP status (if the server answered) and what was said.
    Error(Option<u16>, String),
}

impl std::fmt::Display for ListFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Forbidden => write!(f, "forbidden"),
            Self::Error(Some(status), message) => write!(f, "{status} {message}"),
            Self::Error(None, message) => write!(f, "{message}"),
        }
    }
}

/// A kind that could not be listed.
#[derive(Debug, Clone)]
pub struct KindFailure {
    /// The kind.
    pub kind: Arc<KindInfo>,
    /// Why.
    pub failure: ListFailure,
}

/// Kinds whose listing failed the same way.
#[derive(Debug, Clone)]
pub struct ErrorGroup {
    /// What the server or connection said.
    pub message: String,
    /// The HTTP status, if the server answered.
    pub status: Option<u16>,
    /// The kinds.
    pub kinds: Vec<Arc<KindInfo>>,
}

/// The outcome of listing one kind: its place in the catalog order, the kind, and the objects.
type KindOutcome = (usize, Arc<KindInfo>, Result<Vec<Listed>, kube::Error>);

/// Where to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListScope {
    /// Namespaced kinds in this namespace; cluster-scoped kinds everywhere.
    Namespace(String),
    /// Every namespace.
    AllNamespaces,
}

/// How to list.
#[derive(Debug, Clone, Copy)]
pub struct ListOptions {
    /// Kinds listed at once.
    pub concurrency: usize,
    /// Page size.
    pub page_size: u32,
    /// What of each kept object's metadata is held.
    pub trim: Trim,
}

impl Default for ListOptions {
    fn default() -> Self {
        Self {
            concurrency: 16,
            page_size: 500,
            trim: Trim::Keep,
        }
    }
}

/// What of each listed object's metadata a command holds: only what its output or decisions
/// read, so that a list of many objects holds little of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trim {
    /// Everything [`Listed::new`] keeps.
    #[default]
    Keep,
    /// Identity and UID only (`list -o name`).
    Identity,
    /// Identity, UID, times, finalizers, and the tools' marks described once ([`Listed::marks`]:
    /// `list`'s table); no label or annotation.
    Marks,
}

impl Trim {
    /// Drops from `meta` what this trim does not hold.
    pub fn apply(self, meta: &mut ObjectMeta) {
        if self == Trim::Keep {
            return;
        }
        meta.resource_version = None;
        meta.self_link = None;
        meta.generate_name = None;
        meta.generation = None;
        meta.owner_references = None;
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.retain(|key, _| is_mark_annotation(key));
        }
        if self == Trim::Identity {
            meta.labels = None;
            meta.annotations = None;
            meta.finalizers = None;
            meta.creation_timestamp = None;
            meta.deletion_timestamp = None;
            meta.deletion_grace_period_seconds = None;
        }
    }
}

/// Whether an annotation is a tracker's mark or option (see [`SAFE_SECRET_ANNOTATIONS`]).
fn is_mark_annotation(key: &str) -> bool {
    SAFE_SECRET_ANNOTATIONS.iter().any(|prefix| key.starts_with(prefix)) && !key.starts_with(KAPP_ORIGINAL_PREFIX)
}

/// What a collection found.
#[derive(Debug, Clone, Default)]
pub struct Collection {
    /// Matching objects, each once (by UID), sorted by kind, namespace, name.
    pub objects: Vec<Listed>,
    /// Kinds that could not be listed.
    pub failures: Vec<KindFailure>,
    /// How many kinds were listed successfully.
    pub listed_kinds: usize,
    /// Kinds that answered 404: not served (any more) at the version discovery gave. Neither
    /// listed nor failed: the caller rediscovers once (`session::relist_not_served`).
    pub not_served: Vec<Arc<KindInfo>>,
    /// How many objects `-l` selected that were left out only because no tool tracks them
    /// (see [`Selection::untracked_match`]).
    pub untracked_matches: usize,
    /// The UIDs of the listed Secrets proven ServiceAccount token Secrets by a listing of that
    /// type (metadata carries no `type`): filled by `prune::cascade::contents` for a
    /// Namespace, empty otherwise.
    pub service_account_tokens: HashSet<String>,
}

impl Collection {
    /// Kinds the user may not list (403).
    pub fn forbidden(&self) -> impl Iterator<Item = &Arc<KindInfo>> {
        self.failures
            .iter()
            .filter(|f| f.failure == ListFailure::Forbidden)
            .map(|f| &f.kind)
    }

    /// Kinds that failed for another reason than 403, grouped by what the server said.
    pub fn errors(&self) -> Vec<ErrorGroup> {
        let mut grouped: Vec<ErrorGroup> = Vec::new();
        for failure in &self.failures {
            let ListFailure::Error(status, message) = &failure.failure else {
                continue;
            };
            match grouped
                .iter_mut()
                .find(|g| g.message == *message && g.status == *status)
            {
                Some(group) => group.kinds.push(failure.kind.clone()),
                None => grouped.push(ErrorGroup {
                    message: message.clone(),
                    status: *status,
                    kinds: vec![failure.kind.clone()],
                }),
            }
        }
        grouped
    }
}

/// Lists every listable kind of the catalog and keeps the objects the selection matches.
pub async fn collect(
    client: &Client,
    catalog: &Catalog,
    scope: &ListScope,
    selection: &Selection,
    options: ListOptions,
) -> Collection {
    let kinds: Vec<Arc<KindInfo>> = catalog.listable().cloned().collect();
    collect_kinds(client, &kinds, scope, selection, options).await
}

/// Lists the given kinds and keeps the objects the selection matches (its label part is sent
/// to the server, the rest is checked here).
pub async fn collect_kinds(
    client: &Client,
    kinds: &[Arc<KindInfo>],
    scope: &ListScope,
    selection: &Selection,
    options: ListOptions,
) -> Collection {
    let server_selector = selection.server_selector();
    // By UID: a kind served under two names lists its objects twice.
    let untracked = std::sync::Mutex::new(std::collections::HashSet::new());
    let keep = |meta: &ObjectMeta| {
        let kept = selection.matches(meta);
        if !kept && selection.untracked_match(meta) {
            if let Ok(mut seen) = untracked.lock() {
                seen.insert(meta.uid.clone().unwrap_or_default());
            }
        }
        kept
    };
    let mut collection = collect_matching(client, kinds, scope, server_selector.as_deref(), &keep, options).await;
    collection.untracked_matches = untracked.into_inner().map(|seen| seen.len()).unwrap_or(0);
    collection
}

/// Lists the given kinds (metadata only, paginated, each page retried) and keeps only what
/// `keep` accepts, as pages arrive: a search over many objects for the few it needs (e.g. every
/// object that names one owner) never holds the rest in memory.
pub async fn collect_where<F>(
    client: &Client,
    kinds: &[Arc<KindInfo>],
    scope: &ListScope,
    keep: F,
    options: ListOptions,
) -> Collection
where
    F: Fn(&ObjectMeta) -> bool + Sync,
{
    collect_matching(client, kinds, scope, None, &keep, options).await
}

/// Lists each kind with the label selector `labels`, `options.concurrency` kinds at once, keeping
/// what `keep` accepts. A kind that answers 404 (not served at the version discovery gave: its
/// CRD deleted or changed meanwhile) is reported in [`Collection::not_served`].
async fn collect_matching<F>(
    client: &Client,
    kinds: &[Arc<KindInfo>],
    scope: &ListScope,
    labels: Option<&str>,
    keep: &F,
    options: ListOptions,
) -> Collection
where
    F: Fn(&ObjectMeta) -> bool + Sync,
{
    let query = ListQuery {
        namespace: scope.namespace(),
        labels,
        page_size: options.page_size,
        ..ListQuery::default()
    };
    let results: Vec<KindOutcome> = stream::iter(kinds.iter().cloned().enumerate())
        .map(|(order, kind)| {
            let query = query.clone();
            async move {
                let mut found = Vec::new();
                let listed = list_metadata_pages(client, &kind, &query, |items| {
                    found.extend(
                        items
                            .into_iter()
                            .filter(|item| keep(&item.metadata))
                            .map(|item| Listed::trimmed(kind.clone(), item.metadata, options.trim)),
                    );
                })
                .await;
                let outcome = listed.map(|()| found);
                if let Ok(found) = &outcome {
                    tracing::debug!("listed {}: {} matching", kind.kind_with_group(), found.len());
                }
                (order, kind, outcome)
            }
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    assemble(results)
}

fn assemble(mut results: Vec<KindOutcome>) -> Collection {
    // Kind order (core group first) decides which copy of an object served twice is kept.
    results.sort_by_key(|(order, _, _)| *order);
    let mut collection = Collection::default();
    // Sized once: the objects are moved in without the vector growing (and copying) meanwhile.
    let total = results
        .iter()
        .map(|(_, _, listed)| listed.as_ref().map_or(0, Vec::len))
        .sum();
    collection.objects.reserve_exact(total);
    let mut seen_uids = HashSet::new();
    for (_, kind, listed) in results {
        match listed {
            Ok(objects) => {
                collection.listed_kinds += 1;
                collection.objects.extend(
                    objects
                        .into_iter()
                        .filter(|o| o.uid().is_empty() || seen_uids.insert(o.uid().to_string())),
                );
            }
            // The kind is not served at this version (its CRD deleted or changed since discovery).
            Err(err) if is_not_found(&err) => {
                tracing::debug!("{} answered 404: not served", kind.kind_with_group());
                collection.not_served.push(kind);
            }
            Err(err) => {
                let failure = if is_forbidden(&err) {
                    ListFailure::Forbidden
                } else {
                    ListFailure::Error(api_status(&err), root_cause(&err))
                };
                collection.failures.push(KindFailure { kind, failure });
            }
        }
    }
    sort_objects(&mut collection.objects);
    collection
}

/// Sorts objects by group, kind, namespace, name: a stable order for every output.
pub fn sort_objects(objects: &mut [Listed]) {
    objects.sort_by(|a, b| {
        (&a.kind.group, &a.kind.kind, a.namespace(), a.name()).cmp(&(
            &b.kind.group,
            &b.kind.kind,
            b.namespace(),
            b.name(),
        ))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn gzip_base64(text: &str) -> String {
        use base64::Engine;
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(text.as_bytes()).unwrap();
        base64::engine::general_purpose::STANDARD.encode(encoder.finish().unwrap())
    }

    fn base64(text: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    #[test]
    fn the_tables_trim_keeps_the_marks_described_and_no_label_or_annotation() {
        let labels = [
            ("kustomize.toolkit.fluxcd.io/name", "apps"),
            ("kustomize.toolkit.fluxcd.io/namespace", "flux-system"),
            ("app", "web"),
        ];
        let meta = |labels: &[(&str, &str)]| ObjectMeta {
            name: Some("a".into()),
            namespace: Some("n".into()),
            uid: Some("u".into()),
            finalizers: Some(vec!["example.com/hold".into()]),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            annotations: Some(BTreeMap::from([(
                "config.k8s.io/owning-inventory".into(),
                "inv".into(),
            )])),
            ..Default::default()
        };
        let kind = Arc::new(crate::cluster::fixtures::kind("", "ConfigMap", true));
        let whole = Listed::trimmed(kind.clone(), meta(&labels), Trim::Keep);
        let trimmed = Listed::trimmed(kind.clone(), meta(&labels), Trim::Marks);
        let described = crate::model::trackers::describe_marks(&whole.meta);
        assert!(
            described.contains("flux:flux-system/apps") && described.contains("kpt:inv"),
            "{described}"
        );
        assert_eq!(trimmed.marks.as_deref(), Some(described.as_str()));
        assert!(trimmed.meta.labels.is_none() && trimmed.meta.annotations.is_none());
        assert_eq!(trimmed.finalizers(), whole.finalizers());
        assert_eq!((trimmed.id(), trimmed.uid()), (whole.id(), whole.uid()));
        assert!(whole.marks.is_none());
        // Without the Flux labels, the kpt mark alone.
        let kpt_only = Listed::trimmed(kind, meta(&[("app", "web")]), Trim::Marks);
        assert_eq!(kpt_only.marks.as_deref(), Some("kpt:inv"));
    }

    #[test]
    fn a_secrets_annotations_show_only_what_is_known_to_be_safe() {
        use base64::Engine;
        let secret = r#"{"apiVersion":"v1","kind":"Secret","data":{"password":"c2VjcmV0LXZhbHVl"}}"#;
        let wrapped: String = base64(secret)
            .as_bytes()
            .chunks(76)
            .map(|line| String::from_utf8_lossy(line).to_string() + "\n")
            .collect();
        let hostile = [
            ("example.com/wrapped", wrapped),
            (
                "example.com/unpadded",
                base64::engine::general_purpose::STANDARD_NO_PAD.encode(secret),
            ),
            (
                "example.com/flow",
                "{apiVersion: v1, kind: Secret, data: {password: c2VjcmV0LXZhbHVl}}".to_string(),
            ),
            ("example.com/array", format!("[{secret}]")),
            ("example.com/plain", "password=secret-value".to_string()),
        ];
        let safe = [
            ("meta.helm.sh/release-name", "web"),
            ("argocd.argoproj.io/tracking-id", "shop:/Secret:web/db"),
            ("kubernetes.io/service-account.name", "builder"),
            ("config.k8s.io/owning-inventory", "inv-1"),
        ];
        let annotations: BTreeMap<String, String> = hostile
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .chain(safe.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        let meta = ObjectMeta {
            name: Some("db".into()),
            annotations: Some(annotations.clone()),
            ..Default::default()
        };
        let kind = |k: &str| Arc::new(crate::cluster::fixtures::kind("", k, true));
        let listed = Listed::new(kind("Secret"), meta.clone());
        let printed = serde_json::to_string(&listed.meta).unwrap();
        for needle in ["c2VjcmV0LXZhbHVl", "secret-value", "eyJhcGlWZXJzaW9u", "apiVersion"] {
            assert!(!printed.contains(needle), "{needle} in {printed}");
        }
        let kept = listed.meta.annotations.unwrap();
        for (key, value) in safe {
            assert_eq!(kept[key], value);
        }
        for (key, _) in &hostile {
            assert!(
                kept.get(*key).is_none_or(|v| v == REDACTED),
                "{key}: {:?}",
                kept.get(*key)
            );
        }
        // Other kinds keep their annotations (only serialized objects are dropped).
        let config_map = Listed::new(kind("ConfigMap"), meta);
        assert_eq!(
            config_map.meta.annotations.unwrap()["example.com/plain"],
            "password=secret-value"
        );
    }

    #[test]
    fn content_annotations_are_dropped_and_the_others_kept() {
        let secret = r#"{"apiVersion":"v1","kind":"Secret","data":{"password":"c2VjcmV0"}}"#;
        let yaml = "apiVersion: v1\nkind: Secret\ndata:\n  password: c2VjcmV0\n";
        let kept: BTreeMap<String, String> = [
            ("config.kubernetes.io/depends-on", "apps/namespaces/web/Deployment/api"),
            ("kapp.k14s.io/change-rule", "upsert after upserting apps"),
            ("meta.helm.sh/release-name", "web"),
            ("argocd.argoproj.io/tracking-id", "shop:apps/Deployment:web/api"),
            ("argocd.argoproj.io/sync-wave", "-1"),
            ("example.com/settings", r#"{"replicas": 3}"#),
            ("example.com/note", "kind: of a note"),
            ("example.com/checksum", "0123456789abcdef0123456789abcdef"),
            // A tracker's mark or option is read by a rule, whatever its value looks like.
            ("argocd.argoproj.io/sync-options", "Prune=false,\nkind: x"),
            ("config.k8s.io/owning-inventory", "eyJraW5kIjoxMjN9"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let mut annotations = kept.clone();
        for (key, value) in [
            ("kubectl.kubernetes.io/last-applied-configuration", secret.to_string()),
            ("kapp.k14s.io/original", secret.to_string()),
            ("kapp.k14s.io/original-diff", "  - replace /data/password".to_string()),
            ("kapp.k14s.io/original-diff-full", "whatever".to_string()),
            (
                "kapp.k14s.io/original-diff-md5",
                "58e0494c51d30eb3494f7c9198986bb9".to_string(),
            ),
            (
                "banzaicloud.com/last-applied",
                "UEsDBBQACAAIAAAAAAAAAAAAAAAAAAAAAAAIAAAAb3JpZ2luYWw=".to_string(),
            ),
            ("example.com/copy", secret.to_string()),
            ("example.com/yaml-copy", yaml.to_string()),
            ("example.com/base64-copy", base64(secret)),
            ("example.com/gzip-copy", gzip_base64(secret)),
        ] {
            annotations.insert(key.to_string(), value);
        }
        let mut meta = ObjectMeta {
            annotations: Some(annotations.clone()),
            ..Default::default()
        };
        drop_content_annotations(&mut meta, false);
        assert_eq!(meta.annotations, Some(kept.clone()));
        // On a Secret, a tracker's key holding what looks like a copy of it is dropped too.
        let mut on_secret = annotations;
        on_secret.insert("argocd.argoproj.io/copy".into(), secret.to_string());
        let mut meta = ObjectMeta {
            annotations: Some(on_secret),
            ..Default::default()
        };
        drop_content_annotations(&mut meta, true);
        let left = meta.annotations.unwrap_or_default();
        assert!(!left.contains_key("argocd.argoproj.io/copy"), "{left:?}");
        assert!(!left.contains_key("argocd.argoproj.io/sync-options"), "{left:?}");
        assert!(left.contains_key("argocd.argoproj.io/tracking-id"), "{left:?}");
    }
}
