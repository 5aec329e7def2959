//! No Secret data is ever printed: a kapp-applied Secret whose annotations copy its content
//! (kapp's `kapp.k14s.io/original` and diffs, kubectl's last-applied copy, a base64-of-gzip copy
//! under another name), run through every output format of `list`, `orphans`, `graph`, `prune`
//! and `stuck`, at `-v 0` and `-v 9`, with stdout and stderr searched for the data in its stored
//! (base64), decoded and gunzipped forms.

mod common;

use std::io::Write;

use base64::Engine;
use common::*;

const PLAIN_TOKEN: &str = "plain-secret-token-4e7a";
const PASSWORD: &str = "data-secret-pass-91c3";
const ZIPPED: &str = "gzip-secret-blob-c05d";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn gzip(text: &str) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    encoder.finish().unwrap()
}

/// Every form the data could be printed in.
fn forbidden() -> Vec<String> {
    vec![
        PLAIN_TOKEN.to_string(),
        b64(PLAIN_TOKEN.as_bytes()),
        PASSWORD.to_string(),
        b64(PASSWORD.as_bytes()),
        ZIPPED.to_string(),
        b64(&gzip(ZIPPED)),
    ]
}

fn assert_no_secret(run: &Run, what: &str) {
    for secret in forbidden() {
        assert!(
            !run.stdout.contains(&secret) && !run.stderr.contains(&secret),
            "{what}: {secret:?} was printed\nstdout:\n{}\nstderr:\n{}",
            run.stdout,
            run.stderr
        );
    }
}

/// No `data` or `stringData` anywhere in a JSON document.
fn assert_no_data_field(value: &serde_json::Value, what: &str) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                assert!(key != "data" && key != "stringData", "{what}: a `{key}` field: {value}");
                assert_no_data_field(inner, what);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| assert_no_data_field(item, what)),
        _ => {}
    }
}

#[test]
fn secret_data_is_printed_in_no_output_format_and_at_no_log_level() {
    let _logs = start();
    let ns = Namespace::new("secrets");
    let app = unique("kapp-app");
    // What kapp records in `kapp.k14s.io/original`: the applied Secret, compact JSON.
    let original = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "leaky", "namespace": ns.0, "labels": {"kapp.k14s.io/app": app}},
        "stringData": {"token": PLAIN_TOKEN},
        "data": {"password": b64(PASSWORD.as_bytes()), "blob": b64(&gzip(ZIPPED))},
    })
    .to_string();
    let archived = b64(&gzip(&original));
    let manifest = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": "leaky", "namespace": ns.0,
            "labels": {"kapp.k14s.io/app": app, "kapp.k14s.io/association": "v1.leaky"},
            "annotations": {
                // kapp's identity annotation (carvel-dev/kapp `pkg/kapp/resources/identity_annotation.go`):
                // without it kapp calls the object transient and never deletes it.
                "kapp.k14s.io/identity": format!("v1;{}//Secret/leaky;v1", ns.0),
                "kapp.k14s.io/original": original,
                "kapp.k14s.io/original-diff-md5": "58e0494c51d30eb3494f7c9198986bb9",
                "kapp.k14s.io/original-diff": format!("  - replace /data/password value={}", b64(PASSWORD.as_bytes())),
                "example.com/archived-copy": archived,
                "example.com/owner": "team-a",
            },
            "finalizers": ["stack-test.example.com/hold"],
        },
        "stringData": {"token": PLAIN_TOKEN},
        "data": {"password": b64(PASSWORD.as_bytes()), "blob": b64(&gzip(ZIPPED))},
    });
    // kubectl apply adds its own copy: kubectl.kubernetes.io/last-applied-configuration.
    apply(&manifest.to_string());
    apply(&kapp_app_record(&ns.0, &app));
    let other = temp_file(
        "desired.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: other, namespace: {}}}\n",
            ns.0
        ),
    );
    let other = other.to_str().unwrap();
    let tracker = format!("kapp={app}");
    let scope = ["-n", ns.0.as_str(), "--tracker", tracker.as_str()];

    let mut runs: Vec<(String, Vec<String>, i32)> = Vec::new();
    for output in ["table", "wide", "name", "json", "yaml"] {
        runs.push((
            format!("list -o {output}"),
            vec!["list".into(), "-o".into(), output.into()],
            0,
        ));
        runs.push((
            format!("orphans -o {output}"),
            vec!["orphans".into(), "-f".into(), other.into(), "-o".into(), output.into()],
            1,
        ));
    }
    for output in ["tree", "dot", "mermaid", "json"] {
        runs.push((
            format!("graph --members -o {output}"),
            vec!["graph".into(), "--members".into(), "-o".into(), output.into()],
            0,
        ));
    }
    for output in ["table", "json"] {
        runs.push((
            format!("prune --dry-run -o {output}"),
            vec![
                "prune".into(),
                "-f".into(),
                other.into(),
                "--dry-run".into(),
                "-o".into(),
                output.into(),
            ],
            0,
        ));
    }
    for (what, args, code) in &runs {
        for verbosity in ["0", "9"] {
            let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
            all.extend_from_slice(&scope);
            all.extend_from_slice(&["-v", verbosity]);
            let run = stack(&all);
            assert_eq!(run.code, *code, "{what} -v {verbosity}: {run:?}");
            assert!(
                run.stdout.contains("leaky"),
                "{what}: the Secret is not in the output:\n{}",
                run.stdout
            );
            assert_no_secret(&run, &format!("{what} -v {verbosity}"));
            if what.ends_with("-o json") && !what.starts_with("prune") {
                assert_no_data_field(&run.json(), what);
            }
        }
    }
    // A Secret shows only the trackers' marks (its kapp identity); any other annotation value
    // is redacted, whatever it holds (issue 26 item 5: a blocklist of encodings misses one).
    let listed = stack(&["list", "-n", &ns.0, "--tracker", &tracker, "-o", "json"]).expect_code(0);
    let annotations = &listed.json()["items"][0]["metadata"]["annotations"];
    assert_eq!(
        annotations["example.com/owner"], "<redacted: a Secret's annotation>",
        "{annotations}"
    );
    assert!(
        annotations["kapp.k14s.io/identity"]
            .as_str()
            .is_some_and(|v| v.contains("/Secret/")),
        "{annotations}"
    );
    assert!(annotations.get("kapp.k14s.io/original").is_none());
    assert!(annotations
        .get("kubectl.kubernetes.io/last-applied-configuration")
        .is_none());

    // Being deleted, held by its finalizer: `stuck` in every format.
    assert_eq!(
        kubectl(&["delete", "secret", "leaky", "-n", &ns.0, "--wait=false"]).code,
        0
    );
    for output in ["text", "json", "yaml"] {
        for verbosity in ["0", "9"] {
            let run = stack(&["stuck", "-n", &ns.0, "-o", output, "-v", verbosity]);
            let run_named = stack(&["stuck", "-n", &ns.0, "secrets/leaky", "-o", output, "-v", verbosity]);
            for run in [run, run_named] {
                assert_eq!(run.code, 1, "stuck -o {output}: {run:?}");
                assert!(run.stdout.contains("leaky"), "{}", run.stdout);
                assert_no_secret(&run, &format!("stuck -o {output} -v {verbosity}"));
                if output == "json" {
                    assert_no_data_field(&run.json(), "stuck -o json");
                }
            }
        }
    }
    release_finalizers("secret/leaky", &ns.0);
}

#[test]
fn a_manifest_that_does_not_parse_is_reported_without_its_content() {
    let _logs = start();
    let broken = temp_file(
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\nstringData:\n  token: manifest-secret-6b1f\n  key: [manifest-secret-key\n",
    );
    let json = temp_file(
        "secret.json",
        "{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"stringData\": {\"token\": \"json-manifest-secret-2a7c\" \"x\"}}",
    );
    for (file, line) in [(&broken, ":6:"), (&json, ":1:")] {
        let run = stack(&["orphans", "-n", "default", "-l", "x=y", "-f", file.to_str().unwrap()]).expect_code(2);
        assert!(run.stderr.contains(line), "{}", run.stderr);
        for secret in [
            "manifest-secret-6b1f",
            "manifest-secret-key",
            "json-manifest-secret-2a7c",
        ] {
            assert!(!run.stderr.contains(secret), "{secret} printed:\n{}", run.stderr);
        }
    }
}
