//! What `prune` shows: the plan (table or JSON lines), progress while it runs (a bar per wave on a
//! terminal, lines otherwise), the summary, the blockers of a wave that did not go, and what is
//! left suspended.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{exit, UserError};
use crate::execute::{Blocker, Change, Event, Observer, Outcome};
use crate::identity::ObjectId;
use crate::render;
use crate::suspend::Suspended;
use crate::teardown::PrunePlan;

/// How `prune` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables and lines for people.
    Table,
    /// JSON lines: the plan, each event, the summary.
    Json,
}

/// Prints the plan: the waves (stdout), what is kept and the warnings (stderr).
pub fn print_plan(plan: &PrunePlan, format: Format) -> Result<(), UserError> {
    match format {
        Format::Table => {
            let rows: Vec<Vec<String>> = plan
                .waves
                .iter()
                .enumerate()
                .flat_map(|(wave, targets)| {
                    targets.iter().map(move |t| {
                        vec![
                            (wave + 1).to_string(),
                            t.id.kind_with_group(),
                            t.id.namespace.clone().unwrap_or_default(),
                            t.id.name.clone(),
                            t.why.clone(),
                        ]
                    })
                })
                .collect();
            if !rows.is_empty() {
                render::emit(&render::table(&["WAVE", "KIND", "NAMESPACE", "NAME", "WHY"], rows))?;
            }
            for kept in &plan.kept {
                eprintln!("kept: {} ({})", kept.id, kept.reason);
            }
            for warning in &plan.warnings {
                eprintln!("warning: {warning}");
            }
            Ok(())
        }
        Format::Json => {
            let waves: Vec<Vec<Value>> = plan
                .waves
                .iter()
                .map(|wave| {
                    wave.iter()
                        .map(|t| json!({"id": t.id, "uid": t.uid, "why": t.why}))
                        .collect()
                })
                .collect();
            let kept: Vec<Value> = plan
                .kept
                .iter()
                .map(|k| json!({"id": k.id, "reason": k.reason}))
                .collect();
            let line = json!({"type": "plan", "waves": waves, "kept": kept, "warnings": plan.warnings});
            render::emit(&(line.to_string() + "\n"))
        }
    }
}

/// Counts and prints what happens: a progress bar per wave on a terminal, lines otherwise.
pub struct Progress {
    format: Format,
    verbose: bool,
    counts: HashMap<Change, usize>,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    /// A progress printer; `verbose` prints every object's change.
    pub fn new(format: Format, verbose: bool) -> Self {
        Self {
            format,
            verbose,
            counts: HashMap::new(),
            bar: None,
        }
    }

    /// Removes the bar (before the summary and the blockers report).
    pub fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Prints a line on stderr, above the bar when there is one.
    fn say(&self, line: String) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn bar_for(&self, wave: usize, waves: usize, objects: usize) -> Option<indicatif::ProgressBar> {
        use std::io::IsTerminal;
        if self.format != Format::Table || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::new(objects as u64);
        let template = if render::color_allowed() {
            "wave {prefix} {bar:30.cyan/blue} {pos}/{len} gone {elapsed} {wide_msg}"
        } else {
            "wave {prefix} {bar:30} {pos}/{len} gone {elapsed} {wide_msg}"
        };
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(format!("{wave}/{waves}"));
        bar.enable_steady_tick(Duration::from_millis(200));
        Some(bar)
    }

    /// How many events of this change were seen.
    pub fn count(&self, change: Change) -> usize {
        self.counts.get(&change).copied().unwrap_or(0)
    }
}

impl Observer for Progress {
    fn event(&mut self, event: &Event) {
        *self.counts.entry(event.change).or_insert(0) += 1;
        if self.format == Format::Json {
            let mut line = serde_json::to_value(event).unwrap_or_default();
            line["type"] = json!("event");
            let _ = render::emit(&(line.to_string() + "\n"));
        }
        let id = ObjectId::new(&event.group, &event.kind, event.namespace.as_deref(), &event.name);
        if let Some(bar) = &self.bar {
            if matches!(event.change, Change::Gone | Change::AlreadyGone | Change::Replaced) {
                bar.inc(1);
            }
        }
        match event.change {
            Change::Failed => self.say(format!("  failed: {id}: {}", event.error.as_deref().unwrap_or(""))),
            Change::Dropped => self.say(format!("  dropped: {id}: {}", event.reason.as_deref().unwrap_or(""))),
            Change::Replaced => self.say(format!(
                "  {id}: the name now has another UID; that object was left alone"
            )),
            Change::AlreadyGone if self.verbose => self.say(format!("  already gone: {id}")),
            Change::Deleted | Change::Gone | Change::WouldDelete | Change::AlreadyTerminating if self.verbose => {
                self.say(format!("  {:?}: {id}", event.change))
            }
            _ => {}
        }
    }

    fn wave_started(&mut self, wave: usize, waves: usize, objects: usize) {
        self.clear();
        self.bar = self.bar_for(wave, waves, objects);
        self.say(format!("wave {wave}/{waves}: deleting {objects} object(s)"));
    }

    fn waiting(&mut self, wave: usize, left: &[Blocker]) {
        let shown: Vec<String> = left.iter().take(5).map(describe_blocker).collect();
        let more = if left.len() > 5 {
            format!(" and {} more", left.len() - 5)
        } else {
            String::new()
        };
        match &self.bar {
            Some(bar) => bar.set_message(format!("waiting for {}{more}", shown.join("; "))),
            None => eprintln!(
                "wave {wave}: waiting for {} object(s): {}{more}",
                left.len(),
                shown.join("; ")
            ),
        }
    }

    fn wave_done(&mut self, wave: usize, elapsed: Duration) {
        self.clear();
        eprintln!("wave {wave}: gone in {:.1}s", elapsed.as_secs_f64());
    }
}

/// How long a blocker has been terminating, or `-` when it was never seen terminating.
fn terminating_for(blocker: &Blocker) -> String {
    blocker
        .deletion_timestamp
        .as_ref()
        .map(|t| render::age(Some(t)))
        .unwrap_or_else(|| "-".to_string())
}

fn describe_blocker(blocker: &Blocker) -> String {
    let since = terminating_for(blocker);
    if blocker.finalizers.is_empty() {
        format!("{} (terminating {since})", blocker.target.id)
    } else {
        format!(
            "{} (terminating {since}, finalizers: {})",
            blocker.target.id,
            blocker.finalizers.join(", ")
        )
    }
}

/// How a run ended, for the summary.
pub struct Ending<'a> {
    /// The plan that ran.
    pub plan: &'a PrunePlan,
    /// What the executor said.
    pub outcome: &'a Outcome,
    /// The suspensions this run set and did not lift, on objects still there.
    pub suspended: Vec<&'a Suspended>,
    /// Whether deletes were sent with dryRun=All.
    pub server_dry_run: bool,
    /// The wave timeout, for the blockers report.
    pub wave_timeout: Duration,
}

/// Prints the summary, the blockers and what is left suspended; returns the exit code.
pub fn finish(progress: &Progress, ending: &Ending, format: Format) -> Result<u8, UserError> {
    let deleted = progress.count(Change::Deleted);
    let terminating = progress.count(Change::AlreadyTerminating);
    let gone = progress.count(Change::AlreadyGone) + progress.count(Change::Replaced);
    let failed = progress.count(Change::Failed);
    let dropped = progress.count(Change::Dropped);
    let would = progress.count(Change::WouldDelete);
    let kept = ending.plan.kept.len();
    let (status, code) = match ending.outcome {
        Outcome::Completed if failed > 0 => ("failed", exit::INCOMPLETE),
        Outcome::Completed if dropped > 0 => ("changed", exit::INCOMPLETE),
        Outcome::Completed => ("completed", exit::OK),
        Outcome::DeleteFailed { .. } | Outcome::TimedOut { .. } => ("incomplete", exit::INCOMPLETE),
        Outcome::Interrupted { .. } => ("interrupted", exit::INTERRUPTED),
    };
    let blockers = match ending.outcome {
        Outcome::TimedOut { blockers, .. } => blockers.as_slice(),
        _ => &[],
    };
    match format {
        Format::Json => {
            let blockers: Vec<Value> = blockers
                .iter()
                .map(|b| json!({"id": b.target.id, "uid": b.target.uid, "finalizers": b.finalizers, "trackedBy": b.target.tracked_by}))
                .collect();
            let suspended: Vec<Value> = ending
                .suspended
                .iter()
                .map(|s| json!({"id": s.id, "resume": s.resume_command()}))
                .collect();
            let line = json!({"type": "summary", "status": status, "deleted": deleted, "alreadyTerminating": terminating,
                "alreadyGone": gone, "kept": kept, "dropped": dropped, "failed": failed, "wouldDelete": would,
                "blockers": blockers, "suspended": suspended});
            render::emit(&(line.to_string() + "\n"))?
        }
        Format::Table if ending.server_dry_run => render::emit(&format!(
            "Server dry run: {would} would be deleted, {gone} already gone, {kept} kept, {dropped} dropped, {failed} failed.\n"
        ))?,
        Format::Table => render::emit(&format!(
            "Summary: {deleted} deleted, {terminating} already being deleted, {gone} already gone, {kept} kept, {dropped} dropped by the re-check, {failed} failed.\n"
        ))?,
    }
    match ending.outcome {
        Outcome::DeleteFailed { wave } => {
            eprintln!("error: {failed} delete(s) failed in wave {wave}; later waves were not started (nothing they depend on was deleted)");
            eprintln!("hint: fix the cause above, then run the same command again to continue");
        }
        Outcome::TimedOut { wave, blockers } => report_blockers(*wave, blockers, ending.wave_timeout),
        Outcome::Interrupted { wave } => eprintln!("interrupted in wave {wave}: no further deletes were started"),
        Outcome::Completed if failed > 0 => eprintln!("error: {failed} delete(s) failed"),
        Outcome::Completed if dropped > 0 => {
            eprintln!("error: {dropped} planned object(s) changed after the plan and were not deleted (see \"dropped\" above)");
            eprintln!("hint: review them, then run the same command again to plan anew");
        }
        Outcome::Completed => {}
    }
    report_suspended(&ending.suspended);
    Ok(code)
}

/// Lists the objects this run suspended that are still suspended, with the command to resume each.
pub fn report_suspended(suspended: &[&Suspended]) {
    if suspended.is_empty() {
        return;
    }
    eprintln!(
        "warning: {} object(s) were suspended by this run and are still suspended (their controller does not reconcile them):",
        suspended.len()
    );
    for entry in suspended {
        eprintln!("  {}: resume with: {}", entry.id, entry.resume_command());
    }
}

fn report_blockers(wave: usize, blockers: &[Blocker], timeout: Duration) {
    eprintln!(
        "error: wave {wave} was not gone within {}s; later waves were not started (nothing these objects depend on was deleted)",
        timeout.as_secs()
    );
    let rows: Vec<Vec<String>> = blockers
        .iter()
        .map(|b| {
            vec![
                b.target.id.kind_with_group(),
                b.target.id.namespace.clone().unwrap_or_default(),
                b.target.id.name.clone(),
                terminating_for(b),
                if b.finalizers.is_empty() {
                    "<none>".into()
                } else {
                    b.finalizers.join(",")
                },
                b.target.tracked_by.clone(),
            ]
        })
        .collect();
    eprint!(
        "{}",
        render::table(
            &["KIND", "NAMESPACE", "NAME", "TERMINATING", "FINALIZERS", "TRACKED-BY"],
            rows
        )
    );
    for command in stuck_commands(blockers) {
        eprintln!("hint: inspect them with: {command}");
    }
    eprintln!("hint: when they are gone, run the same prune command again to continue");
}

/// The `kubectl stack stuck` commands that inspect exactly these objects, one per namespace.
pub fn stuck_commands(blockers: &[Blocker]) -> Vec<String> {
    let mut by_namespace: BTreeMap<Option<String>, Vec<String>> = BTreeMap::new();
    for blocker in blockers {
        let id = &blocker.target.id;
        let typed = if id.group.is_empty() {
            blocker.target.kind.plural.clone()
        } else {
            format!("{}.{}", blocker.target.kind.plural, id.group)
        };
        by_namespace
            .entry(id.namespace.clone())
            .or_default()
            .push(format!("{typed}/{}", id.name));
    }
    by_namespace
        .into_iter()
        .map(|(namespace, names)| match namespace {
            Some(ns) => format!("kubectl stack stuck -n {ns} {}", names.join(" ")),
            None => format!("kubectl stack stuck {}", names.join(" ")),
        })
        .collect()
}
