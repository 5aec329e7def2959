//! Finding and reading the kubeconfig as client-go's loading rules do.

use std::path::{Path, PathBuf};

use kube::config::{Kubeconfig, KubeconfigError};

use super::ConnectOptions;
use crate::error::UserError;

/// Loads the kubeconfig: `--kubeconfig FILE`, else `$KUBECONFIG` (the files that exist, merged),
/// else `~/.kube/config`. Fails when there is none.
pub fn load_kubeconfig(args: &ConnectOptions) -> Result<Kubeconfig, UserError> {
    find_kubeconfig(args)?.ok_or_else(no_kubeconfig)
}

pub(super) fn no_kubeconfig() -> UserError {
    UserError::failed("no kubeconfig found")
        .hint("pass --kubeconfig FILE, set KUBECONFIG, or give --server (with --token or a client certificate)")
}

/// The kubeconfig as client-go's loading rules find it, or `None` when no file exists at all.
pub(super) fn find_kubeconfig(args: &ConnectOptions) -> Result<Option<Kubeconfig>, UserError> {
    if let Some(path) = &args.kubeconfig {
        // An explicit --kubeconfig must exist (client-go: ExplicitPath).
        return read_kubeconfig(path).map(Some);
    }
    let listed = std::env::var_os("KUBECONFIG")
        .map(|value| kubeconfig_paths(&value))
        .unwrap_or_default();
    if listed.is_empty() {
        return match home_kubeconfig() {
            Some(path) if path.exists() => read_kubeconfig(&path).map(Some),
            _ => Ok(None),
        };
    }
    let mut merged: Option<Kubeconfig> = None;
    for path in &listed {
        if !path.exists() {
            // kubectl skips files of the list that do not exist.
            tracing::debug!("KUBECONFIG file {} does not exist; skipped", path.display());
            continue;
        }
        let next = read_kubeconfig(path)?;
        merged = Some(match merged {
            None => next,
            Some(first) => first.merge(next).map_err(|err| invalid_kubeconfig(path, &err))?,
        });
    }
    if merged.is_none() && args.server.is_none() {
        let names: Vec<String> = listed.iter().map(|p| p.display().to_string()).collect();
        return Err(
            UserError::failed(format!("none of the files in KUBECONFIG exist: {}", names.join(", ")))
                .hint("set KUBECONFIG to existing files, pass --kubeconfig FILE, or give --server"),
        );
    }
    Ok(merged)
}

/// The paths of a `KUBECONFIG` value: split as the OS does, empty ones ignored, duplicates dropped.
pub fn kubeconfig_paths(value: &std::ffi::OsStr) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for path in std::env::split_paths(value) {
        if !path.as_os_str().is_empty() && !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

fn home_kubeconfig() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var_os("USERPROFILE").filter(|h| !h.is_empty()))?;
    Some(PathBuf::from(home).join(".kube").join("config"))
}

fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, UserError> {
    Kubeconfig::read_from(path).map_err(|err| match err {
        KubeconfigError::ReadConfig(io, path) => {
            UserError::failed(format!("cannot read kubeconfig {}: {io}", path.display()))
                .hint("pass --kubeconfig FILE or set KUBECONFIG to a readable file")
        }
        other => invalid_kubeconfig(path, &other),
    })
}

fn invalid_kubeconfig(path: &Path, err: &KubeconfigError) -> UserError {
    UserError::failed(format!(
        "invalid kubeconfig {}: {}",
        path.display(),
        crate::error::without_content(&err.to_string())
    ))
    .hint("`kubectl config view` shows what kubectl makes of it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubeconfig_that_does_not_parse_is_reported_without_its_content() {
        let dir = std::env::temp_dir().join(format!("kubectl-stack-badkc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: secret-token-1234\n    client-key-data: [secret-key\n",
        )
        .unwrap();
        let err = read_kubeconfig(&path).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(err.message.contains("line 7"), "{}", err.message);
        assert!(!err.message.contains("secret-"), "{}", err.message);
        assert_eq!(
            crate::error::without_content("invalid type: string \"hunter2\", expected a sequence\n  | more"),
            "invalid type: string \"…\", expected a sequence"
        );
    }

    #[test]
    fn kubeconfig_lists_drop_empty_and_repeated_paths() {
        let joined = std::env::join_paths(["/a", "", "/b", "/a"]).unwrap();
        assert_eq!(
            kubeconfig_paths(&joined),
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
    }
}
