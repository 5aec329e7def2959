//! Whether a Flux stack's suspension is kubectl-stack's or its user's: the annotation and
//! field manager a run's suspension leaves, and the proof read from them. A stack its user
//! suspended deletes nothing (its tool would not); one the run suspended is lifted before it
//! goes (`prune::suspend` writes and lifts them).

/// The annotation a suspension by kubectl-stack is recorded in, on the suspended object itself,
/// in the same PATCH that suspends it: a run that stops before it lifts a suspension (Ctrl-C,
/// SIGTERM, `kill -9`, a lost connection) leaves it findable. A later run lifts it as its own
/// before deleting the object, and `kubectl get kustomizations,helmreleases -A -o
/// jsonpath='{range .items[?(@.metadata.annotations.kubectl-stack/suspended-by)]}...'` lists
/// them (README).
pub const SUSPENDED_BY: &str = "kubectl-stack/suspended-by";

/// The field manager of the PATCH that suspends a Flux object (and of the one that lifts it):
/// where the API server tracks managed fields, it records that kubectl-stack set `spec.suspend`,
/// and a user's, a CLI's or a parent's write of it since (`kubectl patch`, `kubectl edit`, a
/// server-side apply) moves or shares that field's ownership ([`suspension_by_tool`]).
pub const FIELD_MANAGER: &str = "kubectl-stack";

/// What the [`SUSPENDED_BY`] value ends with: the `metadata.generation` the suspending PATCH
/// gave the object (it changed `spec.suspend`, so the API server incremented the generation the
/// PATCH was made against, as its resourceVersion precondition guarantees).
pub const AT_GENERATION: &str = ", generation ";

/// The generation a [`SUSPENDED_BY`] value records, when it records one.
pub(crate) fn recorded_generation(record: &str) -> Option<i64> {
    record.rsplit_once(AT_GENERATION)?.1.trim().parse().ok()
}

/// The [`SUSPENDED_BY`] value of a Flux object's suspension when kubectl-stack provably set it
/// and nobody changed its spec since: `spec.suspend` is true (`suspended`), the object carries
/// the annotation, its `metadata.generation` is still the one the annotation records (any spec
/// write since — a `flux resume` then `flux suspend`, a `kubectl edit`, an apply — increments
/// it; status and metadata writes do not), and, where the API server tracks managed fields,
/// every entry that owns `spec.suspend` is kubectl-stack's ([`FIELD_MANAGER`]). `None`
/// otherwise: a suspension its user set — before a run (a stale annotation an earlier run left)
/// or during one — or one that an older annotation (without a generation) cannot prove is the
/// stack's policy, and Flux deletes nothing of a suspended stack. A write that changes nothing
/// (a merge patch of `suspend: true` on an object already suspended) is not recorded by the API
/// server at all and cannot be seen: removing the annotation makes the suspension the user's.
pub fn suspension_by_tool(meta: &kube::core::ObjectMeta, suspended: bool) -> Option<&str> {
    let record = meta.annotations.as_ref()?.get(SUSPENDED_BY)?;
    let same_spec = recorded_generation(record).is_some_and(|g| meta.generation == Some(g));
    let owners: Vec<&str> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .and_then(|fields| fields.0.pointer("/f:spec/f:suspend"))
                .is_some()
        })
        .map(|entry| entry.manager.as_deref().unwrap_or_default())
        .collect();
    let tracked = meta.managed_fields.as_ref().is_some_and(|fields| !fields.is_empty());
    let owned = !tracked || (!owners.is_empty() && owners.iter().all(|manager| *manager == FIELD_MANAGER));
    (suspended && same_spec && owned).then_some(record.as_str())
}

/// Whether a Flux object's body (`data`, as [`kube::api::DynamicObject`] holds it) says
/// `spec.suspend: true`.
pub fn is_suspended(data: &serde_json::Value) -> bool {
    data.pointer("/spec/suspend").and_then(serde_json::Value::as_bool) == Some(true)
}

/// Drops a [`SUSPENDED_BY`] annotation that does not prove the object's suspension is
/// kubectl-stack's ([`suspension_by_tool`]), before its managed fields are dropped: what the plan
/// reads of a Flux stack then takes that suspension for its user's (see
/// `graph::orphans_members`).
pub fn forget_unproven(meta: &mut kube::core::ObjectMeta, data: &serde_json::Value) {
    if suspension_by_tool(meta, is_suspended(data)).is_none() {
        if let Some(annotations) = meta.annotations.as_mut() {
            let key = format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            );
            if annotations.remove(SUSPENDED_BY).is_some() && is_suspended(data) && first_time_unproven(key) {
                tracing::warn!(
                    "{}/{} is suspended and carries {SUSPENDED_BY}, but that annotation does not prove the suspension is kubectl-stack's (its spec changed since, or someone else set spec.suspend): its user's suspension, kept",
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default()
                );
            }
        }
    }
}

/// Whether the unproven suspension of `key` is met for the first time in this run: the plan
/// and every re-check list it, and the user is told once.
fn first_time_unproven(key: String) -> bool {
    static WARNED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::OnceLock::new();
    let warned = WARNED.get_or_init(Default::default);
    warned.lock().map_or(true, |mut warned| warned.insert(key))
}
