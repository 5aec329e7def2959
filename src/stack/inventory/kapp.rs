//! kapp: where a kapp app's manifests written without a namespace go. `kapp deploy -a APP -n NS`
//! places such a manifest in NS (carvel-dev/kapp `pkg/kapp/cmd/app/deploy.go`:
//! `PrepareResourcesOpts.DefaultNamespace` is the `-n` flag; `pkg/kapp/app/preparation.go`
//! `placeIntoNamespace`), and the cluster keeps no trace of NS: the app record (a ConfigMap
//! labelled `kapp.k14s.io/is-app`) may live elsewhere (`--app-namespace`, kapp v0.61+), and
//! `--into-ns` and `--map-ns` move resources further. So only the user's `-n` can say it, as
//! kapp's own `-n` was given (membership reviews 16 F2 and 17 F1: the context's namespace, then
//! the app record's, were taken, and a still-wanted object was pruned).

use super::StackRecord;
use crate::cluster::session::Session;
use crate::stack::desired::NoNamespace;

/// The record of a kapp app for its namespace-less manifests: `-n`'s namespace when the user
/// gave one (the default, [`StackRecord::namespace_rule`]'s fallback); else none is known, and
/// such a manifest is unplaced ([`NoNamespace::Kapp`]).
pub fn kapp_record(session: &Session) -> StackRecord {
    StackRecord {
        namespace_required: (!session.connection.namespace_given).then_some(NoNamespace::Kapp),
        ..StackRecord::default()
    }
}
