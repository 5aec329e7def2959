//! The stack layer: which objects belong to which stack and whether its tool would delete them.
//! Each tool's record (inventory) and what its tracking objects claim (members), the manifests
//! and the desired set, the classification of what is listed (tracked, desired, orphan), the
//! tools' policies, suspensions and the one keep chain, and the parents that re-create what a
//! stack deletes. It reads through [`crate::cluster`], speaks [`crate::model`], and knows
//! nothing of graphs, plans or output.

pub mod classify;
pub mod desired;
pub(crate) mod inventory;
pub(crate) mod kapp_versions;
pub mod keep;
pub(crate) mod listing;
pub mod manifest;
pub(crate) mod members;
pub(crate) mod parents;
pub(crate) mod policy;
pub(crate) mod suspension;
