//! Shipping as a kubectl plugin: plugin.yaml by krew's rules, the release archive, kubectl's
//! plugin discovery, help, and plugin completion.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: &Path) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn is_semver_with_v(version: &str) -> bool {
    let Some(rest) = version.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) && (p.len() == 1 || !p.starts_with('0')))
}

/// krew's validation of a plugin manifest, as far as it can be checked without downloading.
fn validate(manifest: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_string());
        }
    };
    check(
        manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2",
        "apiVersion",
    );
    check(manifest["kind"] == "Plugin", "kind");
    let name = manifest["metadata"]["name"].as_str().unwrap_or("");
    check(
        name == "stack",
        "name must be stack (krew-index file plugins/stack.yaml)",
    );
    check(
        name.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "name characters",
    );
    let spec = &manifest["spec"];
    let version = spec["version"].as_str().unwrap_or("");
    check(is_semver_with_v(version), "version: semver with a leading v");
    check(
        version == format!("v{}", env!("CARGO_PKG_VERSION")),
        "version matches Cargo.toml",
    );
    for field in ["homepage", "shortDescription", "description", "caveats"] {
        check(spec[field].as_str().is_some_and(|s| !s.trim().is_empty()), field);
    }
    check(
        spec["shortDescription"].as_str().is_some_and(|s| s.len() <= 50),
        "shortDescription at most 50 characters",
    );
    let platforms = spec["platforms"].as_array().cloned().unwrap_or_default();
    check(!platforms.is_empty(), "platforms");
    let mut selectors = BTreeSet::new();
    for platform in &platforms {
        let labels = platform["selector"]["matchLabels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        check(!labels.is_empty(), "selector must not be empty");
        check(
            labels.keys().all(|k| k == "os" || k == "arch"),
            "selector keys only os and arch",
        );
        check(
            platform["selector"]
                .as_object()
                .is_some_and(|s| s.keys().all(|k| k == "matchLabels")),
            "matchLabels only",
        );
        let key = format!(
            "{}/{}",
            labels.get("os").and_then(Value::as_str).unwrap_or(""),
            labels.get("arch").and_then(Value::as_str).unwrap_or("")
        );
        check(
            selectors.insert(key.clone()),
            &format!("two platforms with selector {key}"),
        );
        let (os, arch) = key.split_once('/').unwrap();
        let uri = platform["uri"].as_str().unwrap_or("");
        check(uri.starts_with("https://"), "uri https");
        check(
            uri.ends_with(&format!("/{version}/kubectl-stack_{version}_{os}_{arch}.tar.gz")),
            &format!("uri naming scheme for {key}: {uri}"),
        );
        let sha = platform["sha256"].as_str().unwrap_or("");
        check(
            sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            &format!("sha256 of {key}"),
        );
        let bin = platform["bin"].as_str().unwrap_or("");
        check(!bin.is_empty(), "bin");
        let files = platform["files"].as_array().cloned().unwrap_or_default();
        check(!files.is_empty(), "files");
        check(
            files
                .iter()
                .all(|f| f["from"].as_str().is_some_and(|s| !s.is_empty()) && f["to"].as_str().is_some()),
            "files from/to",
        );
        check(
            files.iter().any(|f| f["from"] == bin && f["to"] == "."),
            &format!("bin {bin} is installed by files for {key}"),
        );
        check(bin.ends_with(".exe") == (os == "windows"), "windows bin ends with .exe");
    }
    for os in ["linux", "darwin", "windows"] {
        for arch in ["amd64", "arm64"] {
            check(
                selectors.contains(&format!("{os}/{arch}")),
                &format!("platform {os}/{arch}"),
            );
        }
    }
    problems
}

#[test]
fn plugin_yaml_follows_krews_rules() {
    let problems = validate(&yaml(&root().join("plugin.yaml")));
    assert!(problems.is_empty(), "{problems:#?}");
    let template = std::fs::read_to_string(root().join("krew/.krew.yaml")).unwrap();
    assert!(
        template.contains("name: stack") && template.contains("{{ .TagName }}") && template.contains("addURIAndSha")
    );
    assert_eq!(template.matches("- selector:").count(), 6);

    // The validator itself rejects what krew rejects.
    let mut broken = yaml(&root().join("plugin.yaml"));
    broken["spec"]["version"] = Value::from("0.1.0");
    broken["spec"]["platforms"][1]["selector"]["matchLabels"] =
        broken["spec"]["platforms"][0]["selector"]["matchLabels"].clone();
    broken["spec"]["platforms"][2]["sha256"] = Value::from("abc");
    let problems = validate(&broken);
    assert!(problems.iter().any(|p| p.contains("leading v")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("two platforms")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("sha256")), "{problems:?}");
}

#[test]
fn the_release_archive_matches_this_platforms_entry() {
    let output = Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_kubectl-stack")])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let archive = root().join(stdout.lines().next().unwrap());
    let sha = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sha256 "))
        .unwrap()
        .to_string();

    let rendered = yaml(&root().join("dist/plugin.yaml"));
    assert!(validate(&rendered).is_empty(), "{:#?}", validate(&rendered));
    let os = if cfg!(target_os = "linux") {
        "linux"
    } else if cfg!(target_os = "macos") {
        "darwin"
    } else {
        "windows"
    };
    let arch = if cfg!(target_arch = "x86_64") { "amd64" } else { "arm64" };
    let platform = rendered["spec"]["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["selector"]["matchLabels"]["os"] == os && p["selector"]["matchLabels"]["arch"] == arch)
        .unwrap()
        .clone();
    assert_eq!(platform["sha256"], sha.as_str());
    let actual = common::sha256_of(&archive);
    assert_eq!(actual, sha, "the manifest's sha256 is the archive's");
    assert!(platform["uri"]
        .as_str()
        .unwrap()
        .ends_with(archive.file_name().unwrap().to_str().unwrap()));

    let listing = Command::new("tar").arg("tzvf").arg(&archive).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    let contents: BTreeSet<String> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(str::to_string)
        .collect();
    let files: BTreeSet<String> = platform["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["from"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        contents, files,
        "files in the manifest are exactly what the archive holds"
    );
    let bin_line = listing
        .lines()
        .find(|l| l.ends_with(platform["bin"].as_str().unwrap()))
        .unwrap();
    assert!(bin_line.starts_with("-rwx"), "bin is executable: {bin_line}");

    // The rendered manifest differs from plugin.yaml only in sha256 values.
    let strip = |text: String| {
        text.lines()
            .filter(|l| !l.trim_start().starts_with("sha256:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(std::fs::read_to_string(root().join("plugin.yaml")).unwrap()),
        strip(std::fs::read_to_string(root().join("dist/plugin.yaml")).unwrap())
    );
}

/// A folder on PATH holding the plugin as krew would install it.
fn plugin_path() -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(common::unique("plugin-path"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_kubectl-stack"), dir.join("kubectl-stack")).unwrap();
    std::fs::copy(
        root().join("scripts/kubectl_complete-stack"),
        dir.join("kubectl_complete-stack"),
    )
    .unwrap();
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    (dir, path)
}

fn kubectl_with_path(path: &str, args: &[&str]) -> common::Run {
    let output = Command::new("kubectl")
        .args(args)
        .env("PATH", path)
        .env("KUBECONFIG", &common::cluster().admin)
        .output()
        .unwrap();
    common::Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn kubectl_finds_runs_and_completes_the_plugin() {
    let _logs = common::start();
    let (dir, path) = plugin_path();
    let listed = kubectl_with_path(&path, &["plugin", "list"]);
    assert!(
        listed.stdout.contains(&dir.join("kubectl-stack").display().to_string()),
        "{}\n{}",
        listed.stdout,
        listed.stderr
    );

    let help = kubectl_with_path(&path, &["stack", "--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(help.stdout.contains("Usage: kubectl stack"), "{}", help.stdout);
    let wrong = kubectl_with_path(&path, &["stack", "lsit"]);
    assert_eq!(wrong.code, 2);
    assert!(wrong.stderr.contains("kubectl stack"), "{}", wrong.stderr);

    let subcommands = kubectl_with_path(&path, &["__complete", "stack", "pru"]);
    assert!(
        subcommands.stdout.lines().any(|l| l.starts_with("prune")),
        "{}\n{}",
        subcommands.stdout,
        subcommands.stderr
    );
    let contexts = kubectl_with_path(&path, &["__complete", "stack", "list", "--context", ""]);
    assert!(contexts.stdout.lines().any(|l| l == "test"), "{}", contexts.stdout);
    let namespaces = kubectl_with_path(&path, &["__complete", "stack", "list", "-n", "kube-"]);
    assert!(
        namespaces.stdout.lines().any(|l| l == "kube-system"),
        "{}",
        namespaces.stdout
    );
    let kinds = kubectl_with_path(&path, &["__complete", "stack", "stuck", "config"]);
    assert!(
        kinds.stdout.lines().any(|l| l.starts_with("configmaps")),
        "{}",
        kinds.stdout
    );
    let flags = kubectl_with_path(&path, &["__complete", "stack", "prune", "--dry"]);
    assert!(
        flags.stdout.lines().any(|l| l.starts_with("--dry-run")),
        "{}",
        flags.stdout
    );

    let bash = common::stack(&["completion", "bash"]).expect_code(0);
    assert!(bash.stdout.contains("kubectl-stack"));
}
