//! The discovery cache in kubectl's layout (`--cache-dir`): kubectl 1.32 and kubectl-stack read
//! each other's files; completion trusts a fresh cache as kubectl does; `list` revalidates it
//! (a CRD it lacks means fresh discovery); `orphans`/`prune` never plan on it; old files expire.

mod common;
#[path = "proxy/mod.rs"]
mod proxy;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use proxy::Proxy;

fn cache_root() -> PathBuf {
    let dir = std::env::temp_dir().join(unique("kube-cache"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `ROOT/discovery/127.0.0.1_PORT`: the test cluster's folder, named as kubectl names it.
fn server_dir(root: &Path) -> PathBuf {
    let kubeconfig = std::fs::read_to_string(&cluster().admin).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .trim()
        .trim_matches('"');
    let host = server.trim_start_matches("https://").replace(':', "_");
    root.join("discovery").join(host)
}

/// kubectl-stack with `--cache-dir ROOT -v 6` (every request logged on stderr).
fn stack_cached(root: &Path, args: &[&str]) -> Run {
    let mut all = vec!["--cache-dir", root.to_str().unwrap(), "-v", "6"];
    all.extend_from_slice(args);
    stack(&all)
}

fn kubectl_cached(root: &Path, args: &[&str]) -> Run {
    let mut all = vec!["--cache-dir", root.to_str().unwrap(), "-v=6"];
    all.extend_from_slice(args);
    kubectl(&all)
}

/// The discovery requests in a -v 6 log: GET of /api, /apis, or a group version's document.
fn discovery_requests(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let url = line.split_whitespace().find(|w| w.starts_with("https://"))?;
            let path = url.split_once("//")?.1.split_once('/')?.1;
            let path = path.split('?').next()?.trim_end_matches(['"', ']', ',']);
            let segments: Vec<&str> = path.split('/').collect();
            let discovery = matches!(segments.as_slice(), ["api"] | ["apis"] | ["api", _] | ["apis", _, _]);
            discovery.then(|| format!("/{path}"))
        })
        .collect()
}

fn complete(root: &Path, words: &[&str]) -> Run {
    let mut args = vec!["__complete", "--"];
    args.extend_from_slice(words);
    stack_cached(root, &args)
}

fn completions(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .filter(|l| !l.starts_with(':'))
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

#[test]
fn kubectl_reads_our_cache_and_we_read_kubectls() {
    let _logs = start();
    ensure_crds();

    // We write: a read-only command with no cache discovers and fills it, as kubectl would.
    let ours = cache_root();
    stack_cached(&ours, &["list", "-n", "default", "-l", "cache-test=none"]).expect_code(0);
    let dir = server_dir(&ours);
    for file in [
        "servergroups.json",
        "v1/serverresources.json",
        "apps/v1/serverresources.json",
        "stack-test.example.com/v1/serverresources.json",
    ] {
        assert!(dir.join(file).is_file(), "{} missing", dir.join(file).display());
    }
    // kubectl reads it: resolving `cm` and `widgets` needs discovery, and it asks nothing.
    let got = kubectl_cached(&ours, &["get", "cm,widgets", "-A", "-o", "name"]);
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert_eq!(
        discovery_requests(&got.stderr),
        Vec::<String>::new(),
        "kubectl used our cache:\n{}",
        got.stderr
    );

    // kubectl writes, we read: completion asks the server nothing at all.
    let theirs = cache_root();
    let got = kubectl_cached(&theirs, &["get", "cm", "-n", "default", "-o", "name"]);
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert!(
        !discovery_requests(&got.stderr).is_empty(),
        "kubectl discovered (the log is read right)"
    );
    assert!(server_dir(&theirs).join("servergroups.json").is_file());
    let kinds = complete(&theirs, &["stuck", ""]);
    let offered = completions(&kinds);
    for kind in ["configmaps", "deployments.apps", "widgets.stack-test.example.com"] {
        assert!(offered.contains(&kind.to_string()), "{kind} in {offered:?}");
    }
    assert!(
        !kinds.stderr.contains("https://"),
        "completion on kubectl's warm cache sends no request:\n{}",
        kinds.stderr
    );
    // `list` revalidates with the group lists and the CRD names, nothing per group version.
    let listed = stack_cached(&theirs, &["list", "-n", "default", "-l", "cache-test=none"]).expect_code(0);
    let asked = discovery_requests(&listed.stderr);
    assert!(
        asked.iter().all(|p| p == "/api" || p == "/apis"),
        "{asked:?}\n{}",
        listed.stderr
    );
}

/// A new CRD in a group version the cache already holds: `list` still finds its objects (the
/// revalidation sees a CRD the cache lacks), and completion finds the names of a kind the
/// cached answer lacks.
#[test]
fn a_kind_the_cache_lacks_means_fresh_discovery() {
    let _logs = start();
    let root = cache_root();
    let group = format!("{}.cache-test.example.com", unique("g"));
    let crd = |plural: &str, kind: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.{group}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: {plural}, singular: {}, kind: {kind}}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n",
            plural.trim_end_matches('s')
        )
    };
    apply(&crd("firsts", "First"));
    let first = format!("crd/firsts.{group}");
    wait_established(&[first.as_str()], &format!("firsts.{group}"));
    let ns = Namespace::new("cache");
    stack_cached(&root, &["list", "-n", &ns.0, "-l", "cache-test=yes"]).expect_code(0);
    assert!(server_dir(&root).join(&group).join("v1/serverresources.json").is_file());

    apply(&crd("seconds", "Second"));
    let crd_name = format!("crd/seconds.{group}");
    wait_established(&[crd_name.as_str()], &format!("seconds.{group}"));
    apply(&format!(
        "apiVersion: {group}/v1\nkind: Second\nmetadata: {{name: s1, namespace: {ns}, labels: {{cache-test: \"yes\"}}}}\n",
        ns = ns.0
    ));
    let listed = stack_cached(&root, &["list", "-n", &ns.0, "-l", "cache-test=yes", "-o", "name"]).expect_code(0);
    assert_eq!(listed.stdout.trim(), format!("second.{group}/s1"), "{}", listed.stderr);

    // Completion trusts the cache, but a kind it cannot resolve makes it ask again.
    let namespace_flag = format!("-n{}", ns.0);
    let names = complete(&root, &[&namespace_flag, "stuck", &format!("seconds.{group}/")]);
    assert_eq!(completions(&names), [format!("seconds.{group}/s1")], "{}", names.stderr);
}

/// Files older than kubectl's TTL (6 hours) are not used; fresh ones are, as kubectl trusts
/// them, by completion; `orphans` never plans on them.
#[test]
fn old_cache_files_expire_and_orphans_never_trusts_the_cache() {
    let _logs = start();
    let root = cache_root();
    stack_cached(&root, &["list", "-n", "default", "-l", "cache-test=none"]).expect_code(0);
    let core = server_dir(&root).join("v1/serverresources.json");
    // Doctor the cache: the core group without ConfigMaps.
    let mut list: serde_json::Value = serde_json::from_slice(&std::fs::read(&core).unwrap()).unwrap();
    list["resources"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["name"] != "configmaps");
    std::fs::write(&core, serde_json::to_vec(&list).unwrap()).unwrap();

    let kinds = completions(&complete(&root, &["stuck", "config"]));
    assert!(
        !kinds.contains(&"configmaps".to_string()),
        "a fresh file is trusted: {kinds:?}"
    );

    // orphans plans on fresh discovery: the ConfigMap the doctored cache hides is an orphan.
    let ns = Namespace::new("cache-orphans");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: gone, namespace: {ns}, labels: {{cache-test: orphan, {flux}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {ns}, labels: {{cache-test: orphan, {flux}}}}}\n",
        flux = format!(
            "kustomize.toolkit.fluxcd.io/name: cache, kustomize.toolkit.fluxcd.io/namespace: {}",
            ns.0
        ),
        ns = ns.0
    ));
    let desired = temp_file(
        "desired.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept, namespace: {}}}\n",
            ns.0
        ),
    );
    let orphans = stack_cached(
        &root,
        &[
            "orphans",
            "-n",
            &ns.0,
            "-l",
            "cache-test=orphan",
            "--untracked",
            "-f",
            desired.to_str().unwrap(),
            "-o",
            "name",
        ],
    );
    assert_eq!(orphans.code, 1, "{}\n{}", orphans.stdout, orphans.stderr);
    assert_eq!(orphans.stdout.trim(), "configmap/gone");
    // ... and refreshed the cache on the way.
    let refreshed = std::fs::read_to_string(&core).unwrap();
    assert!(refreshed.contains("\"configmaps\""));

    // Doctor again, and age the file past 6 hours: it is not used.
    std::fs::write(&core, serde_json::to_vec(&list).unwrap()).unwrap();
    let aged = Command::new("touch")
        .args(["-d", "7 hours ago"])
        .arg(&core)
        .status()
        .unwrap();
    assert!(aged.success());
    let kinds = completions(&complete(&root, &["stuck", "config"]));
    assert!(kinds.contains(&"configmaps".to_string()), "{kinds:?}");
}

/// A kind that answers 404 to a LIST although the (cached, revalidated) catalog serves it, as
/// when its CRD changed after discovery, makes `list` discover afresh once and list it again,
/// never take it as a kind without objects (the proxy answers the first LIST of the namespace's
/// ConfigMaps 404).
#[test]
fn a_list_answered_404_rediscovers_once_and_lists_again() {
    let _logs = start();
    let ns = Namespace::new("notserved");
    let run = unique("n");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: here, namespace: {}, annotations: {{config.k8s.io/owning-inventory: {run}}}}}\n",
        ns.0
    ));
    // The cache is revalidated against the server's groups and CRDs: another binary's CRD that
    // finishes going between the two runs (the garbage collector is slow on a busy machine) makes
    // the second run's cache stale for a reason of its own. Such an attempt proves nothing either
    // way and is repeated with a new cache; its debug log says why it discovered afresh.
    for attempt in 1..=3 {
        match list_twice_with_a_404(&ns.0, &run) {
            Some(()) => return,
            None => eprintln!("attempt {attempt}: the cluster's groups or CRDs changed between the runs"),
        }
    }
    panic!("the cluster's groups or CRDs changed between the two runs of every attempt");
}

/// One attempt of [`a_list_answered_404_rediscovers_once_and_lists_again`]; `None` when the
/// second run found the cache stale because the cluster changed (not because of the 404).
fn list_twice_with_a_404(namespace: &str, run: &str) -> Option<()> {
    let root = cache_root();
    let root = root.to_str().unwrap();
    let tracker = format!("kpt={run}");
    let args = [
        "--cache-dir",
        root,
        "-v",
        "4",
        "list",
        "-n",
        namespace,
        "--tracker",
        &tracker,
        "-o",
        "name",
    ];
    let path = format!("/api/v1/namespaces/{namespace}/configmaps");
    // The second LIST of them (the second run's) is answered 404.
    let proxy = Proxy::start(&["--not-found-at", &format!("{path}=2")]);
    // The first run discovers (no cache yet) and fills the cache.
    let listed = stack_as(&proxy.kubeconfig, &args);
    assert_eq!(
        (listed.code, listed.stdout.as_str()),
        (0, "configmap/here\n"),
        "{}",
        listed.stderr
    );
    proxy.clear();
    // The second takes the catalog from the cache, meets the 404, discovers afresh, lists again.
    let listed = stack_as(&proxy.kubeconfig, &args);
    assert_eq!(
        (listed.code, listed.stdout.as_str()),
        (0, "configmap/here\n"),
        "{}",
        listed.stderr
    );
    let cluster_changed = [
        "discovery cache is stale: the server's groups",
        "discovery cache is stale: it lacks the CRDs",
        "discovery cache is stale: a group version it lists is gone",
    ];
    if cluster_changed.iter().any(|reason| listed.stderr.contains(reason)) {
        return None;
    }
    let records = proxy.records();
    let not_found = records
        .iter()
        .position(|r| r.fault() == Some("not-found"))
        .expect("the proxy answered the LIST 404");
    // The core group version is in the cache: asked for only once the 404 made discovery run
    // afresh (a group another test adds meanwhile may be asked for earlier: the cache lacks it).
    let core = |r: &&proxy::Record| r.is_group_version_discovery() && r.path() == "/api/v1";
    assert!(
        !records[..not_found].iter().any(|r| core(&r)),
        "the catalog came from the cache\n{}",
        listed.stderr
    );
    assert!(
        records[not_found..].iter().any(|r| core(&r)),
        "the 404 made discovery run afresh"
    );
    assert_eq!(
        records.iter().filter(|r| r.path() == path).count(),
        2,
        "listed again once"
    );
    Some(())
}
