//! Commands: each a thin composition of the library's modules.

pub mod graph;
pub mod list;
pub mod orphans;
pub mod prune;
pub mod stuck;
pub mod unstick;

use crate::cli::{Cli, Command};
use crate::discovery::CacheUse;
use crate::error::UserError;

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
            crate::render::emit(&crate::complete::script(shell))?;
            Ok(crate::error::exit::OK)
        }
        Command::Complete { words } => {
            crate::render::emit(&crate::complete::answer(&cli.global, &words).await)?;
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

/// Asks before anything destructive: yes with `--yes`; on a terminal, a prompt (default No);
/// without a terminal, a refusal. `done` says what did not happen, e.g. "nothing was deleted".
pub fn confirm(prompt: &str, yes: bool, done: &str) -> Result<(), UserError> {
    use std::io::IsTerminal;
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(
            UserError::refused(format!("not attached to a terminal, and --yes was not given: {done}"))
                .hint("review what is shown above, then run again with --yes"),
        );
    }
    let answer = dialoguer::Confirm::new()
        .with_prompt(prompt)
        .default(false)
        .interact()
        .map_err(|err| UserError::refused(format!("no answer ({err}): {done}")))?;
    if answer {
        Ok(())
    } else {
        Err(UserError::refused(format!("not confirmed: {done}")))
    }
}
