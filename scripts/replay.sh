#!/usr/bin/env bash
# Replays the recordings of a real v1.36 API server (../shared/fixtures/apiserver) against a fresh
# kubesim and fails on any difference. Scenarios in crates/kubesim/replay/skip.txt are skipped (each with
# its reason there). Needs: python3 with `requests`, and target/debug/kubesim (cargo build -p kubesim).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${COURIER_SHARED:-$(cd "$root/.." && pwd)/shared}
tools="$shared/tools/apifixtures"
fixtures="$shared/fixtures/apiserver"
[ -f "$tools/replay.py" ] || { echo "replay: $tools/replay.py not found (set COURIER_SHARED to the shared directory)" >&2; exit 2; }
bin=${KUBESIM_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/kubesim}
[ -x "$bin" ] || { echo "replay: $bin not found; run: cargo build -p kubesim" >&2; exit 2; }

skips=$(grep -v '^#' "$root/crates/kubesim/replay/skip.txt" | awk 'NF {print $1}')
mapfile -t scenarios < <(cd "$tools" && python3 -c 'from steps import SCENARIOS; print("\n".join(s["name"] for s in SCENARIOS))')
only=()
for s in "${scenarios[@]}"; do
  if ! grep -qx "$s" <<<"$skips"; then only+=("$s"); fi
done

token="replay-$RANDOM$RANDOM"
out=$(mktemp)
"$bin" serve --role apiserver --port 0 --token "$token" >"$out" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 100); do grep -q 'kubesim serving' "$out" && break; sleep 0.1; done
url=$(grep -o 'https://127.0.0.1:[0-9]*' "$out" | head -1)
[ -n "$url" ] || { echo "replay: kubesim did not start:" >&2; cat "$out" >&2; exit 1; }
echo "replaying ${#only[@]} scenarios against kubesim at $url (skipped: $(echo $skips))"
python3 "$tools/replay.py" "$url" "$token" "$fixtures" --only "${only[@]}"
