# helm renders, lints and installs the chart in tests; `go install` works for it.
HELM_VERSION="${VENEER_HELM_VERSION:-v3.18.6}"
program helm "$CACHE_ROOT/helm-$HELM_VERSION/helm" VENEER_HELM build_helm

build_helm() {
  mkdir -p "$(dirname "${BIN_OF[helm]}")"
  with_progress "helm $HELM_VERSION: go install" \
    env GOBIN="$(dirname "${BIN_OF[helm]}")" go install -p 2 -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}
