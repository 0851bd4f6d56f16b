# actionlint checks the GitHub Actions workflows (.github/workflows/release.yml) in test/packaging/release.test.ts.
ACTIONLINT_VERSION="${VENEER_ACTIONLINT_VERSION:-v1.7.12}"
program actionlint "$CACHE_ROOT/actionlint-$ACTIONLINT_VERSION/actionlint" VENEER_ACTIONLINT build_actionlint

build_actionlint() {
  mkdir -p "$(dirname "${BIN_OF[actionlint]}")"
  with_progress "actionlint (github.com/rhysd/actionlint $ACTIONLINT_VERSION): go install" \
    env GOBIN="$(dirname "${BIN_OF[actionlint]}")" go install -p 2 -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION" "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
}
