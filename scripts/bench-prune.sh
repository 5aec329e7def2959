#!/usr/bin/env bash
# Benchmark of `kubectl stack prune` against the usual alternative on the test cluster:
# 2,000 tracked ConfigMaps in 4 dependency waves (config.kubernetes.io/depends-on chains),
# deleted by kubectl-stack (one command) and by `kubectl delete -l wave=N --wait` wave after wave.
# Usage: scripts/bench-prune.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# STACK_BIN=PATH measures an already built binary; BENCH_RTT_MS=50 goes through a latency proxy.
bin="${STACK_BIN:-}"
if [ -z "$bin" ]; then cargo build --release --quiet; bin="$PWD/target/release/kubectl-stack"; fi
eval "$(scripts/test-cluster.sh start)"
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
per_wave=500

seed() {  # namespace
  kubectl create namespace "$1" >/dev/null
  python3 - "$1" "$per_wave" "$work" <<'PY'
import json, sys
ns, per_wave, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
items = []
for wave in range(1, 5):
    for i in range(per_wave):
        meta = {"name": f"w{wave}-{i}", "namespace": ns, "labels": {"bench": "prune", "wave": str(wave)}}
        if wave < 4:
            meta["annotations"] = {"config.kubernetes.io/depends-on": f"/namespaces/{ns}/ConfigMap/w{wave + 1}-{i}"}
        items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})
for c in range(4):
    with open(f"{work}/{ns}-{c}.json", "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items[c::4]}, f)
PY
  ls "$work/$1"-*.json | xargs -P 4 -n 1 sh -c 'kubectl create -f "$0" >/dev/null'
  echo "bench: seeded $(kubectl get cm -n "$1" -l bench=prune -o name | wc -l) ConfigMaps in $1" >&2
}

suffix=$(date +%s)
ns_stack="bench-prune-stack-$suffix"; ns_kubectl="bench-prune-kubectl-$suffix"
seed "$ns_stack"; seed "$ns_kubectl"
# shellcheck source=scripts/bench-remote.sh
source scripts/bench-remote.sh
trap 'bench_remote_cleanup; rm -rf "$work"' EXIT
mkdir -p "$work/empty"

start=$(date +%s.%N)
/usr/bin/time -v -o "$work/time" "$bin" prune -n "$ns_stack" -l bench=prune -f "$work/empty" --allow-empty --yes >"$work/stack.out" 2>"$work/stack.err"
end=$(date +%s.%N)
stack_s=$(echo "$end - $start" | bc)
tail -1 "$work/stack.out"
grep -E '^wave [0-9]+: gone' "$work/stack.err" || true

start=$(date +%s.%N)
for wave in 1 2 3 4; do kubectl delete cm -n "$ns_kubectl" -l "bench=prune,wave=$wave" --wait >/dev/null; done
end=$(date +%s.%N)
kubectl_s=$(echo "$end - $start" | bc)

left_stack=$(kubectl get cm -n "$ns_stack" -l bench=prune -o name | wc -l)
left_kubectl=$(kubectl get cm -n "$ns_kubectl" -l bench=prune -o name | wc -l)
echo "kubectl stack prune:          ${stack_s}s (objects left: $left_stack)"
echo "kubectl delete --wait x 4:    ${kubectl_s}s (objects left: $left_kubectl)"
echo "kubectl-stack peak memory:    $(awk -F: '/Maximum resident/ {gsub(/ /,"",$2); print $2}' "$work/time") KiB"
kubectl delete namespace "$ns_stack" "$ns_kubectl" --wait=false >/dev/null
