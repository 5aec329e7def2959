#!/usr/bin/env bash
# A tour of kubectl-stack on a fresh local cluster: builds the tool, starts a demo cluster (its
# own folder and ports, so it never touches the test cluster), applies examples/, and walks
# through list, orphans, graph, prune, stuck and unstick. Stop it with:
#   STACK_CLUSTER_DIR=target/demo-cluster STACK_APISERVER_PORT=17443 scripts/test-cluster.sh stop
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export STACK_CLUSTER_DIR="$PWD/target/demo-cluster" STACK_APISERVER_PORT=17443 STACK_ETCD_PORT=13379 STACK_ETCD_PEER_PORT=13380

cargo build --release --quiet
export PATH="$PWD/target/release:$PATH"
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

show() { echo; echo "\$ $*"; "$@" 2>&1 || echo "(exit $?)"; }
show kubectl stack list -A --tracker flux
show kubectl stack orphans -A --tracker flux=usage.flux-system -f examples/usage-next/
show kubectl stack graph -n flux-system
show kubectl stack graph -A --members --order delete
show kubectl stack prune -n flux-system kustomization/operator --dry-run=server
show kubectl stack prune -n flux-system kustomization/operator --yes --timeout 5s
show kubectl stack stuck -n shop databases.demo.kubectl-stack.dev/orders
show kubectl stack unstick -n shop database/orders --finalizer demo.kubectl-stack.dev/cleanup --yes --backup-dir target/demo-backup
show kubectl stack prune -n flux-system kustomization/operator --yes
