//! Credentials and connection as kubectl handles them, against the real test cluster: exec plugin
//! failures that print no secret, KUBECONFIG lists with missing files, token files, TLS failures
//! said at once, `-n ""`, proxies (a local forward proxy that logs every tunnel), and kubectl's
//! connection flags without any kubeconfig.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn cluster_dir() -> PathBuf {
    cluster().admin.parent().expect("cluster folder").to_path_buf()
}

fn admin_token() -> String {
    let tokens = std::fs::read_to_string(cluster_dir().join("tokens.csv")).expect("tokens.csv");
    tokens.lines().next().unwrap().split(',').next().unwrap().to_string()
}

fn api_port() -> u16 {
    let admin = std::fs::read_to_string(&cluster().admin).unwrap();
    let server = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .expect("server line in the admin kubeconfig");
    server.trim().parse().unwrap()
}

fn server_ca() -> PathBuf {
    cluster_dir().join("certs/apiserver.crt")
}

/// A folder of its own for one test's files.
fn scratch(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(prefix));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a kubeconfig with one cluster (`server` and extra cluster lines) and one user (its
/// `user:` body as YAML lines indented by 4).
fn kubeconfig(dir: &Path, server: &str, cluster_lines: &str, user_lines: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_lines}\
         contexts:\n- name: c\n  context: {{cluster: c, user: u, namespace: default}}\ncurrent-context: c\n\
         users:\n- name: u\n  user:\n{user_lines}"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn ca_line() -> String {
    format!("    certificate-authority: {}\n", server_ca().display())
}

fn token_line() -> String {
    format!("    token: {}\n", admin_token())
}

/// kubectl-stack with only the given environment for kubeconfig and proxies.
fn stack_env(kubeconfig: &str, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut command = stack_command(Path::new(kubeconfig));
    for name in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.args(args).stdin(Stdio::null());
    let output = command.output().expect("run kubectl-stack");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn assert_absent(run: &Run, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{secret:?} was printed\nstdout:\n{}\nstderr:\n{}",
            run.stdout,
            run.stderr
        );
    }
}

fn executable(dir: &Path, name: &str, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn exec_user(command: &Path) -> String {
    format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: {}\n      \
         args: [\"--password=arg-secret-5f2c\"]\n      env: [{{name: PLUGIN_SECRET_ENV, value: env-secret-9a41}}]\n",
        command.display()
    )
}

const EXEC_SECRETS: [&str; 4] = [
    "env-secret-9a41",
    "arg-secret-5f2c",
    "stdout-secret-31be",
    "json-secret-77d1",
];

#[test]
fn a_failing_exec_plugin_prints_neither_its_env_nor_args_nor_output() {
    let _logs = start();
    let dir = scratch("exec-fail");
    let plugin = executable(
        &dir,
        "plugin.sh",
        "#!/bin/sh\necho \"stdout-secret-31be $PLUGIN_SECRET_ENV $*\"\nexit 1\n",
    );
    let config = kubeconfig(
        &dir,
        &format!("https://127.0.0.1:{}", api_port()),
        &ca_line(),
        &exec_user(&plugin),
    );
    for verbosity in ["0", "9"] {
        let run = stack_env(
            config.to_str().unwrap(),
            &[],
            &["list", "-n", "default", "-v", verbosity],
        );
        assert_eq!(run.code, 3, "{run:?}");
        assert!(
            run.stderr
                .contains(&format!("executable {} failed with exit code 1", plugin.display())),
            "{}",
            run.stderr
        );
        assert_absent(&run, &EXEC_SECRETS);
    }
}

#[test]
fn malformed_exec_plugin_output_is_reported_without_its_content() {
    let _logs = start();
    let dir = scratch("exec-json");
    let plugin = executable(
        &dir,
        "plugin.sh",
        "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"json-secret-77d1\"'\n",
    );
    let config = kubeconfig(
        &dir,
        &format!("https://127.0.0.1:{}", api_port()),
        &ca_line(),
        &exec_user(&plugin),
    );
    for verbosity in ["0", "9"] {
        let run = stack_env(
            config.to_str().unwrap(),
            &[],
            &["list", "-n", "default", "-v", verbosity],
        );
        assert_eq!(run.code, 3, "{run:?}");
        assert!(run.stderr.contains("json parse error"), "{}", run.stderr);
        assert_absent(&run, &EXEC_SECRETS);
    }
}

#[test]
fn a_working_exec_plugin_authenticates() {
    let _logs = start();
    let dir = scratch("exec-ok");
    let plugin = executable(
        &dir,
        "plugin.sh",
        &format!(
            "#!/bin/sh\necho '{{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{}\"}}}}'\n",
            admin_token()
        ),
    );
    let config = kubeconfig(
        &dir,
        &format!("https://127.0.0.1:{}", api_port()),
        &ca_line(),
        &exec_user(&plugin),
    );
    stack_env(config.to_str().unwrap(), &[], &["list", "-n", "default"]).expect_code(0);
}

#[test]
fn missing_files_in_kubeconfig_are_skipped_and_only_all_missing_fails() {
    let _logs = start();
    let dir = scratch("kc-list");
    let missing = dir.join("missing.kubeconfig");
    let list = format!("{}:{}", missing.display(), cluster().admin.display());
    stack_env(&list, &[], &["list", "-n", "default"]).expect_code(0);

    let all_missing = format!("{}:{}", missing.display(), dir.join("also-missing").display());
    let run = stack_env(&all_missing, &[], &["list", "-n", "default"]).expect_code(3);
    assert!(
        run.stderr.contains("none of the files in KUBECONFIG exist"),
        "{}",
        run.stderr
    );

    // A file that does not parse: where and what, never the lines around (a token among them).
    let broken = dir.join("broken.kubeconfig");
    std::fs::write(
        &broken,
        "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: kc-secret-token-0d9e\n    client-key-data: [kc-secret-key\n",
    )
    .unwrap();
    let run = stack_env(broken.to_str().unwrap(), &[], &["list", "-n", "default"]).expect_code(3);
    assert!(
        run.stderr.contains("invalid kubeconfig") && run.stderr.contains("line 7"),
        "{}",
        run.stderr
    );
    assert_absent(&run, &["kc-secret-token-0d9e", "kc-secret-key"]);
}

#[test]
fn a_token_file_ending_in_a_newline_works() {
    let _logs = start();
    let dir = scratch("token-file");
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{}\n", admin_token())).unwrap();
    let user = format!("    tokenFile: {}\n", token_file.display());
    let config = kubeconfig(&dir, &format!("https://127.0.0.1:{}", api_port()), &ca_line(), &user);
    let started = Instant::now();
    stack_env(config.to_str().unwrap(), &[], &["list", "-n", "default"]).expect_code(0);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_wrong_ca_says_certificate_verify_failed_at_once() {
    let _logs = start();
    let dir = scratch("wrong-ca");
    let wrong_ca = cluster_dir().join("pki/client-ca.crt");
    let cluster_lines = format!("    certificate-authority: {}\n", wrong_ca.display());
    let config = kubeconfig(
        &dir,
        &format!("https://127.0.0.1:{}", api_port()),
        &cluster_lines,
        &token_line(),
    );
    let started = Instant::now();
    let run = stack_env(config.to_str().unwrap(), &[], &["list", "-n", "default"]).expect_code(3);
    let elapsed = started.elapsed();
    assert!(run.stderr.contains("certificate verify failed"), "{}", run.stderr);
    assert!(!run.stderr.contains("is the cluster running"), "{}", run.stderr);
    // Retries would take 3 s (200 + 400 + 800 + 1600 ms of backoff).
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

#[test]
fn a_hung_tls_handshake_fails_within_the_request_timeout() {
    let _logs = start();
    // Accepts connections and never says a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let dir = scratch("hung-tls");
    let config = kubeconfig(&dir, &format!("https://127.0.0.1:{port}"), &ca_line(), &token_line());
    let started = Instant::now();
    // The retry budget (45 s by default: a paused server may come back, see tests/faults.rs)
    // set to 6 s, so the test does not wait 45 s: a few 2 s tries, then a plain error.
    let run = stack_env(
        config.to_str().unwrap(),
        &[("KUBECTL_STACK_RETRY_BUDGET", "6s")],
        &["list", "-n", "default", "--request-timeout", "2s"],
    )
    .expect_code(3);
    let elapsed = started.elapsed();
    assert!(run.stderr.contains("TLS handshake timed out"), "{}", run.stderr);
    assert!(!run.stderr.contains("is the cluster running"), "{}", run.stderr);
    // Retried (more than one 2 s try) until the budget was spent, then said plainly.
    assert!(
        elapsed >= Duration::from_secs(4) && elapsed < Duration::from_secs(20),
        "took {elapsed:?}"
    );
}

#[test]
fn an_empty_namespace_flag_means_the_context_namespace() {
    let _logs = start();
    let home = Namespace::new("ctx-home");
    let other = Namespace::new("ctx-other");
    let stack = unique("ns-stack");
    for ns in [&home.0, &other.0] {
        apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: member\n  namespace: {ns}\n  finalizers: [stack-test.example.com/hold]\n  \
             labels: {{kustomize.toolkit.fluxcd.io/name: {stack}, kustomize.toolkit.fluxcd.io/namespace: flux-system}}\n"
        ));
    }
    let scoped = kubeconfig_with_namespace(&home.0);
    let scoped = scoped.to_str().unwrap();
    let tracker = format!("flux={stack}.flux-system");
    let listed = stack_env(scoped, &[], &["list", "-n", "", "--tracker", &tracker, "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout, "configmap/member\n");
    let wide = stack_env(scoped, &[], &["list", "-n", "", "--tracker", &tracker]).expect_code(0);
    assert!(
        wide.stdout.contains(&home.0) && !wide.stdout.contains(&other.0),
        "{}",
        wide.stdout
    );
    let desired = temp_file(
        "desired.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}\n",
    );
    let desired = desired.to_str().unwrap();
    let orphans = stack_env(
        scoped,
        &[],
        &["orphans", "-n", "", "--tracker", &tracker, "-f", desired, "-o", "json"],
    )
    .expect_code(1);
    let namespaces: Vec<String> = orphans.json()["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["namespace"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(namespaces, vec![home.0.clone()], "{}", orphans.stdout);
    let graph = stack_env(scoped, &[], &["graph", "-n", "", "--tracker", &tracker, "--members"]).expect_code(0);
    assert!(!graph.stdout.contains(&other.0), "{}", graph.stdout);

    assert_eq!(
        kubectl(&["delete", "configmap", "member", "-n", &home.0, "--wait=false"]).code,
        0
    );
    let stuck = stack_env(scoped, &[], &["stuck", "-n", "", "configmaps/member"]);
    release_finalizers("configmap/member", &home.0);
    release_finalizers("configmap/member", &other.0);
    let stuck = stuck.expect_code(1);
    assert!(stuck.stdout.contains(&home.0), "{}", stuck.stdout);
}

// ---- proxies -------------------------------------------------------------------------------

/// The forward proxy of `tests/fixtures/forward_proxy.py`, killed when dropped.
struct Proxy {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Proxy {
    fn start() -> Self {
        let log = std::env::temp_dir().join(format!("{}.log", unique("proxy")));
        std::fs::write(&log, "").unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/forward_proxy.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the forward proxy");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the proxy prints its port");
        Self { child, port, log }
    }

    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The tunnels opened so far, e.g. "CONNECT stack-proxy.test:16443".
    fn tunnels(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A kubeconfig whose server has a name only the proxy can reach (the proxy sends every tunnel
/// to 127.0.0.1); the serving certificate is for `kubernetes`, so that is the TLS server name.
fn proxied_kubeconfig(dir: &Path, host: &str, extra: &str) -> PathBuf {
    let cluster_lines = format!("{}    tls-server-name: kubernetes\n{extra}", ca_line());
    kubeconfig(
        dir,
        &format!("https://{host}:{}", api_port()),
        &cluster_lines,
        &token_line(),
    )
}

#[test]
fn https_proxy_carries_the_connection_and_no_proxy_bypasses_it() {
    let _logs = start();
    let proxy = Proxy::start();
    let dir = scratch("proxy");
    let config = proxied_kubeconfig(&dir, "stack-proxy.test", "");
    let config = config.to_str().unwrap();
    let target = format!("CONNECT stack-proxy.test:{}", api_port());
    let args = ["list", "-n", "default", "--request-timeout", "3s"];

    stack_env(config, &[("HTTPS_PROXY", &proxy.url("http"))], &args).expect_code(0);
    let tunnels = proxy.tunnels();
    assert!(
        !tunnels.is_empty() && tunnels.iter().all(|t| *t == target),
        "{tunnels:?}"
    );

    stack_env(config, &[("https_proxy", &proxy.url("http"))], &args).expect_code(0);
    let seen = proxy.tunnels().len();
    assert!(seen > tunnels.len());

    // NO_PROXY by host, by domain suffix (both spellings), and `*`: straight to a name that does
    // not resolve, so the command fails, and the proxy saw nothing.
    for no_proxy in ["stack-proxy.test", ".test", "*.test", "other.org, test", "*"] {
        for (https, none) in [("HTTPS_PROXY", "NO_PROXY"), ("https_proxy", "no_proxy")] {
            let run = stack_env(config, &[(https, &proxy.url("http")), (none, no_proxy)], &args);
            assert_eq!(run.code, 3, "NO_PROXY={no_proxy}: {run:?}");
            assert_eq!(
                proxy.tunnels().len(),
                seen,
                "NO_PROXY={no_proxy} went through the proxy"
            );
        }
    }
    // HTTP_PROXY is for http:// servers only, as in kubectl.
    let run = stack_env(config, &[("HTTP_PROXY", &proxy.url("http"))], &args);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(proxy.tunnels().len(), seen);
}

#[test]
fn no_proxy_cidrs_match_the_server_address() {
    let _logs = start();
    let proxy = Proxy::start();
    let dir = scratch("proxy-cidr");
    // TEST-NET-1: not routable from here, reachable only through the proxy.
    let config = proxied_kubeconfig(&dir, "192.0.2.10", "");
    let config = config.to_str().unwrap();
    let args = ["list", "-n", "default", "--request-timeout", "2s"];
    stack_env(config, &[("HTTPS_PROXY", &proxy.url("http"))], &args).expect_code(0);
    let tunnels = proxy.tunnels();
    let target = format!("CONNECT 192.0.2.10:{}", api_port());
    assert!(
        !tunnels.is_empty() && tunnels.iter().all(|t| *t == target),
        "{tunnels:?}"
    );

    let run = stack_env(
        config,
        &[
            ("HTTPS_PROXY", &proxy.url("http")),
            ("NO_PROXY", "10.0.0.0/8,192.0.2.0/24"),
        ],
        &args,
    );
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(
        proxy.tunnels().len(),
        tunnels.len(),
        "the CIDR did not bypass the proxy"
    );
}

#[test]
fn loopback_servers_are_never_proxied_from_the_environment() {
    let _logs = start();
    let proxy = Proxy::start();
    let admin = cluster().admin.to_str().unwrap().to_string();
    stack_env(
        &admin,
        &[("HTTPS_PROXY", &proxy.url("http"))],
        &["list", "-n", "default"],
    )
    .expect_code(0);
    assert!(proxy.tunnels().is_empty(), "{:?}", proxy.tunnels());
}

#[test]
fn the_kubeconfig_proxy_url_is_used_whatever_no_proxy_says() {
    let _logs = start();
    let proxy = Proxy::start();
    let dir = scratch("proxy-url");
    let line = format!("    proxy-url: {}\n", proxy.url("http"));
    let config = proxied_kubeconfig(&dir, "stack-proxy.test", &line);
    let run = stack_env(
        config.to_str().unwrap(),
        &[("NO_PROXY", "*")],
        &["list", "-n", "default"],
    );
    run.expect_code(0);
    assert_eq!(proxy.tunnels()[0], format!("CONNECT stack-proxy.test:{}", api_port()));
}

#[test]
fn a_socks5_proxy_carries_the_connection() {
    let _logs = start();
    let proxy = Proxy::start();
    let dir = scratch("socks5");
    let config = proxied_kubeconfig(&dir, "stack-proxy.test", "");
    stack_env(
        config.to_str().unwrap(),
        &[("HTTPS_PROXY", &proxy.url("socks5"))],
        &["list", "-n", "default"],
    )
    .expect_code(0);
    let tunnels = proxy.tunnels();
    assert!(!tunnels.is_empty(), "no SOCKS5 tunnel");
    assert!(
        tunnels
            .iter()
            .all(|t| *t == format!("SOCKS5 stack-proxy.test:{}", api_port())),
        "{tunnels:?}"
    );
}

// ---- kubectl's connection flags, without a kubeconfig --------------------------------------

/// kubectl-stack with no kubeconfig at all: `KUBECONFIG` names a missing file, `HOME` is empty.
fn without_kubeconfig(args: &[&str]) -> Run {
    let home = scratch("empty-home");
    stack_env("/nonexistent/kubeconfig", &[("HOME", home.to_str().unwrap())], args)
}

#[test]
fn a_token_and_a_server_are_enough_without_any_kubeconfig() {
    let _logs = start();
    let server = format!("https://127.0.0.1:{}", api_port());
    let ca = server_ca();
    let token = admin_token();
    let run = without_kubeconfig(&[
        "list",
        "-n",
        "kube-system",
        "--server",
        &server,
        "--token",
        &token,
        "--certificate-authority",
        ca.to_str().unwrap(),
    ]);
    run.expect_code(0);
    // -s and --insecure-skip-tls-verify, as kubectl spells them.
    without_kubeconfig(&[
        "list",
        "-n",
        "default",
        "-s",
        &server,
        "--token",
        &token,
        "--insecure-skip-tls-verify",
    ])
    .expect_code(0);
    // No server and no kubeconfig: said plainly.
    let run = without_kubeconfig(&["list", "-n", "default", "--token", &token]).expect_code(3);
    assert!(run.stderr.contains("kubeconfig"), "{}", run.stderr);
    // Without a CA, the self-signed serving certificate does not verify.
    let run = without_kubeconfig(&["list", "-n", "default", "-s", &server, "--token", &token]).expect_code(3);
    assert!(run.stderr.contains("certificate verify failed"), "{}", run.stderr);
}

#[test]
fn a_client_certificate_authenticates_without_any_kubeconfig() {
    let _logs = start();
    let server = format!("https://127.0.0.1:{}", api_port());
    let pki = cluster_dir().join("pki");
    let run = without_kubeconfig(&[
        "list",
        "-n",
        "default",
        "--server",
        &server,
        "--certificate-authority",
        server_ca().to_str().unwrap(),
        "--client-certificate",
        pki.join("cert-admin.crt").to_str().unwrap(),
        "--client-key",
        pki.join("cert-admin.key").to_str().unwrap(),
    ]);
    run.expect_code(0);
}

#[test]
fn tls_server_name_decides_which_name_is_verified() {
    let _logs = start();
    let dir = scratch("tls-name");
    // The server is reached by an address the certificate does not name...
    let config = proxied_kubeconfig(&dir, "localhost", "");
    let config = config.to_str().unwrap();
    stack_env(config, &[], &["list", "-n", "default"]).expect_code(0);
    // ...and --tls-server-name overrides the kubeconfig's.
    let run = stack_env(
        config,
        &[],
        &["list", "-n", "default", "--tls-server-name", "wrong.example"],
    )
    .expect_code(3);
    assert!(run.stderr.contains("certificate verify failed"), "{}", run.stderr);
    // --server alone clears the kubeconfig's tls-server-name (client-go): localhost is not named.
    let server = format!("https://localhost:{}", api_port());
    let run = stack_env(config, &[], &["list", "-n", "default", "--server", &server]).expect_code(3);
    assert!(run.stderr.contains("certificate verify failed"), "{}", run.stderr);
}

#[test]
fn flags_win_over_the_kubeconfig() {
    let _logs = start();
    let dir = scratch("precedence");
    // A kubeconfig whose server is wrong and whose user has no rights.
    let nobody = std::fs::read_to_string(&cluster().nobody).unwrap();
    let nobody_token = nobody
        .lines()
        .find_map(|l| l.split("token: ").nth(1))
        .map(|t| t.trim_end_matches('}').trim().to_string())
        .expect("nobody token");
    let user = format!("    token: {nobody_token}\n");
    let config = kubeconfig(&dir, "https://127.0.0.1:1", &ca_line(), &user);
    let config = config.to_str().unwrap();
    let server = format!("https://127.0.0.1:{}", api_port());
    // The kubeconfig's user may list nothing: every kind is forbidden.
    stack_env(config, &[], &["list", "-n", "default", "--server", &server]).expect_code(3);
    // --token replaces it.
    stack_env(
        config,
        &[],
        &["list", "-n", "default", "--server", &server, "--token", &admin_token()],
    )
    .expect_code(0);
    // --certificate-authority replaces the kubeconfig's CA: a wrong one fails.
    let wrong_ca = cluster_dir().join("pki/client-ca.crt");
    let run = stack_env(
        config,
        &[],
        &[
            "list",
            "-n",
            "default",
            "--server",
            &server,
            "--token",
            &admin_token(),
            "--certificate-authority",
            wrong_ca.to_str().unwrap(),
        ],
    )
    .expect_code(3);
    assert!(run.stderr.contains("certificate verify failed"), "{}", run.stderr);
}

/// A plain-HTTP stand-in for an API server that refuses every request with a 403 Status whose
/// message lists the impersonation headers it received: what the client really sent.
fn header_echo_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buffer[..n]),
                }
            }
            let text = String::from_utf8_lossy(&request).to_string();
            let mut seen: Vec<String> = text
                .lines()
                .filter_map(|line| line.split_once(':'))
                .filter(|(name, _)| name.to_ascii_lowercase().starts_with("impersonate-"))
                .map(|(name, value)| format!("{}={}", name.to_ascii_lowercase(), value.trim()))
                .collect();
            seen.sort();
            let body = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("seen: {}", seen.join(" ")), "reason": "Forbidden", "code": 403,
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn impersonation_flags_reach_the_server_and_http_proxy_serves_http_servers() {
    let _logs = start();
    let port = header_echo_server();
    let proxy = Proxy::start();
    // An http:// server by a name only the proxy resolves: HTTP_PROXY carries it (HTTPS_PROXY
    // would not be used for it).
    let server = format!("http://stack-http.test:{port}");
    let run = without_kubeconfig_env(
        &[
            ("HTTP_PROXY", &proxy.url("http")),
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
        ],
        &[
            "list",
            "-n",
            "default",
            "-s",
            &server,
            "--token",
            "t",
            "--as",
            "jane",
            "--as-uid",
            "uid-7",
            "--as-group",
            "ops",
        ],
    )
    .expect_code(3);
    assert!(
        run.stderr
            .contains("seen: impersonate-group=ops impersonate-uid=uid-7 impersonate-user=jane"),
        "{}",
        run.stderr
    );
    assert_eq!(proxy.tunnels()[0], format!("CONNECT stack-http.test:{port}"));
}

/// Like [`without_kubeconfig`], with more environment.
fn without_kubeconfig_env(env: &[(&str, &str)], args: &[&str]) -> Run {
    let home = scratch("empty-home");
    let mut all = vec![("HOME", home.to_str().unwrap())];
    all.extend_from_slice(env);
    stack_env("/nonexistent/kubeconfig", &all, args)
}
