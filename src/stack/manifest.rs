//! Manifests: the objects a repository declares, read from files, directories, stdin or
//! `kubectl kustomize`. Multi-document YAML and JSON; `List` kinds are unwrapped.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::UserError;

/// One object declared in a manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// `apiVersion` as written.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` as written (may be absent).
    pub namespace: Option<String>,
    /// Where it was read: `path` and document number, for messages.
    pub source: String,
    /// The whole object; for a desired set ([`Reading::Desired`]), only what its rules read
    /// (see [`Manifest::slim`]).
    pub body: Value,
}

impl Manifest {
    /// The API group (empty for core).
    pub fn group(&self) -> &str {
        group_of(&self.api_version)
    }

    /// A string field anywhere in the object, by JSON pointer (e.g. `/spec/group`).
    pub fn str_at(&self, pointer: &str) -> Option<&str> {
        self.body.pointer(pointer).and_then(Value::as_str)
    }

    /// A metadata annotation.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.body
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    /// Drops from the body all that no rule of a desired set reads, keeping its identity (the
    /// fields above) and, of the body, `metadata.annotations` (`depends-on`,
    /// `apply-time-mutation`: [`crate::stack::desired::Needs`]) and, of a CRD, the `spec`
    /// fields that say which kind it defines and its scope (`group`, `names`, `scope`:
    /// [`crate::stack::desired::Scopes`]). A desired set may hold many thousands of manifests,
    /// each read once: the rest of each body is never held (issue 30: 50,000 whole bodies were
    /// ~125 MB). The body is `null` when nothing is kept.
    pub fn slim(&mut self) {
        let mut kept = serde_json::Map::new();
        if let Some(annotations) = self
            .body
            .pointer_mut("/metadata/annotations")
            .filter(|a| a.as_object().is_some_and(|a| !a.is_empty()))
        {
            let annotations = annotations.take();
            kept.insert(
                "metadata".into(),
                Value::Object([("annotations".into(), annotations)].into_iter().collect()),
            );
        }
        if self.kind == "CustomResourceDefinition" && self.group() == "apiextensions.k8s.io" {
            if let Some(Value::Object(spec)) = self.body.get_mut("spec") {
                let spec: serde_json::Map<String, Value> = ["group", "names", "scope"]
                    .into_iter()
                    .filter_map(|field| Some((field.to_string(), spec.remove(field)?)))
                    .collect();
                kept.insert("spec".into(), Value::Object(spec));
            }
        }
        self.body = if kept.is_empty() {
            Value::Null
        } else {
            Value::Object(kept)
        };
    }
}

/// The group of an `apiVersion`: `apps` of `apps/v1`, empty of `v1`.
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(group, _)| group).unwrap_or("")
}

/// The folder a manifest was read from (from its `source`): the file's directory, or the whole
/// input for stdin and `kubectl kustomize` output. Objects of one folder are one application to
/// Argo CD (a directory source) and, offline, one stack to inference.
pub fn folder_of(source: &str) -> String {
    let input = source.split(" (document ").next().unwrap_or(source);
    let path = Path::new(input);
    match path.parent() {
        Some(parent) if path.is_file() => parent.display().to_string(),
        _ => input.to_string(),
    }
}

/// `FILE:LINE` of the first line holding `needle` in the document a manifest's `source` names
/// (`FILE (document N)`); the source itself when the file cannot be read again (stdin) or the
/// text is not found.
pub fn locate(source: &str, needle: &str) -> String {
    let (file, rest) = source.split_once(" (document ").unwrap_or((source, ""));
    let document: usize = rest.split(')').next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let Ok(text) = std::fs::read_to_string(file) else {
        return source.to_string();
    };
    let mut current = 1;
    let mut content_seen = false;
    for (number, line) in text.lines().enumerate() {
        if line.starts_with("---") {
            // A separator before any content does not start a second document.
            if content_seen {
                current += 1;
            }
            content_seen = true;
            continue;
        }
        if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            content_seen = true;
        }
        if current == document && line.contains(needle) {
            return format!("{file}:{}", number + 1);
        }
    }
    source.to_string()
}

/// What the manifests are read for, which decides what a file that holds no object means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// A picture of a repository (`graph -f`): files that hold no Kubernetes object (CI
    /// workflows, `Chart.yaml`, kustomize configuration) are skipped with a warning, as
    /// `kubectl apply -R` users expect.
    View,
    /// A desired set (`orphans`, `prune`): complete or refused. Whatever is not in it may be
    /// deleted, so a file that cannot be read as objects refuses the whole set, and a directory
    /// holding a kustomization is rendered as Flux renders it (see [`load_paths`]).
    Desired,
}

/// The names kustomize recognises as a kustomization file (kubernetes-sigs/kustomize
/// `api/konfig/general.go`, `RecognizedKustomizationFileNames`).
pub const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Reads manifests from files, directories (recursively: `.yaml`, `.yml`, `.json`; regular files
/// only, so a FIFO never blocks the read) and `-` (stdin). A document that does not parse stops
/// everything, naming the file and line.
///
/// For a desired set, a directory is read as kustomize-controller builds a path (fluxcd/pkg
/// `kustomize/kustomize_generator.go`, `generateKustomization`): a directory holding a
/// kustomization file is built with kustomize and not descended into; any other file is read as
/// objects or refuses the set (exit 2, the file named).
pub fn load_paths(paths: &[PathBuf], reading: Reading) -> Result<Vec<Manifest>, UserError> {
    let mut manifests = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|err| UserError::failed(format!("cannot read manifests from stdin: {err}")))?;
            manifests.extend(read_text(&text, "<stdin>", None, reading)?);
            continue;
        }
        for entry in manifest_entries(path, reading)? {
            match entry {
                Entry::Kustomization(dir) => manifests.extend(load_kustomize(&dir)?),
                Entry::File(file) => {
                    let text = read_bounded(&file)?;
                    let source = file.display().to_string();
                    manifests.extend(read_text(&text, &source, Some(&file), reading)?);
                }
            }
        }
    }
    Ok(manifests)
}

/// The objects of one text: for a view, a file of no objects is skipped with a warning; for a
/// desired set it is refused.
fn read_text(text: &str, source: &str, file: Option<&Path>, reading: Reading) -> Result<Vec<Manifest>, UserError> {
    if reading == Reading::View {
        let documents: Vec<Value> = parse_documents(text, source)?;
        let shapes: Vec<Shape> = documents.iter().map(Shape::of).collect();
        if let Some(why) = not_kubernetes_objects(file, &shapes) {
            tracing::warn!("skipped {source}: {why}");
            return Ok(Vec::new());
        }
        return unwrap_documents(documents, source);
    }
    // A desired set: each document is reduced to what a rule reads as soon as it is parsed.
    let slimmed: Slimmed = parse_documents(text, source)?;
    if let Some(why) = not_kubernetes_objects(file, &slimmed.shapes) {
        return Err(UserError::usage(format!(
            "{source}: {why}; a desired set is read whole or not at all"
        ))
        .hint(
            "whatever is missing from the desired set may be deleted: point -f at the manifests only, or render a kustomization with -k DIR",
        ));
    }
    if let Some(refused) = slimmed.refused {
        return Err(refused.placed_in(source).into());
    }
    let mut manifests = slimmed.manifests;
    for manifest in &mut manifests {
        manifest.source.insert_str(0, source);
    }
    Ok(manifests)
}

/// The documents of a desired set's text as they are parsed ([`parse_documents`]), each reduced
/// at once to its manifests, slimmed ([`Manifest::slim`]), and what [`not_kubernetes_objects`]
/// reads of it: a stream of many objects is never held whole. Sources are relative (` (document
/// N)`): the caller puts the text's name before them.
#[derive(Default)]
struct Slimmed {
    shapes: Vec<Shape>,
    manifests: Vec<Manifest>,
    /// The first document that is not an object, if any.
    refused: Option<NotAnObject>,
}

impl Extend<Value> for Slimmed {
    fn extend<I: IntoIterator<Item = Value>>(&mut self, documents: I) {
        for document in documents {
            self.shapes.push(Shape::of(&document));
            if self.refused.is_some() {
                continue;
            }
            let first = self.manifests.len();
            let at = format!(" (document {})", self.shapes.len());
            match unwrap_document(document, &at, &mut self.manifests) {
                Ok(()) => self.manifests[first..].iter_mut().for_each(Manifest::slim),
                Err(refused) => self.refused = Some(refused),
            }
        }
    }
}

/// The most a manifest file may hold (a generated repository's largest files are a few MB).
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// A file's text, bounded in size (a file named on the command line may be a pipe, as in
/// `-f <(...)`; a directory's walk offers only regular files).
fn read_bounded(file: &Path) -> Result<String, UserError> {
    let cannot = |err: std::io::Error| UserError::usage(format!("cannot read {}: {err}", file.display()));
    let opened = std::fs::File::open(file).map_err(cannot)?;
    let mut text = String::new();
    opened
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(cannot)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(UserError::usage(format!(
            "{}: larger than {} MiB",
            file.display(),
            MAX_FILE_BYTES / 1024 / 1024
        )));
    }
    Ok(text)
}

/// Renders a kustomization with `kubectl kustomize DIR` and reads the result.
pub fn load_kustomize(dir: &Path) -> Result<Vec<Manifest>, UserError> {
    let output = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|err| {
            UserError::failed(format!("cannot run `kubectl kustomize`: {err}")).hint("kubectl must be on PATH for -k")
        })?;
    if !output.status.success() {
        return Err(UserError::usage(format!(
            "kubectl kustomize {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    parse_text(
        &String::from_utf8_lossy(&output.stdout),
        &format!("kustomize {}", dir.display()),
    )
}

/// What of a desired set's paths a tool may build otherwise than they are read here (see
/// [`crate::stack::inventory::refuse_renamed`]): where kustomizations were built, and Argo CD's
/// parameter files. Found by walking the paths as [`load_paths`] does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildFacts {
    /// Kustomizations built at a path given (`-f DIR` holding one, or `-k DIR`).
    pub root_kustomizations: Vec<PathBuf>,
    /// Kustomizations built below a path given: kustomize-controller builds them as well, but an
    /// Argo CD Directory source reads their files as they are (argo-cd
    /// `reposerver/repository/repository.go` `findManifests`: a kustomization file that is no
    /// object is ignored).
    pub nested_kustomizations: Vec<PathBuf>,
    /// Argo CD's parameter files (`.argocd-source.yaml`, `.argocd-source-<app>.yaml`), which its
    /// repo-server merges into the Application's source before it builds
    /// (`mergeSourceParameters`).
    pub argocd_source_files: Vec<PathBuf>,
}

impl BuildFacts {
    /// The facts of `-f` paths (`filenames`) and `-k` directories (`kustomize`). A path that
    /// cannot be read adds nothing (reading it refuses the set first).
    pub fn of(filenames: &[PathBuf], kustomize: &[PathBuf]) -> Self {
        let mut facts = Self {
            root_kustomizations: kustomize.to_vec(),
            ..Self::default()
        };
        for root in filenames.iter().filter(|path| path.is_dir()) {
            let mut pending = vec![root.clone()];
            while let Some(dir) = pending.pop() {
                let Ok(listing) = std::fs::read_dir(&dir) else { continue };
                let mut children = Vec::new();
                for entry in listing.flatten() {
                    let name = entry.file_name().to_string_lossy().to_string();
                    if is_argocd_source_file(&name) {
                        facts.argocd_source_files.push(entry.path());
                    }
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        children.push(entry.path());
                    }
                }
                match (kustomization_in(&dir).is_some(), &dir == root) {
                    (true, true) => facts.root_kustomizations.push(dir),
                    (true, false) => facts.nested_kustomizations.push(dir),
                    (false, _) => pending.extend(children),
                }
            }
        }
        facts.argocd_source_files.sort();
        facts.nested_kustomizations.sort();
        facts
    }
}

/// Whether a file name is one of Argo CD's parameter files (`.argocd-source.yaml`, or
/// `.argocd-source-<app>.yaml`).
fn is_argocd_source_file(name: &str) -> bool {
    name == ".argocd-source.yaml" || (name.starts_with(".argocd-source-") && name.ends_with(".yaml"))
}

/// What one `-f` path holds: manifest files, and (for a desired set) kustomizations to build.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    File(PathBuf),
    Kustomization(PathBuf),
}

/// The kustomization file a directory holds, if any.
fn kustomization_in(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|file| file.is_file())
}

fn manifest_entries(path: &Path, reading: Reading) -> Result<Vec<Entry>, UserError> {
    let metadata =
        std::fs::metadata(path).map_err(|err| UserError::usage(format!("cannot read {}: {err}", path.display())))?;
    if !metadata.is_dir() {
        let is_kustomization = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| KUSTOMIZATION_FILES.contains(&n));
        if reading == Reading::Desired && is_kustomization {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            return Err(UserError::usage(format!(
                "{}: a kustomization, not objects: its objects are what kustomize builds from it",
                path.display()
            ))
            .hint(format!("render it with -k {}", dir.display())));
        }
        return Ok(vec![Entry::File(path.to_path_buf())]);
    }
    let mut entries = Vec::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if reading == Reading::Desired && kustomization_in(&dir).is_some() {
            tracing::info!("{}: built with kustomize, as Flux builds it", dir.display());
            entries.push(Entry::Kustomization(dir));
            continue;
        }
        let listing =
            std::fs::read_dir(&dir).map_err(|err| UserError::usage(format!("cannot read {}: {err}", dir.display())))?;
        for entry in listing {
            let entry = entry.map_err(|err| UserError::usage(format!("cannot read {}: {err}", dir.display())))?;
            let child = entry.path();
            // As kubectl's -R (filepath.Walk): a symlinked directory is not followed (a loop
            // would never end); a symlinked file is read. Only regular files are read (a FIFO
            // or a device named `*.yaml` would block or never end).
            let file_type = entry.file_type().ok();
            if file_type.is_some_and(|t| t.is_dir()) {
                pending.push(child);
            } else if reading == Reading::Desired && is_rendered_source(&child) {
                return Err(rendered_source_refused(&child));
            } else if is_manifest_file(&child) && std::fs::metadata(&child).is_ok_and(|m| m.is_file()) {
                entries.push(Entry::File(child));
            }
        }
    }
    entries.sort_by(|a, b| entry_path(a).cmp(entry_path(b)));
    Ok(entries)
}

fn entry_path(entry: &Entry) -> &Path {
    match entry {
        Entry::File(path) | Entry::Kustomization(path) => path,
    }
}

/// A file Argo CD renders into objects when it reads a directory source: Jsonnet
/// (argoproj/argo-cd `reposerver/repository/repository.go` `findManifests`: every `*.jsonnet`
/// file is evaluated, with or without `spec.source.directory.jsonnet`).
fn is_rendered_source(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()) == Some("jsonnet")
}

/// A desired set holding a file its tool renders into objects is not read without them: what
/// the file makes would otherwise be called an orphan.
fn rendered_source_refused(path: &Path) -> UserError {
    UserError::usage(format!(
        "{}: a Jsonnet file, which Argo CD renders into objects; a desired set is read whole or not at all",
        path.display()
    ))
    .hint("render it (`jsonnet FILE`) and pass the output with -f, or give only the paths that hold plain manifests")
}

fn is_manifest_file(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Why a file holds no Kubernetes object: kustomize configuration (`kustomize.config.k8s.io`,
/// or a `kustomization.yaml` with neither `apiVersion` nor `kind`), Helm's `Chart.yaml`, a
/// file whose top level is a sequence (a YAML list or a JSON array: `kubectl apply` refuses
/// it), and files none of whose documents has an `apiVersion` or a `kind` (CI workflows, tool
/// settings). A file with one document that looks like an object is read, and refused if
/// broken.
fn not_kubernetes_objects(file: Option<&Path>, documents: &[Shape]) -> Option<&'static str> {
    let name = file.and_then(|f| f.file_name()).and_then(|n| n.to_str()).unwrap_or("");
    if matches!(name, "Chart.yaml" | "Chart.lock") && !documents.iter().any(|d| d.kind) {
        return Some("Helm chart metadata, not a Kubernetes object");
    }
    if !documents.is_empty() && documents.iter().all(|d| d.kustomize_config) {
        return Some("a kustomize configuration, not a Kubernetes object (use -k to render it)");
    }
    if documents.iter().any(|d| d.sequence) {
        return Some("a sequence (a YAML list or a JSON array), not Kubernetes objects");
    }
    let looks_like_object = |d: &Shape| d.api_version || d.kind;
    let has_content = documents.iter().any(|d| !d.null);
    if has_content && !documents.iter().any(looks_like_object) {
        return Some("no document has an apiVersion or a kind: not Kubernetes objects");
    }
    None
}

/// What [`not_kubernetes_objects`] reads of one parsed document.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// It has a `kind`.
    kind: bool,
    /// It has an `apiVersion`.
    api_version: bool,
    /// Its `apiVersion` is of `kustomize.config.k8s.io`.
    kustomize_config: bool,
    /// It is a sequence.
    sequence: bool,
    /// It is null.
    null: bool,
}

impl Shape {
    fn of(document: &Value) -> Self {
        Self {
            kind: document.get("kind").is_some(),
            api_version: document.get("apiVersion").is_some(),
            kustomize_config: document
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| group_of(v) == "kustomize.config.k8s.io"),
            sequence: document.is_array(),
            null: document.is_null(),
        }
    }
}

/// Parses one text of YAML documents (JSON is YAML too) into manifests; `source` names it in errors.
pub fn parse_text(text: &str, source: &str) -> Result<Vec<Manifest>, UserError> {
    unwrap_documents(parse_documents::<Vec<Value>>(text, source)?, source)
}

/// One YAML document of a text: the annotations of its own head (a `List`'s own, not its
/// items') and its manifests (a `List`'s items).
pub struct Document {
    /// `metadata.annotations` of the document itself.
    pub head_annotations: serde_json::Map<String, Value>,
    /// Its objects.
    pub manifests: Vec<Manifest>,
}

/// Parses one text of YAML documents into its documents, each with its head's annotations:
/// Helm reads a document's keep policy from its head (helm/helm `pkg/releaseutil/manifest.go`
/// `SplitManifests` and `SimpleHead`), so a `List` marked `helm.sh/resource-policy: keep` keeps
/// every item.
pub fn parse_text_by_document(text: &str, source: &str) -> Result<Vec<Document>, UserError> {
    let mut documents = Vec::new();
    for (index, document) in parse_documents::<Vec<Value>>(text, source)?.into_iter().enumerate() {
        let head_annotations = document
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut manifests = Vec::new();
        unwrap_document(document, &format!("{source} (document {})", index + 1), &mut manifests)?;
        documents.push(Document {
            head_annotations,
            manifests,
        });
    }
    Ok(documents)
}

/// The documents of a text, parsed but not yet checked as objects, each handed to `C` as it is
/// parsed (a `Vec<Value>` holds them whole; [`Slimmed`] reduces each at once).
fn parse_documents<C: Default + Extend<Value>>(text: &str, source: &str) -> Result<C, UserError> {
    let documents: C = if text.trim_start().starts_with(['{', '[']) {
        let mut documents = C::default();
        let document = serde_json::from_str::<Value>(text).map_err(|err| {
            UserError::usage(format!(
                "{source}:{}:{}: invalid JSON: {}",
                err.line(),
                err.column(),
                crate::error::without_content(&err.to_string())
            ))
        })?;
        documents.extend([document]);
        documents
    } else {
        serde_saphyr::from_str_multiple_with_options::<Value, C>(text, yaml_options()).map_err(|err| {
            let at = err
                .location()
                .map(|l| format!(":{}:{}", l.line(), l.column()))
                .unwrap_or_default();
            UserError::usage(format!(
                "{source}{at}: invalid YAML: {}",
                crate::error::without_content(&err.to_string())
            ))
        })?
    };
    Ok(documents)
}

/// How many YAML documents one input may hold. serde-saphyr's default budget stops at 1,024
/// documents ("doc separator storms"), which a rendered chart or a generated repository passes;
/// a million keeps a bound against a hostile stream of `---` separators.
const MAX_DOCUMENTS: usize = 1_000_000;

/// How many nodes (mappings, sequences, scalars) one input may hold in all: 250,000 by default,
/// about 4,000 Deployments; 5,000,000 allows the documents above a few nodes each while holding
/// the parsed values to a bounded size.
const MAX_NODES: usize = 5_000_000;

/// How many parser events one input may produce in all (1,000,000 by default): a few per node.
const MAX_EVENTS: usize = 20_000_000;

/// serde-saphyr's options for manifests: its default budget (nesting depth, aliases and anchors,
/// scalar bytes, merge keys: what guards against hostile YAML), with the whole-input counts
/// raised to what a large repository needs.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_documents: MAX_DOCUMENTS,
            max_nodes: MAX_NODES,
            max_events: MAX_EVENTS,
        },
    }
}

/// A document with a top-level `items` that is no `List` of objects: kubectl and Helm read any
/// document with `items` as a list of its items (apimachinery's `unstructuredJSONScheme`
/// decodes it to an `UnstructuredList`), kustomize (Flux) as one object of its kind
/// (membership review 12, F1). Which objects it describes depends on the tool, so a set that
/// holds it is refused rather than read one way and pruned the other.
fn items_of_no_list(source: &str, kind: &str) -> UserError {
    let what = match kind.ends_with("List") {
        true => "its `items` is not a list of objects, which no tool applies".to_string(),
        false => format!(
            "a {kind} with a top-level `items`: kubectl and Helm apply its items as a list, kustomize (Flux) applies one {kind}"
        ),
    };
    UserError::usage(format!("{source}: {what}; the objects it describes depend on the tool"))
        .hint("write each object as its own document (or in a kind: List), then run again")
}

/// The manifests of parsed documents (`List`s unwrapped); a document that is not an object is
/// an error naming it.
fn unwrap_documents(documents: Vec<Value>, source: &str) -> Result<Vec<Manifest>, UserError> {
    let mut manifests = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        unwrap_document(document, &format!("{source} (document {})", index + 1), &mut manifests)?;
    }
    Ok(manifests)
}

/// A document that is no object (or no objects), by where it is written.
#[derive(Debug)]
enum NotAnObject {
    /// It lacks its apiVersion, kind or metadata.name.
    Fields(String),
    /// It has a top-level `items` and is no `List` of objects ([`items_of_no_list`]).
    Items {
        /// Where it is written.
        source: String,
        /// Its kind.
        kind: String,
    },
}

impl NotAnObject {
    /// The same, its place written after `text` (a text's name before a document's number).
    fn placed_in(self, text: &str) -> Self {
        match self {
            Self::Fields(at) => Self::Fields(format!("{text}{at}")),
            Self::Items { source, kind } => Self::Items {
                source: format!("{text}{source}"),
                kind,
            },
        }
    }
}

impl From<NotAnObject> for UserError {
    fn from(refused: NotAnObject) -> Self {
        match refused {
            NotAnObject::Fields(source) => UserError::usage(format!(
                "{source}: not a Kubernetes object (apiVersion, kind and metadata.name are required)"
            )),
            NotAnObject::Items { source, kind } => items_of_no_list(&source, &kind),
        }
    }
}

fn unwrap_document(document: Value, source: &str, out: &mut Vec<Manifest>) -> Result<(), NotAnObject> {
    if document.is_null() {
        return Ok(());
    }
    let field = |name: &str| document.get(name).and_then(Value::as_str).unwrap_or("").to_string();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if let Some(items) = document.get("items") {
        let Some(items) = items.as_array().filter(|_| kind.ends_with("List")) else {
            return Err(NotAnObject::Items {
                source: source.to_string(),
                kind,
            });
        };
        for (index, item) in items.iter().enumerate() {
            unwrap_document(item.clone(), &format!("{source} item {}", index + 1), out)?;
        }
        return Ok(());
    }
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if api_version.is_empty() || kind.is_empty() || name.is_empty() {
        return Err(NotAnObject::Fields(source.to_string()));
    }
    let namespace = document
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    out.push(Manifest {
        api_version,
        kind,
        name,
        namespace,
        source: source.to_string(),
        body: document,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists_are_unwrapped() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: b, namespace: web}\n";
        let manifests = parse_text(text, "x.yaml").unwrap();
        assert_eq!(manifests.len(), 2);
        assert_eq!(manifests[0].namespace, None);
        assert_eq!(manifests[1].group(), "apps");
        assert_eq!(manifests[1].namespace.as_deref(), Some("web"));
    }

    /// Membership review 12, F1: kubectl and Helm read any document with a top-level `items` as
    /// a list of its items, kustomize as one object: such a document is refused, whatever its
    /// kind, as is a `List` whose `items` is no list.
    #[test]
    fn a_document_with_items_that_is_no_list_is_refused() {
        let bundle = "apiVersion: stack-test.example.com/v1\nkind: Widget\nmetadata: {name: bundle}\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: inner}}\n";
        let refused = parse_text(bundle, "all.yaml").err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("all.yaml (document 1)") && e.contains("top-level `items`")),
            "{refused:?}"
        );
        for text in [
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nitems: null\n",
            "apiVersion: v1\nkind: ConfigMapList\nitems: {a: b}\n",
        ] {
            assert!(parse_text(text, "x.yaml").is_err(), "{text}");
        }
        let list = "apiVersion: v1\nkind: ConfigMapList\nitems: []\n";
        assert!(parse_text(list, "x.yaml").is_ok_and(|m| m.is_empty()));
    }

    #[test]
    fn json_documents_parse() {
        let text = r#"{"apiVersion":"v1","kind":"ConfigMapList","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]}"#;
        let manifests = parse_text(text, "x.json").unwrap();
        assert_eq!(manifests.len(), 1);
        assert_eq!(manifests[0].kind, "ConfigMap");
    }

    fn config_maps(count: usize) -> String {
        (0..count)
            .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: web\ndata:\n  key: value-{i}\n"))
            .collect::<Vec<_>>()
            .join("---\n")
    }

    #[test]
    fn a_file_of_5000_documents_is_read_whole() {
        // Read as `-f big.yaml` reads it.
        let dir = std::env::temp_dir().join(format!("manifest-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("big.yaml");
        std::fs::write(&file, config_maps(5_000)).unwrap();
        let loaded = load_paths(std::slice::from_ref(&file), Reading::Desired);
        let _ = std::fs::remove_dir_all(&dir);
        let manifests = loaded.unwrap();
        assert_eq!(manifests.len(), 5_000);
        assert_eq!(manifests[4_999].name, "cm-4999");
        assert_eq!(manifests[4_999].source, format!("{} (document 5000)", file.display()));
    }

    /// A desired set's manifests hold of their bodies only what its rules read: identity, every
    /// annotation, a CRD's group, names and scope; each read the same as from the whole body.
    #[test]
    fn a_desired_set_keeps_of_each_body_what_its_rules_read() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: web\n  labels: {a: b}\ndata: {k: v}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  annotations:\n    config.kubernetes.io/depends-on: /namespaces/web/ConfigMap/plain\n    config.kubernetes.io/apply-time-mutation: '[]'\n    example.com/other: x\nspec: {replicas: 2}\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: apiextensions.k8s.io/v1\n  kind: CustomResourceDefinition\n  metadata: {name: widgets.example.com}\n  spec: {group: example.com, scope: Cluster, names: {kind: Widget, plural: widgets}, versions: [{name: v1, served: true, storage: true}]}\n- apiVersion: other.io/v1\n  kind: CustomResourceDefinition\n  metadata: {name: not-a-crd}\n  spec: {group: g}\n";
        let dir = std::env::temp_dir().join(format!("manifest-slim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("set.yaml");
        std::fs::write(&file, text).unwrap();
        let desired = load_paths(std::slice::from_ref(&file), Reading::Desired);
        let whole = load_paths(std::slice::from_ref(&file), Reading::View);
        let _ = std::fs::remove_dir_all(&dir);
        let (desired, whole) = (desired.unwrap(), whole.unwrap());
        assert_eq!(desired.len(), 4);
        for (slim, full) in desired.iter().zip(&whole) {
            assert_eq!(
                (&slim.api_version, &slim.kind, &slim.name, &slim.namespace, &slim.source),
                (&full.api_version, &full.kind, &full.name, &full.namespace, &full.source)
            );
            for pointer in ["/spec/group", "/spec/names/kind", "/spec/names/plural", "/spec/scope"] {
                let crd = slim.kind == "CustomResourceDefinition" && slim.group() == "apiextensions.k8s.io";
                let expected = if crd { full.str_at(pointer) } else { None };
                assert_eq!(slim.str_at(pointer), expected, "{} {pointer}", slim.name);
            }
            for key in [
                "config.kubernetes.io/depends-on",
                "config.kubernetes.io/apply-time-mutation",
                "example.com/other",
            ] {
                assert_eq!(slim.annotation(key), full.annotation(key), "{} {key}", slim.name);
            }
        }
        assert_eq!(
            desired[0].body,
            Value::Null,
            "nothing of a plain ConfigMap's body is kept"
        );
        assert_eq!(desired[1].body.pointer("/spec/replicas"), None);
        assert_eq!(desired[2].body.pointer("/spec/versions"), None);
        // Slimming twice (kustomize's output is slimmed after it is read) changes nothing.
        let mut again = desired.clone();
        again.iter_mut().for_each(Manifest::slim);
        assert_eq!(again, desired);
    }

    /// A fresh directory of files (relative path, text).
    fn repository(files: &[(&str, &str)]) -> PathBuf {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let root = std::env::temp_dir().join(format!("manifest-repo-{}-{n}", std::process::id()));
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    const OBJECT: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\n";

    #[test]
    fn a_desired_set_refuses_every_file_that_holds_no_objects() {
        for (name, text, why) in [
            (
                "list.yaml",
                "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n",
                "a sequence",
            ),
            (
                "array.json",
                "[{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}]",
                "a sequence",
            ),
            (
                "ci.yml",
                "name: ci\non: [push]\n",
                "no document has an apiVersion or a kind",
            ),
            (
                "Chart.yaml",
                "apiVersion: v2\nname: web\nversion: 0.1.0\n",
                "Helm chart metadata",
            ),
            (
                "flux.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Component\n",
                "a kustomize configuration",
            ),
            // Argo CD renders a directory source's Jsonnet (its objects are desired).
            (
                "app.jsonnet",
                "{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'made'}}",
                "a Jsonnet file",
            ),
        ] {
            let root = repository(&[("apps/web.yaml", OBJECT), (&format!("apps/{name}"), text)]);
            let err = load_paths(&[root.join("apps")], Reading::Desired).unwrap_err();
            assert_eq!(err.code, crate::error::exit::USAGE, "{name}: {}", err.message);
            assert!(
                err.message.contains(name) && err.message.contains(why),
                "{name}: {}",
                err.message
            );
            // A view of the same repository skips the file and reads the rest.
            let viewed = load_paths(&[root.join("apps")], Reading::View).unwrap();
            assert_eq!(viewed.len(), 1, "{name}");
            let _ = std::fs::remove_dir_all(&root);
        }
    }

    /// Membership review 22, F1/F2: the facts a tool that reads a path otherwise needs — where
    /// kustomizations were built (at a path given, or below one) and Argo CD's parameter files.
    #[test]
    fn build_facts_tell_root_and_nested_kustomizations_and_argo_parameter_files() {
        let root = repository(&[
            ("app/kustomization.yaml", "resources: [web.yaml]\n"),
            ("app/web.yaml", OBJECT),
            ("app/.argocd-source-web.yaml", "kustomize: {namePrefix: p-}\n"),
            ("plain/web.yaml", OBJECT),
            ("plain/sub/kustomization.yaml", "resources: [web.yaml]\n"),
            ("plain/sub/web.yaml", OBJECT),
            ("plain/.argocd-source.yaml", "{}\n"),
            ("plain/.argocd-source.yml", "{}\n"),
        ]);
        let facts = BuildFacts::of(&[root.join("app"), root.join("plain")], &[root.join("k")]);
        assert_eq!(facts.root_kustomizations, [root.join("k"), root.join("app")]);
        assert_eq!(facts.nested_kustomizations, [root.join("plain/sub")]);
        assert_eq!(
            facts.argocd_source_files,
            [
                root.join("app/.argocd-source-web.yaml"),
                root.join("plain/.argocd-source.yaml")
            ]
        );
        use crate::stack::inventory::PathReading;
        let argo = |types: Option<&[&str]>, facts: &BuildFacts| {
            PathReading::ArgoCd {
                built_as: types.map(|types| types.iter().map(|t| t.to_string()).collect()),
            }
            .builds_otherwise(facts)
        };
        assert!(argo(Some(&["Kustomize"]), &facts).is_some_and(|why| why.contains(".argocd-source-web.yaml")));
        let only_root = BuildFacts {
            root_kustomizations: vec![root.join("app")],
            ..BuildFacts::default()
        };
        let plain = BuildFacts::default();
        // Membership review 23: as what Argo CD built the Application decides, as its status says.
        assert_eq!(argo(Some(&["Kustomize"]), &only_root), None);
        assert_eq!(argo(Some(&["Directory"]), &plain), None);
        assert!(argo(Some(&["Directory"]), &only_root).is_some_and(|why| why.contains("Directory")));
        assert!(argo(Some(&["Kustomize"]), &plain).is_some_and(|why| why.contains("kustomize")));
        assert!(argo(Some(&["Plugin"]), &plain).is_some_and(|why| why.contains("Plugin")));
        assert!(argo(Some(&["Directory", "Kustomize"]), &only_root).is_some());
        assert!(argo(None, &plain).is_some_and(|why| why.contains("status.sourceType")));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_kustomization_named_as_a_file_is_refused_with_the_k_flag() {
        let root = repository(&[
            ("apps/kustomization.yaml", "resources: [web.yaml]\n"),
            ("apps/web.yaml", OBJECT),
        ]);
        let err = load_paths(&[root.join("apps/kustomization.yaml")], Reading::Desired).unwrap_err();
        assert_eq!(err.code, crate::error::exit::USAGE);
        assert!(err.message.contains("kustomization.yaml"), "{}", err.message);
        assert!(err.hint.as_deref().unwrap_or("").contains("-k "), "{:?}", err.hint);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_directory_with_a_kustomization_is_built_and_not_read_file_by_file() {
        let root = repository(&[
            ("apps/web/kustomization.yaml", "resources: [web.yaml]\n"),
            ("apps/web/web.yaml", OBJECT),
            ("apps/web/patch-only.yaml", "- op: add\n  path: /x\n"),
            ("apps/db.yaml", OBJECT),
        ]);
        let entries = manifest_entries(&root.join("apps"), Reading::Desired).unwrap();
        assert_eq!(
            entries,
            vec![
                Entry::File(root.join("apps/db.yaml")),
                Entry::Kustomization(root.join("apps/web")),
            ]
        );
        let as_root = manifest_entries(&root.join("apps/web"), Reading::Desired).unwrap();
        assert_eq!(as_root, vec![Entry::Kustomization(root.join("apps/web"))]);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_in_a_directory_is_never_opened() {
        let root = repository(&[("apps/web.yaml", OBJECT)]);
        let fifo = root.join("apps/pipe.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let loaded = load_paths(&[root.join("apps")], Reading::Desired).unwrap();
        assert_eq!(loaded.len(), 1);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn hostile_yaml_is_still_bounded() {
        // Nesting deeper than serde-saphyr's default depth (64) is refused.
        let deep = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {}{}\n",
            "[".repeat(100),
            "]".repeat(100)
        );
        let err = parse_text(&deep, "deep.yaml").unwrap_err();
        assert_eq!(err.code, crate::error::exit::USAGE);
        assert!(err.message.contains("depth"), "{}", err.message);
        // Aliases and anchors keep serde-saphyr's default budget (a billion laughs is refused
        // after a million recorded events: too slow for a unit test in a debug build).
    }

    #[test]
    fn parse_errors_name_the_file_and_line() {
        let err = parse_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n",
            "bad.yaml",
        )
        .unwrap_err();
        assert_eq!(err.code, crate::error::exit::USAGE);
        assert!(err.message.starts_with("bad.yaml:"), "{}", err.message);
        let err = parse_text("kind: ConfigMap\nmetadata: {name: a}\n", "nokind.yaml").unwrap_err();
        assert!(err.message.contains("nokind.yaml (document 1)"), "{}", err.message);
    }
}
