//! Retries of transient API failures with exponential backoff.
//!
//! 429 (waiting as long as the server's `retryAfterSeconds` asks), 5xx, connection resets and
//! timeouts are retried a bounded number of times. kube's own retry layer is switched off (see
//! `client`): it would retry a 503 fifteen times over minutes, which turns one unavailable
//! aggregated API into a hang. Only idempotent requests go through here (reads, and deletes
//! guarded by a UID precondition).

use std::future::Future;
use std::time::Duration;

/// How many times a request is tried in all.
pub const MAX_ATTEMPTS: u32 = 5;
const FIRST_DELAY: Duration = Duration::from_millis(200);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// True when the error is worth another try: the connection failed or timed out, or the
/// server answered 500/502 (kube's retry layer has already spent its own tries on 429/503/504).
pub fn is_transient(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => {
            matches!(status.code, 429 | 500 | 502 | 503 | 504) && !is_permanent_reason(&status.reason)
        }
        // A certificate that does not verify or a failed credential plugin: retrying does not
        // mend them (see `error::is_unrecoverable`).
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            !crate::error::is_unrecoverable(err)
        }
        _ => false,
    }
}

fn is_permanent_reason(reason: &str) -> bool {
    // An internal error that reports a bad request body will not get better by repeating it.
    reason == "BadRequest"
}

/// The delay before attempt `attempt` (1-based: the delay after the first failure is attempt 1).
pub fn backoff_delay(attempt: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
    FIRST_DELAY.saturating_mul(factor).min(MAX_DELAY)
}

/// How long the server asked to wait (429 and some 503 answers carry `retryAfterSeconds`).
fn server_delay(err: &kube::Error) -> Option<Duration> {
    match err {
        kube::Error::Api(status) => status
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|&s| s > 0)
            .map(|s| Duration::from_secs(u64::from(s).min(60))),
        _ => None,
    }
}

/// Runs `operation` until it succeeds, fails permanently, or `MAX_ATTEMPTS` are spent.
pub async fn with_retries<T, F, Fut>(what: &str, operation: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    with_attempts(what, MAX_ATTEMPTS, operation).await
}

/// Like [`with_retries`] with at most `attempts` tries.
pub async fn with_attempts<T, F, Fut>(what: &str, attempts: u32, mut operation: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        match operation().await {
            Ok(value) => return Ok(value),
            Err(err) if attempt < attempts && is_transient(&err) => {
                let delay = server_delay(&err).unwrap_or_else(|| backoff_delay(attempt));
                tracing::info!("{what}: transient failure ({err}); retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("boom", "InternalError").with_code(code).boxed())
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff_delay(1), Duration::from_millis(200));
        assert_eq!(backoff_delay(2), Duration::from_millis(400));
        assert_eq!(backoff_delay(3), Duration::from_millis(800));
        assert_eq!(backoff_delay(20), MAX_DELAY);
    }

    #[test]
    fn transient_classification() {
        assert!(is_transient(&api_error(500)));
        assert!(is_transient(&api_error(502)));
        assert!(is_transient(&api_error(503)));
        assert!(is_transient(&api_error(429)));
        assert!(!is_transient(&api_error(404)));
        assert!(!is_transient(&api_error(403)));
        assert!(!is_transient(&api_error(409)));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_then_succeeds() {
        let calls = AtomicU32::new(0);
        let result = with_retries("test", || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(api_error(500))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 2);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn too_many_requests_waits_as_long_as_the_server_asks() {
        let calls = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let result = with_retries("test", || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    let mut status = Status::failure("slow down", "TooManyRequests").with_code(429);
                    status.details = Some(kube::core::response::StatusDetails {
                        name: String::new(),
                        group: String::new(),
                        kind: String::new(),
                        uid: String::new(),
                        causes: Vec::new(),
                        retry_after_seconds: 3,
                    });
                    Err(kube::Error::Api(status.boxed()))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 1);
        assert!(started.elapsed() >= Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_are_not_retried() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retries("test", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(404)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retries("test", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(502)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), MAX_ATTEMPTS);
    }
}
