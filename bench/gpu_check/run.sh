#!/bin/bash
# On a GPU machine lent by the device tool, with .gpu_check carried (prepare.py made it):
# real-GPU correctness (the WebGPU conformance run and test files) and speed (graph capture
# off/on; the benchmark beside onnxruntime). Everything lands in $OUT/r.tgz (and $OUT/log
# when the caller tees there), saved after each step so a timeout keeps what was done.
#   MODELS="minilm_l6_seq16,..." narrows the benchmark rows (comma-separated).
#   STEPS="profile conformance ..." picks the steps after the adapter check (default: all but
#   profile): conformance, tests, capture, benchmark, profile (dispatch_profile.py).
O=/tmp/gpu_check_out; mkdir -p $O; : "${OUT:=/tmp/out}"; mkdir -p $OUT
P=.gpu_check
save() { tar czf $OUT/r.tgz -C $O . 2>/dev/null; }
step() { echo "== $1 $(date +%T)"; }
if [ "$(id -u)" = 0 ] && ! ldconfig -p | grep -q libvulkan.so.1; then
  for f in $P/debs/*.deb; do dpkg -x $f /; done; ldconfig
fi
PYV=$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
ONNX=$(ls $P/wheels/onnx-*.whl | sed 's/.*onnx-\([^-]*\)-.*/\1/')
if ! python3 -c "import wgpu, wasmtime, onnx; assert onnx.__version__ == '$ONNX'" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpu_check_site $P/wheels/wgpu-*.whl $P/wheels/rendercanvas-*.whl \
    $P/wheels/pycparser-*.whl $P/wheels/cffi-*-cp$PYV-*.whl $P/wheels/onnx-*.whl \
    $P/wheels/wasmtime-*.whl || exit 3
fi
export PYTHONPATH=/tmp/gpu_check_site:$PWD/engine:$PWD EDGERUN_CACHE=/tmp/gpu_check_cache
export PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp EDGERUN_BENCH_PLACEMENT=$O/placement.jsonl
step adapter
timeout 60 python3 bench/gpu_check/gpu_info.py > $O/gpu_info.txt 2>&1
if ! grep -q "edgerun context: Vulkan" $O/gpu_info.txt && \
   [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  timeout 60 python3 bench/gpu_check/gpu_info.py > $O/gpu_info.txt 2>&1
fi
cat $O/gpu_info.txt; save
grep -q "edgerun context: Vulkan" $O/gpu_info.txt || { echo "no Vulkan adapter"; exit 4; }
step cache; timeout 120 python3 bench/gpu_check/fill_cache.py 2>&1 | tail -2
ROWS=${MODELS:-minilm_l6_seq16,minilm_l6_seq128,minilm_l6_seq128_batch8,minilm_l6_int8_seq16,minilm_l6_fp16_seq16,light_squeezenet,light_resnet50,ppocr_mobile_cls_batch1,ppocr_mobile_cls_batch6,ppocr_v4_det_batch1_480x640,ppocr_v4_rec_batch6_w320,ppocr_mobile_cls_qdq,magika_batch1}
for s in ${STEPS:-conformance tests capture benchmark}; do
  case $s in
  conformance) step conformance
    timeout 120 python3 -m edgerun.tools.conformance --providers webgpu -q \
      --json $O/conformance_webgpu.json 2>&1 | tail -2 ;;
  tests) step tests
    timeout 200 python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" \
      tests/test_webgpu_provider.py tests/test_webgpu_capture.py > $O/pytest.txt 2>&1
    grep -E "^FAILED|passed|failed" $O/pytest.txt | tail -30 ;;
  capture) step "graph capture off/on"
    timeout 150 python3 bench/gpu_check/ab_capture.py ${ROWS//,/ } 2>&1 | grep -v WARNING \
      | tee $O/capture.txt ;;
  benchmark) step benchmark
    timeout 170 python3 -m bench --models "$ROWS" --engines edgerun_webgpu,ort_1thread,ort_default \
      --repeat 5 --warmup 1 --min-time-s 0.3 --budget-s 2 --timeout-s 60 --profile-top 0 \
      --out $O/bench 2>&1 | sed -n '/## Latency/,/geometric/p' ;;
  profile) step "dispatch profile"
    timeout 150 python3 bench/gpu_check/dispatch_profile.py ${ROWS//,/ } 2>&1 \
      | grep -v WARNING | tee $O/profile.txt ;;
  esac
  save
done
step done
