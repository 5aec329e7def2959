//! Fixtures shared by the library's unit tests: a kind as discovery reports it, and metadata
//! with labels and annotations.

use std::collections::BTreeMap;

use kube::core::ObjectMeta;

use crate::cluster::discovery::KindInfo;

/// A kind at `v1`, plural `<kind>s`, that can be listed and deleted.
pub fn kind(group: &str, kind: &str, namespaced: bool) -> KindInfo {
    KindInfo {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
        singular: kind.to_lowercase(),
        short_names: vec![],
        namespaced,
        verbs: vec!["list".into(), "delete".into()],
    }
}

/// Metadata with these labels and annotations.
pub fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
    let map = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    ObjectMeta {
        labels: map(labels),
        annotations: map(annotations),
        ..Default::default()
    }
}
