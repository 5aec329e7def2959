//! First use as a kubectl user expects (issue 27): no silent "nothing found" (items 3, 4), every
//! stack a teardown pulled in named above the prompt (item 9).

mod common;

use common::*;

/// Item 4: `-l` on objects no tool tracks says how many matched and names `--untracked`; a
/// skipped object names `--show-skipped`; `prune` says the same after "Nothing to prune".
#[test]
fn a_selector_on_untracked_objects_is_not_a_silent_nothing() {
    let _logs = start();
    let n = Namespace::new("ux27-untracked");
    let app = unique("app");
    apply(&format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: plain-a, namespace: {n}, labels: {{app: {app}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: plain-b, namespace: {n}, labels: {{app: {app}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kept
  namespace: {n}
  labels: {{app: {app}, kapp.k14s.io/app: "{app}"}}
  annotations: {{kapp.k14s.io/delete-strategy: orphan}}
"#,
        n = n.0
    ));
    let desired = temp_file(
        "ux27-desired.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: wanted, namespace: {}}}\n",
            n.0
        ),
    );
    let selector = format!("app={app}");
    let file = desired.display().to_string();
    record_flux_inventories(&n.0);
    let orphans = stack(&["orphans", "-n", &n.0, "-l", &selector, "-f", &file]).expect_code(0);
    let said = &orphans.stderr;
    assert!(
        said.contains(&format!("No orphans among 1 tracked object(s) in namespace {}", n.0)),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "2 object(s) matched -l {selector} but no GitOps tool tracks them"
        )),
        "{said}"
    );
    assert!(said.contains("--untracked"), "{said}");
    assert!(said.contains("1 object(s) not desired were skipped"), "{said}");
    assert!(said.contains("--show-skipped"), "{said}");
    let prune = stack(&["prune", "-n", &n.0, "-l", &selector, "-f", &file, "--yes"]).expect_code(0);
    assert!(
        prune
            .stderr
            .contains("Nothing to prune: no orphans among 1 tracked object(s)"),
        "{}",
        prune.stderr
    );
    assert!(prune.stderr.contains("2 object(s) matched"), "{}", prune.stderr);
    assert!(prune.stderr.contains("--untracked"), "{}", prune.stderr);
    // With --untracked, they are compared: both are orphans.
    let untracked = stack(&["orphans", "-n", &n.0, "-l", &selector, "-f", &file, "--untracked"]);
    assert_eq!(untracked.code, 1, "{}", untracked.stderr);
    assert!(untracked.stdout.contains("plain-a") && untracked.stdout.contains("plain-b"));
}

/// Item 3: without `-A`, the namespaces checked are said, and the namespaces that the named
/// stack's record and the desired set name outside them are warned about.
#[test]
fn a_record_outside_the_namespace_checked_is_warned_about() {
    let _logs = start();
    ensure_flux_crds();
    let f = Namespace::new("ux27-flux");
    let shop = Namespace::new("ux27-shop");
    let here = Namespace::new("ux27-here");
    let labels = flux_labels("usage", &f.0);
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: storefront, namespace: {shop}, labels: {labels}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {shop}, labels: {labels}}}
"#,
        f = f.0,
        shop = shop.0
    ));
    let ids = [
        format!("{}_storefront__ConfigMap", shop.0),
        format!("{}_settings__ConfigMap", shop.0),
    ];
    set_flux_inventory("usage", &f.0, &ids);
    let next = temp_file(
        "ux27-next.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {}}}\n",
            shop.0
        ),
    );
    let tracker = format!("flux=usage.{}", f.0);
    let file = next.display().to_string();
    record_flux_inventories(&f.0);
    let run = stack(&["orphans", "-n", &here.0, "--tracker", &tracker, "-f", &file]).expect_code(0);
    let said = &run.stderr;
    assert!(
        said.contains(&format!("No orphans among 0 tracked object(s) in namespace {}", here.0)),
        "{said}"
    );
    assert!(
        said.contains(&format!("names objects in namespace(s) {}", shop.0))
            && said.contains(&format!("add -A, or -n {}", shop.0)),
        "{said}"
    );
    // With -A, the orphan is found and nothing is warned about.
    let all = stack(&["orphans", "-A", "--tracker", &tracker, "-f", &file]);
    assert_eq!(all.code, 1, "{}", all.stderr);
    assert!(all.stdout.contains("storefront"), "{}", all.stdout);
    assert!(!all.stderr.contains("names objects in namespace"), "{}", all.stderr);
}

/// Item 9: a teardown names every stack it pulled in (a dependent), and why, in the summary
/// right above the prompt.
#[test]
fn a_teardown_names_the_stacks_it_pulled_in() {
    let _logs = start();
    ensure_flux_crds();
    let f = Namespace::new("ux27-pull");
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: operator, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {f}}}
spec: {{prune: true, dependsOn: [{{name: operator}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {f}, labels: {labels}}}
"#,
        f = f.0,
        labels = flux_labels("usage", &f.0)
    ));
    record_flux_inventories(&f.0);
    let run = stack(&["prune", "-n", &f.0, "kustomization/operator", "--dry-run=client"]).expect_code(0);
    let said = &run.stderr;
    let pulled = said
        .find("Pulled in: 1 object(s) not named")
        .unwrap_or_else(|| panic!("{said}"));
    assert!(said.find("Plan: ").is_some_and(|plan| plan < pulled), "{said}");
    let line = said[pulled..].lines().nth(1).unwrap_or_default();
    assert!(
        line.contains(&format!("{}/usage", f.0)) && line.contains("depends on") && line.contains("operator"),
        "{said}"
    );
    // Nothing between the list and the end of the summary (where the prompt goes).
    assert!(said[pulled..].lines().count() <= 3, "{said}");
}

/// Item 13: every `-o json` has one documented shape with a version: `list` kubectl's `v1`
/// `List`, the others `apiVersion: kubectl-stack/v1` with their kind, and every `prune` JSON
/// line the same `apiVersion`, its objects named by the same `id` in the plan and the events.
#[test]
fn every_json_output_has_one_versioned_shape() {
    let _logs = start();
    let n = Namespace::new("ux27-json");
    let app = unique("json");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: stale, namespace: {n}, labels: {{kapp.k14s.io/app: \"{app}\"}}, \
         annotations: {{kapp.k14s.io/identity: \"v1;{n}//ConfigMap/stale;v1\"}}}}\n{}",
        kapp_app_record(&n.0, &app),
        n = n.0
    ));
    let desired = temp_file(
        "ux27-json.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: wanted, namespace: {}}}\n",
            n.0
        ),
    );
    let (file, tracker) = (desired.display().to_string(), format!("kapp={app}"));
    record_flux_inventories(&n.0);
    let documents = [
        (
            stack(&["orphans", "-n", &n.0, "--tracker", &tracker, "-f", &file, "-o", "json"]),
            "OrphanReport",
        ),
        (stack(&["graph", "-n", &n.0, "-o", "json"]), "Graph"),
        (stack(&["stuck", "-n", &n.0, "-o", "json"]), "StuckReport"),
    ];
    for (run, kind) in documents {
        let document = run.json();
        assert_eq!(document["apiVersion"], "kubectl-stack/v1", "{document}");
        assert_eq!(document["kind"], kind, "{document}");
    }
    let list = stack(&["list", "-n", &n.0, "--tracker", &tracker, "-o", "json"])
        .expect_code(0)
        .json();
    assert_eq!(
        (list["apiVersion"].as_str(), list["kind"].as_str()),
        (Some("v1"), Some("List"))
    );
    let args = [
        "prune",
        "-n",
        &n.0,
        "--tracker",
        &tracker,
        "-f",
        &file,
        "--dry-run=server",
        "-o",
        "json",
    ];
    let pruned = stack(&args).expect_code(0);
    let lines = json_lines(&pruned.stdout);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap_or_default()).collect();
    assert_eq!(types, ["plan", "event", "summary"], "{}", pruned.stdout);
    assert!(
        lines.iter().all(|l| l["apiVersion"] == "kubectl-stack/v1"),
        "{}",
        pruned.stdout
    );
    let planned = &plan_line(&lines)["waves"][0][0]["id"];
    assert_eq!(planned["name"], "stale", "{}", pruned.stdout);
    assert_eq!(&lines[1]["id"], planned, "the event names the object as the plan does");
    assert!(lines[1].get("name").is_none(), "{}", lines[1]);
}

/// What bash completes for `line` with the script of `kubectl-stack completion bash`.
fn bash_completes(line: &str) -> Vec<String> {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-stack"))
        .parent()
        .unwrap();
    let script = format!(
        "source <(kubectl-stack completion bash)\nCOMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; _kubectl_stack\nprintf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    let output = std::process::Command::new("bash")
        .args(["-c", &script])
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
        )
        .env("KUBECONFIG", &cluster().admin)
        .output()
        .expect("bash");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// Item 14: bash completes namespaces after `-n`, presets then Kustomizations after
/// `--tracker`, the kinds that are stacks after `prune -n NS`, the finalizers of the named
/// objects after `--finalizer`, never file names there, and never lists `__complete`.
#[test]
fn bash_completes_namespaces_trackers_stack_kinds_and_finalizers() {
    let _logs = start();
    ensure_flux_crds();
    let f = Namespace::new("ux27-complete");
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: completeme, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: held, namespace: {f}, finalizers: [example.com/ux27-hold]}}
"#,
        f = f.0
    ));
    let namespaces = bash_completes(&format!("kubectl-stack list -n {}", &f.0[..f.0.len() - 1]));
    assert_eq!(namespaces, std::slice::from_ref(&f.0));
    let presets = bash_completes("kubectl-stack orphans --tracker ");
    assert!(
        presets.contains(&"flux=".to_string()) && !presets.iter().any(|p| p.contains("Cargo")),
        "{presets:?}"
    );
    let stacks = bash_completes("kubectl-stack orphans --tracker flux=completem");
    assert_eq!(stacks, [format!("completeme.{}", f.0)]);
    let kinds = bash_completes(&format!("kubectl-stack prune -n {} ", f.0));
    assert!(kinds.contains(&"kustomization".to_string()), "{kinds:?}");
    assert!(
        kinds.len() <= 3 && !kinds.iter().any(|k| k.contains("tokenreview")),
        "{kinds:?}"
    );
    let names = bash_completes(&format!("kubectl-stack prune -n {} kustomization/", f.0));
    assert_eq!(names, ["kustomization/completeme"]);
    let finalizers = bash_completes(&format!("kubectl-stack unstick -n {} configmap/held --finalizer ", f.0));
    assert_eq!(finalizers, ["example.com/ux27-hold"]);
    let subcommands = bash_completes("kubectl-stack ");
    assert!(
        subcommands.contains(&"prune".to_string()) && !subcommands.iter().any(|s| s.contains("complete")),
        "{subcommands:?}"
    );
    kubectl(&[
        "patch",
        "configmap",
        "held",
        "-n",
        &f.0,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
}

/// The plan table's rows as a terminal shows them: the lines from the header to the summary.
fn plan_lines(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|l| !l.starts_with("WAVE"))
        .skip(1)
        .take_while(|l| !l.starts_with("Plan: "))
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// Item 11: in an 80-column terminal no row of a teardown's plan wraps: kubectl's short forms
/// (`Kustomization`, `member of kustomization/usage`) and the widest columns cut to fit. `-o wide`
/// is more columns (the kind's group, the UID); `--all-rows` every row.
#[test]
fn a_plan_fits_an_80_column_terminal() {
    let _logs = start();
    ensure_flux_crds();
    let f = Namespace::new("fit-f");
    let shop = Namespace::new("fit-s");
    // Every column in full is 99 columns wide.
    let long = "storefront-settings-v2";
    apply(&format!(
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: operator, namespace: {f}}}
spec: {{prune: true}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: usage, namespace: {f}}}
spec: {{prune: true, dependsOn: [{{name: operator}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {shop}, labels: {usage}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: {long}, namespace: {shop}, labels: {usage}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: operator-settings, namespace: {f}, labels: {operator}}}
"#,
        f = f.0,
        shop = shop.0,
        usage = flux_labels("usage", &f.0),
        operator = flux_labels("operator", &f.0),
    ));
    record_flux_inventories(&f.0);
    let command = format!(
        "env KUBECONFIG={} NO_COLOR=1 {} prune -n {} kustomization/operator --dry-run=client",
        cluster().admin.display(),
        env!("CARGO_BIN_EXE_kubectl-stack"),
        f.0
    );
    let tmux = Tmux::new();
    let dir = std::env::temp_dir().join(unique("fit"));
    std::fs::create_dir_all(&dir).unwrap();
    tmux.start_sized("fit", &command, &dir.join("fit"), 80);
    let code = exit_code_in(&dir.join("fit"), std::time::Duration::from_secs(60));
    let screen = tmux.screen("fit");
    assert_eq!(code, 0, "{screen}");
    let rows = plan_lines(&screen);
    // One line per planned object: the two Kustomizations and their three ConfigMaps.
    assert_eq!(rows.len(), 5, "a row wrapped:\n{screen}");
    for row in &rows {
        assert!(
            row.starts_with(|c: char| c.is_ascii_digit()),
            "a row wrapped: {row:?}\n{screen}"
        );
        assert!(row.chars().count() <= 80, "{row:?}");
    }
    let settings = rows
        .iter()
        .find(|r| r.contains(" settings "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(
        settings.contains("ConfigMap") && settings.contains("member of k"),
        "{screen}"
    );
    let usage = rows
        .iter()
        .find(|r| r.contains(" usage "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(
        usage.contains("Kustomization ") && !usage.contains(".fluxcd.io"),
        "{screen}"
    );
    assert!(usage.contains("depends on "), "{screen}");
    // The long name stays whole: the reason gives way first.
    assert!(rows.iter().any(|r| r.contains(&format!(" {long} "))), "{screen}");
    assert!(screen.contains("Plan: 5 object(s) to delete in"), "{screen}");

    // A pipe gets every column in full; -o wide more columns.
    let args = ["prune", "-n", &f.0, "kustomization/operator", "--dry-run=client"];
    let piped = stack(&args).expect_code(0);
    assert!(
        piped
            .stdout
            .contains(&format!("{long}   member of kustomization/usage\n")),
        "{}",
        piped.stdout
    );
    assert!(
        piped.stdout.contains("depends on kustomization/operator (dependsOn)\n"),
        "{}",
        piped.stdout
    );
    let wide = stack(&[&args[..], &["-o", "wide"]].concat()).expect_code(0);
    let header = wide.stdout.lines().next().unwrap_or_default();
    assert!(
        header.contains("UID") && header.contains("FINALIZERS") && header.contains("TRACKED-BY"),
        "{}",
        wide.stdout
    );
    assert!(
        wide.stdout.contains(&format!(
            "depends on Kustomization.kustomize.toolkit.fluxcd.io/{}/operator",
            f.0
        )),
        "{}",
        wide.stdout
    );
}

/// Item 12: Ctrl-C in a terminal while a wave waits for an object held by a finalizer: the
/// "interrupted" line once, then, as after a timeout, the blockers, the command that inspects
/// them and the hint to run the same command again; the next wave never starts.
#[test]
fn ctrl_c_in_a_terminal_names_the_blockers_once() {
    let _logs = start();
    let ns = Namespace::new("ux27-int");
    let n = &ns.0;
    let run = unique("int");
    apply(&format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  namespace: {n}
  labels: {{stack-test/run: {run}}}
  finalizers: [stack-test.example.com/hold]
  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/after}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: after, namespace: {n}, labels: {{stack-test/run: {run}}}}}
"#
    ));
    let desired = temp_file(
        "ux27-int.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desired}\n",
    );
    record_flux_inventories(n);
    let command = format!(
        "env KUBECONFIG={} NO_COLOR=1 {} prune -n {n} -l stack-test/run={run} --untracked -f {} --yes --timeout 120s",
        cluster().admin.display(),
        env!("CARGO_BIN_EXE_kubectl-stack"),
        desired.display()
    );
    let tmux = Tmux::new();
    let dir = std::env::temp_dir().join(unique("int"));
    std::fs::create_dir_all(&dir).unwrap();
    tmux.start("int", &command, &dir.join("int"));
    let long = std::time::Duration::from_secs(60);
    wait_until(long, || tmux.screen("int").contains("waiting for"));
    tmux.keys("int", &["C-c"]);
    let code = exit_code_in(&dir.join("int"), long);
    let screen = tmux.screen("int");
    release_finalizers("configmap/held", n);
    assert_eq!(code, 130, "{screen}");
    let said = screen.matches("interrupted: no new deletes will be started").count();
    assert_eq!(said, 1, "said once:\n{screen}");
    assert!(
        screen.contains("wave 1 was still waiting for 1 object(s); later waves were not started"),
        "{screen}"
    );
    let blockers = screen.split("was still waiting for").nth(1).unwrap_or_default();
    let row = blockers
        .lines()
        .find(|l| l.starts_with("ConfigMap") && l.contains(" held "))
        .unwrap_or_else(|| panic!("no blockers table:\n{screen}"));
    assert!(row.contains("stack-test.example.com/hold"), "{screen}");
    assert!(
        screen.contains(&format!(
            "hint: inspect them with: kubectl stack stuck -n {n} configmaps/held"
        )),
        "{screen}"
    );
    assert!(
        screen.contains("run the same prune command again to continue"),
        "{screen}"
    );
    assert!(exists("configmap", Some(n), "after"), "the next wave must not start");
}
