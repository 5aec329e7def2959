//! A DELETE the server refuses is a failure, whatever code the refusal carries. An admission
//! webhook may deny a DELETE with any status, 404 and 409 included (the webhook's
//! `status.code` is passed through: k8s.io/apiserver `pkg/admission/plugin/webhook/errors`
//! `ToStatusErr`). Neither code alone proves the planned object gone or replaced: the name is read
//! again, and only another UID (409) or nothing (404) counts as such. A refused delete stops the
//! run before the next wave, in a `--dry-run=server` as in a real run.
//!
//! The refusal comes from the test proxy (`--refuse-delete NAME=CODE`), which answers as such a
//! webhook does, without forwarding the DELETE.

mod common;
#[path = "proxy/mod.rs"]
mod proxy;

use common::{apply_applyset, exists, stack_as, start, temp_file, Namespace};
use proxy::Proxy;

/// A real ApplySet (kubectl's own) in its own namespace: `dependent` depends on `base`; only
/// `keep` is desired.
struct Stack {
    ns: Namespace,
    desired: std::path::PathBuf,
}

impl Stack {
    fn seed(prefix: &str) -> Self {
        let ns = Namespace::new(prefix);
        let n = &ns.0;
        let object = |name: &str, annotations: &str| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\n"
            )
        };
        let mut yaml = object(
            "dependent",
            &format!("config.kubernetes.io/depends-on: /namespaces/{n}/ConfigMap/base"),
        );
        yaml.push_str(&object("base", ""));
        yaml.push_str(&object("keep", ""));
        apply_applyset(n, "set1", &yaml);
        let desired = temp_file(
            "desired.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\n",
        );
        Self { ns, desired }
    }

    fn prune(&self, proxy: &Proxy, extra: &[&str]) -> common::Run {
        let desired = self.desired.to_str().unwrap();
        let mut args = vec![
            "prune",
            "-n",
            &self.ns.0,
            "--tracker",
            "applyset=secrets/set1",
            "-f",
            desired,
            "--yes",
            "--timeout",
            "30s",
        ];
        args.extend(extra);
        stack_as(&proxy.kubeconfig, &args)
    }

    fn present(&self, name: &str) -> bool {
        exists("configmap", Some(&self.ns.0), name)
    }
}

fn deletes_of(proxy: &Proxy, name: &str) -> usize {
    proxy
        .records()
        .iter()
        .filter(|r| r.method() == "DELETE" && r.path().ends_with(&format!("/configmaps/{name}")))
        .count()
}

fn a_refused_delete_stops_the_run(code: u16) {
    let _logs = start();
    let stack = Stack::seed(&format!("refused{code}"));
    let proxy = Proxy::start(&["--refuse-delete", &format!("dependent={code}")]);
    let run = stack.prune(&proxy, &[]).expect_code(5);
    assert!(stack.present("dependent"), "the refused object is still there");
    assert!(
        stack.present("base"),
        "what a refused object needs is not deleted:\n{}",
        run.stderr
    );
    assert_eq!(deletes_of(&proxy, "base"), 0, "the next wave never started");
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(
        all.contains("failed: ConfigMap/") && all.contains("still there"),
        "the failure says the object is still there:\n{all}"
    );
    assert!(all.contains(" 0 already gone") && !all.contains("another UID"), "{all}");
}

#[test]
fn a_delete_refused_with_409_is_a_failure_not_a_replacement() {
    a_refused_delete_stops_the_run(409);
}

#[test]
fn a_delete_refused_with_404_is_a_failure_not_already_gone() {
    a_refused_delete_stops_the_run(404);
}

#[test]
fn a_server_dry_run_stops_at_a_refused_wave_as_the_real_run_would() {
    let _logs = start();
    let stack = Stack::seed("refuseddry");
    let proxy = Proxy::start(&["--refuse-delete", "dependent=403"]);
    let run = stack.prune(&proxy, &["--dry-run=server"]).expect_code(5);
    assert_eq!(
        deletes_of(&proxy, "base"),
        0,
        "the dry run did not go on to the next wave:\n{}",
        run.stdout
    );
    assert!(stack.present("dependent") && stack.present("base"));
}
