#!/usr/bin/env bash
# Runs every test of kubectl-stack on a fresh machine: installs what is missing, builds and starts
# the real test cluster (etcd + kube-apiserver + kube-controller-manager), then runs the checks
# and the whole test suite against it. This is the command CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v cargo >/dev/null || { echo "cargo is required (rustup.rs)" >&2; exit 1; }
command -v kubectl >/dev/null || {
  echo "test.sh: installing kubectl" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null
}

command -v tmux >/dev/null || {
  echo "test.sh: installing tmux (the prompt is tested in a real terminal)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
}

cleanup() {
  status=$?
  if [ "$status" -ne 0 ]; then scripts/test-cluster.sh logs 30 >&2 || true; fi
  [ "${KEEP_CLUSTER:-}" = 1 ] || scripts/test-cluster.sh stop || true
  exit "$status"
}
trap cleanup EXIT

echo "== test cluster" >&2
start=$(date +%s)
eval "$(scripts/test-cluster.sh start)"
echo "   ready in $(( $(date +%s) - start ))s: $STACK_TEST_KUBECONFIG" >&2

echo "== format and lint" >&2
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings

echo "== tests (unit, end-to-end against the real cluster, and the benchmarks' smoke form)" >&2
log=$(mktemp)
set +e
# `--benches` runs the benchmarks in their smoke form, unoptimised, with their bounds.
# Ignored tests are known-broken promises (`#[ignore = "issue N: ..."]`): listed, not run.
cargo test --locked --no-fail-fast --lib --bins --tests --benches 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^passed;?$/) s += $(i - 1)} END {print s + 0}' "$log")
failed=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^failed;?$/) s += $(i - 1)} END {print s + 0}' "$log")
ignored=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^ignored;?$/) s += $(i - 1)} END {print s + 0}' "$log")
echo
grep -E '^test .* \.\.\. ignored, ' "$log" | sed 's/^test /known broken: /' || true
rm -f "$log"
echo "tests: $passed passed, $failed failed, $ignored ignored (known broken)"
exit "$status"
