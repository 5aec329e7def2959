//! The command line, in kubectl's conventions.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod mapping;

pub(crate) mod commands;
pub(crate) mod complete;

use crate::model::values::parse_duration;
pub use mapping::{list_options, selection};

/// Every command's help: what it does, usage, examples, then its own flags, then the connection
/// flags under their own heading (kubectl shows a command's own flags and keeps the global ones
/// apart), then exit codes.
const HELP_TEMPLATE: &str = "{about-with-newline}\n{usage-heading} {usage}\n\n{before-help}{all-args}{after-help}";

const TOP_EXAMPLES: &str = "Examples (the stacks of the repository's examples/, as scripts/demo.sh applies them):
  # what the Flux Kustomization flux-system/usage tracks, in every namespace
  kubectl stack list -A --tracker flux=usage.flux-system
  # what git no longer has, then prune it in dependency order
  kubectl stack orphans -A --tracker flux=usage.flux-system -f examples/usage-next/
  kubectl stack prune -A --tracker flux=usage.flux-system -f examples/usage-next/
  # tear down a stack and what depends on it
  kubectl stack prune -n flux-system kustomization/operator
  # why objects hang on finalizers
  kubectl stack stuck -A";

/// Ordered, safe pruning and dependency graphs for GitOps stacks.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-stack",
    bin_name = "kubectl stack",
    version,
    about = "Ordered, safe pruning and dependency graphs for GitOps stacks",
    long_about = "kubectl stack lists what a GitOps stack tracks (Flux, Argo CD, kapp, kpt, ApplySet, Helm), \
shows which tracked objects git no longer has, draws the dependency graph, and prunes in dependency \
order: dependents first, each wave fully gone before the next.",
    help_template = HELP_TEMPLATE,
    before_help = TOP_EXAMPLES,
    after_help = "Connection flags (--kubeconfig, --context, TLS, impersonation, ...) are shown under Connection in every \
command's help.\n\nExit codes: 0 ok, 1 found (orphans/stuck objects), 2 usage, 3 failed, 4 refused by a safety guard, \
5 incomplete (a wave timed out or a delete failed), 6 dependency cycle, 130 interrupted."
)]
pub struct Cli {
    /// Connection and scope flags shared by every command.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes, named as kubectl names them.
#[derive(Debug, Clone, Args, Default)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, several paths merged, else ~/.kube/config).
    #[arg(help_heading = "Connection", long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(help_heading = "Connection", long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig cluster to use.
    #[arg(help_heading = "Connection", long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The kubeconfig user to use.
    #[arg(help_heading = "Connection", long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    // `-n`, `-A` and `-v` come after a command's own flags (before `-h`, which clap orders at
    // 999); connection flags have their own heading.
    /// The namespace (default: the context's namespace).
    #[arg(display_order = 990, short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Look in every namespace.
    #[arg(display_order = 991, short = 'A', long = "all-namespaces", global = true)]
    pub all_namespaces: bool,
    /// User to impersonate.
    #[arg(help_heading = "Connection", long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate (repeatable).
    #[arg(help_heading = "Connection", long = "as-group", global = true, value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// How long one API request may wait for its answer, e.g. 30s, 1m ("0": 70s a try, past the
    /// API server's own 60s).
    #[arg(help_heading = "Connection", long = "request-timeout", global = true, value_name = "DURATION", value_parser = parse_duration, default_value = "0")]
    pub request_timeout: Duration,
    /// Log level: 0 warnings, 2 info, 4 debug, 6+ every request.
    #[arg(
        display_order = 992,
        short = 'v',
        long = "v",
        global = true,
        value_name = "LEVEL",
        default_value_t = 0
    )]
    pub verbosity: u8,
    /// Default cache directory: discovery is cached under DIR/discovery as kubectl caches it
    /// (default: $KUBECACHEDIR, else ~/.kube/cache).
    #[arg(help_heading = "Connection", long = "cache-dir", global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// How far this command's discovery may rely on the disk cache (set per command, no flag).
    #[arg(skip)]
    pub discovery_cache: crate::cluster::discovery::CacheUse,
    /// The address of the API server (overrides the kubeconfig's; works without a kubeconfig).
    #[arg(
        help_heading = "Connection",
        short = 's',
        long = "server",
        global = true,
        value_name = "URL"
    )]
    pub server: Option<String>,
    /// Bearer token for the API server (overrides the kubeconfig user's credentials).
    #[arg(
        help_heading = "Connection",
        long = "token",
        global = true,
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Certificate authority file to verify the API server with.
    #[arg(
        help_heading = "Connection",
        long = "certificate-authority",
        global = true,
        value_name = "FILE"
    )]
    pub certificate_authority: Option<PathBuf>,
    /// Client certificate file for TLS authentication.
    #[arg(
        help_heading = "Connection",
        long = "client-certificate",
        global = true,
        value_name = "FILE"
    )]
    pub client_certificate: Option<PathBuf>,
    /// Client key file for TLS authentication.
    #[arg(help_heading = "Connection", long = "client-key", global = true, value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    /// Do not verify the API server's certificate (insecure).
    #[arg(help_heading = "Connection", long = "insecure-skip-tls-verify", global = true, value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, default_value_t = false)]
    pub insecure_skip_tls_verify: bool,
    /// Server name to verify the API server's certificate against (and to send as SNI).
    #[arg(
        help_heading = "Connection",
        long = "tls-server-name",
        global = true,
        value_name = "NAME"
    )]
    pub tls_server_name: Option<String>,
    /// UID to impersonate.
    #[arg(help_heading = "Connection", long = "as-uid", global = true, value_name = "UID")]
    pub as_uid: Option<String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the objects a stack tracks.
    #[command(help_template = HELP_TEMPLATE, before_help = LIST_EXAMPLES)]
    List(ListArgs),
    /// Show the tracked objects that are no longer desired, each with the reason.
    #[command(help_template = HELP_TEMPLATE, before_help = ORPHANS_EXAMPLES, after_help = ORPHANS_AFTER)]
    Orphans(OrphansArgs),
    /// Show the dependency graph (live, or offline from manifests) and the deletion waves.
    #[command(help_template = HELP_TEMPLATE, before_help = GRAPH_EXAMPLES)]
    Graph(GraphArgs),
    /// Delete orphans, or tear down whole stacks, in dependency order: dependents first, each
    /// wave fully gone (finalizers done) before the next.
    #[command(help_template = HELP_TEMPLATE, before_help = PRUNE_EXAMPLES, after_help = PRUNE_AFTER)]
    Prune(PruneArgs),
    /// Diagnose objects stuck on finalizers: why they hang and what they belong to.
    #[command(help_template = HELP_TEMPLATE, before_help = STUCK_EXAMPLES, after_help = STUCK_AFTER)]
    Stuck(StuckArgs),
    /// Break glass: remove finalizers from objects already being deleted, with a backup.
    #[command(help_template = HELP_TEMPLATE, before_help = UNSTICK_EXAMPLES, after_help = UNSTICK_AFTER)]
    Unstick(UnstickArgs),
    /// Print a shell completion script (bash, zsh or fish) for `kubectl-stack`.
    #[command(
        help_template = HELP_TEMPLATE,
        before_help = "Examples:\n  # bash, in this shell\n  source <(kubectl stack completion bash)\n  \
# zsh: then move _kubectl-stack into a directory of $fpath\n  kubectl stack completion zsh > _kubectl-stack",
        after_help = "For `kubectl stack <TAB>`, put kubectl_complete-stack (shipped beside the binary) on PATH."
    )]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Completion answers for kubectl's plugin completion (used by kubectl_complete-stack).
    #[command(name = "__complete", hide = true)]
    Complete {
        /// The words typed after `kubectl stack`; the last is the word to complete.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

const STUCK_EXAMPLES: &str = "Examples:
  # every object being deleted, in every namespace, with a diagnosis
  kubectl stack stuck -A
  # the objects of one stack
  kubectl stack stuck -A --tracker flux=usage.flux-system
  # exactly the blockers a prune reported
  kubectl stack stuck -n shop databases.demo.kubectl-stack.dev/orders";

const STUCK_AFTER: &str = "Exit codes: 0 nothing stuck, 1 stuck objects found, 2 usage, 3 failed.";

const UNSTICK_EXAMPLES: &str = "Examples:
  # remove one finalizer from a custom resource whose operator is gone
  kubectl stack unstick -n shop database/orders --finalizer demo.kubectl-stack.dev/cleanup
  # a namespace stuck on discovery failure: clear spec.finalizers through /finalize
  kubectl stack unstick namespace/shop --finalizer kubernetes
  # check with the server first
  kubectl stack unstick -n shop database/orders --all-finalizers --dry-run=server";

const UNSTICK_AFTER: &str = "A backup of every object touched is written first (YAML, mode 0600; re-create with kubectl apply -f).
Exit codes: 0 done (or declined at the prompt), 2 usage, 3 failed, 4 refused, 5 incomplete (finalizers changed meanwhile).";

/// `kubectl stack stuck`.
#[derive(Debug, Args)]
pub struct StuckArgs {
    /// Objects to diagnose, TYPE/NAME; default: every object being deleted in scope.
    #[arg(value_name = "TYPE/NAME")]
    pub targets: Vec<String>,
    /// Only the objects of a stack.
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = StuckOutput::Text)]
    pub output: StuckOutput,
    /// Listing tuning.
    #[command(flatten)]
    pub tuning: ListTuning,
}

/// Output formats of `stuck`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StuckOutput {
    /// One block per object, with its diagnosis.
    Text,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `kubectl stack unstick`.
#[derive(Debug, Args)]
pub struct UnstickArgs {
    /// Objects, TYPE/NAME (explicit names only).
    #[arg(value_name = "TYPE/NAME", required = true)]
    pub targets: Vec<String>,
    /// A finalizer to remove (repeatable).
    #[arg(long = "finalizer", value_name = "NAME", required_unless_present = "all_finalizers")]
    pub finalizers: Vec<String>,
    /// Remove every finalizer.
    #[arg(long = "all-finalizers", conflicts_with = "finalizers")]
    pub all_finalizers: bool,
    /// Do not ask; required when not attached to a terminal.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// none: change; client: show what would change; server: send the changes with dryRun=All.
    #[arg(long = "dry-run", value_enum, default_value_t = DryRun::None, num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: DryRun,
    /// Also act on objects that are not being deleted (only as named on the command line).
    #[arg(long)]
    pub force: bool,
    /// Where to write the backups: each run makes a new directory `unstick-TIME` in it, mode 0700 (default: `./kubectl-stack-backups`).
    #[arg(long = "backup-dir", value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
}

const PRUNE_EXAMPLES: &str = "Examples:
  # tear down a Flux stack and every stack that depends on it (usage goes before operator)
  kubectl stack prune -n flux-system kustomization/operator
  # every Kustomization labelled team=shop, with its dependents
  kubectl stack prune -n flux-system kustomizations -l team=shop
  # the orphans of a stack (same flags as `orphans`), asking first
  kubectl stack prune -A --tracker flux=usage.flux-system -f examples/usage-next/
  # what the server would do, deleting nothing
  kubectl stack prune -n flux-system kustomization/operator --dry-run=server";

const PRUNE_AFTER: &str = "Exit codes: 0 done (or declined at the prompt), 2 usage, 3 failed, 4 refused (no --yes without a terminal, empty desired set),
5 incomplete (a wave timed out or a delete failed: run the same command again to continue),
6 dependency cycle, 130 interrupted.";

/// `kubectl stack prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Stacks to tear down with everything that depends on them: TYPE/NAME (e.g.
    /// kustomization/usage), or TYPE with -l. Without targets, the orphans are pruned.
    #[arg(value_name = "TYPE[/NAME]")]
    pub targets: Vec<String>,
    /// Which objects the stack tracks (orphans), or which TYPE objects to tear down (targets).
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// What is desired (orphans).
    #[command(flatten)]
    pub desired: DesiredArgs,
    /// Do not ask; required when not attached to a terminal.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// none: delete; client: print the plan only; server: send every delete with dryRun=All.
    #[arg(long = "dry-run", value_enum, default_value_t = DryRun::None, num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: DryRun,
    /// How dependents of each deleted object are garbage-collected.
    #[arg(long, value_enum, default_value_t)]
    pub cascade: CascadeArg,
    /// How long one wave may take to be gone ("0": do not wait; each wave is checked once, right
    /// after its deletes, and what is still there stops the run).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5m")]
    pub timeout: Duration,
    /// Go on although some kinds could not be listed (their objects are neither deleted nor
    /// waited for, and may still need what later waves delete).
    #[arg(long = "skip-unlisted")]
    pub skip_unlisted: bool,
    /// Deletes in flight at once.
    #[arg(long = "delete-concurrency", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=512))]
    pub delete_concurrency: u16,
    /// Output: a table and a summary, or JSON lines (the plan, one line per event, the summary).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PruneOutput::Table)]
    pub output: PruneOutput,
    /// Show every row of the plan table (past 40 rows it shows the first 5 of each wave).
    #[arg(long = "all-rows")]
    pub all_rows: bool,
    /// Order by declared and implicit edges only: infer none from finalizers, webhooks,
    /// APIServices or volumes.
    #[arg(long = "no-infer")]
    pub no_infer: bool,
    /// Listing tuning.
    #[command(flatten)]
    pub tuning: ListTuning,
    /// Delete planned Namespaces and CRDs although their deletion also takes objects the plan
    /// does not delete (the cascade victims the plan names).
    #[arg(long = "allow-cascade", conflicts_with = "keep_cascading")]
    pub allow_cascade: bool,
    /// Keep the planned Namespaces and CRDs whose deletion would take objects the plan does not
    /// delete, and prune the rest.
    #[arg(long = "keep-cascading")]
    pub keep_cascading: bool,
    /// With a named stack that is already gone, delete the objects that still carry its mark.
    /// Without it they are kept: the run that deleted the stack kept them on purpose (a keep
    /// marker, `spec.prune: false`, a record without them), or it was deleted outside
    /// kubectl-stack.
    #[arg(long = "leftovers")]
    pub leftovers: bool,
    /// Suspend the live parents (Flux Kustomizations, up their chain) that would re-create what
    /// the teardown deletes, before deleting; they stay suspended (the resume command is printed).
    #[arg(long = "suspend-parents")]
    pub suspend_parents: bool,
    /// Write the plan (context, server, every object with UID, wave and reason, cascade victims,
    /// parents) to FILE as JSON, for review and for `--plan`.
    #[arg(long = "plan-out", value_name = "FILE")]
    pub plan_out: Option<PathBuf>,
    /// Execute exactly the plan saved with --plan-out; refused when the cluster moved since.
    #[arg(long = "plan", value_name = "FILE", conflicts_with = "plan_out")]
    pub plan: Option<PathBuf>,
}

/// `--cascade`: how dependents of each deleted object are garbage-collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum CascadeArg {
    /// Dependents are deleted in the background (default).
    #[default]
    Background,
    /// The object waits until its dependents are deleted.
    Foreground,
    /// Dependents are left alone.
    Orphan,
}

impl From<CascadeArg> for crate::prune::execute::Cascade {
    fn from(arg: CascadeArg) -> Self {
        match arg {
            CascadeArg::Background => Self::Background,
            CascadeArg::Foreground => Self::Foreground,
            CascadeArg::Orphan => Self::Orphan,
        }
    }
}

/// `--dry-run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Really delete.
    None,
    /// Print the plan; send nothing.
    Client,
    /// Send every delete with dryRun=All; the server checks and persists nothing.
    Server,
}

/// Output formats of `prune`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PruneOutput {
    /// The plan as a table, progress on stderr, a summary.
    Table,
    /// JSON lines: the plan, each event, the summary.
    Json,
    /// Like table, with more columns (each kind's group, UID, finalizers, tracked by) and the
    /// reasons in full.
    Wide,
}

const GRAPH_EXAMPLES: &str = "Examples:
  # the Flux Kustomizations and HelmReleases of the cluster and what they depend on
  kubectl stack graph -A
  # with the objects each one tracks
  kubectl stack graph -A --members
  # offline, in a repository's CI: fails (exit 6) on a dependency cycle (pipe to dot -Tsvg)
  kubectl stack graph -f examples/flux/ -o dot
  # the deletion waves prune would use
  kubectl stack graph -A --tracker flux --members --order delete";

/// `kubectl stack graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Objects to include besides the Flux Kustomizations and HelmReleases (live only).
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Offline: the manifests (`-f`/`-k`); no cluster is contacted.
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// Hang the objects each Kustomization, HelmRelease or inventory tracks under it.
    #[arg(long)]
    pub members: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = GraphOutput::Tree)]
    pub output: GraphOutput,
    /// Print the waves in this order instead of the graph.
    #[arg(long, value_enum)]
    pub order: Option<Order>,
    /// Use only declared and implicit edges: infer none from finalizers, webhooks, APIServices
    /// or volumes.
    #[arg(long = "no-infer")]
    pub no_infer: bool,
    /// Listing tuning.
    #[command(flatten)]
    pub tuning: ListTuning,
}

/// Output formats of `graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphOutput {
    /// A tree like `flux tree` (default); with --order, a table of waves.
    Tree,
    /// Graphviz DOT.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
    /// JSON: nodes, edges, members, waves.
    Json,
}

/// Wave order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Order {
    /// Deletion: dependents first.
    Delete,
    /// Apply: dependencies first.
    Apply,
}

const ORPHANS_EXAMPLES: &str = "Examples:
  # objects of Flux Kustomization usage that are no longer in the repository
  kubectl stack orphans -A --tracker flux=usage.flux-system -f examples/usage-next/
  # what the Kustomization's record (status.inventory) has that the new commit lacks, as JSON
  kubectl stack orphans -A --inventory flux=usage.flux-system -f examples/usage-next/ -o json
  # the manifests on stdin (e.g. kubectl kustomize DIR | ...)
  cat examples/usage-next/* | kubectl stack orphans -A --tracker flux=usage.flux-system -f -";

const ORPHANS_AFTER: &str =
    "Exit codes: 0 no orphans, 1 orphans found, 2 usage, 3 failed, 4 refused (empty desired set).";

/// Manifests on disk or stdin: `-f`/`-k`, shared by every command that reads them.
#[derive(Debug, Clone, Args, Default)]
pub struct ManifestArgs {
    /// Manifests: a file, a directory (recursively), or - for stdin. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub filenames: Vec<PathBuf>,
    /// A kustomization directory, rendered with `kubectl kustomize`. Repeatable.
    #[arg(short = 'k', long = "kustomize", value_name = "DIR")]
    pub kustomize: Vec<PathBuf>,
}

impl ManifestArgs {
    /// Whether no manifest was given.
    pub fn is_empty(&self) -> bool {
        self.filenames.is_empty() && self.kustomize.is_empty()
    }
}

/// Where the desired set comes from.
#[derive(Debug, Clone, Args, Default)]
pub struct DesiredArgs {
    /// The manifests of the desired set (`-f`/`-k`).
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// A tool's live record of what it applied last: flux=NAME[.NS], kpt=INVENTORY-ID,
    /// helm=RELEASE[.NS], applyset=[RESOURCE/]NAME. With -f/-k, the orphans are what the tool
    /// itself would prune: recorded, and not in the new desired set.
    #[arg(long, value_name = "PRESET=REF", conflicts_with_all = ["checksum"])]
    pub inventory: Option<String>,
    /// Refused: Flux v1 checksums are per object and never mean "delete" (give -f instead).
    #[arg(long, value_name = "VALUE", conflicts_with_all = ["filenames", "kustomize"], hide = true)]
    pub checksum: Option<String>,
    /// Accept an empty desired set (every tracked object is then an orphan).
    #[arg(long = "allow-empty")]
    pub allow_empty: bool,
    /// Compare although some declared objects cannot be resolved (kinds the cluster does not
    /// serve): the objects they stand for may then be called orphans.
    #[arg(long = "allow-unresolved")]
    pub allow_unresolved: bool,
    /// With -l and no --tracker, also objects no GitOps tool tracks (by default only tracked
    /// objects can be orphans).
    #[arg(long)]
    pub untracked: bool,
    /// The desired set is what the stack's tool built (`flux build kustomization NAME --path
    /// DIR`): its names are the tool's own, so a Kustomization that renames what it builds
    /// (spec.namePrefix, nameSuffix, patches, components, postBuild) can be compared with it.
    #[arg(long = "as-built")]
    pub as_built: bool,
}

/// `kubectl stack orphans`.
#[derive(Debug, Args)]
pub struct OrphansArgs {
    /// Which objects the stack tracks.
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// What is desired.
    #[command(flatten)]
    pub desired: DesiredArgs,
    /// Also list tracked objects that are not desired but kept (keep marker, made by a
    /// controller, already being deleted), with the reason.
    #[arg(long = "show-skipped")]
    pub show_skipped: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ListOutput::Table)]
    pub output: ListOutput,
    /// Listing tuning.
    #[command(flatten)]
    pub tuning: ListTuning,
}

const LIST_EXAMPLES: &str = "Examples:
  # everything any GitOps tool tracks in the current namespace
  kubectl stack list
  # what the Flux Kustomization flux-system/usage applied, in every namespace
  kubectl stack list -A --tracker flux=usage.flux-system
  # by label, with more columns
  kubectl stack list -n shop -l kustomize.toolkit.fluxcd.io/name=usage -o wide";

/// How to choose the objects of a stack.
#[derive(Debug, Clone, Args, Default)]
pub struct SelectionArgs {
    /// Label selector, as kubectl takes it (e.g. app=web,tier!=db).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// A tool's own tracking marker: flux, flux-helm, flux-v1, applyset, kpt, kapp, argocd, helm,
    /// optionally with =VALUE (e.g. flux=apps.flux-system, helm=podinfo.web, argocd=guestbook).
    #[arg(long = "tracker", value_name = "PRESET[=VALUE]")]
    pub tracker: Option<String>,
}

/// Tuning for listing across many kinds.
#[derive(Debug, Clone, Args)]
pub struct ListTuning {
    /// How many kinds to list at once.
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Page size of each list request.
    #[arg(long = "chunk-size", default_value_t = 500, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub chunk_size: u32,
}

/// `kubectl stack list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Which objects.
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ListOutput::Table)]
    pub output: ListOutput,
    /// Listing tuning.
    #[command(flatten)]
    pub tuning: ListTuning,
}

/// Output formats of `list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListOutput {
    /// A table (default).
    Table,
    /// A table with more columns.
    Wide,
    /// A JSON `List` of object metadata.
    Json,
    /// A YAML `List` of object metadata.
    Yaml,
    /// `kind.group/name`, one a line.
    Name,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The help as `kubectl stack [COMMAND] -h` (or `--help`) prints it.
    fn help(args: &[&str]) -> String {
        let mut argv = vec!["kubectl-stack"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv) {
            Err(err) if err.kind() == clap::error::ErrorKind::DisplayHelp => err.to_string(),
            other => panic!("{args:?} prints no help: {other:?}"),
        }
    }

    /// Help that scans (issue 27 item 1): examples at the top, then the command's own flags,
    /// then the connection flags under their own heading, never interleaved.
    #[test]
    fn help_shows_examples_then_own_flags_then_connection_flags() {
        const CONNECTION: [&str; 13] = [
            "--kubeconfig",
            "--context",
            "--cluster",
            "--user",
            "--as <",
            "--as-group",
            "--as-uid",
            "--request-timeout",
            "--server",
            "--token",
            "--certificate-authority",
            "--client-key",
            "--insecure-skip-tls-verify",
        ];
        let own: [(&str, &str); 7] = [
            ("list", "--selector"),
            ("orphans", "--show-skipped"),
            ("graph", "--members"),
            ("prune", "--yes"),
            ("stuck", "--tracker"),
            ("unstick", "--finalizer"),
            ("completion", "<SHELL>"),
        ];
        for (command, flag) in own {
            for long in [false, true] {
                let text = help(&[command, if long { "--help" } else { "-h" }]);
                let at = |needle: &str| {
                    text.find(needle)
                        .unwrap_or_else(|| panic!("{command}: no {needle:?} in\n{text}"))
                };
                let connection = at("\nConnection:\n");
                assert!(
                    at("Usage:") < at("Examples:"),
                    "{command}: usage, then examples\n{text}"
                );
                assert!(
                    at("Examples:") < at("\nOptions:\n"),
                    "{command}: examples first\n{text}"
                );
                assert!(
                    at(flag) < connection,
                    "{command}: {flag} before the connection flags\n{text}"
                );
                assert!(at("--namespace") < connection, "{command}\n{text}");
                for connection_flag in CONNECTION {
                    assert!(
                        at(connection_flag) > connection,
                        "{command}: {connection_flag} under Connection\n{text}"
                    );
                }
            }
        }
        let top = help(&["-h"]);
        assert!(top.find("Examples:") < top.find("Commands:"), "{top}");
        assert!(top.find("\nConnection:\n") > top.find("--namespace"), "{top}");
    }

    #[test]
    fn kubectl_flags_parse() {
        let cli = Cli::try_parse_from([
            "kubectl-stack",
            "list",
            "-n",
            "web",
            "--context",
            "prod",
            "--as",
            "jane",
            "--as-group",
            "ops",
            "--as-group",
            "dev",
            "-v",
            "4",
            "--request-timeout",
            "10s",
            "-l",
            "a=b",
            "-o",
            "json",
        ])
        .unwrap();
        assert_eq!(cli.global.namespace.as_deref(), Some("web"));
        assert_eq!(cli.global.context.as_deref(), Some("prod"));
        assert_eq!(cli.global.as_user.as_deref(), Some("jane"));
        assert_eq!(cli.global.as_group, vec!["ops", "dev"]);
        assert_eq!(cli.global.verbosity, 4);
        assert_eq!(cli.global.request_timeout, Duration::from_secs(10));
        let Command::List(list) = cli.command else {
            panic!("not list")
        };
        assert_eq!(list.selection.selector.as_deref(), Some("a=b"));
        assert_eq!(list.output, ListOutput::Json);
    }
}
