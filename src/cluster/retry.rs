//! Retries of transient API failures, within a time budget, with jittered exponential backoff.
//!
//! 429 (waiting as long as the server's `retryAfterSeconds` asks), 5xx, connection resets and
//! timeouts are retried until the request succeeds, fails for good, or its time budget is spent:
//! an API server that restarts (down 5-30 s) is ridden out, a handful of quick tries would not be.
//! The budget is [`DEFAULT_BUDGET`] (or `KUBECTL_STACK_RETRY_BUDGET`, [`BUDGET_ENV`]); `prune`
//! raises it to its wave `--timeout` ([`set_budget`]).
//! Delays double from 200 ms up to 5 s, each drawn at random between half and all of that, so
//! many clients (or many concurrent deletes) do not hammer a recovering server in step.
//! kube's own retry layer is switched off (see `client`): it would retry a 503 fifteen times
//! over minutes whatever the caller wants. Only idempotent requests go through here (reads, and
//! deletes guarded by a UID precondition).

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// How long one request's transient failures are retried unless [`set_budget`] says otherwise.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(45);
const FIRST_DELAY: Duration = Duration::from_millis(200);
const MAX_DELAY: Duration = Duration::from_secs(5);
/// The longest wait a server's `retryAfterSeconds` may ask for.
const MAX_SERVER_DELAY: Duration = Duration::from_secs(60);

/// The environment variable that replaces [`DEFAULT_BUDGET`]: a duration as `--timeout` takes
/// it (`10s`, `2m`). For users whose API server restarts take longer, and for the tests, which
/// prove that a budget is spent and given up without waiting 45 s.
pub const BUDGET_ENV: &str = "KUBECTL_STACK_RETRY_BUDGET";

/// The budget [`set_budget`] set, in milliseconds; `u64::MAX` while it set none.
static BUDGET_MILLIS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Sets how long transient failures of one request are retried, for the rest of the process.
pub fn set_budget(budget: Duration) {
    let millis = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
    BUDGET_MILLIS.store(millis.min(u64::MAX - 1), Ordering::Relaxed);
}

/// How long transient failures of one request are retried.
pub fn budget() -> Duration {
    match BUDGET_MILLIS.load(Ordering::Relaxed) {
        u64::MAX => default_budget(),
        millis => Duration::from_millis(millis),
    }
}

/// [`DEFAULT_BUDGET`], or what [`BUDGET_ENV`] says (read once; a value that does not parse is
/// warned about and ignored).
fn default_budget() -> Duration {
    static FROM_ENV: OnceLock<Duration> = OnceLock::new();
    *FROM_ENV.get_or_init(|| {
        let Ok(text) = std::env::var(BUDGET_ENV) else {
            return DEFAULT_BUDGET;
        };
        crate::model::values::parse_duration(&text).unwrap_or_else(|err| {
            tracing::warn!("{BUDGET_ENV} ignored: {err}");
            DEFAULT_BUDGET
        })
    })
}

/// True when the error is worth another try: the connection failed or timed out, or the
/// server answered 429, 500, 502, 503 or 504 (except an internal error about a bad request).
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

/// The longest delay before attempt `attempt + 1` (1-based: after the first failure, attempt 1):
/// 200 ms doubling up to 5 s. The delay used is drawn between half of it and all of it.
pub fn backoff_delay(attempt: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(16));
    FIRST_DELAY.saturating_mul(factor).min(MAX_DELAY)
}

/// `delay` with jitter: a random duration between half of it and all of it.
pub fn jittered(delay: Duration) -> Duration {
    let half = delay / 2;
    let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
    if spread == 0 {
        return delay;
    }
    half + Duration::from_micros(random() % (spread + 1))
}

/// A random number from the standard library's per-process random hash keys.
fn random() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// How long the server asked to wait (429 and some 503 answers carry `retryAfterSeconds`).
fn server_delay(err: &kube::Error) -> Option<Duration> {
    match err {
        kube::Error::Api(status) => status
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|&s| s > 0)
            .map(|s| Duration::from_secs(u64::from(s)).min(MAX_SERVER_DELAY)),
        _ => None,
    }
}

/// Runs `operation` until it succeeds, fails permanently, or the process's [`budget`] is spent.
pub async fn with_retries<T, F, Fut>(what: &str, operation: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    with_budget(what, budget(), operation).await
}

/// Runs `operation` until it succeeds, fails permanently, or `budget` has passed since the first
/// try. The last try starts at the latest when the budget ends.
pub async fn with_budget<T, F, Fut>(what: &str, budget: Duration, operation: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry(what, budget, u32::MAX, operation).await
}

/// Like [`with_retries`] with at most `attempts` tries (and at most the budget).
pub async fn with_attempts<T, F, Fut>(what: &str, attempts: u32, operation: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry(what, budget(), attempts, operation).await
}

/// Set once the run is interrupted (Ctrl-C, SIGTERM): no request is tried again after that.
static CANCELLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Stops every retry now and from now on: an interrupted run sends nothing more on its own, and
/// a request still waiting for its answer is abandoned ([`Abandoned`]).
pub fn cancel_retries() {
    CANCELLED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether the run was interrupted ([`cancel_retries`]).
pub fn cancelled() -> bool {
    CANCELLED.load(std::sync::atomic::Ordering::SeqCst)
}

/// How long one try of a request may wait for its answer when `--request-timeout` is not given:
/// longer than the API server's own limit for a request (its `--request-timeout`, 60 s by
/// default), so that only a server or network that hangs is cut short.
pub const DEFAULT_ATTEMPT_BOUND: Duration = Duration::from_secs(70);

/// How much longer than [`attempt_bound`] a try waits, so that the client's own timeouts, set to
/// the same `--request-timeout`, answer first with the more precise error.
const CLIENT_FIRST: Duration = Duration::from_millis(500);

/// The `--request-timeout` [`set_attempt_bound`] set, in milliseconds; 0 while none.
static ATTEMPT_BOUND_MILLIS: AtomicU64 = AtomicU64::new(0);

/// Sets how long one try may wait for its answer (`--request-timeout`; zero: [`DEFAULT_ATTEMPT_BOUND`]).
pub fn set_attempt_bound(request_timeout: Duration) {
    let millis = u64::try_from(request_timeout.as_millis()).unwrap_or(u64::MAX);
    ATTEMPT_BOUND_MILLIS.store(millis, Ordering::Relaxed);
}

/// How long one try of a request may wait for its answer.
pub fn attempt_bound() -> Duration {
    match ATTEMPT_BOUND_MILLIS.load(Ordering::Relaxed) {
        0 => DEFAULT_ATTEMPT_BOUND,
        millis => Duration::from_millis(millis),
    }
}

/// Set once the API server (or a proxy in front of it) answered a request: from then on a
/// refused connection is a restart to ride out, not a wrong address.
static CONTACTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A request that was abandoned because the run was interrupted: it may have been sent, and its
/// answer never came (a DELETE so abandoned may still land).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("abandoned when interrupted: no answer came")]
pub struct Abandoned;

/// No answer came within [`attempt_bound`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no answer within {}s (--request-timeout sets the wait)", .0.as_secs())]
pub struct Unanswered(pub Duration);

/// Whether the request may have reached the server and its answer never came: abandoned when
/// interrupted, timed out, or its connection failed after connecting (a reset). A DELETE that
/// ended so may still land; one whose connection was refused was never sent.
pub fn got_no_answer(err: &kube::Error) -> bool {
    matches!(
        err,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_)
    ) && !crate::error::is_connection_refused(err)
}

/// Whether the request was abandoned when the run was interrupted.
pub fn is_abandoned(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Service(inner) if inner.downcast_ref::<Abandoned>().is_some())
}

/// One try, bounded by [`attempt_bound`] and abandoned when the run is interrupted.
async fn one_try<T, Fut>(request: Fut) -> Result<T, kube::Error>
where
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let bound = attempt_bound();
    // The client's own timeouts (`--request-timeout` bounds its connect and read too) answer
    // first and say more (a TLS handshake that hangs); this bound catches what they do not.
    let result = tokio::select! {
        answered = tokio::time::timeout(bound + CLIENT_FIRST, request) => match answered {
            Ok(result) => result,
            Err(_) => Err(kube::Error::Service(Box::new(Unanswered(bound)))),
        },
        () = until_cancelled() => Err(kube::Error::Service(Box::new(Abandoned))),
    };
    match &result {
        Ok(_) | Err(kube::Error::Api(_)) => CONTACTED.store(true, Ordering::Relaxed),
        Err(_) => {}
    }
    result
}

/// Resolves once the run is interrupted.
async fn until_cancelled() {
    const SLICE: Duration = Duration::from_millis(50);
    while !cancelled() {
        tokio::time::sleep(SLICE).await;
    }
}

/// Whether a transient failure is a refused connection before the server ever answered: the
/// address is wrong or nothing runs there, and kubectl fails at once too.
fn refused_at_first_contact(err: &kube::Error) -> bool {
    refused_before_any_answer(CONTACTED.load(Ordering::Relaxed), err)
}

fn refused_before_any_answer(contacted: bool, err: &kube::Error) -> bool {
    !contacted && crate::error::is_connection_refused(err)
}

/// Sleeps for `delay`, waking early when the retries are cancelled; whether they were.
async fn sleep_unless_cancelled(delay: Duration) -> bool {
    const SLICE: Duration = Duration::from_millis(50);
    let until = Instant::now() + delay;
    while !cancelled() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        tokio::time::sleep(left.min(SLICE)).await;
    }
    true
}

async fn retry<T, F, Fut>(what: &str, budget: Duration, attempts: u32, mut operation: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        match one_try(operation()).await {
            Ok(value) => return Ok(value),
            Err(err) if is_abandoned(&err) => return Err(err),
            Err(err) if is_transient(&err) && !refused_at_first_contact(&err) => {
                let left = budget.saturating_sub(started.elapsed());
                if left.is_zero() || attempt >= attempts {
                    tracing::info!("{what}: transient failure ({err}); giving up after {attempt} tries");
                    return Err(err);
                }
                let delay = server_delay(&err)
                    .unwrap_or_else(|| jittered(backoff_delay(attempt)))
                    .min(left);
                if cancelled() {
                    tracing::info!("{what}: transient failure ({err}); not retried: interrupted");
                    return Err(err);
                }
                tracing::info!("{what}: transient failure ({err}); retrying in {delay:?}");
                if sleep_unless_cancelled(delay).await {
                    tracing::info!("{what}: not retried: interrupted");
                    return Err(err);
                }
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
    use std::sync::atomic::AtomicU32;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("boom", "InternalError").with_code(code).boxed())
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff_delay(1), Duration::from_millis(200));
        assert_eq!(backoff_delay(2), Duration::from_millis(400));
        assert_eq!(backoff_delay(3), Duration::from_millis(800));
        assert_eq!(backoff_delay(20), MAX_DELAY);
        assert_eq!(backoff_delay(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn jitter_stays_between_half_and_all_and_varies() {
        let delay = Duration::from_secs(4);
        let drawn: Vec<Duration> = (0..200).map(|_| jittered(delay)).collect();
        assert!(drawn.iter().all(|d| *d >= delay / 2 && *d <= delay), "{drawn:?}");
        let distinct: std::collections::HashSet<_> = drawn.iter().collect();
        assert!(distinct.len() > 150, "{} distinct of 200", distinct.len());
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
    async fn an_outage_shorter_than_the_budget_is_ridden_out() {
        // A server that is down for 30 s (every request fails), then answers.
        let started = Instant::now();
        let calls = AtomicU32::new(0);
        let result = with_budget("test", DEFAULT_BUDGET, || {
            calls.fetch_add(1, Ordering::SeqCst);
            let down = started.elapsed() < Duration::from_secs(30);
            async move {
                if down {
                    Err(api_error(503))
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert!(result.is_ok());
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_secs(30) && elapsed < Duration::from_secs(36),
            "{elapsed:?}"
        );
        // Backoff, not a busy loop: about 6 quick tries, then one every 2.5-5 s.
        let calls = calls.load(Ordering::SeqCst);
        assert!((8..=20).contains(&calls), "{calls} calls");
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_when_the_budget_is_spent() {
        let started = Instant::now();
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_budget("test", Duration::from_secs(20), || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(502)) }
        })
        .await;
        assert!(result.is_err());
        // The last try is made when the budget ends, not later.
        assert_eq!(started.elapsed(), Duration::from_secs(20));
        assert!(calls.load(Ordering::SeqCst) >= 5);
    }

    #[tokio::test(start_paused = true)]
    async fn too_many_requests_waits_as_long_as_the_server_asks() {
        let calls = AtomicU32::new(0);
        let started = Instant::now();
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
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    fn refused() -> kube::Error {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        kube::Error::Service(Box::new(io))
    }

    #[test]
    fn a_refused_connection_is_final_only_before_the_server_ever_answered() {
        assert!(refused_before_any_answer(false, &refused()));
        assert!(
            !refused_before_any_answer(true, &refused()),
            "mid-run: a restart, retried"
        );
        assert!(!refused_before_any_answer(false, &api_error(503)));
        assert!(is_transient(&refused()));
        assert!(!got_no_answer(&refused()), "a refused DELETE was never sent");
        assert!(got_no_answer(&kube::Error::Service(Box::new(Abandoned))));
        assert!(!got_no_answer(&api_error(503)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_never_answered_is_cut_at_the_bound() {
        let started = Instant::now();
        let calls = AtomicU32::new(0);
        let never = with_budget("test", Duration::from_secs(20), || {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<(), kube::Error>>()
        });
        let result = tokio::time::timeout(Duration::from_secs(3600), never)
            .await
            .expect("a request that is never answered must not hang");
        let err = result.unwrap_err();
        assert!(
            err.to_string().contains("no answer within 70s") || format!("{err:?}").contains("Unanswered"),
            "{err:?}"
        );
        assert_eq!(
            started.elapsed(),
            DEFAULT_ATTEMPT_BOUND + CLIENT_FIRST,
            "one try, cut at the bound"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
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
    async fn a_number_of_attempts_can_still_be_asked_for() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_attempts("test", 3, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(api_error(503)) }
        })
        .await;
        assert_eq!(crate::error::api_status(&result.unwrap_err()), Some(503));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}
