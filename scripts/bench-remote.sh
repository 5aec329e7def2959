# shellcheck shell=bash
# Sourced by the benchmarks: with BENCH_RTT_MS=N (e.g. 50), every kubectl and kubectl-stack call
# goes through scripts/latency-proxy.py, N ms round trip, as to a remote cluster. Needs KUBECONFIG
# set (test-cluster.sh env); replaces it with a copy whose server is the proxy.
if [ -n "${BENCH_RTT_MS:-}" ] && [ "${BENCH_RTT_MS}" != 0 ]; then
  bench_server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  bench_target=${bench_server#https://}
  bench_proxy_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 "$(dirname "${BASH_SOURCE[0]}")/latency-proxy.py" "$bench_proxy_port" "$bench_target" "$BENCH_RTT_MS" &
  bench_proxy_pid=$!
  bench_kubeconfig=$(mktemp)
  kubectl config view --raw --flatten >"$bench_kubeconfig"
  sed -i "s#server: $bench_server#server: https://127.0.0.1:$bench_proxy_port#" "$bench_kubeconfig"
  export KUBECONFIG="$bench_kubeconfig"
  for _ in $(seq 1 50); do kubectl get --raw /readyz >/dev/null 2>&1 && break; sleep 0.1; done
  echo "bench: through a ${BENCH_RTT_MS} ms round-trip proxy ($bench_server via 127.0.0.1:$bench_proxy_port)" >&2
  bench_remote_cleanup() { kill "$bench_proxy_pid" 2>/dev/null || true; rm -f "$bench_kubeconfig"; }
else
  bench_remote_cleanup() { :; }
fi
