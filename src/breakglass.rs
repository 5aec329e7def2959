//! The break-glass layer: why a deletion hangs (`stuck`) and the last resort that removes
//! finalizers (`unstick`). Each gathers its evidence with reads first, then judges it with pure
//! functions.

pub mod stuck;
pub mod unstick;
