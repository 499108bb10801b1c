#!/usr/bin/env bash
# Failure paths of scripts/setup and scripts/rv64: each bad situation must give one clear
# message, a non-zero status and no half-built state. The commands the scripts call (uname,
# df, apt-get, the namespace runner) are replaced by shell functions, so nothing here
# touches the network, the kernel or the real cache.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
pass=0 fail=0
check() {  # name, expected status (0 / nonzero), pattern the output must contain, command...
  local name=$1 want=$2 pattern=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if { [ "$want" = 0 ] && [ $rc -eq 0 ]; } || { [ "$want" = nonzero ] && [ $rc -ne 0 ]; }; then
    if [ -z "$pattern" ] || printf "%s" "$out" | grep -q -- "$pattern"; then
      pass=$((pass + 1)); echo "ok   $name"; return
    fi
  fi
  fail=$((fail + 1)); echo "FAIL $name (status $rc)"; printf '%s\n' "$out" | sed 's/^/     | /'
}

sandbox=$(mktemp -d)
trap 'rm -rf "$sandbox"' EXIT
export RVV_INDUCTOR_CACHE=$sandbox/cache

steps() {  # runs "$@" with the setup functions loaded in a subshell
  bash -c 'set -euo pipefail; source "$0/scripts/lib/common.sh"; source "$0/scripts/lib/setup-steps.sh"; eval "$1"' "$repo" "$1"
}

check "rv64 rejects an unsupported VLEN" nonzero "VLEN must be one of" "$repo/scripts/rv64" --vlen 300 true
check "rv64 rejects --bf16 with --no-v" nonzero "contradict" "$repo/scripts/rv64" --bf16 --no-v true
check "rv64 without a command" nonzero "no command given" "$repo/scripts/rv64"
check "rv64 rejects a missing RV64_QEMU" nonzero "is not an executable" env RV64_QEMU=/nonexistent "$repo/scripts/rv64" true
check "rv64 rejects an RV64_QEMU that is not QEMU" nonzero "is not a qemu-riscv64" env RV64_QEMU=/bin/true "$repo/scripts/rv64" true
check "demo rejects an unsupported VLEN" nonzero "VLEN must be one of" "$repo/scripts/demo" --vlen 300 --out "$sandbox/demo"
check "demo rejects --count-jobs 0" nonzero "positive integer" "$repo/scripts/demo" --count-jobs 0 --out "$sandbox/demo"
check "demo rejects --count-only with --no-count" nonzero "contradict" "$repo/scripts/demo" --count-only --no-count --out "$sandbox/demo"
check "demo --count-only needs an earlier run" nonzero "has no spec-count.json" "$repo/scripts/demo" --count-only --out "$sandbox/demo"
check "setup rejects unknown options" nonzero "unknown option" "$repo/scripts/setup" --frobnicate
check "qemu-cpu: the K1's VLEN by default" 0 "^rv64,v=true,vlen=256,elen=64,vext_spec=v1.0$" "$repo/scripts/lib/qemu-cpu"
check "qemu-cpu --vlen 512 --bf16" 0 "vlen=512,.*zvfh=true,zvfbfmin=true,zvfbfwma=true$" \
  "$repo/scripts/lib/qemu-cpu" --vlen 512 --bf16
check "qemu-cpu --no-v" 0 "^rv64,v=false$" "$repo/scripts/lib/qemu-cpu" --no-v
check "qemu-cpu --zfh" 0 "vlen=128,elen=64,vext_spec=v1.0,Zfh=true$" "$repo/scripts/lib/qemu-cpu" --vlen 128 --zfh
check "qemu-cpu rejects an unsupported VLEN" nonzero "VLEN must be one of" "$repo/scripts/lib/qemu-cpu" --vlen 300
check "qemu-cpu rejects --bf16 with --no-v" nonzero "contradict" "$repo/scripts/lib/qemu-cpu" --bf16 --no-v
check "qemu-cpu and scripts/rv64 share one definition" 0 "" \
  steps '[ "$(rvv_qemu_cpu 128 1 1)" = "$("$RVV_REPO/scripts/lib/qemu-cpu" --vlen 128 --bf16)" ]'
check "old kernel: clear message" nonzero "needs >= 6.7" \
  steps 'uname() { echo 6.1.0-13-amd64; }; rvv_check_kernel'
check "kernel 6.7 is accepted" 0 "" steps 'uname() { echo 6.7.0; }; rvv_check_kernel'
check "full disk: clear message" nonzero "not enough disk space" \
  steps 'df() { printf "Filesystem 1024-blocks Used Available Capacity Mounted\n/dev/x 100 99 1024 99%% /\n"; }; check_space "$RVV_CACHE" 6'
check "no network: clear message" nonzero "is the Debian archive reachable" \
  steps 'dpkg-query() { return 1; }; apt-get() { return 100; }; apt_install some-package'
check "interrupted root filesystem build leaves no half-built state" nonzero "building the root filesystem failed" \
  steps 'df() { printf "h\n/dev/x 1 1 999999999 1%% /\n"; }; rvv_in_ns() { mkdir -p "$(rvv_rootfs_dir).partial/usr"; return 130; }; build_rootfs'
check "... and the next run starts from scratch" 0 "rebuilt" \
  steps 'df() { printf "h\n/dev/x 1 1 999999999 1%% /\n"; }; mkdir -p "$(rvv_rootfs_dir).partial/stale"
         rvv_in_ns() { [ ! -e "$(rvv_rootfs_dir).partial/stale" ] || return 1; mkdir -p "$(rvv_rootfs_dir).partial/usr"; }
         build_rootfs; [ -f "$(rvv_rootfs_dir)/.rvv-complete" ] && [ ! -e "$(rvv_rootfs_dir).partial" ] && echo rebuilt'
check "a complete root filesystem is reused" 0 "reused" \
  steps 'rvv_in_ns() { echo "must not rebuild"; return 1; }; build_rootfs && echo reused'

# Each tier scripts/test runs must be defined: a missing tier function fails only when CI
# reaches that tier, an hour in (it happened once, to the bench tier).
tiers_defined() {
  local f missing=0
  for f in $(sed -n 's/.*run_tier [a-z]* \(tier_[a-z]*\).*/\1/p' "$repo/scripts/test"); do
    grep -q "^$f() {" "$repo/scripts/test" || { echo "scripts/test runs $f but does not define it"; missing=1; }
  done
  for f in host cross torch bench demo; do
    grep -q "run_tier $f tier_$f" "$repo/scripts/test" || { echo "tier $f is never run"; missing=1; }
  done
  [ $missing = 0 ] && echo "all tiers defined"
}
check "scripts/test defines every tier it runs" 0 "all tiers defined" tiers_defined
check "... and that check fails on a missing one" nonzero "does not define" \
  bash -c "repo=\$(mktemp -d); mkdir \$repo/scripts; grep -v '^tier_bench() {' '$repo/scripts/test' >\$repo/scripts/test; $(declare -f tiers_defined); tiers_defined"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
