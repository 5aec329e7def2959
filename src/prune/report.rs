//! What `prune` shows: the plan (table or JSON lines), progress while it runs (a bar per wave on a
//! terminal, lines otherwise), the summary, the blockers of a wave that did not go, and what is
//! left suspended.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{exit, UserError};
use crate::model::identity::ObjectId;
use crate::prune::cascade::Cascade;
use crate::prune::execute::{Blocker, Change, Event, Observer, Outcome};
use crate::prune::suspend::Suspended;
use crate::prune::teardown::PrunePlan;
use crate::render;
use crate::stack::parents::Parent;

/// How `prune` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables and lines for people.
    Table,
    /// JSON lines: the plan, each event, the summary.
    Json,
}

pub use crate::prune::plan_table::{View, ROWS_PER_WAVE};

/// The summary printed right above the prompt: per wave, the counts by kind; the cascade
/// victims; the parents; what is kept and why.
pub fn plan_summary(plan: &PrunePlan) -> String {
    let mut text = format!(
        "Plan: {} object(s) to delete in {} wave(s)\n",
        plan.count(),
        plan.waves.len()
    );
    let names = crate::prune::plan_table::ShortNames::new(plan.waves.iter().flatten());
    for (wave, targets) in plan.waves.iter().enumerate() {
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for target in targets {
            *by_kind.entry(names.kind(&target.id)).or_insert(0) += 1;
        }
        let counts: Vec<String> = by_kind.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
        text.push_str(&format!("  wave {}: {}\n", wave + 1, counts.join(", ")));
    }
    let victims: usize = plan.cascades.iter().map(|c| c.victims.len()).sum();
    if !plan.cascades.is_empty() {
        let holders: Vec<String> = plan
            .cascades
            .iter()
            .map(|c| match (c.victims.len(), c.unlisted.len()) {
                (0, _) => format!("{} takes what could not be listed", c.holder),
                (n, 0) => format!("{} takes {n}", c.holder),
                (n, _) => format!("{} takes {n} and what could not be listed", c.holder),
            })
            .collect();
        text.push_str(&format!(
            "Cascade victims: {victims} object(s) the plan does not delete ({})\n",
            holders.join("; ")
        ));
    }
    if !plan.parents.is_empty() {
        text.push_str(&format!("Parents ({}):\n", plan.parents.len()));
        for line in parents_text(&plan.parents).lines() {
            text.push_str(&format!("  {}\n", line.trim_start_matches("parent: ")));
        }
    }
    if !plan.kept.is_empty() {
        text.push_str(&format!("Kept: {} object(s)\n", plan.kept.len()));
        for kept in plan.kept.iter().take(ROWS_PER_WAVE) {
            text.push_str(&format!("  {} ({})\n", kept.id, kept.reason));
        }
        if plan.kept.len() > ROWS_PER_WAVE {
            text.push_str(&format!(
                "  ... {} more (listed above)\n",
                plan.kept.len() - ROWS_PER_WAVE
            ));
        }
    }
    text.push_str(&pulled_in_text(plan));
    text
}

/// What a teardown pulled in that was not named: every object that depends on a torn-down stack
/// (Flux `dependsOn`, `depends-on`, a kapp rule, a sync wave), with what it depends on — last,
/// right above the prompt, so that no stack is deleted without being named.
pub fn pulled_in_text(plan: &PrunePlan) -> String {
    let pulled: Vec<&crate::prune::execute::Target> = plan
        .waves
        .iter()
        .flatten()
        .filter(|t| t.why.starts_with("depends on "))
        .collect();
    if pulled.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "Pulled in: {} object(s) not named, each with what it depends on (deleted too, with its members):\n",
        pulled.len()
    );
    for target in pulled {
        text.push_str(&format!("  {} {}\n", target.id, target.why));
    }
    text
}

/// Prints the plan: the waves, the cascade victims and the parents (stdout), what is kept, the
/// warnings and the summary (stderr, right above the prompt). The table fits the terminal
/// (`-o wide`: more columns, in full; `--all-rows`: every row).
pub fn print_plan(plan: &PrunePlan, format: Format, view: View) -> Result<(), UserError> {
    match format {
        Format::Table => {
            if plan.count() > 0 {
                render::emit(&crate::prune::plan_table::plan_table(
                    plan,
                    view,
                    render::terminal_width(),
                ))?;
            }
            render::emit(&cascades_text(&plan.cascades))?;
            render::emit(&parents_text(&plan.parents))?;
            for kept in &plan.kept {
                crate::say!("kept: {} ({})", kept.id, kept.reason);
            }
            for warning in &plan.warnings {
                crate::say!("warning: {warning}");
            }
            if plan.count() > 0 {
                crate::say_part!("{}", plan_summary(plan));
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
                .map(|k| crate::stack::keep::kept_json(&k.id, &k.reason))
                .collect();
            let line = json!({"waves": waves, "kept": kept, "warnings": plan.warnings,
                "cascades": plan.cascades, "parents": plan.parents});
            render::emit(&render::json_line("plan", line))
        }
    }
}

/// An event as a JSON line's fields: the object as `id` (`group`, `kind`, `namespace`, `name`),
/// as in the plan line, the blockers and the suspensions.
fn event_json(event: &Event) -> Value {
    let id = ObjectId::new(&event.group, &event.kind, event.namespace.as_deref(), &event.name);
    let mut line = json!({"wave": event.wave, "change": event.change, "id": id, "uid": event.uid});
    if let Some(error) = &event.error {
        line["error"] = json!(error);
    }
    if let Some(reason) = &event.reason {
        line["reason"] = json!(reason);
    }
    line
}

/// The cascade victims, under the Namespace or CRD whose deletion would take them.
pub fn cascades_text(cascades: &[Cascade]) -> String {
    let mut text = String::new();
    for cascade in cascades {
        if cascade.victims.is_empty() {
            text.push_str(&format!(
                "{} would also delete what it holds of kinds that could not be listed (not known to be empty):\n",
                cascade.holder
            ));
        } else {
            text.push_str(&format!(
                "{} would also delete {} object(s) the plan does not delete:\n",
                cascade.holder,
                cascade.victims.len()
            ));
        }
        for victim in &cascade.victims {
            text.push_str(&format!("  {} ({})\n", victim.id, victim.why));
        }
        for kind in &cascade.unlisted {
            text.push_str(&format!("  every {kind} it holds (could not be listed)\n"));
        }
    }
    text
}

/// The live parents that would re-create planned objects, and whether each is suspended.
pub fn parents_text(parents: &[Parent]) -> String {
    let mut text = String::new();
    for parent in parents {
        let state = match parent.suspended {
            Some(true) => "suspended",
            Some(false) => "not suspended",
            None => "cannot be suspended",
        };
        let applies: Vec<String> = parent.applies.iter().map(ToString::to_string).collect();
        text.push_str(&format!(
            "parent: {} ({state}) applies {}\n",
            parent.id,
            applies.join(", ")
        ));
    }
    text
}

/// Counts and prints what happens: a progress bar per wave on a terminal, lines otherwise.
pub struct Progress {
    format: Format,
    verbose: bool,
    counts: HashMap<Change, usize>,
    bar: Option<indicatif::ProgressBar>,
    /// The DELETEs of the last wave that started, in the order their outcomes came.
    deletes: Vec<(Change, ObjectId, String)>,
}

impl Progress {
    /// A progress printer; `verbose` prints every object's change.
    pub fn new(format: Format, verbose: bool) -> Self {
        Self {
            format,
            verbose,
            counts: HashMap::new(),
            bar: None,
            deletes: Vec::new(),
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
            None => crate::say!("{line}"),
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
        if !matches!(event.change, Change::Gone | Change::Dropped) {
            let id = ObjectId::new(&event.group, &event.kind, event.namespace.as_deref(), &event.name);
            self.deletes.push((event.change, id, event.uid.clone()));
        }
        if self.format == Format::Json {
            let _ = render::emit(&render::json_line("event", event_json(event)));
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
        self.deletes.clear();
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
            None => crate::say!(
                "wave {wave}: waiting for {} object(s): {}{more}",
                left.len(),
                shown.join("; ")
            ),
        }
    }

    fn wave_done(&mut self, wave: usize, elapsed: Duration) {
        self.clear();
        crate::say!("wave {wave}: gone in {:.1}s", elapsed.as_secs_f64());
    }
}

/// What became of a DELETE of the wave that was running when the run was interrupted.
fn delete_state(change: Change) -> &'static str {
    match change {
        Change::Deleted => "sent: accepted (deleted)",
        Change::WouldDelete => "sent: accepted (dry run)",
        Change::MayStillLand => "sent: no answer came: may still land",
        Change::Failed => "sent: refused or failed (see above)",
        _ => "not sent",
    }
}

impl Progress {
    /// The interrupted wave's DELETEs, per object: which were sent and accepted, which were sent
    /// and may still land (no answer came), which failed; how many were not sent.
    fn interrupted_json(&self, wave: usize) -> Value {
        let ids = |wanted: Change| -> Vec<Value> {
            self.deletes
                .iter()
                .filter(|(change, _, _)| *change == wanted)
                .map(|(_, id, uid)| json!({"id": id, "uid": uid}))
                .collect()
        };
        json!({"wave": wave, "sent": ids(Change::Deleted), "mayStillLand": ids(Change::MayStillLand),
            "failed": ids(Change::Failed), "notSent": ids(Change::NotSent)})
    }

    /// [`Self::interrupted_json`] as a table: one row per DELETE that was sent, then how many
    /// were not.
    fn interrupted_text(&self, wave: usize) -> String {
        let rows: Vec<Vec<String>> = self
            .deletes
            .iter()
            .filter(|(change, _, _)| {
                matches!(
                    change,
                    Change::Deleted | Change::WouldDelete | Change::MayStillLand | Change::Failed
                )
            })
            .map(|(change, id, _)| {
                vec![
                    id.kind_with_group(),
                    id.namespace.clone().unwrap_or_default(),
                    id.name.clone(),
                    delete_state(*change).to_string(),
                ]
            })
            .collect();
        let not_sent = self.count(Change::NotSent);
        let may = self.count(Change::MayStillLand);
        let mut text = format!(
            "Wave {wave} when stopped: {} DELETE(s) sent, {may} of them with no answer (they may still land), {not_sent} not sent.\n",
            rows.len()
        );
        if may > 0 {
            text.push_str("Those with no answer: the server may act on them still; run the same command again to see where they stand.\n");
        }
        if !rows.is_empty() {
            text.push_str(&render::table(&["KIND", "NAMESPACE", "NAME", "DELETE"], rows));
        }
        text
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
        Outcome::TimedOut { blockers, .. } | Outcome::Interrupted { blockers, .. } => blockers.as_slice(),
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
            let mut line = json!({"status": status, "deleted": deleted, "alreadyTerminating": terminating,
                "alreadyGone": gone, "kept": kept, "dropped": dropped, "failed": failed, "wouldDelete": would,
                "mayStillLand": progress.count(Change::MayStillLand), "notSent": progress.count(Change::NotSent),
                "blockers": blockers, "suspended": suspended});
            if let Outcome::Interrupted { wave, .. } = ending.outcome {
                line["interrupted"] = progress.interrupted_json(*wave);
            }
            render::emit(&render::json_line("summary", line))?
        }
        Format::Table if ending.server_dry_run => render::emit(&format!(
            "Server dry run: {would} would be deleted, {terminating} already being deleted, {gone} already gone, {kept} kept, {dropped} dropped, {failed} failed.\n"
        ))?,
        Format::Table => render::emit(&format!(
            "Summary: {deleted} deleted, {terminating} already being deleted, {gone} already gone, {kept} kept, {dropped} dropped by the re-check, {failed} failed.\n"
        ))?,
    }
    report_ending(progress, ending, format, failed, dropped);
    report_suspended(&ending.suspended);
    Ok(code)
}

/// What is said on stderr after the summary of a run that did not complete: why, what blocks,
/// what to do next.
fn report_ending(progress: &Progress, ending: &Ending, format: Format, failed: usize, dropped: usize) {
    match ending.outcome {
        Outcome::DeleteFailed { wave } => {
            crate::say!("error: {failed} delete(s) failed in wave {wave}; later waves were not started");
            crate::say!("hint: fix the cause above, then run the same command again to continue");
        }
        Outcome::TimedOut { wave, blockers } => {
            crate::say!(
                "error: wave {wave} was not gone within {}s; later waves were not started",
                ending.wave_timeout.as_secs()
            );
            report_blockers(blockers);
            report_recreating_parents(blockers, &ending.plan.parents);
        }
        // "interrupted: ..." was said when Ctrl-C came; once is enough.
        Outcome::Interrupted { wave, blockers } => {
            if format != Format::Json {
                crate::say_part!("{}", progress.interrupted_text(*wave));
            }
            if blockers.is_empty() {
                crate::say!(
                    "hint: wave {wave} did not finish and later waves were not started; run the same command again to continue"
                );
            } else {
                crate::say!(
                    "wave {wave} was still waiting for {} object(s); later waves were not started:",
                    blockers.len()
                );
                report_blockers(blockers);
                report_recreating_parents(blockers, &ending.plan.parents);
            }
        }
        Outcome::Completed if failed > 0 => crate::say!("error: {failed} delete(s) failed"),
        Outcome::Completed if dropped > 0 => {
            crate::say!("error: {dropped} planned object(s) changed after the plan and were not deleted (see \"dropped\" above)");
            crate::say!("hint: review them, then run the same command again to plan anew");
        }
        Outcome::Completed => {}
    }
}

/// Lists the objects this run suspended that are still suspended, with the command to resume each.
pub fn report_suspended(suspended: &[&Suspended]) {
    if suspended.is_empty() {
        return;
    }
    crate::say!(
        "warning: {} object(s) were suspended by this run and are still suspended (their controller does not reconcile them):",
        suspended.len()
    );
    for entry in suspended {
        crate::say!("  {}: resume with: {}", entry.id, entry.resume_command());
    }
}

/// The objects a wave still waits for, as a table, with the commands that inspect them and the
/// hint to run the same command again.
fn report_blockers(blockers: &[Blocker]) {
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
    crate::say_part!(
        "{}",
        render::table(
            &["KIND", "NAMESPACE", "NAME", "TERMINATING", "FINALIZERS", "TRACKED-BY"],
            rows
        )
    );
    for command in stuck_commands(blockers) {
        crate::say!("hint: inspect them with: {command}");
    }
    crate::say!("hint: when they are gone, run the same prune command again to continue");
}

/// Names the live parent of a blocker, which re-creates it for as long as it lives.
fn report_recreating_parents(blockers: &[Blocker], parents: &[Parent]) {
    for blocker in blockers {
        for parent in parents.iter().filter(|p| p.applies.contains(&blocker.target.id)) {
            crate::say!(
                "hint: {} is applied by {}, which is not torn down: it re-creates it while it lives",
                blocker.target.id,
                parent.id
            );
        }
    }
}

/// The `kubectl stack stuck` commands that inspect exactly these objects, one per namespace.
pub fn stuck_commands(blockers: &[Blocker]) -> Vec<String> {
    let mut by_namespace: BTreeMap<Option<String>, Vec<String>> = BTreeMap::new();
    for blocker in blockers {
        let id = &blocker.target.id;
        let typed = crate::model::identity::resource_type(&blocker.target.kind.plural, &id.group);
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

/// Says where a plan was saved (`--plan-out`), how to run it, and what running it will need.
pub fn report_saved(path: &std::path::Path, plan: &PrunePlan) {
    // An orphan plan is run against the desired set it was made from: the same flags again.
    let same_desired_set = match plan.torn_down.is_empty() {
        true => " with the same selection and desired set as now (-l/--tracker, -f/-k/--inventory)",
        false => "",
    };
    crate::say!(
        "Plan saved to {}: {} object(s) in {} wave(s); nothing was deleted. Run it with: kubectl stack prune --plan {}{same_desired_set}",
        path.display(),
        plan.count(),
        plan.waves.len(),
        path.display()
    );
    if !plan.cascades.is_empty() {
        crate::say!("note: running it needs --allow-cascade (see the cascade victims above), or save it again with --keep-cascading");
    }
    if !crate::stack::parents::not_held(&plan.parents).is_empty() {
        crate::say!("note: running it needs the parents above held (suspended, or --suspend-parents)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prune::execute::Target;
    use crate::prune::teardown::Kept;
    use std::sync::Arc;

    fn target(kind: &str, name: &str) -> Target {
        Target {
            id: ObjectId::new("", kind, Some("shop"), name),
            kind: Arc::new(crate::cluster::fixtures::kind("", kind, true)),
            uid: format!("uid-{name}"),
            why: "member".into(),
            terminating: false,
            finalizers: vec![],
            tracked_by: String::new(),
        }
    }

    #[test]
    fn a_long_plan_ends_with_a_summary() {
        let first: Vec<Target> = (0..1_200).map(|i| target("ConfigMap", &format!("c{i}"))).collect();
        let mut second = vec![target("Secret", "s")];
        second.push(target("ConfigMap", "last"));
        let plan = PrunePlan {
            waves: vec![first, second],
            kept: vec![Kept {
                id: ObjectId::new("", "ConfigMap", Some("shop"), "keep"),
                reason: crate::stack::keep::KeepReason::Keep {
                    marker: "helm.sh/resource-policy=keep".into(),
                },
            }],
            ..Default::default()
        };
        assert_eq!(
            plan_summary(&plan),
            "Plan: 1202 object(s) to delete in 2 wave(s)\n  wave 1: 1200 ConfigMap\n  wave 2: 1 ConfigMap, 1 Secret\n\
Kept: 1 object(s)\n  ConfigMap/shop/keep (keep marker helm.sh/resource-policy=keep)\n"
        );
    }
}
