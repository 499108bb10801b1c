#!/usr/bin/env bash
# Regenerates the instruction-count benchmark in bench/results/ (raw/*.json per run,
# results.csv, results.md, instructions.png). The one command:
#
#   bench/run.sh [--jobs N] [--quick] [--no-aten] [--resume] [--report-only] [--out DIR]
#
#   --jobs N       parallel emulations (default: number of cores)
#   --quick        decode shapes (M=1) and M=16 only, VLEN 256 only, into
#                  build/bench-quick (never over the committed results)
#   --out DIR      results directory (default bench/results)
#   --no-aten      skip the PyTorch baseline (needs the riscv64 root filesystem)
#   --resume       keep raw results that already exist (after an interrupted run)
#   --report-only  only re-run bench/report.py on the existing raw results
#
# Every program runs under QEMU user mode with the rvvcount plugin
# (bench/plugin/rvvcount.cc, built by scripts/build-qemu-plugins). Counts are
# deterministic: the same binaries give the same numbers on every run. Wall time of
# the emulation is never reported: it says nothing about RISC-V speed.
#
# Sampling: a run whose measured call would exceed a per-implementation budget of
# multiply-adds (CAP_* below) is measured at two reduced widths N1 < N2 of the same
# M and K and extrapolated linearly in N to the full width (every counter is a + b*N:
# per-call work plus per-column work). Such rows are marked sampled=1 in the CSV.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$RVV_REPO"

jobs=$(nproc) quick=0 aten=1 resume=0 report_only=0 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --jobs=*) jobs=${1#--jobs=}; shift ;;
    --quick) quick=1; shift ;;
    --no-aten) aten=0; shift ;;
    --resume) resume=1; shift ;;
    --report-only) report_only=1; shift ;;
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) rvv_die "unknown option $1 (see bench/run.sh --help)" ;;
  esac
done

RESULTS=${out:-bench/results}
[ -z "$out" ] && [ $quick = 1 ] && RESULTS=build/bench-quick
RAW=$RESULTS/raw
BUILD=${RVV_BENCH_BUILD:-build/bench-rv64}
PY=${RVV_BENCH_PYTHON:-/usr/bin/python3}

report() {
  "$PY" -c 'import matplotlib' 2>/dev/null ||
    rvv_die "$PY cannot import matplotlib: apt-get install python3-matplotlib (scripts/build-qemu-plugins does)"
  "$PY" bench/report.py "$RESULTS"
}
if [ $report_only = 1 ]; then report; exit 0; fi

# ---------------------------------------------------------------- tools and programs
scripts/build-qemu-plugins >/dev/null
# shellcheck disable=SC1091
source "$RVV_CACHE/bench/env"
[ -x "$RVV_BENCH_QEMU10" ] || rvv_die "the plugin-capable QEMU 10 is missing (scripts/build-qemu-plugins failed?)"

rootfs=$(rvv_rootfs_dir)
cmake_args=(-DRVV_BUILD_TESTS=OFF -DRVV_BUILD_BENCH=ON)
if [ $aten = 1 ]; then
  [ -f "$rootfs/.rvv-complete" ] ||
    rvv_die "the riscv64 root filesystem (for the PyTorch baseline) is missing: run scripts/setup, or pass --no-aten"
  cmake_args+=(-DRVV_BENCH_TORCH_SYSROOT="$rootfs")
else
  cmake_args+=(-DRVV_BENCH_TORCH_SYSROOT=)
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-clang.cmake -DCMAKE_BUILD_TYPE=Release \
  "${cmake_args[@]}" >"$RVV_CACHE/bench/cmake.log" 2>&1 ||
  { tail -n 20 "$RVV_CACHE/bench/cmake.log" >&2; rvv_die "configuring $BUILD failed"; }
targets=(linear_bench plugin_selftest)
[ $aten = 1 ] && targets+=(aten_linear)
ninja -C "$BUILD" "${targets[@]}" >"$RVV_CACHE/bench/ninja.log" 2>&1 ||
  { tail -n 30 "$RVV_CACHE/bench/ninja.log" >&2; rvv_die "building the benchmark programs failed"; }

# ---------------------------------------------------------------- job list
# Qwen2.5-1.5B Linear layers, K -> N (hidden 1536, intermediate 8960, vocabulary 151936).
SHAPES=("1536 2048" "1536 1536" "1536 17920" "8960 1536" "1536 151936")
MS=(1 2 4 8 16 64 128)
SCALE_MS=(1 4 16)
VLENS_SCALE=(128 512)
if [ $quick = 1 ]; then MS=(1 16); SCALE_MS=(); VLENS_SCALE=(); fi
# Multiply-add budget of one measured call, per implementation (see "Sampling" above).
CAP_RVV=600000000 CAP_ZVFBF=300000000 CAP_SCALAR=100000000 CAP_ATEN=50000000

jobfile=$(mktemp)
atenfile=$(mktemp)
trap 'rm -f "$jobfile" "$atenfile"' EXIT

# Appends the jobs for one (impl, format, vlen, M, K, N): one full run, or two samples.
# impl: rvv | rvv_zvfbf | scalar | aten. Granularity keeps sampled widths whole packed
# blocks at any VLEN (nb = VLEN/4 <= 256).
plan() {
  local impl=$1 fmt=$2 vlen=$3 M=$4 K=$5 N=$6 cap gran
  case $impl in
    rvv) cap=$CAP_RVV gran=256 ;;
    rvv_zvfbf) cap=$CAP_ZVFBF gran=256 ;;
    scalar) cap=$CAP_SCALAR gran=128 ;;
    aten) cap=$CAP_ATEN gran=128 ;;
  esac
  local line
  if [ $((M * K * N)) -le $cap ]; then
    line="$impl $fmt $vlen $M $K $N $N full"
    if [ "$impl" = aten ]; then echo "$line" >>"$atenfile"; else echo "$line" >>"$jobfile"; fi
    return
  fi
  local n2=$(( cap / (M * K) / (2 * gran) * (2 * gran) ))
  [ $n2 -lt $((2 * gran)) ] && n2=$((2 * gran))
  local n1=$((n2 / 2))
  for pair in "$n1 sample1" "$n2 sample2"; do
    set -- $pair
    line="$impl $fmt $vlen $M $K $1 $N $2"
    if [ "$impl" = aten ]; then echo "$line" >>"$atenfile"; else echo "$line" >>"$jobfile"; fi
  done
}

for s in "${SHAPES[@]}"; do
  set -- $s
  K=$1 N=$2
  for M in "${MS[@]}"; do
    plan rvv packed 256 "$M" "$K" "$N"
    plan rvv_zvfbf packed 256 "$M" "$K" "$N"
    plan scalar packed 0 "$M" "$K" "$N"
    [ $aten = 1 ] && plan aten rowmajor 256 "$M" "$K" "$N"
  done
  # Row-major weights (no packing step): the decode GEMV only.
  plan rvv rowmajor 256 1 "$K" "$N"
  plan rvv_zvfbf rowmajor 256 1 "$K" "$N"
  for v in "${VLENS_SCALE[@]}"; do
    for M in "${SCALE_MS[@]}"; do plan rvv packed "$v" "$M" "$K" "$N"; done
  done
done

mkdir -p "$RAW"
[ $resume = 1 ] || rm -f "$RAW"/*.json

# ---------------------------------------------------------------- one emulation
cpu_string() {  # impl vlen
  case $1 in
    scalar) echo "rv64,v=false" ;;
    rvv_zvfbf) echo "rv64,v=true,vlen=$2,elen=64,vext_spec=v1.0,zvfh=true,zvfbfmin=true,zvfbfwma=true" ;;
    *) echo "rv64,v=true,vlen=$2,elen=64,vext_spec=v1.0" ;;
  esac
}

# Writes raw/<name>.json: {"job": ..., "programs": [program JSON lines], "plugin": ...}
write_raw() {  # name impl fmt vlen qemu_cpu prog_out plugin_out [job fields...]
  local name=$1 impl=$2 fmt=$3 vlen=$4 cpu=$5 pout=$6 plout=$7 jobs_json=$8
  {
    printf '{"job": {"name": "%s", "impl": "%s", "format": "%s", "vlen": %s, "qemu_cpu": "%s", "qemu": "%s", "runs": %s},\n' \
      "$name" "$impl" "$fmt" "$vlen" "$cpu" "$(cat "$(dirname "$RVV_BENCH_QEMU10")/version" 2>/dev/null || echo qemu)" "$jobs_json"
    printf ' "programs": ['
    grep '^{' "$pout" | paste -sd, -
    printf '],\n "plugin": '
    cat "$plout"
    printf '}\n'
  } >"$RAW/$name.json.tmp"
  mv "$RAW/$name.json.tmp" "$RAW/$name.json"
}

run_linear_job() {  # impl fmt vlen M K N Nfull role
  local impl=$1 fmt=$2 vlen=$3 M=$4 K=$5 N=$6 Nfull=$7 role=$8
  local name="${impl}-${fmt}-v${vlen}-m${M}-k${K}-n${Nfull}-${role}"
  [ $resume = 1 ] && [ -f "$RAW/$name.json" ] && return 0
  local cpu pv tmp t0=$SECONDS
  cpu=$(cpu_string "$impl" "$vlen")
  pv=$vlen; [ "$vlen" = 0 ] && pv=128  # no vector unit: the plugin still wants a number
  tmp=$(mktemp -d)
  if ! QEMU_CPU=$cpu "$RVV_BENCH_QEMU10" -L "$RVV_CROSS_SYSROOT" \
      -plugin "$RVV_BENCH_PLUGIN10,vlen=$pv,dlen=128,vtype=read,out=$tmp/plugin.json" \
      "$BUILD/bench/linear_bench" --path "$impl" --format "$fmt" --m "$M" --k "$K" --n "$N" \
      >"$tmp/prog.out" 2>"$tmp/prog.err"; then
    echo "FAILED: $name" >&2
    cat "$tmp/prog.err" >&2
    rm -rf "$tmp"
    return 1
  fi
  write_raw "$name" "$impl" "$fmt" "$vlen" "$cpu" "$tmp/prog.out" "$tmp/plugin.json" \
    "[{\"M\": $M, \"K\": $K, \"N\": $N, \"N_full\": $Nfull, \"role\": \"$role\", \"region\": 1}]"
  rm -rf "$tmp"
  echo "done: $name ($((SECONDS - t0)) s)" >&2
}

# One process measures many ATen shapes (libtorch takes ~15 s of emulation to load).
run_aten_batch() {  # batch-name, then lines "impl fmt vlen M K N Nfull role" on stdin
  local name=$1 shapes=() runs=() i=0
  [ $resume = 1 ] && [ -f "$RAW/$name.json" ] && return 0
  while read -r impl fmt vlen M K N Nfull role; do
    i=$((i + 1))
    shapes+=("$M:$K:$N")
    runs+=("{\"M\": $M, \"K\": $K, \"N\": $N, \"N_full\": $Nfull, \"role\": \"$role\", \"region\": $i}")
  done
  [ ${#shapes[@]} -gt 0 ] || return 0
  local cpu tmp t0=$SECONDS
  cpu=$(cpu_string aten 256)
  tmp=$(mktemp -d)
  # libblas.so.3 is an absolute alternatives symlink, which QEMU's -L does not follow
  # into the root filesystem: point the loader at the directories it resolves to.
  local libpath=""
  for lib in libblas.so.3 liblapack.so.3; do
    local target
    target=$(readlink "$rootfs/etc/alternatives/$lib-riscv64-linux-gnu" 2>/dev/null || true)
    [ -n "$target" ] && libpath="$libpath${libpath:+:}$(dirname "$target")"
  done
  if ! QEMU_CPU=$cpu "$RVV_BENCH_QEMU10" -L "$rootfs" -E "LD_LIBRARY_PATH=$libpath" \
      -plugin "$RVV_BENCH_PLUGIN10,vlen=256,dlen=128,vtype=read,out=$tmp/plugin.json" \
      "$BUILD/bench/aten_linear" "${shapes[@]}" >"$tmp/prog.out" 2>"$tmp/prog.err"; then
    echo "FAILED: $name" >&2
    cat "$tmp/prog.err" >&2
    rm -rf "$tmp"
    return 1
  fi
  write_raw "$name" aten rowmajor 256 "$cpu" "$tmp/prog.out" "$tmp/plugin.json" "[$(IFS=,; echo "${runs[*]}")]"
  rm -rf "$tmp"
  echo "done: $name, ${#shapes[@]} shapes ($((SECONDS - t0)) s)" >&2
}

export -f run_linear_job run_aten_batch write_raw cpu_string rvv_die rvv_log
export RAW BUILD RVV_BENCH_QEMU10 RVV_BENCH_PLUGIN10 RVV_CROSS_SYSROOT=/usr/riscv64-linux-gnu resume rootfs

# ATen batches: split the shapes over the workers, each batch <= 64 regions.
if [ -s "$atenfile" ]; then
  naten=$(wc -l <"$atenfile")
  per=$(( (naten + jobs - 1) / jobs ))
  [ $per -gt 64 ] && per=64
  split -l "$per" -d "$atenfile" "$atenfile.part"
  for f in "$atenfile".part*; do echo "aten $(basename "$f" | sed 's/.*part/batch/') $f"; done >"$jobfile.aten"
fi

t0=$SECONDS
nlin=$(wc -l <"$jobfile")
rvv_log "running $nlin kernel emulations and $(wc -l <"$atenfile") ATen calls on $jobs workers"
# ATen batches first: they are the longest, so they should not be left for the end.
{
  [ -f "$jobfile.aten" ] && cat "$jobfile.aten"
  cat "$jobfile"
} | xargs -P "$jobs" -L 1 bash -c '
  if [ "$0" = aten ]; then run_aten_batch "aten-$1" <"$2"; else run_linear_job "$0" "$@"; fi' \
  2>"$RVV_CACHE/bench/run.log" || true
rm -f "$atenfile".part* "$jobfile.aten"
if grep -q '^FAILED' "$RVV_CACHE/bench/run.log"; then
  grep -A 5 '^FAILED' "$RVV_CACHE/bench/run.log" >&2
  rvv_die "some emulations failed (log: $RVV_CACHE/bench/run.log)"
fi
nraw=$(find "$RAW" -name '*.json' | wc -l)
rvv_log "emulations finished in $((SECONDS - t0)) s; $nraw raw result files"
report
