# Karpenter's programs, one Go module per Karpenter version (kit/karpenter-build/<version>: go.mod,
# go.sum, tools.go, committed and tidy), built by one `go build` so that the packages they share
# (most of Karpenter, the AWS SDK, client-go) compile once:
#   judge       test/karpenter-oracle: Karpenter's own NodeOverlay controller and store, the decision
#               engine's judge (with the AWS provider's apis init); in a module with the AWS
#               provider also the effect's judge, its launch path (launch_aws.go, -tags veneer_aws)
#   keys        test/aws-instance-keys: the label keys the AWS provider's own instance-type code defines
#   controller  github.com/aws/karpenter-provider-aws/cmd/controller: real Karpenter on AWS (kit/aws)
#   kwok        sigs.k8s.io/karpenter/kwok: real Karpenter with its KWOK cloud provider (kit/karpenter.ts)
# Each program's CRDs are copied from the module version it was built from, and the AWS controller's
# static on-demand price table (what it prices with under ISOLATED_VPC) with them. Versions of the AWS
# provider that the proxy cannot assemble (v1.15.x: some of their modules are refused) have no
# controller here.
KARPENTER_BUILD="$REPO_ROOT/kit/karpenter-build"
# The KWOK controller `npm test` runs; the matrix runs the others.
KARPENTER_KWOK_VERSION="${VENEER_KARPENTER_KWOK_VERSION:-v1.15.0}"
declare -A KARPENTER_DIR_OF=() KARPENTER_SRC_OF=([judge]="$REPO_ROOT/test/karpenter-oracle" [keys]="$REPO_ROOT/test/aws-instance-keys")
# Build tags per module: the AWS provider's launch code joins the judge where the module has it.
declare -A KARPENTER_TAGS_OF=([v1.14.3]=veneer_aws)
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
    [ -n "${KARPENTER_SRC_OF[$p]:-}" ] && bin="$dir/$p-$(sources_hash "${KARPENTER_SRC_OF[$p]}"/*.go)"
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
  local name p pkgs=() outs=()
  for name in "${WANTED[@]}"; do
    [ "${BUILD_OF[$name]}" = "build_karpenter_module $version" ] && [ ! -x "${BIN_OF[$name]}" ] || continue
    p="$(basename "${BIN_OF[$name]}")"; p="${p%%-*}"
    if [ -n "${KARPENTER_SRC_OF[$p]:-}" ]; then mkdir -p "$work/$p" && cp "${KARPENTER_SRC_OF[$p]}"/*.go "$work/$p/"; fi
    pkgs+=("${KARPENTER_PKG_OF[$p]}")
    outs+=("$p:${BIN_OF[$name]}")
  done
  local toolchain; toolchain="$(toolchain_for "$work/go.mod")"
  mkdir -p "$dir" "$work/out"
  drop_stale "karpenter-$version-" "$dir"
  # go.mod and go.sum are committed and tidy: the build must not change them.
  with_progress "karpenter $version: ${pkgs[*]} (toolchain $toolchain): compile" \
    bash -c "cd '$work' && GOTOOLCHAIN='$toolchain' GOFLAGS=-mod=readonly go build -p 2 -trimpath -tags '${KARPENTER_TAGS_OF[$version]:-}' -ldflags '-s -w' -o out/ ${pkgs[*]}"
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
