#!/usr/bin/env bash
# Scale check across many kinds: N custom resource definitions, each in its own API group (the
# worst case for per-group discovery), with 10 tracked objects each; then `kubectl stack list -A`
# against `kubectl get` of every listable kind. Usage: scripts/bench-kinds.sh [N]  (default 200)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
kinds="${1:-200}"
cargo build --release --quiet
bin="$PWD/target/release/kubectl-stack"
eval "$(scripts/test-cluster.sh start)"
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 - "$kinds" "$work" <<'PY'
import json, sys
kinds, work = int(sys.argv[1]), sys.argv[2]
crds, objects = [], []
for i in range(kinds):
    group = f"g{i}.kinds.kubectl-stack.dev"
    crds.append({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                 "metadata": {"name": f"things.{group}"},
                 "spec": {"group": group, "scope": "Namespaced",
                          "names": {"kind": "Thing", "plural": "things", "singular": "thing", "listKind": "ThingList"},
                          "versions": [{"name": "v1", "served": True, "storage": True,
                                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    for j in range(10):
        objects.append({"apiVersion": f"{group}/v1", "kind": "Thing",
                        "metadata": {"name": f"t{j}", "namespace": "default", "labels": {"bench": "kinds"}}})
json.dump({"apiVersion": "v1", "kind": "List", "items": crds}, open(f"{work}/crds.json", "w"))
json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, open(f"{work}/objects.json", "w"))
PY
kubectl apply -f "$work/crds.json" >/dev/null
kubectl wait --for condition=established --timeout 300s -f "$work/crds.json" >/dev/null
for _ in $(seq 1 60); do kubectl create -f "$work/objects.json" >/dev/null 2>&1 && break; sleep 2; done
echo "kinds: $(kubectl api-resources --verbs=list -o name 2>/dev/null | wc -l) listable kinds served" >&2
all=$(kubectl api-resources --verbs=list -o name 2>/dev/null | paste -sd, -)
for run in 1 2 3; do
  /usr/bin/time -f "%e s, %M KiB" -o "$work/t1" "$bin" list -A -l bench=kinds -o name >"$work/o1" 2>/dev/null
  /usr/bin/time -f "%e s, %M KiB" -o "$work/t2" kubectl get "$all" -A -l bench=kinds -o name >"$work/o2" 2>/dev/null
  echo "run $run: kubectl-stack $(wc -l <"$work/o1") objects in $(cat "$work/t1");  kubectl get $(wc -l <"$work/o2") objects in $(cat "$work/t2")"
done
