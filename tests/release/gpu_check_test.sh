#!/usr/bin/env bash
# scripts/gpu-check without a GPU (it runs on GPU machines for real; here
# its paths that need none):
#   1. the time budget, with fake steps: a step that fits runs, one that
#      runs past its own limit is killed and "timed out", one whose limit no
#      longer fits the budget is "skipped for time" and never started;
#   2. from a release made with --tests, on a machine with no GPU: the
#      environment passes with the verdict "no GPU", every GPU step is
#      skipped saying so, exit 0, report.md and report.json written;
#   1b. the sanitizer's summaries read, a report with benchmark rows, --only;
#   3. a GPU that CUDA cannot start (an NVIDIA driver directory made in a
#      private mount namespace, root only): the environment step fails
#      naming the problem, the GPU steps are skipped, exit 1.
# 2 and 3 skip (77) on a machine with a GPU, where the check runs for real.
#   gpu_check_test.sh REPO BUILD_DIR
set -uo pipefail
REPO="$(cd "$1" && pwd)"
BUILD_DIR="$(cd "$2" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# field REPORT PYTHON: evaluates PYTHON on the report (r) and prints it.
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
status_of() { field "$1" "{s['step']: s['status'] for s in r['steps']}['$2']"; }

# ---- 1. the budget ---------------------------------------------------------------------
python3 "$REPO/scripts/gpu-check" --fake-steps "fits:5:0.5,hangs:2:30,too_long:100:0,after:2:0" \
  --budget-s 10 --out "$WORK/fake" >"$WORK/fake.log" 2>&1
[[ $? -eq 1 ]] || { cat "$WORK/fake.log"; fail "a timed-out step must fail the check"; }
R="$WORK/fake/report.json"
[[ "$(status_of "$R" fits)" == passed ]] || fail "the step that fits did not pass"
[[ "$(status_of "$R" hangs)" == "timed out" ]] || fail "the step past its limit is not 'timed out'"
[[ "$(status_of "$R" too_long)" == skipped ]] || fail "a step longer than the budget left was not skipped"
field "$R" "[s for s in r['steps'] if s['step'] == 'too_long'][0]['summary']" | grep -q "^for time:" ||
  fail "the skipped step does not say 'for time'"
[[ "$(field "$R" "[s for s in r['steps'] if s['step'] == 'too_long'][0]['seconds']")" == 0.0 ]] ||
  fail "the step skipped for time was started"
[[ "$(status_of "$R" after)" == passed ]] || fail "a step that still fits after a skip did not run"
(($(field "$R" "int(r['elapsed_s'])") < 10)) || fail "the check overran its budget"
echo "budget: fits passed, hangs timed out at its limit, too_long skipped for time, after passed"

# ---- 1b. reading the GPU steps' output, and the report's tables ------------------------
# The sanitizer's two summary formats (as compute-sanitizer 2025 prints them on
# an H200), and a report with benchmark rows, from a check loaded as a module.
python3 - "$REPO/scripts/gpu-check" "$WORK/rows" <<'PY' || fail "the sanitizer summaries or the report's tables"
import importlib.machinery, importlib.util, json, os, sys
loader = importlib.machinery.SourceFileLoader("gpu_check", sys.argv[1])
g = importlib.util.module_from_spec(importlib.util.spec_from_loader("gpu_check", loader))
loader.exec_module(g)
assert g.sanitizer_errors("========= ERROR SUMMARY: 0 errors") == 0
assert g.sanitizer_errors("========= ERROR SUMMARY: 3 errors") == 3
assert g.sanitizer_errors("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)") == 0
assert g.sanitizer_errors("========= RACECHECK SUMMARY: 4 hazards displayed (2 errors, 2 warnings)") == 2
assert g.sanitizer_errors("Segmentation fault") is None
check = g.Check(type("A", (), {"release": "/nowhere", "data": "", "out": sys.argv[2], "budget_s": 10})())
row = {"case": "gpt4x128-t64-b12-bf16", "precision": "bf16", "microddp_samples_per_s": 1760.0,
       "pytorch_samples_per_s": 894.0, "ratio": 1.97, "host_waits_per_step": 2.0}
check.results = [{"step": "bench", "status": "passed", "seconds": 1.0, "summary": "s", "details": {"rows": [row]}}]
assert g.write_report(check)
md = open(os.path.join(sys.argv[2], "report.md")).read()
assert "| gpt4x128-t64-b12-bf16 | bf16 | 1760 | 894 | 1.97 | 2.0 |" in md, md
PY
python3 "$REPO/scripts/gpu-check" --fake-steps "a:1:0" --only nonsense --out "$WORK/only" >"$WORK/only.log" 2>&1
[[ $? -eq 2 ]] && grep -q "no step nonsense" "$WORK/only.log" || { cat "$WORK/only.log"; fail "--only with no such step"; }
echo "parsing: both sanitizer summaries, a report with benchmark rows, --only refuses a step it lacks"

if compgen -G "/dev/nvidia[0-9]*" >/dev/null || [[ -d /proc/driver/nvidia ]]; then
  echo "SKIP: this machine has an NVIDIA GPU: run scripts/gpu-check for real"; exit 77
fi

# ---- 2. no GPU ---------------------------------------------------------------------------
bash "$REPO/scripts/bundle" --build "$BUILD_DIR" --out "$WORK/dist" --no-tar --tests >"$WORK/bundle.log" 2>&1 ||
  { cat "$WORK/bundle.log"; fail "scripts/bundle --tests failed"; }
REL="$(ls -d "$WORK"/dist/microddp-*)"
[[ -s "$REL/libexec/microddp/tests/gpu-tests.txt" ]] || fail "the release lists no GPU tests"
"$REL/bin/microddp-gpu-check" --data /usr/share/datasets/fashion-mnist --out "$WORK/nogpu" >"$WORK/nogpu.log" 2>&1 ||
  { cat "$WORK/nogpu.log"; fail "the check failed on a machine without a GPU"; }
R="$WORK/nogpu/report.json"
[[ "$(field "$R" "r['environment']['verdict']")" == "no GPU" ]] || fail "the verdict is not 'no GPU'"
[[ "$(status_of "$R" environment)" == passed ]] || fail "the environment step did not pass"
for step in gpu_tests train bench sanitizer; do
  [[ "$(status_of "$R" $step)" == skipped ]] || fail "$step was not skipped without a GPU"
done
grep -q "no GPU: this machine has no usable GPU" "$WORK/nogpu/report.md" || fail "report.md does not say why"
echo "no GPU: $(grep -m1 '^| environment' "$WORK/nogpu/report.md")"

# ---- 3. a GPU CUDA cannot start ------------------------------------------------------
[[ $(id -u) -eq 0 ]] || { echo "SKIP: the broken-CUDA case needs root (a mount namespace)"; exit 77; }
unshare -m bash -c "mount -t tmpfs none /proc/driver && mkdir -p /proc/driver/nvidia/gpus/0000:00:00.0 &&
  '$REL/bin/microddp-gpu-check' --out '$WORK/broken'" >"$WORK/broken.log" 2>&1
[[ $? -eq 1 ]] || { cat "$WORK/broken.log"; fail "a GPU CUDA cannot start must fail the check"; }
R="$WORK/broken/report.json"
[[ "$(status_of "$R" environment)" == failed ]] || fail "the environment step did not fail"
field "$R" "[s for s in r['steps'] if s['step'] == 'environment'][0]['summary']" | grep -q "CUDA cannot start" ||
  fail "the environment step does not say CUDA cannot start"
[[ "$(status_of "$R" gpu_tests)" == skipped ]] || fail "the GPU tests ran on a broken GPU"
echo "broken: $(field "$R" "[s for s in r['steps'] if s['step'] == 'environment'][0]['summary'][:120]")"
echo "PASS: gpu-check's budget, no-GPU and broken-CUDA paths"
