#!/usr/bin/env bash
# Benchmark of completion: `kubectl stack stuck <TAB>` (kinds) and `kubectl stack stuck
# namespaces/<TAB>` (names), through kubectl's plugin completion exactly as a shell runs it, on a
# warm discovery cache (kubectl's layout, --cache-dir) and on none; kubectl's own
# `kubectl get <TAB>` for comparison; kubectl-stack's own part without kubectl in front.
# Usage: scripts/bench-complete.sh [RUNS]
# STACK_BIN=PATH measures an already built binary; BENCH_RTT_MS=50 goes through a latency proxy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${1:-20}"
bin="${STACK_BIN:-}"
if [ -z "$bin" ]; then cargo build --release --quiet; bin="$PWD/target/release/kubectl-stack"; fi
eval "$(scripts/test-cluster.sh start)"
work=$(mktemp -d)
# shellcheck source=scripts/bench-remote.sh
source scripts/bench-remote.sh
trap 'bench_remote_cleanup; rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/cache"
cp "$bin" "$work/bin/kubectl-stack"
cp scripts/kubectl_complete-stack "$work/bin/"
export PATH="$work/bin:$PATH" KUBECACHEDIR="$work/cache"

# Median, min and max wall time in ms of a command over $runs runs (before each: $prepare).
measure() {
  local label=$1 prepare=$2; shift 2
  python3 - "$label" "$runs" "$prepare" "$@" <<'PY'
import statistics, subprocess, sys, time
label, runs, prepare, command = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
times = []
for _ in range(runs):
    if prepare:
        subprocess.run(prepare, shell=True, check=True)
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True)
    times.append((time.perf_counter() - start) * 1000)
answers = [l for l in out.stdout.splitlines() if not l.startswith(":")]
print(f"{label}: median {statistics.median(times):.0f} ms, min {min(times):.0f}, max {max(times):.0f} ({len(answers)} answers)")
PY
}

kubectl stack stuck -n default >/dev/null 2>&1 || true   # kubectl finds the plugin
measure "kubectl stack stuck <TAB>, warm cache       " "" kubectl __complete stack stuck ""
measure "kubectl stack stuck namespaces/<TAB>, warm  " "" kubectl __complete stack stuck namespaces/
measure "kubectl stack stuck <TAB>, no cache         " "rm -rf $work/cache/discovery" kubectl __complete stack stuck ""
measure "kubectl-stack __complete (no kubectl), warm " "" kubectl-stack __complete -- stuck ""
measure "kubectl-stack __complete (no kubectl), cold " "rm -rf $work/cache/discovery" kubectl-stack __complete -- stuck ""
kubectl get cm >/dev/null 2>&1 || true
measure "kubectl get <TAB> (kubectl's own), warm     " "" kubectl __complete get ""
