//! From flags to the library's options: the only place that knows both.

use super::{DesiredArgs, GlobalArgs, ListTuning, ManifestArgs, SelectionArgs};
use crate::cluster::client::ConnectOptions;
use crate::cluster::collect::ListOptions;
use crate::cluster::session::SessionOptions;
use crate::error::UserError;
use crate::model::trackers::{Selection, Tracker};
use crate::prune::orphans::{DesiredOptions, ManifestSources};

impl GlobalArgs {
    /// The connection flags, for the client.
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
            namespace: self.namespace.clone(),
            as_user: self.as_user.clone(),
            as_group: self.as_group.clone(),
            as_uid: self.as_uid.clone(),
            request_timeout: self.request_timeout,
            server: self.server.clone(),
            token: self.token.clone(),
            certificate_authority: self.certificate_authority.clone(),
            client_certificate: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            tls_server_name: self.tls_server_name.clone(),
        }
    }
}

impl From<&GlobalArgs> for SessionOptions {
    fn from(global: &GlobalArgs) -> Self {
        Self {
            connect: global.connect_options(),
            cache_dir: global.cache_dir.clone(),
            discovery_cache: global.discovery_cache,
            all_namespaces: global.all_namespaces,
            watch_kinds: false,
        }
    }
}

/// Builds the selection from `-l` and `--tracker`.
pub fn selection(args: &SelectionArgs) -> Result<Selection, UserError> {
    let tracker = args.tracker.as_deref().map(Tracker::parse).transpose()?;
    Ok(Selection::new(args.selector.clone(), tracker))
}

/// List options from the tuning flags.
pub fn list_options(tuning: &ListTuning) -> ListOptions {
    ListOptions {
        concurrency: usize::from(tuning.concurrency),
        page_size: tuning.chunk_size,
        ..ListOptions::default()
    }
}

impl From<&ManifestArgs> for ManifestSources {
    fn from(args: &ManifestArgs) -> Self {
        Self {
            filenames: args.filenames.clone(),
            kustomize: args.kustomize.clone(),
        }
    }
}

impl From<&DesiredArgs> for DesiredOptions {
    fn from(args: &DesiredArgs) -> Self {
        Self {
            inventory: args.inventory.clone(),
            checksum: args.checksum.clone(),
            allow_empty: args.allow_empty,
            allow_unresolved: args.allow_unresolved,
            untracked: args.untracked,
            as_built: args.as_built,
            build_facts: crate::stack::manifest::BuildFacts::of(&args.manifests.filenames, &args.manifests.kustomize),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser;

    use crate::cli::Cli;

    #[test]
    fn connection_flags_parse_as_kubectl_spells_them() {
        let cli = Cli::try_parse_from([
            "kubectl-stack",
            "list",
            "-s",
            "https://h:6443",
            "--token",
            "t",
            "--insecure-skip-tls-verify",
            "--tls-server-name",
            "kubernetes",
            "--as-uid",
            "u",
            "--certificate-authority",
            "/ca",
            "--client-certificate",
            "/c",
            "--client-key",
            "/k",
        ])
        .unwrap();
        let connect = cli.global.connect_options();
        assert_eq!(connect.server.as_deref(), Some("https://h:6443"));
        assert_eq!(connect.token.as_deref(), Some("t"));
        assert!(connect.insecure_skip_tls_verify);
        assert_eq!(connect.tls_server_name.as_deref(), Some("kubernetes"));
        assert_eq!(connect.as_uid.as_deref(), Some("u"));
        assert_eq!(connect.certificate_authority, Some(PathBuf::from("/ca")));
        assert_eq!(connect.client_certificate, Some(PathBuf::from("/c")));
        assert_eq!(connect.client_key, Some(PathBuf::from("/k")));
        let explicit = Cli::try_parse_from(["kubectl-stack", "list", "--insecure-skip-tls-verify=false"]).unwrap();
        assert!(!explicit.global.insecure_skip_tls_verify);
    }
}
