//! Shell completion: static scripts (`kubectl stack completion bash|zsh|fish`) and the dynamic
//! answers behind `kubectl_complete-stack`, which kubectl (>= 1.26) runs with the words typed
//! after `kubectl stack`, the last one being the word to complete. Answers are one per line,
//! `value\tdescription`, ending with cobra's `:<directive>` line.

use clap::{Arg, Command, CommandFactory};

use crate::cli::{Cli, GlobalArgs};

/// Cobra: complete with these values only, no file names.
const NO_FILE_COMP: u8 = 4;
/// Cobra: the shell's default completion (file names).
const DEFAULT_COMP: u8 = 0;

/// What to offer for the last word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// These values (with descriptions).
    Values(Vec<(String, String)>),
    /// File names (the shell does it).
    Files,
    /// Contexts, clusters or users from the kubeconfig.
    Kubeconfig(KubeconfigItem),
    /// Namespaces of the cluster.
    Namespaces,
    /// Kinds the cluster serves (TYPE of TYPE/NAME).
    Kinds,
    /// Names of objects of a kind (after `TYPE/`).
    Names(String),
    /// The kinds a teardown can name (`prune TYPE`): Flux Kustomizations and HelmReleases,
    /// kpt ResourceGroups, where the cluster serves them.
    StackKinds,
    /// Flux stacks as a `--tracker`/`--inventory` value: `PREFIX` (e.g. `flux=`) then
    /// `NAME.NAMESPACE` of each object of the kind (group, kind), in every namespace.
    FluxStacks {
        /// What comes before each name (`flux=`, `--tracker=flux=`).
        prefix: String,
        /// The Flux kind: (group, kind).
        kind: (&'static str, &'static str),
    },
    /// The finalizers the named objects (`TYPE/NAME`) carry.
    Finalizers(Vec<String>),
}

/// An item of the kubeconfig.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeconfigItem {
    /// `--context`.
    Context,
    /// `--cluster`.
    Cluster,
    /// `--user`.
    User,
}

/// Works out what the last of `words` should complete to, from the command line definition.
pub fn want(words: &[String]) -> Want {
    let root = Cli::command();
    let (typed, current) = match words.split_last() {
        Some((current, typed)) => (typed, current.as_str()),
        None => (&[][..], ""),
    };
    let read = read_typed(&root, typed);
    let command = read.command;
    if let Some(arg) = read.pending_value {
        if arg.get_id() == "finalizers" {
            return Want::Finalizers(read.targets);
        }
        return values_for(arg, current);
    }
    if let Some(want) = inline_value(command, &root, current) {
        return want;
    }
    if current.starts_with('-') {
        return Want::Values(flags(command, &root));
    }
    if std::ptr::eq(command, &root) {
        return Want::Values(subcommands(&root));
    }
    positional(command, current)
}

/// What the words before the current one say: the (sub)command, the flag still waiting for its
/// value, and the positional words.
struct Typed<'c> {
    command: &'c Command,
    pending_value: Option<&'c Arg>,
    targets: Vec<String>,
}

fn read_typed<'c>(root: &'c Command, typed: &[String]) -> Typed<'c> {
    let mut read = Typed {
        command: root,
        pending_value: None,
        targets: Vec::new(),
    };
    for word in typed {
        if read.pending_value.take().is_some() {
            continue;
        }
        if word.starts_with('-') {
            // `--flag=value` and `-nVALUE` carry their value; `--flag value` takes the next word.
            let carries_value = word.contains('=') || (!word.starts_with("--") && word.len() > 2);
            if !carries_value {
                read.pending_value = find_arg(read.command, root, word).filter(|a| a.get_action().takes_values());
            }
            continue;
        }
        match read.command.find_subcommand(word) {
            Some(sub) if read.targets.is_empty() && std::ptr::eq(read.command, root) => read.command = sub,
            _ => read.targets.push(word.clone()),
        }
    }
    read
}

/// The values of `--flag=` being typed (`current`), each with its `--flag=` prefix.
fn inline_value(command: &Command, root: &Command, current: &str) -> Option<Want> {
    let (flag, value) = current.split_once('=')?;
    let arg = find_arg(command, root, flag)?;
    let prefix = format!("{flag}=");
    Some(match values_for(arg, value) {
        Want::Values(values) => Want::Values(values.into_iter().map(|(v, d)| (format!("{prefix}{v}"), d)).collect()),
        Want::FluxStacks { prefix: inner, kind } => Want::FluxStacks {
            prefix: format!("{prefix}{inner}"),
            kind,
        },
        other => other,
    })
}

/// The visible subcommands, each with its summary.
fn subcommands(root: &Command) -> Vec<(String, String)> {
    root.get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| {
            (
                c.get_name().to_string(),
                c.get_about().map(|a| a.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

/// What a positional word of `command` completes to: objects (`TYPE/NAME`), stack kinds for
/// `prune`, shells for `completion`.
fn positional(command: &Command, current: &str) -> Want {
    let takes_objects = command
        .get_arguments()
        .any(|a| a.is_positional() && a.get_id() == "targets");
    match (takes_objects, current.split_once('/')) {
        (true, Some((kind, _))) => Want::Names(kind.to_string()),
        (true, None) if command.get_name() == "prune" => Want::StackKinds,
        (true, None) => Want::Kinds,
        (false, _) => match command.get_name() {
            "completion" => Want::Values(
                ["bash", "zsh", "fish"]
                    .iter()
                    .map(|s| (s.to_string(), String::new()))
                    .collect(),
            ),
            _ => Want::Values(Vec::new()),
        },
    }
}

fn find_arg<'a>(command: &'a Command, root: &'a Command, word: &str) -> Option<&'a Arg> {
    let all = || command.get_arguments().chain(root.get_arguments());
    if let Some(long) = word.strip_prefix("--") {
        all().find(|a| a.get_long() == Some(long))
    } else {
        let short = word.trim_start_matches('-').chars().next()?;
        all().find(|a| a.get_short() == Some(short))
    }
}

fn flags(command: &Command, root: &Command) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = command
        .get_arguments()
        .chain(root.get_arguments().filter(|a| a.is_global_set()))
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            a.get_long().map(|l| {
                (
                    format!("--{l}"),
                    a.get_help().map(|h| h.to_string()).unwrap_or_default(),
                )
            })
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The Flux kind of a `PRESET=...` value being typed (`flux=`, `flux-helm=`).
fn flux_preset(current: &str) -> Option<(&'static str, &'static str)> {
    let (preset, _) = current.split_once('=')?;
    crate::model::trackers::Preset::ALL
        .into_iter()
        .find(|p| p.name() == preset)
        .and_then(crate::model::trackers::Preset::flux_kind)
}

fn values_for(arg: &Arg, current: &str) -> Want {
    match arg.get_id().as_str() {
        "context" => Want::Kubeconfig(KubeconfigItem::Context),
        "cluster" => Want::Kubeconfig(KubeconfigItem::Cluster),
        "user" => Want::Kubeconfig(KubeconfigItem::User),
        "namespace" => Want::Namespaces,
        "tracker" | "inventory" if flux_preset(current).is_some() => Want::FluxStacks {
            prefix: current
                .split_once('=')
                .map(|(p, _)| format!("{p}="))
                .unwrap_or_default(),
            kind: flux_preset(current).unwrap_or(("", "")),
        },
        "tracker" | "inventory" => Want::Values(
            crate::model::trackers::Preset::ALL
                .iter()
                .map(|p| (format!("{}=", p.name()), String::new()))
                .filter(|(v, _)| v.starts_with(current.split('=').next().unwrap_or("")))
                .collect(),
        ),
        _ => {
            let values = arg.get_possible_values();
            if values.is_empty() {
                Want::Files
            } else {
                Want::Values(
                    values
                        .iter()
                        .filter(|v| !v.is_hide_set())
                        .map(|v| {
                            (
                                v.get_name().to_string(),
                                v.get_help().map(|h| h.to_string()).unwrap_or_default(),
                            )
                        })
                        .collect(),
                )
            }
        }
    }
}

/// Answers a completion request: resolves what needs the kubeconfig or the cluster (quietly:
/// completion never prints errors), filters by the typed prefix, and formats for cobra.
pub async fn answer(parsed: &GlobalArgs, words: &[String]) -> String {
    let current = words.last().map(String::as_str).unwrap_or("");
    let global = global_flags(parsed, words);
    let (values, directive) = match want(words) {
        Want::Files => (Vec::new(), DEFAULT_COMP),
        Want::Values(values) => (values, NO_FILE_COMP),
        Want::Kubeconfig(item) => (kubeconfig_names(&global, item), NO_FILE_COMP),
        Want::Namespaces => (live_names(&global, "namespaces").await, NO_FILE_COMP),
        Want::Kinds => (live_kinds(&global).await, NO_FILE_COMP),
        Want::StackKinds => (live_stack_kinds(&global).await, NO_FILE_COMP),
        Want::FluxStacks { prefix, kind } => {
            let names = live_flux_stacks(&global, kind).await;
            (
                names
                    .into_iter()
                    .map(|n| (format!("{prefix}{n}"), String::new()))
                    .collect(),
                NO_FILE_COMP,
            )
        }
        Want::Finalizers(targets) => (live_finalizers(&global, &targets).await, NO_FILE_COMP),
        Want::Names(kind) => {
            let names = live_names(&global, &kind).await;
            (
                names.into_iter().map(|(n, d)| (format!("{kind}/{n}"), d)).collect(),
                NO_FILE_COMP,
            )
        }
    };
    let mut out = String::new();
    for (value, description) in values.into_iter().filter(|(v, _)| v.starts_with(current)) {
        if description.is_empty() {
            out.push_str(&format!("{value}\n"));
        } else {
            out.push_str(&format!("{value}\t{description}\n"));
        }
    }
    out.push_str(&format!(":{directive}\n"));
    out
}

/// The connection flags already typed (parsed before `__complete`, or among the words), so
/// completion asks the cluster the user means: every connection flag `cli` defines.
fn global_flags(parsed: &GlobalArgs, words: &[String]) -> GlobalArgs {
    let mut global = parsed.clone();
    let mut iter = words.iter().peekable();
    while let Some(word) = iter.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_string())),
            // `-nNAMESPACE`, `-sURL`, as kubectl (pflag) takes them.
            None if (word.starts_with("-n") || word.starts_with("-s")) && word.len() > 2 && !word.starts_with("--") => {
                (&word[..2], Some(word[2..].to_string()))
            }
            None => (word.as_str(), None),
        };
        if flag == "--insecure-skip-tls-verify" {
            // A bool flag: a value only as `=VALUE`.
            global.insecure_skip_tls_verify = inline.as_deref().is_none_or(|v| v == "true");
            continue;
        }
        let mut value = || inline.clone().or_else(|| iter.peek().map(|v| v.to_string()));
        set_connection_flag(&mut global, flag, &mut value);
    }
    global.request_timeout = std::time::Duration::from_secs(3);
    global
}

/// Sets one connection flag that takes a value; other flags are left alone.
fn set_connection_flag(global: &mut GlobalArgs, flag: &str, value: &mut dyn FnMut() -> Option<String>) {
    match flag {
        "--kubeconfig" => global.kubeconfig = value().map(Into::into),
        "--context" => global.context = value(),
        "--cluster" => global.cluster = value(),
        "--user" => global.user = value(),
        "-n" | "--namespace" => global.namespace = value(),
        "--cache-dir" => global.cache_dir = value().map(Into::into),
        "-s" | "--server" => global.server = value(),
        "--token" => global.token = value(),
        "--certificate-authority" => global.certificate_authority = value().map(Into::into),
        "--client-certificate" => global.client_certificate = value().map(Into::into),
        "--client-key" => global.client_key = value().map(Into::into),
        "--tls-server-name" => global.tls_server_name = value(),
        "--as" => global.as_user = value(),
        "--as-group" => global.as_group.extend(value()),
        "--as-uid" => global.as_uid = value(),
        _ => {}
    }
}

fn kubeconfig_names(global: &GlobalArgs, item: KubeconfigItem) -> Vec<(String, String)> {
    let Ok(config) = crate::cluster::client::load_kubeconfig(&global.connect_options()) else {
        return Vec::new();
    };
    match item {
        KubeconfigItem::Context => config
            .contexts
            .iter()
            .map(|c| (c.name.clone(), String::new()))
            .collect(),
        KubeconfigItem::Cluster => config
            .clusters
            .iter()
            .map(|c| (c.name.clone(), String::new()))
            .collect(),
        KubeconfigItem::User => config
            .auth_infos
            .iter()
            .map(|u| (u.name.clone(), String::new()))
            .collect(),
    }
}

/// The catalog from kubectl's disk cache as kubectl trusts it (fresh discovery when there is
/// none, or when `refresh`), so that `<TAB>` costs no discovery on a warm cache.
async fn catalog(
    connection: &crate::cluster::client::Connection,
    global: &GlobalArgs,
    refresh: bool,
) -> Option<crate::cluster::discovery::Catalog> {
    let cache = crate::cluster::session::cache_root(global.cache_dir.as_deref())
        .map(|root| crate::cluster::discovery::DiskCache::for_server(&root, &connection.server));
    let usage = if refresh {
        crate::cluster::discovery::CacheUse::Refresh
    } else {
        crate::cluster::discovery::CacheUse::Trust
    };
    crate::cluster::discovery::discover_cached(&connection.client, cache.as_ref(), usage)
        .await
        .ok()
}

async fn live_kinds(global: &GlobalArgs) -> Vec<(String, String)> {
    let Ok(connection) = crate::cluster::client::connect(&global.connect_options()).await else {
        return Vec::new();
    };
    let Some(catalog) = catalog(&connection, global, false).await else {
        return Vec::new();
    };
    let mut kinds: Vec<(String, String)> = catalog
        .kinds()
        .iter()
        .map(|k| (k.resource_type(), k.kind.clone()))
        .collect();
    kinds.sort();
    kinds
}

/// The kinds a teardown names, among those the cluster serves.
async fn live_stack_kinds(global: &GlobalArgs) -> Vec<(String, String)> {
    const STACKS: [(&str, &str); 3] = [
        ("kustomize.toolkit.fluxcd.io", "Kustomization"),
        ("helm.toolkit.fluxcd.io", "HelmRelease"),
        ("kpt.dev", "ResourceGroup"),
    ];
    let Ok(connection) = crate::cluster::client::connect(&global.connect_options()).await else {
        return Vec::new();
    };
    let Some(catalog) = catalog(&connection, global, false).await else {
        return Vec::new();
    };
    STACKS
        .iter()
        .filter_map(|(group, kind)| catalog.get(group, kind))
        .map(|k| (k.kind.to_lowercase(), k.kind_with_group()))
        .collect()
}

/// `NAME.NAMESPACE` of every object of a Flux kind, in every namespace (one page).
async fn live_flux_stacks(global: &GlobalArgs, (group, kind): (&str, &str)) -> Vec<String> {
    let Ok(connection) = crate::cluster::client::connect(&global.connect_options()).await else {
        return Vec::new();
    };
    let Some(catalog) = catalog(&connection, global, false).await else {
        return Vec::new();
    };
    let Some(info) = catalog.get(group, kind) else {
        return Vec::new();
    };
    let query = crate::cluster::collect::ListQuery {
        first_page_only: true,
        attempts: 1,
        ..Default::default()
    };
    let mut names = Vec::new();
    let listed = crate::cluster::collect::list_metadata_pages(&connection.client, info, &query, |items| {
        names.extend(items.into_iter().filter_map(|o| {
            let name = o.metadata.name?;
            Some(format!("{name}.{}", o.metadata.namespace.unwrap_or_default()))
        }));
    })
    .await;
    names.sort();
    if listed.is_ok() {
        names
    } else {
        Vec::new()
    }
}

/// The finalizers the named objects carry (a Namespace's `kubernetes` too).
async fn live_finalizers(global: &GlobalArgs, targets: &[String]) -> Vec<(String, String)> {
    let Ok(connection) = crate::cluster::client::connect(&global.connect_options()).await else {
        return Vec::new();
    };
    let Some(catalog) = catalog(&connection, global, false).await else {
        return Vec::new();
    };
    let mut found = std::collections::BTreeMap::new();
    for target in targets {
        let Some((kind, name)) = target.split_once('/') else {
            continue;
        };
        let Some(info) = catalog.resolve(kind) else {
            continue;
        };
        let api = crate::cluster::collect::api_for(&connection.client, info, Some(&connection.namespace));
        let Ok(Some(object)) = api.get_metadata_opt(name).await else {
            continue;
        };
        for finalizer in object.metadata.finalizers.unwrap_or_default() {
            found.insert(finalizer, target.clone());
        }
        if info.group.is_empty() && info.kind == "Namespace" {
            found.insert("kubernetes".to_string(), format!("{target} (spec.finalizers)"));
        }
    }
    found.into_iter().collect()
}

async fn live_names(global: &GlobalArgs, kind_text: &str) -> Vec<(String, String)> {
    let Ok(connection) = crate::cluster::client::connect(&global.connect_options()).await else {
        return Vec::new();
    };
    let Some(mut catalog) = catalog(&connection, global, false).await else {
        return Vec::new();
    };
    // A kind the cached catalog lacks may be new: ask the server once.
    if catalog.resolve(kind_text).is_none() {
        match self::catalog(&connection, global, true).await {
            Some(fresh) => catalog = fresh,
            None => return Vec::new(),
        }
    }
    let Some(kind) = catalog.resolve(kind_text) else {
        return Vec::new();
    };
    let namespace = kind.namespaced.then_some(connection.namespace.as_str());
    // One page, one try: a completion answers at once or not at all.
    let query = crate::cluster::collect::ListQuery {
        namespace,
        first_page_only: true,
        attempts: 1,
        ..Default::default()
    };
    let mut names = Vec::new();
    let listed = crate::cluster::collect::list_metadata_pages(&connection.client, kind, &query, |items| {
        names.extend(
            items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .map(|n| (n, String::new())),
        );
    })
    .await;
    match listed {
        Ok(()) => names,
        Err(_) => Vec::new(),
    }
}

/// The bash script: every `<TAB>` asks `kubectl-stack __complete` (what kubectl's plugin
/// completion asks too), so that `-n` completes namespaces, `--tracker flux=` Kustomizations,
/// `prune TYPE` the kinds that are stacks, `--finalizer` the finalizers the named objects carry;
/// files only where a flag takes a file (directive 0). `--flag=value` and `preset=value` words
/// are completed after their `=`, as bash splits them.
const BASH_SCRIPT: &str = r#"# bash completion for kubectl-stack: source <(kubectl-stack completion bash)
_kubectl_stack() {
    local line="${COMP_LINE:0:COMP_POINT}" words out directive cur prefix value
    read -ra words <<<"$line"
    [[ $line == *[[:space:]] ]] && words+=("")
    cur="${words[${#words[@]}-1]}"
    out="$("${words[0]}" __complete "${words[@]:1}" 2>/dev/null)" || return
    directive="${out##*:}"
    out="${out%:*}"
    COMPREPLY=()
    if [[ $directive == 0 ]]; then
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return
    fi
    prefix=""
    [[ $cur == *=* && $COMP_WORDBREAKS == *=* ]] && prefix="${cur%=*}="
    while IFS=$'	' read -r value _; do
        [[ -n $value && $value == "$cur"* ]] && COMPREPLY+=("${value#"$prefix"}")
    done <<<"$out"
    if [[ ${#COMPREPLY[@]} == 1 && ${COMPREPLY[0]} == *[=/] ]]; then
        compopt -o nospace 2>/dev/null
    fi
}
complete -F _kubectl_stack kubectl-stack
"#;

/// The completion script for a shell, for the `kubectl-stack` executable: bash asks the
/// binary at each `<TAB>` ([`BASH_SCRIPT`]); zsh and fish are clap's static scripts.
pub fn script(shell: clap_complete::Shell) -> String {
    if shell == clap_complete::Shell::Bash {
        return BASH_SCRIPT.to_string();
    }
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "kubectl-stack", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut words: Vec<String> = text.split(' ').map(str::to_string).collect();
        if text.ends_with(' ') {
            words.pop();
            words.push(String::new());
        }
        words
    }

    fn values(want: Want) -> Vec<String> {
        match want {
            Want::Values(values) => values.into_iter().map(|(v, _)| v).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn subcommands_flags_and_values() {
        let subcommands = values(want(&words("")));
        for name in ["list", "orphans", "graph", "prune", "stuck", "unstick", "completion"] {
            assert!(subcommands.contains(&name.to_string()), "{name} in {subcommands:?}");
        }
        assert!(!subcommands.contains(&"__complete".to_string()));
        let flags = values(want(&words("prune --")));
        assert!(
            flags.contains(&"--dry-run".to_string()) && flags.contains(&"--context".to_string()),
            "{flags:?}"
        );
        assert_eq!(
            values(want(&words("graph -o "))),
            vec!["tree", "dot", "mermaid", "json"]
        );
        assert_eq!(
            values(want(&words("prune --cascade "))),
            vec!["background", "foreground", "orphan"]
        );
        assert!(values(want(&words("list --tracker fl"))).contains(&"flux=".to_string()));
        assert_eq!(values(want(&words("completion "))), vec!["bash", "zsh", "fish"]);
    }

    #[test]
    fn kubeconfig_cluster_and_file_values() {
        assert_eq!(
            want(&words("list --context ")),
            Want::Kubeconfig(KubeconfigItem::Context)
        );
        assert_eq!(want(&words("list -n ")), Want::Namespaces);
        assert_eq!(want(&words("orphans -f ")), Want::Files);
        assert_eq!(want(&words("-n web prune ")), Want::StackKinds);
        assert_eq!(want(&words("-n web stuck ")), Want::Kinds);
        assert_eq!(
            want(&words("list --tracker flux=us")),
            Want::FluxStacks {
                prefix: "flux=".into(),
                kind: ("kustomize.toolkit.fluxcd.io", "Kustomization")
            }
        );
        assert_eq!(
            want(&words("list --tracker=flux-helm=")),
            Want::FluxStacks {
                prefix: "--tracker=flux-helm=".into(),
                kind: ("helm.toolkit.fluxcd.io", "HelmRelease")
            }
        );
        assert_eq!(
            want(&words("unstick -n shop database/orders --finalizer ")),
            Want::Finalizers(vec!["database/orders".into()])
        );
        assert_eq!(
            want(&words("prune kustomizations/")),
            Want::Names("kustomizations".into())
        );
        assert_eq!(want(&words("stuck -n web kustomization/usage deploy")), Want::Kinds);
    }

    #[test]
    fn flags_before_the_word_are_read_as_kubectl_reads_them() {
        // The value of -n/--context is completed, not a subcommand.
        assert_eq!(want(&words("-n ")), Want::Namespaces);
        assert_eq!(want(&words("--context ")), Want::Kubeconfig(KubeconfigItem::Context));
        assert_eq!(want(&words("--namespace=kube")), Want::Namespaces);
        // -nNS carries its value: the next word is the object, not the namespace.
        assert_eq!(
            want(&words("stuck -nweb configmaps/")),
            Want::Names("configmaps".into())
        );
        assert_eq!(want(&words("-nweb stuck ")), Want::Kinds);
        let global = global_flags(&GlobalArgs::default(), &words("-nweb stuck configmaps/"));
        assert_eq!(global.namespace.as_deref(), Some("web"));
        let global = global_flags(&GlobalArgs::default(), &words("--cache-dir /tmp/c -n=shop stuck x"));
        assert_eq!(global.namespace.as_deref(), Some("shop"));
        assert_eq!(global.cache_dir, Some("/tmp/c".into()));
        // --help is a word like any other: subcommands follow it, no help text.
        let after_help = values(want(&words("--help ")));
        assert!(after_help.contains(&"list".to_string()), "{after_help:?}");
    }

    #[test]
    fn completion_connects_with_the_connection_flags_typed() {
        let typed = words(
            "-shttps://10.0.0.1:6443 --token t --certificate-authority /ca.pem --client-certificate /c.crt \
             --client-key /c.key --tls-server-name api --as jane --as-group ops --as-group=dev --as-uid 7 \
             --insecure-skip-tls-verify --user u --cluster c stuck x",
        );
        let global = global_flags(&GlobalArgs::default(), &typed);
        assert_eq!(global.server.as_deref(), Some("https://10.0.0.1:6443"));
        assert_eq!(global.token.as_deref(), Some("t"));
        assert_eq!(global.certificate_authority, Some("/ca.pem".into()));
        assert_eq!(global.client_certificate, Some("/c.crt".into()));
        assert_eq!(global.client_key, Some("/c.key".into()));
        assert_eq!(global.tls_server_name.as_deref(), Some("api"));
        assert_eq!(global.as_user.as_deref(), Some("jane"));
        assert_eq!(global.as_group, vec!["ops", "dev"]);
        assert_eq!(global.as_uid.as_deref(), Some("7"));
        assert!(global.insecure_skip_tls_verify);
        assert_eq!(global.user.as_deref(), Some("u"));
        assert_eq!(global.cluster.as_deref(), Some("c"));
        let connect = global.connect_options();
        assert_eq!(connect.server.as_deref(), Some("https://10.0.0.1:6443"));
        let spelled = global_flags(
            &GlobalArgs::default(),
            &words("--server=https://h:1 --insecure-skip-tls-verify=false x"),
        );
        assert_eq!(spelled.server.as_deref(), Some("https://h:1"));
        assert!(!spelled.insecure_skip_tls_verify);
    }

    /// Every global flag `cli` defines that takes a value is read by completion (a new
    /// connection flag must not be forgotten here).
    #[test]
    fn every_global_flag_with_a_value_is_read() {
        let command = Cli::command();
        let skipped = ["request-timeout", "v"];
        for arg in command.get_arguments().filter(|a| a.is_global_set()) {
            let Some(long) = arg.get_long() else { continue };
            let takes_value = arg.get_num_args().is_none_or(|n| n.takes_values())
                && !matches!(
                    arg.get_action(),
                    clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
                );
            if skipped.contains(&long) || !takes_value || long == "insecure-skip-tls-verify" {
                continue;
            }
            let typed = vec![
                format!("--{long}"),
                "value".to_string(),
                "list".to_string(),
                String::new(),
            ];
            let global = global_flags(&GlobalArgs::default(), &typed);
            assert_ne!(
                format!("{global:?}"),
                format!("{:?}", global_flags(&GlobalArgs::default(), &typed[2..])),
                "--{long} is not read by completion"
            );
        }
    }
}
