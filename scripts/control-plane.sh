#!/usr/bin/env bash
# Builds kube-apiserver, etcd, helm and the Karpenter oracle (test/karpenter-oracle: Karpenter's
# own matching code, the judge of the decision engine) from the Go module proxy into a cache
# outside the repo. Idempotent: when every binary is cached it only prints their paths.
#
# Why a wrapper module: k8s.io/kubernetes replaces every staging module with ./staging/...,
# so `go install k8s.io/kubernetes/cmd/kube-apiserver@vX` cannot work. A throw-away module
# that requires k8s.io/kubernetes and re-points each staging module at its published v0.N.P
# release builds the real thing.
set -euo pipefail

K8S_VERSION="${VENEER_K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${VENEER_ETCD_VERSION:-v3.6.16}"
# helm renders and lints the chart in tests; it is a Go program too, and `go install` works for it.
HELM_VERSION="${VENEER_HELM_VERSION:-v3.18.6}"
CACHE_ROOT="${VENEER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/veneer-node-watcher}"
K8S_DIR="$CACHE_ROOT/kubernetes-$K8S_VERSION"
ETCD_DIR="$CACHE_ROOT/etcd-$ETCD_VERSION"
APISERVER_BIN="$K8S_DIR/kube-apiserver"
ETCD_BIN="$ETCD_DIR/etcd"
HELM_DIR="$CACHE_ROOT/helm-$HELM_VERSION"
HELM_BIN="$HELM_DIR/helm"
# The oracle is built from this repository's sources: its cache key is their hash, so an edit
# rebuilds it and an old build is never used by mistake.
ORACLE_SRC="$(cd "$(dirname "$0")/.." && pwd)/test/karpenter-oracle"
KARPENTER_VERSION="$(awk '$1 == "sigs.k8s.io/karpenter" { print $2 }' "$ORACLE_SRC/go.mod")"
ORACLE_HASH="$(cat "$ORACLE_SRC/go.mod" "$ORACLE_SRC/go.sum" "$ORACLE_SRC/main.go" | sha256sum | cut -c1-12)"
ORACLE_BIN="$CACHE_ROOT/karpenter-oracle-$KARPENTER_VERSION-$ORACLE_HASH/karpenter-oracle"

log() { printf '[control-plane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "${1:-}" = "--print-env" ]; then
  printf 'VENEER_KUBE_APISERVER=%s\nVENEER_ETCD=%s\nVENEER_HELM=%s\nVENEER_KARPENTER_ORACLE=%s\n' "$APISERVER_BIN" "$ETCD_BIN" "$HELM_BIN" "$ORACLE_BIN"
  exit 0
fi

if [ -x "$APISERVER_BIN" ] && [ -x "$ETCD_BIN" ] && [ -x "$HELM_BIN" ] && [ -x "$ORACLE_BIN" ]; then
  log "cached: $APISERVER_BIN"
  log "cached: $ETCD_BIN"
  log "cached: $HELM_BIN"
  log "cached: $ORACLE_BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  log "ERROR: Go is not installed (or not on PATH). The local control plane is compiled from the"
  log "Go module proxy and needs Go >= 1.25: install it (Debian: apt-get install golang-go, or the"
  log "official toolchain) and run this script again."
  exit 3
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=mod"

# Prints a heartbeat while a long step runs, so a cold build is visibly alive.
with_progress() {
  local what="$1"; shift
  local start=$SECONDS
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && log "$what: still working ($((SECONDS - start)) s)"
  done
  # Callers run as `[ -x BIN ] || build_x`, where set -e does not apply: fail loudly here.
  wait "$pid" || { local rc=$?; log "$what: FAILED (exit $rc)"; exit "$rc"; }
  log "$what: done in $((SECONDS - start)) s"
}

build_apiserver() {
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  local minor="${K8S_VERSION#v1.}"          # 35.4
  local staging_version="v0.$minor"         # v0.35.4
  log "kube-apiserver $K8S_VERSION: resolving staging modules ($staging_version)"
  cat > "$work/go.mod" <<GOMOD
module veneer.local/kube-apiserver-build

go 1.25.0

require k8s.io/kubernetes $K8S_VERSION
GOMOD
  # The staging list comes from the release's own go.mod, so another release needs no edits here.
  local modfile; modfile="$(mktemp)"
  ( cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null )
  cp "$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod" "$modfile"
  local count=0
  while read -r mod; do
    ( cd "$work" && go mod edit -replace "$mod=$mod@$staging_version" )
    count=$((count + 1))
  done < <(grep -E '=> \./staging/' "$modfile" | awk '{print $1}')
  rm -f "$modfile"
  log "kube-apiserver: $count staging modules pinned to $staging_version"
  # `go get` of the command resolves exactly the packages kube-apiserver needs.
  with_progress "kube-apiserver: resolve dependencies" \
    bash -c "cd '$work' && go get 'k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION'"
  mkdir -p "$K8S_DIR"
  local vp=k8s.io/component-base/version
  local ldflags="-s -w -X $vp.gitVersion=$K8S_VERSION -X $vp.gitMajor=1 -X $vp.gitMinor=${minor%%.*}"
  with_progress "kube-apiserver: compile" \
    bash -c "cd '$work' && go build -p 2 -trimpath -ldflags '$ldflags' -o '$APISERVER_BIN.tmp.$$' k8s.io/kubernetes/cmd/kube-apiserver"
  mv "$APISERVER_BIN.tmp.$$" "$APISERVER_BIN"
}

build_etcd() {
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "etcd $ETCD_VERSION: preparing wrapper module"
  cat > "$work/go.mod" <<GOMOD
module veneer.local/etcd-build

go 1.25.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
  cat > "$work/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  with_progress "etcd: go mod tidy" bash -c "cd '$work' && go mod tidy >/dev/null"
  mkdir -p "$ETCD_DIR"
  with_progress "etcd: compile" bash -c "cd '$work' && go build -p 2 -trimpath -ldflags '-s -w' -o '$ETCD_BIN.tmp.$$' ."
  mv "$ETCD_BIN.tmp.$$" "$ETCD_BIN"
}

build_helm() {
  mkdir -p "$HELM_DIR"
  with_progress "helm $HELM_VERSION: go install" \
    env GOBIN="$HELM_DIR" go install -p 2 -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

build_oracle() {
  mkdir -p "$(dirname "$ORACLE_BIN")"
  # go.mod and go.sum are committed and tidy: the build must not change them.
  with_progress "karpenter-oracle (sigs.k8s.io/karpenter $KARPENTER_VERSION): compile" \
    bash -c "cd '$ORACLE_SRC' && GOFLAGS=-mod=readonly go build -p 2 -trimpath -ldflags '-s -w' -o '$ORACLE_BIN.tmp.$$' ."
  mv "$ORACLE_BIN.tmp.$$" "$ORACLE_BIN"
}

log "cold build into $CACHE_ROOT (first time only: expect 10-25 minutes on 2 cores)"
[ -x "$ETCD_BIN" ] || build_etcd
[ -x "$APISERVER_BIN" ] || build_apiserver
[ -x "$HELM_BIN" ] || build_helm
[ -x "$ORACLE_BIN" ] || build_oracle
log "ready: $APISERVER_BIN"
log "ready: $ETCD_BIN"
log "ready: $HELM_BIN"
log "ready: $ORACLE_BIN"
