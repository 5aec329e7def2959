#!/usr/bin/env bash
# Benchmark of `kubectl stack prune` on the test cluster, each row beside its baseline in one run:
#   - OBJECTS tracked ConfigMaps in 4 config.kubernetes.io/depends-on waves, pruned by one command,
#     against the parallel floor: plain HTTP DELETEs, 16 at once, wave by wave (scripts/bench_lib.py);
#   - the same run's timeline: planning, each wave's re-check, each wave's deletes + wait;
#   - a real kpt inventory of OBJECTS ConfigMaps in 4 depends-on waves applied by `kpt live apply`,
#     torn down by naming the inventory, against `kpt live destroy` of an identical package.
# Peak memory from /usr/bin/time -v.
#
# Usage: scripts/bench-prune.sh [OBJECTS]      (default 2000; the issue's scale is 50000)
#   STACK_BIN=PATH          the binary measured (default: the release build, built under the lock)
#   STACK_BIN_BEFORE=PATH   a second binary measured in the same run, shown as "before"
#   BENCH_KPT=0             skip the kpt row       BENCH_README=1  regenerate README's table
#   BENCH_RTT_MS=50         every call through a 50 ms round-trip proxy (scripts/bench-remote.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
total="${1:-2000}"
per_wave=$((total / 4))
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
namespaces=()
cleanup() {
  bench_remote_cleanup
  [ ${#namespaces[@]} -eq 0 ] || kubectl delete namespace "${namespaces[@]}" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
suffix=$(date +%s)
mkdir -p "$work/empty"

seed() {  # namespace
  kubectl create namespace "$1" >/dev/null
  namespaces+=("$1")
  python3 "$lib" prune-lists "$work" "$1" "$per_wave"
  ls "$work/$1"-*.json | xargs -P 4 -n 1 sh -c 'kubectl create -f "$0" >/dev/null'
  echo "bench: seeded $(kubectl get cm -n "$1" -l bench=prune -o name | wc -l) ConfigMaps in $1" >&2
}

left() { kubectl get cm -n "$1" -o name | grep -c . || true; }

prune_with() {  # name binary: prunes its own namespace, writes $work/NAME.json
  local ns="bench-prune-$1-$suffix"
  seed "$ns"
  python3 "$lib" run "$work/$1" -- "$2" prune -n "$ns" -l bench=prune -f "$work/empty" --allow-empty --untracked --yes
  echo "bench: $1: $(left "$ns") ConfigMap(s) left" >&2
}

json() { cat "$work/$1.json"; }

timeline() {  # name: plan X s; re-checks a/b/c/d s; waves a/b/c/d s
  python3 - "$work/$1.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timeline"]
waves = t["waves"]
fmt = lambda key: " / ".join(f"{w.get(key, 0):.2f}" for w in waves)
plan = f"{t['plan']:.2f}" if t["plan"] is not None else "?"
print(json.dumps({"text": f"plan {plan} s; re-check before each wave {fmt('recheck')} s; deletes + wait {fmt('wave')} s"}))
PY
}

prune_with stack "$bin"
[ -z "$before" ] || prune_with before "$before"
ns_floor="bench-prune-floor-$suffix"
seed "$ns_floor"
floor_s=$(python3 "$lib" floor "$ns_floor" "$per_wave" 16)
echo "bench: floor: $(left "$ns_floor") ConfigMap(s) left" >&2

{
  printf '{"work": "prune %s ConfigMaps in 4 depends-on waves", "stack": %s' "$total" "$(json stack)"
  [ -z "$before" ] || printf ', "before": %s' "$(json before)"
  printf ', "baseline_name": "parallel floor (plain HTTP, 16-way, wave by wave)", "baseline": {"seconds": %s, "text": "%.2f s"}}\n' "$floor_s" "$floor_s"
  printf '{"work": "same, timeline of one run", "stack": %s' "$(timeline stack)"
  [ -z "$before" ] || printf ', "before": %s' "$(timeline before)"
  printf '}\n'
} >>"$results"

ensure_resource_group() {
  local crd=resourcegroups.kpt.dev
  kubectl get crd "$crd" >/dev/null 2>&1 || kpt live install-resource-group >/dev/null
  # The 1.20 trap (/work/shared/trackers.md): kpt writes explicit nulls; make spec/status nullable.
  kubectl get crd "$crd" -o json | jq '
    def nullable: if type == "object" and has("properties") then .properties |= map_values(.nullable = true | nullable) else . end
      | if type == "object" and has("items") then .items |= nullable else . end;
    .spec.versions |= map(.schema.openAPIV3Schema.properties |= with_entries(if .key == "spec" or .key == "status" then .value |= nullable else . end))
  ' | kubectl replace -f - >/dev/null
  kubectl wait --for condition=established "crd/$crd" >/dev/null
}

kpt_apply() {  # name: an applied kpt package in its own namespace; prints the package directory
  local ns="bench-kpt-$1-$suffix" dir="$work/kpt-$1"
  kubectl create namespace "$ns" >/dev/null
  namespaces+=("$ns")
  mkdir -p "$dir"
  kpt pkg init "$dir" >/dev/null
  python3 "$lib" kpt-package "$dir" "$ns" "$per_wave"
  kpt live init "$dir" --namespace "$ns" --inventory-id "bench-$1-$suffix" --name inventory >/dev/null
  kpt live apply "$dir" --install-resource-group=false --reconcile-timeout=10m >/dev/null
  echo "bench: kpt applied $(left "$ns") ConfigMap(s) in $ns" >&2
}

if [ "${BENCH_KPT:-1}" != 0 ] && command -v kpt >/dev/null; then
  ensure_resource_group
  kpt_apply stack; kpt_apply kpt
  [ -z "$before" ] || kpt_apply before
  python3 "$lib" run "$work/kpt-stack" -- "$bin" prune -n "bench-kpt-stack-$suffix" resourcegroup/inventory --yes
  [ -z "$before" ] || python3 "$lib" run "$work/kpt-before" -- "$before" prune -n "bench-kpt-before-$suffix" resourcegroup/inventory --yes
  python3 "$lib" run "$work/kpt-kpt" -- kpt live destroy "$work/kpt-kpt"
  for name in stack kpt ${before:+before}; do
    echo "bench: kpt $name: $(left "bench-kpt-$name-$suffix") ConfigMap(s) left" >&2
  done
  {
    printf '{"work": "teardown of a real kpt inventory (%s ConfigMaps, 4 depends-on waves, `kpt live apply`)", "stack": %s' "$total" "$(json kpt-stack)"
    [ -z "$before" ] || printf ', "before": %s' "$(json kpt-before)"
    printf ', "baseline_name": "`kpt live destroy`", "baseline": %s}\n' "$(json kpt-kpt)"
  } >>"$results"
fi

python3 "$lib" table "$results" ${BENCH_README:+README.md bench-prune}
