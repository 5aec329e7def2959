#!/usr/bin/env bash
# A tour of kubectl-stack on a fresh local cluster: builds the tool, starts a demo cluster (its
# own folder and ports, so it never touches the test cluster), applies examples/, and walks
# through list, orphans, graph, prune, stuck and unstick. Stop it with:
#   STACK_CLUSTER_DIR=target/demo-cluster STACK_APISERVER_PORT=17443 scripts/test-cluster.sh stop
# DEMO_CLUSTER_DIR and DEMO_PORT_BASE (API server; etcd on the next two ports) choose another
# cluster (it is restarted from scratch); STACK_BIN=PATH runs a given binary instead of building.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export STACK_CLUSTER_DIR="${DEMO_CLUSTER_DIR:-$PWD/target/demo-cluster}"
if [ -n "${DEMO_PORT_BASE:-}" ]; then
  export STACK_APISERVER_PORT=$DEMO_PORT_BASE STACK_ETCD_PORT=$((DEMO_PORT_BASE + 1)) STACK_ETCD_PEER_PORT=$((DEMO_PORT_BASE + 2))
else
  export STACK_APISERVER_PORT=17443 STACK_ETCD_PORT=13379 STACK_ETCD_PEER_PORT=13380
fi

if [ -n "${STACK_BIN:-}" ]; then
  bin_dir=$(mktemp -d)
  ln -s "$(realpath "$STACK_BIN")" "$bin_dir/kubectl-stack"
  export PATH="$bin_dir:$PATH"
else
  cargo build --release --quiet
  export PATH="$PWD/target/release:$PATH"
fi
scripts/test-cluster.sh stop >/dev/null 2>&1 || true
eval "$(scripts/test-cluster.sh start)"
export NO_COLOR=1

quiet() { "$@" >/dev/null 2>&1; }
quiet kubectl apply -f examples/crds/
quiet kubectl wait --for condition=established --timeout 60s -f examples/crds/
quiet kubectl apply -f examples/operator/
quiet kubectl wait --for condition=established --timeout 60s crd/databases.demo.kubectl-stack.dev
for _ in $(seq 1 50); do kubectl get databases -A >/dev/null 2>&1 && break; sleep 0.2; done
quiet kubectl apply -f examples/usage/ -f examples/flux/
# What kustomize-controller would have recorded in status.inventory after applying examples/usage/.
quiet kubectl patch kustomization usage -n flux-system --subresource status --type merge -p \
  '{"status":{"inventory":{"entries":[{"id":"_shop__Namespace","v":"v1"},{"id":"shop_orders_demo.kubectl-stack.dev_Database","v":"v1"},{"id":"shop_shop-settings__ConfigMap","v":"v1"},{"id":"shop_storefront_apps_Deployment","v":"v1"}]}}}'

show() { echo; echo "\$ $*"; "$@" 2>&1 || echo "(exit $?)"; }
show kubectl stack list -A --tracker flux
show kubectl stack orphans -A --tracker flux=usage.flux-system -f examples/usage-next/
show kubectl stack orphans --tracker flux=usage.flux-system -f examples/usage-next/   # without -A
show kubectl stack graph -n flux-system
show kubectl stack graph -A --members --order delete
# Namespace db-operator's deletion takes its ServiceAccount's token Secret, which no tool tracks,
# but the ServiceAccount is torn down too and the token controller deletes its token: no victim.
show kubectl stack prune -n flux-system kustomization/operator --dry-run=server
show kubectl stack prune -n flux-system kustomization/operator --yes --timeout 5s
show kubectl stack stuck -n shop databases.demo.kubectl-stack.dev/orders
show kubectl stack unstick -n shop database/orders --finalizer demo.kubectl-stack.dev/cleanup --yes --backup-dir target/demo-backup
show kubectl stack prune -n flux-system kustomization/operator --yes
