//! The README's safety promises, each a test that fails when the promise is broken (issue 18):
//! what a teardown pulls in and what it leaves, how prune stops (failed delete, Ctrl-C during a
//! wave's deletes), the prompt in a real terminal, Flux suspension, `--cascade`, pagination, the
//! guards on the desired set and on unlisted kinds, ApplySet inventories, `unstick --force`,
//! and Secret data that never reaches the output.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use kubectl_stack::graph::{build, BuildOptions, NodeInput};
use kubectl_stack::model::identity::ObjectId;
use kubectl_stack::prune::teardown::teardown_closure;

const HOLD: &str = "stack-test.example.com/hold";
const FLUX_GROUP: &str = "kustomize.toolkit.fluxcd.io";

/// A ClusterRole bound to a user of its own (never the shared `limited` user: a cluster-wide
/// grant to it would change what other test binaries' tests, run side by side, see as `limited`),
/// removed when dropped. Commands run as that user through the admin's `--as`.
struct ClusterGrant {
    name: String,
    user: String,
}

impl ClusterGrant {
    fn new(prefix: &str, rules: &str) -> Self {
        let name = unique(prefix);
        let user = unique(&format!("{prefix}-user"));
        apply(&format!(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {name}}}
rules: {rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {name}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}
subjects: [{{kind: User, name: {user}, apiGroup: rbac.authorization.k8s.io}}]
"#
        ));
        Self { name, user }
    }

    /// Runs `kubectl-stack ARGS` as the granted user.
    fn stack(&self, args: &[&str]) -> Run {
        stack(&[args, &["--as", &self.user][..]].concat())
    }
}

impl Drop for ClusterGrant {
    fn drop(&mut self) {
        let _ = kubectl(&[
            "delete",
            "clusterrolebinding,clusterrole",
            &self.name,
            "--ignore-not-found",
        ]);
    }
}

/// A desired-set file holding one ConfigMap named `desired`.
fn desired_file() -> std::path::PathBuf {
    temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    )
}

// ---------------------------------------------------------------------------------------------
// Teardown: the reason this tool exists.

fn flux_kustomization(name: &str, depends_on: &[&str]) -> NodeInput {
    let mut input = NodeInput {
        id: ObjectId::new(FLUX_GROUP, "Kustomization", Some("flux-system"), name),
        ..Default::default()
    };
    input.depends_on = depends_on
        .iter()
        .map(|d| ObjectId::new(FLUX_GROUP, "Kustomization", Some("flux-system"), d))
        .collect();
    input
}

fn flux_member(group: &str, kind: &str, namespace: Option<&str>, name: &str, stack: &str) -> NodeInput {
    let mut input = NodeInput {
        id: ObjectId::new(group, kind, namespace, name),
        ..Default::default()
    };
    input
        .labels_mut()
        .insert("kustomize.toolkit.fluxcd.io/name".into(), stack.into());
    input
        .labels_mut()
        .insert("kustomize.toolkit.fluxcd.io/namespace".into(), "flux-system".into());
    input
}

/// `teardown_closure` of the operator alone: its members, the stack that dependsOn it and that
/// stack's members; never another stack's object merely living in the operator's Namespace or
/// being an instance of its CRD.
#[test]
fn teardown_closure_pulls_in_dependents_and_their_members_only() {
    let crd = "databases.demo.example.com";
    let inputs = vec![
        flux_kustomization("operator", &[]),
        flux_kustomization("usage", &["operator"]),
        flux_kustomization("bystander", &[]),
        flux_member(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            crd,
            "operator",
        ),
        flux_member("", "Namespace", None, "db-operator", "operator"),
        flux_member("apps", "Deployment", Some("db-operator"), "controller", "operator"),
        flux_member("demo.example.com", "Database", Some("shop"), "orders", "usage"),
        flux_member("", "ConfigMap", Some("db-operator"), "lodger", "bystander"),
        flux_member("demo.example.com", "Database", Some("other"), "reports", "bystander"),
    ];
    let options = BuildOptions {
        members: true,
        crd_names: HashMap::from([(
            ("demo.example.com".to_string(), "Database".to_string()),
            crd.to_string(),
        )]),
        ..Default::default()
    };
    let graph = build(&inputs, &options);
    let index = |group: &str, kind: &str, namespace: Option<&str>, name: &str| {
        graph
            .find(&ObjectId::new(group, kind, namespace, name))
            .unwrap_or_else(|| panic!("{kind}/{name} is a node"))
    };
    let operator = index(FLUX_GROUP, "Kustomization", Some("flux-system"), "operator");
    let closure = teardown_closure(&graph, &[operator]);
    let chosen: BTreeSet<String> = closure.keys().map(|&i| graph.nodes[i].id.name.clone()).collect();
    let expected: BTreeSet<String> = ["operator", "usage", crd, "db-operator", "controller", "orders"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(chosen, expected);
    let usage = index(FLUX_GROUP, "Kustomization", Some("flux-system"), "usage");
    assert_eq!(
        closure[&usage],
        "depends on Kustomization.kustomize.toolkit.fluxcd.io/flux-system/operator (dependsOn)"
    );
    assert_eq!(closure[&operator], "named");
    let orders = index("demo.example.com", "Database", Some("shop"), "orders");
    assert!(
        closure[&orders].starts_with("member of Kustomization"),
        "{}",
        closure[&orders]
    );
}

/// `prune kustomization/operator` alone, on the cluster: `usage` (which dependsOn it) and its
/// members are deleted, and gone before the operator's first delete; a bystander stack stays.
#[test]
fn pruning_the_operator_alone_pulls_in_its_dependent_usage() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("alone");
    let f = &flux.0;
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: operator, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {f}}}
spec: {{prune: true, dependsOn: [{{name: operator}}]}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: bystander, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: operator-config, namespace: {f}, labels: {operator}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: usage-config, namespace: {f}, labels: {usage}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: bystander-config, namespace: {f}, labels: {bystander}}}
"#,
        operator = flux_labels("operator", f),
        usage = flux_labels("usage", f),
        bystander = flux_labels("bystander", f),
    ));
    record_flux_inventories(f);
    let pruned = stack(&[
        "prune",
        "-n",
        f,
        "kustomization/operator",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    let lines = json_lines(&pruned.stdout);
    let why_of = |name: &str| {
        lines[0]["waves"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|w| w.as_array().unwrap())
            .find(|t| t["id"]["name"] == name)
            .map(|t| t["why"].as_str().unwrap().to_string())
    };
    assert_eq!(
        why_of("usage").as_deref(),
        Some(format!("depends on Kustomization.kustomize.toolkit.fluxcd.io/{f}/operator (dependsOn)").as_str()),
        "{}",
        pruned.stdout
    );
    assert!(why_of("bystander").is_none() && why_of("bystander-config").is_none());
    for (kind, name) in [
        ("kustomization", "usage"),
        ("configmap", "usage-config"),
        ("kustomization", "operator"),
        ("configmap", "operator-config"),
    ] {
        assert!(!exists(kind, Some(f), name), "{kind}/{name} is deleted");
    }
    assert!(exists("kustomization", Some(f), "bystander"));
    assert!(exists("configmap", Some(f), "bystander-config"));
    let position = |name: &str, change: &str| {
        lines
            .iter()
            .position(|e| e["type"] == "event" && e["id"]["name"] == name && e["change"] == change)
            .unwrap_or_else(|| panic!("no {change} event for {name}:\n{}", pruned.stdout))
    };
    assert!(
        position("usage-config", "gone") < position("operator-config", "deleted"),
        "usage's members are gone before the operator's are deleted:\n{}",
        pruned.stdout
    );
    assert!(position("usage", "gone") < position("operator-config", "deleted"));
}

/// A teardown leaves keep-marked members and members a controller made, and says so.
#[test]
fn a_teardown_leaves_keep_marked_and_controller_owned_members() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("keeps");
    let f = &flux.0;
    let labels = flux_labels("app", f);
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: app, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: plain, namespace: {f}, labels: {labels}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: keep, namespace: {f}, labels: {labels}, annotations: {{kustomize.toolkit.fluxcd.io/prune: disabled}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: owner, namespace: {f}}}
"#
    ));
    let owner_uid = uid_of("configmap", Some(f), "owner");
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: child
  namespace: {f}
  labels: {labels}
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: {owner_uid}, controller: true}}]
"#
    ));
    record_flux_inventories(f);
    let pruned = stack(&["prune", "-n", f, "kustomization/app", "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(
        pruned.stderr.contains(&format!(
            "kept: ConfigMap/{f}/keep (keep marker kustomize.toolkit.fluxcd.io/prune=disabled)"
        )),
        "{}",
        pruned.stderr
    );
    let planned: Vec<&str> = pruned.stdout.lines().filter(|l| l.contains(" child ")).collect();
    assert!(
        planned.is_empty(),
        "the controller's object is not planned: {planned:?}"
    );
    assert!(!exists("configmap", Some(f), "plain"));
    assert!(!exists("kustomization", Some(f), "app"));
    assert!(exists("configmap", Some(f), "keep"), "keep-marked member stays");
    assert!(exists("configmap", Some(f), "child"), "controller-owned member stays");
}

// ---------------------------------------------------------------------------------------------
// How prune stops.

/// A delete that fails (403, not a timeout) stops the following waves: exit 5, the next wave's
/// objects are still there, the failure is reported.
#[test]
fn a_failed_delete_stops_the_following_waves_with_exit_5() {
    let _logs = start();
    let ns = Namespace::new("delfail");
    let n = &ns.0;
    let run = unique("df");
    apply(&format!(
        r#"
apiVersion: v1
kind: Secret
metadata:
  name: first
  namespace: {n}
  labels: {{stack-test/run: {run}}}
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/second}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: second, namespace: {n}, labels: {{stack-test/run: {run}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: desired, namespace: {n}, labels: {{stack-test/run: {run}}}}}
"#
    ));
    // The limited user may delete ConfigMaps but not Secrets: wave 1 (the Secret) fails.
    grant_limited(
        n,
        "prune-configmaps",
        r#"[{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, delete]}, {apiGroups: [""], resources: [secrets], verbs: [get, list, watch]}]"#,
    );
    let selector = format!("stack-test/run={run}");
    let limited = &cluster().limited;
    wait_until(Duration::from_secs(10), || {
        stack_as(limited, &["list", "-n", n, "-l", &selector, "-o", "name"])
            .stdout
            .contains("secret/first")
    });
    let desired = desired_file();
    let pruned = stack_as(
        limited,
        &[
            "prune",
            "-n",
            n,
            "-l",
            &selector,
            "--untracked",
            "-f",
            desired.to_str().unwrap(),
            "--skip-unlisted",
            "--yes",
            "--timeout",
            "30s",
            "-o",
            "json",
        ],
    )
    .expect_code(5);
    let lines = json_lines(&pruned.stdout);
    let waves = lines[0]["waves"].as_array().unwrap();
    assert_eq!(waves.len(), 2, "{}", pruned.stdout);
    let failed: Vec<&serde_json::Value> = lines.iter().filter(|e| e["change"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{}", pruned.stdout);
    assert_eq!(failed[0]["id"]["name"], "first");
    assert_eq!(failed[0]["wave"], 1);
    assert!(
        lines.iter().all(|e| e["id"]["name"] != "second"),
        "nothing of wave 2 is sent:\n{}",
        pruned.stdout
    );
    let summary = lines.last().unwrap();
    assert_eq!(summary["status"], "incomplete");
    assert_eq!(summary["failed"], 1);
    assert!(
        pruned.stderr.contains("delete(s) failed in wave 1"),
        "{}",
        pruned.stderr
    );
    assert!(exists("secret", Some(n), "first"));
    assert!(exists("configmap", Some(n), "second"), "the next wave must not start");
    assert!(exists("configmap", Some(n), "desired"));
}

/// Ctrl-C while a wave's deletes are being sent (one at a time, a large wave): no delete is
/// started after the signal, the rest of the wave is still there, exit 130.
#[test]
fn ctrl_c_during_a_waves_deletes_sends_no_new_delete() {
    let _logs = start();
    let ns = Namespace::new("sigdel");
    let n = &ns.0;
    let run = unique("sd");
    let count = 400;
    let mut yaml = String::new();
    for i in 0..count {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
        ));
    }
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: desired, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));
    apply(&yaml);
    let desired = desired_file();
    let selector = format!("stack-test/run={run}");
    let mut command = stack_command(&cluster().admin);
    command
        .args([
            "prune",
            "-n",
            n,
            "-l",
            &selector,
            "--untracked",
            "-f",
            desired.to_str().unwrap(),
        ])
        .args(["--yes", "--delete-concurrency", "1", "-v", "6"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    // `-v 6` logs each request once as it starts: `debug: requesting [HTTP http.method=DELETE ...]`.
    let is_delete = |line: &str| line.starts_with("debug: requesting") && line.contains("http.method=DELETE");
    let mut before = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while before.iter().filter(|l: &&String| is_delete(l)).count() < 20 {
        let line = lines_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("20 DELETE requests not seen:\n{}", before.join("\n")));
        before.push(line);
    }
    let signalled = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let after: Vec<String> = lines_rx.try_iter().collect();
    let all = [before.clone(), after.clone()].concat().join("\n");
    assert_eq!(status.code(), Some(130), "{all}");
    let interrupted_at = after
        .iter()
        .position(|l| l.starts_with("interrupted: no new deletes"))
        .unwrap_or_else(|| panic!("no interruption notice:\n{all}"));
    let sent_after = after[interrupted_at..].iter().filter(|l| is_delete(l)).count();
    // One delete may have passed its check just before the signal arrived (concurrency 1).
    assert!(
        sent_after <= 1,
        "{sent_after} DELETE(s) started after Ctrl-C:\n{}",
        after.join("\n")
    );
    let sent = all.lines().filter(|l| is_delete(l)).count();
    let left = kubectl(&["get", "configmaps", "-n", n, "-l", &selector, "-o", "name"])
        .stdout
        .lines()
        .count();
    assert!(sent < count, "the wave was cut short: {sent} deletes sent");
    // Every delete that took effect was sent; the one in flight when the signal came (concurrency
    // 1) may have been cut before the server acted on it (CI saw it once: 380 left for 379).
    let landed = count + 1 - left;
    assert!(
        landed == sent || landed + 1 == sent,
        "{landed} deletes took effect, {sent} were sent:\n{all}"
    );
}

// ---------------------------------------------------------------------------------------------
// The prompt, in a real terminal (tmux).

/// A private tmux server (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new() -> Self {
        Self {
            socket: unique("stack-tmux"),
        }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux is installed (scripts/test.sh installs it)")
    }

    /// Starts `command` in a new session; its exit code is written to `exit_file`. Then the
    /// shell reads what input the command left: "LEFT:[...]" if a key, else "NOTHING LEFT".
    fn start(&self, session: &str, command: &str, exit_file: &std::path::Path) {
        let script = format!(
            "{command}; echo $? > {}; bash -c 'if read -t 3 -n 1 -r rest; then echo \"LEFT:[$rest]\"; else echo \"NOTHING LEFT\"; fi'; sleep 600",
            exit_file.display()
        );
        let started = self.run(&["new-session", "-d", "-s", session, "-x", "200", "-y", "50", &script]);
        assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    }

    fn screen(&self, session: &str) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", session]).stdout).into_owned()
    }

    fn keys(&self, session: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", session];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn exit_code_in(file: &std::path::Path, timeout: Duration) -> i32 {
    let mut code = None;
    wait_until(timeout, || {
        code = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        code.is_some()
    });
    code.unwrap()
}

/// On a terminal, prune asks and reads a whole line, as `kubectl delete -i` and kapp do: `y` or
/// `yes` then Enter deletes; anything else (Enter alone, `n`, `yes please`) declines: "Nothing
/// was deleted.", exit 0 (as kubectl after a declined `delete -i`). A key without Enter does not
/// answer, and the Enter that ends the answer is read with it (nothing is left for the shell).
#[test]
fn the_prompt_reads_a_line_and_only_y_or_yes_proceeds() {
    let _logs = start();
    let ns = Namespace::new("prompt");
    let n = &ns.0;
    let run = unique("pr");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: orphan, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: desired, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));
    let desired = desired_file();
    record_flux_inventories(n);
    let command = format!(
        "env KUBECONFIG={} NO_COLOR=1 {} prune -n {n} -l stack-test/run={run} --untracked -f {}",
        cluster().admin.display(),
        env!("CARGO_BIN_EXE_kubectl-stack"),
        desired.display()
    );
    let tmux = Tmux::new();
    let dir = std::env::temp_dir().join(unique("prompt"));
    std::fs::create_dir_all(&dir).unwrap();
    let asked = |session: &str| {
        wait_until(Duration::from_secs(30), || {
            tmux.screen(session).contains("Delete 1 object(s) in 1 wave(s)? [y/N]")
        });
    };
    let declined = |session: &str| {
        assert_eq!(
            exit_code_in(&dir.join(session), Duration::from_secs(30)),
            0,
            "{}",
            tmux.screen(session)
        );
        let screen = tmux.screen(session);
        assert!(screen.contains("Nothing was deleted."), "{screen}");
        assert!(!screen.contains("refused") && !screen.contains("error"), "{screen}");
        assert!(exists("configmap", Some(n), "orphan"));
    };

    // Enter: the default, No.
    tmux.start("enter", &command, &dir.join("enter"));
    asked("enter");
    tmux.keys("enter", &["Enter"]);
    declined("enter");

    // `yes please`: not yes.
    tmux.start("please", &command, &dir.join("please"));
    asked("please");
    tmux.keys("please", &["-l", "yes please"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!dir.join("please").exists(), "still asking: {}", tmux.screen("please"));
    assert!(exists("configmap", Some(n), "orphan"));
    tmux.keys("please", &["Enter"]);
    declined("please");

    // A key alone does not answer; n and Enter decline, and the Enter is not left for the shell.
    tmux.start("no", &command, &dir.join("no"));
    asked("no");
    tmux.keys("no", &["n"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!dir.join("no").exists(), "still asking: {}", tmux.screen("no"));
    tmux.keys("no", &["Enter"]);
    declined("no");
    wait_until(Duration::from_secs(30), || tmux.screen("no").contains("NOTHING LEFT"));
    assert!(!tmux.screen("no").contains("EFT:["), "{}", tmux.screen("no"));

    // y and Enter: deletes.
    tmux.start("yes", &command, &dir.join("yes"));
    asked("yes");
    tmux.keys("yes", &["y"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!dir.join("yes").exists(), "still asking: {}", tmux.screen("yes"));
    assert!(exists("configmap", Some(n), "orphan"));
    tmux.keys("yes", &["Enter"]);
    assert_eq!(
        exit_code_in(&dir.join("yes"), Duration::from_secs(60)),
        0,
        "{}",
        tmux.screen("yes")
    );
    assert!(!exists("configmap", Some(n), "orphan"));
    assert!(exists("configmap", Some(n), "desired"));
}

// ---------------------------------------------------------------------------------------------
// Execution details.

/// Kustomizations about to be deleted are suspended before anything is deleted: with wave 1
/// held, the Kustomization (deleted in a later wave) is already `spec.suspend: true`.
#[test]
fn flux_kustomizations_are_suspended_before_anything_is_deleted() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("suspend");
    let f = &flux.0;
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: app, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: held, namespace: {f}, labels: {labels}, finalizers: [{HOLD}]}}
"#,
        labels = flux_labels("app", f)
    ));
    assert_eq!(field("kustomization", f, "app", ".spec.suspend"), "");
    record_flux_inventories(f);
    let args = ["prune", "-n", f, "kustomization/app", "--yes", "--timeout", "3s"];
    stack(&args).expect_code(5);
    assert_eq!(
        field("kustomization", f, "app", ".spec.suspend"),
        "true",
        "suspended before its member's delete"
    );
    assert_eq!(
        field("kustomization", f, "app", ".metadata.deletionTimestamp"),
        "",
        "not deleted yet"
    );
    release_finalizers("configmap/held", f);
    stack(&args).expect_code(0);
    assert!(!exists("kustomization", Some(f), "app"));
}

/// A tracked parent with an untracked child (controller ownerReference), pruned.
fn seed_parent_and_child(n: &str, run: &str, child_finalizer: bool) {
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: parent, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: desired, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));
    let uid = uid_of("configmap", Some(n), "parent");
    let finalizers = if child_finalizer {
        format!("finalizers: [{HOLD}]")
    } else {
        String::new()
    };
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: child
  namespace: {n}
  {finalizers}
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: parent, uid: {uid}, controller: true, blockOwnerDeletion: true}}]
"#
    ));
}

/// `--cascade`: background deletes the parent at once and its child after; foreground keeps the
/// parent until its (held) child is gone; orphan leaves the child without its ownerReference.
#[test]
fn cascade_background_foreground_and_orphan_do_what_they_say() {
    let _logs = start();
    let desired = desired_file();
    let prune = |n: &str, run: &str, cascade: &str, code: i32| {
        stack(&[
            "prune",
            "-n",
            n,
            "-l",
            &format!("stack-test/run={run}"),
            "--untracked",
            "-f",
            desired.to_str().unwrap(),
            "--yes",
            "--timeout",
            "5s",
            "--cascade",
            cascade,
        ])
        .expect_code(code)
    };
    let terminating = |n: &str, name: &str| !field("configmap", n, name, ".metadata.deletionTimestamp").is_empty();

    // Background: the parent is gone at once (exit 0); the garbage collector then deletes the child.
    let background = Namespace::new("bg");
    let run = unique("bg");
    seed_parent_and_child(&background.0, &run, true);
    prune(&background.0, &run, "background", 0);
    assert!(!exists("configmap", Some(&background.0), "parent"));
    wait_until(Duration::from_secs(30), || terminating(&background.0, "child"));
    release_finalizers("configmap/child", &background.0);

    // Foreground: the parent waits for its held child: the wave times out (exit 5).
    let foreground = Namespace::new("fg");
    let run = unique("fg");
    seed_parent_and_child(&foreground.0, &run, true);
    prune(&foreground.0, &run, "foreground", 5);
    assert!(exists("configmap", Some(&foreground.0), "parent"));
    assert!(
        field("configmap", &foreground.0, "parent", ".metadata.finalizers").contains("foregroundDeletion"),
        "{}",
        field("configmap", &foreground.0, "parent", ".metadata.finalizers")
    );
    assert!(terminating(&foreground.0, "child"));
    release_finalizers("configmap/child", &foreground.0);
    wait_until(Duration::from_secs(30), || {
        !exists("configmap", Some(&foreground.0), "parent")
    });

    // Orphan: the child stays, freed of its ownerReference.
    let orphan = Namespace::new("or");
    let run = unique("or");
    seed_parent_and_child(&orphan.0, &run, false);
    prune(&orphan.0, &run, "orphan", 0);
    assert!(!exists("configmap", Some(&orphan.0), "parent"));
    wait_until(Duration::from_secs(30), || {
        field("configmap", &orphan.0, "child", ".metadata.ownerReferences").is_empty()
    });
    assert!(exists("configmap", Some(&orphan.0), "child"));
    assert!(!terminating(&orphan.0, "child"));
}

/// `--chunk-size 2` over 7 objects of one kind: every page is followed (list and prune).
#[test]
fn pagination_follows_every_page_of_a_kind() {
    let _logs = start();
    let ns = Namespace::new("pages");
    let n = &ns.0;
    let run = unique("pg");
    let mut yaml = String::new();
    for i in 0..7 {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
        ));
    }
    apply(&yaml);
    let selector = format!("stack-test/run={run}");
    record_flux_inventories(n);
    let listed = stack(&[
        "list",
        "-n",
        n,
        "-l",
        &selector,
        "--chunk-size",
        "2",
        "-o",
        "name",
        "-v",
        "6",
    ])
    .expect_code(0);
    let expected: Vec<String> = (0..7).map(|i| format!("configmap/c{i}")).collect();
    assert_eq!(listed.stdout.lines().collect::<Vec<_>>(), expected);
    assert!(
        listed.stderr.contains("limit=2") && listed.stderr.contains("continue="),
        "pages of 2 were requested and continued:\n{}",
        listed.stderr
    );

    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c0}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c6}\n",
    );
    let pruned = stack(&[
        "prune",
        "-n",
        n,
        "-l",
        &selector,
        "--untracked",
        "-f",
        desired.to_str().unwrap(),
        "--chunk-size",
        "2",
        "--yes",
    ])
    .expect_code(0);
    assert!(pruned.stdout.contains("5 deleted"), "{}", pruned.stdout);
    let left = kubectl(&["get", "configmaps", "-n", n, "-l", &selector, "-o", "name"]);
    assert_eq!(left.sorted_lines(), vec!["configmap/c0", "configmap/c6"]);
}

// ---------------------------------------------------------------------------------------------
// Guards on what is desired and on what could not be listed.

/// `prune` refuses an empty desired set (exit 4) and deletes nothing.
#[test]
fn prune_refuses_an_empty_desired_set() {
    let _logs = start();
    let ns = Namespace::new("empty");
    let n = &ns.0;
    let run = unique("em");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: tracked, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));
    let empty = std::env::temp_dir().join(unique("empty"));
    std::fs::create_dir_all(&empty).unwrap();
    let selector = format!("stack-test/run={run}");
    let refused = stack(&[
        "prune",
        "-n",
        n,
        "-l",
        &selector,
        "--untracked",
        "-f",
        empty.to_str().unwrap(),
        "--yes",
    ])
    .expect_code(4);
    assert!(refused.stderr.contains("desired set is empty"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--allow-empty"), "{}", refused.stderr);
    assert!(exists("configmap", Some(n), "tracked"));
}

/// A desired set made only of kinds the server does not serve must not turn every tracked
/// object into an orphan: it is refused like an empty one.
#[test]
fn a_desired_set_of_only_unserved_kinds_orphans_nothing() {
    let _logs = start();
    let ns = Namespace::new("ghosts");
    let n = &ns.0;
    let run = unique("gh");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: tracked, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));
    let ghosts = temp_file(
        "ghosts.yaml",
        "apiVersion: nowhere.example.com/v1\nkind: Ghost\nmetadata: {name: boo}\n",
    );
    let selector = format!("stack-test/run={run}");
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "-l",
        &selector,
        "--untracked",
        "-f",
        ghosts.to_str().unwrap(),
        "-o",
        "name",
    ]);
    assert_eq!(found.code, 4, "stdout:\n{}\nstderr:\n{}", found.stdout, found.stderr);
    assert!(found.stdout.is_empty(), "{}", found.stdout);
    stack(&[
        "prune",
        "-n",
        n,
        "-l",
        &selector,
        "--untracked",
        "-f",
        ghosts.to_str().unwrap(),
        "--yes",
    ]);
    assert!(exists("configmap", Some(n), "tracked"));
}

/// `orphans` when kinds cannot be listed (403): no object of them is an orphan, they are named in
/// `uncheckedKinds` and on stderr; 403-only gaps stay a warning (issue 10), other gaps exit 3.
#[test]
fn orphans_with_forbidden_kinds_names_them_and_calls_none_an_orphan() {
    let _logs = start();
    let ns = Namespace::new("unchecked");
    let n = &ns.0;
    let run = unique("uc");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: orphan, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: hidden, namespace: {n}, labels: {{stack-test/run: {run}}}}}\n"
    ));
    grant_limited(
        n,
        "list-configmaps",
        r#"[{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]"#,
    );
    let selector = format!("stack-test/run={run}");
    let limited = &cluster().limited;
    wait_until(Duration::from_secs(10), || {
        stack_as(limited, &["list", "-n", n, "-l", &selector, "-o", "name"])
            .stdout
            .contains("orphan")
    });
    let desired = desired_file();
    let found = stack_as(
        limited,
        &[
            "orphans",
            "-n",
            n,
            "-l",
            &selector,
            "--untracked",
            "-f",
            desired.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    let json = found.json();
    let unchecked: Vec<&str> = json["uncheckedKinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert!(unchecked.contains(&"Secret"), "{unchecked:?}");
    let orphans: Vec<&str> = json["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(orphans, vec!["orphan"]);
    // Issue 10: gaps that are only 403 Forbidden (an RBAC-limited user) stay a warning: the
    // orphans found are reported (exit 1) and the unchecked kinds are named.
    assert_eq!(found.code, 1, "403-only gaps are a warning\n{}", found.stderr);
    assert!(found.stderr.contains("Secret"), "{}", found.stderr);
}

/// A teardown refuses when kinds could not be listed (exit 4) and deletes nothing.
#[test]
fn a_teardown_refuses_when_kinds_could_not_be_listed() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("tdunlisted");
    let f = &flux.0;
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: app, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: member, namespace: {f}, labels: {labels}}}
"#,
        labels = flux_labels("app", f)
    ));
    // The granted user may list (and delete) ConfigMaps and Kustomizations in every namespace,
    // and nothing else: a teardown cannot see every kind.
    let grant = ClusterGrant::new(
        "teardown",
        r#"[{apiGroups: ["", "kustomize.toolkit.fluxcd.io"], resources: [configmaps, kustomizations], verbs: [get, list, watch, delete, patch]}]"#,
    );
    wait_until(Duration::from_secs(10), || {
        grant.stack(&["list", "-n", f, "-o", "name"]).stdout.contains("member")
    });
    let refused = grant
        .stack(&["prune", "-n", f, "kustomization/app", "--yes"])
        .expect_code(4);
    assert!(
        refused.stderr.contains("could not be listed") && refused.stderr.contains("--skip-unlisted"),
        "{}",
        refused.stderr
    );
    assert!(exists("kustomization", Some(f), "app"));
    assert!(exists("configmap", Some(f), "member"));
    assert_eq!(
        field("kustomization", f, "app", ".spec.suspend"),
        "",
        "not even suspended"
    );
}

/// `--inventory applyset=PARENT` of a real kubectl ApplySet: a member of a group-kind the parent
/// does not list is an orphan; members of listed group-kinds are not.
#[test]
fn an_applyset_parent_is_a_desired_set() {
    let _logs = start();
    let ns = Namespace::new("applyset");
    let n = &ns.0;
    let set = unique("set");
    let applied = kubectl_with_stdin(
        &["apply", "-n", n, "--prune", &format!("--applyset={set}"), "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: member, namespace: {n}}}\n"
        )),
    );
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    let id = kubectl(&[
        "get",
        "secret",
        &set,
        "-n",
        n,
        "-o",
        "jsonpath={.metadata.labels.applyset\\.kubernetes\\.io/id}",
    ])
    .stdout;
    assert!(id.starts_with("applyset-"), "{id}");
    // A Secret claiming membership, of a kind the parent does not list.
    apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: stray, namespace: {n}, labels: {{applyset.kubernetes.io/part-of: {id}}}}}\n"
    ));
    for parent in [set.clone(), format!("secrets/{set}")] {
        // kubectl prunes only the group-kinds the parent lists (issue 16, finding 2): the stray
        // Secret is not kubectl's to delete, and the parent alone prunes nothing.
        let found = stack(&[
            "orphans",
            "-n",
            n,
            "--inventory",
            &format!("applyset={parent}"),
            "-o",
            "json",
            "--show-skipped",
        ])
        .expect_code(0);
        assert!(
            found.json()["orphans"].as_array().unwrap().is_empty(),
            "{}",
            found.stdout
        );
        let skipped = found.json()["skipped"].as_array().unwrap().clone();
        assert_eq!(skipped.len(), 1, "{}", found.stdout);
        assert_eq!(
            (skipped[0]["kind"].as_str(), skipped[0]["name"].as_str()),
            (Some("Secret"), Some("stray"))
        );
        assert_eq!(skipped[0]["reason"], "notInInventory");
        assert_eq!(skipped[0]["inventory"], format!("ApplySet parent Secret/{set}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Break glass.

/// `unstick` of an object that is not being deleted: refused (exit 4) unless `--force`; with it
/// the finalizer is removed, the object itself stays, and a 0600 backup is written.
#[test]
fn unstick_force_acts_on_an_object_not_being_deleted() {
    use std::os::unix::fs::PermissionsExt;
    let _logs = start();
    let ns = Namespace::new("force");
    let n = &ns.0;
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: pinned, namespace: {n}, finalizers: [{HOLD}]}}\n"
    ));
    let backups = std::env::temp_dir().join(unique("force-backup"));
    let args = [
        "unstick",
        "-n",
        n,
        "configmap/pinned",
        "--finalizer",
        HOLD,
        "--yes",
        "--backup-dir",
        backups.to_str().unwrap(),
    ];
    let refused = stack(&args).expect_code(4);
    assert!(refused.stderr.contains("is not being deleted"), "{}", refused.stderr);
    assert_eq!(
        field("configmap", n, "pinned", ".metadata.finalizers"),
        format!("[\"{HOLD}\"]")
    );

    stack(&[&args[..], &["--force"]].concat()).expect_code(0);
    assert_eq!(field("configmap", n, "pinned", ".metadata.finalizers"), "");
    assert!(exists("configmap", Some(n), "pinned"), "unstick never deletes");
    // Each run writes into a new 0700 directory of its own under --backup-dir, one 0600 file per object.
    let runs: Vec<std::path::PathBuf> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(std::fs::metadata(&runs[0]).unwrap().permissions().mode() & 0o777, 0o700);
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(&runs[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::read_to_string(&files[0]).unwrap().contains(HOLD));
}

// ---------------------------------------------------------------------------------------------
// Secret data never reaches the output.

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// Asserts that no form of a secret appears in either stream, and that no item carries `data`.
fn assert_no_leak(run: &Run, forms: &[String], what: &str) {
    for form in forms {
        assert!(
            !run.stdout.contains(form.as_str()) && !run.stderr.contains(form.as_str()),
            "{what}: {form:?} leaked\nstdout:\n{}\nstderr:\n{}",
            run.stdout,
            run.stderr
        );
    }
}

fn items_carry_no_data(json: &serde_json::Value, key: &str) {
    for item in json[key].as_array().unwrap() {
        for field in ["data", "stringData"] {
            assert!(item.get(field).is_none(), "{field} in {item}");
        }
    }
}

/// `list` and `orphans --inventory helm=` at `-v 0` and `-v 9`, every output format: no form of
/// the Secret's data (stored base64, decoded, Helm's own base64 of gzip, gunzipped) anywhere.
#[test]
fn secret_data_never_appears_in_any_output_at_any_verbosity() {
    let _logs = start();
    let ns = Namespace::new("leak");
    let n = &ns.0;
    let run = unique("lk");
    let password = format!("pw-{run}-x");
    // Applied (not created), so last-applied-configuration would hold it too if kept.
    apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: creds, namespace: {n}, labels: {{stack-test/run: {run}}}}}\ndata: {{password: {}}}\n",
        base64(password.as_bytes())
    ));
    let mut forms = vec![password.clone(), base64(password.as_bytes())];
    let selector = format!("stack-test/run={run}");
    for verbosity in ["0", "9"] {
        for output in ["table", "wide", "json", "yaml", "name"] {
            record_flux_inventories(n);
            let listed = stack(&["list", "-n", n, "-l", &selector, "-o", output, "-v", verbosity]).expect_code(0);
            assert!(listed.stdout.contains("creds"), "{}", listed.stdout);
            assert_no_leak(&listed, &forms, &format!("list -o {output} -v {verbosity}"));
            if output == "json" {
                items_carry_no_data(&listed.json(), "items");
            }
        }
    }

    // A Helm release Secret: the API returns base64(Helm's base64(gzip(JSON))).
    let release = serde_json::json!({
        "name": format!("web-{run}"), "version": 1,
        "config": {"password": password},
        "manifest": format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: in-chart\n# {password}\n"),
    })
    .to_string();
    let helm_encoded = base64(&gzip(release.as_bytes()));
    let stored = base64(helm_encoded.as_bytes());
    create(&format!(
        r#"
apiVersion: v1
kind: Secret
type: helm.sh/release.v1
metadata:
  name: sh.helm.release.v1.web-{run}.v1
  namespace: {n}
  labels: {{owner: helm, name: web-{run}, version: "1", status: deployed}}
data: {{release: {stored}}}
"#
    ));
    apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: left-behind
  namespace: {n}
  labels: {{app.kubernetes.io/managed-by: Helm}}
  annotations: {{meta.helm.sh/release-name: web-{run}, meta.helm.sh/release-namespace: {n}}}
"#
    ));
    forms.extend([
        stored[..40].to_string(),
        helm_encoded[..40].to_string(),
        "H4sI".to_string(),
        "SDRzSUFB".to_string(),
        release[..release.find("password").unwrap()].to_string(),
    ]);
    for verbosity in ["0", "9"] {
        for output in ["table", "json", "yaml"] {
            let found = stack(&[
                "orphans",
                "-n",
                n,
                "--inventory",
                &format!("helm=web-{run}"),
                "--show-skipped",
                "-o",
                output,
                "-v",
                verbosity,
            ])
            .expect_code(0);
            assert!(found.stdout.contains("left-behind"), "{}", found.stdout);
            assert_no_leak(&found, &forms, &format!("orphans -o {output} -v {verbosity}"));
            if output == "json" {
                items_carry_no_data(&found.json(), "orphans");
                items_carry_no_data(&found.json(), "skipped");
            }
        }
    }
}
