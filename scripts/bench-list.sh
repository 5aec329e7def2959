#!/usr/bin/env bash
# Benchmark of `kubectl stack list` against the usual kubectl alternative on the test cluster:
# seeds 10,000 tracked objects over 22 kinds (8 built-in, 14 custom) plus 2,000 untracked ones,
# then times both and reports kubectl-stack's peak memory. Usage: scripts/bench-list.sh [RUNS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${1:-3}"
# STACK_BIN=PATH measures an already built binary; BENCH_RTT_MS=50 goes through a latency proxy.
bin="${STACK_BIN:-}"
if [ -z "$bin" ]; then cargo build --release --quiet; bin="$PWD/target/release/kubectl-stack"; fi
eval "$(scripts/test-cluster.sh start)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seed() {
  if [ "$(kubectl get ns bench-0 -o name 2>/dev/null)" = "namespace/bench-0" ]; then
    echo "bench: objects already seeded" >&2; return
  fi
  echo "bench: seeding (takes a minute or two)" >&2
  for i in $(seq 0 13); do
    cat <<CRD
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: bench${i}s.bench.kubectl-stack.dev}
spec:
  group: bench.kubectl-stack.dev
  names: {kind: Bench${i}, plural: bench${i}s, singular: bench${i}, listKind: Bench${i}List}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
CRD
  done >"$work/crds.yaml"
  kubectl apply -f "$work/crds.yaml" >/dev/null
  kubectl wait --for condition=established --timeout 120s -f "$work/crds.yaml" >/dev/null
  for ns in 0 1 2 3 4; do kubectl create ns "bench-$ns" >/dev/null; done
  python3 - "$work" <<'PY'
import sys, json
work = sys.argv[1]
builtin = [
    ("v1", "ConfigMap", {"data": {"k": "v"}}),
    ("v1", "Secret", {"stringData": {"k": "v"}}),
    ("v1", "ServiceAccount", {}),
    ("rbac.authorization.k8s.io/v1", "Role", {"rules": []}),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}, "subjects": []}),
    ("v1", "PodTemplate", {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}),
    ("v1", "Endpoints", {}),
    ("v1", "LimitRange", {"spec": {"limits": []}}),
]
kinds = builtin + [("bench.kubectl-stack.dev/v1", f"Bench{i}", {"spec": {"n": 1}}) for i in range(14)]
objects = []
per_kind = 10000 // len(kinds) + 1
count = 0
for api, kind, body in kinds:
    for j in range(per_kind):
        if count == 10000: break
        obj = {"apiVersion": api, "kind": kind, "metadata": {"name": f"{kind.lower()}-{j}", "namespace": f"bench-{j % 5}", "labels": {"bench": "stack"}}}
        obj.update(body); objects.append(obj); count += 1
for j in range(2000):
    objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"noise-{j}", "namespace": f"bench-{j % 5}"}, "data": {"k": "v"}})
chunks = 8
for c in range(chunks):
    with open(f"{work}/objects-{c}.json", "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": objects[c::chunks]}, f)
PY
  ls "$work"/objects-*.json | xargs -P 4 -n 1 sh -c 'kubectl create -f "$0" >/dev/null'
}
seed
# shellcheck source=scripts/bench-remote.sh
source scripts/bench-remote.sh
trap 'bench_remote_cleanup; rm -rf "$work"' EXIT
selector="bench=stack"
echo "bench: $(kubectl get configmaps,secrets -A -l "$selector" -o name | wc -l) tracked ConfigMaps+Secrets present" >&2

time_it() {  # prints seconds
  local start end
  start=$(date +%s.%N); "$@" >"$work/out" 2>/dev/null; end=$(date +%s.%N)
  echo "$end - $start" | bc
}
command -v bc >/dev/null || apt-get install -y -qq bc >/dev/null
kinds=$(kubectl api-resources --verbs=list -o name 2>/dev/null | paste -sd, -)
for r in $(seq 1 "$runs"); do
  s=$(time_it "$bin" list -A -l "$selector" -o name); n_stack=$(wc -l <"$work/out")
  k=$(time_it kubectl get "$kinds" -A -l "$selector" -o name); n_kubectl=$(wc -l <"$work/out")
  echo "run $r: kubectl-stack ${s}s ($n_stack objects)   kubectl get ${k}s ($n_kubectl objects)"
done
/usr/bin/time -v "$bin" list -A -l "$selector" -o name 2>"$work/time" >/dev/null
echo "kubectl-stack peak memory: $(awk -F: '/Maximum resident/ {gsub(/ /,"",$2); print $2}' "$work/time") KiB"
/usr/bin/time -v kubectl get "$kinds" -A -l "$selector" -o name 2>"$work/time" >/dev/null
echo "kubectl get peak memory:   $(awk -F: '/Maximum resident/ {gsub(/ /,"",$2); print $2}' "$work/time") KiB"
