# Bounded waits shared by the fault scripts (sourced, not run).

# wait_for CMD... : polls CMD every 0.1 s for up to $WAIT_S seconds (default 60).
wait_for() {
  local deadline=$(( $(date +%s) + ${WAIT_S:-60} ))
  until "$@"; do
    (( $(date +%s) >= deadline )) && return 1
    sleep 0.1
  done
}
# wait_exit PID SECONDS: waits for a background child; its exit code in $RC (124 when it did not end).
wait_exit() {
  local deadline=$(( $(date +%s) + $2 ))
  while kill -0 "$1" 2>/dev/null; do
    (( $(date +%s) >= deadline )) && { RC=124; return; }
    sleep 0.1
  done
  wait "$1"; RC=$?
}
