#!/usr/bin/env bash
# Scale check: 100,000 ConfigMaps (20,000 tracked by a Flux-style label, the rest untracked) in
# 10 namespaces, then the time and peak memory of listing them several ways.
# Usage: scripts/bench-scale.sh [OBJECTS]   (default 100000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
total="${1:-100000}"
cargo build --release --quiet
bin="$PWD/target/release/kubectl-stack"
eval "$(scripts/test-cluster.sh start)"
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
if ! kubectl get ns scale-0 >/dev/null 2>&1; then
  echo "scale: seeding $total ConfigMaps" >&2
  for i in $(seq 0 9); do kubectl create ns "scale-$i" >/dev/null; done
  python3 - "$total" "$work" <<'PY'
import json, sys
total, work = int(sys.argv[1]), sys.argv[2]
chunk, items, n = 0, [], 0
for i in range(total):
    labels = {"kustomize.toolkit.fluxcd.io/name": "scale", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"} if i % 5 == 0 else {"noise": "yes"}
    items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": f"scale-{i % 10}", "labels": labels}, "data": {"k": "v"}})
    if len(items) == 2000:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(f"{work}/c{chunk}.json", "w")); chunk += 1; items = []
if items:
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(f"{work}/c{chunk}.json", "w"))
PY
  ls "$work"/c*.json | xargs -P 4 -n 1 sh -c 'kubectl create -f "$0" >/dev/null'
fi
measure() {  # label, command...
  local label="$1"; shift
  /usr/bin/time -f "%e s, %M KiB" -o "$work/t" "$@" >"$work/out" 2>/dev/null || true
  echo "$label: $(wc -l <"$work/out") lines, $(cat "$work/t")"
}
measure "list --tracker flux=scale (server-side label selector)" "$bin" list -A --tracker flux=scale.flux-system -o name
measure "list (every tool's mark, filtered client-side)        " "$bin" list -A -o name
measure "stuck -A (every object, only terminating kept)         " "$bin" stuck -A
measure "kubectl get configmaps -A -l (baseline)                " kubectl get configmaps -A -l kustomize.toolkit.fluxcd.io/name=scale -o name
