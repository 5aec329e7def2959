//! `kubectl stack stuck` and `unstick` on the real cluster.

mod common;

use std::time::Duration;

use common::*;

fn stuck_item<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["stuck"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} not stuck: {json}"))
}

fn diagnoses(item: &serde_json::Value) -> String {
    item["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_helmrelease_stuck_on_a_missing_kubeconfig_secret_is_diagnosed_then_unstuck_with_a_backup() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("hr");
    let n = &ns.0;
    apply(&format!(
        r#"
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: remote-app, namespace: {n}, finalizers: [finalizers.fluxcd.io]}}
spec:
  interval: 10m
  chart: {{spec: {{chart: podinfo, sourceRef: {{kind: HelmRepository, name: podinfo}}}}}}
  kubeConfig: {{secretRef: {{name: remote-kubeconfig}}}}
"#
    ));
    assert_eq!(
        kubectl(&["delete", "helmrelease", "remote-app", "-n", n, "--wait=false"]).code,
        0
    );

    let found = stack(&["stuck", "-n", n, "-o", "json"]).expect_code(1);
    let json = found.json();
    let item = stuck_item(&json, "remote-app");
    assert_eq!(item["finalizers"], serde_json::json!(["finalizers.fluxcd.io"]));
    let why = diagnoses(item);
    assert!(
        why.contains(&format!("kubeConfig Secret {n}/remote-kubeconfig is missing")),
        "{why}"
    );

    let text = stack(&["stuck", "-n", n, "helmreleases/remote-app"]).expect_code(1);
    assert!(
        text.stdout.contains("finalizers:   finalizers.fluxcd.io"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("kubeConfig Secret"), "{}", text.stdout);

    // No --yes without a terminal: refused, nothing changed.
    stack(&[
        "unstick",
        "-n",
        n,
        "helmrelease/remote-app",
        "--finalizer",
        "finalizers.fluxcd.io",
    ])
    .expect_code(4);
    assert!(exists("helmrelease", Some(n), "remote-app"));

    let backups = std::env::temp_dir().join(unique("backups"));
    let unstuck = stack(&[
        "unstick",
        "-n",
        n,
        "helmrelease/remote-app",
        "--finalizer",
        "finalizers.fluxcd.io",
        "--yes",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    assert!(
        unstuck.stderr.contains("Flux does not prune"),
        "what may be lost is shown: {}",
        unstuck.stderr
    );
    assert!(
        unstuck.stderr.contains(&backups.display().to_string()),
        "the backup path is printed: {}",
        unstuck.stderr
    );
    wait_until(Duration::from_secs(20), || {
        !exists("helmrelease", Some(n), "remote-app")
    });

    let runs: Vec<_> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "one directory per run: {runs:?}");
    let files: Vec<_> = std::fs::read_dir(&runs[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    assert!(
        unstuck.stderr.contains(&files[0].display().to_string()),
        "each backup's path is printed: {}",
        unstuck.stderr
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // The backup re-creates the object.
    let restored = kubectl(&["apply", "-f", files[0].to_str().unwrap()]);
    assert_eq!(restored.code, 0, "{}", restored.stderr);
    assert!(exists("helmrelease", Some(n), "remote-app"));
    let spec = kubectl(&[
        "get",
        "helmrelease",
        "remote-app",
        "-n",
        n,
        "-o",
        "jsonpath={.spec.kubeConfig.secretRef.name}",
    ]);
    assert_eq!(spec.stdout, "remote-kubeconfig");
    release_finalizers("helmrelease/remote-app", n);
}

#[test]
fn a_custom_resource_whose_operator_stack_is_gone_and_unknown_finalizers_are_diagnosed() {
    let _logs = start();
    ensure_flux_crds();
    ensure_crds();
    let ns = Namespace::new("orph");
    let n = &ns.0;
    apply(&format!(
        r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {n}}}
spec: {{dependsOn: [{{name: operator}}]}}
---
apiVersion: stack-test.example.com/v1
kind: Widget
metadata:
  name: orders
  namespace: {n}
  labels: {{kustomize.toolkit.fluxcd.io/name: usage, kustomize.toolkit.fluxcd.io/namespace: {n}}}
  finalizers: [stack-test.example.com/cleanup, orphaned.example.org/cleanup]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: not-deleted, namespace: {n}}}
"#
    ));
    // Fully qualified: other tests define kinds named Widget in groups of their own.
    kubectl_ok(&[
        "delete",
        "widgets.stack-test.example.com",
        "orders",
        "-n",
        n,
        "--wait=false",
    ]);
    let found = stack(&["stuck", "-n", n, "-o", "json"]).expect_code(1);
    let json = found.json();
    let in_namespace = json["stuck"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["namespace"] == n.as_str())
        .count();
    assert_eq!(in_namespace, 1, "only what is being deleted: {json}");
    let why = diagnoses(stuck_item(&json, "orders"));
    assert!(
        why.contains(&format!(
            "dependsOn Kustomization.kustomize.toolkit.fluxcd.io/{n}/operator, which is gone"
        )),
        "{why}"
    );
    assert!(
        why.contains("finalizer orphaned.example.org/cleanup: no installed API group"),
        "{why}"
    );
    assert!(
        !why.contains("finalizer stack-test.example.com/cleanup: no installed"),
        "a served group accounts for it: {why}"
    );
    assert!(
        why.contains("belongs to the controller of CRD widgets.stack-test.example.com"),
        "{why}"
    );
    assert_eq!(stuck_item(&json, "orders")["trackedBy"], format!("flux:{n}/usage"));

    // Not being deleted: refused unless --force.
    let refused = stack(&["unstick", "-n", n, "configmap/not-deleted", "--all-finalizers", "--yes"]).expect_code(4);
    assert!(refused.stderr.contains("not being deleted"), "{}", refused.stderr);

    // Server dry run changes nothing.
    let backups = std::env::temp_dir().join(unique("dry"));
    stack(&[
        "unstick",
        "-n",
        n,
        "widgets.stack-test.example.com/orders",
        "--all-finalizers",
        "--dry-run=server",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    assert!(exists("widgets.stack-test.example.com", Some(n), "orders"));
    stack(&[
        "unstick",
        "-n",
        n,
        "widgets.stack-test.example.com/orders",
        "--all-finalizers",
        "--yes",
        "--backup-dir",
        backups.to_str().unwrap(),
    ])
    .expect_code(0);
    wait_until(Duration::from_secs(20), || {
        !exists("widgets.stack-test.example.com", Some(n), "orders")
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn the_test_op_refuses_when_finalizers_changed_in_between() {
    let _logs = start();
    let ns = Namespace::new("race");
    let n = ns.0.clone();
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: raced, namespace: {n}, finalizers: [stack-test.example.com/a, stack-test.example.com/b]}}\n"
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "raced", "-n", &n, "--wait=false"]).code,
        0
    );

    let args = kubectl_stack::cluster::client::ConnectOptions {
        kubeconfig: Some(cluster().admin.clone()),
        ..Default::default()
    };
    let connection = kubectl_stack::cluster::client::connect(&args).await.unwrap();
    let catalog = kubectl_stack::cluster::discovery::discover(&connection.client)
        .await
        .unwrap();
    let kind = catalog.get("", "ConfigMap").unwrap().clone();
    let api = kubectl_stack::cluster::collect::api_for(&connection.client, &kind, Some(&n));
    let read = api.get("raced").await.unwrap();
    let removal = kubectl_stack::breakglass::unstick::Removal::Named(vec!["stack-test.example.com/a".into()]);
    let change = kubectl_stack::breakglass::unstick::FinalizerChange::plan(&read, false, &removal);

    // A controller finishes its own work after we read, and removes its finalizer.
    let added = kubectl(&[
        "patch",
        "configmap",
        "raced",
        "-n",
        &n,
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers/1"}]"#,
    ]);
    assert_eq!(added.code, 0, "{}", added.stderr);

    let result =
        kubectl_stack::breakglass::unstick::apply_change(&connection.client, &kind, &read, &change, false).await;
    match result {
        Err(stopped) => {
            assert!(
                matches!(stopped.error, kubectl_stack::breakglass::unstick::UnstickError::Changed),
                "{stopped:?}"
            );
            assert_eq!(stopped.done, Default::default(), "nothing was changed");
        }
        Ok(done) => panic!("a stale change went through: {done:?}"),
    }
    let now = kubectl(&[
        "get",
        "configmap",
        "raced",
        "-n",
        &n,
        "-o",
        "jsonpath={.metadata.finalizers}",
    ]);
    assert_eq!(
        now.stdout, r#"["stack-test.example.com/a"]"#,
        "our stale change must not have been applied"
    );

    // Read again: now it goes through.
    let fresh = api.get("raced").await.unwrap();
    let change = kubectl_stack::breakglass::unstick::FinalizerChange::plan(
        &fresh,
        false,
        &kubectl_stack::breakglass::unstick::Removal::All,
    );
    kubectl_stack::breakglass::unstick::apply_change(&connection.client, &kind, &fresh, &change, false)
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), || !exists("configmap", Some(&n), "raced"));
}

/// An object named on the command line that does not exist is not "gone": `stuck` and `unstick`
/// say so in the API server's words, naming the namespace looked in, and exit 3 (as a stack
/// that is not found does); what was found is still diagnosed, and unstick changes nothing.
#[test]
fn a_named_object_not_found_is_an_error_naming_the_namespace() {
    let _logs = start();
    let ns = Namespace::new("nf");
    let n = &ns.0;
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {n}, finalizers: [stack-test.example.com/hold]}}\n"
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "held", "-n", n, "--wait=false"]).code,
        0
    );

    let missing = stack(&["stuck", "-n", n, "configmap/nope"]).expect_code(3);
    assert!(
        missing
            .stderr
            .contains(&format!("error: configmaps \"nope\" not found in namespace \"{n}\"")),
        "{}",
        missing.stderr
    );
    assert!(!missing.stderr.contains("gone"), "{}", missing.stderr);
    assert!(
        missing.stderr.contains("--field-selector metadata.name=nope"),
        "{}",
        missing.stderr
    );

    // With one that is there: it is diagnosed, then the error.
    let both = stack(&["stuck", "-n", n, "configmap/held", "configmap/nope"]).expect_code(3);
    assert!(both.stdout.contains("held"), "{}", both.stdout);
    assert!(both.stderr.contains("configmaps \"nope\" not found"), "{}", both.stderr);

    // unstick: nothing is changed, not even the one that is there.
    let unstick = stack(&[
        "unstick",
        "-n",
        n,
        "configmap/held",
        "configmap/nope",
        "--all-finalizers",
        "--yes",
    ])
    .expect_code(3);
    assert!(
        unstick.stderr.contains(&format!(
            "configmaps \"nope\" not found in namespace \"{n}\"; nothing was changed"
        )),
        "{}",
        unstick.stderr
    );
    assert!(!unstick.stderr.contains("already gone"), "{}", unstick.stderr);
    assert!(exists("configmap", Some(n), "held"));
    release_finalizers("configmap/held", n);
}

/// The finalizers of a namespaced object, as JSON (`["a","b"]`), through kubectl.
fn finalizers_of(kind: &str, namespace: &str, name: &str) -> String {
    field(kind, namespace, name, ".metadata.finalizers")
}

/// Files written under a backup folder (one run folder each, its files inside).
fn backups_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(runs) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    runs.flat_map(|run| std::fs::read_dir(run.unwrap().path()).unwrap())
        .map(|file| file.unwrap().path())
        .collect()
}

/// `unstick` on a real terminal (tmux) asks before it changes anything, with No the default and
/// a whole line read: Enter and `n`+Enter change nothing and write no backup ("Nothing was
/// changed.", exit 0, as a declined `kubectl delete -i`); `y`+Enter writes the backup and
/// removes exactly the named finalizer.
#[test]
fn unstick_asks_on_a_terminal_and_only_y_removes() {
    let _logs = start();
    let ns = Namespace::new("ask");
    let n = &ns.0;
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {n}, finalizers: [stack-test.example.com/a, stack-test.example.com/b]}}\n"
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "held", "-n", n, "--wait=false"]).code,
        0
    );
    let both = r#"["stack-test.example.com/a","stack-test.example.com/b"]"#;
    assert_eq!(finalizers_of("configmap", n, "held"), both);

    let dir = std::env::temp_dir().join(unique("unstick-ask"));
    std::fs::create_dir_all(&dir).unwrap();
    let backups = dir.join("backups");
    let command = format!(
        "env KUBECONFIG={} NO_COLOR=1 {} unstick -n {n} configmap/held --finalizer stack-test.example.com/a --backup-dir {}",
        cluster().admin.display(),
        env!("CARGO_BIN_EXE_kubectl-stack"),
        backups.display()
    );
    let tmux = Tmux::new();
    let asked = |session: &str| {
        wait_until(Duration::from_secs(30), || {
            tmux.screen(session)
                .contains("Remove these finalizers from 1 object(s)?")
        });
    };

    for (session, keys) in [("enter", &["Enter"][..]), ("no", &["n", "Enter"][..])] {
        tmux.start(session, &command, &dir.join(session));
        asked(session);
        assert!(
            !dir.join(session).exists(),
            "it waits for an answer: {}",
            tmux.screen(session)
        );
        tmux.keys(session, keys);
        assert_eq!(
            exit_code_in(&dir.join(session), Duration::from_secs(30)),
            0,
            "{}",
            tmux.screen(session)
        );
        assert!(
            tmux.screen(session).contains("Nothing was changed."),
            "{}",
            tmux.screen(session)
        );
        assert_eq!(finalizers_of("configmap", n, "held"), both, "{keys:?}: nothing removed");
        assert!(backups_in(&backups).is_empty(), "{keys:?}: no backup before a yes");
    }

    tmux.start("yes", &command, &dir.join("yes"));
    asked("yes");
    tmux.keys("yes", &["y", "Enter"]);
    assert_eq!(
        exit_code_in(&dir.join("yes"), Duration::from_secs(60)),
        0,
        "{}",
        tmux.screen("yes")
    );
    let screen = tmux.screen("yes");
    assert!(
        screen.contains(&format!(
            "ConfigMap/{n}/held: removed stack-test.example.com/a from metadata.finalizers"
        )),
        "{screen}"
    );
    assert_eq!(
        finalizers_of("configmap", n, "held"),
        r#"["stack-test.example.com/b"]"#,
        "only the named finalizer is removed"
    );
    let written = backups_in(&backups);
    assert_eq!(written.len(), 1, "{written:?}");
    let backup = std::fs::read_to_string(&written[0]).unwrap();
    assert!(
        backup.contains("stack-test.example.com/a"),
        "the backup is the object as read: {backup}"
    );
    release_finalizers("configmap/held", n);
}

/// Starts `unstick ARGS` (admin) in a tmux session and waits for its prompt: unstick has read
/// the object when it asks. Returns the file its exit code will be written to.
fn unstick_at_prompt(tmux: &Tmux, session: &str, dir: &std::path::Path, args: &str) -> std::path::PathBuf {
    let command = format!(
        "env KUBECONFIG={} NO_COLOR=1 {} unstick {args} --backup-dir {}",
        cluster().admin.display(),
        env!("CARGO_BIN_EXE_kubectl-stack"),
        dir.join("backups").display()
    );
    let exit_file = dir.join(session);
    tmux.start(session, &command, &exit_file);
    wait_until(Duration::from_secs(30), || {
        tmux.screen(session)
            .contains("Remove these finalizers from 1 object(s)?")
    });
    exit_file
}

/// `unstick` never races a controller: its patch `test`s the finalizers as read, so a change
/// made between its read and its patch makes the server refuse the patch. The terminal's prompt
/// holds unstick between the two. The object keeps what the controller left, unstick exits 5
/// and says why.
///
/// - A live object (`--force`) to which its controller adds a finalizer: without the `test`
///   op, the patch would write the stale list and drop the new finalizer (and the named one);
///   the server has no other rule that stops it.
/// - An object being deleted whose controller releases its finalizer (the server also refuses
///   to add back a finalizer to an object being deleted).
#[test]
fn unstick_refuses_when_a_controller_changed_the_finalizers_after_its_read() {
    let _logs = start();
    let ns = Namespace::new("ask-race");
    let n = &ns.0;
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: live, namespace: {n}, finalizers: [stack-test.example.com/a, stack-test.example.com/b]}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: raced, namespace: {n}, finalizers: [stack-test.example.com/a, stack-test.example.com/b]}}\n"
    ));
    assert_eq!(
        kubectl(&["delete", "configmap", "raced", "-n", n, "--wait=false"]).code,
        0
    );
    let dir = std::env::temp_dir().join(unique("unstick-race"));
    std::fs::create_dir_all(&dir).unwrap();
    let tmux = Tmux::new();
    let refused = |session: &str, exit_file: &std::path::Path, name: &str| {
        tmux.keys(session, &["y", "Enter"]);
        let code = exit_code_in(exit_file, Duration::from_secs(60));
        let screen = tmux.screen(session);
        assert_eq!(code, 5, "{screen}");
        assert!(
            screen.contains(&format!(
                "error: ConfigMap/{n}/{name}: its finalizers changed since they were read (a controller is at work?); nothing was changed"
            )),
            "{screen}"
        );
        assert!(
            screen.contains("hint: run `kubectl stack stuck` on them again"),
            "{screen}"
        );
    };

    // A live object: unstick has read [a, b]; the controller adds c.
    let args = format!("-n {n} configmap/live --finalizer stack-test.example.com/a --force");
    let exit_file = unstick_at_prompt(&tmux, "live", &dir, &args);
    let added = kubectl(&[
        "patch",
        "configmap",
        "live",
        "-n",
        n,
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/metadata/finalizers/-","value":"stack-test.example.com/c"}]"#,
    ]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    refused("live", &exit_file, "live");
    assert_eq!(
        finalizers_of("configmap", n, "live"),
        r#"["stack-test.example.com/a","stack-test.example.com/b","stack-test.example.com/c"]"#,
        "the controller's finalizer stands: unstick's stale list was not written"
    );

    // Being deleted: unstick has read [a, b]; the controller of `b` finishes and removes it.
    let args = format!("-n {n} configmap/raced --finalizer stack-test.example.com/a");
    let exit_file = unstick_at_prompt(&tmux, "raced", &dir, &args);
    let released = kubectl(&[
        "patch",
        "configmap",
        "raced",
        "-n",
        n,
        "--type",
        "json",
        "-p",
        r#"[{"op":"test","path":"/metadata/finalizers/1","value":"stack-test.example.com/b"},{"op":"remove","path":"/metadata/finalizers/1"}]"#,
    ]);
    assert_eq!(released.code, 0, "{}", released.stderr);
    refused("raced", &exit_file, "raced");
    assert_eq!(
        finalizers_of("configmap", n, "raced"),
        r#"["stack-test.example.com/a"]"#,
        "the controller's change stands: unstick's stale list was not written"
    );
    release_finalizers("configmap/raced", n);
    release_finalizers("configmap/live", n);
}
