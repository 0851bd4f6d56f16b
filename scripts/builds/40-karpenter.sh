# Karpenter's programs, one Go module per Karpenter version (kit/karpenter-build/<version>: go.mod,
# go.sum, tools.go, committed and tidy), built by one `go build` so that the packages they share
# (most of Karpenter, the AWS SDK, client-go) compile once:
#   judge       test/judges/oracle: Karpenter's own NodeOverlay controller and store, the decision
#               engine's judge (with the AWS provider's apis init); in a module with the AWS
#               provider also the effect's judge, its launch path (launch_aws.go, -tags veneer_aws)
#   keys        test/judges/aws-instance-keys: the label keys the AWS provider's own instance-type code defines
#   controller  github.com/aws/karpenter-provider-aws/cmd/controller: real Karpenter on AWS (kit/aws)
#   kwok        sigs.k8s.io/karpenter/kwok: real Karpenter with its KWOK cloud provider (kit/karpenter.ts)
# The judge also gets one file of ours inside Karpenter's own disruption package (test/judges/oracle/shim:
# exported wrappers of computeConsolidation and sumCandidatePrices, for the consolidation judge). The go
# command refuses an -overlay of a file beneath GOMODCACHE, so the judge's build uses a byte-for-byte
# copy of the sigs.k8s.io/karpenter module from the cache (a go.work `replace` of the build's own; the
# committed go.mod and go.sum are not touched) and adds the shim to the copy's package with
# `go build -overlay`: every Karpenter file is the module's own. The judge is therefore built by a
# `go build` of its own (the packages that do not import Karpenter still compile once: same build
# cache), and the shim is part of its source hash: an edit rebuilds it.
# Each program's CRDs are copied from the module version it was built from, and the AWS controller's
# static on-demand price table (what it prices with under ISOLATED_VPC) with them. Versions of the AWS
# provider that the proxy cannot assemble (v1.15.x: some of their modules are refused) have no
# controller here.
KARPENTER_BUILD="$REPO_ROOT/kit/karpenter-build"
# The KWOK controller `npm test` runs; the matrix runs the others.
KARPENTER_KWOK_VERSION="${VENEER_KARPENTER_KWOK_VERSION:-v1.15.0}"
declare -A KARPENTER_DIR_OF=() KARPENTER_SRC_OF=([judge]="$REPO_ROOT/test/judges/oracle" [keys]="$REPO_ROOT/test/judges/aws-instance-keys")
# Build tags per module: the AWS provider's launch code joins the judge where the module has it.
declare -A KARPENTER_TAGS_OF=([v1.14.3]=veneer_aws)
# A file of ours added to a package of sigs.k8s.io/karpenter (its directory in the module) for one
# program's build only.
declare -A KARPENTER_SHIM_OF=([judge]="$REPO_ROOT/test/judges/oracle/shim/zz_veneer_judge.go")
declare -A KARPENTER_SHIM_PKG_OF=([judge]=pkg/controllers/disruption)
declare -A KARPENTER_PKG_OF=([judge]=./judge [keys]=./keys [controller]=github.com/aws/karpenter-provider-aws/cmd/controller [kwok]=sigs.k8s.io/karpenter/kwok)

# karpenter_module VERSION PROGRAM... registers the version's programs under their cached paths.
karpenter_module() {
  local version="$1"; shift
  local mod="$KARPENTER_BUILD/$version"
  local dir="$CACHE_ROOT/karpenter-$version-$(sources_hash "$mod/go.mod" "$mod/go.sum" "$mod/tools.go")"
  KARPENTER_DIR_OF[$version]="$dir"
  local envv="${version^^}"; envv="${envv//./_}"     # V1_14_3
  local p bin
  for p in "$@"; do
    # A program built from our sources carries their hash: an edit rebuilds it (and only it).
    bin="$dir/$p"
    local shim=()
    [ -n "${KARPENTER_SHIM_OF[$p]:-}" ] && shim=("${KARPENTER_SHIM_OF[$p]}")
    [ -n "${KARPENTER_SRC_OF[$p]:-}" ] && bin="$dir/$p-$(sources_hash "${KARPENTER_SRC_OF[$p]}"/*.go "${shim[@]}")"
    case "$p" in
      judge) program "karpenter-oracle-$version" "$bin" "VENEER_KARPENTER_ORACLE_$envv" "build_karpenter_module $version" ;;
      keys) program aws-instance-keys "$bin" VENEER_AWS_INSTANCE_KEYS "build_karpenter_module $version" ;;
      controller) program karpenter-aws "$bin" VENEER_KARPENTER_AWS "build_karpenter_module $version" "VENEER_KARPENTER_AWS_CRDS=$dir/aws-crds" \
        "VENEER_KARPENTER_AWS_PRICES=$dir/zz_generated.pricing_aws.go" ;;
      kwok) if [ "$version" = "$KARPENTER_KWOK_VERSION" ]; then
          program karpenter-kwok "$bin" VENEER_KARPENTER_KWOK "build_karpenter_module $version" "VENEER_KARPENTER_KWOK_CRDS=$dir/kwok-crds"
        fi ;;
    esac
  done
}

karpenter_module v1.14.3 judge keys controller kwok
karpenter_module v1.15.0 judge kwok
# The judges of every version, by one name.
JUDGES=()
for name in "${PROGRAMS[@]}"; do [[ "$name" == karpenter-oracle-* ]] && JUDGES+=("$name"); done
unset name

# Builds, in one go, every wanted program of VERSION that is not cached yet.
build_karpenter_module() {
  local version="$1" dir="${KARPENTER_DIR_OF[$1]}" mod="$KARPENTER_BUILD/$1"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  cp "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$work/"
  local name p pkgs=() shimmed=() outs=()
  for name in "${WANTED[@]}"; do
    [ "${BUILD_OF[$name]}" = "build_karpenter_module $version" ] && [ ! -x "${BIN_OF[$name]}" ] || continue
    p="$(basename "${BIN_OF[$name]}")"; p="${p%%-*}"
    if [ -n "${KARPENTER_SRC_OF[$p]:-}" ]; then mkdir -p "$work/$p" && cp "${KARPENTER_SRC_OF[$p]}"/*.go "$work/$p/"; fi
    if [ -n "${KARPENTER_SHIM_OF[$p]:-}" ]; then shimmed+=("$p"); else pkgs+=("${KARPENTER_PKG_OF[$p]}"); fi
    outs+=("$p:${BIN_OF[$name]}")
  done
  local toolchain; toolchain="$(toolchain_for "$work/go.mod")"
  mkdir -p "$dir" "$work/out"
  drop_stale "karpenter-$version-" "$dir"
  # go.mod and go.sum are committed and tidy: the build must not change them.
  local build="cd '$work' && GOTOOLCHAIN='$toolchain' GOFLAGS=-mod=readonly go build -p 2 -trimpath -tags '${KARPENTER_TAGS_OF[$version]:-}' -ldflags '-s -w' -o out/"
  if [ "${#pkgs[@]}" -gt 0 ]; then
    with_progress "karpenter $version: ${pkgs[*]} (toolchain $toolchain): compile" bash -c "$build ${pkgs[*]}"
  fi
  local karpenter_dir shim target
  for p in "${shimmed[@]}"; do
    # This program's build only: Karpenter's module copied out of the cache (-overlay may not name a
    # file beneath GOMODCACHE), the shim added to the copy's package by an overlay.
    karpenter_dir="$(cd "$work" && GOTOOLCHAIN="$toolchain" GOFLAGS=-mod=readonly go mod download -json sigs.k8s.io/karpenter \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [ -n "$karpenter_dir" ] || { log "karpenter $version: locating sigs.k8s.io/karpenter in the module cache FAILED"; exit 1; }
    rm -rf "$work/karpenter-module" && cp -r "$karpenter_dir" "$work/karpenter-module" && chmod -R u+w "$work/karpenter-module"
    printf 'go %s\n\nuse .\n\nreplace sigs.k8s.io/karpenter => ./karpenter-module\n' "$(awk '$1 == "go" { print $2 }' "$work/go.mod")" >"$work/$p.go.work"
    shim="${KARPENTER_SHIM_OF[$p]}" target="${KARPENTER_SHIM_PKG_OF[$p]}"
    cp "$shim" "$work/$p.shim.go"
    printf '{"Replace": {"%s/karpenter-module/%s/%s": "%s/%s.shim.go"}}\n' "$work" "$target" "$(basename "$shim")" "$work" "$p" >"$work/$p.overlay.json"
    with_progress "karpenter $version: ${KARPENTER_PKG_OF[$p]} with $(basename "$shim") in $target (toolchain $toolchain): compile" \
      bash -c "GOWORK='$work/$p.go.work' && export GOWORK && $build -overlay '$work/$p.overlay.json' ${KARPENTER_PKG_OF[$p]}"
  done
  local module_dir out
  for out in "${outs[@]}"; do
    p="${out%%:*}"
    case "$p" in
      controller)
        module_dir="$(cd "$work" && GOTOOLCHAIN="$toolchain" GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/aws/karpenter-provider-aws)" \
          && rm -rf "$dir/aws-crds" && mkdir -p "$dir/aws-crds" \
          && cp "$module_dir"/pkg/apis/crds/*.yaml "$dir/aws-crds/" && chmod u+w "$dir"/aws-crds/*.yaml \
          && install -m 0644 "$module_dir/pkg/providers/pricing/zz_generated.pricing_aws.go" "$dir/" \
          || { log "karpenter-aws $version: copying its CRDs FAILED"; exit 1; } ;;
      kwok)
        # NodeClaim, NodePool, NodeOverlay and CapacityBuffer as the KWOK chart installs them (their
        # rules also accept the karpenter.kwok.sh/* keys), and the KWOKNodeClass.
        module_dir="$(cd "$work" && GOTOOLCHAIN="$toolchain" GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)" \
          && rm -rf "$dir/kwok-crds" && mkdir -p "$dir/kwok-crds" \
          && cp "$module_dir"/kwok/charts/crds/*.yaml "$module_dir/kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml" "$dir/kwok-crds/" \
          && chmod u+w "$dir"/kwok-crds/*.yaml \
          || { log "karpenter-kwok $version: copying its CRDs FAILED"; exit 1; } ;;
    esac
    # Builds of earlier sources of this program are never used again.
    find "$dir" -maxdepth 1 -type f -name "$p-*" ! -path "${out#*:}" -delete
    mv "$work/out/$p" "${out#*:}"
  done
}
