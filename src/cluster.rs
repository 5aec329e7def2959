//! The cluster layer: everything that talks to the API server and nothing that judges what it
//! reads. The kubeconfig and client, the proxy, discovery of the served kinds, the one lister
//! (metadata-only, paginated, concurrent across kinds), retries of transient failures, and the
//! session that carries them to the layers above.

pub mod client;
pub mod collect;
pub mod discovery;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod proxy;
pub(crate) mod retry;
pub mod session;
