//! `kubectl stack unstick`: break-glass removal of finalizers, only from objects already being
//! deleted, only the finalizers named, after a backup, a warning of what may be lost, and a
//! confirmation.

use std::path::PathBuf;
use std::sync::Arc;

use kube::api::DynamicObject;

use super::confirm;
use crate::breakglass::stuck::chains::{chain_below, unstick_command};
use crate::breakglass::stuck::{explain, what_may_be_lost, DiagnosisContext};
use crate::breakglass::unstick::{apply_change, create_run_dir, write_backups, FinalizerChange, Removal};
use crate::cli::{DryRun, GlobalArgs, UnstickArgs};
use crate::cluster::discovery::KindInfo;
use crate::cluster::retry::with_retries;
use crate::cluster::session::{resolve_typed, Session};
use crate::error::{exit, is_not_found, UserError};

/// Where backups go unless `--backup-dir` says otherwise: each run makes a new directory in it.
const DEFAULT_BACKUP_DIR: &str = "kubectl-stack-backups";

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
        crate::say!("Nothing to change: none of the named finalizers is on these objects.");
        return Ok(exit::OK);
    }
    show_losses(&chosen);
    warn_when_not_the_cause(&session, &chosen).await;
    if args.dry_run == DryRun::Client {
        crate::say!("Dry run (client): nothing was changed.");
        return Ok(exit::OK);
    }
    if args.dry_run == DryRun::None
        && !confirm(
            &format!("Remove these finalizers from {} object(s)?", chosen.len()),
            args.yes,
            "Nothing was changed.",
        )?
    {
        return Ok(exit::OK);
    }
    let base = args
        .backup_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BACKUP_DIR));
    write_all_backups(&base, &chosen)?;
    let dry_run = args.dry_run == DryRun::Server;
    let mut incomplete = false;
    for target in &chosen {
        let id = crate::cluster::collect::Listed::new(target.kind.clone(), target.object.metadata.clone()).id();
        match apply_change(
            &session.connection.client,
            &target.kind,
            &target.object,
            &target.change,
            dry_run,
        )
        .await
        {
            Ok(_) if dry_run => crate::render::emit(&format!(
                "{id}: the server accepts removing {}\n",
                target.change.removed().join(", ")
            ))?,
            Ok(done) => crate::render::emit(&format!("{id}: {}\n", done.describe()))?,
            Err(stopped) => {
                incomplete = true;
                crate::say!("error: {id}: {}; {}", stopped.error, stopped.done.describe());
            }
        }
    }
    if incomplete {
        crate::say!("hint: run `kubectl stack stuck` on them again, then repeat the command if still needed");
        return Ok(exit::INCOMPLETE);
    }
    Ok(exit::OK)
}

/// Writes this run's backups into a new directory under `base`, naming each file.
fn write_all_backups(base: &std::path::Path, chosen: &[Chosen]) -> Result<(), UserError> {
    let failed = |err: std::io::Error| {
        UserError::failed(format!(
            "cannot write the backup under {}: {err}; nothing was changed",
            base.display()
        ))
    };
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let dir = create_run_dir(base, &stamp).map_err(failed)?;
    let backups: Vec<(DynamicObject, Arc<KindInfo>)> =
        chosen.iter().map(|c| (c.object.clone(), c.kind.clone())).collect();
    let written = write_backups(&dir, &backups).map_err(failed)?;
    for (target, path) in chosen.iter().zip(&written) {
        let id = crate::cluster::collect::Listed::new(target.kind.clone(), target.object.metadata.clone()).id();
        crate::say!("backup: {id} -> {} (mode 0600)", path.display());
    }
    Ok(())
}

/// Warns when an object waits for other stuck objects: removing its finalizers does not touch
/// the cause, which is named with the command for just it.
async fn warn_when_not_the_cause(session: &Session, chosen: &[Chosen]) {
    let objects: Vec<crate::cluster::collect::Listed> = chosen
        .iter()
        .filter(|c| c.object.metadata.deletion_timestamp.is_some())
        .map(|c| crate::cluster::collect::Listed::new(c.kind.clone(), c.object.metadata.clone()))
        .collect();
    if objects.is_empty() {
        return;
    }
    let mut context = DiagnosisContext::load(session).await;
    let report = explain(session, &mut context, objects.clone()).await;
    for object in &objects {
        let id = object.id();
        let Some(chain) = chain_below(&report, &id) else {
            continue;
        };
        let waited: Vec<String> = report
            .edges
            .iter()
            .filter(|e| e.from == chain.root)
            .map(|e| format!("{} ({})", report.entries[e.to].object.id(), e.finalizer))
            .collect();
        crate::say!("warning: {id} is not the cause: it waits for {}", waited.join(", "));
        for cut in &chain.cuts {
            let leaf = &report.entries[cut.entry].object;
            if cut.finalizers.is_empty() {
                crate::say!(
                    "warning: the cause is {}: see `kubectl stack stuck` for what it waits for",
                    leaf.id()
                );
            } else {
                crate::say!(
                    "warning: the cause is {} (finalizer {}); removing only that releases the chain: {}",
                    leaf.id(),
                    cut.finalizers.join(", "),
                    unstick_command(leaf, &cut.finalizers)
                );
            }
        }
    }
}

async fn read_targets(session: &Session, args: &UnstickArgs, removal: &Removal) -> Result<Vec<Chosen>, UserError> {
    let mut chosen = Vec::new();
    for target in &args.targets {
        let (kind, id) = resolve_typed(session, target)?;
        let id = id.ok_or_else(|| {
            UserError::usage(format!("{target}: give TYPE/NAME (unstick acts only on named objects)"))
        })?;
        let api = crate::cluster::collect::api_for(&session.connection.client, &kind, id.namespace.as_deref());
        let object = match with_retries("get", || api.get(&id.name)).await {
            Ok(object) => object,
            // Not found is not "gone": nothing says it was there; nothing is changed.
            Err(err) if is_not_found(&err) => {
                let error = super::not_found(&kind, &id);
                let message = format!("{}; nothing was changed", error.message);
                return Err(UserError { message, ..error });
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
            crate::say!("{id}: none of the named finalizers is on it");
            continue;
        }
        chosen.push(Chosen { kind, object, change });
    }
    Ok(chosen)
}

fn show_losses(chosen: &[Chosen]) {
    for target in chosen {
        let id = crate::cluster::collect::Listed::new(target.kind.clone(), target.object.metadata.clone()).id();
        crate::say!("{id}:");
        for finalizer in target.change.removed() {
            crate::say!("  remove {finalizer}: {}", what_may_be_lost(&finalizer));
        }
    }
}
