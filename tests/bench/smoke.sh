#!/usr/bin/env bash
# Smoke test of the instruction-count benchmark (CI): never looks at timings.
#
#   tests/bench/smoke.sh
#
# 1. builds the rvvcount plugin (scripts/build-qemu-plugins; cached after the first run)
#    and the riscv64 benchmark programs (build/bench-smoke);
# 2. checks the plugin against hand-written known-answer regions (bench/plugin_selftest.cpp)
#    under both plugin-capable QEMUs: 10.x (vtype read from the CSR) and 7.2 (decoded);
# 3. runs one small Linear shape twice with the RVV kernel and checks that every counter
#    is exactly repeatable, that the region is not empty, that it executed vector
#    instructions, and that it read at least the weight bytes (each weight byte must be
#    read at least once: an independent lower bound);
# 4. runs the scalar reference on the same shape: no vector instruction at all;
# 5. checks that QEMU 7.2 and 10 agree on the RVV kernel's instruction counts;
# 6. per-thread counting (bench/thread_selftest.cpp): N pthreads / libgomp threads each run
#    a known loop inside one region opened by the main thread, at 1, 2 and 4 threads;
#    each thread's LMUL-4 instruction count must be exactly its loop's, its instruction
#    count within THREAD_SLACK of 3 per iteration, and the totals the sum of the threads;
# 7. the library's own split (linear_bench --threads 8) on the thin k/v_proj: all 8
#    threads run vector work and the busiest has at most 1.25x the mean beats.
# Takes about a minute when the QEMU build is cached (the first build adds ~5 minutes).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/common.sh"
cd "$RVV_REPO"

[ "$RVV_HOST_ARCH" = x86_64 ] || { echo "bench smoke test: x86_64 hosts only (it needs QEMU); skipped"; exit 0; }

BUILD=build/bench-smoke
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passes=0
pass() { printf '  ok    %s\n' "$1"; passes=$((passes + 1)); }
fail() { printf '  FAIL  %s\n' "$1"; failures=$((failures + 1)); }

t0=$SECONDS
echo "== building the plugin and the benchmark programs"
scripts/build-qemu-plugins >/dev/null
# shellcheck disable=SC1091
source "$RVV_CACHE/bench/env"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-clang.cmake -DCMAKE_BUILD_TYPE=Release \
  -DRVV_BUILD_TESTS=OFF -DRVV_BUILD_BENCH=ON -DRVV_BENCH_TORCH_SYSROOT= >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; exit 1; }
ninja -C "$BUILD" linear_bench plugin_selftest thread_selftest >"$work/ninja.log" 2>&1 || { cat "$work/ninja.log"; exit 1; }

SYSROOT=/usr/riscv64-linux-gnu
CPU256=$(rvv_qemu_cpu 256 1 0)
CPU_NOV=$(rvv_qemu_cpu 128 0 0)

# value FILE KEY: the plugin's flat output "key value"
value() { awk -v k="$2" '$1 == k { print $2; found = 1 } END { if (!found) print "missing" }' "$1"; }
expect() {  # FILE KEY EXPECTED LABEL
  local got
  got=$(value "$1" "$2")
  if [ "$got" = "$3" ]; then pass "$4: $2 = $3"; else fail "$4: $2 = $got, expected $3"; fi
}

echo "== plugin known-answer regions (VLEN 256)"
for q in 10 72; do
  eval "qemu=\$RVV_BENCH_QEMU$q plugin=\$RVV_BENCH_PLUGIN$q"
  vt=track
  [ $q = 10 ] && vt=read
  out="$work/selftest$q.kv"
  QEMU_CPU=$CPU256 "$qemu" -L "$SYSROOT" -plugin "$plugin,vlen=256,format=kv,vtype=$vt,out=$out,profile=$out.prof" \
    "$BUILD/bench/plugin_selftest" >/dev/null
  l="qemu $q"
  expect "$out" regions.1.insns 100 "$l scalar block"
  expect "$out" regions.1.vector_insns 0 "$l scalar block"
  expect "$out" regions.2.insns 3 "$l vle16/vse16 m1"
  expect "$out" regions.2.vsetvl 1 "$l vle16/vse16 m1"
  expect "$out" regions.2.vload 1 "$l vle16/vse16 m1"
  expect "$out" regions.2.vstore 1 "$l vle16/vse16 m1"
  expect "$out" regions.2.vregops 2.000 "$l vle16/vse16 m1"
  expect "$out" regions.2.bytes_read 32 "$l vle16/vse16 m1"
  expect "$out" regions.2.bytes_written 32 "$l vle16/vse16 m1"
  expect "$out" regions.2.bytes_read_by_tag.weights 32 "$l vle16/vse16 m1"
  expect "$out" regions.3.vector_insns 6 "$l widening chain m4->m8"
  expect "$out" regions.3.vwiden 1 "$l widening chain m4->m8"
  expect "$out" regions.3.vfma 1 "$l widening chain m4->m8"
  expect "$out" regions.3.vregops 28.000 "$l widening chain m4->m8"
  expect "$out" regions.3.vbeats 56 "$l widening chain m4->m8"
  expect "$out" regions.3.dram_read_bytes 128 "$l widening chain m4->m8"
  expect "$out" regions.4.insns 4001 "$l scalar load loop"
  expect "$out" regions.4.scalar_mem 1000 "$l scalar load loop"
  expect "$out" regions.4.bytes_read 4000 "$l scalar load loop"
  expect "$out" regions.5.vregops 1.000 "$l fractional LMUL"
  expect "$out" regions.5.bytes_read 8 "$l fractional LMUL"
  if [ $q = 10 ]; then
    expect "$out" regions.6.vregops 2.000 "$l register vsetvl (vtype from CSR)"
    expect "$out" regions.6.vtype_unknown 0 "$l register vsetvl (vtype from CSR)"
  else
    expect "$out" regions.6.vtype_unknown 1 "$l register vsetvl (vtype not decodable)"
  fi
  expect "$out" regions.7.insns 5 "$l markers inside one block"
  expect "$out" regions.8.calls 2 "$l whole-register load, twice"
  expect "$out" regions.8.vregops 4.000 "$l whole-register load, twice"
  expect "$out" regions.8.bytes_read 128 "$l whole-register load, twice"
  expect "$out" regions.9.insns 2015 "$l two calls (jal + 2002 + jal + 11)"
  # profile=: every region instruction is located, and the two assembly functions are
  # named with their exact counts (symbols from the program's own ELF).
  python3 bench/profile_report.py "$out.prof" --top 1000 --json "$out.prof.json" >/dev/null ||
    fail "$l profile_report failed"
  python3 - "$out" "$out.prof.json" "$l" <<'PY' && pass "$l profile: region total and rvv_prof_hot/cold counts" || fail "$l profile does not match"
import json, sys
kv = dict(line.split(" ", 1) for line in open(sys.argv[1]).read().splitlines() if line.startswith("regions."))
total = sum(int(v) for k, v in kv.items() if k.count(".") == 2 and k.endswith(".insns"))
r = json.load(open(sys.argv[2]))
f = {x["function"]: x["insns"] for x in r["functions"]}
ok = r["total_insns"] == total and f.get("rvv_prof_hot") == 2002 and f.get("rvv_prof_cold") == 11
if not ok:
    print(sys.argv[3], "profile total", r["total_insns"], "regions", total, "hot", f.get("rvv_prof_hot"), "cold", f.get("rvv_prof_cold"))
sys.exit(0 if ok else 1)
PY
done

echo "== one Linear shape, M=1 K=1536 N=2048, VLEN 256"
M=1 K=1536 N=2048
wbytes=$((N * K * 2))
run() {  # qemu plugin path tag
  QEMU_CPU=$CPU256 "$1" -L "$SYSROOT" -plugin "$2,vlen=256,format=kv,out=$work/$4.kv" \
    "$BUILD/bench/linear_bench" --path "$3" --m $M --k $K --n $N >"$work/$4.out"
}
run "$RVV_BENCH_QEMU10" "$RVV_BENCH_PLUGIN10" rvv rvv-a
run "$RVV_BENCH_QEMU10" "$RVV_BENCH_PLUGIN10" rvv rvv-b
if cmp -s "$work/rvv-a.kv" "$work/rvv-b.kv"; then pass "two runs give identical counters ($(wc -l <"$work/rvv-a.kv") values)"
else fail "two runs differ:"; diff "$work/rvv-a.kv" "$work/rvv-b.kv" | head; fi
grep -q '"check_failures": 0' "$work/rvv-a.out" && pass "kernel output spot check" || fail "kernel output spot check"
ins=$(value "$work/rvv-a.kv" regions.1.insns)
vec=$(value "$work/rvv-a.kv" regions.1.vector_insns)
rd=$(value "$work/rvv-a.kv" regions.1.bytes_read)
[ "$ins" != missing ] && [ "$ins" -gt 0 ] && pass "region not empty ($ins instructions)" || fail "region empty ($ins)"
[ "$vec" != missing ] && [ "$vec" -gt 0 ] && pass "RVV kernel executed vector instructions ($vec)" || fail "RVV kernel: vector_insns = $vec"
[ "$rd" != missing ] && [ "$rd" -ge $wbytes ] && pass "bytes read $rd >= weight bytes $wbytes" || fail "bytes read $rd < weight bytes $wbytes"

QEMU_CPU=$CPU_NOV "$RVV_BENCH_QEMU10" -L "$SYSROOT" -plugin "$RVV_BENCH_PLUGIN10,vlen=128,format=kv,out=$work/scalar.kv" \
  "$BUILD/bench/linear_bench" --path scalar --m $M --k $K --n $N >"$work/scalar.out"
sv=$(value "$work/scalar.kv" regions.1.vector_insns)
si=$(value "$work/scalar.kv" regions.1.insns)
srd=$(value "$work/scalar.kv" regions.1.bytes_read)
[ "$sv" = 0 ] && pass "scalar reference: 0 vector instructions" || fail "scalar reference: vector_insns = $sv"
[ "$si" != missing ] && [ "$si" -gt 0 ] && pass "scalar reference: region not empty ($si)" || fail "scalar reference: empty"
[ "$srd" != missing ] && [ "$srd" -ge $wbytes ] && pass "scalar reference: bytes read >= weight bytes" || fail "scalar reference: bytes read $srd"

run "$RVV_BENCH_QEMU72" "$RVV_BENCH_PLUGIN72" rvv rvv-72
for k in insns vector_insns vregops bytes_read; do
  a=$(value "$work/rvv-a.kv" regions.1.$k) b=$(value "$work/rvv-72.kv" regions.1.$k)
  [ "$a" = "$b" ] && pass "QEMU 10 and 7.2 agree: $k = $a" || fail "QEMU 10 and 7.2 disagree on $k: $a vs $b"
done

echo "== per-thread counting: a region opened by the main thread charges every thread"
ITERS=20000
# Instructions a thread may execute around its loop inside the region: barrier and
# libgomp team code (measured: <= ~1100 at 1..4 threads under QEMU 7.2 and 10).
THREAD_SLACK=2000
for q in 10 72; do
  eval "qemu=\$RVV_BENCH_QEMU$q plugin=\$RVV_BENCH_PLUGIN$q"
  for mode in pthread omp; do
    for n in 1 2 4; do
      out="$work/threads-$q-$mode-$n.kv"
      OMP_WAIT_POLICY=passive QEMU_CPU=$CPU256 "$qemu" -L "$SYSROOT" -plugin "$plugin,vlen=256,format=kv,out=$out" \
        "$BUILD/bench/thread_selftest" $mode $n $ITERS >/dev/null || { fail "qemu $q $mode $n: program failed"; continue; }
      # expected loops: (t+1)*ITERS for t < n; pthread mode adds the main thread with none
      want=$(for t in $(seq 1 $n); do echo $((t * ITERS)); done; if [ $mode = pthread ]; then echo 0; fi)
      got=$(awk '$1 ~ /^regions\.1\.threads\.[0-9]+\.vtype_lmul_hist\.m4$/ { print $2 }' "$out")
      l="qemu $q $mode x$n"
      if [ "$(sort -n <<<"$want")" = "$(sort -n <<<"$got")" ]; then pass "$l: per-thread loop counts exact ($(sort -n <<<"$got" | tr '\n' ' '))"
      else fail "$l: per-thread LMUL-4 counts $(tr '\n' ' ' <<<"$got"), expected $(tr '\n' ' ' <<<"$want")"; fi
      bad=$(awk -v slack=$THREAD_SLACK '
        $1 ~ /^regions\.1\.threads\.[0-9]+\.insns$/ { split($1, p, "."); ins[p[4]] = $2 }
        $1 ~ /^regions\.1\.threads\.[0-9]+\.vtype_lmul_hist\.m4$/ { split($1, p, "."); m4[p[4]] = $2 }
        $1 == "regions.1.insns" { total = $2 }
        END { for (t in ins) { sum += ins[t]; lo = 3 * m4[t]; if (ins[t] < lo || ins[t] > lo + slack) print "thread " t ": " ins[t] " not in [" lo ", " lo + slack "]" }
              if (sum != total) print "total " total " != sum of threads " sum }' "$out")
      [ -z "$bad" ] && pass "$l: every thread's instructions within $THREAD_SLACK of its loop, totals = sum" || fail "$l: $bad"
    done
  done
done

echo "== the library's own split, counted: k/v_proj decode (N=256: 4 blocks at VLEN 256) on 8 threads"
out="$work/kv8.kv"
OMP_WAIT_POLICY=passive QEMU_CPU=$CPU256 "$RVV_BENCH_QEMU10" -L "$SYSROOT" -plugin "$RVV_BENCH_PLUGIN10,vlen=256,format=kv,out=$out" \
  "$BUILD/bench/linear_bench" --path rvv --m 1 --k 1536 --n 256 --threads 8 >"$work/kv8.out"
grep -q '"check_failures": 0' "$work/kv8.out" && grep -q '"threads_used": 8' "$work/kv8.out" &&
  pass "8-thread call ran on 8 threads, output spot check" || fail "8-thread call: $(cat "$work/kv8.out")"
vec_threads=$(awk '$1 ~ /^regions\.1\.threads\.[0-9]+\.vbeats$/ && $2 > 0 { n++ } END { print n + 0 }' "$out")
[ "$vec_threads" = 8 ] && pass "all 8 threads ran vector work" || fail "$vec_threads of 8 threads ran vector work"
imb=$(value "$out" regions.1.imbalance.vbeats)
awk -v i="$imb" 'BEGIN { exit !(i >= 1 && i <= 1.25) }' && pass "beat imbalance $imb <= 1.25" || fail "beat imbalance $imb"

echo "bench smoke test ($((SECONDS - t0)) s)"
echo "smoke: $passes passed, $failures failed"
[ $failures = 0 ]
