#!/usr/bin/env bash
# Builds the local control plane's programs from the Go module proxy into a cache outside the
# repo: kube-apiserver, kube-scheduler, etcd, helm, cert-manager (kit/cert-manager: its controllers and
# cainjector, with its CRDs), promtool, the AWS provider's key printer (test/aws-instance-keys), the
# Karpenter judges (test/karpenter-oracle: Karpenter's own NodeOverlay controller and store, the judge
# of the decision engine, once per Karpenter version) and real Karpenter with its KWOK cloud provider
# (karpenter-kwok, with the CRDs of the same module version; kit/karpenter.ts runs it).
# Idempotent: when every one is cached it only prints their paths.
#
# Why a wrapper module: k8s.io/kubernetes replaces every staging module with ./staging/...,
# so `go install k8s.io/kubernetes/cmd/kube-apiserver@vX` cannot work. A throw-away module
# that requires k8s.io/kubernetes and re-points each staging module at its published v0.N.P
# release builds the real thing (kube-apiserver and kube-scheduler alike).
set -euo pipefail

K8S_VERSION="${VENEER_K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${VENEER_ETCD_VERSION:-v3.6.16}"
# helm renders and lints the chart in tests; it is a Go program too, and `go install` works for it.
HELM_VERSION="${VENEER_HELM_VERSION:-v3.18.6}"
CACHE_ROOT="${VENEER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/veneer-node-watcher}"
K8S_DIR="$CACHE_ROOT/kubernetes-$K8S_VERSION"
ETCD_DIR="$CACHE_ROOT/etcd-$ETCD_VERSION"
APISERVER_BIN="$K8S_DIR/kube-apiserver"
# kube-scheduler marks pending pods Unschedulable, which is what Karpenter provisions for.
SCHEDULER_BIN="$K8S_DIR/kube-scheduler"
ETCD_BIN="$ETCD_DIR/etcd"
HELM_DIR="$CACHE_ROOT/helm-$HELM_VERSION"
HELM_BIN="$HELM_DIR/helm"
# promtool checks the metrics exposition and tests the alert rules.
PROMETHEUS_VERSION="${VENEER_PROMETHEUS_VERSION:-v0.316.0}"
PROMTOOL_BIN="$CACHE_ROOT/promtool-$PROMETHEUS_VERSION/promtool"
# cert-manager and the judges are built from this repository's sources: the cache key is their
# hash, so an edit rebuilds them and an old build is never used by mistake.
# The judge: one Go source (test/karpenter-oracle/*.go) built once per Karpenter version, each with
# its own go.mod/go.sum (test/karpenter-oracle/<version>/, committed and tidy).
ORACLE_SRC="$(cd "$(dirname "$0")/.." && pwd)/test/karpenter-oracle"
JUDGE_VERSIONS=(v1.14.1 v1.15.0)
# A module whose `go` directive is newer than the local Go is built with this toolchain (the go
# command fetches it from the module proxy once per machine): Karpenter v1.15.0 needs Go >= 1.26.9.
JUDGE_NEWER_TOOLCHAIN="${VENEER_JUDGE_TOOLCHAIN:-go1.27.3}"
declare -A JUDGE_BIN=()
for v in "${JUDGE_VERSIONS[@]}"; do
  hash="$(cat "$ORACLE_SRC"/*.go "$ORACLE_SRC/$v/go.mod" "$ORACLE_SRC/$v/go.sum" | sha256sum | cut -c1-12)"
  JUDGE_BIN[$v]="$CACHE_ROOT/karpenter-oracle-$v-$hash/karpenter-oracle"
done
unset v hash
# The AWS provider's instance-type keys, printed by its own code (test/aws-instance-keys), which
# test/engine/provider-keys.test.ts compares with the engine's.
AWS_KEYS_SRC="$(cd "$(dirname "$0")/.." && pwd)/test/aws-instance-keys"
AWS_KEYS_BIN="$CACHE_ROOT/aws-instance-keys-$(cat "$AWS_KEYS_SRC/go.mod" "$AWS_KEYS_SRC/go.sum" "$AWS_KEYS_SRC/main.go" | sha256sum | cut -c1-12)/aws-instance-keys"
CM_SRC="$(cd "$(dirname "$0")/.." && pwd)/kit/cert-manager"
CM_VERSION="$(awk '$1 == "github.com/cert-manager/cert-manager" { print $2 }' "$CM_SRC/go.mod")"
CM_HASH="$(cat "$CM_SRC/go.mod" "$CM_SRC/go.sum" "$CM_SRC/main.go" | sha256sum | cut -c1-12)"
CM_DIR="$CACHE_ROOT/cert-manager-$CM_VERSION-$CM_HASH"
CM_BIN="$CM_DIR/cert-manager"
# Real Karpenter with its KWOK cloud provider (sigs.k8s.io/karpenter/kwok, as Karpenter's own scale
# tests run it): it launches "instances" by creating Node objects. Its CRDs are copied from the same
# module version (kwok/charts/crds: their rules also accept the karpenter.kwok.sh/* keys).
KARPENTER_KWOK_VERSION="${VENEER_KARPENTER_KWOK_VERSION:-v1.15.0}"
KWOK_DIR="$CACHE_ROOT/karpenter-kwok-$KARPENTER_KWOK_VERSION"
KWOK_BIN="$KWOK_DIR/karpenter-kwok"

log() { printf '[control-plane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "${1:-}" = "--print-env" ]; then
  printf 'VENEER_KUBE_APISERVER=%s\nVENEER_KUBE_SCHEDULER=%s\nVENEER_ETCD=%s\nVENEER_HELM=%s\nVENEER_CERT_MANAGER=%s\nVENEER_CERT_MANAGER_CRDS=%s\nVENEER_PROMTOOL=%s\nVENEER_AWS_INSTANCE_KEYS=%s\nVENEER_KARPENTER_KWOK=%s\nVENEER_KARPENTER_KWOK_CRDS=%s\n' \
    "$APISERVER_BIN" "$SCHEDULER_BIN" "$ETCD_BIN" "$HELM_BIN" "$CM_BIN" "$CM_DIR/crds" "$PROMTOOL_BIN" "$AWS_KEYS_BIN" "$KWOK_BIN" "$KWOK_DIR/crds"
  # VENEER_KARPENTER_ORACLE_V1_14_1=..., one per Karpenter version.
  for v in "${JUDGE_VERSIONS[@]}"; do
    name="${v^^}"
    printf 'VENEER_KARPENTER_ORACLE_%s=%s\n' "${name//./_}" "${JUDGE_BIN[$v]}"
  done
  exit 0
fi

# Programs by name, in build order; arguments name a subset (the demo needs only the first two).
# `karpenter-oracle` alone names the judges of every Karpenter version.
declare -A BIN_OF=([etcd]="$ETCD_BIN" [kube-apiserver]="$APISERVER_BIN" [kube-scheduler]="$SCHEDULER_BIN"
  [helm]="$HELM_BIN" [cert-manager]="$CM_BIN" [promtool]="$PROMTOOL_BIN" [aws-instance-keys]="$AWS_KEYS_BIN"
  [karpenter-kwok]="$KWOK_BIN")
PROGRAMS=(etcd kube-apiserver kube-scheduler helm)
for v in "${JUDGE_VERSIONS[@]}"; do
  BIN_OF[karpenter-oracle-$v]="${JUDGE_BIN[$v]}"
  PROGRAMS+=("karpenter-oracle-$v")
done
PROGRAMS+=(cert-manager promtool aws-instance-keys karpenter-kwok)
WANTED=()
for name in "${@:-${PROGRAMS[@]}}"; do
  if [ "$name" = karpenter-oracle ]; then
    for v in "${JUDGE_VERSIONS[@]}"; do WANTED+=("karpenter-oracle-$v"); done
  else
    WANTED+=("$name")
  fi
done
for name in "${WANTED[@]}"; do
  [ -n "${BIN_OF[$name]:-}" ] || { log "unknown program $name (one of: ${PROGRAMS[*]} karpenter-oracle)"; exit 2; }
done
all_cached() {
  local name
  for name in "${WANTED[@]}"; do [ -x "${BIN_OF[$name]}" ] || return 1; done
}
if all_cached; then
  for name in "${WANTED[@]}"; do log "cached: ${BIN_OF[$name]}"; done
  exit 0
fi

bash "$(dirname "$0")/system-tools.sh" --go

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=mod"

# Prints a heartbeat every 30 s while a long step runs, so a cold build is visibly alive; a step
# that ends sooner (a warm build takes seconds) is not kept waiting for the next heartbeat.
with_progress() {
  local what="$1"; shift
  local start=$SECONDS
  "$@" &
  local pid=$!
  local beat=$((start + 30))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$beat" ] && kill -0 "$pid" 2>/dev/null; then
      log "$what: still working ($((SECONDS - start)) s)"
      beat=$((beat + 30))
    fi
  done
  # set -e would stop the script too, but without saying which step failed.
  wait "$pid" || { local rc=$?; log "$what: FAILED (exit $rc)"; exit "$rc"; }
  log "$what: done in $((SECONDS - start)) s"
}

# One command of k8s.io/kubernetes (cmd/<name>) from the wrapper module, with the version ldflags the
# release build sets (a wrong version string breaks the apiserver's start-up).
build_kubernetes_command() {
  local cmd="$1" bin="$2"
  local work; work="$(mktemp -d)"
  # Cleared once run: the trap would fire again when the caller (build_kube_scheduler) returns.
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  local minor="${K8S_VERSION#v1.}"          # 35.4
  local staging_version="v0.$minor"         # v0.35.4
  log "$cmd $K8S_VERSION: resolving staging modules ($staging_version)"
  cat > "$work/go.mod" <<GOMOD
module veneer.local/$cmd-build

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
  log "$cmd: $count staging modules pinned to $staging_version"
  # `go get` of the command resolves exactly the packages it needs.
  with_progress "$cmd: resolve dependencies" \
    bash -c "cd '$work' && go get 'k8s.io/kubernetes/cmd/$cmd@$K8S_VERSION'"
  mkdir -p "$(dirname "$bin")"
  local vp=k8s.io/component-base/version
  local ldflags="-s -w -X $vp.gitVersion=$K8S_VERSION -X $vp.gitMajor=1 -X $vp.gitMinor=${minor%%.*}"
  with_progress "$cmd: compile" \
    bash -c "cd '$work' && go build -p 2 -trimpath -ldflags '$ldflags' -o '$bin.tmp.$$' k8s.io/kubernetes/cmd/$cmd"
  mv "$bin.tmp.$$" "$bin"
}

build_kube_apiserver() { build_kubernetes_command kube-apiserver "$APISERVER_BIN"; }
build_kube_scheduler() { build_kubernetes_command kube-scheduler "$SCHEDULER_BIN"; }

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

# The judge for one Karpenter version: the shared sources and that version's go.mod/go.sum in a
# temporary module, so a build never writes into the repository.
build_karpenter_oracle() {
  local version="$1" bin="${JUDGE_BIN[$1]}"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  cp "$ORACLE_SRC"/*.go "$ORACLE_SRC/$version/go.mod" "$ORACLE_SRC/$version/go.sum" "$work/"
  local required; required="$(awk '$1 == "sigs.k8s.io/karpenter" { print $2 }' "$work/go.mod")"
  [ "$required" = "$version" ] || { log "karpenter-oracle-$version: its go.mod requires sigs.k8s.io/karpenter $required"; exit 1; }
  local toolchain=local need have
  need="$(awk '$1 == "go" { print $2 }' "$work/go.mod")"
  have="$(go env GOVERSION | sed 's/^go//')"
  [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" = "$need" ] || toolchain="$JUDGE_NEWER_TOOLCHAIN"
  mkdir -p "$(dirname "$bin")"
  # Builds of earlier sources for this version are never used again.
  find "$CACHE_ROOT" -maxdepth 1 -name "karpenter-oracle-$version-*" ! -path "$(dirname "$bin")" -exec rm -rf {} +
  # go.mod and go.sum are committed and tidy: the build must not change them.
  with_progress "karpenter-oracle-$version (sigs.k8s.io/karpenter $version, go $need, toolchain $toolchain): compile" \
    bash -c "cd '$work' && GOTOOLCHAIN='$toolchain' GOFLAGS=-mod=readonly go build -p 2 -trimpath -ldflags '-s -w' -o '$bin.tmp.$$' ."
  mv "$bin.tmp.$$" "$bin"
}

build_cert_manager() {
  mkdir -p "$CM_DIR"
  # Builds of earlier wrapper sources are never used again.
  find "$CACHE_ROOT" -maxdepth 1 -name 'cert-manager-*' ! -path "$CM_DIR" -exec rm -rf {} +
  # go.mod and go.sum are committed and tidy: the build must not change them.
  with_progress "cert-manager $CM_VERSION (kit/cert-manager): compile" \
    bash -c "cd '$CM_SRC' && GOFLAGS='-mod=readonly -buildvcs=false' go build -p 2 -trimpath -ldflags '-s -w' -o '$CM_BIN.tmp.$$' ."
  # The CRDs come from the very module version the controllers were built from.
  local module_dir
  module_dir="$(cd "$CM_SRC" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)" \
    && rm -rf "$CM_DIR/crds" && mkdir -p "$CM_DIR/crds" \
    && cp "$module_dir"/deploy/crds/*.yaml "$CM_DIR/crds/" && chmod u+w "$CM_DIR"/crds/*.yaml \
    || { log "cert-manager: copying its CRDs FAILED"; exit 1; }
  mv "$CM_BIN.tmp.$$" "$CM_BIN"
}

build_promtool() {
  mkdir -p "$(dirname "$PROMTOOL_BIN")"
  with_progress "promtool (github.com/prometheus/prometheus $PROMETHEUS_VERSION): go install" \
    env GOBIN="$(dirname "$PROMTOOL_BIN")" go install -p 2 -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
}

# Karpenter's KWOK build from a throw-away module that requires the version; a tools.go importing the
# command keeps `go mod tidy` honest (it would drop a requirement no file imports). Karpenter v1.15
# needs a newer Go than the local one: the toolchain is fetched once per machine, as for the judges.
build_karpenter_kwok() {
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  cat > "$work/go.mod" <<GOMOD
module veneer.local/karpenter-kwok-build

go 1.25.0

require sigs.k8s.io/karpenter $KARPENTER_KWOK_VERSION
GOMOD
  cat > "$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "sigs.k8s.io/karpenter/kwok"
GO
  local toolchain="$JUDGE_NEWER_TOOLCHAIN"
  with_progress "karpenter-kwok $KARPENTER_KWOK_VERSION (toolchain $toolchain): go mod tidy" \
    bash -c "cd '$work' && GOTOOLCHAIN='$toolchain' go mod tidy >/dev/null"
  mkdir -p "$KWOK_DIR"
  with_progress "karpenter-kwok $KARPENTER_KWOK_VERSION: compile" \
    bash -c "cd '$work' && GOTOOLCHAIN='$toolchain' go build -p 2 -trimpath -ldflags '-s -w' -o '$KWOK_BIN.tmp.$$' sigs.k8s.io/karpenter/kwok"
  # The CRDs of the very module version the controller was built from: NodeClaim, NodePool,
  # NodeOverlay and CapacityBuffer as the KWOK chart installs them, and the KWOKNodeClass.
  local module_dir
  module_dir="$(cd "$work" && GOTOOLCHAIN="$toolchain" go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)" \
    && rm -rf "$KWOK_DIR/crds" && mkdir -p "$KWOK_DIR/crds" \
    && cp "$module_dir"/kwok/charts/crds/*.yaml "$module_dir/kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml" "$KWOK_DIR/crds/" \
    && chmod u+w "$KWOK_DIR"/crds/*.yaml \
    || { log "karpenter-kwok: copying its CRDs FAILED"; exit 1; }
  mv "$KWOK_BIN.tmp.$$" "$KWOK_BIN"
}

build_aws_instance_keys() {
  mkdir -p "$(dirname "$AWS_KEYS_BIN")"
  find "$CACHE_ROOT" -maxdepth 1 -name 'aws-instance-keys-*' ! -path "$(dirname "$AWS_KEYS_BIN")" -exec rm -rf {} +
  # go.mod and go.sum are committed and tidy: the build must not change them.
  with_progress "aws-instance-keys (github.com/aws/karpenter-provider-aws, test/aws-instance-keys): compile" \
    bash -c "cd '$AWS_KEYS_SRC' && GOFLAGS=-mod=readonly go build -p 2 -trimpath -ldflags '-s -w' -o '$AWS_KEYS_BIN.tmp.$$' ."
  mv "$AWS_KEYS_BIN.tmp.$$" "$AWS_KEYS_BIN"
}

log "cold build of ${WANTED[*]} into $CACHE_ROOT (first time only: all of them take 30-50 minutes on 2 cores)"
for name in "${WANTED[@]}"; do
  [ -x "${BIN_OF[$name]}" ] && continue
  case "$name" in
    karpenter-oracle-*) build_karpenter_oracle "${name#karpenter-oracle-}" ;;
    *) "build_${name//-/_}" ;;
  esac
done
for name in "${WANTED[@]}"; do log "ready: ${BIN_OF[$name]}"; done
