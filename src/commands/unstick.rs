//! `kubectl stack unstick`: break-glass removal of finalizers, only from objects already being
//! deleted, only the finalizers named, after a backup, a warning of what may be lost, and a
//! confirmation.

use std::path::PathBuf;
use std::sync::Arc;

use kube::api::DynamicObject;

use crate::cli::{DryRun, GlobalArgs, UnstickArgs};
use crate::commands::{confirm, resolve_typed, Session};
use crate::discovery::KindInfo;
use crate::error::{exit, is_not_found, UserError};
use crate::finalize::{apply_change, write_backups, FinalizerChange, Removal, UnstickError};
use crate::retry::with_retries;
use crate::stuck::what_may_be_lost;

/// One object to unstick: as read, and the change.
struct Chosen {
    kind: Arc<KindInfo>,
    object: DynamicObject,
    change: FinalizerChange,
}

/// Runs `unstick`.
pub async fn run(global: &GlobalArgs, args: UnstickArgs) -> anyhow::Result<u8> {
    let session = Session::open(global).await?;
    let removal = if args.all_finalizers {
        Removal::All
    } else {
        Removal::Named(args.finalizers.clone())
    };
    let chosen = read_targets(&session, &args, &removal).await?;
    if chosen.is_empty() {
        eprintln!("Nothing to change: none of the named finalizers is on these objects.");
        return Ok(exit::OK);
    }
    explain(&chosen);
    if args.dry_run == DryRun::Client {
        eprintln!("Dry run (client): nothing was changed.");
        return Ok(exit::OK);
    }
    if args.dry_run == DryRun::None {
        confirm(
            &format!("Remove these finalizers from {} object(s)?", chosen.len()),
            args.yes,
            "nothing was changed",
        )?;
    }
    let dir = args.backup_dir.clone().unwrap_or_else(default_backup_dir);
    let backups: Vec<(DynamicObject, Arc<KindInfo>)> =
        chosen.iter().map(|c| (c.object.clone(), c.kind.clone())).collect();
    let written = write_backups(&dir, &backups).map_err(|err| {
        UserError::failed(format!(
            "cannot write the backup in {}: {err}; nothing was changed",
            dir.display()
        ))
    })?;
    eprintln!(
        "backup: {} object(s) written to {} (mode 0600)",
        written.len(),
        dir.display()
    );
    let mut incomplete = false;
    for target in &chosen {
        let id = crate::collect::Listed::new(target.kind.clone(), target.object.metadata.clone()).id();
        let dry_run = args.dry_run == DryRun::Server;
        match apply_change(
            &session.connection.client,
            &target.kind,
            &target.object,
            &target.change,
            dry_run,
        )
        .await
        {
            Ok(()) if dry_run => println!(
                "{id}: the server accepts removing {}",
                target.change.removed().join(", ")
            ),
            Ok(()) => println!("{id}: removed {}", target.change.removed().join(", ")),
            Err(UnstickError::Changed) => {
                incomplete = true;
                eprintln!("error: {id}: {}", UnstickError::Changed);
            }
            Err(err) => {
                incomplete = true;
                eprintln!("error: {id}: {err}");
            }
        }
    }
    if incomplete {
        eprintln!("hint: run `kubectl stack stuck` on them again, then repeat the command if still needed");
        return Ok(exit::INCOMPLETE);
    }
    Ok(exit::OK)
}

async fn read_targets(session: &Session, args: &UnstickArgs, removal: &Removal) -> Result<Vec<Chosen>, UserError> {
    let mut chosen = Vec::new();
    for target in &args.targets {
        let (kind, id) = resolve_typed(session, target)?;
        let id = id.ok_or_else(|| {
            UserError::usage(format!("{target}: give TYPE/NAME (unstick acts only on named objects)"))
        })?;
        let api = crate::collect::api_for(&session.connection.client, &kind, id.namespace.as_deref());
        let object = match with_retries("get", || api.get(&id.name)).await {
            Ok(object) => object,
            Err(err) if is_not_found(&err) => {
                eprintln!("{id} is already gone");
                continue;
            }
            Err(err) => return Err(session.connection.explain(&err)),
        };
        if object.metadata.deletion_timestamp.is_none() && !args.force {
            return Err(
                UserError::refused(format!("{id} is not being deleted: its finalizers are not in the way"))
                    .hint("delete it first; or, if you really mean it, --force (named objects only)"),
            );
        }
        let is_namespace = kind.group.is_empty() && kind.kind == "Namespace";
        let change = FinalizerChange::plan(&object, is_namespace, removal);
        if change.is_noop() {
            eprintln!("{id}: none of the named finalizers is on it");
            continue;
        }
        chosen.push(Chosen { kind, object, change });
    }
    Ok(chosen)
}

fn explain(chosen: &[Chosen]) {
    for target in chosen {
        let id = crate::collect::Listed::new(target.kind.clone(), target.object.metadata.clone()).id();
        eprintln!("{id}:");
        for finalizer in target.change.removed() {
            eprintln!("  remove {finalizer}: {}", what_may_be_lost(&finalizer));
        }
    }
}

fn default_backup_dir() -> PathBuf {
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    PathBuf::from(format!("kubectl-stack-backup-{stamp}"))
}
