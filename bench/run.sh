#!/usr/bin/env bash
# Regenerates the instruction-count benchmark in bench/results/ (raw/*.json per run,
# results.csv, results.md, instructions.png). The one command:
#
#   bench/run.sh [--jobs N] [--quick] [--no-aten] [--no-llamacpp] [--resume] [--report-only] [--out DIR]
#                [--impls LIST] [--formats LIST] [--ms LIST]
#
#   --jobs N       parallel emulations (default: number of cores)
#   --quick        M = 1 and 16 only, VLEN 256 only, into build/bench-quick
#                  (never over the committed results)
#   --out DIR      results directory (default bench/results)
#   --no-aten      skip the PyTorch baseline
#   --no-llamacpp  skip the llama.cpp peer (Debian's libggml 0.27.0)
#                  (both peers need the riscv64 root filesystem of scripts/setup)
#   --resume       keep raw results that already exist (after an interrupted run)
#   --impls LIST   only these implementations (comma-separated: rvv,scalar,aten,llamacpp)
#   --formats LIST only these weight formats (e.g. int8,int4-g64,q4_0); with --resume,
#                  to add or redo rows (delete their raw files first) in existing results
#   --ms LIST      only these M (comma-separated, e.g. 1,4); the quantized and llama.cpp
#                  rows take exactly these M (beyond their default 1..16: --ms 64 runs the
#                  INT8-activation GEMM at M = 64)
#   --report-only  only re-run bench/report.py on the existing raw results
#
# Environment: RVV_BENCH_SHAPES="K:N ..." restricts the shapes (development; default: the
# five Qwen2.5-1.5B shapes below), RVV_BENCH_BUILD the build tree (build/bench-rv64).
#
# Rows: (impl, isa, format, layout, VLEN, M, K, N). impl is rvv | scalar | aten | llamacpp;
# isa the instruction-set variant it ran (rvv, rvv_zvfh, rvv_zvfbf, scalar; llamacpp: the
# QEMU CPU offered V, the variant ggml loaded is recorded per run); format the weight
# format (bf16; int8 = one scale per output channel, int8-g128, int4-g32/64/128, int4-g64-zp
# = with zero points; the GGUF block formats q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k,
# q4_k, q5_k, q6_k, stored at the file's bytes; llama.cpp's q8_0, q4_0 and the same block
# formats, f16, bf16); layout packed |
# rowmajor; act what the multiply-adds take X as: bf16, or int8 when the kernel quantizes X
# dynamically (linear_bench --x-int8, int4 decode; --x-int8-gemm, the block formats' GEMM at
# M >= 2; llama.cpp's quantized types always: to
# Q8_0 (also for Q5_0, IQ4_NL), Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants and IQ4_XS),
# f16/bf16 for llama.cpp's F16/BF16. The K-quants and IQ4_XS need K a multiple of 256, the
# other block formats of 32 (the Qwen2.5-1.5B shapes are; other K skip them). The int8/int4 rows are run only when bench/linear_bench
# accepts --weights (probed), the int8-activation rows only when --x-int8 selects a kernel.
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

jobs=$(nproc) quick=0 aten=1 llamacpp=1 resume=0 report_only=0 out="" only_impls="" only_formats="" only_ms=""
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --jobs=*) jobs=${1#--jobs=}; shift ;;
    --quick) quick=1; shift ;;
    --no-aten) aten=0; shift ;;
    --no-llamacpp) llamacpp=0; shift ;;
    --resume) resume=1; shift ;;
    --impls) only_impls=$2; shift 2 ;;
    --impls=*) only_impls=${1#--impls=}; shift ;;
    --formats) only_formats=$2; shift 2 ;;
    --formats=*) only_formats=${1#--formats=}; shift ;;
    --ms) only_ms=$2; shift 2 ;;
    --ms=*) only_ms=${1#--ms=}; shift ;;
    --report-only) report_only=1; shift ;;
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    -h|--help) sed -n '2,50p' "$0"; exit 0 ;;
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
if [ $aten = 1 ] || [ $llamacpp = 1 ]; then
  [ -f "$rootfs/.rvv-complete" ] ||
    rvv_die "the riscv64 root filesystem (for the PyTorch and llama.cpp peers) is missing: run scripts/setup, or pass --no-aten --no-llamacpp"
  cmake_args+=(-DRVV_BENCH_TORCH_SYSROOT="$rootfs")
  if [ $llamacpp = 1 ] && [ ! -f "$rootfs/usr/include/ggml.h" ]; then
    rvv_die "the root filesystem $rootfs has no libggml-dev (scripts/rootfs-packages.txt lists it: rerun scripts/setup), or pass --no-llamacpp"
  fi
else
  cmake_args+=(-DRVV_BENCH_TORCH_SYSROOT=)
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-clang.cmake -DCMAKE_BUILD_TYPE=Release \
  "${cmake_args[@]}" >"$RVV_CACHE/bench/cmake.log" 2>&1 ||
  { tail -n 20 "$RVV_CACHE/bench/cmake.log" >&2; rvv_die "configuring $BUILD failed"; }
targets=(linear_bench plugin_selftest)
[ $aten = 1 ] && targets+=(aten_linear)
[ $llamacpp = 1 ] && targets+=(ggml_linear)
ninja -C "$BUILD" "${targets[@]}" >"$RVV_CACHE/bench/ninja.log" 2>&1 ||
  { tail -n 30 "$RVV_CACHE/bench/ninja.log" >&2; rvv_die "building the benchmark programs failed"; }

# ---------------------------------------------------------------- formats and QEMU CPUs
# QEMU CPU of an (impl, isa) at a VLEN: the one definition in scripts/lib/common.sh
# (rvv_qemu_cpu VLEN V BF16 [ZFH]). Zvfh exists only together with the BF16 extensions
# there, and the Zvfh path also wants scalar Zfh (as on the K1); offering more extensions
# than a path uses changes nothing for a path forced with --path.
cpu_string() {  # impl isa vlen
  case $2 in
    scalar) rvv_qemu_cpu "$3" 0 0 ;;
    rvv_zvfh) rvv_qemu_cpu "$3" 1 1 1 ;;
    rvv_zvfbf) rvv_qemu_cpu "$3" 1 1 ;;
    *) rvv_qemu_cpu "$3" 1 0 ;;
  esac
}

# linear_bench's weight-format arguments for a format name (bf16 passes none, so an
# older linear_bench without --weights still runs the BF16 rows).
format_args() {
  case $1 in
    bf16) ;;
    int8) echo "--weights int8 --group 0" ;;
    int8-g*) echo "--weights int8 --group ${1#int8-g}" ;;
    int4-g*-zp) local g=${1#int4-g}; echo "--weights int4 --group ${g%-zp} --zero-points" ;;
    int4-g*) echo "--weights int4 --group ${1#int4-g}" ;;
    q4_1|q5_0|q5_1|iq4_nl|iq4_xs|q2_k|q3_k|q4_k|q5_k|q6_k) echo "--weights $1" ;;  # GGUF block formats: the block fixes the group
    *) rvv_die "unknown weight format $1" ;;
  esac
}

# Does this linear_bench run a (format, isa)? One tiny call under QEMU, no plugin.
lb_supports() {  # format isa
  # shellcheck disable=SC2046
  QEMU_CPU=$(cpu_string rvv "$2" 256) "$RVV_BENCH_QEMU10" -L "$RVV_CROSS_SYSROOT" "$BUILD/bench/linear_bench" \
    --path "$2" --format packed $(format_args "$1") --m 2 --k 256 --n 256 >/dev/null 2>&1
}

# ---------------------------------------------------------------- job list
# Qwen2.5-1.5B Linear layers, K -> N (hidden 1536, intermediate 8960, vocabulary 151936).
SHAPES=("1536 2048" "1536 1536" "1536 17920" "8960 1536" "1536 151936")
if [ -n "${RVV_BENCH_SHAPES:-}" ]; then
  read -r -a kn <<<"$RVV_BENCH_SHAPES"
  SHAPES=()
  for x in "${kn[@]}"; do SHAPES+=("${x/:/ }"); done
fi
MS=(1 2 4 8 16 64 128)
QMS=(1 2 4 8 16)                 # int8/int4 rows and llama.cpp's Q8_0/Q4_0
SCALE_MS=(1 4 16)
VLENS_SCALE=(128 512)
QFORMATS=(int8 int8-g128 int4-g32 int4-g64 int4-g128 int4-g64-zp)
BFORMATS=(q4_1 q5_0 q5_1 iq4_nl iq4_xs q2_k q3_k q4_k q5_k q6_k)  # GGUF block formats (vector paths only; llama.cpp's peers too)
QISAS=(rvv rvv_zvfh)             # the K1 has V and Zvfh
QSCALAR_FORMATS=(int8 int4-g64)  # scalar reference rows of the quantized formats (M = 1)
if [ $quick = 1 ]; then MS=(1 16); QMS=(1 16); SCALE_MS=(); VLENS_SCALE=(); fi
if [ -n "$only_ms" ]; then IFS=, read -r -a QMS <<<"$only_ms"; fi
# Multiply-add budget of one measured call, per implementation (see "Sampling" above).
CAP_RVV=600000000 CAP_ZVFBF=300000000 CAP_SCALAR=100000000 CAP_ATEN=50000000
CAP_QUANT=100000000 CAP_GGML_Q=150000000 CAP_GGML_F=50000000

export RVV_CROSS_SYSROOT=/usr/riscv64-linux-gnu
wanted_format() { [ -z "$only_formats" ] || [[ ",$only_formats," == *",$1,"* ]]; }
# K rows per block of a format (the K-quants' super-block is 256; others 32 or less).
format_k_ok() {  # format K
  case $1 in q2_k|q3_k|q4_k|q5_k|q6_k|iq4_xs) [ $(($2 % 256)) = 0 ] ;; q4_1|q5_0|q5_1|iq4_nl) [ $(($2 % 32)) = 0 ] ;; *) true ;; esac
}
qplan=()  # "format isa" pairs the linear_bench binary supports (formats --formats excludes are not probed)
for isa in "${QISAS[@]}" scalar; do
  fl=("${QFORMATS[@]}")
  [ "$isa" = scalar ] || fl+=("${BFORMATS[@]}")
  for f in "${fl[@]}"; do
    wanted_format "$f" || continue
    if lb_supports "$f" "$isa"; then qplan+=("$f $isa"); fi
  done
done
# The INT8-activation decode kernel (int4 weights, M = 1): does --x-int8 select it?
x8=0
QEMU_CPU=$(cpu_string rvv rvv 256) "$RVV_BENCH_QEMU10" -L "$RVV_CROSS_SYSROOT" "$BUILD/bench/linear_bench" \
  --path rvv --format packed --weights int4 --group 32 --x-int8 --m 1 --k 256 --n 256 2>/dev/null |
  grep -q '"kernel": "[^"]*x8' && x8=1
if [ ${#qplan[@]} = 0 ]; then
  rvv_log "bench/linear_bench does not accept --weights int8/int4 yet: no quantized rows"
else
  rvv_log "quantized rows (format isa): $(printf '%s, ' "${qplan[@]}" | sed 's/, $//')"
fi
[ $x8 = 1 ] && rvv_log "int8-activation (--x-int8) decode rows for int4"

jobfile=$(mktemp)
atenfile=$(mktemp)
trap 'rm -f "$jobfile" "$atenfile"' EXIT

# Appends the jobs for one (impl, isa, format, layout, vlen, M, K, N[, act]): one full
# run, or two samples. Job line: impl isa format layout vlen M K N N_full role act.
# Granularity keeps sampled widths whole packed blocks at any VLEN (nb = VLEN/4 <= 256).
plan() {
  local impl=$1 isa=$2 fmt=$3 lay=$4 vlen=$5 M=$6 K=$7 N=$8 act=${9:-} cap gran
  if [ -z "$act" ]; then
    case $impl/$fmt in llamacpp/q*|llamacpp/iq*) act=int8 ;; llamacpp/f16) act=f16 ;; *) act=bf16 ;; esac
  fi
  [ -z "$only_impls" ] || [[ ",$only_impls," == *",$impl,"* ]] || return 0
  wanted_format "$fmt" || return 0
  [ -z "$only_ms" ] || [[ ",$only_ms," == *",$M,"* ]] || return 0
  format_k_ok "$fmt" "$K" || return 0
  case $impl/$isa/$fmt in
    rvv/rvv_zvfbf/*) cap=$CAP_ZVFBF gran=256 ;;
    rvv/*/int*|rvv/*/q*|rvv/*/iq*) cap=$CAP_QUANT gran=256 ;;
    rvv/*) cap=$CAP_RVV gran=256 ;;
    scalar/*) cap=$CAP_SCALAR gran=128 ;;
    aten/*) cap=$CAP_ATEN gran=128 ;;
    llamacpp/*/q*|llamacpp/*/iq*) cap=$CAP_GGML_Q gran=64 ;;
    llamacpp/*) cap=$CAP_GGML_F gran=64 ;;
  esac
  local dest=$jobfile
  [ "$impl" = aten ] && dest=$atenfile
  if [ $((M * K * N)) -le $cap ]; then
    echo "$impl $isa $fmt $lay $vlen $M $K $N $N full $act" >>"$dest"
    return
  fi
  local n2=$(( cap / (M * K) / (2 * gran) * (2 * gran) ))
  [ $n2 -lt $((2 * gran)) ] && n2=$((2 * gran))
  local n1=$((n2 / 2))
  echo "$impl $isa $fmt $lay $vlen $M $K $n1 $N sample1 $act" >>"$dest"
  echo "$impl $isa $fmt $lay $vlen $M $K $n2 $N sample2 $act" >>"$dest"
}

for s in "${SHAPES[@]}"; do
  set -- $s
  K=$1 N=$2
  for M in "${MS[@]}"; do
    plan rvv rvv bf16 packed 256 "$M" "$K" "$N"
    plan rvv rvv_zvfbf bf16 packed 256 "$M" "$K" "$N"
    plan scalar scalar bf16 packed 0 "$M" "$K" "$N"
    [ $aten = 1 ] && plan aten default bf16 rowmajor 256 "$M" "$K" "$N"
  done
  # Row-major weights (no packing step): the decode GEMV only.
  plan rvv rvv bf16 rowmajor 256 1 "$K" "$N"
  plan rvv rvv_zvfbf bf16 rowmajor 256 1 "$K" "$N"
  for v in "${VLENS_SCALE[@]}"; do
    for M in "${SCALE_MS[@]}"; do plan rvv rvv bf16 packed "$v" "$M" "$K" "$N"; done
  done
  # Weight-only int8/int4 (the formats and paths this linear_bench has).
  for pair in "${qplan[@]}"; do
    set -- $pair
    if [ "$2" = scalar ]; then
      for qf in "${QSCALAR_FORMATS[@]}"; do [ "$qf" = "$1" ] && plan scalar scalar "$1" packed 0 1 "$K" "$N"; done
    else
      for M in "${QMS[@]}"; do plan rvv "$2" "$1" packed 256 "$M" "$K" "$N"; done
      # INT4 decode with int8 activations (the kernel is in the plain-V variant).
      [ $x8 = 1 ] && [ "$2" = rvv ] && [[ $1 == int4-* ]] && plan rvv rvv "$1" packed 256 1 "$K" "$N" int8
      # The block formats' prompt GEMM with int8 activations (--x-int8-gemm, plain V), M >= 2.
      if [ "$2" = rvv ] && [[ $1 == q* || $1 == iq* ]]; then
        for M in "${QMS[@]}"; do [ "$M" -ge 2 ] && plan rvv rvv "$1" packed 256 "$M" "$K" "$N" int8; done
      fi
    fi
  done
  # llama.cpp: Q8_0/Q4_0 (and the GGUF block formats' peers, the same types) weights with F32
  # activations (quantized inside to Q8_0; Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants and IQ4_XS),
  # as in its decode; F16/BF16 (no vector kernel in Debian's build) at M = 1; Q4_0 on the
  # scalar variant (QEMU without V) at M = 1.
  if [ $llamacpp = 1 ]; then
    for f in q4_0 q8_0 "${BFORMATS[@]}"; do
      for M in "${QMS[@]}"; do plan llamacpp rvv "$f" rowmajor 256 "$M" "$K" "$N"; done
    done
    for f in f16 bf16; do plan llamacpp rvv "$f" rowmajor 256 1 "$K" "$N"; done
    plan llamacpp scalar q4_0 rowmajor 0 1 "$K" "$N"
  fi
done

mkdir -p "$RAW"
[ $resume = 1 ] || rm -f "$RAW"/*.json

# The commit the programs were built from, and whether the kernels or benchmark programs
# had uncommitted changes (recorded in every raw file; the report states it).
source_rev=$(git rev-parse --short=10 HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain -- csrc bench/linear_bench.cpp bench/ggml_linear.cpp 2>/dev/null)" ] &&
  source_rev="$source_rev+uncommitted"

# ---------------------------------------------------------------- one emulation
# Writes raw/<name>.json: {"job": ..., "programs": [program JSON lines], "plugin": ...}
write_raw() {  # name impl isa fmt layout act vlen qemu_cpu prog_out plugin_out runs_json [extra job JSON]
  local name=$1 impl=$2 isa=$3 fmt=$4 lay=$5 act=$6 vlen=$7 cpu=$8 pout=$9 plout=${10} runs_json=${11} extra=${12:-}
  {
    printf '{"job": {"name": "%s", "impl": "%s", "isa": "%s", "format": "%s", "layout": "%s", "act": "%s", "vlen": %s, "qemu_cpu": "%s", "qemu": "%s", "source": "%s", %s"runs": %s},\n' \
      "$name" "$impl" "$isa" "$fmt" "$lay" "$act" "$vlen" "$cpu" \
      "$(cat "$(dirname "$RVV_BENCH_QEMU10")/version" 2>/dev/null || echo qemu)" "$source_rev" "$extra" "$runs_json"
    printf ' "programs": ['
    grep '^{' "$pout" | paste -sd, -
    printf '],\n "plugin": '
    cat "$plout"
    printf '}\n'
  } >"$RAW/$name.json.tmp"
  mv "$RAW/$name.json.tmp" "$RAW/$name.json"
}

run_job() {  # impl isa fmt layout vlen M K N Nfull role act
  local impl=$1 isa=$2 fmt=$3 lay=$4 vlen=$5 M=$6 K=$7 N=$8 Nfull=$9 role=${10} act=${11}
  local xa=()
  local name="${impl}-${isa}-${fmt}-${lay}-v${vlen}-m${M}-k${K}-n${Nfull}-${role}"
  if [ "$impl" != llamacpp ] && [ "$act" = int8 ]; then
    name="${impl}-${isa}-${fmt}-${lay}-x8-v${vlen}-m${M}-k${K}-n${Nfull}-${role}"
    xa=(--x-int8)
    [ "$M" -ge 2 ] && xa=(--x-int8-gemm)  # M >= 2: the INT8-activation GEMM (quant_x8.h)
  fi
  [ $resume = 1 ] && [ -f "$RAW/$name.json" ] && return 0
  local cpu pv tmp sysroot prog extra="" t0=$SECONDS
  cpu=$(cpu_string "$impl" "$isa" "$vlen")
  pv=$vlen; [ "$vlen" = 0 ] && pv=128  # no vector unit: the plugin still wants a number
  tmp=$(mktemp -d)
  if [ "$impl" = llamacpp ]; then
    sysroot=$rootfs
    prog=("$BUILD/bench/ggml_linear" --weights "$fmt")
  else
    sysroot=$RVV_CROSS_SYSROOT
    # shellcheck disable=SC2207
    prog=("$BUILD/bench/linear_bench" --path "$isa" --format "$lay" $(format_args "$fmt") "${xa[@]}")
  fi
  if ! QEMU_CPU=$cpu "$RVV_BENCH_QEMU10" -L "$sysroot" \
      -plugin "$RVV_BENCH_PLUGIN10,vlen=$pv,dlen=128,vtype=read,out=$tmp/plugin.json" \
      "${prog[@]}" --m "$M" --k "$K" --n "$N" >"$tmp/prog.out" 2>"$tmp/prog.err"; then
    echo "FAILED: $name" >&2
    cat "$tmp/prog.err" >&2
    rm -rf "$tmp"
    return 1
  fi
  if [ "$impl" = llamacpp ]; then
    # The ISA the loaded CPU variant was compiled for (its ELF arch attribute).
    local so arch
    so=$(grep -o '"ggml_cpu_so": "[^"]*"' "$tmp/prog.out" | sed 's/.*: "//; s/"$//')
    arch=$(llvm-readelf-19 -A "$rootfs$so" 2>/dev/null | awk '/TagName: arch/ { getline; print $2; exit }')
    extra="\"ggml_cpu_arch\": \"$arch\", "
  fi
  write_raw "$name" "$impl" "$isa" "$fmt" "$lay" "$act" "$vlen" "$cpu" "$tmp/prog.out" "$tmp/plugin.json" \
    "[{\"M\": $M, \"K\": $K, \"N\": $N, \"N_full\": $Nfull, \"role\": \"$role\", \"region\": 1}]" "$extra"
  rm -rf "$tmp"
  echo "done: $name ($((SECONDS - t0)) s)" >&2
}

# One process measures many ATen shapes (libtorch takes ~15 s of emulation to load).
run_aten_batch() {  # batch-name, then job lines (see plan) on stdin
  local name=$1 shapes=() runs=() i=0
  [ $resume = 1 ] && [ -f "$RAW/$name.json" ] && return 0
  while read -r impl isa fmt lay vlen M K N Nfull role act; do
    i=$((i + 1))
    shapes+=("$M:$K:$N")
    runs+=("{\"M\": $M, \"K\": $K, \"N\": $N, \"N_full\": $Nfull, \"role\": \"$role\", \"region\": $i}")
  done
  [ ${#shapes[@]} -gt 0 ] || return 0
  local cpu tmp t0=$SECONDS
  cpu=$(cpu_string aten default 256)
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
  write_raw "$name" aten default bf16 rowmajor bf16 256 "$cpu" "$tmp/prog.out" "$tmp/plugin.json" "[$(IFS=,; echo "${runs[*]}")]"
  rm -rf "$tmp"
  echo "done: $name, ${#shapes[@]} shapes ($((SECONDS - t0)) s)" >&2
}

export -f run_job run_aten_batch write_raw cpu_string format_args rvv_qemu_cpu rvv_die rvv_log
export RAW BUILD RVV_BENCH_QEMU10 RVV_BENCH_PLUGIN10 resume rootfs source_rev

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
rvv_log "running $nlin kernel and llama.cpp emulations and $(wc -l <"$atenfile") ATen calls on $jobs workers"
# ATen batches first: they are the longest, so they should not be left for the end.
{
  [ -f "$jobfile.aten" ] && cat "$jobfile.aten"
  cat "$jobfile"
} | xargs -P "$jobs" -L 1 bash -c '
  if [ "$0" = aten ]; then run_aten_batch "aten-$1" <"$2"; else run_job "$0" "$@"; fi' \
  2>"$RVV_CACHE/bench/run.log" || true
rm -f "$atenfile".part* "$jobfile.aten"
if grep -q '^FAILED' "$RVV_CACHE/bench/run.log"; then
  grep -A 5 '^FAILED' "$RVV_CACHE/bench/run.log" >&2
  rvv_die "some emulations failed (log: $RVV_CACHE/bench/run.log)"
fi
nraw=$(find "$RAW" -name '*.json' | wc -l)
rvv_log "emulations finished in $((SECONDS - t0)) s; $nraw raw result files"
report
