//! End-to-end tests of `kubectl stack list` against the real test cluster.

mod common;

use std::collections::BTreeSet;

use common::*;

/// Objects of core, apps, rbac (cluster-scoped) and a CRD's kind across two namespaces, all
/// labelled `run=<id>`, plus unlabelled noise and a same-label object in a third namespace.
fn seed_mixed_stack(run: &str, ns_a: &str, ns_b: &str) {
    ensure_crds();
    let tracked = format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {ns_a}, labels: {{stack-test/run: {run}}}}}
data: {{mode: fast}}
---
apiVersion: v1
kind: Secret
metadata: {{name: creds, namespace: {ns_b}, labels: {{stack-test/run: {run}}}}}
stringData: {{password: hunter2}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api, namespace: {ns_a}, labels: {{stack-test/run: {run}}}}}
spec:
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}}}
    spec: {{containers: [{{name: api, image: example/api:1}}]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {run}-reader, labels: {{stack-test/run: {run}}}}}
rules: []
---
apiVersion: stack-test.example.com/v1
kind: Widget
metadata: {{name: w1, namespace: {ns_a}, labels: {{stack-test/run: {run}}}}}
---
apiVersion: stack-test.example.com/v1
kind: Widget
metadata: {{name: w2, namespace: {ns_b}, labels: {{stack-test/run: {run}}}}}
---
apiVersion: stack-test.example.com/v1beta1
kind: Gadget
metadata: {{name: {run}-g1, labels: {{stack-test/run: {run}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: noise, namespace: {ns_a}, labels: {{stack-test/run: other-{run}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: unlabelled, namespace: {ns_b}}}
"#
    );
    apply(&tracked);
}

fn identities(run: &Run) -> BTreeSet<String> {
    run.json()["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            let api_version = item["apiVersion"].as_str().unwrap();
            let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
            format!(
                "{}|{}|{}|{}",
                group,
                item["kind"].as_str().unwrap(),
                item["metadata"]["namespace"].as_str().unwrap_or(""),
                item["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn list_finds_exactly_the_tracked_objects_across_kinds_and_namespaces() {
    let _logs = start();
    let (a, b) = (Namespace::new("la"), Namespace::new("lb"));
    let run = unique("run");
    seed_mixed_stack(&run, &a.0, &b.0);

    let listed = stack(&["list", "-A", "-l", &format!("stack-test/run={run}"), "-o", "json"]).expect_code(0);
    let expected: BTreeSet<String> = [
        format!("|ConfigMap|{}|settings", a.0),
        format!("|Secret|{}|creds", b.0),
        format!("apps|Deployment|{}|api", a.0),
        format!("rbac.authorization.k8s.io|ClusterRole||{run}-reader"),
        format!("stack-test.example.com|Widget|{}|w1", a.0),
        format!("stack-test.example.com|Widget|{}|w2", b.0),
        format!("stack-test.example.com|Gadget||{run}-g1"),
    ]
    .into_iter()
    .collect();
    assert_eq!(identities(&listed), expected);
    // Gadget is served only by v1beta1, the group's non-preferred version: it must not vanish.
    assert!(listed.stdout.contains("stack-test.example.com/v1beta1"));
    // Secret data never appears: not as stored (base64), not decoded (last-applied-configuration
    // holds it), on either stream, and no item carries data.
    for leak in ["aHVudGVyMg==", "hunter2", "last-applied-configuration"] {
        assert!(
            !listed.stdout.contains(leak) && !listed.stderr.contains(leak),
            "{leak} leaked:\n{}\n{}",
            listed.stdout,
            listed.stderr
        );
    }
    for item in listed.json()["items"].as_array().unwrap() {
        assert!(item.get("data").is_none() && item.get("stringData").is_none(), "{item}");
    }

    // Without -A: the namespace's objects plus cluster-scoped ones, nothing from the other namespace.
    let in_a = stack(&["list", "-n", &a.0, "-l", &format!("stack-test/run={run}"), "-o", "json"]).expect_code(0);
    let names: BTreeSet<String> = identities(&in_a).into_iter().collect();
    assert!(names.contains(&format!("|ConfigMap|{}|settings", a.0)));
    assert!(names.contains(&format!("rbac.authorization.k8s.io|ClusterRole||{run}-reader")));
    assert!(!names.iter().any(|n| n.contains(&b.0)), "{names:?}");
}

#[test]
fn every_output_format_parses_or_matches() {
    let _logs = start();
    let (a, b) = (Namespace::new("fa"), Namespace::new("fb"));
    let run = unique("fmt");
    seed_mixed_stack(&run, &a.0, &b.0);
    let selector = format!("stack-test/run={run}");

    let table = stack(&["list", "-A", "-l", &selector]).expect_code(0);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[0].starts_with("KIND") && lines[0].ends_with("TRACKED-BY"),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 8, "{}", table.stdout);
    assert!(lines
        .iter()
        .any(|l| l.starts_with("Deployment.apps") && l.contains(&a.0) && l.contains(" api ")));
    // The documented order: group, kind, namespace, name, in every format.
    let json = stack(&["list", "-A", "-l", &selector, "-o", "json"]).expect_code(0);
    let order: Vec<(String, String, String, String)> = json.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let api_version = item["apiVersion"].as_str().unwrap();
            let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
            let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
            (
                group.to_string(),
                text(&item["kind"]),
                text(&item["metadata"]["namespace"]),
                text(&item["metadata"]["name"]),
            )
        })
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "sorted by group, kind, namespace, name");
    assert_eq!(order.len(), 7);
    let name_column = lines[0].find(" NAME ").expect("NAME column") + 1;
    let table_names: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l[name_column..].split_whitespace().next().unwrap())
        .collect();
    let json_names: Vec<&str> = order.iter().map(|(_, _, _, name)| name.as_str()).collect();
    assert_eq!(table_names, json_names, "the table is in the same order");

    // -o wide shows each object's real UID.
    let wide = stack(&["list", "-A", "-l", &selector, "-o", "wide"]).expect_code(0);
    assert!(wide.stdout.lines().next().unwrap().contains("UID"));
    let uid = uid_of("deployment", Some(&a.0), "api");
    assert!(
        wide.stdout
            .lines()
            .any(|l| l.starts_with("Deployment.apps") && l.split_whitespace().any(|w| w == uid)),
        "{uid} not in:\n{}",
        wide.stdout
    );

    let yaml = stack(&["list", "-A", "-l", &selector, "-o", "yaml"]).expect_code(0);
    let parsed: serde_json::Value = serde_saphyr::from_str(&yaml.stdout).expect("YAML parses");
    assert_eq!(parsed["kind"], "List");
    assert_eq!(parsed["items"].as_array().unwrap().len(), 7);

    let names = stack(&["list", "-A", "-l", &selector, "-o", "name"]).expect_code(0);
    let expected: BTreeSet<&str> = [
        "configmap/settings",
        "secret/creds",
        "deployment.apps/api",
        "widget.stack-test.example.com/w1",
        "widget.stack-test.example.com/w2",
    ]
    .into_iter()
    .collect();
    let got: BTreeSet<&str> = names.stdout.lines().collect();
    assert!(expected.is_subset(&got), "{got:?}");
    assert_eq!(got.len(), 7);
    let name_order: Vec<&str> = names.stdout.lines().map(|l| l.rsplit_once('/').unwrap().1).collect();
    assert_eq!(name_order, json_names, "-o name is in the same order");
}

/// One object per tool marker, each in its own stack, plus look-alikes that must not match.
#[test]
fn each_tracker_preset_finds_exactly_its_objects() {
    let _logs = start();
    let ns = Namespace::new("presets");
    let n = &ns.0;
    let id = unique("p");
    let manifests = format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-flux
  namespace: {n}
  labels: {{kustomize.toolkit.fluxcd.io/name: apps-{id}, kustomize.toolkit.fluxcd.io/namespace: flux-system}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-flux-other-ns
  namespace: {n}
  labels: {{kustomize.toolkit.fluxcd.io/name: apps-{id}, kustomize.toolkit.fluxcd.io/namespace: elsewhere}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-flux-helm
  namespace: {n}
  labels: {{helm.toolkit.fluxcd.io/name: podinfo-{id}, helm.toolkit.fluxcd.io/namespace: {n}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-flux-v1
  namespace: {n}
  labels: {{flux.weave.works/stack: stack-{id}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-kpt
  namespace: {n}
  annotations: {{config.k8s.io/owning-inventory: inv-{id}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-kapp
  namespace: {n}
  labels: {{kapp.k14s.io/app: "1{}"}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-argocd-annotation
  namespace: {n}
  annotations: {{argocd.argoproj.io/tracking-id: "guestbook-{id}:/ConfigMap:{n}/by-argocd-annotation"}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-argocd-label
  namespace: {n}
  labels: {{app.kubernetes.io/instance: guestbook-{id}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: by-helm
  namespace: {n}
  labels: {{app.kubernetes.io/managed-by: Helm, app.kubernetes.io/instance: web-{id}}}
  annotations: {{meta.helm.sh/release-name: web-{id}, meta.helm.sh/release-namespace: {n}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: untracked
  namespace: {n}
  labels: {{app: web-{id}}}
"#,
        std::process::id()
    );
    apply(&manifests);
    // A real ApplySet, made by kubectl itself.
    let applyset = kubectl_with_stdin(
        &["apply", "-n", n, "--prune", "--applyset=set-1", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: by-applyset, namespace: {n}}}\n"
        )),
    );
    assert_eq!(applyset.code, 0, "{}", applyset.stderr);

    let kapp = format!("kapp=1{}", std::process::id());
    let cases: Vec<(String, Vec<&str>)> = vec![
        (format!("flux=apps-{id}.flux-system"), vec!["configmap/by-flux"]),
        (
            format!("flux=apps-{id}"),
            vec!["configmap/by-flux", "configmap/by-flux-other-ns"],
        ),
        (format!("flux-helm=podinfo-{id}.{n}"), vec!["configmap/by-flux-helm"]),
        (format!("flux-v1=stack-{id}"), vec!["configmap/by-flux-v1"]),
        (format!("kpt=inv-{id}"), vec!["configmap/by-kpt"]),
        (kapp, vec!["configmap/by-kapp"]),
        (
            format!("argocd=guestbook-{id}"),
            vec!["configmap/by-argocd-annotation", "configmap/by-argocd-label"],
        ),
        (format!("helm=web-{id}.{n}"), vec!["configmap/by-helm"]),
        ("applyset=set-1".to_string(), vec!["configmap/by-applyset"]),
        ("applyset=secrets/set-1".to_string(), vec!["configmap/by-applyset"]),
    ];
    for (tracker, expected) in cases {
        let found = stack(&["list", "-n", n, "--tracker", &tracker, "-o", "name"]).expect_code(0);
        assert_eq!(found.sorted_lines(), expected, "--tracker {tracker}");
    }

    // With no selection at all: everything any tool tracks, and not the untracked object
    // (cluster-scoped objects of other tests may appear too: only this namespace's count).
    let all = stack(&["list", "-n", n, "-o", "name"]).expect_code(0);
    let lines: Vec<String> = all
        .sorted_lines()
        .into_iter()
        .filter(|l| l.starts_with("configmap/"))
        .collect();
    assert_eq!(lines.len(), 10, "{lines:?}");
    assert!(!lines.contains(&"configmap/untracked".to_string()));

    let bad = stack(&["list", "--tracker", "fluxcd=x"]).expect_code(2);
    assert!(bad.stderr.contains("unknown tracker preset"), "{}", bad.stderr);
}

#[test]
fn forbidden_kinds_are_named_in_one_warning_and_counted() {
    let _logs = start();
    let ns = Namespace::new("rbac");
    let run = unique("rb");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: visible, namespace: {}, labels: {{stack-test/run: {run}}}}}\n",
        ns.0
    ));
    // The limited user may list ConfigMaps in this namespace only.
    apply(&format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: list-configmaps, namespace: {ns}}}
rules: [{{apiGroups: [""], resources: [configmaps], verbs: [list, get]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: limited-list-configmaps, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: list-configmaps}}
subjects: [{{kind: User, name: limited, apiGroup: rbac.authorization.k8s.io}}]
"#,
        ns = ns.0
    ));
    let c = cluster();
    let selector = format!("stack-test/run={run}");
    wait_until(std::time::Duration::from_secs(10), || {
        stack_as(&c.limited, &["list", "-n", &ns.0, "-l", &selector, "-o", "name"])
            .stdout
            .contains("visible")
    });
    let limited = stack_as(&c.limited, &["list", "-n", &ns.0, "-l", &selector, "-o", "name"]).expect_code(0);
    assert_eq!(limited.stdout, "configmap/visible\n");
    let warnings: Vec<&str> = limited.stderr.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{}", limited.stderr);
    assert!(
        warnings[0].contains("not allowed to list") && warnings[0].contains("Secret"),
        "{}",
        warnings[0]
    );

    let nobody = stack_as(&c.nobody, &["list", "-A"]).expect_code(3);
    assert!(nobody.stderr.contains("may not list any kind"), "{}", nobody.stderr);
    assert!(nobody.stderr.contains("hint:"), "{}", nobody.stderr);
    assert!(!nobody.stderr.contains("panicked"));
}

#[test]
fn events_served_by_two_groups_are_listed_once() {
    let _logs = start();
    let ns = Namespace::new("ev");
    let run = unique("ev");
    apply(&format!(
        r#"
apiVersion: v1
kind: Event
metadata: {{name: e1, namespace: {ns}, labels: {{stack-test/run: {run}}}}}
involvedObject: {{kind: ConfigMap, name: x, namespace: {ns}}}
reason: Test
message: hello
"#,
        ns = ns.0
    ));
    let listed = stack(&[
        "list",
        "-n",
        &ns.0,
        "-l",
        &format!("stack-test/run={run}"),
        "-o",
        "json",
    ])
    .expect_code(0);
    let items = listed.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "{}", listed.stdout);
    assert_eq!(items[0]["apiVersion"], "v1");
}

#[test]
fn credentials_and_namespace_come_from_kubeconfig_like_kubectl() {
    let _logs = start();
    let ns = Namespace::new("kc");
    let run = unique("kc");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: here, namespace: {}, labels: {{stack-test/run: {run}}}}}\n",
        ns.0
    ));
    let admin = std::fs::read_to_string(&cluster().admin).unwrap();
    let dir = std::env::temp_dir().join(unique("kubeconfigs"));
    std::fs::create_dir_all(&dir).unwrap();
    // Split the admin kubeconfig in two files: clusters+users, and a context with a namespace.
    let split_at = admin.find("contexts:").unwrap();
    let end = admin.find("current-context:").unwrap();
    let users_at = admin.find("users:").unwrap();
    let base = format!("{}{}", &admin[..split_at], &admin[users_at..]);
    let contexts = format!(
        "apiVersion: v1\nkind: Config\ncontexts:\n- name: scoped\n  context: {{cluster: test, user: admin, namespace: {}}}\ncurrent-context: scoped\n",
        ns.0
    );
    assert!(end > split_at);
    std::fs::write(dir.join("base"), base).unwrap();
    std::fs::write(dir.join("contexts"), contexts).unwrap();
    let merged = format!("{}:{}", dir.join("contexts").display(), dir.join("base").display());

    let mut command = stack_command(&cluster().admin);
    command
        .env("KUBECONFIG", &merged)
        .args(["list", "-l", &format!("stack-test/run={run}"), "-o", "name"]);
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "configmap/here\n");

    // --as impersonates: the no-rights user cannot list anything.
    let impersonated = stack(&["list", "-A", "--as", "nobody"]).expect_code(3);
    assert!(impersonated.stderr.contains("\"nobody\""), "{}", impersonated.stderr);

    let unknown = stack(&["list", "--context", "nope"]).expect_code(3);
    assert!(
        unknown.stderr.contains("context \"nope\" is not in the kubeconfig"),
        "{}",
        unknown.stderr
    );

    let server = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("a server in the admin kubeconfig");
    let unreachable_config = admin.replace(server, "https://127.0.0.1:1");
    std::fs::write(dir.join("unreachable"), unreachable_config).unwrap();
    let unreachable = stack(&[
        "list",
        "--kubeconfig",
        dir.join("unreachable").to_str().unwrap(),
        "--request-timeout",
        "2s",
    ]);
    assert_eq!(unreachable.code, 3, "{}", unreachable.stderr);
    assert!(
        unreachable
            .stderr
            .contains("cannot reach the API server at https://127.0.0.1:1"),
        "{}",
        unreachable.stderr
    );

    let bad_token = regex_free_replace_token(&admin);
    std::fs::write(dir.join("badtoken"), bad_token).unwrap();
    let unauthorized = stack(&["list", "--kubeconfig", dir.join("badtoken").to_str().unwrap()]).expect_code(3);
    assert!(unauthorized.stderr.contains("401"), "{}", unauthorized.stderr);

    let missing = stack(&["list", "--kubeconfig", "/nonexistent/kubeconfig"]).expect_code(3);
    assert!(missing.stderr.contains("cannot read kubeconfig"), "{}", missing.stderr);
}

fn regex_free_replace_token(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .map(|line| match line.find("token: ") {
            Some(at) => format!("{}token: not-a-valid-token}}", &line[..at]),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The documented order (README: "sorted by group, kind, namespace and name") where the API
/// server's own order differs. Each kind's list comes back in etcd key order,
/// `/registry/RESOURCE/NAMESPACE/NAME`, byte by byte: namespace `X-b` before `X` (`-` sorts
/// before `/`). Kinds of several groups (core, coordination.k8s.io, rbac, a CRD's), a
/// cluster-scoped kind between namespaced ones, and names whose order is not the namespaces'
/// (a sort by name before namespace fails too). Without `sort_objects` the output is in the
/// server's namespace order and this fails.
#[test]
fn list_output_is_sorted_by_group_kind_namespace_and_name() {
    let _logs = start();
    ensure_crds();
    let first = Namespace::new("ord");
    // A namespace whose name extends the first's with `-b`: etcd returns it first.
    let second = Namespace(format!("{}-b", first.0));
    assert_eq!(kubectl(&["create", "namespace", &second.0]).code, 0);
    let run = unique("ord");
    let label = format!("{{stack-test/run: {run}}}");
    let mut yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {run}-reader, labels: {label}}}\nrules: []\n"
    );
    // Written in an order that is neither the server's nor the documented one.
    for ns in [&second.0, &first.0] {
        yaml.push_str(&format!(
            r#"---
apiVersion: stack-test.example.com/v1
kind: Widget
metadata: {{name: w, namespace: {ns}, labels: {label}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: rb, namespace: {ns}, labels: {label}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}}
subjects: [{{kind: User, name: nobody, apiGroup: rbac.authorization.k8s.io}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: r, namespace: {ns}, labels: {label}}}
rules: []
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: l, namespace: {ns}, labels: {label}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: s, namespace: {ns}, labels: {label}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: zz, namespace: {ns}, labels: {label}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: b-x, namespace: {ns}, labels: {label}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: b, namespace: {ns}, labels: {label}}}
"#
        ));
    }
    apply(&yaml);
    let (a, b) = (first.0.as_str(), second.0.as_str());
    let mut expected = Vec::new();
    for name in ["b", "b-x", "zz"] {
        expected.push(format!("|ConfigMap|{a}|{name}"));
    }
    for name in ["b", "b-x", "zz"] {
        expected.push(format!("|ConfigMap|{b}|{name}"));
    }
    for (group, kind, name) in [
        ("", "Secret", "s"),
        ("coordination.k8s.io", "Lease", "l"),
        ("rbac.authorization.k8s.io", "ClusterRole", ""),
        ("rbac.authorization.k8s.io", "Role", "r"),
        ("rbac.authorization.k8s.io", "RoleBinding", "rb"),
        ("stack-test.example.com", "Widget", "w"),
    ] {
        if kind == "ClusterRole" {
            expected.push(format!("{group}|{kind}||{run}-reader"));
            continue;
        }
        for ns in [a, b] {
            expected.push(format!("{group}|{kind}|{ns}|{name}"));
        }
    }
    let selector = format!("stack-test/run={run}");
    let listed = stack(&["list", "-A", "-l", &selector, "-o", "json"]).expect_code(0);
    let in_order: Vec<String> = listed.json()["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            let api_version = item["apiVersion"].as_str().unwrap();
            let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
            format!(
                "{group}|{}|{}|{}",
                item["kind"].as_str().unwrap(),
                item["metadata"]["namespace"].as_str().unwrap_or(""),
                item["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(in_order, expected, "list -o json is not in the documented order");

    // The table is in the same order: KIND (with group), NAMESPACE, NAME.
    let table = stack(&["list", "-A", "-l", &selector]).expect_code(0);
    let rows: Vec<String> = table
        .stdout
        .lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            // A cluster-scoped object's NAMESPACE is empty: KIND NAME AGE ...
            let (kind, namespace, name) = if cells[0].starts_with("ClusterRole.") {
                (cells[0], "", cells[1])
            } else {
                (cells[0], cells[1], cells[2])
            };
            let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
            format!("{group}|{kind}|{namespace}|{name}")
        })
        .collect();
    assert_eq!(
        rows, expected,
        "list's table is not in the documented order:\n{}",
        table.stdout
    );
}
