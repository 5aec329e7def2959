//! The test proxy (`tests/proxy/stack_proxy.py`) in front of the test cluster: injected faults,
//! lost DELETE answers, and aggregated discovery composed from the 1.20 server's answers.
//! Every request it saw is in its log, one JSON object per line.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::common::{cluster, unique};

/// A running proxy; killed when dropped.
pub struct Proxy {
    child: Child,
    /// The port it listens on (HTTPS on 127.0.0.1, with the API server's certificate).
    pub port: u16,
    /// The admin kubeconfig, pointed at the proxy.
    pub kubeconfig: PathBuf,
    /// Its request log.
    pub log: PathBuf,
}

/// The value of `key: VALUE` on the first line of the kubeconfig that has it.
fn kubeconfig_field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("{key} missing from the admin kubeconfig"))
        .to_string()
}

impl Proxy {
    /// Starts the proxy with extra arguments (`--fault-rate 0.05 --seed 1`, `--aggregated v2`).
    pub fn start(args: &[&str]) -> Self {
        let admin = std::fs::read_to_string(&cluster().admin).unwrap();
        let server = kubeconfig_field(&admin, "server");
        let ca = kubeconfig_field(&admin, "certificate-authority");
        let log = std::env::temp_dir().join(format!("{}.jsonl", unique("proxy")));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy/stack_proxy.py");
        let certs = Path::new(&ca).parent().unwrap();
        let cert = certs.join("apiserver.crt");
        let key = certs.join("apiserver.key");
        let mut child = Command::new("python3")
            .arg(&script)
            .args(["--upstream", &server, "--ca", &ca, "--log", log.to_str().unwrap()])
            .args(["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the test proxy (scripts/test.sh installs it)");
        let mut first_line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first_line)
            .unwrap();
        let port: u16 = first_line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the proxy did not start: {first_line:?}"));
        let scoped = admin.replace(&server, &format!("https://127.0.0.1:{port}"));
        let kubeconfig = std::env::temp_dir().join(format!("{}.kubeconfig", unique("proxied")));
        std::fs::write(&kubeconfig, scoped).unwrap();
        Self {
            child,
            port,
            kubeconfig,
            log,
        }
    }

    /// Every request logged so far.
    pub fn records(&self) -> Vec<Record> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(Record)
            .collect()
    }

    /// Forgets what was logged so far.
    pub fn clear(&self) {
        std::fs::write(&self.log, "").unwrap();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One logged request.
#[derive(Debug, Clone)]
pub struct Record(pub serde_json::Value);

impl Record {
    /// The HTTP method.
    pub fn method(&self) -> &str {
        self.0["method"].as_str().unwrap_or_default()
    }

    /// The URL path (no query).
    pub fn path(&self) -> &str {
        self.0["path"].as_str().unwrap_or_default()
    }

    /// When the request arrived (seconds since the epoch).
    pub fn start(&self) -> f64 {
        self.0["start"].as_f64().unwrap_or_default()
    }

    /// When the API server answered it, if it was forwarded and answered.
    pub fn answered(&self) -> Option<f64> {
        self.0["answered"].as_f64()
    }

    /// The API server's status, if the request reached it and it answered.
    pub fn upstream(&self) -> Option<u64> {
        self.0["upstream"].as_u64()
    }

    /// The fault injected, e.g. `before-503`, `after-reset`.
    pub fn fault(&self) -> Option<&str> {
        self.0["fault"].as_str()
    }

    /// Whether the proxy answered it with aggregated discovery.
    pub fn aggregated(&self) -> Option<&str> {
        self.0["aggregated"].as_str()
    }

    /// What the upstream DELETE of `--remove-on-discovery` answered (before this request was
    /// forwarded), if this request triggered one.
    pub fn removed(&self) -> Option<u64> {
        self.0["removed"].as_u64()
    }

    /// Whether this is a per-group-version discovery request (`/api/v1`, `/apis/GROUP/VERSION`).
    pub fn is_group_version_discovery(&self) -> bool {
        let parts: Vec<&str> = self.path().trim_matches('/').split('/').collect();
        self.method() == "GET" && matches!(parts.as_slice(), ["api", _] | ["apis", _, _])
    }
}
