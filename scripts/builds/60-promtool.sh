# promtool checks the metrics exposition and tests the alert rules.
PROMETHEUS_VERSION="${VENEER_PROMETHEUS_VERSION:-v0.316.0}"
program promtool "$CACHE_ROOT/promtool-$PROMETHEUS_VERSION/promtool" VENEER_PROMTOOL build_promtool

build_promtool() {
  mkdir -p "$(dirname "${BIN_OF[promtool]}")"
  with_progress "promtool (github.com/prometheus/prometheus $PROMETHEUS_VERSION): go install" \
    env GOBIN="$(dirname "${BIN_OF[promtool]}")" go install -p 2 -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
}
