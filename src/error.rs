//! Errors a user sees: a message that says what went wrong, a hint that says what to do,
//! and a stable exit code.

/// Stable, documented exit codes (see README "Exit codes").
pub mod exit {
    /// Success; nothing to report.
    pub const OK: u8 = 0;
    /// Success, and something was found that the caller asked about (orphans, stuck objects),
    /// as `kubectl diff` exits 1 when there are differences.
    pub const FOUND: u8 = 1;
    /// Bad flags or input: the command line, a selector, a manifest that does not parse.
    pub const USAGE: u8 = 2;
    /// The work could not be done: kubeconfig, connection, API or I/O failure.
    pub const FAILED: u8 = 3;
    /// A safety guard refused to go on (no `--yes` without a terminal, empty desired set, ...).
    pub const REFUSED: u8 = 4;
    /// A destructive run stopped before the end (a wave timed out or a delete failed).
    pub const INCOMPLETE: u8 = 5;
    /// The dependency graph has a cycle.
    pub const CYCLE: u8 = 6;
    /// Interrupted by Ctrl-C.
    pub const INTERRUPTED: u8 = 130;
}

/// An error meant for the person at the terminal.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct UserError {
    /// What went wrong, in one line.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// The exit code the process ends with.
    pub code: u8,
}

impl UserError {
    /// An error with the given exit code.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            hint: None,
            code,
        }
    }

    /// Bad command line or input.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(exit::USAGE, message)
    }

    /// The work could not be done.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(exit::FAILED, message)
    }

    /// A safety guard refused.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(exit::REFUSED, message)
    }

    /// Adds a hint that says what to do.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The HTTP status of a Kubernetes API error, if the error is one.
pub fn api_status(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// True when the API answered 404 Not Found.
pub fn is_not_found(err: &kube::Error) -> bool {
    api_status(err) == Some(404)
}

/// True when the API answered 403 Forbidden.
pub fn is_forbidden(err: &kube::Error) -> bool {
    api_status(err) == Some(403)
}

/// Turns a Kubernetes client error into a user error that names the server and says what to do.
pub fn explain_kube_error(err: &kube::Error, server: &str, user: &str) -> UserError {
    match err {
        kube::Error::Api(status) if status.code == 401 => UserError::failed(format!(
            "the API server at {server} rejected the credentials of user \"{user}\" (401 Unauthorized)"
        ))
        .hint("log in again or refresh the token in your kubeconfig; check --context and --user"),
        kube::Error::Api(status) if status.code == 403 => {
            UserError::failed(format!("forbidden (403): {}", status.message)).hint(format!(
                "user \"{user}\" lacks RBAC permission; `kubectl auth can-i --list` shows what it may do"
            ))
        }
        kube::Error::Api(status) => UserError::failed(format!(
            "the API server at {server} answered {} {}: {}",
            status.code, status.reason, status.message
        )),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            UserError::failed(format!("cannot reach the API server at {server}: {}", root_cause(err)))
                .hint("is the cluster running and is the context right? (`kubectl config current-context`, --context, --request-timeout)")
        }
        other => UserError::failed(format!("request to {server} failed: {}", root_cause(other))),
    }
}

/// The innermost cause of an error chain, which is usually the one that says most.
pub fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current: &(dyn std::error::Error + 'static) = err;
    let mut text = current.to_string();
    while let Some(next) = current.source() {
        let next_text = next.to_string();
        if !next_text.is_empty() {
            text = next_text;
        }
        current = next;
    }
    text
}
