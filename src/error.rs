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
#[derive(Debug, Clone, thiserror::Error)]
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

/// Why a fact could not be looked up (an object read, a kind listed): said in a diagnosis as
/// "could not be checked (...)", never taken as "gone" or "none".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The server does not serve the kind (e.g. "Pods").
    #[error("the server does not serve {0}")]
    NotServed(String),
    /// The user may not read it.
    #[error("forbidden")]
    Forbidden,
    /// Listing the objects of a kind failed (kind in the plural, e.g. "Deployments").
    #[error("{kinds} could not be listed: {cause}")]
    Unlisted {
        /// The kind, in the plural.
        kinds: String,
        /// The root cause.
        cause: String,
    },
    /// Any other failure: its root cause.
    #[error("{0}")]
    Failed(String),
}

impl LookupError {
    /// A failed request: forbidden, or its root cause.
    pub fn from_request(err: &kube::Error) -> Self {
        if is_forbidden(err) {
            Self::Forbidden
        } else {
            Self::Failed(root_cause(err))
        }
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
    if let Some(failure) = connection_failure(err) {
        return explain_connection_failure(&failure, server);
    }
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
        kube::Error::HyperError(_) | kube::Error::Service(_) if is_connection_refused(err) => {
            refused(server)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            UserError::failed(format!("cannot reach the API server at {server}: {}", root_cause(err)))
                .hint("is the cluster running and is the context right? (`kubectl config current-context`, --context, --request-timeout)")
        }
        other => UserError::failed(format!("request to {server} failed: {}", root_cause(other))),
    }
}

/// The proxy every request goes through (kubeconfig `proxy-url`, `HTTPS_PROXY`), without
/// credentials: a connection it refuses is its own, never the API server's.
static PROXY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Records the proxy the client connects through, for error messages.
pub fn set_proxy(proxy: Option<String>) {
    let _ = PROXY.set(proxy.map(|p| p.trim_end_matches('/').to_string()));
}

fn proxy() -> Option<&'static str> {
    PROXY.get().and_then(|p| p.as_deref())
}

/// A refused connection: to the proxy when there is one (it is the only address connected to),
/// else to the API server. Not retried before the first answer (kubectl fails at once too).
fn refused(server: &str) -> UserError {
    match proxy() {
        Some(proxy) => UserError::failed(format!(
            "cannot reach the proxy at {proxy} (for the API server at {server}): connection refused"
        ))
        .hint("is the proxy running? check the cluster's proxy-url in the kubeconfig, or HTTPS_PROXY/HTTP_PROXY"),
        None => UserError::failed(format!(
            "cannot reach the API server at {server}: connection refused (nothing listens there)"
        ))
        .hint(
            "is the cluster running and is the context right? (`kubectl config current-context`, --context, --server)",
        ),
    }
}

/// A failure to connect, said as what it is, never blamed on the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionFailure {
    /// The server's certificate did not verify (wrong CA, wrong name, expired): rustls's words.
    CertificateVerify(String),
    /// Connecting (TCP, then the TLS handshake) took longer than the connect timeout.
    Timeout,
    /// The credentials could not be had (an exec plugin failed, a token is not a valid header).
    Credential(String),
}

/// True for failures no retry mends (a certificate that does not verify, failed credentials):
/// they are reported at once. Timeouts are retried: a paused server may answer again.
pub fn is_unrecoverable(err: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        connection_failure(err),
        Some(ConnectionFailure::CertificateVerify(_) | ConnectionFailure::Credential(_))
    ) || is_name_not_resolved(err)
}

/// Whether the server's name does not resolve (hyper-util's "dns error"; the resolver's "failed
/// to lookup address information"): kubectl does not retry it, neither do we.
fn is_name_not_resolved(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(error) = current {
        let text = error.to_string();
        if text.starts_with("dns error") || text.contains("failed to lookup address information") {
            return true;
        }
        current = error.source();
    }
    false
}

/// Reads an error chain for a certificate, timeout or credential failure.
pub fn connection_failure(err: &(dyn std::error::Error + 'static)) -> Option<ConnectionFailure> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    // hyper-util's client says "client error (Connect)" for a failure to connect (TCP and TLS),
    // unlike a timeout reading an answer on a connection already made.
    let mut connecting = false;
    while let Some(error) = current {
        if let Some(auth) = error.downcast_ref::<kube::client::AuthError>() {
            return Some(ConnectionFailure::Credential(exec_failure_message(auth, None)));
        }
        let text = error.to_string();
        connecting |= text == "client error (Connect)";
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut && connecting {
                return Some(ConnectionFailure::Timeout);
            }
        }
        // rustls's `Error::InvalidCertificate` displays as "invalid peer certificate: ...".
        if let Some(detail) = text.strip_prefix("invalid peer certificate: ") {
            return Some(ConnectionFailure::CertificateVerify(detail.to_string()));
        }
        current = error.source();
    }
    None
}

fn explain_connection_failure(failure: &ConnectionFailure, server: &str) -> UserError {
    match failure {
        ConnectionFailure::CertificateVerify(detail) => UserError::failed(format!(
            "cannot connect to the API server at {server}: certificate verify failed: {detail}"
        ))
        .hint("check the certificate-authority of the kubeconfig's cluster (or --certificate-authority, --tls-server-name)"),
        ConnectionFailure::Timeout if tcp_accepts(server) => UserError::failed(format!(
            "cannot reach the API server at {server}: TLS handshake timed out"
        ))
        .hint("the server accepts connections but does not complete TLS: is it an API server? (--request-timeout sets the wait)"),
        ConnectionFailure::Timeout => UserError::failed(format!(
            "cannot reach the API server at {server}: connection timed out"
        ))
        .hint("is the server reachable from here (VPN, firewall, proxy)? (--request-timeout sets the wait)"),
        ConnectionFailure::Credential(message) => UserError::failed(format!(
            "cannot get credentials for the API server at {server}: {message}"
        ))
        .hint("check the user's exec plugin or token in the kubeconfig (`kubectl config view --minify`)"),
    }
}

/// Whether a plain TCP connection to the server's host and port succeeds within two seconds:
/// tells a TLS handshake that never completes from a server that never answers.
fn tcp_accepts(server: &str) -> bool {
    use std::net::ToSocketAddrs;
    let Ok(uri) = server.parse::<http::Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("http") { 80 } else { 443 });
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(addresses) = (host, port).to_socket_addrs() else {
        return false;
    };
    addresses
        .into_iter()
        .any(|address| std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(2)).is_ok())
}

/// The error of building a client (which runs an exec credential plugin), without anything the
/// plugin was given or printed.
pub fn explain_client_build_error(err: &kube::Error, server: &str, exec_command: Option<&str>) -> UserError {
    match err {
        kube::Error::Auth(auth) => explain_connection_failure(
            &ConnectionFailure::Credential(exec_failure_message(auth, exec_command)),
            server,
        ),
        kube::Error::Service(inner) if inner.downcast_ref::<ExecHung>().is_some() => {
            UserError::failed(format!(
                "cannot get credentials for the API server at {server}: {}",
                root_cause(err)
            ))
            .hint("run the kubeconfig user's exec plugin by hand to see what it waits for (a login, a prompt); --request-timeout sets the wait")
        }
        other => UserError::failed(format!("cannot build a client for {server}: {}", root_cause(other))),
    }
}

/// An authentication error as kubectl words it (client-go `plugin/pkg/client/auth/exec`:
/// "exec: executable X failed with exit code N", "json parse error"): kube's own text carries the
/// plugin's environment, arguments and output, where credentials are.
pub fn exec_failure_message(err: &kube::client::AuthError, command: Option<&str>) -> String {
    use kube::client::AuthError;
    let program = command.unwrap_or("of the exec credential plugin");
    match err {
        AuthError::AuthExecRun { out, .. } => match out.status.code() {
            Some(code) => format!("exec: executable {program} failed with exit code {code}"),
            None => format!("exec: executable {program} was killed by a signal"),
        },
        AuthError::AuthExecParse(_) => format!(
            "exec: decoding the output of executable {program}: json parse error (the output is not shown: it may hold credentials)"
        ),
        AuthError::AuthExecStart(io) if io.kind() == std::io::ErrorKind::NotFound => {
            format!("exec: executable {program} not found")
        }
        AuthError::AuthExecStart(io) => format!("exec: cannot run executable {program}: {io}"),
        AuthError::ExecPluginFailed => format!("exec: executable {program} returned no status"),
        AuthError::AuthExec(_) => "the credential plugin failed (its output is not shown: it may hold credentials)".to_string(),
        AuthError::InvalidBearerToken(_) => "the bearer token is not a valid HTTP header value".to_string(),
        AuthError::InvalidBasicAuth(_) => "the user name or password is not a valid HTTP header value".to_string(),
        other => other.to_string(),
    }
}

/// A parse error (YAML, JSON) without what the text holds: serde-saphyr quotes the lines around
/// the error (a token, a key, a Secret's data among them) and serde the values it rejects;
/// kubectl says only where and what. Keeps the first line, with quoted values elided.
pub fn without_content(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    let mut said = String::with_capacity(first.len());
    let mut quoted = false;
    for c in first.chars() {
        match c {
            '"' if quoted => {
                quoted = false;
                said.push_str("…\"");
            }
            '"' => {
                quoted = true;
                said.push('"');
            }
            _ if quoted => {}
            _ => said.push(c),
        }
    }
    said
}

/// The innermost cause of an error chain, which is usually the one that says most. Credential
/// failures are worded without what the exec plugin was given or printed.
pub fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    match connection_failure(err) {
        Some(ConnectionFailure::Credential(message)) => return message,
        Some(ConnectionFailure::CertificateVerify(detail)) => return format!("certificate verify failed: {detail}"),
        _ => {}
    }
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

/// An exec credential plugin that did not return in time.
#[derive(Debug, thiserror::Error)]
#[error("exec: executable {command} did not return within {}s", .bound.as_secs())]
pub struct ExecHung {
    /// The plugin's command, as the kubeconfig names it.
    pub command: String,
    /// How long it was given.
    pub bound: std::time::Duration,
}

/// Whether the connection was refused (nothing listens at the address, or at the proxy's).
pub fn is_connection_refused(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        if error.to_string().contains("Connection refused") {
            return true;
        }
        current = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::client::AuthError;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn lookup_errors_read_as_the_diagnosis_says_them() {
        let forbidden = kube::Error::Api(
            kube::core::Status::failure("pods is forbidden", "Forbidden")
                .with_code(403)
                .boxed(),
        );
        assert_eq!(LookupError::from_request(&forbidden), LookupError::Forbidden);
        assert_eq!(LookupError::Forbidden.to_string(), "forbidden");
        assert_eq!(
            LookupError::NotServed("Pods".into()).to_string(),
            "the server does not serve Pods"
        );
        let unlisted = LookupError::Unlisted {
            kinds: "Deployments".into(),
            cause: "connection refused".into(),
        };
        assert_eq!(
            unlisted.to_string(),
            "Deployments could not be listed: connection refused"
        );
        let unavailable = kube::Error::Api(
            kube::core::Status::failure(
                "the server is currently unable to handle the request",
                "ServiceUnavailable",
            )
            .with_code(503)
            .boxed(),
        );
        assert!(matches!(
            LookupError::from_request(&unavailable),
            LookupError::Failed(_)
        ));
    }

    #[test]
    fn exec_plugin_failures_are_worded_without_env_args_or_output() {
        let failed = AuthError::AuthExecRun {
            cmd: "SECRET_ENV=\"env-secret\" \"get-token\" \"--password=arg-secret\"".to_string(),
            out: Box::new(std::process::Output {
                status: std::process::ExitStatus::from_raw(1 << 8),
                stdout: b"stdout-secret".to_vec(),
                stderr: b"stderr-secret".to_vec(),
            }),
        };
        let message = exec_failure_message(&failed, Some("get-token"));
        assert_eq!(message, "exec: executable get-token failed with exit code 1");
        let wrapped = kube::Error::Auth(failed);
        let explained = explain_client_build_error(&wrapped, "https://k8s", Some("get-token"));
        let said = format!("{} {}", explained.message, root_cause(&wrapped));
        for secret in ["env-secret", "arg-secret", "stdout-secret", "stderr-secret"] {
            assert!(!said.contains(secret), "{said}");
        }
        assert!(said.contains("failed with exit code 1"), "{said}");
    }

    #[test]
    fn a_missing_plugin_is_named() {
        let missing = AuthError::AuthExecStart(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(
            exec_failure_message(&missing, Some("kubelogin")),
            "exec: executable kubelogin not found"
        );
    }

    #[test]
    fn certificate_failures_are_unrecoverable_and_timeouts_are_not() {
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid peer certificate: UnknownIssuer",
        );
        assert_eq!(
            connection_failure(&tls),
            Some(ConnectionFailure::CertificateVerify("UnknownIssuer".to_string()))
        );
        assert!(is_unrecoverable(&tls));
        assert_eq!(root_cause(&tls), "certificate verify failed: UnknownIssuer");
        let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "deadline has elapsed");
        assert!(!is_unrecoverable(&timeout));
    }
}
