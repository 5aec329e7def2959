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
