#!/usr/bin/env bash
# Compute-side calibration point: Debian's llama.cpp prefill (pp512) of TinyLlama-1.1B
# dimensions in Q2_K, counted with the rvvcount QEMU plugin.
#
#   bench/compute_calibration.sh [OUTDIR]        (default OUTDIR: build/calib)
#
# Reference: llama.cpp PR #19121 publishes, on a Banana Pi BPI-F3 (SpacemiT K1),
# "Tinyllama Q2_K 1.1B, pp512, Vec Dot: 7.47 tok/s" (the vec_dot path, the one Debian's
# libggml-cpu-riscv64_v has; the repack path, 16.01 tok/s, is not in Debian's build).
#
# Steps (all inside the riscv64 root filesystem, via scripts/rv64):
#   1. a random-init (torch.manual_seed(0), bf16) transformers Llama with TinyLlama-1.1B's
#      dimensions (hidden 2048, ffn 5632, 32 heads, 4 kv heads, vocab 32000) and 1 and 2
#      decoder layers, written as BF16 GGUF by rvv_inductor.demo.llamacpp.write_gguf;
#   2. llama-quantize IN-bf16.gguf OUT-q2_k.gguf Q2_K (the default Q2_K mix); the
#      per-tensor types it chose are kept in quantize-L*.types;
#   3. four counting runs, one after another: bench/llama_decode on a 512-token prompt
#      (ids (i*7919) % 31990 + 3), --steps 1, prefill charged to plugin region 3 and the
#      decode step to region 1, for L1/L2 x 8/4 threads, under QEMU 10 with the rvvcount
#      plugin (vlen=256, dlen=128) and OMP_WAIT_POLICY=passive (idle OpenMP workers sleep,
#      so every thread's count is work).
# Outputs in OUTDIR: tinyllama-L{1,2}-{bf16,q2_k}.gguf, quantize-L{1,2}.log/.types,
# counts-tinyllama-q2_k-L{1,2}-t{8,4}.json (plugin), driver-...json (driver stdout JSON
# line), run-....log (stderr) and wall times in times.txt.
#
# Time on a 2-core x86 host: ~2-3 min per model (emulated python), <1 min per quantize,
# ~10 min per 1-layer counting run and ~20 min per 2-layer run: about 1h30 in all.
# Existing GGUF files in OUTDIR are reused (delete them to rebuild).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=${1:-build/calib}
mkdir -p "$out"
out=$(cd "$out" && pwd)
case "$out/" in "$repo"/*) ;; *) echo "OUTDIR must be under $repo (visible inside the rootfs)" >&2; exit 1 ;; esac

source "$repo/scripts/lib/common.sh"
# shellcheck disable=SC1090
source "$RVV_CACHE/bench/env"
: "${RVV_BENCH_QEMU10:?not set: run scripts/build-qemu-plugins}" "${RVV_BENCH_PLUGIN10:?}"
driver=build/bench-rv64/bench/llama_decode
[ -x "$driver" ] || { echo "$driver missing: ninja -C build/bench-rv64 llama_decode" >&2; exit 1; }

prompt=$(python3 -c 'print(",".join(str((i * 7919) % 31990 + 3) for i in range(512)))')

# ---------------------------------------------------------------- 1. models as BF16 GGUF
cat >"$out/make_model.py" <<'EOF'
import sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from rvv_inductor.demo.llamacpp import write_gguf

layers, path = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_attention_heads=32,
                  num_key_value_heads=4, num_hidden_layers=layers, vocab_size=32000,
                  rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=2048,
                  tie_word_embeddings=False, torch_dtype=torch.bfloat16)
torch.set_default_dtype(torch.bfloat16)
model = LlamaForCausalLM(cfg).eval()
print(write_gguf(model, path, "bf16"), flush=True)
EOF

for L in 1 2; do
  bf16=$out/tinyllama-L$L-bf16.gguf q2k=$out/tinyllama-L$L-q2_k.gguf
  if [ ! -s "$bf16" ]; then
    echo "== L$L: writing $bf16"
    scripts/rv64 env PYTHONPATH="$repo/python" python3 "$out/make_model.py" "$L" "$bf16.tmp"
    mv "$bf16.tmp" "$bf16"
  fi
  # ------------------------------------------------------------ 2. llama-quantize Q2_K
  if [ ! -s "$q2k" ]; then
    echo "== L$L: llama-quantize Q2_K"
    scripts/rv64 llama-quantize "$bf16" "$q2k.tmp" Q2_K >"$out/quantize-L$L.log" 2>&1 ||
      { tail -20 "$out/quantize-L$L.log" >&2; exit 1; }
    mv "$q2k.tmp" "$q2k"
    # "[  n/ N] name - [shape], type = bf16, converting to q2_K .. size = ..." lines
    grep -oE '\] +[^ ]+ +- .*type = +[a-z0-9_]+(, converting to [a-zA-Z0-9_]+)?' "$out/quantize-L$L.log" |
      sed -E 's/^\] +//' >"$out/quantize-L$L.types" || true
  fi
done

# ---------------------------------------------------------------- 3. counting runs
for run in "1 8" "1 4" "2 8" "2 4"; do
  set -- $run
  L=$1 T=$2 name=tinyllama-q2_k-L$1-t$2
  echo "== counting $name ($(date +%T))"
  t0=$(date +%s)
  rvv_counted "$out/counts-$name.json" "" env OMP_WAIT_POLICY=passive "$driver" "$out/tinyllama-L$L-q2_k.gguf" \
    --prompt "$prompt" --steps 1 --threads "$T" --region 1 --prefill-region 3 \
    >"$out/driver-$name.out" 2>"$out/run-$name.log" || { tail -20 "$out/run-$name.log" >&2; exit 1; }
  t1=$(date +%s)
  grep '^{' "$out/driver-$name.out" | tail -1 >"$out/driver-$name.json"
  grep -q 'riscv64_v' "$out/driver-$name.json" || echo "WARNING: $name did not load the riscv64_v variant" >&2
  echo "$name wall_s=$((t1 - t0))" | tee -a "$out/times.txt"
done
echo "done: $out"
