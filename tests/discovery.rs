//! Discovery against the real 1.20 server, which has no aggregated discovery.

mod common;
#[path = "proxy/mod.rs"]
mod proxy;

use common::*;
use kubectl_stack::cluster::discovery::{discover, discover_aggregated, DiscoverySource};
use proxy::{Proxy, Record};

async fn client() -> kube::Client {
    let args = kubectl_stack::cluster::client::ConnectOptions {
        kubeconfig: Some(cluster().admin.clone()),
        ..Default::default()
    };
    kubectl_stack::cluster::client::connect(&args).await.unwrap().client
}

#[tokio::test(flavor = "multi_thread")]
async fn aggregated_discovery_on_1_20_is_never_taken_as_an_empty_cluster() {
    let _logs = start();
    ensure_crds();
    let client = client().await;
    // The 1.20 server answers the aggregated request with a plain group list.
    let aggregated = discover_aggregated(&client).await.unwrap();
    assert!(aggregated.is_none(), "aggregated discovery should be reported unusable");

    let catalog = discover(&client).await.unwrap();
    assert_eq!(catalog.source, DiscoverySource::PerGroup);
    assert!(catalog.kinds().len() > 40, "{}", catalog.kinds().len());
    for (group, kind, version) in [
        ("", "ConfigMap", "v1"),
        ("apps", "Deployment", "v1"),
        ("rbac.authorization.k8s.io", "ClusterRole", "v1"),
        ("stack-test.example.com", "Widget", "v1"),
        ("stack-test.example.com", "Gadget", "v1beta1"),
    ] {
        let found = catalog
            .get(group, kind)
            .unwrap_or_else(|| panic!("{kind}.{group} missing"));
        assert_eq!(found.version, version, "{kind}.{group}");
    }
    // Each kind exactly once, no subresources.
    let mut seen = std::collections::HashSet::new();
    for kind in catalog.kinds() {
        assert!(seen.insert((kind.group.clone(), kind.kind.clone())), "{kind:?} twice");
        assert!(!kind.plural.contains('/'));
    }
    assert!(!catalog.get("", "Namespace").unwrap().namespaced);
}

/// A CRD of its own (`things.GROUP`, version v1), established; returns the group and the CRD's
/// API path.
fn short_lived_crd(prefix: &str) -> (String, String) {
    let group = format!("{}.stack-test.example.com", unique(prefix));
    let name = format!("things.{group}");
    apply(&format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {name}}}\n\
         spec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: things, singular: thing, kind: Thing, listKind: ThingList}}\n  \
         versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]\n"
    ));
    wait_established(&[&format!("crd/{name}")], &name);
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
    (group, path)
}

/// A CRD deleted between a command's `/apis` and its `/apis/GROUP/VERSION` (the proxy deletes it
/// while holding the request) leaves a group version that answers 404 and is no longer in a
/// fresh `/apis`: it is gone, not a group that could not be discovered. `list` and `prune` go on
/// (without the fix: "could not discover", list exits 3 and prune refuses).
#[test]
fn a_crd_deleted_while_discovery_runs_is_gone_not_a_gap() {
    let _logs = start();
    let ns = Namespace::new("race");
    let run = unique("r");
    // The inventory records `stale`: kpt prunes nothing its inventory does not list.
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: stale, namespace: {}, annotations: {{config.k8s.io/owning-inventory: {run}}}}}\n{}",
        ns.0,
        kpt_inventory(&ns.0, &run, &[format!("{}_stale__ConfigMap", ns.0)])
    ));
    let tracker = format!("kpt={run}");
    let cache = std::env::temp_dir().join(unique("race-cache"));
    let cache = cache.to_str().unwrap();
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wanted}\n",
    );
    let list: Vec<&str> = vec![
        "list",
        "-n",
        &ns.0,
        "--tracker",
        &tracker,
        "-o",
        "name",
        "--cache-dir",
        cache,
    ];
    let prune: Vec<&str> = vec![
        "prune",
        "-n",
        &ns.0,
        "--tracker",
        &tracker,
        "-f",
        desired.to_str().unwrap(),
        "--yes",
        "--cache-dir",
        cache,
    ];
    for args in [list, prune] {
        let (group, crd) = short_lived_crd("race");
        let proxy = Proxy::start(&["--remove-on-discovery", &format!("{group}/v1={crd}")]);
        let result = stack_as(&proxy.kubeconfig, &args);
        let removed: Vec<Option<u64>> = proxy
            .records()
            .iter()
            .filter(|r| r.path() == format!("/apis/{group}/v1"))
            .map(Record::removed)
            .collect();
        assert_eq!(
            removed.first(),
            Some(&Some(200)),
            "the CRD was deleted under {args:?}'s discovery"
        );
        assert_eq!(result.code, 0, "{args:?}\n{}\n{}", result.stdout, result.stderr);
        assert!(
            !result.stderr.contains("could not discover"),
            "{args:?}: {}",
            result.stderr
        );
        if args[0] == "list" {
            assert_eq!(result.stdout, "configmap/stale\n");
        }
    }
    assert!(!exists("configmap", Some(&ns.0), "stale"), "the prune deleted it");
}
