//! The GitHub workflows: actionlint and zizmor (offline, default policy) find nothing in them,
//! and they do what the README promises (CI runs scripts/test.sh; a tag releases every platform
//! and hands krew/.krew.yaml to krew-release-bot). The linters are installed by scripts/test.sh;
//! a missing linter fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A linter from `$STACK_LINT_BIN` (set by scripts/test.sh), the default lint venv, or `PATH`.
fn linter(name: &str) -> PathBuf {
    let mut candidates = Vec::new();
    if let Ok(dir) = std::env::var("STACK_LINT_BIN") {
        candidates.push(PathBuf::from(dir).join(name));
    }
    let cache = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Ok(cache) = cache {
        candidates.push(cache.join("kubectl-stack/lint-venv/bin").join(name));
    }
    if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
        return found;
    }
    let on_path = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    let path = String::from_utf8_lossy(&on_path.stdout).trim().to_string();
    assert!(
        on_path.status.success() && !path.is_empty(),
        "{name} is not installed: run scripts/test.sh (it installs the pinned linters)"
    );
    PathBuf::from(path)
}

struct Lint {
    ok: bool,
    report: String,
}

fn actionlint(files: &[&Path]) -> Lint {
    let output = Command::new(linter("actionlint"))
        .args(["-no-color"])
        .args(files)
        .current_dir(root())
        .output()
        .unwrap();
    Lint {
        ok: output.status.success(),
        report: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

fn zizmor(files: &[&Path]) -> Lint {
    let output = Command::new(linter("zizmor"))
        .args(["--offline", "--no-progress", "--color=never"])
        .args(files)
        .current_dir(root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    Lint {
        ok: output.status.success() && stdout.contains("No findings to report"),
        report: format!("{stdout}{}", String::from_utf8_lossy(&output.stderr)),
    }
}

fn workflows() -> Vec<PathBuf> {
    ["ci.yml", "release.yml"]
        .iter()
        .map(|name| root().join(".github/workflows").join(name))
        .collect()
}

#[test]
fn workflows_pass_actionlint_and_zizmor() {
    let files = workflows();
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let lint = actionlint(&files);
    assert!(lint.ok, "actionlint:\n{}", lint.report);
    let lint = zizmor(&files);
    assert!(lint.ok, "zizmor:\n{}", lint.report);
}

/// The linters do fail on what they must: an action pinned by tag, a dangerous trigger,
/// an expression injected into a script, a job that needs an unknown job.
#[test]
fn the_linters_catch_a_broken_workflow() {
    let dir = std::env::temp_dir().join(format!("workflow-lint-{}", std::process::id()));
    std::fs::create_dir_all(dir.join(".github/workflows")).unwrap();
    let broken = dir.join(".github/workflows/broken.yml");
    std::fs::write(
        &broken,
        "name: broken\non: [pull_request_target]\npermissions: write-all\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    needs: [nothing]\n    steps:\n      - uses: actions/checkout@v4\n      - run: echo \"${{ github.event.pull_request.title }}\"\n",
    )
    .unwrap();
    let lint = actionlint(&[&broken]);
    assert!(!lint.ok && lint.report.contains("nothing"), "{}", lint.report);
    let lint = zizmor(&[&broken]);
    assert!(!lint.ok, "{}", lint.report);
    for audit in ["unpinned-uses", "dangerous-triggers", "template-injection"] {
        assert!(lint.report.contains(audit), "zizmor misses {audit}:\n{}", lint.report);
    }
}

fn yaml(path: &Path) -> serde_json::Value {
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn ci_runs_the_readme_test_command_and_release_feeds_krew() {
    let ci = yaml(&root().join(".github/workflows/ci.yml"));
    let triggers = &ci["on"];
    assert!(
        triggers.get("push").is_some() && triggers.get("pull_request").is_some(),
        "{triggers}"
    );
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("scripts/test.sh    # run every test"));
    let steps = ci["jobs"]["test"]["steps"].as_array().unwrap();
    assert!(steps.iter().any(|s| s["run"] == "scripts/test.sh"), "{steps:?}");

    let release = yaml(&root().join(".github/workflows/release.yml"));
    assert_eq!(release["on"]["push"]["tags"][0], "v*");
    assert_eq!(release["permissions"], serde_json::json!({}));
    let targets: Vec<&str> = release["jobs"]["build"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        [
            "x86_64-unknown-linux-musl",
            "aarch64-unknown-linux-musl",
            "x86_64-apple-darwin",
            "aarch64-apple-darwin",
            "x86_64-pc-windows-msvc"
        ]
    );
    let publish = serde_json::to_string(&release["jobs"]["publish"]).unwrap();
    assert!(publish.contains("scripts/release.sh --binary") && publish.contains("--render-manifest"));
    assert_eq!(release["jobs"]["publish"]["permissions"]["contents"], "write");
    let krew = &release["jobs"]["krew-index"];
    assert_eq!(krew["needs"], "publish");
    let bot = krew["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("rajatjindal/krew-release-bot@"))
        })
        .expect("krew-release-bot step");
    assert_eq!(bot["with"]["krew_template_file"], "krew/.krew.yaml");
    // Every action is pinned to a full commit SHA, with the tag named in a comment above it.
    for path in workflows() {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let Some((_, reference)) = line.split_once("uses: ") else {
                continue;
            };
            let sha = reference.split_once('@').map(|(_, sha)| sha.trim()).unwrap_or("");
            assert!(
                sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
                "{}: {line}",
                path.display()
            );
            assert!(
                lines[index - 1].trim_start().starts_with("# ") && lines[index - 1].contains(" v"),
                "{}: the tag of {line} is named in the comment above it",
                path.display()
            );
        }
    }
}
