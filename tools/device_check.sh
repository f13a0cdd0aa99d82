#!/usr/bin/env bash
# Everything gradlab checks only on a CUDA device, in one run of a few minutes.
#
# The tests and mutation runs of CI have no GPU: the tests marked `gpu` skip there, and the
# "CUDA only" judgements of tools/mutation_equivalents.json stay unverified. On a machine with
# one GPU and the packages installed (torch with CUDA, the test dependencies), from the
# repository's root:
#
#     bash tools/device_check.sh [OUTPUT_FOLDER]
#
# runs every `gpu` test (host-sync budgets of the loss and the Monitor on CUDA, CUDA's random
# state in the equivalence steps, labels on another device refused, CUDA against CPU values,
# the planner's measured memory), then the tests that skip on the development machine because
# torchvision does not load there (the real open_clip CLIP model, timm and torchvision
# backbones; they skip here too, with their reason, where those packages are missing), then
# the Monitor's overhead benchmark on the device
# (`--quick`: a smaller sample of the same settings). Logs and the benchmark's JSON go to
# OUTPUT_FOLDER (default: $OUT, else /tmp/device_check). Exit code: that of the tests (the
# benchmark's failure is reported, not fatal: it measures, it does not check).
set -u -o pipefail
out="${1:-${OUT:-/tmp/device_check}}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python=${PYTHON:-python3}

"$python" - <<'EOF' 2>&1 | tee "$out/device.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
if not torch.cuda.is_available():
    raise SystemExit("no CUDA device: every gpu test would skip")
print("device", torch.cuda.get_device_name(0))
EOF
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 2

# Modules whose optional packages are missing there fail to import: they hold no gpu test,
# so the run goes on past them (their errors are in the log).
timeout 200 "$python" -m pytest tests -m gpu -q -rs -p no:cacheprovider \
    --continue-on-collection-errors 2>&1 | tee "$out/gpu_tests.log"
tests=${PIPESTATUS[0]}

timeout 150 "$python" -m pytest tests/integrations/test_open_clip.py tests/test_backbones.py \
    -q -rs -p no:cacheprovider 2>&1 | tee "$out/torchvision_tests.log"
imports=${PIPESTATUS[0]}

timeout 200 "$python" benchmarks/bench_monitor.py --device cuda --quick 2>&1 \
    | tee "$out/bench_monitor_cuda.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || echo "device_check: the benchmark did not finish (see its log)"
cp benchmarks/results/monitor_cuda.json "$out/" 2>/dev/null || true
echo "device_check: gpu tests exit code $tests, torchvision tests exit code $imports"
[ "$tests" -eq 0 ] && exit "$imports"
exit "$tests"
