#!/usr/bin/env bash
# Builds the local cluster's programs from the Go module proxy (and moto from PyPI) into a cache
# outside the repo. One recipe per program, or per group of programs built together, in
# scripts/builds/NN-*.sh (NN is the build order): each registers what it makes with `program`
# (scripts/builds/lib.sh) and defines the function that builds it, so a new program joins with a
# file of its own. Idempotent: when every wanted program is cached it only prints their paths.
#   control-plane.sh [NAME...]   builds the named programs (default: all; `karpenter-oracle` names
#                                the judges of every Karpenter version)
#   control-plane.sh --print-env prints VENEER_<PROGRAM>=<path> for every program (kit/control-plane.ts)
#   control-plane.sh --list      prints the programs' names
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=builds/lib.sh
source "$here/builds/lib.sh"
for recipe in "$here"/builds/[0-9][0-9]-*.sh; do
  # shellcheck source=/dev/null
  source "$recipe"
done
unset recipe

case "${1:-}" in
  --print-env)
    for name in "${PROGRAMS[@]}"; do
      printf '%s=%s\n' "${ENV_OF[$name]}" "${BIN_OF[$name]}"
      for extra in ${EXTRA_ENV_OF[$name]}; do printf '%s\n' "$extra"; done
    done
    exit 0 ;;
  --list) printf '%s\n' "${PROGRAMS[@]}"; exit 0 ;;
esac

WANTED=()
for name in "${@:-${PROGRAMS[@]}}"; do
  if [ "$name" = karpenter-oracle ]; then WANTED+=("${JUDGES[@]}"); else WANTED+=("$name"); fi
done
for name in "${WANTED[@]}"; do
  [ -n "${BIN_OF[$name]:-}" ] || { log "unknown program $name (one of: ${PROGRAMS[*]} karpenter-oracle)"; exit 2; }
done
missing=()
for name in "${WANTED[@]}"; do [ -x "${BIN_OF[$name]}" ] || missing+=("$name"); done
if [ ${#missing[@]} -eq 0 ]; then
  for name in "${WANTED[@]}"; do log "cached: ${BIN_OF[$name]}"; done
  exit 0
fi

bash "$here/system-tools.sh" --go
mkdir -p "$CACHE_ROOT"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=mod"

log "cold build of ${missing[*]} into $CACHE_ROOT (first time only: all of them take about 25 minutes on 2 cores)"
start=$SECONDS
for name in "${missing[@]}"; do
  # A build that makes several programs at once may have made this one already.
  [ -x "${BIN_OF[$name]}" ] || ${BUILD_OF[$name]}
done
for name in "${WANTED[@]}"; do log "ready: ${BIN_OF[$name]}"; done
log "built ${missing[*]} in $((SECONDS - start)) s"
