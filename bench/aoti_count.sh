#!/usr/bin/env bash
# Per-decode-token counts of an AOTInductor package run by rvv-generate (issue 16), with a
# profile of where the instructions go (function and library), at Qwen2.5-1.5B dimensions.
#
#   bench/aoti_count.sh [--layers 1,2] [--cache 64] [--weights bf16] [--threads 1]
#                       [--vocab 1024] [--steps 5] [--prompt 4] [--attention rvv|sdpa]
#                       [--out bench/results/aoti] [--report-only]
#
# For each layer count L: a random Qwen2 model with the 1.5B dimensions (hidden 1536,
# FFN 8960, 12/2 heads) and L layers, the vocabulary cut to --vocab so the package stays
# small, saved with save_pretrained; `python3 -m rvv_inductor export` (its default gate,
# --max-cache-len --cache, --threads); then rvv-generate under QEMU 10 with the rvvcount
# plugin (VLEN 256), `--region 1` around each decode step (a --prompt-token prompt, --steps
# new tokens, --ignore-eos), `--prefill-region 3` around the prefill (the package's
# prefill model runs the prompt in chunks of 16, the rest token by token: --prompt 16 is
# one chunk) and `profile=` (decode and prefill together). Writes $out/raw/L<L>-<weights>-c<cache>-t<T>.*
# and $out/report.md (bench/aoti_report.py). The export is the slow part (~6-10 min
# of emulated g++ per package); packages are kept in build/aoti-count/ and reused.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$RVV_REPO"

layers=1,2 cache=64 weights=bf16 threads=1 vocab=1024 steps=5 prompt=4 out=bench/results/aoti report_only=0 attention=
while [ $# -gt 0 ]; do
  case "$1" in
    --layers) layers=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --weights) weights=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --attention) attention=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --report-only) report_only=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) rvv_die "bench/aoti_count.sh: unknown option $1" ;;
  esac
done
mkdir -p "$out/raw"
out=$(realpath "$out")
if [ $report_only = 0 ]; then
  [ "$RVV_HOST_ARCH" = x86_64 ] || rvv_die "bench/aoti_count.sh needs QEMU (x86_64 host)"
  scripts/setup >/dev/null
  scripts/build-qemu-plugins >/dev/null
  source "$RVV_CACHE/bench/env"
  root=$(rvv_rootfs_dir)
  cmake -S . -B build/rv64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-clang.cmake \
    -DCMAKE_BUILD_TYPE=Release >/dev/null && ninja -C build/rv64 rvv_inductor_core >/dev/null
  rvv_configure_bench_tree build/bench-rv64 >/dev/null && ninja -C build/bench-rv64 rvv-generate >/dev/null
  gen=$RVV_REPO/build/bench-rv64/tools/rvv_generate/rvv-generate
  work=$RVV_REPO/build/aoti-count
  mkdir -p "$work"
  py=(env PYTHONPATH="$RVV_REPO/python" RVV_INDUCTOR_LIB="$RVV_REPO/build/rv64/csrc/librvv_inductor_core.so"
      TORCHINDUCTOR_CACHE_DIR="$work/inductor-cache" python3)
  rev=$(git rev-parse --short HEAD)
  case "$prompt" in ''|*[!0-9]*|0) rvv_die "bench/aoti_count.sh: --prompt needs a positive token count" ;; esac
  ids=$(seq -s, 1 "$prompt")
  for L in ${layers//,/ }; do
    ptag="L$L-$weights-c$cache-t$threads${attention:+-$attention}"  # the package's name
    tag=$ptag  # the run's: the prompt length too when it is not the default
    [ "$prompt" = 4 ] || tag="$tag-p$prompt"
    model="$work/model-L$L-v$vocab"
    pkg="$work/$ptag.pt2"
    if [ ! -f "$model/config.json" ]; then
      rvv_log "aoti: building the $L-layer model ($model)"
      scripts/rv64 --vlen 256 "${py[@]}" bench/aoti_model.py "$model" "$L" "$vocab" </dev/null
    fi
    if [ ! -f "$pkg" ]; then
      rvv_log "aoti: exporting $tag (emulated g++: ~6-10 min)"
      scripts/rv64 --vlen 256 "${py[@]}" -m rvv_inductor export "$model" --weights "$weights" \
        --max-cache-len "$cache" --threads "$threads" ${attention:+--attention "$attention"} -o "$pkg" >"$out/raw/$ptag.export.log" 2>&1
    fi
    rvv_log "aoti: counting $tag ($steps decode steps)"
    f="$out/raw/$tag"
    rvv_counted "$f.plugin.json" ",profile=$f.profile.tsv" env OMP_WAIT_POLICY=passive "$gen" "$pkg" --prompt-ids "$ids" \
      --max-new-tokens "$steps" --ignore-eos --region 1 --prefill-region 3 --threads "$threads" >"$f.stdout" 2>"$f.log" </dev/null
    # The runner extracted the package to a temporary directory it deleted: extract it
    # again so the package's .so can be named.
    rm -rf "$work/$tag.x" && python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
      "$pkg" "$work/$tag.x"
    # rvv-generate loads the prefill model's library as prefill.so (prefill_model.cpp): name it so.
    for so in "$work/$tag.x"/*/data/aotinductor/prefill/*.so; do
      [ -f "$so" ] && ln -sf "$so" "$work/$tag.x/prefill.so"
    done
    python3 bench/profile_report.py "$f.profile.tsv" --sysroot "$root" --search "$work/$tag.x" --top 60 \
      --json "$f.profile.json" >"$f.profile.txt"
    python3 - "$f" "$rev" "$L" "$cache" "$weights" "$threads" "$vocab" "$prompt" <<'PY'
import json, sys
f, rev, L, cache, weights, T, V, P = sys.argv[1:9]
plugin = json.load(open(f + ".plugin.json"))
json.dump({"rev": rev, "layers": int(L), "cache": int(cache), "weights": weights, "threads": int(T),
           "vocab": int(V), "prompt": int(P), "stdout": open(f + ".stdout").read(), "plugin": plugin,
           "profile": json.load(open(f + ".profile.json"))}, open(f + ".json", "w"), indent=0)
PY
    rm -f "$f.plugin.json" "$f.profile.json"
    gzip -f "$f.profile.tsv"
  done
fi
python3 bench/aoti_report.py "$out"
