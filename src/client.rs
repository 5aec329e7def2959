//! Kubeconfig and client: the operator's own credentials, chosen exactly as kubectl chooses them.

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

use crate::cli::GlobalArgs;
use crate::error::{explain_kube_error, UserError};

/// A connected client and what the user should be told about it.
#[derive(Clone)]
pub struct Connection {
    /// The Kubernetes client.
    pub client: Client,
    /// The namespace from `-n`, else the context's, else `default`.
    pub namespace: String,
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

/// Loads the kubeconfig: `--kubeconfig FILE`, else `$KUBECONFIG` (paths merged), else `~/.kube/config`.
pub fn load_kubeconfig(args: &GlobalArgs) -> Result<Kubeconfig, UserError> {
    let loaded = match &args.kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    };
    loaded.map_err(|err| match err {
        KubeconfigError::FindPath => UserError::failed("no kubeconfig found")
            .hint("pass --kubeconfig FILE or set KUBECONFIG (kubectl's rules apply)"),
        KubeconfigError::ReadConfig(io, path) => {
            UserError::failed(format!("cannot read kubeconfig {}: {io}", path.display()))
                .hint("pass --kubeconfig FILE or set KUBECONFIG to a readable file")
        }
        other => UserError::failed(format!("invalid kubeconfig: {other}")),
    })
}

/// Builds the client configuration from the kubeconfig and the kubectl-style flags.
pub async fn client_config(args: &GlobalArgs) -> Result<(Config, String), UserError> {
    let kubeconfig = load_kubeconfig(args)?;
    check_names(&kubeconfig, args)?;
    let user_name = args
        .user
        .clone()
        .or_else(|| current_user(&kubeconfig, args.context.as_deref()))
        .unwrap_or_else(|| "unknown".to_string());
    let options = KubeConfigOptions {
        context: args.context.clone(),
        cluster: args.cluster.clone(),
        user: args.user.clone(),
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|err| match err {
            KubeconfigError::CurrentContextNotSet => UserError::failed("the kubeconfig has no current context")
                .hint("pass --context NAME (`kubectl config get-contexts` lists them)"),
            other => UserError::failed(format!("cannot use the kubeconfig: {other}")),
        })?;
    if let Some(namespace) = &args.namespace {
        config.default_namespace = namespace.clone();
    }
    // Retries are bounded in `retry` instead: kube's layer would spend minutes on a 503.
    config.default_retry = false;
    if let Some(as_user) = &args.as_user {
        config.auth_info.impersonate = Some(as_user.clone());
    }
    if !args.as_group.is_empty() {
        config.auth_info.impersonate_groups = Some(args.as_group.clone());
    }
    if !args.request_timeout.is_zero() {
        config.connect_timeout = Some(args.request_timeout);
        config.read_timeout = Some(args.request_timeout);
        config.write_timeout = Some(args.request_timeout);
    }
    let shown_user = args.as_user.clone().unwrap_or(user_name);
    Ok((config, shown_user))
}

/// Connects with the kubectl-style flags. No request is sent yet.
pub async fn connect(args: &GlobalArgs) -> Result<Connection, UserError> {
    let (config, user) = client_config(args).await?;
    let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config)
        .map_err(|err| UserError::failed(format!("cannot build a client for {server}: {err}")))?;
    Ok(Connection {
        client,
        namespace,
        server,
        user,
    })
}

fn check_names(kubeconfig: &Kubeconfig, args: &GlobalArgs) -> Result<(), UserError> {
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

fn current_user(kubeconfig: &Kubeconfig, context: Option<&str>) -> Option<String> {
    let wanted = context.or(kubeconfig.current_context.as_deref())?;
    let named = kubeconfig.contexts.iter().find(|c| c.name == wanted)?;
    named.context.as_ref().and_then(|c| c.user.clone())
}
