#!/usr/bin/env bash
# Scale benchmark on the test cluster, each row beside its baseline in one run: OBJECTS ConfigMaps
# tracked by a Flux-style label in 10 namespaces (seeded once, kept for later runs), then the time
# and peak memory (/usr/bin/time -v) of
#   - `list -A -l … -o name` against `kubectl get cm -A -l … -o name`;
#   - `list -A --tracker flux=…` (table);
#   - `prune --dry-run=client` over all of them with the same objects as the desired set (nothing to
#     delete) against `graph` of the same.
#
# Usage: scripts/bench-scale.sh [OBJECTS]      (default 20000; the issue's scale is 50000)
#   STACK_BIN=PATH          the binary measured (default: the release build, built under the lock)
#   STACK_BIN_BEFORE=PATH   a second binary measured in the same run, shown as "before"
#   BENCH_README=1          regenerate README's table
#   BENCH_RTT_MS=50         every call through a 50 ms round-trip proxy (scripts/bench-remote.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
total="${1:-20000}"
bin="${STACK_BIN:-}"
if [ -z "$bin" ]; then
  flock /tmp/cargo.lock nice -n 5 cargo build --release --quiet
  bin="$PWD/target/release/kubectl-stack"
fi
before="${STACK_BIN_BEFORE:-}"
lib="$PWD/scripts/bench_lib.py"
eval "$(scripts/test-cluster.sh start)"
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null
work=$(mktemp -d)
results="$work/results.jsonl"
# shellcheck source=scripts/bench-remote.sh
source scripts/bench-remote.sh
trap 'bench_remote_cleanup; rm -rf "$work"' EXIT
prefix="bench-scale-$total"
selector="kustomize.toolkit.fluxcd.io/name=scale"
tracker="flux=scale.flux-system"

if [ "$(kubectl get cm -A -l "$selector" -o name | grep -c "" || true)" != "$total" ]; then
  echo "bench: seeding $total ConfigMaps (a minute or more)" >&2
  for i in $(seq 0 9); do kubectl create namespace "$prefix-$i" >/dev/null 2>&1 || true; done
  python3 "$lib" scale-lists "$work" "$prefix" "$total"
  ls "$work"/c*.json | xargs -P 4 -n 1 sh -c 'kubectl create -f "$0" >/dev/null 2>&1 || true'
fi
echo "bench: $(kubectl get cm -A -l "$selector" -o name | grep -c "") tracked ConfigMaps" >&2
python3 "$lib" scale-manifest "$work/desired.yaml" "$prefix" "$total"

measure() {  # name command...: writes $work/NAME.json
  local name="$1"; shift
  python3 "$lib" run "$work/$name" -- "$@"
  echo "bench: $name: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["code"], r["out_lines"], "lines", round(r["seconds"],2), "s", r["rss_kib"]//1024, "MB")' "$work/$name.json")" >&2
}

row() {  # work name [baseline-name baseline]
  printf '{"work": "%s", "stack": %s' "$1" "$(cat "$work/$2.json")"
  [ -z "$before" ] || printf ', "before": %s' "$(cat "$work/$2-before.json")"
  [ $# -lt 4 ] || printf ', "baseline_name": "%s", "baseline": %s' "$3" "$(cat "$work/$4.json")"
  printf '}\n'
}

both() {  # name args...: the binary, then the before binary
  local name="$1"; shift
  measure "$name" "$bin" "$@"
  [ -z "$before" ] || measure "$name-before" "$before" "$@"
}

both list-name list -A -l "$selector" -o name
measure kubectl-get kubectl get cm -A -l "$selector" -o name
both list-table list -A --tracker "$tracker"
both dry-run prune -A --tracker "$tracker" -f "$work/desired.yaml" --dry-run=client
both graph graph -A --tracker "$tracker"

{
  row "\`list -A -l\` of $total tracked ConfigMaps, \`-o name\`" list-name "\`kubectl get cm -A -l\`" kubectl-get
  row "\`list -A --tracker …\` of the same, table" list-table
  row "\`prune --dry-run=client\` over the same (nothing to delete)" dry-run "\`graph\` of the same" graph
} >>"$results"
python3 "$lib" table "$results" ${BENCH_README:+README.md bench-scale}
