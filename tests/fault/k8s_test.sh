#!/usr/bin/env bash
# deploy/k8s validated offline (deploy/k8s/validate/validate.mjs): the base
# and the GPU overlay rendered by `kubectl kustomize` with the Secrets' files
# made by `microddp certs` and a random token, then checked against the
# Kubernetes schemas, the job's invariants and microddp's flags. Without
# kubectl the base's files are checked as they are (no Secrets, no overlay),
# and the test says so. Then broken copies must fail, each naming its fault.
#   k8s_test.sh MICRODDP DEPLOY_K8S_DIR
set -uo pipefail
BIN="$(realpath "$1")"
K8S="$(realpath "$2")"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VALIDATE="$K8S/validate/validate.mjs"
command -v node >/dev/null || fail "node not found (scripts/common.sh installs npm, which brings it)"
[[ -d $K8S/validate/node_modules/kubernetes-models ]] ||
  fail "no $K8S/validate/node_modules: npm ci --prefix deploy/k8s/validate (scripts/test does it)"
check() { node "$VALIDATE" --microddp "$BIN" "$@"; }

cp -r "$K8S" "$WORK/k8s"
secrets="$WORK/k8s/base/secrets"
"$BIN" certs "$WORK/ca" --hosts coordinator,worker >/dev/null || fail "microddp certs failed"
cp "$WORK/ca/ca.pem" "$WORK/ca/coordinator.pem" "$WORK/ca/coordinator.key" "$WORK/ca/worker.pem" \
  "$WORK/ca/worker.key" "$secrets/"
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secrets/token"

if command -v kubectl >/dev/null; then
  for root in base overlays/gpu; do
    out="$WORK/$(basename "$root").yaml"
    kubectl kustomize "$WORK/k8s/$root" >"$out" 2>"$WORK/kustomize.log" || fail "kubectl kustomize $root: $(cat "$WORK/kustomize.log")"
    check "$out" || fail "deploy/k8s/$root does not validate"
  done
  grep -q "nvidia.com/gpu: 1" "$WORK/gpu.yaml" || fail "the GPU overlay requests no GPU"
  sample="$WORK/base.yaml"
else
  echo "kubectl not found: the base's files are checked unrendered (no Secrets), the GPU overlay not at all"
  cat "$K8S/base/coordinator.yaml" <(echo ---) "$K8S/base/workers.yaml" >"$WORK/raw.yaml"
  check "$WORK/raw.yaml" || fail "deploy/k8s/base does not validate"
  sample="$WORK/raw.yaml"
fi

# broken NAME SED EXPECTED: a copy of the sample edited by SED must fail with EXPECTED.
broken() {
  sed "$2" "$sample" >"$WORK/$1.yaml"
  cmp -s "$sample" "$WORK/$1.yaml" && fail "$1: the edit '$2' changed nothing"
  check "$WORK/$1.yaml" >"$WORK/$1.out" && fail "$1: a broken manifest validated"
  expect_in "$3" "$WORK/$1.out"
}
broken world_size 's/--world-size=4/--world-size=3/' "completions 4 and parallelism 4 must both equal the coordinator's --world-size 3"
broken unknown_flag 's/--connect-timeout-s=/--connect-timeout=/' "--connect-timeout is not a flag of \`microddp worker\`"
broken schema 's/completions: 4/completions: four/' "schema: data/spec/completions must be integer"
broken coordinator 's/--coordinator=coordinator:29500/--coordinator=coord:29500/' "must be the Service's coordinator:29500"
broken rank "s/job-completion-index/completion-index/" "RANK must come from"
broken unmounted 's|--tls-ca=/var/run/secrets/microddp/tls/ca.pem|--tls-ca=/etc/ca.pem|' "--tls-ca /etc/ca.pem lies under no volumeMount"
echo "PASS k8s"
