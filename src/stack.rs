//! The stack layer: which objects belong to which stack and whether its tool would delete them.
//! The trackers' marks, each tool's record (inventory), the manifests and the desired set, the
//! classification of what is listed (tracked, desired, orphan), the tools' policies and the one
//! keep chain, and the orphan finder that composes them. It reads through [`crate::cluster`]
//! and knows nothing of graphs, plans or output.

pub mod classify;
pub mod desired;
pub mod inventory;
pub mod keep;
pub mod listing;
pub mod manifest;
pub mod members;
pub mod orphans;
pub mod parents;
pub mod policy;
pub mod suspension;
