//! The vocabulary every layer shares, with no I/O and nothing above it: what names an object
//! ([`identity`]), how each tool marks what it tracks and what it must keep ([`trackers`]), and
//! kubectl-format values such as durations ([`values`]).

pub(crate) mod annotations;
pub mod identity;
pub mod trackers;
pub(crate) mod values;
