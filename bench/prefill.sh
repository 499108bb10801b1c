#!/usr/bin/env bash
# Prefill GEMMs of Qwen2.5-1.5B through the code Inductor generates (CppGemmTemplate + our
# micro-GEMM, frozen weights, rvv_inductor.enable()), counted with the rvvcount plugin at
# 1 and 8 threads: instructions, beats and modelled DRAM bytes per call, per thread. The
# commands that regenerate bench/results/prefill/ (raw/t<T>-<blocking>.json, prefill.{md,csv}):
#
#   bench/prefill.sh --blocking upstream     # Inductor's own cache blocking
#   bench/prefill.sh --blocking ours         # + template.py's weight-once blocking (the default)
#   options: [--threads "1 8"] [--m 64,128] [--shapes q_proj,...] [--out DIR] [--report-only]
#            [--count-only]  (skip the warm pass: its cache is already filled)
#            [--path whole|regional]  (bench/prefill.py: torch.compile of the frozen Linear, or
#                                      compile_linears; give each path its own --out)
#
# Per thread count T (the counts run side by side): a warm pass (QEMU 10, no plugin)
# compiles every (shape, M) graph into an Inductor cache of its own
# (build/prefill-cache-<blocking>-t<T>), then the counting pass runs the same script under
# the plugin, hitting that cache (no g++ under the plugin). Both passes use the K1's cache
# sizes for the template's blocking (RVV_INDUCTOR_L1D_BYTES=32768, RVV_INDUCTOR_L2_BYTES=524288:
# under QEMU /sys describes the x86 host) and OMP_WAIT_POLICY=passive (idle libgomp workers
# sleep instead of spinning inside a region). `--blocking upstream` sets
# RVV_INDUCTOR_UPSTREAM_BLOCKING=1. bench/prefill_report.py writes DIR/prefill.{md,csv}.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$RVV_REPO"

threads="1 8" ms=64,128 shapes=q_proj,k_proj,o_proj,gate_proj,down_proj out=bench/results/prefill report_only=0
count_only=0
blocking=ours path=whole
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --m) ms=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --blocking) blocking=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --report-only) report_only=1; shift ;;
    --count-only) count_only=1; shift ;;
    --path) path=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) rvv_die "bench/prefill.sh: unknown option $1" ;;
  esac
done
case "$blocking" in upstream) upstream=1 ;; ours) upstream=0 ;; *) rvv_die "--blocking upstream|ours" ;; esac
mkdir -p "$out/raw"
out=$(realpath "$out")
if [ $report_only = 0 ]; then
  [ "$RVV_HOST_ARCH" = x86_64 ] || rvv_die "bench/prefill.sh needs QEMU (x86_64 host)"
  scripts/build-qemu-plugins >/dev/null
  # shellcheck disable=SC1091
  source "$RVV_CACHE/bench/env"
  rev=$(git rev-parse --short HEAD)
  one() {  # T
    local T=$1 f="$out/raw/t$1-$blocking"
    local cache=$RVV_REPO/build/prefill-cache-$blocking-t$T
    local envs=(env TORCHINDUCTOR_CACHE_DIR="$cache" OMP_WAIT_POLICY=passive RVV_INDUCTOR_L1D_BYTES=32768
                RVV_INDUCTOR_L2_BYTES=524288 RVV_INDUCTOR_UPSTREAM_BLOCKING=$upstream
                python3 bench/prefill.py --threads "$T" --m "$ms" --shapes "$shapes" --path "$path")
    if [ $count_only = 0 ]; then
      rvv_log "prefill ($blocking blocking): warm pass, $T thread(s)"
      RV64_QEMU=$RVV_BENCH_QEMU10 scripts/rv64 --vlen 256 "${envs[@]}" >"$f.warm.stdout" 2>"$f.warm.log" </dev/null
    fi
    rvv_log "prefill ($blocking blocking): counting pass, $T thread(s)"
    rvv_counted "$f.plugin.json" "" "${envs[@]}" >"$f.stdout" 2>"$f.log" </dev/null
    python3 - "$f" "$rev" "$T" "$blocking" <<'PY'
import json, sys
f, rev, T, blocking = sys.argv[1:5]
prog = json.loads([l for l in open(f + ".stdout").read().splitlines() if l.startswith("{")][-1])
plugin = json.load(open(f + ".plugin.json"))
json.dump({"rev": rev, "threads": int(T), "blocking": blocking, "program": prog, "plugin": plugin},
          open(f + ".json", "w"), indent=0)
PY
    rm -f "$f.plugin.json"
  }
  pids=()
  for T in $threads; do one "$T" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
fi
python3 bench/prefill_report.py "$out"
