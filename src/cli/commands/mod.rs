//! Commands: each a thin composition of the library's modules.

pub mod graph;
pub mod list;
pub mod orphans;
pub mod prune;
pub mod stuck;
pub mod unstick;

use crate::cli::{Cli, Command};
use crate::cluster::discovery::{CacheUse, KindInfo};
use crate::error::UserError;
use crate::model::identity::ObjectId;

/// Runs the parsed command; returns the exit code.
pub async fn dispatch(mut cli: Cli) -> anyhow::Result<u8> {
    cli.global.discovery_cache = discovery_cache_use(&cli.command);
    match cli.command {
        Command::List(args) => list::run(&cli.global, args).await,
        Command::Orphans(args) => orphans::run(&cli.global, args).await,
        Command::Graph(args) => graph::run(&cli.global, args).await,
        Command::Prune(args) => prune::run(&cli.global, args).await,
        Command::Stuck(args) => stuck::run(&cli.global, args).await,
        Command::Unstick(args) => unstick::run(&cli.global, args).await,
        Command::Completion { shell } => {
            crate::render::emit(&crate::cli::complete::script(shell))?;
            Ok(crate::error::exit::OK)
        }
        Command::Complete { words } => {
            crate::render::emit(&crate::cli::complete::answer(&cli.global, &words).await)?;
            Ok(crate::error::exit::OK)
        }
    }
}

/// `list`, `graph` and `stuck` only read: a revalidated disk cache serves them. `prune`,
/// `orphans` and `unstick` plan deletions and changes on fresh discovery (which refreshes the
/// cache): a stale catalog must never hide the members of a kind.
fn discovery_cache_use(command: &Command) -> CacheUse {
    match command {
        Command::List(_) | Command::Graph(_) | Command::Stuck(_) => CacheUse::Revalidate,
        _ => CacheUse::Refresh,
    }
}

/// A named object that does not exist, in the API server's words as kubectl prints them
/// (`configmaps "nope" not found`), naming the namespace looked in. Not "gone": nothing says it
/// ever existed there. Exit 3, as for a stack (`--inventory`, a teardown target) not found.
pub fn not_found(kind: &KindInfo, id: &ObjectId) -> UserError {
    let resource = if kind.group.is_empty() {
        kind.plural.clone()
    } else {
        format!("{}.{}", kind.plural, kind.group)
    };
    let name = &id.name;
    match &id.namespace {
        Some(namespace) => UserError::failed(format!("{resource} \"{name}\" not found in namespace \"{namespace}\""))
            .hint(format!(
            "give its namespace with -n; to find it: kubectl get {resource} -A --field-selector metadata.name={name}"
        )),
        None => UserError::failed(format!("{resource} \"{name}\" not found"))
            .hint(format!("check the name: kubectl get {resource}")),
    }
}

/// Asks before anything destructive: yes with `--yes`; on a terminal, a prompt that reads a
/// whole line, as `kubectl delete -i` and kapp do (`y` or `yes`, then Enter, accepts; anything
/// else, an empty line included, declines); without a terminal, a refusal. `Ok(false)` is a
/// declined prompt: `declined` (e.g. "Nothing was deleted.") has been said.
pub fn confirm(prompt: &str, yes: bool, declined: &str) -> Result<bool, UserError> {
    use std::io::{BufRead, IsTerminal, Write};
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        let done = declined.trim_end_matches('.').to_lowercase();
        return Err(
            UserError::refused(format!("not attached to a terminal, and --yes was not given: {done}"))
                .hint("review what is shown above, then run again with --yes"),
        );
    }
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{prompt} [y/N]: ");
    let _ = stderr.flush();
    let mut line = String::new();
    // A read error or end of input (Ctrl-D) is no answer: declined. Ctrl-C ends the process
    // (the terminal's default), before anything was done.
    let read = std::io::stdin().lock().read_line(&mut line);
    if matches!(read, Ok(0)) {
        crate::say!();
    }
    let accepted = read.is_ok() && accepts(&line);
    if !accepted {
        crate::say!("{declined}");
    }
    Ok(accepted)
}

/// Whether an answer to the prompt accepts: `y` or `yes`, in any case.
fn accepts(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::accepts;

    #[test]
    fn only_y_or_yes_accepts() {
        for yes in ["y\n", "Y\n", "yes\n", "YES", " yes \n"] {
            assert!(accepts(yes), "{yes:?}");
        }
        for no in ["", "\n", "n\n", "no\n", "yes please\n", "yy\n", "x\n", "ye\n"] {
            assert!(!accepts(no), "{no:?}");
        }
    }
}
