#!/usr/bin/env bash
# A tour of kubectl-stack on the local test cluster: builds the tool, starts the cluster,
# applies examples/, and runs the commands on them. Leaves the cluster running; stop it with
# `scripts/test-cluster.sh stop`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release --quiet
export PATH="$PWD/target/release:$PATH"
eval "$(scripts/test-cluster.sh start)"
echo "# KUBECONFIG=$KUBECONFIG"

kubectl apply -f examples/crds/ >/dev/null
kubectl wait --for condition=established --timeout 60s -f examples/crds/ >/dev/null
kubectl apply -f examples/operator/ >/dev/null
kubectl wait --for condition=established --timeout 60s crd/databases.demo.kubectl-stack.dev >/dev/null
kubectl apply -f examples/usage/ -f examples/flux/ >/dev/null

show() { echo; echo "\$ $*"; "$@"; }
show kubectl stack list -A
show kubectl stack list -A --tracker flux=usage.flux-system
show kubectl stack list -A --tracker flux=operator.flux-system -o name
