#!/usr/bin/env bash
# The programs `npm test` needs from the system. Everything else comes from npm (Node 24, tap)
# or is built from the Go module proxy by scripts/control-plane.sh. Run before any test starts:
# says in one line how to install whatever is missing, and fails.
#   --packages   prints only the Debian packages that provide the missing tools (for .ci/run)
#   --go         checks only that Go is new enough to build the control plane
set -euo pipefail

# The newest `go` directive among the modules scripts/control-plane.sh builds (promtool's).
GO_MIN=1.26.7
GO_HOW="Go >= $GO_MIN from https://go.dev/dl/"
# tool:Debian package. Go is apart: Debian's golang-go is older than the builds need.
# The real node (kit/node/) runs Debian's containerd and runc with the CNI plugins, and assembles
# its images with umoci and skopeo; actionlint runs shellcheck on the workflows' scripts.
TOOLS=(openssl:openssl setpriv:util-linux unshare:util-linux ip:iproute2 iptables:iptables
  containerd:containerd ctr:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins
  /usr/lib/cni/host-local:containernetworking-plugins umoci:umoci skopeo:skopeo shellcheck:shellcheck)

if [ "${1:-}" = "--go" ]; then
  have="$(go env GOVERSION 2>/dev/null | sed 's/^go//')" || true
  if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$GO_MIN" "$have" | sort -V | head -n 1)" != "$GO_MIN" ]; then
    echo "building the local control plane needs $GO_HOW (found: ${have:-no go on PATH})" >&2
    exit 3
  fi
  exit 0
fi

missing=()
packages=()
for entry in "${TOOLS[@]}"; do
  tool="${entry%%:*}"
  package="${entry#*:}"
  if [[ "$tool" == /* ]]; then [ -x "$tool" ] && continue; else command -v "$tool" >/dev/null 2>&1 && continue; fi
  missing+=("$tool")
  [[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
done
if [ "${1:-}" = "--packages" ]; then
  echo "${packages[*]}"
  exit 0
fi

how=()
[ ${#packages[@]} -eq 0 ] || how+=("apt-get install ${packages[*]}")
if ! command -v go >/dev/null 2>&1; then
  missing+=(go)
  how+=("$GO_HOW")
fi
if [ ${#missing[@]} -gt 0 ]; then
  list="$(printf ', %s' "${missing[@]}")"
  joined="$(printf '; %s' "${how[@]}")"
  echo "npm test needs ${list:2}, not found on PATH: install with ${joined:2}" >&2
  exit 1
fi
