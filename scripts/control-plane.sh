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

# Two lanes by default: while one build compiles, the other fetches modules, resolves a module
# graph or links (one core each), so a cold build is shorter without more CPU work. Builds of one
# family (the four Kubernetes commands, the Karpenter modules, Prometheus' programs) share most of
# their packages and stay one after another, so the shared packages compile once into the build
# cache; two families compile at once with `-p 2` each on 2 cores, which costs some switching but
# no work twice (etcd and helm, cold, modules cached: 345 s one after another, 301 s in two lanes).
# VENEER_BUILD_LANES=1 builds one after another, in recipe order, as before.
LANES="${VENEER_BUILD_LANES:-2}"
declare -A FAMILY_OF=([build_prometheus]=prometheus [build_promtool]=prometheus [build_prometheus_operator]=prometheus)
# One job per build command (a Karpenter module builds every wanted program of its version at once).
jobs_todo=()
declare -A queued=()
for name in "${missing[@]}"; do
  [ -n "${queued[${BUILD_OF[$name]}]:-}" ] || jobs_todo+=("${BUILD_OF[$name]}")
  queued[${BUILD_OF[$name]}]=1
done
family() { local f="${1%% *}"; echo "${FAMILY_OF[$f]:-$f}"; }

log "cold build of ${missing[*]} into $CACHE_ROOT in $LANES lane(s) (first time only: all of them took about 19 minutes on 2 cores one after another)"
start=$SECONDS
if [ "$LANES" -le 1 ]; then
  for job in "${jobs_todo[@]}"; do $job; done
else
  declare -A RUNNING=()   # pid -> build command
  failed=""
  while [ ${#jobs_todo[@]} -gt 0 ] || [ ${#RUNNING[@]} -gt 0 ]; do
    # Start the first waiting builds whose family is not building, while a lane is free.
    rest=()
    for job in "${jobs_todo[@]}"; do
      busy=""
      for pid in "${!RUNNING[@]}"; do [ "$(family "${RUNNING[$pid]}")" = "$(family "$job")" ] && busy=1; done
      if [ -z "$failed" ] && [ -z "$busy" ] && [ ${#RUNNING[@]} -lt "$LANES" ]; then
        # A build's own output (the go command's errors) is prefixed with the build, since two run at once.
        ( $job ) 2>&1 | sed -u "/^\[control-plane /!s|^|  ${job%% *}: |" >&2 &
        RUNNING[$!]="$job"
      else
        rest+=("$job")
      fi
    done
    jobs_todo=("${rest[@]}")
    [ ${#RUNNING[@]} -gt 0 ] || break
    # A failed build stops new ones; those running finish, then the script fails.
    rc=0; wait -n -p done_pid "${!RUNNING[@]}" || rc=$?
    [ "$rc" -eq 0 ] || failed="${RUNNING[$done_pid]} (exit $rc)"
    unset "RUNNING[$done_pid]"
  done
  [ -z "$failed" ] || { log "FAILED: $failed"; exit 1; }
fi
for name in "${WANTED[@]}"; do log "ready: ${BIN_OF[$name]}"; done
log "built ${missing[*]} in $((SECONDS - start)) s"
