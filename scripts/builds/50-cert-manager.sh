# cert-manager's own controllers and cainjector (kit/cert-manager: its cmd/ modules are not served
# by the proxy, so a wrapper main of ours starts them), with the CRDs of the same module version.
CM_SRC="$REPO_ROOT/kit/cert-manager"
CM_VERSION="$(awk '$1 == "github.com/cert-manager/cert-manager" { print $2 }' "$CM_SRC/go.mod")"
CM_DIR="$CACHE_ROOT/cert-manager-$CM_VERSION-$(sources_hash "$CM_SRC/go.mod" "$CM_SRC/go.sum" "$CM_SRC/main.go")"
program cert-manager "$CM_DIR/cert-manager" VENEER_CERT_MANAGER build_cert_manager "VENEER_CERT_MANAGER_CRDS=$CM_DIR/crds"

build_cert_manager() {
  local bin="${BIN_OF[cert-manager]}"
  mkdir -p "$CM_DIR"
  drop_stale cert-manager- "$CM_DIR"
  # go.mod and go.sum are committed and tidy: the build must not change them.
  with_progress "cert-manager $CM_VERSION (kit/cert-manager): compile" \
    bash -c "cd '$CM_SRC' && GOFLAGS='-mod=readonly -buildvcs=false' go build -p 2 -trimpath -ldflags '-s -w' -o '$bin.tmp.$$' ."
  local module_dir
  module_dir="$(cd "$CM_SRC" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)" \
    && rm -rf "$CM_DIR/crds" && mkdir -p "$CM_DIR/crds" \
    && cp "$module_dir"/deploy/crds/*.yaml "$CM_DIR/crds/" && chmod u+w "$CM_DIR"/crds/*.yaml \
    || { log "cert-manager: copying its CRDs FAILED"; exit 1; }
  mv "$bin.tmp.$$" "$bin"
}
