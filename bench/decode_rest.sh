#!/usr/bin/env bash
# Instructions per decode token outside the Linear kernels on the regional path, eager vs
# compile_layers=True (issue 28), at Qwen2.5-1.5B dimensions, VLEN 256, 8 threads.
#
#   bench/decode_rest.sh [--layers 1,2] [--model-layers 28] [--weights int4] [--modes eager,layers]
#                        [--out bench/results/decode-rest] [--report-only]
#
# For each mode and layer count L, bench/decode_rest.py builds the model with L layers
# (random weights, the demo's builder), compile_linears(weights=...) [compile_layers=True],
# a 16-token prompt, and counts 3 decode steps (region 1) with the rvvcount plugin and its
# profile. The Linear kernels are the instructions in librvv_inductor_core.so; the rest is
# everything else, every thread. bench/decode_rest_report.py fits rest = a + b*L to the
# layer counts and gives it at --model-layers. Inductor's cache: build/decode-rest/.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$RVV_REPO"

layers=1,2 model_layers=28 weights=int4 modes=eager,layers out=bench/results/decode-rest report_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --layers) layers=$2; shift 2 ;;
    --model-layers) model_layers=$2; shift 2 ;;
    --weights) weights=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --report-only) report_only=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) rvv_die "bench/decode_rest.sh: unknown option $1" ;;
  esac
done
mkdir -p "$out/raw"
out=$(realpath "$out")
if [ $report_only = 0 ]; then
  [ "$RVV_HOST_ARCH" = x86_64 ] || rvv_die "bench/decode_rest.sh needs QEMU (x86_64 host)"
  scripts/setup >/dev/null
  scripts/build-qemu-plugins >/dev/null
  source "$RVV_CACHE/bench/env"
  root=$(rvv_rootfs_dir)
  cmake -S . -B build/rv64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-clang.cmake -DCMAKE_BUILD_TYPE=Release \
    -DRVV_TORCH_SYSROOT="$root" >/dev/null && ninja -C build/rv64 rvv_inductor_core rvv_inductor_ops >/dev/null
  work=$RVV_REPO/build/decode-rest
  mkdir -p "$work"
  for mode in ${modes//,/ }; do
    for L in ${layers//,/ }; do
      tag=$mode-$weights-L$L
      flag=()
      [ "$mode" = layers ] && flag=(--compile-layers)
      rvv_log "decode rest: $tag"
      rvv_counted "$out/raw/$tag.json" ",profile=$work/$tag.profile.tsv" env OMP_WAIT_POLICY=passive OMP_NUM_THREADS=8 PYTHONPATH="$RVV_REPO/python" \
        RVV_INDUCTOR_LIB="$RVV_REPO/build/rv64/csrc/librvv_inductor_core.so" TORCHINDUCTOR_CACHE_DIR="$work/inductor" \
        python3 bench/decode_rest.py --layers "$L" --weights "$weights" "${flag[@]}" \
        >"$out/raw/$tag.stdout" 2>"$out/raw/$tag.log" </dev/null
      python3 bench/profile_report.py "$work/$tag.profile.tsv" --sysroot "$root" --search "$work/inductor" \
        --top 25 --json "$out/raw/$tag.profile.json" >"$out/raw/$tag.profile.txt"
    done
  done
fi
python3 bench/decode_rest_report.py "$out" --modes "$modes" --layers "$layers" --weights "$weights" \
  --model-layers "$model_layers"
