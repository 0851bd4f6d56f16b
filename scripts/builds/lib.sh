# Sourced by scripts/control-plane.sh: what every build recipe (scripts/builds/NN-*.sh) shares.
# A recipe registers its programs with `program` and defines the function that builds them; the
# driver decides what is wanted, what is cached and in which order to build.

CACHE_ROOT="${VENEER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/veneer-node-watcher}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# A module whose `go` directive is newer than the local Go is built with this toolchain (the go
# command fetches it from the module proxy once per machine). Every Karpenter module uses it, so
# that their shared packages compile once into the build cache.
NEWER_TOOLCHAIN="${VENEER_GO_TOOLCHAIN:-go1.27.3}"

PROGRAMS=()
declare -A BIN_OF=() BUILD_OF=() ENV_OF=() EXTRA_ENV_OF=()

# program NAME BIN ENV_NAME BUILD_COMMAND [EXTRA_ENV_NAME=PATH ...]
# BUILD_COMMAND is a function name plus arguments, run once when BIN is missing; programs of one
# build (a Karpenter module) share it, and the build makes every wanted one of them at once.
program() {
  local name="$1" bin="$2" env_name="$3" build="$4"
  shift 4
  PROGRAMS+=("$name")
  BIN_OF[$name]="$bin"
  ENV_OF[$name]="$env_name"
  BUILD_OF[$name]="$build"
  EXTRA_ENV_OF[$name]="$*"
}

log() { printf '[control-plane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# First 12 hex digits of the sha256 of the named files: the cache key of a build from this
# repository's sources, so an edit rebuilds and an old build is never used by mistake.
sources_hash() { cat "$@" | sha256sum | cut -c1-12; }

# Removes the cached builds of earlier sources (`PREFIX*` beside KEEP): they are never used again.
drop_stale() {
  local prefix="$1" keep="$2"
  find "$CACHE_ROOT" -maxdepth 1 -name "$prefix*" ! -path "$keep" -exec rm -rf {} +
}

# The toolchain for a go.mod: the local Go when it is new enough for its `go` directive.
toolchain_for() {
  local need have
  need="$(awk '$1 == "go" { print $2 }' "$1")"
  have="$(go env GOVERSION | sed 's/^go//')"
  if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" = "$need" ]; then echo local; else echo "$NEWER_TOOLCHAIN"; fi
}

# Prints a heartbeat every 30 s while a long step runs, so a cold build is visibly alive; a step
# that ends sooner (a warm build takes seconds) is not kept waiting for the next heartbeat.
with_progress() {
  local what="$1"; shift
  local start=$SECONDS
  "$@" &
  local pid=$!
  local beat=$((start + 30))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$beat" ] && kill -0 "$pid" 2>/dev/null; then
      log "$what: still working ($((SECONDS - start)) s)"
      beat=$((beat + 30))
    fi
  done
  # set -e would stop the script too, but without saying which step failed.
  wait "$pid" || { local rc=$?; log "$what: FAILED (exit $rc)"; exit "$rc"; }
  log "$what: done in $((SECONDS - start)) s"
}
