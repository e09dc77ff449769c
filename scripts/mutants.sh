#!/usr/bin/env bash
# Mutation testing of Courier's decision code with cargo-mutants (issue #12 §11). Not run in CI: it
# builds and tests once per mutant (about 10-20 s each for courier-core on a warm build, two shared
# cores; docs/testing.md has the timings and the score).
#
#   scripts/mutants.sh key          # courier-core's decision files, one cargo-mutants run per file
#   scripts/mutants.sh core         # courier-core, every file
#   scripts/mutants.sh controller   # the controller's pure decisions (retry backoff, gc verdicts)
#   scripts/mutants.sh key --list   # extra arguments go to every cargo-mutants run
#   MUTANTS_FILES="placement status" scripts/mutants.sh key   # a subset of the key files
#   MUTANTS_FILES=reconcile/paths scripts/mutants.sh key -F 'follow|unplaceable'   # some functions
#
# By default it mutates the source tree IN PLACE (cargo-mutants --in-place), so the tree's warm
# target/ is reused instead of a cold build of a copy: run it on a clean checkout and do not edit or
# build in it meanwhile (cargo-mutants restores each file after its mutant; an interrupted run can
# leave one mutated: check `git status`). MUTANTS_COPY=1 tests in copies instead (cold build, then
# MUTANTS_JOBS builds at once). Other knobs: MUTANTS_TIMEOUT (seconds per test run, default 60),
# MUTANTS_OUT (default target/mutants; one directory per file). Re-running with `--iterate` tests
# only the mutants the previous run in that directory did not catch. Exit code 2: some survived.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-mutants >/dev/null 2>&1; then
    echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
    exit 2
fi

what=${1:-key}
shift || true
out=${MUTANTS_OUT:-target/mutants}
mode=(--in-place)
if [[ ${MUTANTS_COPY:-0} == 1 ]]; then
    mode=(--jobs "${MUTANTS_JOBS:-1}")
fi
common=("${mode[@]}" --timeout "${MUTANTS_TIMEOUT:-60}" --build-timeout 1200)

status=0
# One run per file, so a partial run still leaves complete per-file results.
run() {
    local package=$1 file=$2 name=$3
    shift 3
    mkdir -p "$out/$name"
    echo "== $file" >&2
    cargo mutants -p "$package" "${common[@]}" --file "$file" --output "$out/$name" "$@" || {
        local rc=$?
        # 2: mutants survived; 3: timeouts. Anything else is a failure of the run itself.
        [[ $rc == 2 || $rc == 3 ]] || exit "$rc"
        status=2
    }
}

case $what in
core)
    cargo mutants -p courier-core "${common[@]}" --output "$out/core" --cargo-test-arg=--tests "$@" ||
        status=$?
    ;;
key)
    # Placement, terminal phases, status translation, the origin-id claim, drift, selectors and
    # `decide` (reconcile and its plan, paths and views). Integration tests included, doctests
    # skipped (courier-core has none).
    for f in ${MUTANTS_FILES:-placement phase status claim drift selector reconcile reconcile/plan reconcile/paths reconcile/view}; do
        run courier-core "crates/courier-core/src/$f.rs" "$f" --cargo-test-arg=--tests "$@"
    done
    ;;
controller)
    # The controller's unit tests and its pure integration test (tests/backoff.rs): the other
    # integration tests run clusters and take minutes each.
    for f in ${MUTANTS_FILES:-backoff gc}; do
        run courier-controller "crates/courier-controller/src/$f.rs" "ctl-$f" \
            --cargo-test-arg=--lib --cargo-test-arg=--test=backoff "$@"
    done
    ;;
*)
    echo "usage: $0 core|key|controller [cargo-mutants arguments]" >&2
    exit 64
    ;;
esac
exit "$status"
