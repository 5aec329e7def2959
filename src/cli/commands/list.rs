//! `kubectl stack list`: the objects a stack tracks.

use serde_json::{json, Value};

use crate::cli::{list_options, selection};
use crate::cli::{GlobalArgs, ListArgs, ListOutput};
use crate::cluster::collect::{collect, ListOptions, Listed, Trim};
use crate::cluster::session::{relist_not_served, resolve_selection, Session};
use crate::error::{exit, UserError};
use crate::render;
use crate::stack::listing::{gaps, incomplete, status, tracked_by, warn_unlisted};

/// Runs `list`.
pub async fn run(global: &GlobalArgs, args: ListArgs) -> anyhow::Result<u8> {
    let mut selection = selection(&args.selection)?;
    let mut session = Session::open(global).await?;
    resolve_selection(&mut selection, &session)?;
    let options = ListOptions {
        trim: trim_for(args.output),
        ..list_options(&args.tuning)
    };
    let mut collection = collect(
        &session.connection.client,
        &session.catalog,
        &session.scope,
        &selection,
        options,
    )
    .await;
    relist_not_served(&mut session, &mut collection, &selection, options).await;
    warn_unlisted(&collection, &session)?;
    if collection.objects.is_empty() && matches!(args.output, ListOutput::Table | ListOutput::Wide) {
        crate::say!("No tracked objects found ({}).", selection.describe());
    } else {
        render::emit(&render_list(&collection.objects, args.output)?)?;
    }
    incomplete(&gaps(&collection, &session))?;
    Ok(exit::OK)
}

/// What of each object an output prints: the rest is dropped as pages arrive.
fn trim_for(output: ListOutput) -> Trim {
    match output {
        ListOutput::Name => Trim::Identity,
        ListOutput::Table => Trim::Marks,
        ListOutput::Wide | ListOutput::Json | ListOutput::Yaml => Trim::Keep,
    }
}

/// Renders listed objects in the chosen format.
pub fn render_list(objects: &[Listed], output: ListOutput) -> Result<String, UserError> {
    match output {
        ListOutput::Table => Ok(render::table_of(&HEADERS, objects, row)),
        ListOutput::Wide => Ok(render::table_of(&WIDE_HEADERS, objects, wide_row)),
        ListOutput::Json => render::json(&ListDocument(objects)),
        ListOutput::Yaml => render::yaml(&ListDocument(objects)),
        ListOutput::Name => Ok(objects.iter().map(|o| o.id().kubectl_name() + "\n").collect()),
    }
}

const HEADERS: [&str; 6] = ["KIND", "NAMESPACE", "NAME", "AGE", "STATUS", "TRACKED-BY"];
const WIDE_HEADERS: [&str; 10] = [
    "KIND",
    "NAMESPACE",
    "NAME",
    "AGE",
    "STATUS",
    "TRACKED-BY",
    "VERSION",
    "UID",
    "FINALIZERS",
    "CONTROLLED-BY",
];

fn row(object: &Listed) -> Vec<String> {
    vec![
        object.kind.kind_with_group(),
        object.namespace().unwrap_or("").to_string(),
        object.name().to_string(),
        render::age(object.meta.creation_timestamp.as_ref()),
        status(object),
        tracked_by(object),
    ]
}

fn wide_row(object: &Listed) -> Vec<String> {
    let mut cells = row(object);
    cells.push(object.kind.api_version());
    cells.push(object.uid().to_string());
    cells.push(if object.finalizers().is_empty() {
        "<none>".to_string()
    } else {
        object.finalizers().join(",")
    });
    cells.push(
        object
            .controller_owner()
            .map(|o| format!("{}/{}", o.kind, o.name))
            .unwrap_or_else(|| "<none>".to_string()),
    );
    cells
}

/// A Kubernetes `List` of the objects' metadata, as `kubectl get -o json` would frame it: what
/// [`ListDocument`] writes, built whole (the tests compare the two).
#[cfg(test)]
fn as_list(objects: &[Listed]) -> Value {
    let items: Vec<Value> = objects.iter().map(list_item).collect();
    json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items})
}

/// One item of the `List`.
fn list_item(object: &Listed) -> Value {
    json!({"apiVersion": object.kind.api_version(), "kind": object.kind.kind, "metadata": object.meta})
}

/// A Kubernetes `List` of the objects' metadata, as `kubectl get -o json` frames it (its keys in
/// the order of a `Value`'s), each item made only while it is written, so that a list of many
/// objects is never held twice.
pub struct ListDocument<'a>(pub &'a [Listed]);

impl serde::Serialize for ListDocument<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // A `Value`'s keys are sorted: apiVersion, items, kind, metadata.
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("apiVersion", "v1")?;
        map.serialize_entry("items", &ListItems(self.0))?;
        map.serialize_entry("kind", "List")?;
        map.serialize_entry("metadata", &serde_json::Map::new())?;
        map.end()
    }
}

struct ListItems<'a>(&'a [Listed]);

impl serde::Serialize for ListItems<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut items = serializer.serialize_seq(Some(self.0.len()))?;
        for object in self.0 {
            items.serialize_element(&list_item(object))?;
        }
        items.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_list_document_is_written_as_the_list_value() {
        let kind = |group: &str, k: &str| Arc::new(crate::cluster::fixtures::kind(group, k, true));
        let meta = |name: &str, ns: Option<&str>| kube::core::ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(String::from),
            uid: Some(format!("uid-{name}")),
            labels: Some([("b".to_string(), "2".to_string()), ("a".to_string(), "1".to_string())].into()),
            finalizers: Some(vec!["example.com/f".into()]),
            ..Default::default()
        };
        for objects in [
            vec![],
            vec![
                Listed::new(kind("", "ConfigMap"), meta("a", Some("default"))),
                Listed::new(kind("apps", "Deployment"), meta("web", Some("team"))),
                Listed::new(kind("", "Namespace"), meta("team", None)),
            ],
        ] {
            let document = ListDocument(&objects);
            assert_eq!(
                render::json(&document).unwrap(),
                render::json(&as_list(&objects)).unwrap()
            );
            assert_eq!(
                render::yaml(&document).unwrap(),
                render::yaml(&as_list(&objects)).unwrap()
            );
        }
    }
}
