//! A teardown keeps what the stack's own tool would keep when the stack is deleted: the members
//! of a Flux Kustomization with `spec.prune: false` or `spec.deletionPolicy: Orphan` stay (Flux
//! would orphan them), and the Kustomization itself goes.

mod common;

use common::*;

fn kustomization(name: &str, namespace: &str, spec: &str) -> String {
    format!("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{{spec}}}\n---\n")
}

fn member(name: &str, namespace: &str, stack: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}, labels: {}}}\n---\n",
        flux_labels(stack, namespace)
    )
}

#[test]
fn members_flux_would_orphan_stay_and_their_kustomization_goes() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("fluxkeep");
    let n = &ns.0;
    apply(&format!(
        "{}{}{}{}{}{}",
        kustomization("keeper", n, "prune: false"),
        kustomization("orphaner", n, "prune: true, deletionPolicy: Orphan"),
        kustomization("pruner", n, "prune: false, deletionPolicy: Delete"),
        member("left", n, "keeper"),
        member("left-too", n, "orphaner"),
        member("gone", n, "pruner"),
    ));
    // Reconciled by kustomize-controller: without an inventory it deletes nothing.
    for stack in ["keeper", "orphaner", "pruner"] {
        record_flux_inventory(stack, n);
    }
    let run = stack(&[
        "prune",
        "-n",
        n,
        "kustomization/keeper",
        "kustomization/orphaner",
        "kustomization/pruner",
        "--yes",
        "--timeout",
        "60s",
    ])
    .expect_code(0);
    let stderr = &run.stderr;
    for name in ["keeper", "orphaner", "pruner"] {
        assert!(!exists("kustomization", Some(n), name), "{name} goes\n{stderr}");
    }
    assert!(!exists("configmap", Some(n), "gone"), "{stderr}");
    assert!(exists("configmap", Some(n), "left"), "{stderr}");
    assert!(exists("configmap", Some(n), "left-too"), "{stderr}");
    let ks = |name: &str| format!("Kustomization.kustomize.toolkit.fluxcd.io/{n}/{name}");
    assert!(
        stderr.contains(&format!(
            "kept: ConfigMap/{n}/left (Flux would orphan it: {} has spec.prune=false)",
            ks("keeper")
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "kept: ConfigMap/{n}/left-too (Flux would orphan it: {} has spec.deletionPolicy=Orphan)",
            ks("orphaner")
        )),
        "{stderr}"
    );
}

/// A Kustomization deletes only what its `status.inventory` lists (kustomize-controller
/// `finalize`: `inventory.List(obj.Status.Inventory)`): an object that only carries its labels
/// stays when it is torn down.
#[test]
fn a_member_outside_the_kustomizations_inventory_stays() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("fluxinv");
    let n = &ns.0;
    apply(&format!(
        "{}{}{}",
        kustomization("apps", n, "prune: true"),
        member("applied", n, "apps"),
        member("copied", n, "apps"),
    ));
    set_flux_inventory("apps", n, &[format!("{n}_applied__ConfigMap")]);
    let run = stack(&["prune", "-n", n, "kustomization/apps", "--yes"]);
    assert!(!exists("configmap", Some(n), "applied"), "{run:?}");
    assert!(
        exists("configmap", Some(n), "copied"),
        "Flux never applied it:\n{run:?}"
    );
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(all.contains("not in the status.inventory of"), "{all}");
}

/// A Kustomization that records no `status.inventory` deletes nothing but itself when it is
/// deleted: fluxcd/kustomize-controller `internal/controller/kustomization_controller.go`
/// `finalizerShouldDeleteResources` ("A suspended Kustomization or one without an inventory
/// will not delete resources": `obj.Status.Inventory == nil` returns false), and on apply
/// `inventory.Diff` of an absent old inventory prunes nothing. A teardown deletes the
/// Kustomization alone and keeps its labelled objects with the reason (`noInventory`), and
/// `orphans` under it finds nothing to delete.
#[test]
fn a_kustomization_without_an_inventory_deletes_only_itself() {
    let _logs = start();
    ensure_flux_crds();
    let ns = Namespace::new("fluxnoinv");
    let n = &ns.0;
    apply(&format!(
        "{}{}{}",
        kustomization("bare", n, "prune: true"),
        member("labelled", n, "bare"),
        member("labelled-too", n, "bare"),
    ));
    // orphans: a desired set without the labelled objects calls none of them an orphan.
    let repo = temp_file(
        "other.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {n}}}\n"),
    );
    let repo = repo.to_str().unwrap();
    for selection in [
        vec!["--tracker".to_string(), format!("flux=bare.{n}")],
        vec![
            "-l".to_string(),
            format!("kustomize.toolkit.fluxcd.io/name=bare,kustomize.toolkit.fluxcd.io/namespace={n}"),
        ],
    ] {
        let mut args = vec!["orphans", "-n", n, "-f", repo, "-o", "json", "--show-skipped"];
        args.extend(selection.iter().map(String::as_str));
        let found = stack(&args).expect_code(0);
        let json = found.json();
        assert_eq!(
            json["orphans"].as_array().map(Vec::len),
            Some(0),
            "{selection:?}: {}",
            found.stdout
        );
        let skipped: Vec<(String, String)> = json["skipped"]
            .as_array()
            .unwrap_or_else(|| panic!("no skipped in {}", found.stdout))
            .iter()
            .map(|o| {
                (
                    o["name"].as_str().unwrap().to_string(),
                    o["reason"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        for name in ["labelled", "labelled-too"] {
            assert!(
                skipped.contains(&(name.to_string(), "noInventory".to_string())),
                "{selection:?}: {}",
                found.stdout
            );
        }
    }
    // A teardown: the Kustomization goes, its labelled objects stay, with the reason.
    let run = stack(&["prune", "-n", n, "kustomization/bare", "--yes", "--timeout", "60s"]).expect_code(0);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(!exists("kustomization", Some(n), "bare"), "{all}");
    for name in ["labelled", "labelled-too"] {
        assert!(
            exists("configmap", Some(n), name),
            "kustomize-controller deletes nothing without an inventory:\n{all}"
        );
        assert!(
            all.contains(&format!(
                "kept: ConfigMap/{n}/{name} (Kustomization.kustomize.toolkit.fluxcd.io/{n}/bare records no status.inventory: kustomize-controller deletes nothing without an inventory it can read)"
            )),
            "{all}"
        );
    }
}
