#!/usr/bin/env bash
# Per-thread counts of the library's Linear kernels at 1, 2, 4 and 8 threads, for the
# Qwen2.5-1.5B layer shapes, and the estimated K1 speed-up curve with DRAM shared.
# The one command that regenerates bench/results/threads/:
#
#   bench/threads.sh [--quick | --gemm-rows [x8,fp,bf16]] [--out DIR] [--report-only]
#
#   --quick        M = 1 bf16 only, without lm_head, into build/bench-threads-quick
#   --gemm-rows    only the prefill-GEMM floor rows (below; part of the full run too), in
#                  the order x8, fp, bf16; a comma list runs only those groups
#   --out DIR      results directory (default bench/results/threads)
#   --report-only  only re-run bench/threads_report.py and bench/gemm_floor_report.py on DIR/raw
#
# Each row is one linear_bench call (through rvv_inductor::linear_bf16, the entry every
# library path reaches, with LinearOperands::nthreads = T: partition_columns over
# libgomp's pool) under QEMU 10 at VLEN 256 with the rvvcount plugin, which charges the
# work of every thread to the region and reports it per thread. Runs use
# OMP_WAIT_POLICY=passive so that idle workers sleep in futex instead of spinning (a
# spinning thread would be counted as working). The pool is started before the region.
#
# Shapes (N x K): q/o_proj 1536x1536, k/v_proj 256x1536, gate/up_proj 8960x1536 (and
# fused gate_up 17920x1536), down_proj 1536x8960, lm_head 151936x1536; M = 1 (decode)
# and 4, 16 (small GEMMs; lm_head and the fused gate_up M = 1 only: emulation time) for
# bf16, M = 1 for int8 (per-channel) and int4 (group 32, f16 scales: Q4_0-like), and the
# INT8/INT4 GEMM at M = 16, 64, 256 for q_proj, gate_up and down_proj at 1 and 8 threads.
#
# The prefill-GEMM floor rows (--gemm-rows; bench/gemm_floor_report.py, gemm-floor.md):
# q/o_proj 1536x1536, k/v_proj 256x1536, gate_up 17920x1536, down_proj 1536x8960 at
# M = 16, 64, 128, 512 and 1, 8 threads: "x8" int4 (group 32) and int8 (per channel) with
# int8 activations (linear_bench --x-int8-gemm: the dispatcher's kX8Gemm kernel, raw file
# <shape>-<int4|int8>x8-m<M>-t<T>.json; a run whose kernel is not a gemm_x8 one fails),
# "fp" the same weights with bf16 activations (the FP32 GEMM), "bf16" bf16 weights.
# Raw results that exist are kept (delete DIR/raw/<row>.json to redo a row). Each new raw
# file records the commit (rev) and, when csrc/ or bench/linear_bench.cpp differ from it
# in the working tree, a hash of that difference (tree_diff) taken around the build.
#
# bench/threads_report.py turns the raw JSON into threads.csv and threads.md: per row the
# busiest thread's instructions, beats and DRAM bytes, the imbalance, and the estimated
# K1 time max(busiest thread's cycles / clock, all threads' DRAM bytes / bandwidth) at the
# peak and at the achieved bandwidth of python/rvv_inductor/policy.py.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$RVV_REPO"

quick=0 out="" report_only=0 gemm_only=0 gemm_groups="x8 fp bf16"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --gemm-rows)
      gemm_only=1; shift
      if [ $# -gt 0 ] && [[ "$1" != --* ]]; then
        gemm_groups=${1//,/ }; shift
        for g in $gemm_groups; do
          case "$g" in x8|fp|bf16) ;; *) rvv_die "bench/threads.sh: --gemm-rows groups are x8, fp, bf16 (got $g)" ;; esac
        done
      fi ;;
    --out) out=$2; shift 2 ;;
    --report-only) report_only=1; shift ;;
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    *) rvv_die "bench/threads.sh: unknown option $1" ;;
  esac
done
[ -n "$out" ] || { [ $quick = 1 ] && out=build/bench-threads-quick || out=bench/results/threads; }
mkdir -p "$out/raw"

if [ $report_only = 0 ]; then
  [ "$RVV_HOST_ARCH" = x86_64 ] || rvv_die "bench/threads.sh needs QEMU (x86_64 host)"
  scripts/build-qemu-plugins >/dev/null
  # shellcheck disable=SC1091
  source "$RVV_CACHE/bench/env"
  BUILD=build/bench-threads
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-clang.cmake -DCMAKE_BUILD_TYPE=Release \
    -DRVV_BUILD_TESTS=OFF -DRVV_BUILD_BENCH=ON -DRVV_BENCH_TORCH_SYSROOT= >/dev/null
  # The kernel sources as built: the commit, plus a hash of any uncommitted change to
  # them (another checkout may be editing csrc/ at the same time: a change during the
  # build stops the run rather than label counts with the wrong source).
  tree_diff() { git diff HEAD -- csrc bench/linear_bench.cpp ':(exclude)*.md' | sha256sum | cut -c1-12; }
  clean_diff=$(true | sha256sum | cut -c1-12)
  diff_before=$(tree_diff)
  ninja -C "$BUILD" linear_bench >/dev/null
  diff_after=$(tree_diff)
  [ "$diff_before" = "$diff_after" ] || rvv_die "csrc/ or bench/linear_bench.cpp changed during the build; run again"
  tdiff=""
  [ "$diff_after" = "$clean_diff" ] || tdiff=$diff_after
  rev=$(git rev-parse --short HEAD)
  CPU=$(rvv_qemu_cpu 256 1 0 1)  # V + Zfh: the K1's plain-V kernels and the Zvfh quantized ones
  shapes="q_proj:1536:1536 k_proj:256:1536 o_proj:1536:1536 up_proj:8960:1536 gate_up:17920:1536 down_proj:1536:8960 lm_head:151936:1536"
  ms="1 4 16" quant="int8 int4"
  quant_gemm_shapes="q_proj:1536:1536 gate_up:17920:1536 down_proj:1536:8960" quant_ms="16 64 256"
  gemm_shapes="q_proj:1536:1536 k_proj:256:1536 gate_up:17920:1536 down_proj:1536:8960" gemm_ms="16 64 128 512"
  if [ $quick = 1 ]; then
    shapes="q_proj:1536:1536 k_proj:256:1536 down_proj:1536:8960"
    ms="1" quant="" quant_gemm_shapes="" gemm_shapes=""
  fi
  if [ $gemm_only = 1 ]; then
    shapes="" quant_gemm_shapes=""
  fi
  run() {  # name N K M weights threads [x8]
    local name=$1 N=$2 K=$3 M=$4 wt=$5 T=$6 x8=${7:-} f
    f="$out/raw/${name}-${wt}${x8}-m$M-t$T.json"
    [ -s "$f" ] && return 0
    local extra=() t0=$SECONDS
    [ "$wt" = int4 ] && extra=(--group 32)
    [ -n "$x8" ] && extra+=(--x-int8-gemm)
    OMP_WAIT_POLICY=passive QEMU_CPU=$CPU "$RVV_BENCH_QEMU10" -L /usr/riscv64-linux-gnu \
      -plugin "$RVV_BENCH_PLUGIN10,vlen=256,out=$f.plugin" \
      "$BUILD/bench/linear_bench" --path rvv --m "$M" --k "$K" --n "$N" --weights "$wt" "${extra[@]}" \
      --threads "$T" >"$f.prog" || { cat "$f.prog" >&2; rm -f "$f.plugin" "$f.prog"; rvv_die "linear_bench failed: $name $wt$x8 M=$M T=$T"; }
    python3 - "$f" "$name" "$rev" "$x8" "$tdiff" <<'EOF' || { rm -f "$f" "$f.plugin" "$f.prog"; rvv_die "bad row: $f"; }
import json, sys
f, name, rev, x8, tdiff = sys.argv[1:6]
prog = json.loads(open(f + ".prog").read().strip().splitlines()[-1])
plugin = json.load(open(f + ".plugin"))
if x8 and not (prog.get("x_int8_gemm") == 1 and "gemm_x8" in prog["kernel"]):
    sys.exit(f"{f}: asked for --x-int8-gemm but ran {prog['kernel']} (x_int8_gemm={prog.get('x_int8_gemm')})")
row = {"shape": name, "rev": rev, "program": prog, "plugin": plugin}
if tdiff:
    row["tree_diff"] = tdiff
json.dump(row, open(f, "w"))
EOF
    rm -f "$f.plugin" "$f.prog"
    echo "  $name $wt$x8 M=$M T=$T ($((SECONDS - t0)) s)"
  }
  for s in $shapes; do
    IFS=: read -r name N K <<<"$s"
    for M in $ms; do
      { [ "$name" = lm_head ] || [ "$name" = gate_up ]; } && [ "$M" != 1 ] && continue
      for T in 1 2 4 8; do run "$name" "$N" "$K" "$M" bf16 "$T"; done
    done
    for wt in $quant; do
      for T in 1 2 4 8; do run "$name" "$N" "$K" 1 "$wt" "$T"; done
    done
  done
  # The INT8/INT4 GEMM (prefill, batched decode) at 1 and 8 threads: its cache blocking
  # (quant-gemm-blocking.md has these rows before and after it).
  for s in $quant_gemm_shapes; do
    IFS=: read -r name N K <<<"$s"
    for M in $quant_ms; do
      for wt in $quant; do
        for T in 1 8; do run "$name" "$N" "$K" "$M" "$wt" "$T"; done
      done
    done
  done
  # The prefill-GEMM floor rows: int8 activations first, then the FP32 GEMM on the same
  # int4/int8 weights, then bf16 weights (rows that exist are skipped; M outermost).
  for g in $gemm_groups; do
    [ -n "$gemm_shapes" ] || break
    g0=$SECONDS
    echo "gemm rows: $g"
    for M in $gemm_ms; do  # small M first: every shape early
      for s in $gemm_shapes; do
        IFS=: read -r name N K <<<"$s"
        for T in 1 8; do
          case $g in
            x8) for wt in int4 int8; do run "$name" "$N" "$K" "$M" "$wt" "$T" x8; done ;;
            fp) for wt in int4 int8; do run "$name" "$N" "$K" "$M" "$wt" "$T"; done ;;
            bf16) run "$name" "$N" "$K" "$M" bf16 "$T" ;;
          esac
        done
      done
    done
    echo "gemm rows: $g done in $((SECONDS - g0)) s"
  done
fi
python3 bench/threads_report.py "$out"
python3 bench/gemm_floor_report.py "$out"
