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

echo "== tests (unit and end-to-end against the real cluster)" >&2
log=$(mktemp)
set +e
cargo test --locked --no-fail-fast --lib --bins --tests -- --include-ignored 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^passed;?$/) s += $(i - 1)} END {print s + 0}' "$log")
failed=$(awk '/^test result:/ {for (i = 1; i <= NF; i++) if ($i ~ /^failed;?$/) s += $(i - 1)} END {print s + 0}' "$log")
rm -f "$log"
echo
echo "tests: $passed passed, $failed failed"
exit "$status"
