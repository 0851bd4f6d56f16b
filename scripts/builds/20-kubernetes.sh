# kube-apiserver and kube-scheduler (which marks pending pods Unschedulable, what Karpenter
# provisions for). k8s.io/kubernetes replaces every staging module with ./staging/..., so
# `go install k8s.io/kubernetes/cmd/kube-apiserver@vX` cannot work: a throw-away module that
# requires k8s.io/kubernetes and re-points each staging module at its published v0.N.P release
# builds the real thing.
K8S_VERSION="${VENEER_K8S_VERSION:-v1.35.4}"
program kube-apiserver "$CACHE_ROOT/kubernetes-$K8S_VERSION/kube-apiserver" VENEER_KUBE_APISERVER "build_kubernetes_command kube-apiserver"
program kube-scheduler "$CACHE_ROOT/kubernetes-$K8S_VERSION/kube-scheduler" VENEER_KUBE_SCHEDULER "build_kubernetes_command kube-scheduler"
# The real node (kit/node/): a kubelet running the chart's pods, and kube-controller-manager for
# what a Deployment needs (ReplicaSets, EndpointSlices, ServiceAccount tokens, the node's
# not-ready taint lifted).
program kubelet "$CACHE_ROOT/kubernetes-$K8S_VERSION/kubelet" VENEER_KUBELET "build_kubernetes_command kubelet"
program kube-controller-manager "$CACHE_ROOT/kubernetes-$K8S_VERSION/kube-controller-manager" VENEER_KUBE_CONTROLLER_MANAGER "build_kubernetes_command kube-controller-manager"

# One command of k8s.io/kubernetes (cmd/<name>), with the version ldflags the release build sets
# (a wrong version string breaks the apiserver's start-up).
build_kubernetes_command() {
  local cmd="$1" bin="${BIN_OF[$1]}"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  local minor="${K8S_VERSION#v1.}"          # 35.4
  local staging_version="v0.$minor"         # v0.35.4
  log "$cmd $K8S_VERSION: resolving staging modules ($staging_version)"
  cat > "$work/go.mod" <<GOMOD
module veneer.local/$cmd-build

go 1.25.0

require k8s.io/kubernetes $K8S_VERSION
GOMOD
  # The staging list comes from the release's own go.mod, so another release needs no edits here.
  local modfile; modfile="$(mktemp)"
  ( cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null )
  cp "$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod" "$modfile"
  local count=0
  while read -r mod; do
    ( cd "$work" && go mod edit -replace "$mod=$mod@$staging_version" )
    count=$((count + 1))
  done < <(grep -E '=> \./staging/' "$modfile" | awk '{print $1}')
  rm -f "$modfile"
  log "$cmd: $count staging modules pinned to $staging_version"
  # `go get` of the command resolves exactly the packages it needs.
  with_progress "$cmd: resolve dependencies" \
    bash -c "cd '$work' && go get 'k8s.io/kubernetes/cmd/$cmd@$K8S_VERSION'"
  mkdir -p "$(dirname "$bin")"
  local vp=k8s.io/component-base/version
  local ldflags="-s -w -X $vp.gitVersion=$K8S_VERSION -X $vp.gitMajor=1 -X $vp.gitMinor=${minor%%.*}"
  with_progress "$cmd: compile" \
    bash -c "cd '$work' && go build -p 2 -trimpath -ldflags '$ldflags' -o '$bin.tmp.$$' k8s.io/kubernetes/cmd/$cmd"
  mv "$bin.tmp.$$" "$bin"
}
