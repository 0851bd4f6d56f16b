# etcd: etcdmain.Main from a five-line wrapper module (`go install` of the server module fails on
# its replace lines); its own module, so its dependency versions never fight kube-apiserver's.
ETCD_VERSION="${VENEER_ETCD_VERSION:-v3.6.16}"
program etcd "$CACHE_ROOT/etcd-$ETCD_VERSION/etcd" VENEER_ETCD build_etcd

build_etcd() {
  local bin="${BIN_OF[etcd]}" work; work="$(mktemp -d)"
  trap 'rm -rf "$work"; trap - RETURN' RETURN
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
  mkdir -p "$(dirname "$bin")"
  with_progress "etcd: compile" bash -c "cd '$work' && go build -p 2 -trimpath -ldflags '-s -w' -o '$bin.tmp.$$' ."
  mv "$bin.tmp.$$" "$bin"
}
