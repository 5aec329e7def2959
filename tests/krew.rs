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
        check(
            sha.chars().any(|c| c != '0'),
            &format!("sha256 of {key} is a placeholder (all zeros)"),
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
        let helper = if os == "windows" {
            "kubectl_complete-stack.cmd"
        } else {
            "kubectl_complete-stack"
        };
        check(
            files.iter().any(|f| f["from"] == helper && f["to"] == "."),
            &format!("completion helper {helper} is installed for {key}"),
        );
    }
    for platform in &selectors {
        check(
            RELEASED_PLATFORMS.contains(&platform.as_str()),
            &format!("platform {platform} is not built by the release workflow"),
        );
    }
    problems
}

/// The platforms `.github/workflows/release.yml` builds.
const RELEASED_PLATFORMS: [&str; 5] = [
    "linux/amd64",
    "linux/arm64",
    "darwin/amd64",
    "darwin/arm64",
    "windows/amd64",
];

/// The manifest the release publishes: every released platform, each once.
fn validate_release(manifest: &Value) -> Vec<String> {
    let mut problems = validate(manifest);
    let platforms = manifest["spec"]["platforms"].as_array().cloned().unwrap_or_default();
    for wanted in RELEASED_PLATFORMS {
        let (os, arch) = wanted.split_once('/').unwrap();
        if !platforms
            .iter()
            .any(|p| p["selector"]["matchLabels"]["os"] == os && p["selector"]["matchLabels"]["arch"] == arch)
        {
            problems.push(format!("platform {wanted} missing"));
        }
    }
    problems
}

/// Runs scripts/release.sh with arguments; returns its stdout, failing the test when it fails.
fn release(args: &[&str]) -> String {
    let output = Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "release.sh {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn temp_dist() -> PathBuf {
    let dir = std::env::temp_dir().join(common::unique("dist"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn platform_entry(manifest: &Value, os: &str, arch: &str) -> Value {
    manifest["spec"]["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["selector"]["matchLabels"]["os"] == os && p["selector"]["matchLabels"]["arch"] == arch)
        .unwrap_or_else(|| panic!("no {os}/{arch} entry"))
        .clone()
}

fn archive_listing(archive: &Path) -> String {
    let listing = Command::new("tar").arg("tzvf").arg(archive).output().unwrap();
    String::from_utf8_lossy(&listing.stdout).into_owned()
}

fn archive_contents(archive: &Path) -> BTreeSet<String> {
    archive_listing(archive)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(str::to_string)
        .collect()
}

#[test]
fn plugin_yaml_follows_krews_rules() {
    let committed = yaml(&root().join("plugin.yaml"));
    let problems = validate(&committed);
    assert!(problems.is_empty(), "{problems:#?}");
    let template = std::fs::read_to_string(root().join("krew/.krew.yaml")).unwrap();
    assert!(
        template.contains("name: stack") && template.contains("{{ .TagName }}") && template.contains("addURIAndSha")
    );
    assert_eq!(template.matches("- selector:").count(), RELEASED_PLATFORMS.len());

    // plugin.yaml is the template rendered with the hashes of what was built: nothing else.
    let dist = temp_dist();
    for platform in committed["spec"]["platforms"].as_array().unwrap() {
        let uri = platform["uri"].as_str().unwrap();
        let name = uri.rsplit('/').next().unwrap();
        let sha = platform["sha256"].as_str().unwrap();
        std::fs::write(dist.join(format!("{name}.sha256")), format!("{sha}  {name}\n")).unwrap();
    }
    release(&["--render-manifest", "--dist", dist.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(root().join("plugin.yaml")).unwrap(),
        std::fs::read_to_string(dist.join("plugin.yaml")).unwrap(),
        "plugin.yaml is what scripts/release.sh renders from krew/.krew.yaml"
    );

    // The validator itself rejects what krew rejects, and placeholders.
    let mut broken = committed.clone();
    broken["spec"]["version"] = Value::from("0.1.0");
    let mut second = broken["spec"]["platforms"][0].clone();
    second["sha256"] = Value::from("0".repeat(64));
    broken["spec"]["platforms"].as_array_mut().unwrap().push(second);
    let mut third = broken["spec"]["platforms"][0].clone();
    third["selector"]["matchLabels"]["arch"] = Value::from("arm64");
    third.as_object_mut().unwrap().remove("sha256");
    broken["spec"]["platforms"].as_array_mut().unwrap().push(third);
    let mut fourth = broken["spec"]["platforms"][0].clone();
    fourth["selector"]["matchLabels"]["os"] = Value::from("windows");
    fourth["selector"]["matchLabels"]["arch"] = Value::from("arm64");
    broken["spec"]["platforms"].as_array_mut().unwrap().push(fourth);
    let problems = validate(&broken);
    assert!(problems.iter().any(|p| p.contains("leading v")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("two platforms")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("placeholder")), "{problems:?}");
    assert!(problems.iter().any(|p| p == "sha256 of linux/arm64"), "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("windows/arm64 is not built")),
        "{problems:?}"
    );
    assert!(
        validate_release(&committed).iter().any(|p| p.contains("missing")),
        "a one-platform manifest is not a release manifest"
    );

    // The renderer refuses a placeholder hash instead of publishing it.
    let zero = temp_dist();
    let name = "kubectl-stack_v0.1.0_linux_arm64.tar.gz";
    std::fs::write(
        zero.join(format!("{name}.sha256")),
        format!("{}  {name}\n", "0".repeat(64)),
    )
    .unwrap();
    let refused = Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .args(["--render-manifest", "--dist", zero.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(!zero.join("plugin.yaml").exists());
}

#[test]
fn the_release_archive_matches_this_platforms_entry() {
    let dist = temp_dist();
    let stdout = release(&[
        "--binary",
        env!("CARGO_BIN_EXE_kubectl-stack"),
        "--dist",
        dist.to_str().unwrap(),
    ]);
    let archive = PathBuf::from(stdout.lines().next().unwrap());
    let sha = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sha256 "))
        .unwrap()
        .to_string();

    let rendered = yaml(&dist.join("plugin.yaml"));
    assert!(validate(&rendered).is_empty(), "{:#?}", validate(&rendered));
    assert_eq!(
        rendered["spec"]["platforms"].as_array().unwrap().len(),
        1,
        "only what was built"
    );
    let os = if cfg!(target_os = "linux") {
        "linux"
    } else if cfg!(target_os = "macos") {
        "darwin"
    } else {
        "windows"
    };
    let arch = if cfg!(target_arch = "x86_64") { "amd64" } else { "arm64" };
    let platform = platform_entry(&rendered, os, arch);
    assert_eq!(platform["sha256"], sha.as_str());
    assert_eq!(
        common::sha256_of(&archive),
        sha,
        "the manifest's sha256 is the archive's"
    );
    assert!(platform["uri"]
        .as_str()
        .unwrap()
        .ends_with(archive.file_name().unwrap().to_str().unwrap()));

    let files: BTreeSet<String> = platform["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["from"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        archive_contents(&archive),
        files,
        "files in the manifest are exactly what the archive holds"
    );
    let listing = archive_listing(&archive);
    let bin_line = listing
        .lines()
        .find(|l| l.ends_with(platform["bin"].as_str().unwrap()))
        .unwrap();
    assert!(bin_line.starts_with("-rwx"), "bin is executable: {bin_line}");
}

/// What the release job does with the five binaries it built: one archive each, packed by
/// scripts/release.sh, and one manifest with every platform's real hash.
#[test]
fn the_release_job_packs_every_platform_with_real_hashes() {
    let dist = temp_dist();
    let dist_arg = dist.to_str().unwrap();
    let workflow = std::fs::read_to_string(root().join(".github/workflows/release.yml")).unwrap();
    for platform in RELEASED_PLATFORMS {
        let (os, arch) = platform.split_once('/').unwrap();
        assert!(
            workflow.contains(&format!("os: {os}, arch: {arch},")),
            "release.yml builds {platform}"
        );
        // Stand-ins for the five cross-built binaries (each platform's differs).
        let binary = dist.join(format!("built-{os}-{arch}"));
        std::fs::write(&binary, format!("kubectl-stack for {platform}\n")).unwrap();
        release(&[
            "--binary",
            binary.to_str().unwrap(),
            "--os",
            os,
            "--arch",
            arch,
            "--dist",
            dist_arg,
        ]);
    }
    release(&["--render-manifest", "--dist", dist_arg]);
    let rendered = yaml(&dist.join("plugin.yaml"));
    let problems = validate_release(&rendered);
    assert!(problems.is_empty(), "{problems:#?}");
    let mut hashes = BTreeSet::new();
    for platform in RELEASED_PLATFORMS {
        let (os, arch) = platform.split_once('/').unwrap();
        let entry = platform_entry(&rendered, os, arch);
        let archive = dist.join(format!(
            "kubectl-stack_v{}_{os}_{arch}.tar.gz",
            env!("CARGO_PKG_VERSION")
        ));
        let sha = common::sha256_of(&archive);
        assert_eq!(entry["sha256"], sha.as_str(), "{platform}");
        hashes.insert(sha);
        let files: BTreeSet<String> = entry["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["from"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(archive_contents(&archive), files, "{platform}");
    }
    assert_eq!(hashes.len(), RELEASED_PLATFORMS.len(), "one archive per platform");
    let windows = dist.join(format!(
        "kubectl-stack_v{}_windows_amd64.tar.gz",
        env!("CARGO_PKG_VERSION")
    ));
    assert_eq!(
        archive_contents(&windows),
        BTreeSet::from([
            "LICENSE".to_string(),
            "kubectl-stack.exe".to_string(),
            "kubectl_complete-stack.cmd".to_string()
        ])
    );
    let helper = Command::new("tar")
        .arg("xzOf")
        .arg(&windows)
        .arg("kubectl_complete-stack.cmd")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&helper.stdout),
        "@kubectl-stack.exe __complete -- %*\r\n"
    );
}

/// A folder on PATH holding the plugin as krew would install it.
fn plugin_path() -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(common::unique("plugin-path"));
    std::fs::create_dir_all(&dir).unwrap();
    // Links, not copies: a debug build is hundreds of MiB, and CI's disk is shared.
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kubectl-stack"), dir.join("kubectl-stack")).unwrap();
    std::os::unix::fs::symlink(
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

    // #19.11: the value of -n / --context, not subcommands; -nNS TYPE/ completes names there;
    // --help is no flag of the helper (no help text among the answers).
    let namespaces = kubectl_with_path(&path, &["__complete", "stack", "-n", ""]);
    let offered: Vec<&str> = namespaces.stdout.lines().collect();
    assert!(
        offered.contains(&"kube-system")
            && offered.contains(&"default")
            && !offered.iter().any(|l| l.starts_with("list")),
        "{}",
        namespaces.stdout
    );
    let contexts = kubectl_with_path(&path, &["__complete", "stack", "--context", ""]);
    assert!(
        contexts.stdout.lines().any(|l| l == "test") && !contexts.stdout.contains("list"),
        "{}",
        contexts.stdout
    );
    let namespace = common::Namespace::new("complete");
    common::kubectl(&["create", "configmap", "complete-me", "-n", &namespace.0]).expect_code(0);
    let flag = format!("-n{}", namespace.0);
    let names = kubectl_with_path(&path, &["__complete", "stack", &flag, "stuck", "configmaps/"]);
    assert!(
        names.stdout.lines().any(|l| l == "configmaps/complete-me"),
        "{}\n{}",
        names.stdout,
        names.stderr
    );
    let help = kubectl_with_path(&path, &["__complete", "stack", "--help", ""]);
    assert!(
        !help.stdout.contains("Usage") && help.stdout.lines().any(|l| l.starts_with("prune")),
        "{}",
        help.stdout
    );
}

/// The static completion scripts load in the shells they are for, and register completion for
/// kubectl-stack (not just mention its name).
#[test]
fn completion_scripts_load_in_bash_zsh_and_fish() {
    let dir = std::env::temp_dir().join(common::unique("completion"));
    std::fs::create_dir_all(&dir).unwrap();
    let script = |shell: &str| {
        let path = dir.join(format!("kubectl-stack.{shell}"));
        let run = common::stack(&["completion", shell]).expect_code(0);
        std::fs::write(&path, run.stdout).unwrap();
        path
    };
    let shell = |program: &str, args: &[&str]| {
        let output = Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program} is not installed ({e}): scripts/test.sh installs it"));
        (
            output.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        )
    };

    let bash = script("bash");
    let bash = bash.to_str().unwrap();
    let (ok, out) = shell("bash", &["-n", bash]);
    assert!(ok, "bash -n: {out}");
    let (ok, out) = shell("bash", &["-c", &format!("source {bash} && complete -p kubectl-stack")]);
    assert!(
        ok && out.starts_with("complete ") && out.trim_end().ends_with(" kubectl-stack"),
        "{out}"
    );

    let zsh = script("zsh");
    let zsh = zsh.to_str().unwrap();
    let (ok, out) = shell("zsh", &["-n", zsh]);
    assert!(ok, "zsh -n: {out}");
    let (ok, out) = shell(
        "zsh",
        &[
            "-f",
            "-c",
            &format!("autoload -U compinit && compinit -u -D && source {zsh} && print -r -- $_comps[kubectl-stack]"),
        ],
    );
    assert!(ok && out.trim() == "_kubectl-stack", "{out}");

    let fish = script("fish");
    let fish = fish.to_str().unwrap();
    let (ok, out) = shell("fish", &["--no-execute", fish]);
    assert!(ok, "fish --no-execute: {out}");
    let (ok, out) = shell(
        "fish",
        &[
            "--no-config",
            "-c",
            &format!("source {fish}; complete -C 'kubectl-stack pru'"),
        ],
    );
    assert!(ok && out.lines().any(|l| l.starts_with("prune")), "{out}");
}
