#!/usr/bin/env bash
# The loader of docs/pytorch.md, run as a user would copy it: the checkpoint
# of a short run of the README's main job (default model, Fashion-MNIST,
# `microddp run`) rebuilt in PyTorch from its metadata alone gives the test
# accuracy and loss microddp printed, to the printed digits.
#   loader_test.sh MICRODDP DOCS_PYTORCH_MD
set -uo pipefail
BIN="$1"
DOC="$2"
PY=/usr/bin/python3
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if ! [[ -x $PY ]] || ! $PY -c "import torch, numpy" 2>/dev/null; then
  echo "SKIPPED: PyTorch is not installed (apt-get install python3-torch)"
  exit 77
fi
[[ -d /usr/share/datasets/fashion-mnist ]] || { echo "SKIPPED: dataset-fashion-mnist is not installed"; exit 77; }

# The python block after the marker line, exactly as the page shows it.
awk '/tests\/pytorch\/loader_test.sh runs the block below/ {armed = 1; next}
     armed && /^```python/ {inside = 1; next}
     inside && /^```/ {exit}
     inside {print}' "$DOC" >"$WORK/load_microddp.py"
[[ -s "$WORK/load_microddp.py" ]] || fail "no loader block found in $DOC"

"$BIN" run --nproc 2 --steps 100 --http-port -1 --run-dir "$WORK/run" >"$WORK/out" 2>&1 \
  || { cat "$WORK/out"; fail "microddp run failed"; }
want=$(grep -o "test loss [0-9.]*, test accuracy [0-9.]*%" "$WORK/out" | tail -1)
[[ -n $want ]] || { cat "$WORK/out"; fail "microddp printed no test accuracy"; }
got=$($PY "$WORK/load_microddp.py" "$WORK/run/checkpoint.safetensors" 2>&1) || { echo "$got"; fail "the loader failed"; }
echo "microddp: $want"
echo "PyTorch:  $got"
# Accuracy to microddp's two decimals; the loss to the digits microddp prints (6 significant).
[[ ${got#*, } == "${want#*, }" ]] || fail "test accuracy differs"
[[ ${got%%,*} == "${want%%,*}" ]] || fail "test loss differs"
echo "OK: the documented loader reproduces microddp's test loss and accuracy"
