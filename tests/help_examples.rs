//! Every example in `kubectl stack -h` and in each command's `-h` runs as written (issue 27
//! item 2): the examples are read from the help text itself and pasted into bash, with
//! `kubectl stack` resolved by kubectl's plugin lookup, against the stacks of the repository's
//! `examples/` (as `scripts/demo.sh` applies them). Destructive examples get `--dry-run=client`
//! appended, or are expected to be refused with the exit code they should give.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

/// The help of `kubectl-stack ARGS -h`.
fn help(args: &[&str]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubectl-stack"));
    let output = command.args(args).arg("-h").output().expect("run kubectl-stack -h");
    assert!(output.status.success(), "{args:?} -h failed");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The commands of the `Examples` block of a help text (comments left out).
fn examples_of(help: &str) -> Vec<String> {
    let start = help
        .find("Examples")
        .unwrap_or_else(|| panic!("no examples in\n{help}"));
    help[start..]
        .lines()
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// What an example should do: what is appended to it, its exit code, and a text its output
/// (stdout and stderr) must hold.
struct Expect {
    append: &'static str,
    code: &'static [i32],
    holds: &'static str,
}

const fn expect(append: &'static str, code: &'static [i32], holds: &'static str) -> Expect {
    Expect { append, code, holds }
}

/// Every example of every help, with what it should do against the fixtures.
fn expectations() -> BTreeMap<&'static str, Expect> {
    // Cluster-wide examples see what other test binaries leave (a stuck object, a cycle), so
    // they accept those codes; each must still show the example stacks.
    BTreeMap::from([
        ("kubectl stack list", expect("", &[0], "")),
        (
            "kubectl stack list -A --tracker flux=usage.flux-system",
            expect("", &[0], "storefront"),
        ),
        (
            "kubectl stack list -n shop -l kustomize.toolkit.fluxcd.io/name=usage -o wide",
            expect("", &[0], "shop-settings"),
        ),
        (
            "kubectl stack orphans -A --tracker flux=usage.flux-system -f examples/usage-next/",
            expect("", &[1], "storefront"),
        ),
        (
            "kubectl stack orphans -A --inventory flux=usage.flux-system -f examples/usage-next/ -o json",
            expect("", &[1], "\"storefront\""),
        ),
        (
            "cat examples/usage-next/* | kubectl stack orphans -A --tracker flux=usage.flux-system -f -",
            expect("", &[1], "storefront"),
        ),
        ("kubectl stack graph -A", expect("", &[0, 6], "flux-system/operator")),
        (
            "kubectl stack graph -A --members",
            expect("", &[0, 6], "databases.demo.kubectl-stack.dev"),
        ),
        (
            "kubectl stack graph -f examples/flux/ -o dot",
            expect("", &[0], "digraph"),
        ),
        (
            "kubectl stack graph -A --tracker flux --members --order delete",
            expect("", &[0, 6], "storefront"),
        ),
        (
            "kubectl stack prune -n flux-system kustomization/operator",
            expect(" --dry-run=client", &[0], "usage"),
        ),
        (
            "kubectl stack prune -n flux-system kustomizations -l team=shop",
            expect(" --dry-run=client", &[0], "shop-settings"),
        ),
        (
            "kubectl stack prune -A --tracker flux=usage.flux-system -f examples/usage-next/",
            expect(" --dry-run=client", &[0], "storefront"),
        ),
        (
            "kubectl stack prune -n flux-system kustomization/operator --dry-run=server",
            // The Database being deleted is counted too (issue 27 item 12).
            expect("", &[0], "Server dry run: 10 would be deleted, 1 already being deleted"),
        ),
        ("kubectl stack stuck -A", expect("", &[1], "shop/orders")),
        (
            "kubectl stack stuck -A --tracker flux=usage.flux-system",
            expect("", &[1], "shop/orders"),
        ),
        (
            "kubectl stack stuck -n shop databases.demo.kubectl-stack.dev/orders",
            expect("", &[1], "demo.kubectl-stack.dev/cleanup"),
        ),
        (
            "kubectl stack unstick -n shop database/orders --finalizer demo.kubectl-stack.dev/cleanup",
            expect(" --dry-run=client", &[0], "demo.kubectl-stack.dev/cleanup"),
        ),
        // Namespace shop is not being deleted: refused without --force, as it should be.
        (
            "kubectl stack unstick namespace/shop --finalizer kubernetes",
            expect(" --dry-run=client", &[4], "not being deleted"),
        ),
        (
            "kubectl stack unstick -n shop database/orders --all-finalizers --dry-run=server",
            expect("", &[0], "demo.kubectl-stack.dev/cleanup"),
        ),
        ("source <(kubectl stack completion bash)", expect("", &[0], "")),
        ("kubectl stack completion zsh > _kubectl-stack", expect("", &[0], "")),
    ])
}

/// The repository's examples/: the CRDs, both stacks, the Kustomizations with the record
/// kustomize-controller would have written, and the Database being deleted (held by its
/// operator's finalizer).
fn install_example_stacks(root: &Path) {
    let examples = root.join("examples");
    let path = |dir: &str| examples.join(dir).display().to_string();
    let crds = path("crds");
    assert_eq!(kubectl(&["apply", "-f", &crds]).code, 0);
    wait_established(&["-f", &crds], "kustomizations.kustomize.toolkit.fluxcd.io");
    let applied = kubectl(&["apply", "-f", &path("operator")]);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    wait_established(
        &["crd/databases.demo.kubectl-stack.dev"],
        "databases.demo.kubectl-stack.dev",
    );
    let applied = kubectl(&["apply", "-f", &path("usage"), "-f", &path("flux")]);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    let ids = [
        "_shop__Namespace",
        "shop_orders_demo.kubectl-stack.dev_Database",
        "shop_shop-settings__ConfigMap",
        "shop_storefront_apps_Deployment",
    ];
    set_flux_inventory("usage", "flux-system", &ids.map(String::from));
    // The operator stack's record too (without one kustomize-controller deletes nothing).
    record_flux_inventories("flux-system");
    let deleted = kubectl(&["delete", "database", "orders", "-n", "shop", "--wait=false"]);
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);
}

/// A folder to run the examples in: `examples` links to the repository's, and `bin` holds
/// `kubectl-stack` for kubectl's plugin lookup.
fn workdir(root: &Path) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(unique("help-examples"));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(root.join("examples"), dir.join("examples")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kubectl-stack"), bin.join("kubectl-stack")).unwrap();
    (dir, bin)
}

/// Runs one example line in bash (pipefail: the code is kubectl stack's).
fn run_example(line: &str, dir: &Path, bin: &Path) -> Run {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let output = Command::new("bash")
        .args(["-o", "pipefail", "-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env("KUBECONFIG", &cluster().admin)
        .env("NO_COLOR", "1")
        .output()
        .expect("run bash");
    Run::from(output)
}

#[test]
fn every_help_example_runs_as_written() {
    let _logs = start();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for command in [
        "",
        "list",
        "orphans",
        "graph",
        "prune",
        "stuck",
        "unstick",
        "completion",
    ] {
        let args: Vec<&str> = [command].into_iter().filter(|c| !c.is_empty()).collect();
        found.extend(examples_of(&help(&args)));
    }
    let expected = expectations();
    for example in &found {
        assert!(
            expected.contains_key(example.as_str()),
            "a help example the test does not know: {example}"
        );
    }
    install_example_stacks(&root);
    wait_until(Duration::from_secs(30), || is_terminating("database", "shop", "orders"));
    let (dir, bin) = workdir(&root);
    let mut failures = Vec::new();
    for example in found.iter().collect::<std::collections::BTreeSet<_>>() {
        let want = &expected[example.as_str()];
        let line = format!("{example}{}", want.append);
        let run = run_example(&line, &dir, &bin);
        let output = format!("{}{}", run.stdout, run.stderr);
        if !want.code.contains(&run.code) || !output.contains(want.holds) {
            failures.push(format!(
                "$ {line}\nexit {} (want {:?}, output holding {:?}):\n{output}",
                run.code, want.code, want.holds
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let script = std::fs::read_to_string(dir.join("_kubectl-stack")).unwrap_or_default();
    assert!(script.contains("kubectl-stack"), "the zsh script was written");
    assert!(
        field("database", "shop", "orders", ".metadata.finalizers").contains("cleanup"),
        "the dry runs changed nothing"
    );
}
