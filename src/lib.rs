//! kubectl-stack: ordered, safe pruning and dependency graphs for GitOps stacks.
//!
//! The library is six layers, each a folder; a layer imports only the layers below it
//! (`scripts/layers.sh` checks it):
//!
//! - [`cli`]: the flags in kubectl's conventions, the commands that compose the layers below,
//!   and shell completion; `main.rs` only calls [`run`].
//! - [`prune`]: planning (waves, safeguards, cascades, re-creating parents), the plan file, the
//!   run (re-check before every wave, Flux suspensions, delete, wait) and its report.
//! - [`breakglass`]: `stuck` (why a deletion hangs) and `unstick` (removing finalizers).
//! - [`graph`]: one graph of what dies and what stays: edges declared, structural and inferred,
//!   built from the live cluster or from manifests, and its output (table, JSON, tree, DOT).
//! - [`stack`]: which objects belong to which stack: the trackers' marks, each tool's record,
//!   manifests and desired sets, classification, the tools' policies, the one keep chain, and
//!   the orphan finder.
//! - [`cluster`]: the kubeconfig and client, discovery, the one lister, retries and the session.
//!
//! Beneath them, shared by all: [`identity`] (what names an object), [`error`] (typed errors
//! and exit codes), [`values`] (kubectl-format values such as durations) and [`render`] (the
//! output primitives: tables, JSON and YAML documents, stdout).

#![warn(missing_docs)]

/// Writes a line to stderr (progress, warnings, hints), like `eprintln!` but never panicking: a
/// closed stderr (`2>&1 | head`) must not turn a prune into a panic halfway through its waves.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// [`say!`] without the newline.
#[macro_export]
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

pub mod breakglass;
pub mod cli;
pub mod cluster;
pub mod error;
pub mod graph;
pub mod model;
pub mod prune;
pub mod render;
pub mod stack;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::error::{exit, UserError};

/// Makes glibc's malloc give every buffer of 1 MiB or more its own mapping, returned to the
/// system when freed. glibc's default raises that threshold each time such a buffer is freed, so
/// the large vectors and hash tables of a plan over 50,000 objects, once grown and freed, stay in
/// the heap as free space: a plan's peak memory was 174 MB against a heap of 121 MB at its peak,
/// 156 MB with the threshold fixed (issue 30). A no-op where the C library is not glibc.
pub fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::raw::c_int;
        extern "C" {
            fn mallopt(param: c_int, value: c_int) -> c_int;
        }
        /// glibc's `M_MMAP_THRESHOLD` (`malloc.h`).
        const M_MMAP_THRESHOLD: c_int = -3;
        // SAFETY: `mallopt` only sets one of glibc's malloc parameters; it takes two integers and
        // is called before any other thread runs.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

/// Returns the free pages of every malloc arena to the system. glibc gives each thread an arena:
/// what one thread frees is reused only by the threads of its arena, so the desired manifests,
/// read on their own thread ([`prune::orphans::PendingManifests`]) and freed once compared,
/// would leave their memory idle beside the plan's (a dry run over 50,000 objects: 164 MiB at
/// its peak without this, 157 MiB with it). A no-op where the C library is not glibc.
pub fn return_free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: `malloc_trim` takes one integer and only releases memory malloc holds free;
        // it locks each arena as it walks it, so other threads may run beside it.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Parses the command line, runs the command, prints errors with hints, and returns the exit code.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    let mut cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { exit::USAGE } else { exit::OK });
        }
    };
    // `-n ""` means the context's namespace, as in kubectl (client-go ignores an empty override).
    if cli.global.namespace.as_deref() == Some("") {
        cli.global.namespace = None;
    }
    if let Some(namespace) = cli
        .global
        .namespace
        .as_deref()
        .filter(|n| !stack::desired::is_dns_label(n))
    {
        say!(
            "error: invalid namespace {namespace:?}: a namespace is a DNS-1123 label (lower-case letters, digits and '-', at most 63)"
        );
        return ExitCode::from(exit::USAGE);
    }
    init_logging(cli.global.verbosity);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            crate::say!("error: cannot start the async runtime: {err}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let destructive = matches!(cli.command, cli::Command::Prune(_) | cli::Command::Unstick(_));
    let code = match runtime.block_on(cli::commands::dispatch(cli)) {
        Ok(code) => code,
        Err(err) => report(&err),
    };
    if destructive && render::stdout_closed() {
        say!("note: stdout was closed before the end: some of the output was not written (the exit code is the command's own)");
    }
    ExitCode::from(code)
}

/// Prints an error (and its hint) on stderr; returns the exit code it calls for.
fn report(err: &anyhow::Error) -> u8 {
    if let Some(user_error) = err.downcast_ref::<UserError>() {
        crate::say!("error: {}", user_error.message);
        if let Some(hint) = &user_error.hint {
            crate::say!("hint: {hint}");
        }
        return user_error.code;
    }
    crate::say!("error: {err:#}");
    exit::FAILED
}

fn init_logging(verbosity: u8) {
    let (ours, kube) = match verbosity {
        0 | 1 => ("warn", "off"),
        2 | 3 => ("info", "warn"),
        4 | 5 => ("debug", "info"),
        _ => ("trace", "debug"),
    };
    // kube-client's own module logs whole response bodies when one does not parse (Secret data
    // included): only its request spans (`client::builder`: method, URL, status) are shown.
    let filter = tracing_subscriber::EnvFilter::try_from_env("KUBECTL_STACK_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "kubectl_stack={ours},kube={kube},kube_client={kube},kube_client::client=off,kube_client::client::builder={kube}"
        ))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A closed stderr (`2>&1 | head`) is not reported with `eprintln!`, which panics.
        .log_internal_errors(false)
        .event_format(logging::PlainFormat {
            color: render::color_allowed(),
        })
        .try_init();
}

mod logging {
    //! `warning: ...` lines on stderr, as kubectl prints them.
    use std::fmt;

    use tracing::{Event, Level, Subscriber};
    use tracing_subscriber::fmt::format::Writer;
    use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
    use tracing_subscriber::registry::LookupSpan;

    /// Drops ANSI colour sequences (`ESC [ ... m`) from already formatted text.
    fn strip_ansi(text: &str) -> String {
        let mut plain = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for next in chars.by_ref() {
                    if next == 'm' {
                        break;
                    }
                }
            } else {
                plain.push(c);
            }
        }
        plain
    }

    /// Formats each event as `level: message`.
    pub struct PlainFormat {
        /// Whether to colour the level.
        pub color: bool,
    }

    impl<S, N> FormatEvent<S, N> for PlainFormat
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
        N: for<'a> FormatFields<'a> + 'static,
    {
        fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
            let (label, color) = match *event.metadata().level() {
                Level::ERROR => ("error", "31"),
                Level::WARN => ("warning", "33"),
                Level::INFO => ("info", "36"),
                Level::DEBUG => ("debug", "2"),
                Level::TRACE => ("trace", "2"),
            };
            if self.color {
                write!(writer, "\x1b[{color}m{label}\x1b[0m: ")?;
            } else {
                write!(writer, "{label}: ")?;
            }
            ctx.field_format().format_fields(writer.by_ref(), event)?;
            // At debug and trace, the spans say which request an event belongs to (method, URL).
            if *event.metadata().level() >= Level::DEBUG {
                if let Some(scope) = ctx.event_scope() {
                    for span in scope.from_root() {
                        if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                            if !fields.is_empty() {
                                let text = if self.color {
                                    fields.to_string()
                                } else {
                                    strip_ansi(fields)
                                };
                                write!(writer, " [{} {text}]", span.name())?;
                            }
                        }
                    }
                }
            }
            writeln!(writer)
        }
    }
}
