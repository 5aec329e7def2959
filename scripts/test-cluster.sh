#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for kubectl-stack's tests and demo:
# etcd + kube-apiserver + kube-controller-manager (v1.20.2, built from Debian's source package).
#
#   scripts/test-cluster.sh build    install packages, build and cache the binaries (once per machine)
#   scripts/test-cluster.sh start    start the cluster (builds first if needed); prints env to source
#   scripts/test-cluster.sh stop     stop it
#   scripts/test-cluster.sh status   exit 0 when it answers
#   scripts/test-cluster.sh logs     tail of every component's log
#   scripts/test-cluster.sh restart-apiserver [SECONDS]   stop the API server, wait, start it again
#
# State lives in $STACK_CLUSTER_DIR (default: target/test-cluster); the built binaries are cached in
# $STACK_K8S_CACHE (default: ~/.cache/kubectl-stack/k8s-v1.20.2) so later runs start in seconds.
set -euo pipefail

K8S_VERSION="1.20.5+really1.20.2"
ORIG_SHA256="b83c0780efb182d928dc63d46488a847f161f04e40a94b96bf5247dd671ecdfc"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${STACK_K8S_CACHE:-$HOME/.cache/kubectl-stack/k8s-v1.20.2}"
DIR="${STACK_CLUSTER_DIR:-$ROOT/target/test-cluster}"
APISERVER_PORT="${STACK_APISERVER_PORT:-16443}"
ETCD_PORT="${STACK_ETCD_PORT:-12379}"
ETCD_PEER_PORT="${STACK_ETCD_PEER_PORT:-12380}"

log() { printf 'test-cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

have_packages() {
  command -v etcd >/dev/null && command -v go >/dev/null && command -v jq >/dev/null &&
    command -v rsync >/dev/null && command -v openssl >/dev/null && command -v curl >/dev/null &&
    [ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ]
}

install_packages() {
  have_packages && return 0
  log "installing Debian packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq golang-go etcd-server jq rsync openssl curl golang-github-modern-go-reflect2-dev >/dev/null
}

fetch_source() {
  local work="$1" src="$work/apt-src"
  mkdir -p "$src/lists/partial"
  local uri
  uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$uri" ] || die "cannot find the Debian mirror URI in /etc/apt/sources.list.d/debian.sources"
  cat >"$src/src.sources" <<SRC
Types: deb-src
URIs: $uri
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$src" -o "Dir::State::Lists=$src/lists")
  apt-get "${opts[@]}" update -qq
  (cd "$work" && apt-get "${opts[@]}" source --download-only kubernetes >/dev/null)
  local tarball="$work/kubernetes_${K8S_VERSION}.orig.tar.gz"
  [ -f "$tarball" ] || die "source tarball missing after apt-get source"
  echo "$ORIG_SHA256  $tarball" | sha256sum -c --quiet - || die "sha256 mismatch for $tarball"
}

patch_reflect2() {
  local tree="$1" vendored="$1/vendor/github.com/modern-go/reflect2"
  local debian=/usr/share/gocode/src/github.com/modern-go/reflect2
  find "$vendored" -maxdepth 1 -type f ! -name LICENSE -delete
  cp "$debian"/*.go "$vendored"/
  cp "$debian"/*.s "$vendored"/ 2>/dev/null || true
  rm -f "$vendored"/*_test.go
  sed -i -E 's#(=> github.com/modern-go/reflect2) v1\.0\.1#\1 v1.0.2#' "$tree/go.mod" "$tree/vendor/modules.txt"
  grep -q 'modern-go/reflect2 v1.0.2' "$tree/go.mod" || die "reflect2 patch did not apply to go.mod"
}

build() {
  if [ -x "$CACHE/kube-apiserver" ] && [ -x "$CACHE/kube-controller-manager" ]; then
    return 0
  fi
  install_packages
  local work="$CACHE.build"
  rm -rf "$work"; mkdir -p "$work"
  log "fetching Debian source package kubernetes $K8S_VERSION"
  fetch_source "$work"
  log "unpacking"
  mkdir -p "$work/src"
  tar -xzf "$work/kubernetes_${K8S_VERSION}.orig.tar.gz" -C "$work/src" --strip-components=1
  patch_reflect2 "$work/src"
  log "building kube-apiserver and kube-controller-manager (about 5 minutes on 2 cores)"
  (
    cd "$work/src"
    mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
    mkdir -p "$work/home"
    GOPATH="$work/src/.go" CGO_ENABLED=0 HOME="$work/home" GOFLAGS=-mod=vendor \
      make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" >"$work/build.log" 2>&1 ||
      { tail -40 "$work/build.log" >&2; exit 1; }
  )
  mkdir -p "$CACHE"
  cp "$work/src/_output/local/bin/linux/amd64/kube-apiserver" "$work/src/_output/local/bin/linux/amd64/kube-controller-manager" "$CACHE/"
  rm -rf "$work"
  log "cached binaries in $CACHE"
}

# A process of this cluster is alive: its pid file names a live process whose command line names
# this cluster's folder. A pid file copied with the folder (a worktree's `cp -al target`), or
# a pid reused by another process, never makes `stop` kill another cluster or program.
pid_alive() {
  [ -f "$1" ] || return 1
  local pid; pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/"
}

write_kubeconfig() {
  local file="$1" user="$2" token="$3"
  cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $DIR/certs/apiserver.crt
contexts:
- name: test
  context: {cluster: test, user: $user, namespace: default}
current-context: test
users:
- name: $user
  user: {token: $token}
KC
}

wait_ready() {
  local i
  for i in $(seq 1 120); do
    if curl -sk --max-time 2 -H "Authorization: Bearer $(admin_token)" "https://127.0.0.1:$APISERVER_PORT/readyz" 2>/dev/null | grep -q '^ok$'; then
      return 0
    fi
    pid_alive "$DIR/apiserver.pid" || { tail -30 "$DIR/apiserver.log" >&2; die "kube-apiserver exited"; }
    sleep 0.5
  done
  tail -30 "$DIR/apiserver.log" >&2
  die "kube-apiserver not ready after 60s"
}

admin_token() { cut -d, -f1 "$DIR/tokens.csv" | head -1; }

start() {
  if status >/dev/null 2>&1; then print_env; return 0; fi
  build
  install_packages
  stop >/dev/null 2>&1 || true
  rm -rf "$DIR"; mkdir -p "$DIR/certs"
  openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
  openssl rsa -in "$DIR/sa.key" -pubout -out "$DIR/sa.pub" 2>/dev/null
  local admin nobody limited
  admin=$(openssl rand -hex 16); nobody=$(openssl rand -hex 16); limited=$(openssl rand -hex 16)
  # admin: everything; nobody: no rights at all; limited: no rights until a test binds some.
  printf '%s,admin,uid-admin,"system:masters"\n%s,nobody,uid-nobody,"dev"\n%s,limited,uid-limited,"limited"\n' \
    "$admin" "$nobody" "$limited" >"$DIR/tokens.csv"
  chmod 600 "$DIR/tokens.csv"
  issue_client_certificates


  setsid etcd --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" >"$DIR/etcd.log" 2>&1 </dev/null &
  echo $! >"$DIR/etcd.pid"

  start_apiserver

  write_kubeconfig "$DIR/admin.kubeconfig" admin "$admin"
  write_kubeconfig "$DIR/nobody.kubeconfig" nobody "$nobody"
  write_kubeconfig "$DIR/limited.kubeconfig" limited "$limited"
  start_controller_manager
  print_env
}

# A client CA the apiserver trusts, and a client certificate signed by it for an admin
# (O=system:masters, CN=cert-admin): for tests of --client-certificate/--client-key.
issue_client_certificates() {
  local pki="$DIR/pki"
  mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/client-ca.key" -out "$pki/client-ca.crt" \
    -days 3650 -subj "/CN=stack-test-client-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$pki/cert-admin.key" -out "$pki/cert-admin.csr" \
    -subj "/O=system:masters/CN=cert-admin" 2>/dev/null
  openssl x509 -req -in "$pki/cert-admin.csr" -CA "$pki/client-ca.crt" -CAkey "$pki/client-ca.key" \
    -CAcreateserial -out "$pki/cert-admin.crt" -days 3650 -extfile <(printf 'extendedKeyUsage=clientAuth\n') 2>/dev/null
  chmod 600 "$pki"/*.key
}

start_apiserver() {
  setsid "$CACHE/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" --cert-dir="$DIR/certs" \
    --secure-port="$APISERVER_PORT" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none --service-account-key-file="$DIR/sa.pub" \
    --service-account-signing-key-file="$DIR/sa.key" --service-account-issuer=https://kubernetes.default.svc \
    --token-auth-file="$DIR/tokens.csv" --authorization-mode=RBAC --service-cluster-ip-range=10.0.0.0/24 \
    --client-ca-file="$DIR/pki/client-ca.crt" --insecure-port=0 >>"$DIR/apiserver.log" 2>&1 </dev/null &
  echo $! >"$DIR/apiserver.pid"
  wait_ready
}

# Stops the API server, waits SECONDS, starts it again and waits until it is ready (a restart
# for the fault tests: etcd, the certificates and the tokens stay).
restart_apiserver() {
  pid_alive "$DIR/apiserver.pid" || die "the API server is not running"
  kill "$(cat "$DIR/apiserver.pid")" 2>/dev/null || true
  for _ in $(seq 1 50); do pid_alive "$DIR/apiserver.pid" || break; sleep 0.1; done
  if pid_alive "$DIR/apiserver.pid"; then kill -9 "$(cat "$DIR/apiserver.pid")" 2>/dev/null || true; fi
  sleep "${1:-5}"
  start_apiserver
}

start_controller_manager() {
  setsid "$CACHE/kube-controller-manager" --kubeconfig="$DIR/admin.kubeconfig" \
    --controllers=namespace,garbagecollector,serviceaccount,serviceaccount-token \
    --service-account-private-key-file="$DIR/sa.key" --root-ca-file="$DIR/certs/apiserver.crt" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=0 --port=0 \
    >"$DIR/controller-manager.log" 2>&1 </dev/null &
  echo $! >"$DIR/controller-manager.pid"
}

print_env() {
  echo "export KUBECONFIG=$DIR/admin.kubeconfig"
  echo "export STACK_TEST_KUBECONFIG=$DIR/admin.kubeconfig"
  echo "export STACK_TEST_NOBODY_KUBECONFIG=$DIR/nobody.kubeconfig"
  echo "export STACK_TEST_LIMITED_KUBECONFIG=$DIR/limited.kubeconfig"
  echo "export STACK_TEST_CLUSTER_DIR=$DIR"
}

stop() {
  local c
  for c in controller-manager apiserver etcd; do
    if pid_alive "$DIR/$c.pid"; then
      kill "$(cat "$DIR/$c.pid")" 2>/dev/null || true
      for _ in $(seq 1 50); do pid_alive "$DIR/$c.pid" || break; sleep 0.1; done
      pid_alive "$DIR/$c.pid" && kill -9 "$(cat "$DIR/$c.pid")" 2>/dev/null || true
    fi
    rm -f "$DIR/$c.pid"
  done
}

status() {
  pid_alive "$DIR/apiserver.pid" || return 1
  curl -sk --max-time 2 -H "Authorization: Bearer $(admin_token)" "https://127.0.0.1:$APISERVER_PORT/readyz" | grep -q '^ok$'
}

logs() {
  local c
  for c in etcd apiserver controller-manager; do
    [ -f "$DIR/$c.log" ] || continue
    echo "===== $c log (last ${1:-40} lines) ====="
    tail -n "${1:-40}" "$DIR/$c.log"
  done
}

case "${1:-}" in
  build) build ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  logs) logs "${2:-40}" ;;
  env) print_env ;;
  start-controller-manager) start_controller_manager ;;
  restart-apiserver) restart_apiserver "${2:-5}" ;;
  *) echo "usage: $0 build|start|stop|status|logs [N]|env" >&2; exit 2 ;;
esac
