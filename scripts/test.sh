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
CI="${CI:-}" cargo test --locked --no-fail-fast -- --include-ignored
