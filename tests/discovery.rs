//! Discovery against the real 1.20 server, which has no aggregated discovery.

mod common;

use common::*;
use kubectl_stack::discovery::{discover, discover_aggregated, DiscoverySource};

async fn client() -> kube::Client {
    let args = kubectl_stack::client::ConnectOptions {
        kubeconfig: Some(cluster().admin.clone()),
        ..Default::default()
    };
    kubectl_stack::client::connect(&args).await.unwrap().client
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
