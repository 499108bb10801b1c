#!/usr/bin/env bash
# What one decode call of a packed Linear costs outside its kernel, on the user's Python
# path (issue 28), counted with the rvvcount plugin at VLEN 256, 8 threads.
#
#   bench/call_overhead.sh [--shapes 1536x1536b,1536x256b,1536x8960,8960x1536] [--calls 20]
#                          [--formats bf16,int8,int4] [--out bench/results/call-overhead] [--report-only]
#
# Per format, bench/call_overhead.py builds one layer per shape (KxN, b: with a bias, the
# Qwen2.5-1.5B projections by default) through compile_linears and counts --calls M=1
# calls per level (layer(x), the op, BF16's compiled artifact, an empty loop), twice: with
# the operators' C++ kernels (librvv_inductor_ops.so) and with RVV_INDUCTOR_TORCH_OPS=0
# (their ctypes kernels). The kernel alone is bench/linear_bench (C++, the same dispatcher
# and kernel, one call, same threads). Raw files in $out/raw, the table in $out/report.md
# (bench/call_overhead_report.py), the profile of the C++-kernel runs in $out/profile-*.txt.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$RVV_REPO"

shapes=1536x1536b,1536x256b,1536x8960,8960x1536 calls=20 formats=bf16,int8,int4
out=bench/results/call-overhead report_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --shapes) shapes=$2; shift 2 ;;
    --calls) calls=$2; shift 2 ;;
    --formats) formats=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --report-only) report_only=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) rvv_die "bench/call_overhead.sh: unknown option $1" ;;
  esac
done
mkdir -p "$out/raw"
out=$(realpath "$out")
threads=8
if [ $report_only = 0 ]; then
  [ "$RVV_HOST_ARCH" = x86_64 ] || rvv_die "bench/call_overhead.sh needs QEMU (x86_64 host)"
  scripts/setup >/dev/null
  scripts/build-qemu-plugins >/dev/null
  source "$RVV_CACHE/bench/env"
  root=$(rvv_rootfs_dir)
  cmake -S . -B build/rv64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-clang.cmake -DCMAKE_BUILD_TYPE=Release \
    -DRVV_TORCH_SYSROOT="$root" >/dev/null && ninja -C build/rv64 rvv_inductor_core rvv_inductor_ops >/dev/null
  rvv_configure_bench_tree build/bench-rv64 >/dev/null && ninja -C build/bench-rv64 linear_bench >/dev/null
  lib=$RVV_REPO/build/rv64/csrc/librvv_inductor_core.so
  count() {  # count TAG PLUGIN-EXTRA CMD...: one plugin run, its report in raw/TAG.json
    local tag=$1 extra=$2; shift 2
    rvv_counted "$out/raw/$tag.json" "$extra" env OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$threads "$@" \
      >"$out/raw/$tag.stdout" 2>"$out/raw/$tag.log" </dev/null
  }
  for fmt in ${formats//,/ }; do
    for kern in cpp ctypes; do
      rvv_log "call overhead: $fmt, $kern kernels ($shapes)"
      extra="" ops=1
      [ $kern = cpp ] && extra=",profile=$out/raw/$fmt-$kern.profile.tsv"
      [ $kern = ctypes ] && ops=0
      count "$fmt-$kern" "$extra" PYTHONPATH="$RVV_REPO/python" RVV_INDUCTOR_LIB="$lib" RVV_INDUCTOR_TORCH_OPS=$ops \
        python3 bench/call_overhead.py --format "$fmt" --shapes "$shapes" --calls "$calls" --threads $threads
    done
    if [ -f "$out/raw/$fmt-cpp.profile.tsv" ]; then
      python3 bench/profile_report.py "$out/raw/$fmt-cpp.profile.tsv" --sysroot "$root" --search build/rv64 \
        --top 40 >"$out/profile-$fmt.txt"
      rm -f "$out/raw/$fmt-cpp.profile.tsv"  # large; the summary above is what is kept
    fi
    group=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['group_size'])" \
      "$out/raw/$fmt-cpp.stdout")
    for shape in ${shapes//,/ }; do
      kn=${shape%b}; k=${kn%x*}; n=${kn#*x}
      wargs=(--weights "$fmt")
      [ "$fmt" = bf16 ] || wargs+=(--group "$group")
      rvv_log "call overhead: kernel alone, $fmt $shape"
      count "kernel-$fmt-$shape" "" build/bench-rv64/bench/linear_bench --path rvv --format packed "${wargs[@]}" \
        --m 1 --k "$k" --n "$n" --threads $threads --region 1 --no-check
    done
  done
fi
python3 bench/call_overhead_report.py "$out" --formats "$formats" --shapes "$shapes"
