//! Kubeconfig and client: the operator's own credentials, chosen exactly as kubectl chooses them.
//!
//! The kubeconfig is loaded as client-go's loading rules do (`--kubeconfig FILE`, which must exist;
//! else every file of `KUBECONFIG` that exists, merged, first value wins; else `~/.kube/config`),
//! then the connection flags override it as client-go's `DirectClientConfig` does (`getCluster`,
//! `getAuthInfo` in `tools/clientcmd/client_config.go`): flag over kubeconfig over environment.

use std::path::PathBuf;

use kube::config::{AuthInfo, Cluster, Context, ExecAuthCluster, Kubeconfig};
use kube::{Client, Config};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use secrecy::SecretString;

use crate::error::{explain_client_build_error, explain_kube_error, ExecHung, UserError};

mod kubeconfig;

use crate::cluster::proxy::{proxy_for, ProxyEnv};
use kubeconfig::{find_kubeconfig, no_kubeconfig};
pub use kubeconfig::{kubeconfig_paths, load_kubeconfig};

/// How long connecting (TCP and the TLS handshake) may take when `--request-timeout` is not given.
pub const DEFAULT_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What to connect with: the kubeconfig to load and the overrides of it, as kubectl's connection
/// flags give them (`cli` maps the flags to this).
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// An explicit kubeconfig file (must exist); else `$KUBECONFIG`, else `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    pub context: Option<String>,
    /// The kubeconfig cluster to use.
    pub cluster: Option<String>,
    /// The kubeconfig user to use.
    pub user: Option<String>,
    /// The namespace (empty or none: the context's, else `default`).
    pub namespace: Option<String>,
    /// User to impersonate.
    pub as_user: Option<String>,
    /// Groups to impersonate.
    pub as_group: Vec<String>,
    /// UID to impersonate.
    pub as_uid: Option<String>,
    /// How long one API request may take (zero: no limit, connecting within
    /// [`DEFAULT_CONNECT_TIMEOUT`]).
    pub request_timeout: std::time::Duration,
    /// The API server's address (works without a kubeconfig).
    pub server: Option<String>,
    /// A bearer token (wins over the kubeconfig user's other credentials).
    pub token: Option<String>,
    /// A certificate authority file.
    pub certificate_authority: Option<PathBuf>,
    /// A client certificate file.
    pub client_certificate: Option<PathBuf>,
    /// A client key file.
    pub client_key: Option<PathBuf>,
    /// Do not verify the server's certificate.
    pub insecure_skip_tls_verify: bool,
    /// The name to verify the server's certificate against (and send as SNI).
    pub tls_server_name: Option<String>,
}

/// A connected client and what the user should be told about it.
#[derive(Clone)]
pub struct Connection {
    /// The Kubernetes client.
    pub client: Client,
    /// The namespace from `-n`, else the context's, else `default`.
    pub namespace: String,
    /// Whether `-n` gave it (a tool whose namespace the cluster does not record, kapp's
    /// `deploy -n`, takes the user's word only).
    pub namespace_given: bool,
    /// The API server URL, for error messages.
    pub server: String,
    /// The user name as the kubeconfig or `--as` gives it, for error messages.
    pub user: String,
}

impl Connection {
    /// Turns a client error into one that names this server and user.
    pub fn explain(&self, err: &kube::Error) -> UserError {
        explain_kube_error(err, &self.server, &self.user)
    }
}

/// The cluster, user and namespace a command connects with, after the flags are applied.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// The cluster entry (server, CA, TLS settings, proxy).
    pub cluster: Cluster,
    /// The credentials.
    pub auth: AuthInfo,
    /// The namespace: `-n` (when not empty), else the context's, else `default`.
    pub namespace: String,
    /// The user name to show in messages.
    pub user_name: String,
}

/// Applies kubectl's precedence to a kubeconfig (possibly none) and the flags.
pub fn resolve(kubeconfig: Option<&Kubeconfig>, args: &ConnectOptions) -> Result<Resolved, UserError> {
    let empty = Kubeconfig::default();
    let kubeconfig = kubeconfig.unwrap_or(&empty);
    check_names(kubeconfig, args)?;
    let context_name = args
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .filter(|name| !name.is_empty());
    let context = match &context_name {
        Some(name) => find_context(kubeconfig, name).ok_or_else(|| {
            UserError::failed(format!("the current context \"{name}\" is not in the kubeconfig"))
                .hint("pass --context NAME (`kubectl config get-contexts` lists them)")
        })?,
        None => Context::default(),
    };
    let cluster_name = args.cluster.clone().unwrap_or_else(|| context.cluster.clone());
    let user_name = args.user.clone().or_else(|| context.user.clone());
    let mut cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .unwrap_or_default();
    let mut auth = user_name
        .as_ref()
        .and_then(|name| kubeconfig.auth_infos.iter().find(|u| &u.name == name))
        .and_then(|u| u.auth_info.clone())
        .unwrap_or_default();
    override_cluster(&mut cluster, args);
    override_auth(&mut auth, args);
    trim_token_file(&mut auth)?;
    let namespace = args
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .or_else(|| context.namespace.clone().filter(|ns| !ns.is_empty()))
        .unwrap_or_else(|| "default".to_string());
    let shown_user = args
        .as_user
        .clone()
        .or(user_name)
        .unwrap_or_else(|| "unknown".to_string());
    Ok(Resolved {
        cluster,
        auth,
        namespace,
        user_name: shown_user,
    })
}

fn find_context(kubeconfig: &Kubeconfig, name: &str) -> Option<Context> {
    kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.context.clone().unwrap_or_default())
}

/// client-go's `getCluster` overrides: `--server`; `--certificate-authority` or
/// `--insecure-skip-tls-verify` replace the kubeconfig's CA and skip setting together;
/// `--tls-server-name` (also cleared by `--server` alone).
fn override_cluster(cluster: &mut Cluster, args: &ConnectOptions) {
    if let Some(server) = &args.server {
        cluster.server = Some(server.clone());
    }
    if args.insecure_skip_tls_verify || args.certificate_authority.is_some() {
        cluster.insecure_skip_tls_verify = Some(args.insecure_skip_tls_verify);
        cluster.certificate_authority = args.certificate_authority.as_ref().map(|p| p.display().to_string());
        cluster.certificate_authority_data = None;
    }
    if args.tls_server_name.is_some() || args.server.is_some() {
        cluster.tls_server_name = args.tls_server_name.clone();
    }
}

/// client-go's `getAuthInfo` overrides: `--token` (a bearer token wins over the kubeconfig's other
/// credentials), `--client-certificate`/`--client-key` (replacing the embedded data), and
/// impersonation (`--as`, `--as-group`, `--as-uid`).
fn override_auth(auth: &mut AuthInfo, args: &ConnectOptions) {
    if let Some(token) = &args.token {
        auth.token = Some(SecretString::from(token.clone()));
        auth.token_file = None;
        auth.exec = None;
        auth.auth_provider = None;
        auth.username = None;
        auth.password = None;
    }
    if let Some(path) = &args.client_certificate {
        auth.client_certificate = Some(path.display().to_string());
        auth.client_certificate_data = None;
    }
    if let Some(path) = &args.client_key {
        auth.client_key = Some(path.display().to_string());
        auth.client_key_data = None;
    }
    if let Some(user) = &args.as_user {
        auth.impersonate = Some(user.clone());
    }
    if !args.as_group.is_empty() {
        auth.impersonate_groups = Some(args.as_group.clone());
    }
    if let Some(uid) = &args.as_uid {
        auth.impersonate_uid = Some(uid.clone());
    }
}

/// Reads a `tokenFile` once, trimmed of surrounding white space as client-go does
/// (`transport.NewCachedFileTokenSource`): a token file written by `echo` ends in a newline.
fn trim_token_file(auth: &mut AuthInfo) -> Result<(), UserError> {
    if auth.token.is_some() {
        auth.token_file = None;
        return Ok(());
    }
    let Some(path) = auth.token_file.take() else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|err| UserError::failed(format!("cannot read the tokenFile {path}: {err}")))?;
    auth.token = Some(SecretString::from(text.trim().to_string()));
    Ok(())
}

/// Builds the client configuration from the kubeconfig and the kubectl-style flags.
pub async fn client_config(args: &ConnectOptions) -> Result<(Config, String), UserError> {
    let kubeconfig = find_kubeconfig(args)?;
    if kubeconfig.is_none() && args.server.is_none() {
        return Err(no_kubeconfig());
    }
    let resolved = resolve(kubeconfig.as_ref(), args)?;
    let config = build_config(resolved.clone(), args, &ProxyEnv::from_env())?;
    Ok((config, resolved.user_name))
}

/// The kube client configuration for a resolved cluster and user.
pub fn build_config(resolved: Resolved, args: &ConnectOptions, proxy_env: &ProxyEnv) -> Result<Config, UserError> {
    let Resolved {
        cluster,
        mut auth,
        namespace,
        ..
    } = resolved;
    let server = cluster.server.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
        UserError::failed("the kubeconfig's cluster has no server")
            .hint("pass --server URL, or --context/--cluster naming a cluster with a server")
    })?;
    let bare = without_userinfo(&server);
    if bare != server {
        tracing::warn!(
            "the credentials in the server URL are ignored (never sent, never printed): give them as a kubeconfig user"
        );
    }
    let cluster_url = server_uri(&bare)?;
    let mut config = Config::new(cluster_url.clone());
    config.default_namespace = namespace;
    config.root_cert = certificate_authority(&cluster)?;
    config.accept_invalid_certs = cluster.insecure_skip_tls_verify.unwrap_or(false);
    config.tls_server_name = cluster.tls_server_name.clone().filter(|n| !n.is_empty());
    config.disable_compression = cluster.disable_compression.unwrap_or(false);
    config.proxy_url = proxy_for(&cluster_url, cluster.proxy_url.as_deref(), proxy_env).map_err(|err| {
        UserError::failed(err.to_string()).hint("fix the proxy setting (kubeconfig proxy-url, HTTPS_PROXY)")
    })?;
    check_readable("client certificate", auth.client_certificate.as_deref())?;
    check_readable("client key", auth.client_key.as_deref())?;
    if let Some(exec) = auth.exec.as_mut() {
        if exec.provide_cluster_info {
            exec.cluster = Some(
                ExecAuthCluster::try_from(&cluster)
                    .map_err(|err| UserError::failed(format!("cannot pass the cluster to the exec plugin: {err}")))?,
            );
        }
    }
    config.auth_info = auth;
    // Retries are bounded in `retry` instead: kube's layer would spend minutes on a 503.
    config.default_retry = false;
    if args.request_timeout.is_zero() {
        // kubectl's TLS handshake timeout: a hung handshake fails in about 55 s with the retries
        // (kube's default of 30 s made it 153 s).
        config.connect_timeout = Some(DEFAULT_CONNECT_TIMEOUT);
    } else {
        config.connect_timeout = Some(args.request_timeout);
        config.read_timeout = Some(args.request_timeout);
        config.write_timeout = Some(args.request_timeout);
    }
    Ok(config)
}

/// The server URL; one without a scheme is taken as `https://`.
/// A URL without the `user:password@` it may carry: what is printed in messages.
pub fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

fn server_uri(server: &str) -> Result<http::Uri, UserError> {
    let text = if server.contains("://") {
        server.to_string()
    } else {
        format!("https://{server}")
    };
    text.parse::<http::Uri>()
        .ok()
        .filter(|uri| uri.host().is_some())
        .ok_or_else(|| {
            UserError::usage(format!("invalid server URL {:?}", without_userinfo(server)))
                .hint("e.g. --server https://HOST:6443")
        })
}

/// The CA certificates (DER) from `certificate-authority` (a file) or `certificate-authority-data`.
fn certificate_authority(cluster: &Cluster) -> Result<Option<Vec<Vec<u8>>>, UserError> {
    let (pem, origin) = if let Some(data) = cluster.certificate_authority_data.as_deref().filter(|d| !d.is_empty()) {
        use base64::Engine;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|err| UserError::failed(format!("invalid certificate-authority-data in the kubeconfig: {err}")))?;
        (decoded, "certificate-authority-data".to_string())
    } else if let Some(path) = cluster.certificate_authority.as_deref().filter(|p| !p.is_empty()) {
        let bytes = std::fs::read(path)
            .map_err(|err| UserError::failed(format!("cannot read the certificate authority {path}: {err}")))?;
        (bytes, path.to_string())
    } else {
        return Ok(None);
    };
    let certificates: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .map(|der| der.as_ref().to_vec())
        .collect();
    if certificates.is_empty() {
        return Err(UserError::failed(format!(
            "no PEM certificate found in the certificate authority {origin}"
        )));
    }
    Ok(Some(certificates))
}

fn check_readable(what: &str, path: Option<&str>) -> Result<(), UserError> {
    match path {
        Some(path) if !path.is_empty() => std::fs::metadata(path)
            .map(|_| ())
            .map_err(|err| UserError::failed(format!("cannot read the {what} {path}: {err}"))),
        _ => Ok(()),
    }
}

/// Connects with the kubectl-style flags. No request is sent yet (an exec credential plugin runs).
pub async fn connect(args: &ConnectOptions) -> Result<Connection, UserError> {
    let (config, user) = client_config(args).await?;
    let server = without_userinfo(config.cluster_url.to_string().trim_end_matches('/'));
    let namespace = config.default_namespace.clone();
    let exec_command = config.auth_info.exec.as_ref().and_then(|e| e.command.clone());
    crate::cluster::retry::set_attempt_bound(args.request_timeout);
    crate::error::set_proxy(config.proxy_url.as_ref().map(|u| without_userinfo(&u.to_string())));
    let client = match exec_command.as_deref() {
        // Building the client runs the exec plugin, and waits for it: bounded.
        Some(command) => build_bounded(config, exec_bound(args.request_timeout), command).await,
        None => Client::try_from(config),
    }
    .map_err(|err| explain_client_build_error(&err, &server, exec_command.as_deref()))?;
    Ok(Connection {
        client,
        namespace,
        namespace_given: args.namespace.as_deref().is_some_and(|n| !n.is_empty()),
        server,
        user,
    })
}

/// How long an exec credential plugin may take: `--request-timeout`, else
/// [`DEFAULT_EXEC_BOUND`].
pub fn exec_bound(request_timeout: std::time::Duration) -> std::time::Duration {
    if request_timeout.is_zero() {
        DEFAULT_EXEC_BOUND
    } else {
        request_timeout
    }
}

/// How long an exec credential plugin may take without `--request-timeout`: long enough to log
/// in through a browser, not forever.
pub const DEFAULT_EXEC_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

/// Builds the client (which runs the exec plugin `command` and waits for its output) on a thread
/// of its own, waiting at most `bound`: a plugin that never returns is named, never waited for.
async fn build_bounded(config: Config, bound: std::time::Duration, command: &str) -> Result<Client, kube::Error> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Handle::current();
    // A plain thread, not the runtime's: the process does not wait for it when it ends.
    std::thread::spawn(move || {
        let _entered = runtime.enter();
        let _ = sender.send(Client::try_from(config));
    });
    match tokio::time::timeout(bound, receiver).await {
        Ok(Ok(built)) => built,
        _ => Err(kube::Error::Service(Box::new(ExecHung {
            command: command.to_string(),
            bound,
        }))),
    }
}

fn check_names(kubeconfig: &Kubeconfig, args: &ConnectOptions) -> Result<(), UserError> {
    let known = |names: Vec<&str>, what: &str, wanted: &Option<String>| -> Result<(), UserError> {
        match wanted {
            Some(name) if !names.contains(&name.as_str()) => Err(UserError::failed(format!(
                "{what} \"{name}\" is not in the kubeconfig"
            ))
            .hint(format!(
                "known {what}s: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ))),
            _ => Ok(()),
        }
    };
    known(
        kubeconfig.contexts.iter().map(|c| c.name.as_str()).collect(),
        "context",
        &args.context,
    )?;
    known(
        kubeconfig.clusters.iter().map(|c| c.name.as_str()).collect(),
        "cluster",
        &args.cluster,
    )?;
    known(
        kubeconfig.auth_infos.iter().map(|u| u.name.as_str()).collect(),
        "user",
        &args.user,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: main
contexts:
- name: main
  context: {cluster: prod, user: ops, namespace: shop}
- name: bare
  context: {cluster: prod, user: ops}
clusters:
- name: prod
  cluster:
    server: https://k8s.example.com:6443
    certificate-authority-data: Zm9v
    tls-server-name: api.internal
users:
- name: ops
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: get-token
      interactiveMode: Never
"#;

    fn kubeconfig() -> Kubeconfig {
        Kubeconfig::from_yaml(KUBECONFIG).unwrap()
    }

    #[test]
    fn without_flags_the_kubeconfig_decides() {
        let resolved = resolve(Some(&kubeconfig()), &ConnectOptions::default()).unwrap();
        assert_eq!(resolved.cluster.server.as_deref(), Some("https://k8s.example.com:6443"));
        assert_eq!(resolved.cluster.tls_server_name.as_deref(), Some("api.internal"));
        assert_eq!(resolved.namespace, "shop");
        assert_eq!(resolved.user_name, "ops");
        assert!(resolved.auth.exec.is_some());
    }

    #[test]
    fn flags_win_over_the_kubeconfig_as_in_client_go() {
        let args = ConnectOptions {
            server: Some("https://10.0.0.1:6443".into()),
            token: Some("flag-token".into()),
            certificate_authority: Some("/etc/ca.pem".into()),
            client_certificate: Some("/etc/me.crt".into()),
            client_key: Some("/etc/me.key".into()),
            as_user: Some("jane".into()),
            as_uid: Some("uid-7".into()),
            as_group: vec!["ops".into()],
            ..Default::default()
        };
        let resolved = resolve(Some(&kubeconfig()), &args).unwrap();
        let cluster = &resolved.cluster;
        assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(cluster.certificate_authority_data, None);
        assert_eq!(cluster.insecure_skip_tls_verify, Some(false));
        // --server alone clears the kubeconfig's tls-server-name.
        assert_eq!(cluster.tls_server_name, None);
        let auth = &resolved.auth;
        assert_eq!(
            auth.token.as_ref().map(|t| t.expose_secret().to_string()).as_deref(),
            Some("flag-token")
        );
        assert!(auth.exec.is_none(), "a bearer token wins over the exec plugin");
        assert_eq!(auth.client_certificate.as_deref(), Some("/etc/me.crt"));
        assert_eq!(auth.client_certificate_data, None);
        assert_eq!(auth.client_key.as_deref(), Some("/etc/me.key"));
        assert!(auth.client_key_data.is_none());
        assert_eq!(auth.impersonate.as_deref(), Some("jane"));
        assert_eq!(auth.impersonate_uid.as_deref(), Some("uid-7"));
        assert_eq!(auth.impersonate_groups, Some(vec!["ops".to_string()]));
        assert_eq!(resolved.user_name, "jane");
    }

    #[test]
    fn insecure_skip_tls_verify_clears_the_kubeconfig_ca_and_tls_server_name_overrides() {
        let args = ConnectOptions {
            insecure_skip_tls_verify: true,
            tls_server_name: Some("kubernetes".into()),
            ..Default::default()
        };
        let cluster = resolve(Some(&kubeconfig()), &args).unwrap().cluster;
        assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
        assert_eq!(cluster.certificate_authority_data, None);
        assert_eq!(cluster.tls_server_name.as_deref(), Some("kubernetes"));
    }

    #[test]
    fn an_empty_namespace_flag_is_the_context_namespace_then_default() {
        let empty = ConnectOptions {
            namespace: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(resolve(Some(&kubeconfig()), &empty).unwrap().namespace, "shop");
        let bare = ConnectOptions {
            context: Some("bare".into()),
            namespace: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(resolve(Some(&kubeconfig()), &bare).unwrap().namespace, "default");
        let named = ConnectOptions {
            namespace: Some("web".into()),
            ..Default::default()
        };
        assert_eq!(resolve(Some(&kubeconfig()), &named).unwrap().namespace, "web");
    }

    #[test]
    fn a_server_and_token_need_no_kubeconfig() {
        let args = ConnectOptions {
            server: Some("k8s.example.com:6443".into()),
            token: Some("t".into()),
            ..Default::default()
        };
        let resolved = resolve(None, &args).unwrap();
        assert_eq!(resolved.namespace, "default");
        let config = build_config(resolved, &args, &ProxyEnv::default()).unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://k8s.example.com:6443/");
        assert_eq!(config.connect_timeout, Some(DEFAULT_CONNECT_TIMEOUT));
        assert!(!config.default_retry);
    }

    #[test]
    fn a_token_file_is_read_once_and_trimmed() {
        let path = std::env::temp_dir().join(format!("kubectl-stack-token-{}", std::process::id()));
        std::fs::write(&path, "  abc.def\n\n").unwrap();
        let mut auth = AuthInfo {
            token_file: Some(path.display().to_string()),
            ..Default::default()
        };
        trim_token_file(&mut auth).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            auth.token.map(|t| t.expose_secret().to_string()).as_deref(),
            Some("abc.def")
        );
        assert!(auth.token_file.is_none());
    }

    #[test]
    fn the_proxy_goes_into_the_client_configuration() {
        let args = ConnectOptions::default();
        let mut resolved = resolve(Some(&kubeconfig()), &args).unwrap();
        resolved.cluster.certificate_authority_data = None;
        let env = ProxyEnv {
            https_proxy: Some("http://proxy.corp:3128".into()),
            ..Default::default()
        };
        let config = build_config(resolved.clone(), &args, &env).unwrap();
        assert_eq!(
            config.proxy_url.map(|u| u.to_string()).as_deref(),
            Some("http://proxy.corp:3128/")
        );
        let bypass = ProxyEnv {
            no_proxy: Some(".example.com".into()),
            ..env
        };
        assert_eq!(build_config(resolved, &args, &bypass).unwrap().proxy_url, None);
    }

    #[test]
    fn a_password_in_the_server_url_is_never_printed() {
        assert_eq!(
            without_userinfo("https://admin:SECRET@127.0.0.1:6443/k8s"),
            "https://127.0.0.1:6443/k8s"
        );
        assert_eq!(without_userinfo("https://h:6443"), "https://h:6443");
        assert_eq!(without_userinfo("admin:SECRET@h:6443"), "h:6443");
        let refused = server_uri("https://admin:SECRET@").unwrap_err();
        assert!(!refused.message.contains("SECRET"), "{}", refused.message);
    }
}
