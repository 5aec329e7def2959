#!/usr/bin/env bash
# Builds this machine's release archive, dist/kubectl-stack_<version>_<os>_<arch>.tar.gz
# (kubectl-stack, kubectl_complete-stack, LICENSE; reproducible: sorted, fixed mtime and owner),
# its .sha256, and dist/plugin.yaml: plugin.yaml with this platform's sha256 filled in.
#   scripts/release.sh                  build --release and package
#   scripts/release.sh --binary PATH    package an already built binary
#   scripts/release.sh --update-manifest   also write this platform's sha256 into plugin.yaml
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
binary=""; update=0
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --update-manifest) update=1; shift ;;
    *) echo "usage: $0 [--binary PATH] [--update-manifest]" >&2; exit 2 ;;
  esac
done
version="v$(awk -F'"' '/^version =/ {print $2; exit}' Cargo.toml)"
case "$(uname -s)" in Linux) os=linux ;; Darwin) os=darwin ;; *) os=windows ;; esac
case "$(uname -m)" in x86_64|amd64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;; *) echo "unsupported arch" >&2; exit 1 ;; esac
if [ -z "$binary" ]; then
  cargo build --release --locked --quiet
  binary=target/release/kubectl-stack
fi
name="kubectl-stack_${version}_${os}_${arch}"
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
if [ "$os" = windows ]; then
  contents=(kubectl-stack.exe LICENSE)
  install -m 0755 "$binary" "$stage/kubectl-stack.exe"
else
  contents=(kubectl-stack kubectl_complete-stack LICENSE)
  install -m 0755 "$binary" "$stage/kubectl-stack"
  install -m 0755 scripts/kubectl_complete-stack "$stage/kubectl_complete-stack"
fi
install -m 0644 LICENSE "$stage/LICENSE"
mkdir -p dist
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - "${contents[@]}" \
  | gzip -n >"dist/$name.tar.gz"
sha=$(sha256sum "dist/$name.tar.gz" | cut -d' ' -f1)
echo "$sha  $name.tar.gz" >"dist/$name.tar.gz.sha256"
python3 - "$os" "$arch" "$sha" plugin.yaml dist/plugin.yaml <<'PY'
import re, sys
os_, arch, sha, source, target = sys.argv[1:]
text = open(source).read()
# Each platform block starts at "- selector"; replace the sha256 of the one for this os/arch.
blocks = re.split(r'(?m)^(?=  - selector)', text)
for i, block in enumerate(blocks):
    if re.search(r'os: %s\b' % os_, block) and re.search(r'arch: %s\b' % arch, block):
        blocks[i] = re.sub(r'sha256: "?[0-9a-f]{64}"?', 'sha256: "%s"' % sha, block)
open(target, "w").write("".join(blocks))
PY
if [ "$update" = 1 ]; then cp dist/plugin.yaml plugin.yaml; fi
echo "dist/$name.tar.gz"
echo "sha256 $sha"
