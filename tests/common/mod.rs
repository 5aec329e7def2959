//! End-to-end test harness: the real test cluster (started by `scripts/test-cluster.sh` when
//! no cluster is given), kubectl for set-up, and the built `kubectl-stack` binary.
//! A missing cluster fails the tests; it never skips them.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Kubeconfigs of the running test cluster.
pub struct Cluster {
    /// Admin (system:masters).
    pub admin: PathBuf,
    /// A user with no rights.
    pub nobody: PathBuf,
    /// A user with no rights until a test binds some.
    pub limited: PathBuf,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The running test cluster; starts it with the project's script when not given by the
/// environment. Panics (fails the test) when it cannot be had.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        if let Ok(admin) = std::env::var("STACK_TEST_KUBECONFIG") {
            let dir = Path::new(&admin)
                .parent()
                .expect("kubeconfig has a folder")
                .to_path_buf();
            return Cluster {
                admin: admin.into(),
                nobody: dir.join("nobody.kubeconfig"),
                limited: dir.join("limited.kubeconfig"),
            };
        }
        let script = repo_root().join("scripts/test-cluster.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg("start")
            .output()
            .expect("run scripts/test-cluster.sh");
        assert!(
            output.status.success(),
            "the test cluster is missing and could not be started (CI={:?}):\n{}",
            std::env::var("CI").ok(),
            String::from_utf8_lossy(&output.stderr)
        );
        let env = String::from_utf8_lossy(&output.stdout);
        let value = |key: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("export {key}=")))
                .unwrap_or_else(|| panic!("{key} missing from test-cluster.sh output:\n{env}"))
                .to_string()
        };
        Cluster {
            admin: value("STACK_TEST_KUBECONFIG").into(),
            nobody: value("STACK_TEST_NOBODY_KUBECONFIG").into(),
            limited: value("STACK_TEST_LIMITED_KUBECONFIG").into(),
        }
    })
}

/// Prints the cluster's log tails when the test that holds it fails.
pub struct LogsOnFailure;

impl Drop for LogsOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let script = repo_root().join("scripts/test-cluster.sh");
            if let Ok(output) = Command::new("bash").arg(script).args(["logs", "25"]).output() {
                eprintln!("{}", String::from_utf8_lossy(&output.stdout));
            }
        }
    }
}

/// Starts a test: makes sure the cluster runs and arms the log printer.
pub fn start() -> LogsOnFailure {
    cluster();
    LogsOnFailure
}

/// A name unique to this test run, e.g. `t-4821-3`.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        % 100_000;
    format!("{prefix}-{}-{nanos}-{n}", std::process::id() % 100_000)
}

/// What a command printed and how it exited.
#[derive(Debug)]
pub struct Run {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    pub fn from(output: Output) -> Self {
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Panics with both streams unless the exit code is `code`.
    pub fn expect_code(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Standard output as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }

    /// Standard output's lines, sorted.
    pub fn sorted_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.stdout.lines().map(str::to_string).collect();
        lines.sort();
        lines
    }
}

fn run(mut command: Command, stdin: Option<&str>) -> Run {
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    Run::from(child.wait_with_output().expect("wait"))
}

/// The kubectl-stack binary with the admin kubeconfig.
pub fn stack_command(kubeconfig: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubectl-stack"));
    command
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .env_remove("KUBECTL_STACK_LOG");
    command
}

/// Runs `kubectl-stack ARGS` as admin.
pub fn stack(args: &[&str]) -> Run {
    stack_as(&cluster().admin, args)
}

/// Runs `kubectl-stack ARGS` with another kubeconfig.
pub fn stack_as(kubeconfig: &Path, args: &[&str]) -> Run {
    let mut command = stack_command(kubeconfig);
    command.args(args);
    run(command, None)
}

/// Runs `kubectl-stack ARGS` as admin with text on stdin.
pub fn stack_with_stdin(args: &[&str], stdin: &str) -> Run {
    let mut command = stack_command(&cluster().admin);
    command.args(args);
    run(command, Some(stdin))
}

/// Runs kubectl as admin.
pub fn kubectl(args: &[&str]) -> Run {
    kubectl_with_stdin(args, None)
}

/// Runs kubectl as admin with text on stdin.
pub fn kubectl_with_stdin(args: &[&str], stdin: Option<&str>) -> Run {
    let mut command = Command::new("kubectl");
    command
        .env("KUBECONFIG", &cluster().admin)
        .env("KUBECTL_APPLYSET", "true")
        .args(args);
    run(without_go_gc(command), stdin)
}

/// Runs kubectl as admin until it succeeds, up to 5 times a second apart (a loaded machine's
/// discovery can miss a kind another test's CRD churn made the server re-list); panics with what
/// it said last when it never does.
pub fn kubectl_ok(args: &[&str]) -> Run {
    let mut last = kubectl(args);
    for _ in 0..4 {
        if last.code == 0 {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
        last = kubectl(args);
    }
    assert_eq!(last.code, 0, "kubectl {} failed:\n{}", args.join(" "), last.stderr);
    last
}

/// `kubectl apply -f -` of the given YAML; panics when it fails.
pub fn apply(yaml: &str) {
    let result = kubectl_with_stdin(&["apply", "-f", "-"], Some(yaml));
    assert_eq!(result.code, 0, "kubectl apply failed:\n{}\n{yaml}", result.stderr);
}

/// `kubectl create -f -` of the given YAML; panics when it fails.
pub fn create(yaml: &str) {
    let result = kubectl_with_stdin(&["create", "-f", "-"], Some(yaml));
    assert_eq!(result.code, 0, "kubectl create failed:\n{}\n{yaml}", result.stderr);
}

/// Waits until a CRD is established (`target` is `crd/NAME` or `-f FILE`) and `resource` lists.
pub fn wait_established(target: &[&str], resource: &str) {
    let mut args = vec!["wait", "--for", "condition=established", "--timeout", "60s"];
    args.extend_from_slice(target);
    // A CRD read before its status is first written makes `kubectl wait` fail at once
    // (".status.conditions accessor error"): ask again until it waits for real.
    let mut result = kubectl(&args);
    for _ in 0..20 {
        if result.code == 0 || !result.stderr.contains("accessor error") {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        result = kubectl(&args);
    }
    assert_eq!(result.code, 0, "{}", result.stderr);
    wait_until(Duration::from_secs(30), || kubectl(&["get", resource, "-A"]).code == 0);
}

/// Whether a failed write lost a race with another writer of the same object (another test
/// binary installing the same fixture, or the API server's own status update): read it again
/// and retry.
fn lost_a_race(stderr: &str) -> bool {
    stderr.contains("(Conflict)")
        || stderr.contains("(AlreadyExists)")
        || stderr.contains("the object has been modified")
}

/// Applies a fixture file of CRDs once per test binary and waits until `resource` is served.
/// Idempotent and safe beside another binary applying the same file (`scripts/test.sh` applies
/// every shared fixture first, through `tests/fixtures_setup.rs`): a create that lost to the other
/// binary's (AlreadyExists) or a write that lost to another (Conflict) is tried again.
fn ensure_applied(done: &'static OnceLock<()>, path: &str, resource: &str) {
    done.get_or_init(|| {
        let path = repo_root().join(path);
        let path = path.to_str().unwrap();
        let mut result = kubectl(&["apply", "-f", path]);
        for _ in 0..20 {
            if result.code == 0 || !lost_a_race(&result.stderr) {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
            result = kubectl(&["apply", "-f", path]);
        }
        assert_eq!(result.code, 0, "{}", result.stderr);
        wait_established(&["-f", path], resource);
    });
}

/// Installs the shared test CRDs once and waits until they are served.
pub fn ensure_crds() {
    static DONE: OnceLock<()> = OnceLock::new();
    ensure_applied(&DONE, "tests/fixtures/crds.yaml", "widgets.stack-test.example.com");
    wait_until(Duration::from_secs(30), || {
        kubectl(&["get", "gadgets.stack-test.example.com"]).code == 0
    });
}

/// A namespace that is deleted (without waiting) when dropped.
pub struct Namespace(pub String);

impl Namespace {
    /// Creates a namespace with a unique name.
    pub fn new(prefix: &str) -> Self {
        let name = unique(prefix);
        let result = kubectl(&["create", "namespace", &name]);
        assert_eq!(result.code, 0, "{}", result.stderr);
        Self(name)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.0, "--wait=false", "--ignore-not-found"]);
    }
}

/// Polls until `check` is true; panics after `timeout`.
pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < timeout, "condition not met within {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether an object exists (`kubectl get`). Only NotFound is absence: any other failure (an
/// unknown resource type once its CRD is gone, a refused connection) fails the test.
pub fn exists(kind: &str, namespace: Option<&str>, name: &str) -> bool {
    let mut args = vec!["get", kind, name, "-o", "name"];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    let result = kubectl(&args);
    if result.code == 0 {
        return true;
    }
    assert!(
        result.stderr.contains("(NotFound)"),
        "kubectl get {kind} {name} failed, and not with NotFound: {}",
        result.stderr
    );
    false
}

/// A copy of the admin kubeconfig whose context's namespace is `namespace`.
pub fn kubeconfig_with_namespace(namespace: &str) -> PathBuf {
    let admin = std::fs::read_to_string(&cluster().admin).unwrap();
    let scoped = admin.replace("namespace: default", &format!("namespace: {namespace}"));
    assert_ne!(admin, scoped, "admin kubeconfig has no context namespace to replace");
    let path = std::env::temp_dir().join(format!("{}.kubeconfig", unique("scoped")));
    std::fs::write(&path, scoped).unwrap();
    path
}

/// Writes text to a fresh temporary file and returns its path.
pub fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("manifests"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The UID of an object.
pub fn uid_of(kind: &str, namespace: Option<&str>, name: &str) -> String {
    let mut args = vec!["get", kind, name, "-o", "jsonpath={.metadata.uid}"];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    let result = kubectl(&args);
    assert_eq!(result.code, 0, "{}", result.stderr);
    result.stdout
}

/// Installs the Flux stand-in CRDs from examples/ once.
pub fn ensure_flux_crds() {
    static DONE: OnceLock<()> = OnceLock::new();
    ensure_applied(
        &DONE,
        "examples/crds/flux.yaml",
        "kustomizations.kustomize.toolkit.fluxcd.io",
    );
}

/// Installs the Argo CD Application kind once (`tests/fixtures/argocd-crd.yaml`).
pub fn ensure_argo_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    ensure_applied(&DONE, "tests/fixtures/argocd-crd.yaml", "applications.argoproj.io");
}

/// Runs kpt with the admin kubeconfig.
pub fn kpt(args: &[&str]) -> Run {
    let mut command = Command::new("kpt");
    command.env("KUBECONFIG", &cluster().admin).args(args);
    run(without_go_gc(command), None)
}

/// A short-lived Go command (kubectl, kpt) with its garbage collector off below 512 MiB
/// (`GOGC=off`, `GOMEMLIMIT`): the suite runs thousands of them on a CI machine it keeps busy,
/// and without collections kubectl took a third less user CPU time (tests/teardown.rs: 6.3–6.7 s
/// against 8.9–9.7 s). Never the test cluster's own processes, which run long.
fn without_go_gc(mut command: Command) -> Command {
    command.env("GOGC", "off").env("GOMEMLIMIT", "512MiB");
    command
}

/// A real `kpt live apply` of the package in `dir`: `kpt pkg init`, `kpt live init` with the
/// inventory `id` (named `inventory` when `named`, else kpt's own name) in `namespace`, then
/// `kpt live apply`; every step must succeed.
pub fn kpt_live_apply(dir: &std::path::Path, namespace: &str, id: &str, named: bool) {
    let dir = dir.to_str().unwrap();
    assert_eq!(kpt(&["pkg", "init", dir]).code, 0);
    let mut init = vec!["live", "init", dir, "--namespace", namespace, "--inventory-id", id];
    if named {
        init.extend(["--name", "inventory"]);
    }
    let initialised = kpt(&init);
    assert_eq!(initialised.code, 0, "{}", initialised.stderr);
    let applied = kpt(&[
        "live",
        "apply",
        dir,
        "--install-resource-group=false",
        "--reconcile-timeout=1m",
    ]);
    assert_eq!(applied.code, 0, "{}\n{}", applied.stdout, applied.stderr);
}

/// Marks every field under `properties` as nullable, recursively.
fn make_nullable(schema: &mut serde_json::Value) {
    if let Some(properties) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for property in properties.values_mut() {
            property["nullable"] = serde_json::Value::Bool(true);
            make_nullable(property);
        }
    }
    if let Some(items) = schema.get_mut("items") {
        make_nullable(items);
    }
}

/// The CRD with every field under each version's `spec` and `status` nullable.
fn with_nullable_spec_and_status(crd: &serde_json::Value) -> serde_json::Value {
    let mut crd = crd.clone();
    if let Some(versions) = crd["spec"]["versions"].as_array_mut() {
        for version in versions {
            let properties = &mut version["schema"]["openAPIV3Schema"]["properties"];
            for part in ["spec", "status"] {
                if properties.get(part).is_some() {
                    make_nullable(&mut properties[part]);
                }
            }
        }
    }
    crd
}

/// The name of kpt's ResourceGroup CRD.
pub const RESOURCE_GROUP_CRD: &str = "resourcegroups.kpt.dev";

/// Installs kpt's ResourceGroup CRD, past the 1.20 trap (/work/shared/trackers.md): kpt writes
/// explicit nulls, which a 1.20 server rejects in typed fields unless they are nullable. So:
/// `kpt live install-resource-group` when the CRD is missing, then `kubectl replace` with every
/// field under spec and status nullable, until a fresh read shows the nullable schema. The one
/// copy every test binary uses; idempotent and safe beside another binary doing the same (a
/// replace that lost to another writer, Conflict, reads again), and done once per binary.
pub fn ensure_resource_group() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(install_resource_group);
}

/// [`ensure_resource_group`] without the once-per-binary memo.
pub fn install_resource_group() {
    let mut last = String::new();
    for _ in 0..40 {
        let read = kubectl(&["get", "crd", RESOURCE_GROUP_CRD, "-o", "json"]);
        if read.code != 0 {
            assert!(read.stderr.contains("(NotFound)"), "{}", read.stderr);
            let installed = kpt(&["live", "install-resource-group"]);
            assert!(
                installed.code == 0 || lost_a_race(&installed.stderr),
                "kpt live install-resource-group: {}\n{}",
                installed.stdout,
                installed.stderr
            );
            continue;
        }
        let crd: serde_json::Value = serde_json::from_str(&read.stdout).unwrap();
        let nullable = with_nullable_spec_and_status(&crd);
        if nullable == crd {
            wait_established(&[&format!("crd/{RESOURCE_GROUP_CRD}")], RESOURCE_GROUP_CRD);
            return;
        }
        // The read's resourceVersion guards the replace: a lost race is a Conflict.
        let replaced = kubectl_with_stdin(&["replace", "-f", "-"], Some(&nullable.to_string()));
        if replaced.code != 0 {
            assert!(lost_a_race(&replaced.stderr), "kubectl replace: {}", replaced.stderr);
            last = replaced.stderr;
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    panic!("the ResourceGroup CRD never got its nullable schema: {last}");
}

/// Installs every cluster-wide fixture that several test binaries share: the test CRDs
/// (tests/fixtures/crds.yaml), the Flux stand-in CRDs (examples/crds/flux.yaml) and kpt's
/// ResourceGroup CRD. `scripts/test.sh` runs it once (`tests/fixtures_setup.rs`) before any
/// other test binary starts; each binary still calls the `ensure_*` it needs, which are
/// idempotent, so that `cargo test --test NAME` works alone.
pub fn install_shared_fixtures() {
    ensure_crds();
    ensure_flux_crds();
    ensure_argo_crd();
    ensure_resource_group();
}

/// The sha256 of a file, as hex.
pub fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap();
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Removes every finalizer from the objects `resource` names (`configmap/x`, or a whole type) in
/// a namespace, as their controller would.
pub fn release_finalizers(resource: &str, namespace: &str) {
    let listed = kubectl(&["get", resource, "-n", namespace, "-o", "name"]);
    for name in listed.stdout.lines() {
        let _ = kubectl(&[
            "patch",
            name,
            "-n",
            namespace,
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ]);
    }
}

/// The labels kustomize-controller puts on what a Kustomization applies, as a YAML flow map.
pub fn flux_labels(stack: &str, flux_ns: &str) -> String {
    format!("{{kustomize.toolkit.fluxcd.io/name: {stack}, kustomize.toolkit.fluxcd.io/namespace: {flux_ns}}}")
}

/// Starts kubectl-stack (admin, no stdin, output captured) without waiting for it.
pub fn spawn_stack(args: &[&str]) -> std::process::Child {
    let mut command = stack_command(&cluster().admin);
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    command.spawn().expect("start kubectl-stack")
}

/// Waits for a command started by [`spawn_stack`] and returns what it printed.
pub fn finish(child: std::process::Child) -> Run {
    Run::from(child.wait_with_output().expect("wait for kubectl-stack"))
}

/// Polls `check` while a command started by [`spawn_stack`] runs: panics with what the command
/// printed if it ends before `check` holds (a refusal, not a slow cluster), or after `timeout`.
pub fn wait_while_running(child: &mut std::process::Child, timeout: Duration, mut check: impl FnMut() -> bool) {
    use std::io::Read;
    let start = Instant::now();
    while !check() {
        if let Ok(Some(status)) = child.try_wait() {
            let (mut out, mut err) = (String::new(), String::new());
            if let Some(mut stdout) = child.stdout.take() {
                let _ = stdout.read_to_string(&mut out);
            }
            if let Some(mut stderr) = child.stderr.take() {
                let _ = stderr.read_to_string(&mut err);
            }
            panic!("kubectl-stack ended ({status}) before the condition held\nstdout:\n{out}\nstderr:\n{err}");
        }
        assert!(start.elapsed() < timeout, "condition not met within {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether the object is being deleted (has a deletionTimestamp).
pub fn is_terminating(kind: &str, namespace: &str, name: &str) -> bool {
    !kubectl(&[
        "get",
        kind,
        name,
        "-n",
        namespace,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ])
    .stdout
    .is_empty()
}

/// The JSON lines of a command's `-o json` output (prune's plan, events and summary).
pub fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A field of a namespaced object, through kubectl's jsonpath (empty when absent).
pub fn field(resource: &str, namespace: &str, name: &str, path: &str) -> String {
    kubectl(&[
        "get",
        resource,
        name,
        "-n",
        namespace,
        "-o",
        &format!("jsonpath={{{path}}}"),
    ])
    .stdout
}

/// Runs an `unstick` command as `stuck` printed it (`kubectl stack unstick ...`), with `--yes`
/// and a fresh backup folder; returns what it printed.
pub fn run_printed_unstick(command: &str) -> Run {
    let backups = std::env::temp_dir().join(unique("unstick-backups"));
    let backups = backups.to_str().unwrap().to_string();
    let mut args: Vec<&str> = command.split(' ').skip(2).collect();
    args.extend(["--yes", "--backup-dir", &backups]);
    stack(&args)
}

/// Binds the `limited` user to a Role with these rules in `namespace`.
pub fn grant_limited(namespace: &str, role: &str, rules: &str) {
    grant_user("limited", namespace, role, rules);
}

/// Binds `user` (impersonated with `--as`) to a Role with these rules in `namespace`, with a
/// RoleBinding named `USER-ROLE`. A test that must not see rights other test binaries grant the
/// shared `limited` user binds a user of its own (`unique(..)`).
pub fn grant_user(user: &str, namespace: &str, role: &str, rules: &str) {
    apply(&format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: {role}, namespace: {namespace}}}
rules: {rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {user}-{role}, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {role}}}
subjects: [{{kind: User, name: {user}, apiGroup: rbac.authorization.k8s.io}}]
"#
    ));
}

/// `kubectl apply -n NAMESPACE --prune --applyset=PARENT -f -` of the given YAML (a real
/// ApplySet, made by kubectl itself); panics when it fails.
pub fn apply_applyset(namespace: &str, parent: &str, yaml: &str) {
    let applyset = format!("--applyset={parent}");
    let args = ["apply", "-n", namespace, "--prune", applyset.as_str(), "-f", "-"];
    let result = kubectl_with_stdin(&args, Some(yaml));
    assert_eq!(
        result.code, 0,
        "kubectl apply --applyset failed:\n{}\n{yaml}",
        result.stderr
    );
}

/// Sets a Kustomization's `status.inventory` to these entry ids (`<ns>_<name>_<group>_<Kind>`),
/// as kustomize-controller does; panics when the patch fails.
pub fn set_flux_inventory(name: &str, namespace: &str, ids: &[String]) {
    let entries: Vec<String> = ids.iter().map(|id| format!(r#"{{"id":"{id}","v":"v1"}}"#)).collect();
    let status = format!(r#"{{"status":{{"inventory":{{"entries":[{}]}}}}}}"#, entries.join(","));
    patch_status("kustomization", name, namespace, &status);
}

/// Records in Kustomization `name` (in `namespace`) the `status.inventory` kustomize-controller
/// would hold had it applied every object that now carries the stack's labels ([`flux_labels`]):
/// entries `<namespace>_<name>_<group>_<Kind>` (an RBAC name's `:` written `__`, as cli-utils
/// `ObjMetadata.String` writes it) with `v` the object's version. What a controller made (an
/// ownerReference with `controller: true`, the Endpoints of a labelled Service) is left out, as
/// kustomize-controller never applied it. A Kustomization without an inventory deletes nothing
/// (kustomize-controller `finalizerShouldDeleteResources`), so a test whose Flux stack should
/// behave as a reconciled one calls this once its objects exist. Returns the entry ids.
pub fn record_flux_inventory(name: &str, namespace: &str) -> Vec<String> {
    let selector = format!("kustomize.toolkit.fluxcd.io/name={name},kustomize.toolkit.fluxcd.io/namespace={namespace}");
    // An API group another test left unavailable fails discovery, not the kinds it could list;
    // a kind another test removes between discovery and the list is tried again.
    let mut attempts = 0;
    let list: serde_json::Value = loop {
        attempts += 1;
        let kinds = kubectl(&["api-resources", "--verbs=list", "-o", "name"]);
        assert!(!kinds.stdout.is_empty(), "{}", kinds.stderr);
        let kinds: Vec<&str> = kinds.stdout.lines().filter(|k| !k.is_empty()).collect();
        let listed = kubectl(&["get", &kinds.join(","), "-A", "-l", &selector, "-o", "json"]);
        match serde_json::from_str(&listed.stdout) {
            Ok(list) => break list,
            Err(e) if attempts >= 10 => panic!("{e}: {}\n{}", listed.stdout, listed.stderr),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let key = |item: &serde_json::Value, field: &str| item["metadata"][field].as_str().unwrap_or_default().to_string();
    // The endpoints controller writes the Endpoints of a Service with a selector (with its
    // labels); hand-written ones (a Service without a selector) were applied.
    let services: BTreeSet<(String, String)> = items
        .iter()
        .filter(|item| item["kind"] == "Service" && !item["spec"]["selector"].is_null())
        .map(|item| (key(item, "namespace"), key(item, "name")))
        .collect();
    let mut entries = BTreeMap::new();
    for item in &items {
        let controlled = item["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|owners| owners.iter().any(|o| o["controller"] == true));
        let kind = item["kind"].as_str().unwrap_or_default();
        let (namespace, object) = (key(item, "namespace"), key(item, "name"));
        if controlled || (kind == "Endpoints" && services.contains(&(namespace.clone(), object.clone()))) {
            continue;
        }
        let api_version = item["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let object = if group == "rbac.authorization.k8s.io" {
            object.replace(':', "__")
        } else {
            object
        };
        entries.insert(format!("{namespace}_{object}_{group}_{kind}"), version.to_string());
    }
    let written: Vec<String> = entries
        .iter()
        .map(|(id, v)| format!(r#"{{"id":"{id}","v":"{v}"}}"#))
        .collect();
    let status = format!(r#"{{"status":{{"inventory":{{"entries":[{}]}}}}}}"#, written.join(","));
    patch_status("kustomization", name, namespace, &status);
    entries.into_keys().collect()
}

/// [`record_flux_inventory`] for every Kustomization in `namespace` that records no
/// `status.inventory` yet (one a test wrote with [`set_flux_inventory`] is left as it is): the
/// Flux stacks a test set up by hand, as kustomize-controller leaves them once reconciled.
pub fn record_flux_inventories(namespace: &str) {
    let listed = kubectl(&["get", "kustomizations", "-n", namespace, "-o", "json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let list: serde_json::Value = serde_json::from_str(&listed.stdout).expect("a Kustomization list");
    for item in list["items"].as_array().into_iter().flatten() {
        if item["status"]["inventory"].is_null() {
            record_flux_inventory(item["metadata"]["name"].as_str().unwrap_or_default(), namespace);
        }
    }
}

/// Merges `patch` (JSON) into the status subresource of `kind/name` in `namespace`, as a
/// controller writes it.
pub fn patch_status(kind: &str, name: &str, namespace: &str, patch: &str) {
    let args = [
        "patch",
        kind,
        name,
        "-n",
        namespace,
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        patch,
    ];
    let patched = kubectl(&args);
    assert_eq!(patched.code, 0, "{}", patched.stderr);
}

/// Writes a HelmRelease's status as helm-controller does once it installed `release` in
/// `storage` (fluxcd/helm-controller `api/v2` `HelmReleaseStatus`: `storageNamespace`, and
/// `history` newest first): what it uninstalls when the HelmRelease is deleted.
pub fn set_helm_release_status(name: &str, namespace: &str, release: &str, storage: &str) {
    let status = format!(
        r#"{{"status":{{"storageNamespace":"{storage}","history":[{{"name":"{release}","namespace":"{storage}","version":1,"status":"deployed","chartName":"app","chartVersion":"1.0.0","configDigest":"sha256:0","digest":"sha256:0","firstDeployed":"2026-01-01T00:00:00Z","lastDeployed":"2026-01-01T00:00:00Z"}}]}}}}"#
    );
    patch_status("helmrelease", name, namespace, &status);
}

/// The `data.release` of a Helm release Secret: base64 of gzip of the release JSON (helm/helm
/// `pkg/storage/driver/util.go` `encodeRelease`); the API's own base64 comes on top.
pub fn helm_release_data(release: &serde_json::Value) -> String {
    use base64::Engine;
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(release.to_string().as_bytes()).unwrap();
    let engine = base64::engine::general_purpose::STANDARD;
    engine.encode(engine.encode(gz.finish().unwrap()))
}

/// A deployed Helm release `release` (revision 1) in `namespace` whose manifest is `manifest`,
/// as `helm install` stores it: Secret `sh.helm.release.v1.<release>.v1`, type
/// `helm.sh/release.v1`, labels owner/name/status/version (helm/helm `pkg/storage/driver/secrets.go`).
pub fn helm_release(namespace: &str, release: &str, manifest: &str) {
    helm_release_in_status(namespace, release, manifest, "deployed");
}

/// [`helm_release`] with revision 1 in another status (`failed`, `pending-install`).
pub fn helm_release_in_status(namespace: &str, release: &str, manifest: &str, status: &str) {
    let body = serde_json::json!({
        "name": release, "namespace": namespace, "version": 1,
        "info": {"status": status}, "manifest": manifest,
    });
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {
            "name": format!("sh.helm.release.v1.{release}.v1"), "namespace": namespace,
            "labels": {"owner": "helm", "name": release, "status": status, "version": "1"},
        },
        "data": {"release": helm_release_data(&body)},
    });
    create(&secret.to_string());
}

/// A private tmux server (its own socket), killed when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A new server with a socket of its own.
    pub fn new() -> Self {
        Self {
            socket: unique("stack-tmux"),
        }
    }

    /// Runs a tmux command on this server.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux is installed (scripts/test.sh installs it)")
    }

    /// Starts `command` in a new session; its exit code is written to `exit_file`.
    pub fn start(&self, session: &str, command: &str, exit_file: &std::path::Path) {
        self.start_sized(session, command, exit_file, 200);
    }

    /// [`Self::start`] in a terminal of `columns` columns (and 50 lines).
    pub fn start_sized(&self, session: &str, command: &str, exit_file: &std::path::Path, columns: u16) {
        let script = format!("{command}; echo $? > {}; sleep 600", exit_file.display());
        let columns = columns.to_string();
        let started = self.run(&["new-session", "-d", "-s", session, "-x", &columns, "-y", "50", &script]);
        assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    }

    /// What the session's pane shows.
    pub fn screen(&self, session: &str) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", session]).stdout).into_owned()
    }

    /// Types keys into the session.
    pub fn keys(&self, session: &str, keys: &[&str]) {
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

/// The exit code a command started by [`Tmux::start`] wrote to `file`; waits up to `timeout`.
pub fn exit_code_in(file: &std::path::Path, timeout: Duration) -> i32 {
    let mut code = None;
    wait_until(timeout, || {
        code = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        code.is_some()
    });
    code.unwrap()
}

/// A stand-in controller (an operator, a CSI driver, kube-controller-manager's protection
/// controllers): while `alive()` holds, it removes `finalizer` from the objects of `resource`
/// that are being deleted and whose name starts with `prefix` — in `namespace`, or in every
/// namespace (and cluster-scoped objects) with `None`. Counts what it finalized. A real operator
/// finalizes only while it runs: `alive` checks its Deployment.
pub struct StandIn {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    finalized: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl StandIn {
    /// Starts it on a thread of its own; it looks every 200 ms.
    pub fn start(
        resource: &str,
        namespace: Option<&str>,
        prefix: &str,
        finalizer: &str,
        alive: impl Fn() -> bool + Send + 'static,
    ) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        use std::sync::Arc;
        let stop = Arc::new(AtomicBool::new(false));
        let finalized = Arc::new(AtomicUsize::new(0));
        let (resource, namespace, prefix, finalizer) = (
            resource.to_string(),
            namespace.map(str::to_string),
            prefix.to_string(),
            finalizer.to_string(),
        );
        let handle = {
            let (stop, finalized) = (stop.clone(), finalized.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let count = finalize_deleting(&resource, namespace.as_deref(), &prefix, &finalizer, &alive);
                    finalized.fetch_add(count, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        Self {
            stop,
            finalized,
            handle: Some(handle),
        }
    }

    /// Stops it; returns how many objects it finalized.
    pub fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
        self.finalized.load(Ordering::SeqCst)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Removes `finalizer` from every object of `resource` being deleted whose name starts with
/// `prefix` (in `namespace`, or everywhere with `None`), if `alive()` holds once one is found
/// (asked only then: each question is a kubectl or two, every 200 ms); returns how many.
fn finalize_deleting(
    resource: &str,
    namespace: Option<&str>,
    prefix: &str,
    finalizer: &str,
    alive: &dyn Fn() -> bool,
) -> usize {
    use serde_json::Value;
    let mut args = vec!["get", resource, "-o", "json"];
    match namespace {
        Some(ns) => args.extend(["-n", ns]),
        None => args.push("-A"),
    }
    let listed = kubectl(&args);
    let Ok(list) = serde_json::from_str::<Value>(&listed.stdout) else {
        return 0;
    };
    let finalizers_of = |item: &Value| -> Vec<String> {
        item["metadata"]["finalizers"]
            .as_array()
            .map(|f| f.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };
    let deleting: Vec<&Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            !item["metadata"]["deletionTimestamp"].is_null()
                && name.starts_with(prefix)
                && finalizers_of(item).iter().any(|f| f == finalizer)
        })
        .collect();
    if deleting.is_empty() || !alive() {
        return 0;
    }
    let mut count = 0;
    for item in deleting {
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        let finalizers = finalizers_of(item);
        let rest: Vec<String> = finalizers.into_iter().filter(|f| f != finalizer).collect();
        let patch = serde_json::json!({"metadata": {"finalizers": rest}}).to_string();
        let mut args = vec!["patch", resource, name, "--type", "merge", "-p", &patch];
        if let Some(ns) = item["metadata"]["namespace"].as_str() {
            args.extend(["-n", ns]);
        }
        if kubectl(&args).code == 0 {
            count += 1;
        }
    }
    count
}

/// The plan line of a prune's `-o json` output.
pub fn plan_line(lines: &[serde_json::Value]) -> &serde_json::Value {
    lines.iter().find(|l| l["type"] == "plan").expect("plan line")
}

/// The planned wave (1-based) of the object of `kind` named `name`, from a prune's `-o json`
/// lines; `None` when it is not planned.
pub fn wave_of(lines: &[serde_json::Value], kind: &str, name: &str) -> Option<usize> {
    plan_line(lines)["waves"]
        .as_array()
        .unwrap()
        .iter()
        .position(|wave| {
            wave.as_array()
                .unwrap()
                .iter()
                .any(|t| t["id"]["kind"] == kind && t["id"]["name"] == name)
        })
        .map(|wave| wave + 1)
}

/// [`wave_of`] of an object that must be planned.
pub fn planned_wave(lines: &[serde_json::Value], kind: &str, name: &str) -> usize {
    wave_of(lines, kind, name).unwrap_or_else(|| panic!("{kind}/{name} not planned: {}", plan_line(lines)))
}

/// The position of the first event `change` (`deleted`, `gone`) of the object of `kind` named
/// `name` among a prune's `-o json` lines.
pub fn event_at(lines: &[serde_json::Value], kind: &str, name: &str, change: &str) -> usize {
    lines
        .iter()
        .position(|l| {
            l["type"] == "event" && l["id"]["kind"] == kind && l["id"]["name"] == name && l["change"] == change
        })
        .unwrap_or_else(|| panic!("no {change} event for {kind}/{name}"))
}

/// A cli-utils/kpt inventory ConfigMap `inventory-ID` in `namespace`, labelled with the inventory
/// id and recording `entries` (`<namespace>_<name>_<group>_<Kind>`, the keys cli-utils writes),
/// as `kpt live apply` leaves it: a kpt stack a test marks by hand (`config.k8s.io/owning-inventory`)
/// prunes only what its inventory records, and nothing at all without one. A YAML document to
/// `apply` beside the objects.
pub fn kpt_inventory(namespace: &str, id: &str, entries: &[String]) -> String {
    let data: Vec<String> = entries.iter().map(|key| format!("\"{key}\": \"\"")).collect();
    format!(
        "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: inventory-{id}, namespace: {namespace}, labels: {{cli-utils.sigs.k8s.io/inventory-id: {id}}}}}\ndata: {{{}}}\n",
        data.join(", ")
    )
}

/// A kapp app record (carvel-dev/kapp `pkg/kapp/app/recorded_app.go`): a ConfigMap labelled
/// `kapp.k14s.io/is-app` whose `data.spec` holds the label its resources carry.
pub fn kapp_app_record(namespace: &str, app: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: \"app-{app}\", namespace: {namespace}, labels: {{kapp.k14s.io/is-app: \"\"}}}}\ndata:\n  spec: '{{\"labelKey\":\"kapp.k14s.io/app\",\"labelValue\":\"{app}\"}}'\n"
    )
}
