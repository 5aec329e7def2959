//! What selects a stack's objects: `-l` and `--tracker`, checked on each listed object.

use kube::core::ObjectMeta;

use super::{is_tracked, is_tracking_object, Tracker};

/// What selects a stack's objects: a label selector (sent to the server) and a tracker (the
/// server narrows by its label where it has one; the rest is checked here).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// The user's `-l` selector.
    pub user_selector: Option<String>,
    /// The `--tracker`.
    pub tracker: Option<Tracker>,
    /// Every object, tracked or not (for diagnosis, not for stacks).
    pub everything: bool,
    /// Only objects being deleted (checked as pages arrive, so the rest is never kept).
    pub only_terminating: bool,
    /// With `-l` and no tracker, keep only objects some tool marks (`orphans`, `prune`: an
    /// object no tool tracks is not proven tracked), unless the user asked for untracked ones.
    pub tracked_only: bool,
    /// Also the tracking objects that carry no member mark themselves (cli-utils/kpt inventory
    /// objects, ApplySet parents), so that their members can hang under them.
    pub tracking_objects: bool,
}

impl Selection {
    /// Builds a selection from `-l` and `--tracker`.
    pub fn new(user_selector: Option<String>, tracker: Option<Tracker>) -> Self {
        Self {
            user_selector: user_selector.filter(|s| !s.trim().is_empty()),
            tracker,
            everything: false,
            only_terminating: false,
            tracked_only: false,
            tracking_objects: false,
        }
    }

    /// Every object, whether a tool tracks it or not.
    pub fn everything() -> Self {
        Self {
            everything: true,
            ..Default::default()
        }
    }

    /// The label selector sent with every list request.
    pub fn server_selector(&self) -> Option<String> {
        let parts: Vec<String> = self
            .user_selector
            .iter()
            .cloned()
            .chain(self.tracker.as_ref().and_then(Tracker::server_selector))
            .collect();
        (!parts.is_empty()).then(|| parts.join(","))
    }

    /// Whether a listed object belongs to the selection. With neither `-l` nor `--tracker`,
    /// an object belongs when any tool marked it.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        if self.only_terminating && meta.deletion_timestamp.is_none() {
            return false;
        }
        if self.everything {
            return true;
        }
        match (&self.tracker, &self.user_selector) {
            (Some(tracker), _) => tracker.matches(meta),
            (None, Some(_)) => !self.tracked_only || is_tracked(meta),
            (None, None) => is_tracked(meta) || (self.tracking_objects && is_tracking_object(meta)),
        }
    }

    /// Whether `-l` selected an object that [`Self::matches`] leaves out only because no tool
    /// tracks it (`orphans`, `prune` without `--untracked`): counted, so that "nothing found"
    /// can say so.
    pub fn untracked_match(&self, meta: &ObjectMeta) -> bool {
        self.tracked_only
            && !self.everything
            && self.tracker.is_none()
            && self.user_selector.is_some()
            && (!self.only_terminating || meta.deletion_timestamp.is_some())
            && !is_tracked(meta)
    }

    /// A short description for messages, e.g. `--tracker flux=apps -l tier=web`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(tracker) = &self.tracker {
            let value = tracker.value.as_ref().map(|v| match &v.namespace {
                Some(ns) => format!("={}/{}", ns, v.name),
                None => format!("={}", v.name),
            });
            parts.push(format!(
                "--tracker {}{}",
                tracker.preset.name(),
                value.unwrap_or_default()
            ));
        }
        if let Some(selector) = &self.user_selector {
            parts.push(format!("-l {selector}"));
        }
        if parts.is_empty() {
            "objects any GitOps tool tracks".to_string()
        } else {
            parts.join(" ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::meta;
    use crate::model::trackers::KAPP_APP;

    #[test]
    fn selection_without_tracker_needs_some_tool_mark() {
        let any = Selection::new(None, None);
        assert!(!any.matches(&meta(&[("app", "x")], &[])));
        assert!(any.matches(&meta(&[(KAPP_APP, "1")], &[])));
        let labelled = Selection::new(Some("app=x".into()), Some(Tracker::parse("kapp=1").unwrap()));
        assert_eq!(labelled.server_selector().unwrap(), "app=x,kapp.k14s.io/app=1");
    }
}
