#!/usr/bin/env bash
# Courier end to end on real Kubernetes: three kind clusters (a management cluster and two
# workers), the image built from ./Dockerfile and loaded into the management cluster, both Helm
# charts installed, the workers registered with `courier cluster kubeconfig` + `courier cluster add`,
# the examples submitted and checked to end as they should; then an upgrade, a worker removed and
# everything uninstalled. These are the commands of docs/install.md.
#
# It runs wherever Docker, kind, helm and kubectl exist (Linux or macOS; no Rust toolchain needed:
# the courier CLI runs from the image). It does NOT run in CI here: the build machines have no
# Docker daemon and no kind, so the automated tests use kubesim instead (see e2e/README.md).
#
#   e2e/kind/run.sh
#
# Environment:
#   PREFIX=courier-e2e     names of the kind clusters (PREFIX-mgmt, PREFIX-w1, PREFIX-w2)
#   KEEP=1                 keep the clusters at the end (and after a failure) to look around
#   IMAGE=courier:e2e      the image to run; SKIP_BUILD=1 uses it as it is (e.g. a released tag)
#   KIND_NODE_IMAGE=...    kindest/node image (the management cluster needs Kubernetes >= 1.33)
#   WORK=DIR               where kubeconfigs go (default: a new temporary directory)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PREFIX=${PREFIX:-courier-e2e}
IMAGE=${IMAGE:-courier:e2e}
KEEP=${KEEP:-0}
SKIP_BUILD=${SKIP_BUILD:-0}
NS=courier-system

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Fail fast, before creating anything, when a tool is missing.
missing=()
for tool in docker kind helm kubectl; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  die "missing: ${missing[*]}. This script needs Docker (a running daemon), kind \
(https://kind.sigs.k8s.io), helm (https://helm.sh) and kubectl on PATH."
fi
docker info >/dev/null 2>&1 ||
  die "docker is installed but its daemon does not answer (\`docker info\` fails): start Docker first"

WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/courier-kind.XXXXXX")}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

MGMT=$PREFIX-mgmt
WORKERS=(w1 w2)
kc() { echo "$WORK/$1.kubeconfig"; }                    # from this machine (kubectl, helm)
kc_internal() { echo "$WORK/$1-internal.kubeconfig"; }  # from containers on the kind network

# The courier CLI, from the image, on the kind network so that it reaches every cluster at its
# internal address (the same one the controller in the management cluster uses). Paths are the
# same inside and outside.
courier() {
  docker run --rm -i --network kind --user "$(id -u):$(id -g)" \
    -v "$ROOT:$ROOT:ro" -v "$WORK:$WORK" -w "$ROOT" "$IMAGE" "$@"
}
k_mgmt() { kubectl --kubeconfig "$(kc mgmt)" "$@"; }

diagnose() {
  say "state at failure (kubeconfigs in $WORK)"
  k_mgmt -n "$NS" get pods -o wide || true
  k_mgmt -n "$NS" logs deploy/courier --tail=100 || true
  courier cluster list --kubeconfig "$(kc_internal mgmt)" || true
  courier jobs --kubeconfig "$(kc_internal mgmt)" || true
}

cleanup() {
  local rc=$?
  if ((rc != 0)); then diagnose; fi
  if [[ $KEEP == 1 ]]; then
    say "kept the clusters ($MGMT, ${WORKERS[*]/#/$PREFIX-}); kubeconfigs in $WORK"
    say "delete them with: kind delete cluster --name NAME"
  else
    for c in "$MGMT" "${WORKERS[@]/#/$PREFIX-}"; do
      kind delete cluster --name "$c" >/dev/null 2>&1 || true
    done
  fi
  exit "$rc"
}
trap cleanup EXIT

say "creating kind clusters $MGMT, ${WORKERS[*]/#/$PREFIX-}"
node_image=()
[[ -n ${KIND_NODE_IMAGE:-} ]] && node_image=(--image "$KIND_NODE_IMAGE")
create() { # name, kubeconfig key
  kind create cluster --name "$1" ${node_image[@]+"${node_image[@]}"} --kubeconfig "$(kc "$2")" --wait 180s
  kind get kubeconfig --internal --name "$1" >"$(kc_internal "$2")"
}
create "$MGMT" mgmt
for w in "${WORKERS[@]}"; do create "$PREFIX-$w" "$w"; done

minor=$(k_mgmt version -o json | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | tail -1)
((minor >= 33)) || die "the management cluster runs Kubernetes 1.$minor; Courier needs >= 1.33 \
there: set KIND_NODE_IMAGE=kindest/node:v1.33.x (or newer)"

if [[ $SKIP_BUILD != 1 ]]; then
  say "building $IMAGE"
  docker build -t "$IMAGE" "$ROOT"
fi
docker image inspect "$IMAGE" >/dev/null || die "image $IMAGE not found"
kind load docker-image "$IMAGE" --name "$MGMT"
repo=${IMAGE%:*}
tag=${IMAGE##*:}

say "installing Courier in the management cluster"
courier crds | k_mgmt apply -f -
helm install courier "$ROOT/charts/courier" --kubeconfig "$(kc mgmt)" -n "$NS" --create-namespace \
  --set image.repository="$repo" --set image.tag="$tag" --set image.pullPolicy=Never \
  --wait --timeout 5m
k_mgmt -n "$NS" rollout status deploy/courier --timeout 3m

region=(eu us)
for i in "${!WORKERS[@]}"; do
  w=${WORKERS[$i]}
  say "preparing worker $w and registering it"
  # w1 from a long-lived token Secret (tokenSecret=true), w2 with a time-bound token (TokenRequest
  # API; the chart's default, tokenSecret=false).
  long=()
  [[ $w == w1 ]] && long=(--set tokenSecret=true)
  helm install courier-worker "$ROOT/charts/courier-worker" --kubeconfig "$(kc "$w")" \
    -n "$NS" --create-namespace --set cliReads=true ${long[@]+"${long[@]}"} --wait --timeout 3m
  token=()
  [[ $w == w1 ]] && token=(--token-secret)
  [[ $w == w2 ]] && token=(--duration 8760h)
  courier cluster kubeconfig --cluster-kubeconfig "$(kc_internal "$w")" --name "$w" ${token[@]+"${token[@]}"} \
    --output-file "$WORK/$w-courier.kubeconfig"
  courier cluster add "$w" --cluster-kubeconfig "$WORK/$w-courier.kubeconfig" \
    --label region="${region[$i]}" --kubeconfig "$(kc_internal mgmt)" --wait 120s
done
courier cluster list --kubeconfig "$(kc_internal mgmt)"

say "submitting the examples"
for f in hello indexed-success-policy failing suspended; do
  courier submit -f "examples/$f.yaml" --kubeconfig "$(kc_internal mgmt)"
done
# A suspended Job is not dispatched; resume it like a user would.
k_mgmt patch job suspended --type=merge -p '{"spec":{"suspend":false}}'

k_mgmt wait --for=condition=Complete job/hello job/indexed-leader job/suspended --timeout 10m
k_mgmt wait --for=condition=Failed job/always-fails --timeout 10m
reason=$(k_mgmt get job always-fails \
  -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}')
[[ $reason == BackoffLimitExceeded ]] || die "always-fails failed with reason '$reason'"

# Each origin names its worker, and that worker holds its mirror, finished the same way.
for job in hello indexed-leader suspended always-fails; do
  w=$(k_mgmt get job "$job" -o jsonpath='{.metadata.labels.courier\.dev/cluster}')
  [[ -n $w ]] || die "job $job carries no courier.dev/cluster label"
  origin_uid=$(k_mgmt get job "$job" -o jsonpath='{.metadata.uid}')
  mirror_uid=$(kubectl --kubeconfig "$(kc "$w")" get job "$job" \
    -o jsonpath='{.metadata.labels.courier\.dev/origin-uid}')
  [[ $mirror_uid == "$origin_uid" ]] || die "the mirror of $job on $w does not point at its origin"
  echo "$job ran on $w"
done
courier jobs --kubeconfig "$(kc_internal mgmt)"
courier describe job hello --kubeconfig "$(kc_internal mgmt)"
# Read through Courier's worker credentials (the worker chart's cliReads rights).
courier logs hello --kubeconfig "$(kc_internal mgmt)"

# Only Courier may touch a mirror's ownership labels on a worker (the chart's admission policy).
w=$(k_mgmt get job hello -o jsonpath='{.metadata.labels.courier\.dev/cluster}')
if kubectl --kubeconfig "$(kc "$w")" label job hello --overwrite courier.dev/epoch=99 2>/dev/null; then
  die "the admission policy on $w let a user change a mirror's courier.dev/epoch label"
fi

say "upgrading the management release"
courier crds | k_mgmt apply -f -
helm upgrade courier "$ROOT/charts/courier" --kubeconfig "$(kc mgmt)" -n "$NS" \
  --reuse-values --set workerLostTimeout=10m --wait --timeout 5m
k_mgmt -n "$NS" rollout status deploy/courier --timeout 3m
courier cluster list --kubeconfig "$(kc_internal mgmt)"

helm upgrade courier-worker "$ROOT/charts/courier-worker" --kubeconfig "$(kc w1)" -n "$NS" \
  --reuse-values --wait --timeout 3m

say "rotating w1's token (docs/security.md)"
kubectl --kubeconfig "$(kc w1)" -n "$NS" apply -f - <<'YAML'
apiVersion: v1
kind: Secret
metadata:
  name: courier-dispatcher-token-2
  annotations: {kubernetes.io/service-account.name: courier-dispatcher}
type: kubernetes.io/service-account-token
YAML
courier cluster kubeconfig --cluster-kubeconfig "$(kc_internal w1)" --name w1 \
  --token-secret --secret courier-dispatcher-token-2 --output-file "$WORK/w1-new.kubeconfig"
k_mgmt -n "$NS" create secret generic w1-kubeconfig \
  --from-file=kubeconfig="$WORK/w1-new.kubeconfig" --dry-run=client -o yaml | k_mgmt apply -f -
# Deleting the old token Secret revokes its token. After a probe interval (at most a minute) the
# controller must have moved to the new token: w1 Ready on it.
kubectl --kubeconfig "$(kc w1)" -n "$NS" delete secret courier-dispatcher-token
sleep 70
k_mgmt wait --for=condition=Ready workercluster/w1 --timeout 2m

say "deleting the Jobs (their mirrors go with them), removing the workers, uninstalling"
k_mgmt delete jobs -A -l courier.dev/cluster --wait --timeout 3m
for w in "${WORKERS[@]}"; do
  for _ in $(seq 30); do
    left=$(kubectl --kubeconfig "$(kc "$w")" get jobs -A -l courier.dev/origin -o name)
    [[ -z $left ]] && break
    sleep 1
  done
  [[ -z $left ]] || die "mirrors left on $w after their origins were deleted: $left"
done
courier cluster remove w2 --drain --timeout 5m --kubeconfig "$(kc_internal mgmt)"
courier cluster remove w1 --kubeconfig "$(kc_internal mgmt)"
helm uninstall courier --kubeconfig "$(kc mgmt)" -n "$NS" --wait
courier crds | k_mgmt delete -f -
for w in "${WORKERS[@]}"; do
  helm uninstall courier-worker --kubeconfig "$(kc "$w")" -n "$NS" --wait
done

say "all checks passed"
