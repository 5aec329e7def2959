//! Which stored revision of a Helm release is its record, chosen as Helm v3 itself chooses it.
//!
//! Helm's storage (helm/helm `pkg/storage/storage.go`) lists a release's Secrets by their labels
//! only (`History`: `owner=helm,name=<release>`; `Deployed`/`DeployedAll`: the same plus
//! `status=deployed`), decodes each Secret's `data.release` and skips one it cannot decode
//! (`pkg/storage/driver/secrets.go` `Query`), then orders what it read by the *body's*
//! `version` (`relutil.SortByRevision`). `pkg/action/upgrade.go` (`prepareUpgrade`) compares a new
//! render with the last revision when that body's `info.status` is `deployed`, else with the
//! newest body among the Secrets *labelled* `status=deployed`; `pkg/action/uninstall.go` deletes
//! what the newest body records, unless that body's `info.status` is `uninstalled`. So a Secret's
//! `version` label never decides, and its `status` label decides only which Secrets
//! `Deployed` reads. A hand-edited or restored Secret whose labels disagree with its body is
//! read as Helm reads it.

use super::HelmRevision;

/// One release Secret as Helm's storage reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored<T> {
    /// The Secret's name, for messages.
    pub secret: String,
    /// Its `status` label: what `Storage.Deployed` selects by.
    pub label_status: Option<String>,
    /// The body's `version` (0 when absent, as Go decodes it).
    pub version: i64,
    /// The body's `info.status` ("" when absent).
    pub status: String,
    /// The decoded body.
    pub body: T,
}

/// Why no revision is the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unchosen {
    /// No Secret holds the release.
    #[error("no release Secret")]
    NoRevision,
    /// Neither the latest body nor any Secret labelled `status=deployed` is deployed.
    #[error("has no deployed revision: Helm itself would not upgrade or prune it")]
    NoDeployed,
    /// The latest body is `pending-install`, `pending-upgrade` or `pending-rollback`: `helm
    /// upgrade` refuses it ("another operation (install/upgrade/rollback) is in progress",
    /// helm/helm `pkg/action/upgrade.go` `prepareUpgrade`: `errPending`) and prunes nothing.
    #[error("is {status} (revision {version}): `helm upgrade` refuses a release with an operation in progress and prunes nothing")]
    Pending {
        /// The latest body's status.
        status: String,
        /// Its revision.
        version: i64,
    },
    /// Two Secrets record the same highest revision in their bodies: which one Helm reads
    /// depends on the order the API lists them in.
    #[error(
        "has two release Secrets, {first} and {second}, that record revision {version} in their bodies: which one Helm reads is not defined"
    )]
    Tied {
        /// The revision.
        version: i64,
        /// One Secret.
        first: String,
        /// The other.
        second: String,
    },
}

/// The revision Helm reads as the release's record (see the module's documentation): for an
/// upgrade's comparison, the latest body when it is deployed, else the newest body labelled
/// `status=deployed`; for an uninstall, the latest body. Never more than Helm: where Helm would
/// upgrade against a failed or superseded latest revision because none is deployed, none is
/// chosen (nothing is an orphan).
///
/// `helm_upgrade`: the comparison is `helm upgrade`'s own, which refuses a release whose latest
/// body is pending ([`Unchosen::Pending`], membership review 30, F2); helm-controller first marks
/// such a revision failed and then upgrades against the last deployed one, so a Flux
/// HelmRelease's comparison reads that one.
pub(crate) fn choose<T>(
    stored: Vec<Stored<T>>,
    which: HelmRevision,
    helm_upgrade: bool,
) -> Result<Stored<T>, Unchosen> {
    let (latest, rest) = newest(stored)?;
    if which == HelmRevision::Latest || latest.status == "deployed" {
        return Ok(latest);
    }
    if helm_upgrade && latest.status.starts_with("pending-") {
        return Err(Unchosen::Pending {
            status: latest.status,
            version: latest.version,
        });
    }
    let labelled = std::iter::once(latest)
        .chain(rest)
        .filter(|s| s.label_status.as_deref() == Some("deployed"))
        .collect::<Vec<_>>();
    match newest(labelled) {
        Err(Unchosen::NoRevision) => Err(Unchosen::NoDeployed),
        found => found.map(|(deployed, _)| deployed),
    }
}

/// The Secret whose body records the highest revision, and the others; refused when two record
/// it.
fn newest<T>(mut stored: Vec<Stored<T>>) -> Result<(Stored<T>, Vec<Stored<T>>), Unchosen> {
    stored.sort_by(|a, b| b.version.cmp(&a.version).then_with(|| a.secret.cmp(&b.secret)));
    if let [first, second, ..] = stored.as_slice() {
        if first.version == second.version {
            return Err(Unchosen::Tied {
                version: first.version,
                first: first.secret.clone(),
                second: second.secret.clone(),
            });
        }
    }
    let mut rest = stored.into_iter();
    let first = rest.next().ok_or(Unchosen::NoRevision)?;
    Ok((first, rest.collect()))
}

#[cfg(test)]
mod tests {
    //! Each case is a release history as helm/helm v3 stores it (`pkg/storage/driver/secrets.go`:
    //! labels `owner`, `name`, `status`, `version`; the body's `version` and `info.status`), and
    //! the revision `pkg/action/upgrade.go` / `uninstall.go` would read.
    use super::*;

    fn stored(secret: &str, label_status: &str, version: i64, status: &str) -> Stored<&'static str> {
        Stored {
            secret: secret.to_string(),
            label_status: Some(label_status.to_string()),
            version,
            status: status.to_string(),
            body: "",
        }
    }

    fn chosen(history: Vec<Stored<&'static str>>, which: HelmRevision) -> Result<String, Unchosen> {
        choose(history, which, false).map(|s| s.secret)
    }

    #[test]
    fn the_record_is_the_last_deployed_body_as_helm_upgrade_reads_it() {
        let history = || {
            vec![
                stored("v1", "superseded", 1, "superseded"),
                stored("v2", "deployed", 2, "deployed"),
                stored("v3", "pending-upgrade", 3, "pending-upgrade"),
            ]
        };
        // helm-controller's comparison (it marks the pending revision failed first).
        assert_eq!(chosen(history(), HelmRevision::LastDeployed), Ok("v2".into()));
        assert_eq!(chosen(history(), HelmRevision::Latest), Ok("v3".into()));
        // `helm upgrade`'s refuses a pending latest revision: it prunes nothing (review 30, F2).
        assert_eq!(
            choose(history(), HelmRevision::LastDeployed, true).map(|s| s.secret),
            Err(Unchosen::Pending {
                status: "pending-upgrade".into(),
                version: 3
            })
        );
        assert_eq!(
            choose(history(), HelmRevision::Latest, true).map(|s| s.secret),
            Ok("v3".into()),
            "an uninstall reads the latest"
        );
        let failed = vec![stored("v1", "failed", 1, "failed")];
        assert_eq!(chosen(failed, HelmRevision::LastDeployed), Err(Unchosen::NoDeployed));
        assert_eq!(chosen(Vec::new(), HelmRevision::Latest), Err(Unchosen::NoRevision));
    }

    #[test]
    fn a_restored_secret_whose_version_label_lies_is_ordered_by_its_body() {
        // `sh.helm.release.v1.web.v1` restored from a backup and relabelled `version=9`: Helm
        // orders by the body's version, so v2 stays the current release.
        let history = || {
            vec![
                stored("restored-v1", "deployed", 1, "deployed"),
                stored("v2", "deployed", 2, "deployed"),
            ]
        };
        assert_eq!(chosen(history(), HelmRevision::LastDeployed), Ok("v2".into()));
        assert_eq!(chosen(history(), HelmRevision::Latest), Ok("v2".into()));
    }

    #[test]
    fn the_latest_body_deployed_is_current_whatever_its_status_label_says() {
        // The labels were edited to `superseded` on v3 and left `deployed` on v2: `prepareUpgrade`
        // takes the last release when its body is deployed, without asking the labels.
        let history = vec![
            stored("v2", "deployed", 2, "superseded"),
            stored("v3", "superseded", 3, "deployed"),
        ];
        assert_eq!(chosen(history, HelmRevision::LastDeployed), Ok("v3".into()));
    }

    #[test]
    fn below_a_latest_body_not_deployed_the_status_label_selects_and_the_body_orders() {
        // v4 failed; `Storage.Deployed` lists the Secrets labelled deployed (v2 and v3, whose
        // body says superseded) and takes the highest body version, v3. A Secret whose body says
        // deployed but whose label does not (v1) is not listed.
        let history = vec![
            stored("v1", "superseded", 1, "deployed"),
            stored("v2", "deployed", 2, "superseded"),
            stored("v3", "deployed", 3, "superseded"),
            stored("v4", "failed", 4, "failed"),
        ];
        assert_eq!(chosen(history, HelmRevision::LastDeployed), Ok("v3".into()));
        let unlabelled = vec![
            stored("v1", "superseded", 1, "deployed"),
            stored("v2", "failed", 2, "failed"),
        ];
        assert_eq!(
            chosen(unlabelled, HelmRevision::LastDeployed),
            Err(Unchosen::NoDeployed)
        );
    }

    #[test]
    fn two_bodies_recording_the_same_revision_are_refused() {
        let history = || {
            vec![
                stored("copy", "deployed", 2, "deployed"),
                stored("v2", "deployed", 2, "deployed"),
                stored("v1", "superseded", 1, "superseded"),
            ]
        };
        for which in [HelmRevision::LastDeployed, HelmRevision::Latest] {
            assert!(matches!(
                chosen(history(), which),
                Err(Unchosen::Tied { version: 2, .. })
            ));
        }
    }

    #[test]
    fn an_uninstall_reads_the_latest_body_whatever_its_labels() {
        // `helm uninstall --keep-history` marks the body uninstalled; a Secret relabelled
        // `version=99` but holding revision 1 is not the latest.
        let history = vec![
            stored("relabelled-v1", "deployed", 1, "superseded"),
            stored("v2", "uninstalled", 2, "uninstalled"),
        ];
        let latest = choose(history, HelmRevision::Latest, true).unwrap();
        assert_eq!((latest.secret.as_str(), latest.status.as_str()), ("v2", "uninstalled"));
    }
}
