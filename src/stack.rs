//! The stack layer: which objects belong to which stack and whether its tool would delete them.
//! Each tool's record (inventory) and what its tracking objects claim (members), the manifests
//! and the desired set, the classification of what is listed (tracked, desired, orphan), the
//! tools' policies, suspensions and the one keep chain, and the parents that re-create what a
//! stack deletes. It reads through [`crate::cluster`], speaks [`crate::model`], and knows
//! nothing of graphs, plans or output.

pub mod classify;
pub mod desired;
pub mod inventory;
pub mod kapp_versions;
pub mod keep;
pub mod listing;
pub mod manifest;
pub mod members;
pub mod parents;
pub mod policy;
pub mod suspension;
