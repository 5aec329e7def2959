//! The `-f`/`-k` desired manifests, read on a blocking thread while the session opens and the
//! cluster is listed: parsing a large desired set costs about as much as listing its objects
//! (50,000 objects: ~0.9 s each), and neither needs the other until they are compared.
//!
//! A manifest that cannot be read still stops everything, and its error wins over any other,
//! as when it was read before any request: [`PendingManifests::beside`] returns it as soon as
//! the read ends in it, and in place of the error of the work it ran beside.
//!
//! Standard input (`-f -`) is the exception: it is read whole before any request, as before.
//! Opening the session may run a kubeconfig's exec credential plugin, which kube hands our
//! standard input unless the kubeconfig says `interactiveMode: Never` (an MFA prompt reads a
//! line from it): what the plugin read would be missing from the desired set, and be deleted
//! as an orphan (adversarial review of issue 30).

use std::future::Future;

use tokio::task::{JoinError, JoinHandle};

use super::{read_manifests, ManifestSources};
use crate::error::UserError;
use crate::stack::manifest::{Manifest, Reading};

/// What one read of the desired manifests ends in.
type Read = Result<Vec<Manifest>, UserError>;

/// Desired manifests being read, or read, or not given.
pub struct PendingManifests {
    state: State,
}

enum State {
    /// No `-f`/`-k`.
    NotGiven,
    /// Being read on a blocking thread.
    Reading(JoinHandle<Read>),
    /// Read, or failed: before anything else (standard input), or beside other work.
    Done(Read),
}

impl PendingManifests {
    /// Starts reading the desired manifests `sources` names (nothing to read without `-f`/`-k`).
    pub fn start(sources: ManifestSources) -> Self {
        if sources.filenames.is_empty() && sources.kustomize.is_empty() {
            return Self::none();
        }
        if sources.filenames.iter().any(|path| path.as_os_str() == "-") {
            // Whole, before any request (see the module's doc).
            let read = read_manifests(&sources, Reading::Desired).map(Option::unwrap_or_default);
            return Self {
                state: State::Done(read),
            };
        }
        let reading = tokio::task::spawn_blocking(move || {
            read_manifests(&sources, Reading::Desired).map(Option::unwrap_or_default)
        });
        Self {
            state: State::Reading(reading),
        }
    }

    /// No desired manifests (a teardown, or `--inventory` alone).
    pub fn none() -> Self {
        Self { state: State::NotGiven }
    }

    /// Whether `-f`/`-k` were given.
    pub fn given(&self) -> bool {
        !matches!(self.state, State::NotGiven)
    }

    /// Runs `work` while the manifests are read: a read that fails ends it at once (`work` is
    /// dropped) with the read's error, and a failed `work` returns the read's error, if any,
    /// in place of its own.
    pub async fn beside<T>(&mut self, work: impl Future<Output = Result<T, UserError>>) -> Result<T, UserError> {
        let reading = match &mut self.state {
            State::Reading(reading) => reading,
            State::Done(Err(err)) => return Err(err.clone()),
            State::NotGiven | State::Done(Ok(_)) => return work.await,
        };
        tokio::pin!(work);
        let first = tokio::select! {
            read = &mut *reading => First::Read(joined(read)),
            done = &mut work => First::Done(done),
        };
        match first {
            First::Read(read) => {
                let failed = read.as_ref().err().cloned();
                self.state = State::Done(read);
                match failed {
                    Some(err) => Err(err),
                    None => work.await,
                }
            }
            First::Done(Ok(done)) => Ok(done),
            First::Done(Err(err)) => {
                let read = joined(reading.await);
                let failed = read.as_ref().err().cloned();
                self.state = State::Done(read);
                Err(failed.unwrap_or(err))
            }
        }
    }

    /// The manifests once read (`None` without `-f`/`-k`).
    pub async fn manifests(self) -> Result<Option<Vec<Manifest>>, UserError> {
        match self.state {
            State::NotGiven => Ok(None),
            State::Reading(reading) => joined(reading.await).map(Some),
            State::Done(read) => read.map(Some),
        }
    }
}

/// Which of a read and the work beside it ended first.
enum First<T> {
    Read(Read),
    Done(Result<T, UserError>),
}

/// A read's outcome; a panic on its thread goes on as the panic it was.
fn joined(read: Result<Read, JoinError>) -> Read {
    match read {
        Ok(read) => read,
        Err(err) => match err.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(err) => Err(UserError::failed(format!("reading the manifests was cancelled: {err}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(file: &std::path::Path) -> ManifestSources {
        ManifestSources {
            filenames: vec![file.to_path_buf()],
            kustomize: Vec::new(),
        }
    }

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("pending-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const GOOD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\n";

    #[tokio::test]
    async fn a_bad_manifest_ends_the_work_beside_it_at_once() {
        let mut pending = PendingManifests::start(sources(&file("bad.yaml", "a: [")));
        let never = std::future::pending::<Result<(), UserError>>();
        let err = pending.beside(never).await.unwrap_err();
        assert!(err.to_string().contains("invalid YAML"), "{err}");
    }

    #[tokio::test]
    async fn a_bad_manifest_wins_over_the_error_of_the_work_beside_it() {
        let mut pending = PendingManifests::start(sources(&file("bad2.yaml", "a: [")));
        let failing = async { Err::<(), _>(UserError::failed("no cluster")) };
        let err = pending.beside(failing).await.unwrap_err();
        assert!(err.to_string().contains("invalid YAML"), "{err}");
    }

    #[tokio::test]
    async fn good_manifests_let_the_work_finish_and_are_kept() {
        let mut pending = PendingManifests::start(sources(&file("good.yaml", GOOD)));
        let slow = async {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            Ok::<_, UserError>(7)
        };
        assert_eq!(pending.beside(slow).await.unwrap(), 7);
        let failing = async { Err::<(), _>(UserError::failed("no cluster")) };
        let err = pending.beside(failing).await.unwrap_err();
        assert!(err.to_string().contains("no cluster"), "{err}");
        let manifests = pending.manifests().await.unwrap().unwrap();
        assert_eq!(manifests.len(), 1);
    }

    #[tokio::test]
    async fn a_failed_read_is_the_error_of_every_later_work_which_never_runs() {
        let mut pending = PendingManifests::start(sources(&file("bad3.yaml", "a: [")));
        let never = std::future::pending::<Result<(), UserError>>();
        assert!(pending.beside(never).await.is_err());
        let ran = std::sync::atomic::AtomicBool::new(false);
        let work = async {
            ran.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, UserError>(())
        };
        let err = pending.beside(work).await.unwrap_err();
        assert!(err.to_string().contains("invalid YAML"), "{err}");
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
        assert!(pending.given());
        assert!(pending.manifests().await.is_err());
    }

    #[tokio::test]
    async fn no_sources_read_nothing() {
        let pending = PendingManifests::start(ManifestSources::default());
        assert!(!pending.given());
        assert!(pending.manifests().await.unwrap().is_none());
    }
}
