//! `kubectl stack graph`: offline from a fixture repository, and live on the real cluster.

mod common;

use common::*;
use serde_json::Value;

fn node_name(json: &Value, index: &Value) -> String {
    let node = &json["nodes"][index.as_u64().unwrap() as usize];
    format!("{}/{}", node["kind"].as_str().unwrap(), node["name"].as_str().unwrap())
}

fn waves(json: &Value) -> Vec<Vec<String>> {
    json["waves"]
        .as_array()
        .expect("waves")
        .iter()
        .map(|wave| wave.as_array().unwrap().iter().map(|i| node_name(json, i)).collect())
        .collect()
}

const NO_CLUSTER: &str = "/nonexistent/kubeconfig";

#[test]
fn offline_graph_of_a_repository_needs_no_cluster() {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/repo");
    let no_cluster = std::path::Path::new(NO_CLUSTER);

    let tree = stack_as(no_cluster, &["graph", "-f", repo]).expect_code(0);
    assert!(tree.stdout.contains(
        "Kustomization.kustomize.toolkit.fluxcd.io/flux-system/monitoring\n├── Kustomization.kustomize.toolkit.fluxcd.io/flux-system/apps (dependsOn)\n│   └── Kustomization.kustomize.toolkit.fluxcd.io/flux-system/infra (dependsOn)\n└── Kustomization.kustomize.toolkit.fluxcd.io/security/certificates [missing] (dependsOn)\n"
    ), "{}", tree.stdout);
    assert!(
        tree.stdout.contains("└── Job.batch/shop/migrate (sync-wave)"),
        "{}",
        tree.stdout
    );
    assert!(
        tree.stdout.contains("├── ConfigMap/shop/db-config (depends-on)"),
        "{}",
        tree.stdout
    );
    assert!(tree.stderr.contains("certificates does not exist"), "{}", tree.stderr);

    let delete = stack_as(no_cluster, &["graph", "-f", repo, "--order", "delete", "-o", "json"]).expect_code(0);
    let json = delete.json();
    assert_eq!(
        waves(&json),
        vec![
            vec!["Deployment/web", "StatefulSet/db", "Kustomization/monitoring"],
            vec!["ConfigMap/db-config", "Job/migrate", "Kustomization/apps"],
            vec!["Namespace/shop", "Kustomization/infra"],
        ]
    );
    let missing: Vec<&Value> = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "missing")
        .collect();
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0]["namespace"], "security");

    // Apply order, stated on its own (not derived from the delete order): what others depend on
    // (the Namespace, infra) first.
    let apply = stack_as(no_cluster, &["graph", "-f", repo, "--order", "apply", "-o", "json"]).expect_code(0);
    assert_eq!(
        waves(&apply.json()),
        vec![
            vec!["Namespace/shop", "Kustomization/infra"],
            vec!["ConfigMap/db-config", "Job/migrate", "Kustomization/apps"],
            vec!["Deployment/web", "StatefulSet/db", "Kustomization/monitoring"],
        ]
    );

    let table = stack_as(no_cluster, &["graph", "-f", repo, "--order", "delete"]).expect_code(0);
    assert!(table.stdout.starts_with("WAVE"));
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.starts_with("3 ") && l.ends_with("infra")),
        "{}",
        table.stdout
    );

    let dot = stack_as(no_cluster, &["graph", "-f", repo, "-o", "dot"]).expect_code(0);
    assert!(dot.stdout.starts_with("digraph stack {") && dot.stdout.trim_end().ends_with('}'));
    assert_eq!(
        dot.stdout.matches(" -> ").count(),
        json["edges"].as_array().unwrap().len()
    );
    let mermaid = stack_as(no_cluster, &["graph", "-f", repo, "-o", "mermaid"]).expect_code(0);
    assert!(mermaid.stdout.starts_with("flowchart LR\n"));
    assert_eq!(
        mermaid.stdout.matches("-->|").count(),
        json["edges"].as_array().unwrap().len()
    );
}

#[test]
fn a_cycle_is_printed_as_a_path_and_exits_6() {
    let cycle = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cycle");
    let result = stack_as(std::path::Path::new(NO_CLUSTER), &["graph", "-f", cycle]).expect_code(6);
    let line = result
        .stderr
        .lines()
        .find(|l| l.starts_with("error: dependency cycle:"))
        .expect("cycle line");
    let path: Vec<&str> = line
        .trim_start_matches("error: dependency cycle: ")
        .split(" -> ")
        .collect();
    assert_eq!(path.len(), 4, "{line}");
    assert_eq!(path[0], path[3]);
    assert!(result.stdout.contains("(cycle)"));
    let json = stack_as(std::path::Path::new(NO_CLUSTER), &["graph", "-f", cycle, "-o", "json"]).expect_code(6);
    let json = json.json();
    let cycle_nodes: Vec<&Value> = json["cycle"].as_array().unwrap().iter().collect();
    assert_eq!(cycle_nodes.len(), 3);
    // The path is the fixture's three Kustomizations, each step one of its dependsOn edges.
    let mut names: Vec<&str> = path[..3].iter().map(|p| p.rsplit('/').next().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["a", "b", "c"], "{line}");
    let prefix = "Kustomization.kustomize.toolkit.fluxcd.io/flux-system/";
    let dependencies = [("a", "b"), ("b", "c"), ("c", "a")];
    for step in path.windows(2) {
        let (from, to) = (step[0].trim_start_matches(prefix), step[1].trim_start_matches(prefix));
        assert!(
            dependencies.contains(&(from, to)),
            "{from} -> {to} is not an edge: {line}"
        );
    }
    for k in 0..3 {
        let (from, to) = (cycle_nodes[k], cycle_nodes[(k + 1) % 3]);
        let edge = json["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| &e["from"] == from && &e["to"] == to)
            .unwrap_or_else(|| panic!("no edge {from} -> {to}: {json}"));
        assert_eq!(edge["kind"], "dependsOn");
        assert_eq!(json["nodes"][from.as_u64().unwrap() as usize]["kind"], "Kustomization");
    }
}

#[test]
fn live_graph_with_flux_objects_members_and_waves() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("graph");
    let other = Namespace::new("graph-infra");
    let (n, o) = (&ns.0, &other.0);
    let labels = |stack: &str| {
        format!("{{kustomize.toolkit.fluxcd.io/name: {stack}, kustomize.toolkit.fluxcd.io/namespace: {n}}}")
    };
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {n}}}
spec: {{dependsOn: [{{name: operator}}, {{name: gone}}, {{name: db, namespace: {o}}}]}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: operator, namespace: {n}}}
spec: {{}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: db, namespace: {o}}}
spec: {{}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: usage-cm, namespace: {n}, labels: {}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: operator-cm, namespace: {n}, labels: {}}}
"#,
        labels("usage"),
        labels("operator")
    ));

    // Only this namespace: the cross-namespace dependency is external, `gone` is missing.
    let graph = stack(&["graph", "-n", n, "--members", "-o", "json", "--order", "delete"]).expect_code(0);
    let json = graph.json();
    let status_of = |name: &str| {
        json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|node| node["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))["status"]
            .clone()
    };
    assert_eq!(status_of("gone"), "missing");
    assert_eq!(status_of("db"), "external");
    assert_eq!(status_of("usage"), "selected");
    assert_eq!(
        waves(&json),
        vec![
            vec!["ConfigMap/usage-cm"],
            vec!["Kustomization/usage"],
            vec!["ConfigMap/operator-cm"],
            vec!["Kustomization/operator"]
        ]
    );
    let members: Vec<(String, String)> = json["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (node_name(&json, &m["owner"]), node_name(&json, &m["member"])))
        .collect();
    assert!(
        members.contains(&("Kustomization/usage".into(), "ConfigMap/usage-cm".into())),
        "{members:?}"
    );

    let tree = stack(&["graph", "-n", n, "--members"]).expect_code(0);
    assert!(
        tree.stdout.contains(&format!(
            "Kustomization.kustomize.toolkit.fluxcd.io/{o}/db [external] (dependsOn)"
        )),
        "{}",
        tree.stdout
    );
    assert!(tree.stdout.contains(&format!(
        "Kustomization.kustomize.toolkit.fluxcd.io/{n}/gone [missing] (dependsOn)"
    )));
    assert!(tree.stdout.contains(&format!("ConfigMap/{n}/usage-cm")));
}

#[test]
fn two_files_defining_one_object_are_merged_not_a_panic() {
    let no_cluster = std::path::Path::new(NO_CLUSTER);
    // The repository's own examples: usage/ and usage-next/ define the same objects.
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let run = stack_as(
        no_cluster,
        &["graph", "-f", examples, "--order", "delete", "-o", "json"],
    )
    .expect_code(0);
    let json = run.json();
    let mut ids: Vec<String> = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| format!("{}/{}/{}/{}", n["group"], n["kind"], n["namespace"], n["name"]))
        .collect();
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), count, "each object is one node: {ids:?}");
    assert!(
        run.stderr
            .contains("Database.demo.kubectl-stack.dev/shop/orders is defined twice, differently:"),
        "{}",
        run.stderr
    );

    // staging/ and prod/ define `app`, each with its own dependency: both are kept.
    let cm = |name: &str, depends: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: t\n  annotations: {{config.kubernetes.io/depends-on: {depends}}}\n")
    };
    let staging = temp_file("app.yaml", &cm("app", "/namespaces/t/ConfigMap/db"));
    let repo = staging.parent().unwrap().parent().unwrap().join(unique("repo"));
    std::fs::create_dir_all(repo.join("staging")).unwrap();
    std::fs::create_dir_all(repo.join("prod")).unwrap();
    std::fs::rename(&staging, repo.join("staging/app.yaml")).unwrap();
    std::fs::write(
        repo.join("prod/app.yaml"),
        cm("app", "/namespaces/t/ConfigMap/cache") + "---\n" + &cm("db", "/namespaces/t/ConfigMap/cache"),
    )
    .unwrap();
    std::fs::write(
        repo.join("staging/cache.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cache, namespace: t}\n",
    )
    .unwrap();
    let run = stack_as(
        no_cluster,
        &["graph", "-f", repo.to_str().unwrap(), "--order", "delete", "-o", "json"],
    )
    .expect_code(0);
    assert_eq!(
        waves(&run.json()),
        vec![vec!["ConfigMap/app"], vec!["ConfigMap/db"], vec!["ConfigMap/cache"]]
    );
    assert!(
        run.stderr.contains("ConfigMap/t/app is defined twice, differently"),
        "{}",
        run.stderr
    );
}

/// A fresh folder holding `files` (relative path, text).
fn repository(files: &[(&str, &str)]) -> std::path::PathBuf {
    let root = std::env::temp_dir().join(unique("repo"));
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    root
}

#[test]
fn offline_graph_reads_a_repository_as_its_tools_do() {
    let no_cluster = std::path::Path::new(NO_CLUSTER);
    let repo = repository(&[
        (
            "clusters/prod/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [certs.yaml]\n",
        ),
        ("clusters/prod/flux-kustomization.yaml", "resources: [../base]\n"),
        ("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
        (".github/workflows/ci.yml", "name: ci\non: [push]\njobs: {test: {runs-on: ubuntu-latest}}\n"),
        // A reference without `namespaces/` names a cluster-scoped object (cli-utils).
        (
            "clusters/prod/certs.yaml",
            "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: letsencrypt}\n---\napiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: web\n  namespace: shop\n  annotations:\n    config.kubernetes.io/depends-on: cert-manager.io/ClusterIssuer/letsencrypt\n",
        ),
        // Argo CD sync waves count in files: the folder is one application.
        (
            "apps/shop/app.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate, namespace: shop, annotations: {argocd.argoproj.io/sync-wave: \"-1\"}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop, annotations: {argocd.argoproj.io/sync-wave: \"1\"}}\n",
        ),
        // kapp: only deletion-to-deletion (or upsert-to-upsert) rules order a teardown.
        (
            "kapp/app.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db, namespace: k, annotations: {kapp.k14s.io/change-group: db}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: upsert-after-deleting, namespace: k, annotations: {kapp.k14s.io/change-rule: upsert after deleting db}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: delete-before-deleting, namespace: k, annotations: {kapp.k14s.io/change-rule: delete before deleting db}}\n",
        ),
    ]);
    let run = stack_as(
        no_cluster,
        &["graph", "-f", repo.to_str().unwrap(), "--order", "delete", "-o", "json"],
    )
    .expect_code(0);
    for skipped in [
        "clusters/prod/kustomization.yaml: a kustomize configuration",
        "clusters/prod/flux-kustomization.yaml: no document has an apiVersion or a kind",
        "charts/web/Chart.yaml: Helm chart metadata",
        ".github/workflows/ci.yml: no document has an apiVersion or a kind",
    ] {
        assert!(run.stderr.contains(skipped), "{skipped}:\n{}", run.stderr);
    }
    let json = run.json();
    let issuer = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "ClusterIssuer")
        .unwrap();
    assert!(issuer["namespace"].is_null(), "{issuer}");
    assert!(
        json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"] == "selected"),
        "nothing missing: {json}"
    );
    let waves = waves(&json);
    let wave_of = |name: &str| {
        waves
            .iter()
            .position(|w| w.iter().any(|n| n.ends_with(&format!("/{name}"))))
            .unwrap_or_else(|| panic!("{name}: {waves:?}"))
    };
    assert!(wave_of("web") < wave_of("letsencrypt"));
    assert!(wave_of("web") < wave_of("settings") && wave_of("settings") < wave_of("migrate"));
    assert!(wave_of("delete-before-deleting") < wave_of("db"));
    let node_of = |name: &str| {
        json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .position(|n| n["name"] == name)
            .unwrap()
    };
    let upsert_rule = node_of("upsert-after-deleting");
    assert!(
        !json["edges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["from"] == upsert_rule || e["to"] == upsert_rule),
        "\"upsert after deleting\" orders no deletion: {}",
        json["edges"]
    );
}

#[test]
fn malformed_dependency_annotations_are_refused_with_file_and_line() {
    let no_cluster = std::path::Path::new(NO_CLUSTER);
    let repo = repository(&[
        (
            "a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine, namespace: t}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: t\n  annotations:\n    config.kubernetes.io/depends-on: apps/t/Deployment/web/x\n",
        ),
        (
            "b.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rule\n  namespace: t\n  annotations:\n    kapp.k14s.io/change-rule.0: delete before db\n",
        ),
    ]);
    let run = stack_as(no_cluster, &["graph", "-f", repo.to_str().unwrap()]).expect_code(2);
    let a = repo.join("a.yaml");
    let b = repo.join("b.yaml");
    assert!(
        run.stderr.contains(&format!(
            "{}:11: ConfigMap bad: invalid config.kubernetes.io/depends-on \"apps/t/Deployment/web/x\": reference \"apps/t/Deployment/web/x\": missing \"namespaces\" field",
            a.display()
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "{}:7: ConfigMap rule: invalid kapp.k14s.io/change-rule.0 \"delete before db\"",
            b.display()
        )),
        "{}",
        run.stderr
    );
    // A file that looks like a manifest but is broken is still refused.
    let broken = repository(&[("c.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")]);
    stack_as(no_cluster, &["graph", "-f", broken.to_str().unwrap()]).expect_code(2);
}

#[test]
fn a_tracker_selection_shows_only_what_it_holds_and_its_dependencies_as_external() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("graph-sel");
    let n = &ns.0;
    let inventory = unique("inv");
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: unrelated, namespace: {n}}}
spec: {{}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: outside, namespace: {n}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: {n}
  annotations:
    config.k8s.io/owning-inventory: {inventory}
    config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/db,/namespaces/{n}/ConfigMap/outside
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: db
  namespace: {n}
  annotations: {{config.k8s.io/owning-inventory: {inventory}}}
"#
    ));
    let tracker = format!("kpt={inventory}");
    for selection in [
        vec!["--tracker", tracker.as_str()],
        vec!["-l", "nothing-has-this-label"],
    ] {
        let mut args = vec!["graph", "-n", n.as_str(), "-o", "json", "--order", "delete"];
        args.extend(&selection);
        let json = stack(&args).expect_code(0).json();
        let nodes: Vec<(String, String)> = json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["name"].as_str().unwrap().to_string(),
                    n["status"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        if selection[0] == "-l" {
            assert!(
                nodes.is_empty(),
                "a selector that matches nothing shows nothing: {nodes:?}"
            );
            continue;
        }
        assert_eq!(
            nodes,
            vec![
                ("app".to_string(), "selected".to_string()),
                ("db".to_string(), "selected".to_string()),
                ("outside".to_string(), "external".to_string()),
            ],
            "no Kustomization the inventory does not track"
        );
        assert_eq!(waves(&json), vec![vec!["ConfigMap/app"], vec!["ConfigMap/db"]]);
    }
}
