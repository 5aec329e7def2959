//! Aggregated discovery, as every 1.26+ API server answers it, which our 1.20 server cannot:
//! `tests/proxy/stack_proxy.py --aggregated v2|v2beta1` answers `/api` and `/apis` asked for an
//! APIGroupDiscoveryList (v2 as 1.30+ servers do, v2beta1 only as 1.26-1.29 do), composed from
//! the 1.20 server's per-group answers. kubectl 1.32 checks the proxy (it takes the answer: two
//! discovery requests instead of one per group version); kubectl-stack must take it too, and
//! the discovery-dependent commands must give the same answers through it.

mod common;
#[path = "proxy/mod.rs"]
mod proxy;

use std::collections::BTreeSet;

use common::*;
use kubectl_stack::cluster::discovery::{discover, Catalog, DiscoverySource};
use proxy::{Proxy, Record};

const MODES: [&str; 2] = ["v2", "v2beta1"];

fn discovery_requests(records: &[Record]) -> (Vec<String>, usize) {
    let aggregated = records
        .iter()
        .filter_map(|r| r.aggregated().map(|v| format!("{} {v}", r.path())))
        .collect();
    let per_group = records.iter().filter(|r| r.is_group_version_discovery()).count();
    (aggregated, per_group)
}

#[test]
fn kubectl_1_32_takes_the_proxys_aggregated_answers() {
    let _logs = start();
    for mode in [None, Some("v2"), Some("v2beta1")] {
        let proxy = Proxy::start(&mode.map(|m| vec!["--aggregated", m]).unwrap_or_default());
        let cache = std::env::temp_dir().join(unique("kubectl-cache"));
        let kubeconfig = proxy.kubeconfig.to_str().unwrap().to_string();
        let result = kubectl(&[
            "--kubeconfig",
            &kubeconfig,
            "--cache-dir",
            cache.to_str().unwrap(),
            "api-resources",
            "-v",
            "6",
        ]);
        assert_eq!(result.code, 0, "{}", result.stderr);
        assert!(result.stdout.contains("deployments"), "{}", result.stdout);
        let (aggregated, per_group) = discovery_requests(&proxy.records());
        match mode {
            None => assert!(
                per_group > 10,
                "without aggregated discovery: one request per group version"
            ),
            Some(version) => {
                assert_eq!(
                    aggregated,
                    [format!("/api {version}"), format!("/apis {version}")],
                    "{}",
                    result.stderr
                );
                assert_eq!(
                    per_group, 0,
                    "kubectl 1.32 took the aggregated answer:\n{}",
                    result.stderr
                );
            }
        }
    }
}

async fn catalog_through(kubeconfig: &std::path::Path) -> Catalog {
    let args = kubectl_stack::cluster::client::ConnectOptions {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        ..Default::default()
    };
    let client = kubectl_stack::cluster::client::connect(&args).await.unwrap().client;
    discover(&client).await.unwrap()
}

/// What must be equal whichever way a kind was discovered. (`singular` is not: 1.20 leaves it
/// empty for built-in kinds, aggregated discovery always fills it.)
fn comparable(catalog: &Catalog) -> BTreeSet<String> {
    catalog
        .kinds()
        .iter()
        .map(|k| {
            let mut verbs = k.verbs.clone();
            verbs.sort();
            format!(
                "{}|{}|{}|{}|{}|{}|{}",
                k.group,
                k.version,
                k.kind,
                k.plural,
                k.namespaced,
                verbs.join(","),
                k.short_names.join(",")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_aggregated_catalog_is_the_per_group_catalog() {
    let _logs = start();
    ensure_crds();
    let direct = catalog_through(&cluster().admin).await;
    assert_eq!(direct.source, DiscoverySource::PerGroup);
    for mode in MODES {
        let proxy = Proxy::start(&["--aggregated", mode]);
        let aggregated = catalog_through(&proxy.kubeconfig).await;
        assert_eq!(aggregated.source, DiscoverySource::Aggregated, "{mode}");
        assert!(aggregated.failures.is_empty(), "{:?}", aggregated.failures);
        assert_eq!(comparable(&aggregated), comparable(&direct), "{mode}");
        assert_eq!(
            aggregated
                .get("stack-test.example.com", "Gadget")
                .map(|k| k.version.as_str()),
            Some("v1beta1")
        );
        let (requests, per_group) = discovery_requests(&proxy.records());
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert_eq!(per_group, 0);
    }
}

#[test]
fn discovery_dependent_commands_give_the_same_answers_through_aggregated_discovery() {
    let _logs = start();
    ensure_crds();
    let ns = Namespace::new("aggregated");
    let n = &ns.0;
    let run = unique("a");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: {run}}}}}
---
apiVersion: stack-test.example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: {n}
  annotations:
    config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/settings
    config.k8s.io/owning-inventory: {run}
---
apiVersion: stack-test.example.com/v1beta1
kind: Gadget
metadata: {{name: {run}-g, annotations: {{config.k8s.io/owning-inventory: {run}}}}}
{}"#,
        // The inventory records them: kpt prunes nothing its inventory does not list.
        kpt_inventory(
            n,
            &run,
            &[
                format!("{n}_settings__ConfigMap"),
                format!("{n}_w1_stack-test.example.com_Widget"),
                format!("_{run}-g_stack-test.example.com_Gadget"),
            ]
        )
    ));
    let tracker = format!("kpt={run}");
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
    );
    let desired = desired.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["list", "-A", "--tracker", &tracker, "-o", "name"],
        vec!["orphans", "-n", n, "--tracker", &tracker, "-f", desired, "-o", "name"],
        vec!["graph", "-n", n, "--tracker", &tracker, "--order", "delete"],
        vec!["prune", "-n", n, "--tracker", &tracker, "-f", desired, "--dry-run"],
    ];
    let direct: Vec<Run> = commands.iter().map(|args| stack(args)).collect();
    for mode in MODES {
        let proxy = Proxy::start(&["--aggregated", mode]);
        for (args, expected) in commands.iter().zip(&direct) {
            proxy.clear();
            // A fresh discovery cache, so that every command discovers.
            let cache = std::env::temp_dir().join(unique("stack-cache"));
            let mut args = args.clone();
            args.extend(["--cache-dir", cache.to_str().unwrap()]);
            let result = stack_as(&proxy.kubeconfig, &args);
            assert_eq!(
                (result.code, &result.stdout),
                (expected.code, &expected.stdout),
                "{mode} {args:?}\n{}",
                result.stderr
            );
            let (requests, per_group) = discovery_requests(&proxy.records());
            assert_eq!(requests.len(), 2, "{mode} {args:?}: {requests:?}");
            assert_eq!(per_group, 0, "{mode} {args:?}");
        }
    }
    assert_eq!(direct[0].code, 0);
    assert_eq!(
        direct[0].stdout,
        format!("configmap/settings\ngadget.stack-test.example.com/{run}-g\nwidget.stack-test.example.com/w1\n")
    );
    assert!(
        direct[1].stdout.contains("widget.stack-test.example.com/w1"),
        "{:?}",
        direct[1]
    );
    let _ = kubectl(&["delete", "gadget.stack-test.example.com", &format!("{run}-g")]);
}
