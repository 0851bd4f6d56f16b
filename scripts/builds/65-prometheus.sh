# A real Prometheus, and prometheus-operator with its config reloader, which turn the chart's
# ServiceMonitor and PrometheusRule into Prometheus's configuration as kube-prometheus-stack does
# (test/_real-node/prometheus.test.ts). Prometheus is the module promtool is built from (60-promtool.sh).
PROMETHEUS_OPERATOR_VERSION="${VENEER_PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
PROMETHEUS_OPERATOR_DIR="$CACHE_ROOT/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
# Prometheus discovers its targets only through Kubernetes here: the other service-discovery
# plugins are left out, as for promtool.
program prometheus "$CACHE_ROOT/prometheus-$PROMETHEUS_VERSION-k8s-sd/prometheus" VENEER_PROMETHEUS build_prometheus
program prometheus-operator "$PROMETHEUS_OPERATOR_DIR/operator" VENEER_PROMETHEUS_OPERATOR build_prometheus_operator \
  "VENEER_PROMETHEUS_CONFIG_RELOADER=$PROMETHEUS_OPERATOR_DIR/prometheus-config-reloader" \
  "VENEER_PROMETHEUS_OPERATOR_CRDS=$PROMETHEUS_OPERATOR_DIR/crds"

build_prometheus() {
  mkdir -p "$(dirname "${BIN_OF[prometheus]}")"
  with_progress "prometheus (github.com/prometheus/prometheus $PROMETHEUS_VERSION): go install" \
    env GOBIN="$(dirname "${BIN_OF[prometheus]}")" go install -p 2 -trimpath -ldflags "-s -w" -tags remove_all_sd,enable_kubernetes_sd "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
}

# The operator's go.mod replaces its two nested modules (pkg/apis/monitoring, pkg/client) with
# directories its module zip leaves out, so `go install module@version` refuses it. The build runs
# in a copy of the module without those replaces: the nested modules then come from the proxy at
# the same version, which go.sum already names.
build_prometheus_operator() {
  local work; work="$(mktemp -d)"
  trap 'chmod -R u+w "$work"; rm -rf "$work"; trap - RETURN' RETURN
  local mod="github.com/prometheus-operator/prometheus-operator"
  local src
  src="$(cd "$work" && go mod download -json "$mod@$PROMETHEUS_OPERATOR_VERSION" | sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')"
  cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
  (cd "$work/src" && go mod edit -dropreplace="$mod/pkg/apis/monitoring" -dropreplace="$mod/pkg/client")
  mkdir -p "$PROMETHEUS_OPERATOR_DIR.tmp/crds"
  cp "$work/src/example/prometheus-operator-crd/"*.yaml "$PROMETHEUS_OPERATOR_DIR.tmp/crds/"
  with_progress "prometheus-operator ($mod $PROMETHEUS_OPERATOR_VERSION): go build" \
    bash -c "cd '$work/src' && go build -p 2 -trimpath -ldflags '-s -w' -o '$PROMETHEUS_OPERATOR_DIR.tmp/' ./cmd/operator ./cmd/prometheus-config-reloader"
  rm -rf "$PROMETHEUS_OPERATOR_DIR" && mv "$PROMETHEUS_OPERATOR_DIR.tmp" "$PROMETHEUS_OPERATOR_DIR"
}
