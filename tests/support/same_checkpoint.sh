# shellcheck shell=bash
# Sourced by the scripts that compare runs bit for bit (after `fail` is defined).
# same_checkpoint DIR_A DIR_B LABEL: both files of the final checkpoints are
# byte for byte equal (the checkpoint id is a hash of the contents, so equal
# files mean equal weights, optimiser state, step and metadata).
same_checkpoint() {
  local f
  for f in checkpoint.safetensors checkpoint.state.safetensors; do
    cmp -s "$1/$f" "$2/$f" || fail "$3: $f differs between the straight and the resumed run"
  done
  echo "bitwise: $3"
}
