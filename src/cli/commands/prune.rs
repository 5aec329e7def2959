//! `kubectl stack prune`: the plan (deletion waves), a confirmation, then ordered deletion,
//! re-checked before every wave, with a clear report of what blocks. A composition of the
//! library's prune use-case ([`crate::prune`]).

use super::confirm;
use crate::cli::{list_options, DryRun, GlobalArgs, PruneArgs, PruneOutput};
use crate::cluster::client::load_kubeconfig;
use crate::cluster::collect::ListScope;
use crate::cluster::session::Session;
use crate::error::{exit, UserError};
use crate::prune::execute::ExecOptions;
use crate::prune::orphans::{find_with_bystanders, PendingManifests};
use crate::prune::plan_file::{self, Place, Request};
use crate::prune::refusals::{refuse_cascades, refuse_changed, refuse_parents};
use crate::prune::report::{print_plan, report_saved, Format, View};
use crate::prune::run::{run_waves, suspend_for, RunOptions};
use crate::prune::teardown::PrunePlan;
use crate::prune::{plan_orphans, plan_teardown, PlanRequest};

/// Runs `prune`.
pub async fn run(global: &GlobalArgs, mut args: PruneArgs) -> anyhow::Result<u8> {
    let mut global = global.clone();
    let saved = match &args.plan {
        Some(path) => Some(plan_file::read(path)?),
        None => None,
    };
    if let Some(saved) = &saved {
        adopt_request(&mut global, &mut args, &saved.request)?;
    }
    let global = &global;
    let teardown = !args.targets.is_empty();
    check_mode(&args, teardown)?;
    // A wave rides out an API server restart for as long as it may take.
    crate::cluster::retry::set_budget(args.timeout.max(crate::cluster::retry::DEFAULT_BUDGET));
    // Read while the session opens and the cluster is listed.
    let mut manifests = match teardown {
        true => PendingManifests::none(),
        false => PendingManifests::start((&args.desired.manifests).into()),
    };
    let mut options = crate::cluster::session::SessionOptions::from(global);
    // The waves' re-checks reuse the plan's discovery while no CRD or APIService changes.
    options.watch_kinds = args.dry_run != DryRun::Client && args.plan_out.is_none();
    let mut session = manifests.beside(Session::open(options)).await?;
    let format = match args.output {
        PruneOutput::Json => Format::Json,
        PruneOutput::Table | PruneOutput::Wide => Format::Table,
    };
    let Planned {
        plan,
        desired_digest,
        nothing,
    } = plan_of(&mut session, &args, manifests).await?;
    if let Some(saved) = &saved {
        plan_file::refuse_other_desired(saved, desired_digest.as_deref())?;
        refuse_changed(saved, &plan, &session.connection.server)?;
    }
    let view = View {
        wide: args.output == PruneOutput::Wide,
        all_rows: args.all_rows,
    };
    print_plan(&plan, format, view)?;
    if let Some(path) = &args.plan_out {
        save_plan(path, &plan, global, &session, &args, desired_digest)?;
        return Ok(exit::OK);
    }
    refuse_cascades(&plan, args.allow_cascade)?;
    refuse_parents(&plan, args.suspend_parents)?;
    let count = plan.count();
    if count == 0 {
        crate::say!("{nothing}");
        return Ok(exit::OK);
    }
    if args.dry_run == DryRun::Client {
        crate::say!(
            "Dry run (client): {count} object(s) in {} wave(s) would be deleted; nothing was sent.",
            plan.waves.len()
        );
        return Ok(exit::OK);
    }
    delete_planned(&session, &plan, &args, global, format).await
}

/// A plan, with what the run compares a saved plan with and says when it is empty.
struct Planned {
    /// The waves.
    plan: PrunePlan,
    /// The desired set's digest (an orphan prune).
    desired_digest: Option<String>,
    /// What to say when the plan deletes nothing.
    nothing: String,
}

/// Plans a teardown of the named stacks, or the prune of the orphans of a desired set.
async fn plan_of(session: &mut Session, args: &PruneArgs, mut manifests: PendingManifests) -> anyhow::Result<Planned> {
    let request = plan_request(args);
    if !args.targets.is_empty() {
        refuse_split_targets(session, args)?;
        refuse_non_stacks(session, &args.targets).await?;
        session.scope = ListScope::AllNamespaces;
        return Ok(Planned {
            plan: plan_teardown(session, &request).await?,
            desired_digest: None,
            nothing: String::from("Nothing to prune."),
        });
    }
    // A manifest's error wins over the selection's, as over the session's.
    let selection = manifests
        .beside(async { crate::cli::selection(&args.selection) })
        .await?;
    let report = find_with_bystanders(
        session,
        selection,
        &(&args.desired).into(),
        manifests,
        list_options(&args.tuning),
    )
    .await?;
    let desired_digest = Some(report.desired_digest.clone());
    let nothing = super::orphans::nothing_found("Nothing to prune: no orphans", &report, false);
    Ok(Planned {
        plan: plan_orphans(session, report, &request).await?,
        desired_digest,
        nothing,
    })
}

/// Confirms, suspends the parents asked for, and deletes the plan wave by wave.
async fn delete_planned(
    session: &Session,
    plan: &PrunePlan,
    args: &PruneArgs,
    global: &GlobalArgs,
    format: Format,
) -> anyhow::Result<u8> {
    let count = plan.count();
    let mut suspensions = Default::default();
    if args.dry_run == DryRun::None {
        let prompt = format!("Delete {count} object(s) in {} wave(s)?", plan.waves.len());
        if !confirm(&prompt, args.yes, "Nothing was deleted.")? {
            return Ok(exit::OK);
        }
        suspensions = suspend_for(session, plan, args.suspend_parents).await?;
    }
    let options = RunOptions {
        exec: ExecOptions {
            server_dry_run: args.dry_run == DryRun::Server,
            cascade: args.cascade.into(),
            wave_timeout: args.timeout,
            concurrency: usize::from(args.delete_concurrency),
        },
        list: list_options(&args.tuning),
        format,
        verbose: global.verbosity >= 2,
    };
    Ok(run_waves(session, plan, suspensions, &options).await?)
}

/// What the flags ask the planner for.
fn plan_request(args: &PruneArgs) -> PlanRequest {
    PlanRequest {
        targets: args.targets.clone(),
        selector: args.selection.selector.clone(),
        list: list_options(&args.tuning),
        infer: !args.no_infer,
        skip_unlisted: args.skip_unlisted,
        keep_cascading: args.keep_cascading,
        leftovers: args.leftovers,
        orphan_dependents: matches!(args.cascade, crate::cli::CascadeArg::Orphan),
    }
}

fn check_mode(args: &PruneArgs, teardown: bool) -> Result<(), UserError> {
    if args.suspend_parents && !teardown {
        return Err(UserError::usage("--suspend-parents goes with a teardown (TYPE/NAME)"));
    }
    let desired = &args.desired;
    let has_desired = !desired.manifests.is_empty() || desired.inventory.is_some() || desired.checksum.is_some();
    if teardown && (has_desired || args.selection.tracker.is_some()) {
        return Err(UserError::usage("give either stacks to tear down (TYPE/NAME) or what is desired (-f, -k, --inventory, --checksum), not both"));
    }
    if !teardown && !has_desired {
        return Err(UserError::usage("say what to prune: stacks to tear down (e.g. kustomization/usage), or what is desired (-f, -k, --inventory, --checksum) to prune the orphans"));
    }
    if let Some(selector) = &args.selection.selector {
        if selector.split(',').all(|term| term.trim().is_empty()) {
            return Err(UserError::usage("an empty selector (-l \"\") selects everything")
                .hint("give a selector that names labels, e.g. -l app=web"));
        }
        if teardown && args.targets.iter().any(|t| t.contains('/')) {
            return Err(UserError::usage("a selector (-l) cannot be combined with TYPE/NAME")
                .hint("name the stacks (TYPE/NAME ...), or give TYPE with -l to tear down those it selects"));
        }
    }
    Ok(())
}

/// What a teardown names: the kinds of object that are stacks.
const STACK_KINDS: &str = "a Flux Kustomization or HelmRelease, a kpt/cli-utils inventory (ConfigMap or ResourceGroup \
labelled cli-utils.sigs.k8s.io/inventory-id) or an ApplySet parent (labelled applyset.kubernetes.io/id)";

/// `prune kustomization usage` (flux's and kubectl's `TYPE NAME` habit) without `-l`: a TYPE
/// followed by a word that is no kind is a name; say how to write it.
fn refuse_split_targets(session: &Session, args: &PruneArgs) -> Result<(), UserError> {
    if args.selection.selector.is_some() {
        return Ok(());
    }
    let is_kind = |word: &str| !word.contains('/') && session.catalog.resolve(word).is_some();
    let mut suggested = Vec::new();
    let mut kind: Option<&str> = None;
    for word in &args.targets {
        match kind {
            Some(type_word) if !word.contains('/') && !is_kind(word) => suggested.push(format!("{type_word}/{word}")),
            _ if is_kind(word) => kind = Some(word),
            _ => {
                kind = None;
                suggested.push(word.clone());
            }
        }
    }
    if suggested.iter().all(|word| !word.contains('/')) || suggested.len() == args.targets.len() {
        return Ok(());
    }
    Err(UserError::usage(format!(
        "name each stack as TYPE/NAME (\"{}\" is read as types and names)",
        args.targets.join(" ")
    ))
    .hint(format!("kubectl stack prune {}", suggested.join(" "))))
}

/// A named object that exists but is no stack (`deploy/web`) is refused as such, listing what
/// is a stack, rather than "not found"; one a stack tracks names that stack.
async fn refuse_non_stacks(session: &Session, targets: &[String]) -> Result<(), UserError> {
    for target in targets.iter().filter(|t| t.contains('/')) {
        let (kind, Some(id)) = crate::cluster::session::resolve_typed(session, target)? else {
            continue;
        };
        let may_be_stack = matches!(
            (kind.group.as_str(), kind.kind.as_str()),
            ("kustomize.toolkit.fluxcd.io", "Kustomization") | ("helm.toolkit.fluxcd.io", "HelmRelease")
        );
        let application = (kind.group.as_str(), kind.kind.as_str()) == ("argoproj.io", "Application");
        if may_be_stack {
            continue;
        }
        let api = crate::cluster::collect::api_for(&session.connection.client, &kind, id.namespace.as_deref());
        // Not there, or not readable: the planner says so (a stack already gone is found again
        // by its members' marks).
        let Ok(Some(object)) = crate::cluster::retry::with_retries("get", || api.get_metadata_opt(&id.name)).await
        else {
            continue;
        };
        if crate::model::trackers::is_tracking_object(&object.metadata) {
            continue;
        }
        // An Argo CD Application is torn down as what a stack tracks (an app of apps' child),
        // never on its own: said so, rather than "not found" (membership review 26).
        if application {
            if crate::model::trackers::marks(&object.metadata).is_empty() {
                return Err(UserError::usage(format!(
                    "{id} is tracked by no stack: a teardown takes an Argo CD Application only as a member of the stack that applies it (an app of apps)"
                ))
                .hint(format!("let Argo CD delete it with its resources: argocd app delete --cascade {}", id.name)));
            }
            continue;
        }
        let owners: Vec<String> = crate::model::trackers::marks(&object.metadata)
            .iter()
            .map(|mark| match (mark.preset, &mark.value.namespace) {
                (crate::model::trackers::Preset::Flux, Some(ns)) => {
                    format!("kubectl stack prune -n {ns} kustomization/{}", mark.value.name)
                }
                (crate::model::trackers::Preset::FluxHelm, Some(ns)) => {
                    format!("kubectl stack prune -n {ns} helmrelease/{}", mark.value.name)
                }
                _ => mark.to_string(),
            })
            .collect();
        let hint = if owners.is_empty() {
            let namespace = id.namespace.as_ref().map(|n| format!(" -n {n}")).unwrap_or_default();
            format!("to delete this object alone: kubectl delete {target}{namespace}")
        } else {
            format!("it belongs to a stack: {}", owners.join("; "))
        };
        return Err(UserError::usage(format!("{id} is not a stack: a teardown names {STACK_KINDS}")).hint(hint));
    }
    Ok(())
}

/// `--plan FILE` without stacks or desired flags re-plans what the file was made for; with
/// stacks, they must be the file's.
fn adopt_request(global: &mut GlobalArgs, args: &mut PruneArgs, request: &Request) -> Result<(), UserError> {
    if request.targets.is_empty() {
        return Ok(()); // an orphan prune: the desired flags are given again
    }
    if args.targets.is_empty() {
        args.targets = request.targets.clone();
        args.selection.selector = args.selection.selector.take().or_else(|| request.selector.clone());
        global.namespace = global.namespace.take().or_else(|| Some(request.namespace.clone()));
        return Ok(());
    }
    if args.targets != request.targets {
        return Err(UserError::usage(format!(
            "the saved plan tears down {}, not {}",
            request.targets.join(" "),
            args.targets.join(" ")
        ))
        .hint("give only --plan FILE (and the safety flags)"));
    }
    Ok(())
}

/// Writes the plan for `--plan-out` and says how to run it.
fn save_plan(
    path: &std::path::Path,
    plan: &PrunePlan,
    global: &GlobalArgs,
    session: &Session,
    args: &PruneArgs,
    desired_digest: Option<String>,
) -> Result<(), UserError> {
    let context = global
        .context
        .clone()
        .or_else(|| {
            load_kubeconfig(&global.connect_options())
                .ok()
                .and_then(|k| k.current_context)
        })
        .unwrap_or_default();
    let place = Place {
        context: &context,
        server: &session.connection.server,
    };
    let request = Request {
        targets: args.targets.clone(),
        namespace: session.connection.namespace.clone(),
        selector: args.selection.selector.clone(),
        desired: desired_digest,
    };
    plan_file::write(path, plan, &place, &request)?;
    report_saved(path, plan);
    Ok(())
}
