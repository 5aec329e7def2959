//! Issue 24: one record per stack, asked by every path. Each test is one way a path once deleted
//! what the stack's own tool would keep; each fails without the rule it names.

mod common;

use std::time::Duration;

use common::*;

fn kustomization(name: &str, namespace: &str, spec: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{{spec}}}\n---\n"
    )
}

fn write_files(files: &[(&str, &str)]) -> std::path::PathBuf {
    let root = std::env::temp_dir().join(unique("repo"));
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    root
}

/// Item 1: a directory holding a kustomization is built as Flux builds it (namePrefix, a
/// configMapGenerator's hashed name), never read file by file; a file that is a YAML sequence
/// refuses the whole desired set (exit 2, the file named) and nothing is deleted.
#[test]
fn a_desired_set_is_built_as_flux_builds_it_or_refused() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("kz");
    let n = &ns.0;
    let repo = write_files(&[
        (
            "apps/kustomization.yaml",
            &format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {n}\nnamePrefix: prod-\nlabels:\n- pairs: {{kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: {n}}}\nresources: [web.yaml]\nconfigMapGenerator:\n- name: settings\n  literals: [mode=web]\n"
            ),
        ),
        ("apps/web.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: b}\n"),
    ]);
    let apps = repo.join("apps");
    let applied = kubectl(&["apply", "-k", apps.to_str().unwrap()]);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    apply(&kustomization("apps", n, "prune: true"));
    let live = kubectl(&["get", "configmap", "-n", n, "-o", "name"]).stdout;
    assert!(live.contains("configmap/prod-web"), "{live}");
    assert!(live.contains("configmap/prod-settings-"), "{live}");
    let tracker = format!("flux=apps.{n}");
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        apps.to_str().unwrap(),
        "-o",
        "name",
    ]);
    assert_eq!(found.code, 0, "no orphans:\n{}\n{}", found.stdout, found.stderr);
    assert_eq!(found.stdout, "", "{}", found.stderr);
    let pruned = stack(&[
        "prune",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        apps.to_str().unwrap(),
        "--yes",
    ]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert_eq!(kubectl(&["get", "configmap", "-n", n, "-o", "name"]).stdout, live);

    // A YAML sequence holding the objects: kubectl apply refuses it and Flux's build fails.
    let sequence = write_files(&[(
        "list.yaml",
        &format!("- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: prod-web, namespace: {n}}}\n"),
    )]);
    let refused = stack(&[
        "prune",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        sequence.to_str().unwrap(),
        "--yes",
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("list.yaml") && refused.stderr.contains("sequence"),
        "{}",
        refused.stderr
    );
    assert_eq!(kubectl(&["get", "configmap", "-n", n, "-o", "name"]).stdout, live);
}

/// Item 2: one desired set describes one stack. A bare `--tracker flux` in `-n t1` selects the
/// objects of `app` (in t1) and the cluster-scoped objects of `infra`: refused (exit 4, both
/// named), and `infra`'s ClusterRole stays. Named, the same desired set prunes `app` alone.
#[test]
fn a_desired_set_compared_with_several_stacks_is_refused() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("several-flux");
    let t1 = Namespace::new("several-t1");
    let (f, t) = (&flux.0, &t1.0);
    let role = unique("several-infra");
    apply(&format!(
        "{}{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {t}, labels: {app}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: old, namespace: {t}, labels: {app}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {role}, labels: {infra}}}\nrules: []\n",
        kustomization("app", f, "prune: true"),
        kustomization("infra", f, "prune: true"),
        app = flux_labels("app", f),
        infra = flux_labels("infra", f),
    ));
    let repo = temp_file(
        "app.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {t}}}\n"),
    );
    let repo = repo.to_str().unwrap();
    record_flux_inventories(f);
    let refused = stack(&["prune", "-n", t, "--tracker", "flux", "-f", repo, "--yes"]);
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("one desired set describes one stack"),
        "{}",
        refused.stderr
    );
    // Other tests' cluster-scoped objects may be selected too: the refusal names the first
    // stacks and counts the rest.
    assert!(refused.stderr.contains("stacks ("), "{}", refused.stderr);
    assert!(exists("clusterrole", None, &role));
    assert!(exists("configmap", Some(t), "old"));
    let tracker = format!("flux=app.{f}");
    stack(&["prune", "-n", t, "--tracker", &tracker, "-f", repo, "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(t), "old"));
    assert!(exists("configmap", Some(t), "web"));
    assert!(exists("clusterrole", None, &role));
    let _ = kubectl(&["delete", "clusterrole", &role, "--ignore-not-found"]);
}

/// Item 3: a finished teardown run again deletes nothing the first run kept on purpose.
#[test]
fn a_rerun_keeps_what_the_first_run_kept() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("legacy");
    let f = &flux.0;
    let labels = flux_labels("legacy", f);
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: {f}, labels: {labels}}}\n",
        kustomization("legacy", f, "prune: false"),
    ));
    record_flux_inventories(f);
    let first = stack(&["prune", "-n", f, "kustomization/legacy", "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(first.stderr.contains("spec.prune=false"), "{}", first.stderr);
    wait_until(Duration::from_secs(30), || !exists("kustomization", Some(f), "legacy"));
    let again = stack(&["prune", "-n", f, "kustomization/legacy", "--yes", "--timeout", "60s"]).expect_code(0);
    assert!(again.stderr.contains("--leftovers"), "{}", again.stderr);
    assert!(exists("configmap", Some(f), "a"), "{}", again.stderr);
    assert!(exists("configmap", Some(f), "b"), "{}", again.stderr);
}

/// Item 4: `deletionPolicy: Orphan` set on the Kustomization while an earlier wave waits: the
/// re-check reads the stack's policy again, and its members are not deleted.
#[test]
fn the_recheck_reads_the_stacks_policy_again() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("policy");
    let f = &flux.0;
    let labels = flux_labels("pol", f);
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {f}\n  labels: {labels}\n  finalizers: [stack-test.example.com/hold]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/kept}}\n",
        kustomization("pol", f, "prune: true"),
    ));
    record_flux_inventories(f);
    let mut child = spawn_stack(&["prune", "-n", f, "kustomization/pol", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", f, "slow")
    });
    let patched = kubectl(&[
        "patch",
        "kustomization",
        "pol",
        "-n",
        f,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"deletionPolicy":"Orphan"}}"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    release_finalizers("configmap/slow", f);
    let run = finish(child);
    assert_eq!(run.code, 5, "dropped by the re-check:\n{}", run.stderr);
    assert!(run.stderr.contains("deletionPolicy=Orphan"), "{}", run.stderr);
    assert!(exists("configmap", Some(f), "kept"), "{}", run.stderr);
}

/// Membership reviews 13 and 14, F1: the Kustomization torn down is deleted by other means
/// while an earlier wave waits, or deleted and made again under its name (another UID, its
/// inventory the same). Its tool deleted nothing of it (this run had suspended it), a run again
/// would leave what still carries its mark, and a new stack's members are its own: the re-check
/// leaves them.
#[test]
fn a_stack_deleted_or_replaced_by_other_means_mid_run_leaves_its_members() {
    let _logs = start();
    ensure_flux_crds();
    for (case, said) in [
        ("gone", "was deleted since the plan"),
        ("replaced", "was deleted and made again since the plan"),
    ] {
        let flux = Namespace::new(&format!("{case}-mid"));
        let f = &flux.0;
        let labels = flux_labels("pol", f);
        apply(&format!(
            "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {f}\n  labels: {labels}\n  finalizers: [stack-test.example.com/hold]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/kept}}\n",
            kustomization("pol", f, "prune: true"),
        ));
        let recorded = record_flux_inventory("pol", f);
        let mut child = spawn_stack(&["prune", "-n", f, "kustomization/pol", "--yes", "--timeout", "60s"]);
        wait_while_running(&mut child, Duration::from_secs(60), || {
            is_terminating("configmap", f, "slow")
        });
        kubectl(&["delete", "kustomization", "pol", "-n", f, "--wait=false"]).expect_code(0);
        wait_until(Duration::from_secs(30), || !exists("kustomization", Some(f), "pol"));
        if case == "replaced" {
            apply(&kustomization("pol", f, "prune: true"));
            set_flux_inventory("pol", f, &recorded);
        }
        release_finalizers("configmap/slow", f);
        let run = finish(child);
        assert_eq!(run.code, 5, "{case}: dropped by the re-check:\n{}", run.stderr);
        assert!(run.stderr.contains(said), "{case}: {}", run.stderr);
        assert!(exists("configmap", Some(f), "kept"), "{case}: {}", run.stderr);
    }
}

/// Membership review 6, F3 (and F2 on this path): an orphan prune (`prune --tracker flux=NAME
/// -f`) re-reads the stack's record and policy before each wave with the function the plan read
/// them with (`inventory::record_of`): `spec.prune: false`, `spec.suspend: true` (a suspended
/// stack prunes nothing) or a `status.inventory` that no longer lists the orphan, set while an
/// earlier wave waits, keep the later wave's orphan; so do a target namespace, patches or a name
/// prefix set mid-run (review 18, F1: the plan's desired set is not what Flux builds now).
#[test]
fn the_orphan_recheck_reads_the_stacks_record_and_policy_again() {
    let _logs = start();
    ensure_flux_crds();
    let changes = [
        ("prune", r#"{"spec":{"prune":false}}"#, "spec.prune: false"),
        ("suspend", r#"{"spec":{"suspend":true}}"#, "suspended"),
        ("record", "", "not in the inventory of Kustomization"),
        // Membership review 18, F1: what places or names the build, set mid-run, makes the
        // desired set the plan compared with no longer Flux's.
        (
            "target",
            r#"{"spec":{"targetNamespace":"elsewhere"}}"#,
            "its target namespace is elsewhere",
        ),
        (
            "patches",
            r#"{"spec":{"patches":[{"patch":"- op: add\n  path: /metadata/annotations/x\n  value: y","target":{"kind":"ConfigMap"}}]}}"#,
            "builds with spec.patches",
        ),
        (
            "prefix",
            r#"{"spec":{"namePrefix":"p-"}}"#,
            "builds with spec.namePrefix",
        ),
    ];
    for (case, patch, said) in changes {
        let flux = Namespace::new(&format!("orphan-re-{case}"));
        let f = &flux.0;
        let labels = flux_labels("pol", f);
        apply(&format!(
            "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: desired, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {f}\n  labels: {labels}\n  finalizers: [stack-test.example.com/hold]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/kept}}\n",
            kustomization("pol", f, "prune: true"),
        ));
        let recorded = record_flux_inventory("pol", f);
        let desired = temp_file(
            &unique("desired"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: desired, namespace: {f}}}\n"),
        );
        let tracker = format!("flux=pol.{f}");
        let mut child = spawn_stack(&[
            "prune",
            "-n",
            f,
            "--tracker",
            &tracker,
            "-f",
            desired.to_str().unwrap(),
            "--yes",
            "--timeout",
            "60s",
        ]);
        wait_while_running(&mut child, Duration::from_secs(60), || {
            is_terminating("configmap", f, "slow")
        });
        if patch.is_empty() {
            let without: Vec<String> = recorded.into_iter().filter(|id| !id.contains("_kept_")).collect();
            set_flux_inventory("pol", f, &without);
        } else {
            let patched = kubectl(&["patch", "kustomization", "pol", "-n", f, "--type", "merge", "-p", patch]);
            assert_eq!(patched.code, 0, "{}", patched.stderr);
        }
        release_finalizers("configmap/slow", f);
        let run = finish(child);
        assert_eq!(run.code, 5, "{case}: dropped by the re-check:\n{}", run.stderr);
        assert!(run.stderr.contains(said), "{case}: {}", run.stderr);
        assert!(exists("configmap", Some(f), "kept"), "{case}: {}", run.stderr);
    }
}

/// HelmRelease `web` in `n` and one ConfigMap per name carrying the release's labels and
/// annotations (as helm-controller and Helm put them), whatever its release records.
fn helmrelease_web_with(n: &str, names: &[&str]) {
    let object = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  labels: {{helm.toolkit.fluxcd.io/name: web, helm.toolkit.fluxcd.io/namespace: {n}, app.kubernetes.io/managed-by: Helm}}\n  annotations: {{meta.helm.sh/release-name: web, meta.helm.sh/release-namespace: {n}}}\n"
        )
    };
    let members: String = names.iter().map(|name| object(name)).collect();
    apply(&format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: web, namespace: {n}}}\nspec: {{}}\n{members}"
    ));
}

/// Membership review 30, F3 (wrong deletion): helm-controller uninstalls a HelmRelease with its
/// `spec.uninstall.deletionPropagation`; with `orphan`, what its members own (a Deployment's
/// ReplicaSets) stays. The teardown deleted the members with the default policy, and the garbage
/// collector took their dependents. Now it is refused (exit 4) unless the run deletes as the tool
/// does (`--cascade=orphan`), which leaves the dependent.
#[test]
fn a_helmrelease_uninstalled_with_orphan_propagation_is_torn_down_so() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("hr-orphan");
    let n = &ns.0;
    helmrelease_web_with(n, &["a"]);
    let patched = kubectl(&[
        "patch",
        "helmrelease",
        "web",
        "-n",
        n,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"uninstall":{"deletionPropagation":"orphan"}}}"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    helm_release(
        n,
        "web",
        &format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {n}}}\n"),
    );
    set_helm_release_status("web", n, "web", n);
    let owner = uid_of("configmap", Some(n), "a");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: child, namespace: {n}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: a, uid: {owner}, controller: true}}]}}\n"
    ));
    let refused = stack(&["prune", "-n", n, "helmrelease/web", "--yes"]);
    assert_eq!(refused.code, 4, "{}\n{}", refused.stdout, refused.stderr);
    assert!(refused.stderr.contains("--cascade=orphan"), "{}", refused.stderr);
    assert!(exists("configmap", Some(n), "a"));
    let run = stack(&["prune", "-n", n, "helmrelease/web", "--yes", "--cascade=orphan"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(!exists("configmap", Some(n), "a"), "{}", run.stderr);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(exists("configmap", Some(n), "child"), "{}", run.stderr);
}

/// Membership review 30, F2 (wrong deletion): `helm upgrade` refuses a release whose latest
/// revision is `pending-install`, `pending-upgrade` or `pending-rollback` ("another operation is
/// in progress", helm/helm `pkg/action/upgrade.go` `prepareUpgrade`) and prunes nothing;
/// kubectl-stack compared with the last deployed revision and deleted what it held. Now a plain
/// Helm release in that state is refused (exit 4), nothing deleted.
#[test]
fn a_helm_release_with_an_operation_in_progress_prunes_nothing() {
    let _logs = start();
    let ns = Namespace::new("helm-pending");
    let n = &ns.0;
    let member = |name: &str| {
        format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  labels: {{app.kubernetes.io/managed-by: Helm}}\n  annotations: {{meta.helm.sh/release-name: r1, meta.helm.sh/release-namespace: {n}}}\n")
    };
    apply(&format!("{}{}", member("old-a"), member("b")));
    for (version, status, manifest) in [
        (2, "deployed", format!("{}{}", member("old-a"), member("b"))),
        (3, "pending-upgrade", member("b")),
    ] {
        let body = serde_json::json!({
            "name": "r1", "namespace": n, "version": version,
            "info": {"status": status}, "manifest": manifest,
        });
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {
                "name": format!("sh.helm.release.v1.r1.v{version}"), "namespace": n,
                "labels": {"owner": "helm", "name": "r1", "status": status, "version": version.to_string()},
            },
            "data": {"release": helm_release_data(&body)},
        });
        create(&secret.to_string());
    }
    let repo = std::env::temp_dir().join(unique("helm-pending"));
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(
        repo.join("b.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: {n}}}\n"),
    )
    .unwrap();
    let repo_text = repo.to_str().unwrap();
    for command in [&["orphans"][..], &["prune", "--yes"][..]] {
        let run = stack(&[command, &["-n", n, "--tracker", "helm=r1", "-f", repo_text]].concat());
        assert_eq!(run.code, 4, "{command:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("pending-upgrade"), "{}", run.stderr);
    }
    assert!(exists("configmap", Some(n), "old-a"));
}

/// Item 5 (Helm): a HelmRelease teardown deletes what its Helm release records, never a copy
/// that carries the release's labels and annotations.
#[test]
fn a_helmrelease_teardown_is_bounded_by_its_release() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("hr-copy");
    let n = &ns.0;
    helmrelease_web_with(n, &["a", "a-copy"]);
    helm_release(
        n,
        "web",
        &format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {n}}}\n"),
    );
    // Review finding (this round) F2: helm-controller uninstalls what the HelmRelease's status
    // records; one it never installed (no status.storageNamespace) uninstalls nothing
    // (fluxcd/helm-controller `reconcileReleaseDeletion`), so its teardown deletes no member.
    let planned = stack(&["prune", "-n", n, "helmrelease/web", "--dry-run"]).expect_code(0);
    assert!(
        planned.stderr.contains("records no status.storageNamespace"),
        "{}",
        planned.stderr
    );
    assert!(!planned.stdout.contains("ConfigMap"), "{}", planned.stdout);
    // A storage namespace and no history: nothing to uninstall either (`ErrNoLatest`).
    let storage_only = kubectl(&[
        "patch",
        "helmrelease",
        "web",
        "-n",
        n,
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        &format!(r#"{{"status":{{"storageNamespace":"{n}"}}}}"#),
    ]);
    assert_eq!(storage_only.code, 0, "{}", storage_only.stderr);
    let planned = stack(&["prune", "-n", n, "helmrelease/web", "--dry-run"]).expect_code(0);
    assert!(
        planned.stderr.contains("records no status.history"),
        "{}",
        planned.stderr
    );
    assert!(!planned.stdout.contains("ConfigMap"), "{}", planned.stdout);
    set_helm_release_status("web", n, "web", n);
    let run = stack(&["prune", "-n", n, "helmrelease/web", "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "a"), "{}", run.stderr);
    assert!(exists("configmap", Some(n), "a-copy"), "{}", run.stderr);
    assert!(run.stderr.contains("a-copy (not in Helm release"), "{}", run.stderr);
}

/// Membership review 13, F2: a HelmRelease teardown reads the release as `helm uninstall` does
/// (helm/helm `pkg/action/uninstall.go` `deleteRelease` sorts the manifest with
/// `releaseutil.SortManifests`): a document whose head is a hook (`helm.sh/hook`, a `List`'s head
/// for its items) is never deleted; a head Helm cannot read (an annotation that is no string)
/// is a corrupted record, and uninstall deletes nothing: the teardown deletes none of its members.
#[test]
fn a_helmrelease_teardown_reads_the_release_as_helm_uninstall_does() {
    let _logs = start();
    ensure_flux_crds();
    for corrupted in [false, true] {
        let ns = Namespace::new(if corrupted { "hr-corrupt" } else { "hr-hook" });
        let n = &ns.0;
        helmrelease_web_with(n, &["plain", "hooked"]);
        let odd = match corrupted {
            true => "annotations: {example.com/weight: 5}",
            false => "annotations: {helm.sh/hook: post-install}",
        };
        helm_release(
            n,
            "web",
            &format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain, namespace: {n}}}\n---\napiVersion: v1\nkind: List\nmetadata: {{{odd}}}\nitems:\n- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: hooked, namespace: {n}}}}}\n"
            ),
        );
        set_helm_release_status("web", n, "web", n);
        let run = stack(&["prune", "-n", n, "helmrelease/web", "--yes"]);
        assert!(exists("configmap", Some(n), "hooked"), "{}", run.stderr);
        assert_eq!(run.code, 0, "{}", run.stderr);
        if corrupted {
            assert!(run.stderr.contains("corrupted release record"), "{}", run.stderr);
            assert!(exists("configmap", Some(n), "plain"), "{}", run.stderr);
        } else {
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert!(
                run.stderr.contains("helm uninstall never deletes a hook"),
                "{}",
                run.stderr
            );
            assert!(!exists("configmap", Some(n), "plain"), "{}", run.stderr);
        }
    }
}

/// Item 6: a copy of an ApplySet parent (kubectl refuses it: "incorrect value for label
/// applyset.kubernetes.io/id") is no parent: tearing it down deletes none of the live set.
#[test]
fn a_copy_of_an_applyset_parent_takes_nothing() {
    let _logs = start();
    let ns = Namespace::new("aset-copy");
    let n = &ns.0;
    apply_applyset(
        n,
        "set",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
    );
    let parent = kubectl(&["get", "secret", "set", "-n", n, "-o", "json"]);
    assert_eq!(parent.code, 0, "{}", parent.stderr);
    let mut copy: serde_json::Value = serde_json::from_str(&parent.stdout).unwrap();
    let metadata = copy["metadata"].as_object_mut().unwrap();
    metadata.insert("name".into(), "set-backup".into());
    for generated in ["uid", "resourceVersion", "creationTimestamp", "managedFields"] {
        metadata.remove(generated);
    }
    create(&copy.to_string());
    // kubectl itself refuses the copy as a parent.
    let oracle = kubectl_with_stdin(
        &[
            "apply",
            "-n",
            n,
            "--prune",
            "--applyset=set-backup",
            "--dry-run=server",
            "-f",
            "-",
        ],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
    );
    assert_ne!(oracle.code, 0, "kubectl accepted the copy: {}", oracle.stdout);
    let run = stack(&["prune", "-n", n, "secret/set-backup", "--yes"]);
    assert!(exists("configmap", Some(n), "a"), "{}\n{}", run.stdout, run.stderr);
    assert!(exists("configmap", Some(n), "b"), "{}\n{}", run.stdout, run.stderr);
    assert!(exists("secret", Some(n), "set"), "{}", run.stderr);
    // Membership review 6, a minor: the copy is named once, not by every path that meets it.
    let told = run
        .stderr
        .matches("a copy of another ApplySet parent is not a parent")
        .count();
    assert_eq!(told, 1, "{}", run.stderr);
}

/// Adversarial review, finding 1: a Kustomization that builds with `spec.namePrefix` (or
/// `nameSuffix`, `patches`, `components`, `postBuild`) applies names `-f` does not reproduce
/// (fluxcd/pkg `kustomize/kustomize_generator.go` `GenerateManifest`): compared as written,
/// everything it applied would be an orphan. Refused (exit 4), nothing deleted.
#[test]
fn a_kustomization_that_renames_what_it_builds_is_not_compared_with_raw_files() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("prefix-flux");
    let app = Namespace::new("prefix-app");
    let (f, a) = (&flux.0, &app.0);
    // A name of its own: `-l` below selects every stack of that name in the cluster.
    let ks = unique("apps");
    let labels = flux_labels(&ks, f);
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: prod-web, namespace: {a}, labels: {labels}}}\n",
        kustomization(&ks, f, "prune: true, namePrefix: prod-"),
    ));
    set_flux_inventory(&ks, f, &[format!("{a}_prod-web__ConfigMap")]);
    let repo = temp_file(
        "web.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {a}}}\n"),
    );
    let tracker = format!("flux={ks}.{f}");
    let selector = format!("kustomize.toolkit.fluxcd.io/name={ks}");
    let repo = repo.to_str().unwrap();
    // Every way to name the stack meets the same rule: --tracker, --inventory (the same record,
    // read by the same function), and -l alone (each stack judged by its record).
    let named: [&[&str]; 3] = [&["--tracker", &tracker], &["--inventory", &tracker], &["-l", &selector]];
    for how in named {
        for command in [&["orphans"][..], &["prune", "--yes"][..]] {
            let run = stack(&[command, &["-A", "-f", repo], how].concat());
            if how[0] == "-l" {
                // The stack is judged unknown: its objects are never orphans.
                assert_eq!(run.code, 0, "{command:?} {how:?}: {}", run.stderr);
            } else {
                assert_eq!(run.code, 4, "{command:?} {how:?}: {}", run.stderr);
            }
            assert!(
                run.stderr.contains("spec.namePrefix"),
                "{command:?} {how:?}: {}",
                run.stderr
            );
            assert!(exists("configmap", Some(a), "prod-web"), "{command:?} {how:?}");
        }
    }
    // What Flux built (`flux build kustomization`), said so with --as-built: compared by name.
    let built = temp_file(
        "built.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: prod-web, namespace: {a}}}\n"),
    );
    let built = built.to_str().unwrap();
    stack(&["orphans", "-A", "--inventory", &tracker, "-f", built, "--as-built"]).expect_code(0);
    stack(&["orphans", "-A", "--inventory", &tracker, "-f", repo, "--as-built"]).expect_code(1);
    assert!(exists("configmap", Some(a), "prod-web"));
}

/// Item 4, for a record kept beside its tracking object: a real `kpt live apply` of `slow`
/// (held by a finalizer, depends on `kept`) and `kept`; while the teardown waits for `slow`,
/// `kept` leaves the ResourceGroup's `spec.resources` (kpt would no longer delete it:
/// kubernetes-sigs/cli-utils `pkg/apply/prune` deletes only inventory entries). The re-check
/// reads the inventory again, with the function the plan read it with, and drops `kept`.
#[test]
fn the_recheck_reads_a_kpt_inventory_again() {
    let _logs = start();
    ensure_resource_group();
    let ns = Namespace::new("kpt-recheck");
    let n = &ns.0;
    let dir = write_files(&[
        (
            "slow.yaml",
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {n}\n  finalizers: [stack-test.example.com/hold]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/kept}}\n"
            ),
        ),
        (
            "kept.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {n}}}\n"),
        ),
    ]);
    let id = unique("kpt-id");
    kpt_live_apply(&dir, n, &id, true);

    let mut child = spawn_stack(&["prune", "-n", n, "resourcegroup/inventory", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", n, "slow")
    });
    let only_slow =
        format!(r#"{{"spec":{{"resources":[{{"group":"","kind":"ConfigMap","name":"slow","namespace":"{n}"}}]}}}}"#);
    let patched = kubectl(&[
        "patch",
        "resourcegroup",
        "inventory",
        "-n",
        n,
        "--type",
        "merge",
        "-p",
        &only_slow,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    release_finalizers("configmap/slow", n);
    let run = finish(child);
    assert_eq!(run.code, 5, "dropped by the re-check:\n{}", run.stderr);
    assert!(run.stderr.contains("dropped: ConfigMap/"), "{}", run.stderr);
    assert!(run.stderr.contains("(changed since the plan)"), "{}", run.stderr);
    assert!(exists("configmap", Some(n), "kept"), "{}", run.stderr);
    assert!(!exists("configmap", Some(n), "slow"), "{}", run.stderr);
}

/// Review finding F1: a Kustomization its user suspended deletes nothing when it is deleted
/// (fluxcd/kustomize-controller `finalizerShouldDeleteResources`: `if obj.Spec.Suspend { return
/// false }`): its teardown keeps its members and says why.
#[test]
fn a_stack_its_user_suspended_keeps_its_members() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("susp");
    let f = &flux.0;
    let labels = flux_labels("susp", f);
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {f}, labels: {labels}}}\n",
        kustomization("susp", f, "prune: true, suspend: true"),
    ));
    record_flux_inventories(f);
    let run = stack(&["prune", "-n", f, "kustomization/susp", "--yes"]);
    assert!(exists("configmap", Some(f), "a"), "{}", run.stderr);
    assert!(run.stderr.contains("spec.suspend=true"), "{}", run.stderr);
}

/// Review finding F5: the Kustomization's `status.inventory` removed while an earlier wave waits
/// says nothing any more of what Flux would delete (it deletes nothing without one): the re-check
/// drops its members instead of letting the labels decide.
#[test]
fn a_record_gone_since_the_plan_drops_its_members() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("gone-rec");
    let f = &flux.0;
    let labels = flux_labels("rec", f);
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slow\n  namespace: {f}\n  labels: {labels}\n  finalizers: [stack-test.example.com/hold]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/kept}}\n",
        kustomization("rec", f, "prune: true"),
    ));
    let inventory = format!(
        r#"{{"status":{{"inventory":{{"entries":[{{"id":"{f}_kept__ConfigMap","v":"v1"}},{{"id":"{f}_slow__ConfigMap","v":"v1"}}]}}}}}}"#
    );
    let recorded = kubectl(&[
        "patch",
        "kustomization",
        "rec",
        "-n",
        f,
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        &inventory,
    ]);
    assert_eq!(recorded.code, 0, "{}", recorded.stderr);
    let mut child = spawn_stack(&["prune", "-n", f, "kustomization/rec", "--yes", "--timeout", "60s"]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", f, "slow")
    });
    let removed = kubectl(&[
        "patch",
        "kustomization",
        "rec",
        "-n",
        f,
        "--subresource",
        "status",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/status/inventory"}]"#,
    ]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    release_finalizers("configmap/slow", f);
    let run = finish(child);
    assert_eq!(run.code, 5, "dropped by the re-check:\n{}", run.stderr);
    assert!(
        // The one record model: a Kustomization that records no status.inventory now is a
        // record of nothing (`noInventory`), on the re-check as in the plan.
        run.stderr.contains("records no status.inventory: kustomize-controller deletes nothing without an inventory it can read (changed since the plan)"),
        "{}",
        run.stderr
    );
    assert!(exists("configmap", Some(f), "kept"), "{}", run.stderr);
}

/// Property finding F1 (issue 24), on a real producer: `kpt live apply` records `shared` and
/// `solo`; `shared` also carries the marks of a Flux stack (`other`). An orphan prune of the kpt
/// inventory with a desired set that lacks both deletes `solo` only: whether Flux would prune
/// `shared` is unknown (its desired set was not given), so the keep chain's "other stacks" rule
/// keeps it and names the other mark.
#[test]
fn an_orphan_prune_of_one_stack_leaves_what_another_stack_marks_too() {
    let _logs = start();
    ensure_resource_group();
    ensure_flux_crds();
    let ns = Namespace::new("kpt-shared");
    let n = &ns.0;
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}}}\n");
    let dir = write_files(&[("shared.yaml", &cm("shared")), ("solo.yaml", &cm("solo"))]);
    let id = unique("kpt-id");
    kpt_live_apply(&dir, n, &id, true);
    apply(&kustomization("other", n, ""));
    let labelled = kubectl(&[
        "label",
        "configmap",
        "shared",
        "-n",
        n,
        "kustomize.toolkit.fluxcd.io/name=other",
        &format!("kustomize.toolkit.fluxcd.io/namespace={n}"),
    ]);
    assert_eq!(labelled.code, 0, "{}", labelled.stderr);
    let desired = write_files(&[("new.yaml", &cm("new"))]);
    let desired = desired.to_str().unwrap();
    let tracker = format!("kpt={id}");
    let report = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        desired,
        "-o",
        "json",
        "--show-skipped",
    ])
    .expect_code(1); // orphans found
    let document: serde_json::Value = serde_json::from_str(&report.stdout).expect("orphans -o json");
    let names = |key: &str| -> Vec<String> {
        document[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names("orphans"), ["solo"], "{}", report.stdout);
    let skipped = document["skipped"].as_array().cloned().unwrap_or_default();
    assert!(
        skipped.iter().any(|e| e["name"] == "shared"
            && e["reason"] == "trackedElsewhere"
            && e["mark"] == format!("flux:{n}/other")),
        "{}",
        report.stdout
    );
    stack(&["prune", "-n", n, "--tracker", &tracker, "-f", desired, "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "solo"));
    assert!(exists("configmap", Some(n), "shared"));
}

/// Review findings (this round) F1 and F4: a Kustomization that applies to another cluster
/// (`spec.kubeConfig`: kustomize-controller `finalize` deletes there) or that its user
/// suspended (not reconciled: nothing is pruned) prunes nothing here, on either path: its
/// teardown keeps the local objects that carry its marks, and an orphan prune of it is
/// refused (exit 4), however it is named.
#[test]
fn a_stack_that_prunes_elsewhere_or_not_at_all_prunes_nothing_here() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("elsewhere");
    let n = &ns.0;
    let member = |name: &str, stack: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {}}}\n---\n",
            flux_labels(stack, n)
        )
    };
    apply(&format!(
        "{}{}{}{}",
        kustomization(
            "remote",
            n,
            "prune: true, kubeConfig: {secretRef: {name: prod-kubeconfig}}"
        ),
        kustomization("paused", n, "prune: true, suspend: true"),
        member("remote-cm", "remote"),
        member("paused-cm", "paused"),
    ));
    set_flux_inventory("remote", n, &[format!("{n}_remote-cm__ConfigMap")]);
    set_flux_inventory("paused", n, &[format!("{n}_paused-cm__ConfigMap")]);
    let desired = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    let desired = desired.to_str().unwrap();
    for (stack_name, why) in [("remote", "spec.kubeConfig"), ("paused", "spec.suspend=true")] {
        let tracker = format!("flux={stack_name}.{n}");
        for how in [["--tracker", &tracker], ["--inventory", &tracker]] {
            let run = stack(&[&["prune", "-n", n, "-f", desired, "--yes"][..], &how[..]].concat());
            assert_eq!(run.code, 4, "{how:?}: {}", run.stderr);
            assert!(run.stderr.contains(why), "{how:?}: {}", run.stderr);
        }
    }
    let torn = stack(&["prune", "-n", n, "kustomization/remote", "--yes"]).expect_code(0);
    assert!(torn.stderr.contains("applies to another cluster"), "{}", torn.stderr);
    assert!(exists("configmap", Some(n), "remote-cm"), "{}", torn.stderr);
    assert!(exists("configmap", Some(n), "paused-cm"));
}

/// Review findings (this round) F3 and F5: a record with an entry its tool cannot read is a
/// record that holds nothing, on every path. kustomize-controller's `inventory.List` fails on a
/// malformed `status.inventory` entry (fluxcd/kustomize-controller#901), so its `finalize`
/// deletes nothing; cli-utils' `ConfigMap.Load` fails on a key that does not parse, so neither
/// `kpt live apply` nor `destroy` acts on any of it. Teardowns keep every member; an orphan prune
/// of the kpt inventory is refused (exit 4).
#[test]
fn a_record_its_tool_cannot_read_holds_nothing() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("unreadable");
    let n = &ns.0;
    let labelled = |name: &str, labels: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {labels}}}\n---\n")
    };
    let id = unique("kpt-id");
    let annotated = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: {id}}}}}\n---\n")
    };
    apply(&format!(
        "{}{}{}{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: inv, namespace: {n}, labels: {{cli-utils.sigs.k8s.io/inventory-id: {id}}}}}\ndata: {{\"{n}_kpt-a__ConfigMap\": \"\", garbage: \"\"}}\n",
        kustomization("bad", n, "prune: true"),
        labelled("flux-a", &flux_labels("bad", n)),
        labelled("flux-b", &flux_labels("bad", n)),
        annotated("kpt-a"),
    ));
    set_flux_inventory("bad", n, &[format!("{n}_flux-a__ConfigMap"), "garbage".to_string()]);
    let torn = stack(&["prune", "-n", n, "kustomization/bad", "--yes"]).expect_code(0);
    assert!(torn.stderr.contains("unreadable"), "{}", torn.stderr);
    let torn = stack(&["prune", "-n", n, "configmap/inv", "--yes"]).expect_code(0);
    assert!(torn.stderr.contains("garbage"), "{}", torn.stderr);
    for name in ["flux-a", "flux-b", "kpt-a"] {
        assert!(exists("configmap", Some(n), name), "{name}");
    }
    let desired = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: inv, namespace: {n}, labels: {{cli-utils.sigs.k8s.io/inventory-id: {id}}}}}\ndata: {{\"{n}_kpt-a__ConfigMap\": \"\", garbage: \"\"}}\n"
    ));
    let tracker = format!("kpt={id}");
    let run = stack(&[
        "prune",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        desired.to_str().unwrap(),
        "--yes",
    ]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("garbage"), "{}", run.stderr);
    assert!(exists("configmap", Some(n), "kpt-a"));
}

/// Review finding (this round, second review) 2: a kpt inventory that is a member of a Flux
/// stack is deleted with it, and deleting an inventory object deletes nothing else (cli-utils
/// prunes only when `kpt live apply`/`destroy` runs): the teardown of the Kustomization keeps the
/// inventory's members. Named itself, the inventory's teardown takes them, as `kpt live destroy`.
#[test]
fn a_tracking_object_deleted_as_a_member_leaves_its_own_members() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("nested");
    let n = &ns.0;
    let id = unique("kpt-id");
    let ks = unique("parent");
    let flux = flux_labels(&ks, n);
    let flux = flux.trim_start_matches('{').trim_end_matches('}');
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: inv, namespace: {n}, labels: {{cli-utils.sigs.k8s.io/inventory-id: {id}, {flux}}}}}\ndata: {{\"{n}_app__ConfigMap\": \"\"}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app, namespace: {n}, annotations: {{config.k8s.io/owning-inventory: {id}}}}}\n",
        kustomization(&ks, n, "prune: true"),
    ));
    set_flux_inventory(&ks, n, &[format!("{n}_inv__ConfigMap")]);
    let torn = stack(&["prune", "-n", n, &format!("kustomization/{ks}"), "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "inv"), "{}", torn.stderr);
    assert!(exists("configmap", Some(n), "app"), "{}", torn.stderr);
    assert!(
        torn.stderr.contains("deleting it deletes nothing else"),
        "{}",
        torn.stderr
    );
}

/// Review finding (this round, second review) 3: kubectl prunes with an ApplySet parent only when
/// its `applyset.kubernetes.io/tooling` is kubectl's (kubernetes/kubectl `applyset.go`
/// `fetchParent`); a parent another tool manages is refused by kubectl (the oracle here) and by
/// every path of kubectl-stack: the orphan prune is refused, the teardown keeps the members.
#[test]
fn an_applyset_another_tool_manages_is_not_pruned_with_kubectls_rules() {
    let _logs = start();
    let ns = Namespace::new("aset-tool");
    let n = &ns.0;
    apply_applyset(
        n,
        "set",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
    );
    let annotated = kubectl(&[
        "annotate",
        "secret",
        "set",
        "-n",
        n,
        "--overwrite",
        "applyset.kubernetes.io/tooling=someothertool/v1",
    ]);
    assert_eq!(annotated.code, 0, "{}", annotated.stderr);
    let only_a = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
    let oracle = kubectl_with_stdin(
        &[
            "apply",
            "-n",
            n,
            "--prune",
            "--applyset=set",
            "--dry-run=server",
            "-f",
            "-",
        ],
        Some(only_a),
    );
    assert_ne!(oracle.code, 0, "kubectl accepted it: {}", oracle.stdout);
    let desired = temp_file("only-a.yaml", only_a);
    let desired = desired.to_str().unwrap();
    let run = stack(&[
        "prune",
        "-n",
        n,
        "--inventory",
        "applyset=secrets/set",
        "-f",
        desired,
        "--yes",
    ]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("someothertool"), "{}", run.stderr);
    stack(&["prune", "-n", n, "secret/set", "--yes"]).expect_code(0);
    assert!(exists("configmap", Some(n), "a"));
    assert!(exists("configmap", Some(n), "b"));
}

/// Second membership round, finding 1: Flux v1 tells objects apart by `<namespace>:<kind>/<name>`,
/// without a group (fluxcd/flux 1.x `pkg/cluster/kubernetes/sync.go` `collectGarbage`: a cluster
/// object is kept when `checksums[resourceID]` has an entry; `pkg/resource/id.go` `MakeID`). A
/// `Certificate` in git under a new group keeps the live one of the old group, as cert-manager's
/// move from `certmanager.k8s.io` to `cert-manager.io` left them; one git no longer holds goes, with
/// the tracker the user named reaching the plan's keep chain (before, the plan asked with none and
/// kept it as "gc mark not verified").
#[test]
fn flux_v1_compares_the_desired_set_without_the_group() {
    let _logs = start();
    let ns = Namespace::new("fluxv1");
    let n = &ns.0;
    let suffix = unique("g");
    let (old, new) = (format!("old-{suffix}.example.com"), format!("new-{suffix}.example.com"));
    let crd = |group: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: certificates.{group}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{kind: Certificate, plural: certificates, singular: certificate, listKind: CertificateList}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n---\n"
        )
    };
    apply(&format!("{}{}", crd(&old), crd(&new)));
    wait_established(&["crd", &format!("certificates.{old}")], &format!("certificates.{old}"));
    wait_established(&["crd", &format!("certificates.{new}")], &format!("certificates.{new}"));
    let marked = |name: &str| {
        let id = kubectl_stack::model::trackers::flux_v1_resource_id(Some(n), "Certificate", name);
        let mark = kubectl_stack::model::trackers::flux_v1_gc_mark("git", &id);
        format!(
            "apiVersion: {old}/v1\nkind: Certificate\nmetadata: {{name: {name}, namespace: {n}, labels: {{fluxcd.io/sync-gc-mark: '{mark}'}}}}\n---\n"
        )
    };
    apply(&format!("{}{}", marked("tls"), marked("stale")));
    let desired = temp_file(
        "git.yaml",
        &format!("apiVersion: {new}/v1\nkind: Certificate\nmetadata: {{name: tls, namespace: {n}}}\n"),
    );
    let run = stack(&[
        "prune",
        "-n",
        n,
        "--tracker",
        "flux-v1=git",
        "-f",
        desired.to_str().unwrap(),
        "--yes",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        exists(&format!("certificates.{old}"), Some(n), "tls"),
        "git holds {n}:certificate/tls: Flux v1 keeps it\n{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        !exists(&format!("certificates.{old}"), Some(n), "stale"),
        "git no longer holds it: Flux v1 deletes it\n{}\n{}",
        run.stdout,
        run.stderr
    );
    for group in [old, new] {
        let _ = kubectl(&["delete", "crd", &format!("certificates.{group}"), "--wait=false"]);
    }
}

/// Second membership round, finding 2: a Kustomization whose `spec.serviceAccountName` names a
/// ServiceAccount that does not exist prunes nothing (kustomize-controller `finalize`: "skiping
/// pruning, failed to find account to impersonate"; fluxcd/pkg `CanImpersonate`). Its teardown
/// keeps its members, and an orphan prune against it is refused; with the account present, the
/// same teardown deletes them.
#[test]
fn a_kustomization_that_cannot_impersonate_prunes_nothing() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("nosa");
    let n = &ns.0;
    let member = |name: &str, stack: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {}}}\n---\n",
            flux_labels(stack, n)
        )
    };
    apply(&format!(
        "{}{}{}{}",
        kustomization("ghost", n, "prune: true, serviceAccountName: deployer"),
        kustomization("real", n, "prune: true, serviceAccountName: builder"),
        member("ghost-cm", "ghost"),
        member("real-cm", "real"),
    ));
    // An account that exists and may delete ConfigMaps here (membership review 6, F4: one that
    // may not keeps them).
    apply(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: builder, namespace: {n}}}\n{}",
        may_delete_config_maps(n, "builder", "")
    ));
    set_flux_inventory("ghost", n, &[format!("{n}_ghost-cm__ConfigMap")]);
    set_flux_inventory("real", n, &[format!("{n}_real-cm__ConfigMap")]);
    let desired = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    let tracker = format!("flux=ghost.{n}");
    let refused = stack(&[
        "prune",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        desired.to_str().unwrap(),
        "--yes",
    ]);
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert!(refused.stderr.contains("does not exist"), "{}", refused.stderr);
    let torn = stack(&["prune", "-n", n, "kustomization/ghost", "--yes"]).expect_code(0);
    assert!(
        torn.stderr.contains("cannot impersonate"),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
    assert!(exists("configmap", Some(n), "ghost-cm"), "{}", torn.stderr);
    assert!(!exists("kustomizations.kustomize.toolkit.fluxcd.io", Some(n), "ghost"));
    let control = stack(&["prune", "-n", n, "kustomization/real", "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "real-cm"), "{}", control.stderr);
}

/// A Role and RoleBinding in `namespace` letting ServiceAccount `account` delete ConfigMaps
/// (`names`: a YAML list of `resourceNames`, or "" for all of them).
fn may_delete_config_maps(namespace: &str, account: &str, names: &str) -> String {
    let names = match names {
        "" => String::new(),
        names => format!(", resourceNames: {names}"),
    };
    format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {account}-delete, namespace: {namespace}}}\nrules: [{{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list, delete]{names}}}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {account}-delete, namespace: {namespace}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {account}-delete}}\nsubjects: [{{kind: ServiceAccount, name: {account}, namespace: {namespace}}}]\n"
    )
}

/// Membership review 6, F4: a Kustomization's `spec.serviceAccountName` exists but may delete
/// only ConfigMap `allowed`. kustomize-controller impersonates it to prune and to finalize, so
/// its delete of `denied` fails and `denied` stays: the teardown keeps it (toolWouldKeep, the
/// account named), and an orphan search against the stack calls it no orphan.
#[test]
fn a_member_the_impersonated_account_may_not_delete_is_kept() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("sa-limited");
    let n = &ns.0;
    let member = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}, labels: {}}}\n---\n",
            flux_labels("lim", n)
        )
    };
    apply(&format!(
        "{}{}{}apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: deployer, namespace: {n}}}\n{}",
        kustomization("lim", n, "prune: true, serviceAccountName: deployer"),
        member("allowed"),
        member("denied"),
        may_delete_config_maps(n, "deployer", "[allowed]")
    ));
    record_flux_inventory("lim", n);
    let desired = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    let tracker = format!("flux=lim.{n}");
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        desired.to_str().unwrap(),
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(found.stdout, "configmap/allowed\n", "{}", found.stderr);
    let torn = stack(&["prune", "-n", n, "kustomization/lim", "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "allowed"), "{}", torn.stderr);
    assert!(
        exists("configmap", Some(n), "denied"),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
    let said = format!("system:serviceaccount:{n}:deployer (spec.serviceAccountName) may not delete");
    assert!(
        torn.stderr.contains(&said) || torn.stdout.contains(&said),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
}

/// Issue 24 (membership review 7, what was left): a HelmRelease's `spec.serviceAccountName` is
/// impersonated by helm-controller for `helm uninstall` and `helm upgrade` (fluxcd/helm-controller
/// `internal/controller/helmrelease_controller.go` `buildRESTClientGetter`:
/// `kube.WithImpersonate(obj.Spec.ServiceAccountName, obj.GetNamespace())`), and Helm's deletes go
/// on past one that is forbidden (helm/helm `pkg/kube/client.go` `Delete`: "Collect the error and
/// continue on"). Its account here may delete only ConfigMap `allowed`: the teardown keeps
/// `denied` (toolWouldKeep, the account named), an orphan search against the stack calls it no
/// orphan; and a HelmRelease whose account does not exist uninstalls nothing
/// (`reconcileReleaseDeletion` skips the uninstall), so its teardown keeps its member.
#[test]
fn a_helmrelease_member_its_impersonated_account_may_not_delete_is_kept() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("hr-sa");
    let n = &ns.0;
    let member = |name: &str, release: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  labels: {{helm.toolkit.fluxcd.io/name: {release}, helm.toolkit.fluxcd.io/namespace: {n}, app.kubernetes.io/managed-by: Helm}}\n  annotations: {{meta.helm.sh/release-name: {release}, meta.helm.sh/release-namespace: {n}}}\n"
        )
    };
    let release = |name: &str, account: &str| {
        format!(
            "---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: {name}, namespace: {n}}}\nspec: {{serviceAccountName: {account}}}\n"
        )
    };
    apply(&format!(
        "{}{}{}{}{}---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: deployer, namespace: {n}}}\n{}",
        release("lim", "deployer"),
        release("ghost", "nobody"),
        member("allowed", "lim"),
        member("denied", "lim"),
        member("ghost-cm", "ghost"),
        may_delete_config_maps(n, "deployer", "[allowed]")
    ));
    let manifest = |names: &[&str]| {
        names
            .iter()
            .map(|name| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {n}}}\n"))
            .collect::<String>()
    };
    helm_release(n, "lim", &manifest(&["allowed", "denied"]));
    helm_release(n, "ghost", &manifest(&["ghost-cm"]));
    set_helm_release_status("lim", n, "lim", n);
    set_helm_release_status("ghost", n, "ghost", n);
    let desired = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    let tracker = format!("flux-helm=lim.{n}");
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        desired.to_str().unwrap(),
        "-o",
        "name",
    ])
    .expect_code(1);
    assert_eq!(found.stdout, "configmap/allowed\n", "{}", found.stderr);
    let torn = stack(&["prune", "-n", n, "helmrelease/lim", "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "allowed"), "{}", torn.stderr);
    assert!(
        exists("configmap", Some(n), "denied"),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
    let said = format!("system:serviceaccount:{n}:deployer (spec.serviceAccountName) may not delete");
    assert!(
        torn.stderr.contains(&said) || torn.stdout.contains(&said),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
    assert!(
        torn.stderr.contains("helm-controller, impersonating it"),
        "{}",
        torn.stderr
    );
    let ghost = stack(&["prune", "-n", n, "helmrelease/ghost", "--yes"]).expect_code(0);
    assert!(
        exists("configmap", Some(n), "ghost-cm"),
        "{}\n{}",
        ghost.stdout,
        ghost.stderr
    );
    assert!(
        ghost.stderr.contains("helm-controller cannot impersonate it"),
        "{}",
        ghost.stderr
    );
}

/// Issue 24 (membership review 7, what was left): a record naming an object at a version the
/// cluster no longer serves, while it serves the kind at another (`v1beta1` removed, `v1`
/// served). kustomize-controller deletes each inventory entry at its recorded version through
/// fluxcd/pkg `ssa` `DeleteAll` (`ssa/manager_delete.go`: the GET of an unmappable entry fails,
/// "query failed", and the loop goes on): that member stays, the others go. Helm builds a
/// release's whole manifest with a RESTMapper at each object's own version (helm/helm
/// `pkg/kube/client.go` `Build`): one removed version fails the build, and neither `helm upgrade`
/// ("current release manifest contains removed kubernetes api(s)") nor `helm uninstall` ("unable to
/// build kubernetes objects for delete") deletes anything of the release.
#[test]
fn a_record_naming_a_version_no_longer_served_deletes_what_its_tool_would() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("vers");
    let n = &ns.0;
    let group = format!("{}.example.com", unique("vers"));
    apply(&format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: widgets.{group}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}\n  versions:\n  - name: v1beta1\n    served: false\n    storage: false\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n  - name: v1\n    served: true\n    storage: true\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
    ));
    wait_established(&["crd", &format!("widgets.{group}")], &format!("widgets.{group}"));
    let flux = flux_labels("ks", n);
    let helm = format!("{{helm.toolkit.fluxcd.io/name: web, helm.toolkit.fluxcd.io/namespace: {n}, app.kubernetes.io/managed-by: Helm}}");
    let helm_notes = format!("{{meta.helm.sh/release-name: web, meta.helm.sh/release-namespace: {n}}}");
    apply(&format!(
        "{ks}apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: old, namespace: {n}, labels: {flux}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm, namespace: {n}, labels: {flux}}}\n---\napiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: hw, namespace: {n}, labels: {helm}, annotations: {helm_notes}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hcm, namespace: {n}, labels: {helm}, annotations: {helm_notes}}}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: web, namespace: {n}}}\nspec: {{}}\n",
        ks = kustomization("ks", n, "prune: true"),
    ));
    patch_status(
        "kustomization",
        "ks",
        n,
        &format!(
            r#"{{"status":{{"inventory":{{"entries":[{{"id":"{n}_old_{group}_Widget","v":"v1beta1"}},{{"id":"{n}_cm__ConfigMap","v":"v1"}}]}}}}}}"#
        ),
    );
    helm_release(
        n,
        "web",
        &format!("---\napiVersion: {group}/v1beta1\nkind: Widget\nmetadata: {{name: hw, namespace: {n}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hcm, namespace: {n}}}\n"),
    );
    set_helm_release_status("web", n, "web", n);
    let desired = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    let orphans = |tracker: &str| {
        stack(&[
            "orphans",
            "-n",
            n,
            "--tracker",
            tracker,
            "-f",
            desired.to_str().unwrap(),
            "-o",
            "name",
        ])
    };
    // Flux: the entry at v1beta1 is no orphan; the ConfigMap is.
    let found = orphans(&format!("flux=ks.{n}")).expect_code(1);
    assert_eq!(found.stdout, "configmap/cm\n", "{}", found.stderr);
    // Helm: an upgrade fails to build the old manifest and prunes nothing.
    let found = orphans(&format!("helm=web.{n}"));
    assert_eq!(found.stdout, "", "{}", found.stderr);
    assert!(
        found.stderr.contains(&format!("{group}/v1beta1 Widget")),
        "{}",
        found.stderr
    );
    // Teardowns: kustomize-controller deletes the ConfigMap and cannot map the Widget; helm
    // uninstall builds nothing and deletes nothing.
    let torn = stack(&["prune", "-n", n, "kustomization/ks", "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "cm"), "{}", torn.stderr);
    assert!(
        exists(&format!("widgets.{group}"), Some(n), "old"),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
    assert!(torn.stderr.contains("no longer serves"), "{}", torn.stderr);
    let torn = stack(&["prune", "-n", n, "helmrelease/web", "--yes"]).expect_code(0);
    assert!(exists("configmap", Some(n), "hcm"), "{}\n{}", torn.stdout, torn.stderr);
    assert!(
        exists(&format!("widgets.{group}"), Some(n), "hw"),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
    let _ = kubectl(&["delete", "crd", &format!("widgets.{group}"), "--wait=false"]);
}

/// Second membership round, finding 3: `status.inventory: {}` is a record that holds nothing
/// (kustomize-controller `finalizerShouldDeleteResources`: no entries, nothing deleted), never a
/// missing record that lets the labels decide: the teardown keeps the labelled ConfigMap, and an
/// orphan prune calls it no orphan.
#[test]
fn an_empty_inventory_owns_nothing() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("emptyinv");
    let n = &ns.0;
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: labelled, namespace: {n}, labels: {}}}\n",
        kustomization("empty", n, "prune: true"),
        flux_labels("empty", n)
    ));
    let patched = kubectl(&[
        "patch",
        "kustomization",
        "empty",
        "-n",
        n,
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"inventory":{}}}"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    assert_eq!(field("kustomization", n, "empty", ".status"), r#"{"inventory":{}}"#);
    let desired = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    let tracker = format!("flux=empty.{n}");
    let found = stack(&[
        "orphans",
        "-n",
        n,
        "--tracker",
        &tracker,
        "-f",
        desired.to_str().unwrap(),
        "-o",
        "name",
    ]);
    assert_eq!(found.stdout, "", "{}", found.stderr);
    let torn = stack(&["prune", "-n", n, "kustomization/empty", "--yes"]).expect_code(0);
    assert!(
        exists("configmap", Some(n), "labelled"),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
    assert!(
        torn.stdout.contains("not in") || torn.stderr.contains("not in"),
        "{}\n{}",
        torn.stdout,
        torn.stderr
    );
}

/// Second membership round, finding 4: under a Kustomization without `spec.targetNamespace`, a
/// namespaced manifest without `metadata.namespace` fails kustomize-controller's apply ("namespace
/// not specified": fluxcd/pkg `ssa/errors.go`), and Flux prunes nothing. The desired set is
/// refused (exit 4, the manifest named), never read as if in the context's namespace: the live
/// object of that name in another namespace is not called an orphan and deleted.
#[test]
fn a_manifest_without_namespace_is_refused_where_flux_gives_none() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("nons");
    let app = Namespace::new("nonsapp");
    let (f, a) = (&flux.0, &app.0);
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {a}, labels: {}}}\n",
        kustomization("apps", f, "prune: true"),
        flux_labels("apps", f)
    ));
    set_flux_inventory("apps", f, &[format!("{a}_web__ConfigMap")]);
    let desired = temp_file("web.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n");
    let tracker = format!("flux=apps.{f}");
    for how in ["--tracker", "--inventory"] {
        // Across namespaces: read as if in the context's namespace, `web` in `a` would be an orphan.
        let run = stack(&["prune", "-A", how, &tracker, "-f", desired.to_str().unwrap(), "--yes"]);
        assert_eq!(run.code, 4, "{how}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("web.yaml"), "{how}: {}", run.stderr);
        assert!(run.stderr.contains("namespace not specified"), "{how}: {}", run.stderr);
        assert!(exists("configmap", Some(a), "web"), "{how}: {}", run.stderr);
    }
    // Written with its namespace, the same object is desired.
    let placed = temp_file(
        "placed.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {a}}}\n"),
    );
    let run = stack(&[
        "prune",
        "-n",
        f,
        "--tracker",
        &tracker,
        "-f",
        placed.to_str().unwrap(),
        "--yes",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(exists("configmap", Some(a), "web"));
}

/// Issue 24 (adversarial review: one record per stack, asked by every path): Helm release `hr`
/// is owned by Flux HelmRelease `hr` (its `status.storageNamespace` and `status.history` record
/// it: fluxcd/helm-controller `api/v2` `HelmReleaseStatus`, `internal/action/verify.go`
/// `VerifySnapshot`), whose `spec.serviceAccountName` may delete ConfigMaps only in its own
/// namespace. Whichever preset names the release (`--tracker flux-helm=`, `--tracker helm=`,
/// `--inventory helm=`), it is the HelmRelease's record: its marks are one stack, its account's
/// denials keep what helm-controller could not delete, and once the HelmRelease is suspended
/// nothing of it is an orphan (only helm-controller upgrades it). A teardown lists every member
/// of the record it does not delete under Kept, with why.
#[test]
fn a_helm_release_a_helmrelease_owns_is_its_record_whichever_preset_names_it() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("hr-own");
    let other = Namespace::new("hr-own-b");
    let (n, b) = (&ns.0, &other.0);
    let cluster_role = format!("{n}-cr");
    let _cluster_role = DeleteOnDrop("clusterrole", cluster_role.clone());
    let meta = |name: &str, namespace: Option<&str>| {
        let namespace = namespace.map(|ns| format!("\n  namespace: {ns}")).unwrap_or_default();
        format!(
            "metadata:\n  name: {name}{namespace}\n  labels: {{helm.toolkit.fluxcd.io/name: hr, helm.toolkit.fluxcd.io/namespace: {n}, app.kubernetes.io/managed-by: Helm}}\n  annotations: {{meta.helm.sh/release-name: hr, meta.helm.sh/release-namespace: {n}}}\n"
        )
    };
    let objects = format!(
        "---\napiVersion: v1\nkind: ConfigMap\n{}---\napiVersion: v1\nkind: ConfigMap\n{}---\napiVersion: v1\nkind: ConfigMap\n{}---\napiVersion: v1\nkind: Secret\n{}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n{}rules: []\n",
        meta("hcm-ok", Some(n)),
        meta("hcm-gone", Some(n)),
        meta("hcm-other", Some(b)),
        meta("hsec", Some(n)),
        meta(&cluster_role, None),
    );
    apply(&format!(
        "---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: hr, namespace: {n}}}\nspec: {{serviceAccountName: deployer}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: deployer, namespace: {n}}}\n{}{objects}",
        may_delete_config_maps(n, "deployer", "")
    ));
    let manifest = format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hcm-ok, namespace: {n}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hcm-gone, namespace: {n}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hcm-other, namespace: {b}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: hsec, namespace: {n}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {cluster_role}}}\n"
    );
    helm_release(n, "hr", &manifest);
    set_helm_release_status("hr", n, "hr", n);
    let desired = temp_file(
        "desired.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hcm-ok, namespace: {n}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {cluster_role}}}\n"
        ),
    );
    let desired = desired.to_str().unwrap();
    // (1) Both presets name one stack: the same orphan (the account may delete it), the same kept.
    let flux_helm = format!("flux-helm=hr.{n}");
    let helm = format!("helm=hr.{n}");
    for tracker in [&flux_helm, &helm] {
        let found = stack(&["orphans", "-A", "--tracker", tracker, "-f", desired, "-o", "name"]);
        assert_eq!(found.code, 1, "{tracker}: {}\n{}", found.stdout, found.stderr);
        assert!(
            found.stdout.contains("configmap/hcm-gone"),
            "{tracker}: {}",
            found.stdout
        );
        for kept in ["hcm-other", "hsec", "hcm-ok"] {
            assert!(!found.stdout.contains(kept), "{tracker}: {kept} in {}", found.stdout);
        }
    }
    // (2) Suspended, and two of the members no longer carry the HelmRelease's labels: no path
    // calls anything of the release an orphan, and `--inventory helm=` deletes nothing.
    for (kind, name, namespace) in [("configmap", "hcm-other", b), ("secret", "hsec", n)] {
        kubectl_ok(&[
            "label",
            kind,
            name,
            "-n",
            namespace,
            "helm.toolkit.fluxcd.io/name-",
            "helm.toolkit.fluxcd.io/namespace-",
        ]);
    }
    kubectl_ok(&[
        "patch",
        "helmrelease",
        "hr",
        "-n",
        n,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    for tracker in [&flux_helm, &helm] {
        let refused = stack(&["orphans", "-A", "--tracker", tracker, "-f", desired, "-o", "name"]);
        assert_eq!(refused.code, 4, "{tracker}: {}\n{}", refused.stdout, refused.stderr);
        assert!(refused.stderr.contains("suspend"), "{tracker}: {}", refused.stderr);
    }
    let pruned = stack(&["prune", "-A", "--inventory", &helm, "-f", desired, "--yes"]);
    assert_eq!(pruned.code, 4, "{}\n{}", pruned.stdout, pruned.stderr);
    for (kind, name, namespace) in [
        ("configmap", "hcm-other", b),
        ("secret", "hsec", n),
        ("configmap", "hcm-gone", n),
    ] {
        assert!(exists(kind, Some(namespace), name), "{name}: {}", pruned.stderr);
    }
    // (3) The teardown lists every member of the record it does not delete under Kept.
    let planned = stack(&["prune", "-n", n, "helmrelease/hr", "--dry-run=client"]);
    let said = format!("{}\n{}", planned.stdout, planned.stderr);
    for name in ["hcm-other", "hsec"] {
        let line = said
            .lines()
            .find(|line| line.contains(name))
            .unwrap_or_else(|| panic!("{name} not listed: {said}"));
        assert!(
            line.contains("may not delete") || line.contains("suspend"),
            "{name}: {line}\n{said}"
        );
    }
    assert!(exists("configmap", Some(b), "hcm-other"), "{said}");
    assert!(exists("secret", Some(n), "hsec"), "{said}");
}

/// Deletes a cluster-scoped object when dropped, passed or failed (a namespace's objects go
/// with [`Namespace`]).
struct DeleteOnDrop(&'static str, String);

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", self.0, &self.1, "--ignore-not-found", "--wait=false"]);
    }
}

/// Membership review 9, findings 1 to 3: kubectl reads an ApplySet parent's annotations as they
/// are (kubernetes/kubectl `pkg/cmd/apply/applyset.go` `parseKindAnnotation`,
/// `parseNamespacesAnnotation`, `fetchParent`): a group-kind item with a space or an empty item
/// maps to no kind and refuses the prune; `" other"` is not namespace `other`; a parent without
/// its id label is refused. kubectl (the oracle here) refuses or prunes nothing in each case,
/// and so does every path of kubectl-stack.
#[test]
fn an_applyset_parent_is_read_as_kubectl_reads_it() {
    let _logs = start();
    let ns = Namespace::new("aset-raw");
    let other = Namespace::new("aset-raw-other");
    let (n, o) = (&ns.0, &other.0);
    let both = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n";
    let only_a = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
    apply_applyset(n, "set", both);
    let desired = temp_file("aset-raw-only-a.yaml", only_a);
    let desired = desired.to_str().unwrap();
    let annotate = |value: &str| {
        let done = kubectl(&["annotate", "secret", "set", "-n", n, "--overwrite", value]);
        assert_eq!(done.code, 0, "{}", done.stderr);
    };
    let kubectl_prunes_b = || {
        let args = [
            "apply",
            "-n",
            n,
            "--prune",
            "--applyset=set",
            "--dry-run=server",
            "-f",
            "-",
        ];
        let oracle = kubectl_with_stdin(&args, Some(only_a));
        oracle.code == 0 && oracle.stdout.contains("configmap/b pruned")
    };
    for kinds in ["ConfigMap,", " ConfigMap"] {
        annotate(&format!("applyset.kubernetes.io/contains-group-kinds={kinds}"));
        assert!(!kubectl_prunes_b(), "kubectl pruned with {kinds:?}");
        let orphans = stack(&[
            "prune",
            "-n",
            n,
            "--inventory",
            "applyset=secrets/set",
            "-f",
            desired,
            "--yes",
        ]);
        assert!(
            exists("configmap", Some(n), "b"),
            "{kinds:?}: {}\n{}",
            orphans.stdout,
            orphans.stderr
        );
        let teardown = stack(&["prune", "-n", n, "secret/set", "--dry-run"]);
        assert!(
            !teardown.stdout.contains("ConfigMap"),
            "{kinds:?}: {}\n{}",
            teardown.stdout,
            teardown.stderr
        );
    }
    annotate("applyset.kubernetes.io/contains-group-kinds=ConfigMap");
    assert!(kubectl_prunes_b(), "the control case: kubectl prunes b");
    // Members in another namespace, which the parent names with a leading space or after an
    // empty item.
    let id = kubectl(&[
        "get",
        "secret",
        "set",
        "-n",
        n,
        "-o",
        "jsonpath={.metadata.labels.applyset\\.kubernetes\\.io/id}",
    ]);
    assert_eq!(id.code, 0, "{}", id.stderr);
    for name in ["c", "d"] {
        apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {o}, labels: {{applyset.kubernetes.io/part-of: {}}}}}\n",
            id.stdout
        ));
    }
    for namespaces in [format!(" {o}"), format!("{o} "), format!(",{o}")] {
        annotate(&format!("applyset.kubernetes.io/additional-namespaces={namespaces}"));
        let orphans = stack(&[
            "orphans",
            "-A",
            "-n",
            n,
            "--inventory",
            "applyset=secrets/set",
            "-f",
            desired,
        ]);
        assert!(
            !orphans.stdout.contains(o.as_str()),
            "{namespaces:?}: {}\n{}",
            orphans.stdout,
            orphans.stderr
        );
        let teardown = stack(&["prune", "-n", n, "secret/set", "--dry-run"]);
        assert!(
            !teardown.stdout.contains(o.as_str()),
            "{namespaces:?}: {}\n{}",
            teardown.stdout,
            teardown.stderr
        );
    }
    // A parent without its id label: kubectl refuses it ("does not have required label").
    annotate("applyset.kubernetes.io/additional-namespaces-");
    let unlabelled = kubectl(&["label", "secret", "set", "-n", n, "applyset.kubernetes.io/id-"]);
    assert_eq!(unlabelled.code, 0, "{}", unlabelled.stderr);
    assert!(!kubectl_prunes_b(), "kubectl pruned with an unlabelled parent");
    let run = stack(&[
        "prune",
        "-n",
        n,
        "--inventory",
        "applyset=secrets/set",
        "-f",
        desired,
        "--yes",
    ]);
    assert_ne!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("has no applyset.kubernetes.io/id label"),
        "{}",
        run.stderr
    );
    assert!(exists("configmap", Some(n), "b"), "{}", run.stderr);
}

/// Membership review 9, findings 4 and R1: Helm reads the keep policy from each document's own
/// head (helm/helm `pkg/releaseutil/manifest.go` `SimpleHead`, `pkg/action/resource_policy.go`
/// `filterManifestsToKeep`), so a `List` marked keep keeps every item; the plan says why, not
/// "not in Helm release".
#[test]
fn a_helm_list_marked_keep_keeps_its_items() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("hr-list");
    let n = &ns.0;
    helmrelease_web_with(n, &["inlist", "plain"]);
    helm_release(
        n,
        "web",
        &format!(
            "---\napiVersion: v1\nkind: List\nmetadata: {{annotations: {{helm.sh/resource-policy: keep}}}}\nitems:\n- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: inlist, namespace: {n}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain, namespace: {n}}}\n"
        ),
    );
    set_helm_release_status("web", n, "web", n);
    let run = stack(&["prune", "-n", n, "helmrelease/web", "--yes"]).expect_code(0);
    assert!(!exists("configmap", Some(n), "plain"), "{}", run.stderr);
    assert!(exists("configmap", Some(n), "inlist"), "{}", run.stderr);
    assert!(run.stderr.contains("helm.sh/resource-policy: keep"), "{}", run.stderr);
    assert!(!run.stderr.contains("inlist (not in Helm release"), "{}", run.stderr);
}

/// Membership review 19, F3: with `--as-built`, the re-check holds what the Kustomization builds
/// with (the values of `spec.namePrefix`, `spec.patches`, ...), not only which of those fields
/// are set. A prefix changed from `a-` to `b-` while an earlier wave waits makes Flux build
/// `b-kept`, which the plan's desired set (built with `a-`) does not hold: the later wave is
/// dropped. Red before: the same fields were set, so nothing looked changed, and `b-kept` went.
#[test]
fn the_recheck_holds_the_values_a_kustomization_builds_with() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("asbuilt-re");
    let f = &flux.0;
    let labels = flux_labels("pol", f);
    apply(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a-desired, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b-kept, namespace: {f}, labels: {labels}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a-slow\n  namespace: {f}\n  labels: {labels}\n  finalizers: [stack-test.example.com/hold]\n  annotations: {{config.kubernetes.io/depends-on: /namespaces/{f}/ConfigMap/b-kept}}\n",
        kustomization("pol", f, "prune: true, namePrefix: a-"),
    ));
    record_flux_inventory("pol", f);
    // What Flux built with `a-` (`flux build kustomization`).
    let built = temp_file(
        &unique("built"),
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a-desired, namespace: {f}}}\n"),
    );
    let tracker = format!("flux=pol.{f}");
    let mut child = spawn_stack(&[
        "prune",
        "-n",
        f,
        "--tracker",
        &tracker,
        "-f",
        built.to_str().unwrap(),
        "--as-built",
        "--yes",
        "--timeout",
        "60s",
    ]);
    wait_while_running(&mut child, Duration::from_secs(60), || {
        is_terminating("configmap", f, "a-slow")
    });
    let patched = kubectl(&[
        "patch",
        "kustomization",
        "pol",
        "-n",
        f,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"namePrefix":"b-"}}"#,
    ]);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
    release_finalizers("configmap/a-slow", f);
    let run = finish(child);
    assert_eq!(run.code, 5, "dropped by the re-check:\n{}", run.stderr);
    assert!(
        run.stderr.contains("builds with spec.namePrefix, changed"),
        "{}",
        run.stderr
    );
    assert!(exists("configmap", Some(f), "b-kept"), "{}", run.stderr);
}

/// Membership review 21, F1a and F1b: kustomize-controller writes each applied object into its
/// inventory as a cli-utils `ObjMetadata` string (`:` in an RBAC name written `__`) and diffs the
/// old and new inventories as parsed back (`__` read as `:`; a name still holding `_` fails the
/// parse: fluxcd/kustomize-controller `internal/inventory/inventory.go` `Diff`; cli-utils
/// `pkg/object/objmetadata.go`). (a) A desired ClusterRole `x__viewer` is recorded under the id
/// of the live `x:viewer`, so Flux keeps `x:viewer`: no orphan, and a prune deletes nothing.
/// (b) A desired ClusterRole `x_new` cannot be read back, so Flux's diff fails and it prunes
/// nothing: no orphan either.
#[test]
fn a_flux_rbac_name_is_compared_as_kustomize_controller_reads_its_inventory_back() {
    let _logs = start();
    ensure_flux_crds();
    let flux = Namespace::new("rbf");
    let f = &flux.0;
    let run = unique("rbf");
    let (viewer, keep, old) = (format!("{run}:viewer"), format!("{run}-keep"), format!("{run}-old"));
    let _dropped: Vec<DeleteOnDrop> = [&viewer, &keep, &old]
        .into_iter()
        .map(|name| DeleteOnDrop("clusterrole", name.clone()))
        .collect();
    let labels = flux_labels("rbf", f);
    let role = |name: &str, labels: &str| {
        format!("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: \"{name}\"\n  labels: {labels}\nrules: []\n")
    };
    apply(&format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: rbf, namespace: {f}}}\nspec: {{interval: 5m, path: ./, prune: true, sourceRef: {{kind: GitRepository, name: x}}}}\n{}{}{}",
        role(&viewer, &labels),
        role(&keep, &labels),
        role(&old, &labels)
    ));
    let entry = |name: &str| format!("_{}_rbac.authorization.k8s.io_ClusterRole", name.replace(':', "__"));
    let inventory = format!("flux=rbf.{f}");
    let selector = "kustomize.toolkit.fluxcd.io/name=rbf".to_string();
    for (case, recorded, desired) in [
        ("a", [&viewer, &keep], format!("{run}__viewer")),
        ("b", [&old, &keep], format!("{run}_new")),
    ] {
        set_flux_inventory("rbf", f, &recorded.map(|name| entry(name)));
        let desired = temp_file("desired.yaml", &(role(&desired, "{}") + &role(&keep, "{}")));
        let desired = desired.to_str().unwrap();
        for selection in [["--inventory", &inventory], ["-l", &selector]] {
            let found = stack(&[&["orphans", "-A", "-f", desired, "-o", "name"][..], &selection[..]].concat());
            assert!(
                found.stdout.trim().is_empty() && matches!(found.code, 0 | 4),
                "{case} {selection:?}: exit {}\n{}\n{}",
                found.code,
                found.stdout,
                found.stderr
            );
        }
        let pruned = stack(&["prune", "-A", "--inventory", &inventory, "-f", desired, "--yes"]);
        assert!(
            matches!(pruned.code, 0 | 4),
            "{case}: {}\n{}",
            pruned.stdout,
            pruned.stderr
        );
        for name in recorded {
            assert!(
                exists("clusterrole", None, name),
                "{case}: {name} was deleted\n{}",
                pruned.stderr
            );
        }
    }
}
