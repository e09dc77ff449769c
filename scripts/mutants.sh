#!/usr/bin/env bash
# Mutation testing of Courier's decision code with cargo-mutants (issue #12 §11). Not run in CI: it
# builds and tests once per mutant, which takes hours for the whole of courier-core on two cores
# (docs/testing.md has the timings and the last score).
#
#   scripts/mutants.sh core         # courier-core, every file
#   scripts/mutants.sh key          # courier-core's status translation, reconcile and placement
#   scripts/mutants.sh controller   # the controller's pure decisions (gc verdict, queue, backoff)
#   scripts/mutants.sh key --list   # extra arguments go to cargo-mutants
#
# Environment: MUTANTS_JOBS (parallel builds, default 1: the machine is shared), MUTANTS_TIMEOUT
# (seconds per test run, default 300), MUTANTS_OUT (default target/mutants). Needs
# `cargo install cargo-mutants --locked`. Exit code 2 means some mutants survived ("missed").
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-mutants >/dev/null 2>&1; then
    echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
    exit 2
fi

what=${1:-key}
shift || true
out=${MUTANTS_OUT:-target/mutants}/$what
mkdir -p "$out"
common=(
    --timeout "${MUTANTS_TIMEOUT:-300}"
    --build-timeout 1200
    --jobs "${MUTANTS_JOBS:-1}"
    --output "$out"
)

case $what in
core)
    cargo mutants -p courier-core "${common[@]}" "$@"
    ;;
key)
    cargo mutants -p courier-core "${common[@]}" \
        --file crates/courier-core/src/status.rs \
        --file crates/courier-core/src/placement.rs \
        --file 'crates/courier-core/src/reconcile*' \
        --file crates/courier-core/src/reconcile/paths.rs \
        --file crates/courier-core/src/reconcile/plan.rs \
        --file crates/courier-core/src/drift.rs \
        "$@"
    ;;
controller)
    # Only the controller's unit tests: its integration tests run clusters and take minutes each.
    cargo mutants -p courier-controller "${common[@]}" \
        --file crates/courier-controller/src/gc.rs \
        --file crates/courier-controller/src/queue.rs \
        --file crates/courier-controller/src/backoff.rs \
        --cargo-test-arg=--lib \
        "$@"
    ;;
*)
    echo "usage: $0 core|key|controller [cargo-mutants arguments]" >&2
    exit 64
    ;;
esac
