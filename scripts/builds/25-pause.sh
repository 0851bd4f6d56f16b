# The pod sandbox's first process for the real node (kit/node/): registry.k8s.io/pause cannot be
# pulled here, so a static one of ours is the image containerd starts every pod with.
PAUSE_SRC="$REPO_ROOT/kit/node/pause"
PAUSE_DIR="$CACHE_ROOT/pause-$(sources_hash "$PAUSE_SRC/go.mod" "$PAUSE_SRC/main.go")"
program pause "$PAUSE_DIR/pause" VENEER_PAUSE build_pause

build_pause() {
  local bin="${BIN_OF[pause]}"
  mkdir -p "$PAUSE_DIR"
  drop_stale pause- "$PAUSE_DIR"
  ( cd "$PAUSE_SRC" && CGO_ENABLED=0 GOFLAGS='-mod=readonly -buildvcs=false' go build -trimpath -ldflags '-s -w' -o "$bin.tmp.$$" . )
  mv "$bin.tmp.$$" "$bin"
}
