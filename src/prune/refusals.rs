//! The refusals of a prune (exit 4): each one rule, one function, with its unit tests. The
//! planner's own safeguards (keep markers, controllers, what stays needs) are in `safeguards`.

use crate::error::UserError;
use crate::prune::cascade::Cascade;
use crate::prune::plan_file::{self, Saved};
use crate::prune::teardown::PrunePlan;
use crate::stack::parents::not_held;

/// The order guarantee rests on seeing every member: a kind that could not be listed may hold
/// objects that still need what a later wave deletes. Refused unless the user accepts it.
pub fn refuse_unlisted(unlisted: &[String], accepted: bool) -> Result<(), UserError> {
    if unlisted.is_empty() || accepted {
        return Ok(());
    }
    Err(UserError::refused(format!(
        "{} kind(s) could not be listed ({}): objects of them could still depend on what prune would delete",
        unlisted.len(),
        unlisted.join(", ")
    ))
    .hint("use an identity that may list them (--as, --context), or accept the risk with --skip-unlisted"))
}

/// "2 object(s) the plan does not delete (Secret/shop/handmade, ...)", or what could not be listed.
pub fn describe_cascade(cascade: &Cascade) -> String {
    let mut names: Vec<String> = cascade.victims.iter().take(3).map(|v| v.id.to_string()).collect();
    if cascade.victims.len() > 3 {
        names.push("...".to_string());
    }
    let unlisted = format!(
        "whatever it holds of {}, which could not be listed (not known to be empty)",
        cascade.unlisted.join(", ")
    );
    if cascade.victims.is_empty() {
        return unlisted;
    }
    let mut text = format!(
        "{} object(s) the plan does not delete ({})",
        cascade.victims.len(),
        names.join(", ")
    );
    if !cascade.unlisted.is_empty() {
        text.push_str(&format!(" and {unlisted}"));
    }
    text
}

/// Refuses a plan whose Namespaces or CRDs would take objects it does not delete, unless the
/// user accepted that loss.
pub fn refuse_cascades(plan: &PrunePlan, accepted: bool) -> Result<(), UserError> {
    if plan.cascades.is_empty() || accepted {
        return Ok(());
    }
    let holders: Vec<String> = plan
        .cascades
        .iter()
        .map(|c| format!("{}: {}", c.holder, describe_cascade(c)))
        .collect();
    Err(UserError::refused(format!(
        "deleting {} object(s) of the plan (a Namespace, a CRD or an owner) would also delete what the plan does not: {}",
        plan.cascades.len(),
        holders.join("; ")
    ))
    .hint("keep those objects and prune the rest with --keep-cascading, or accept the loss with --allow-cascade"))
}

/// Refuses a teardown that a live parent would undo (see [`crate::stack::parents`]), unless the user
/// asked to suspend the parents first and every one of them can be.
pub fn refuse_parents(plan: &PrunePlan, suspend_parents: bool) -> Result<(), UserError> {
    let unheld = not_held(&plan.parents);
    if unheld.is_empty() {
        return Ok(());
    }
    let cannot: Vec<String> = plan
        .parents
        .iter()
        .filter(|p| !p.suspendable())
        .map(|p| p.id.to_string())
        .collect();
    if suspend_parents && cannot.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = unheld
        .iter()
        .map(|p| {
            let applies: Vec<String> = p.applies.iter().map(ToString::to_string).collect();
            format!("{} applies {}", p.id, applies.join(", "))
        })
        .collect();
    let error = UserError::refused(format!(
        "a live parent outside the plan would re-create what it deletes at its next reconcile: {}",
        named.join("; ")
    ));
    Err(if cannot.is_empty() {
        error.hint("tear the parent down too (name it), suspend it and the parents above it, or use --suspend-parents")
    } else {
        error.hint(format!(
            "{} cannot be suspended by kubectl stack: tear it down too, or stop its automated sync first",
            cannot.join(", ")
        ))
    })
}

/// Refuses to run a saved plan that no longer holds, saying what changed.
pub fn refuse_changed(saved: &Saved, plan: &PrunePlan, server: &str) -> Result<(), UserError> {
    let changed = plan_file::changes(saved, plan, server);
    if changed.is_empty() {
        return Ok(());
    }
    for change in &changed {
        crate::say!("changed: {change}");
    }
    Err(UserError::refused(format!(
        "the cluster moved since the plan was saved ({} change(s) above): nothing was deleted",
        changed.len()
    ))
    .hint("review the changes, then save a new plan with --plan-out"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cluster::fixtures::kind;
    use crate::error::exit;
    use crate::model::identity::ObjectId;
    use crate::prune::cascade::Victim;
    use crate::stack::parents::Parent;

    fn secret(name: &str) -> Victim {
        Victim {
            id: ObjectId::new("", "Secret", Some("shop"), name),
            uid: format!("uid-{name}"),
            why: "untracked".into(),
        }
    }

    fn with_cascade(victims: Vec<Victim>, unlisted: Vec<String>) -> PrunePlan {
        PrunePlan {
            cascades: vec![Cascade {
                holder: ObjectId::new("", "Namespace", None, "shop"),
                victims,
                unlisted,
            }],
            ..PrunePlan::default()
        }
    }

    fn parent(group: &str, kind_name: &str, suspended: Option<bool>) -> Parent {
        Parent {
            id: ObjectId::new(group, kind_name, Some("flux-system"), "apps"),
            kind: Arc::new(kind(group, kind_name, true)),
            uid: "uid-apps".into(),
            applies: vec![ObjectId::new("apps", "Deployment", Some("shop"), "api")],
            applies_planned: true,
            suspended,
        }
    }

    fn with_parent(parent: Parent) -> PrunePlan {
        PrunePlan {
            parents: vec![parent],
            ..PrunePlan::default()
        }
    }

    #[test]
    fn a_cascade_of_kinds_that_could_not_be_listed_is_never_called_empty() {
        let plan = with_cascade(vec![], vec!["Gizmo.example.com".into()]);
        let refused = refuse_cascades(&plan, false).unwrap_err();
        assert!(!refused.message.contains("0 object"), "{}", refused.message);
        assert!(
            refused.message.contains("Gizmo.example.com, which could not be listed"),
            "{}",
            refused.message
        );
        let text = crate::prune::report::cascades_text(&plan.cascades);
        assert!(!text.contains("0 object"), "{text}");
        assert!(text.contains("could not be listed"), "{text}");
        let summary = crate::prune::report::plan_summary(&plan);
        assert!(!summary.contains("takes 0"), "{summary}");
        let both = with_cascade(vec![secret("s")], vec!["Gizmo.example.com".into()]);
        let refused = refuse_cascades(&both, false).unwrap_err();
        assert!(refused.message.contains("1 object(s)"), "{}", refused.message);
        assert!(refused.message.contains("could not be listed"), "{}", refused.message);
    }

    #[test]
    fn unlisted_kinds_refuse_unless_accepted() {
        assert!(refuse_unlisted(&[], false).is_ok());
        let unlisted = ["Gizmo.example.com".to_string()];
        let refused = refuse_unlisted(&unlisted, false).unwrap_err();
        assert_eq!(refused.code, exit::REFUSED);
        assert!(
            refused
                .message
                .contains("1 kind(s) could not be listed (Gizmo.example.com)"),
            "{}",
            refused.message
        );
        assert!(refuse_unlisted(&unlisted, true).is_ok());
    }

    #[test]
    fn a_cascade_names_three_victims_and_what_could_not_be_listed() {
        let victims = ["a", "b", "c", "d"].map(secret).to_vec();
        let plan = with_cascade(victims, vec!["Gizmo.example.com".into()]);
        assert_eq!(
            describe_cascade(&plan.cascades[0]),
            "4 object(s) the plan does not delete (Secret/shop/a, Secret/shop/b, Secret/shop/c, ...) and whatever it holds of Gizmo.example.com, which could not be listed (not known to be empty)"
        );
    }

    #[test]
    fn cascades_refuse_unless_accepted() {
        assert!(refuse_cascades(&PrunePlan::default(), false).is_ok());
        let plan = with_cascade(vec![secret("handmade")], Vec::new());
        let refused = refuse_cascades(&plan, false).unwrap_err();
        assert_eq!(refused.code, exit::REFUSED);
        assert!(
            refused.message.contains("Namespace/shop: 1 object(s)"),
            "{}",
            refused.message
        );
        assert!(refuse_cascades(&plan, true).is_ok());
    }

    #[test]
    fn a_live_parent_refuses_unless_it_is_held_or_may_be_suspended() {
        let flux = || parent("kustomize.toolkit.fluxcd.io", "Kustomization", Some(false));
        let refused = refuse_parents(&with_parent(flux()), false).unwrap_err();
        assert_eq!(refused.code, exit::REFUSED);
        assert!(
            refused.message.contains("applies Deployment.apps/shop/api"),
            "{}",
            refused.message
        );
        assert!(
            refuse_parents(&with_parent(flux()), true).is_ok(),
            "--suspend-parents holds it"
        );
        let suspended = parent("kustomize.toolkit.fluxcd.io", "Kustomization", Some(true));
        assert!(
            refuse_parents(&with_parent(suspended), false).is_ok(),
            "already suspended"
        );
        let argo = parent("argoproj.io", "Application", None);
        let refused = refuse_parents(&with_parent(argo), true).unwrap_err();
        assert!(
            refused
                .hint
                .unwrap_or_default()
                .contains("cannot be suspended by kubectl stack"),
            "an Argo CD parent is not suspended for the user"
        );
    }
}
