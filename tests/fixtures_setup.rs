//! The cluster-wide fixtures that several test binaries share, installed once before any of them
//! starts: `scripts/test.sh` runs this binary first, alone. The test CRDs, the Flux stand-in CRDs,
//! the Argo CD Application CRD and kpt's ResourceGroup CRD (made nullable for the 1.20 server) are then in place, so the
//! binaries that run side by side never race to create or replace them; their own `ensure_*`
//! calls find them done (and still install them when a binary is run alone).

mod common;

use common::*;

#[test]
fn the_shared_fixtures_are_installed_and_served() {
    let _logs = start();
    install_shared_fixtures();
    // Idempotent: another pass (as each binary's own `ensure_resource_group` makes) finds the
    // nullable schema and writes nothing.
    let before = kubectl(&[
        "get",
        "crd",
        RESOURCE_GROUP_CRD,
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ])
    .expect_code(0);
    install_resource_group();
    let after = kubectl(&[
        "get",
        "crd",
        RESOURCE_GROUP_CRD,
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ])
    .expect_code(0);
    assert_eq!(
        before.stdout, after.stdout,
        "a second install rewrote the ResourceGroup CRD"
    );
    for resource in [
        "widgets.stack-test.example.com",
        "gadgets.stack-test.example.com",
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "helmreleases.helm.toolkit.fluxcd.io",
        "applications.argoproj.io",
        RESOURCE_GROUP_CRD,
    ] {
        let listed = kubectl(&["get", resource, "-A", "-o", "name"]);
        assert_eq!(listed.code, 0, "{resource} is not served: {}", listed.stderr);
    }
}
