# promtool checks the metrics exposition and tests the alert rules. It never discovers targets, so
# it is built without Prometheus' service-discovery plugins (`remove_all_sd`: the cloud providers'
# SDKs are most of what a default build compiles).
PROMETHEUS_VERSION="${VENEER_PROMETHEUS_VERSION:-v0.316.0}"
program promtool "$CACHE_ROOT/promtool-$PROMETHEUS_VERSION-nosd/promtool" VENEER_PROMTOOL build_promtool

build_promtool() {
  mkdir -p "$(dirname "${BIN_OF[promtool]}")"
  with_progress "promtool (github.com/prometheus/prometheus $PROMETHEUS_VERSION): go install" \
    env GOBIN="$(dirname "${BIN_OF[promtool]}")" go install -p 2 -trimpath -ldflags "-s -w" -tags remove_all_sd "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
}
