# Shared shell helpers for scripts/setup and scripts/rv64. Sourced, not executed.
# shellcheck shell=bash

RVV_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Slow artefacts (root filesystem, QEMU builds) live outside the repo so that a fresh
# clone, and CI, reuse them. Override with RVV_INDUCTOR_CACHE.
RVV_CACHE=${RVV_INDUCTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvv-inductor}
RVV_HOST_ARCH=$(uname -m)

# The root filesystem is keyed by the hash of its package list and mirror, so editing
# the list builds a new one and never patches an old one in place.
rvv_rootfs_key() {
  cat "$RVV_REPO/scripts/rootfs-packages.txt" "$RVV_REPO/scripts/lib/rootfs.conf" | sha256sum | cut -c1-16
}
rvv_rootfs_dir() { echo "$RVV_CACHE/rootfs-$(rvv_rootfs_key)"; }

# Configures DIR (the benchmark's riscv64 tree) against the root filesystem's libraries:
# llama.cpp's decode driver (libllama) and rvv-generate (libtorch) build there. cmake's
# output goes to stdout; callers redirect it.
rvv_configure_bench_tree() {
  cmake -S "$RVV_REPO" -B "$1" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$RVV_REPO/cmake/riscv64-clang.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DRVV_BUILD_TESTS=OFF -DRVV_BUILD_BENCH=ON \
    -DRVV_BENCH_TORCH_SYSROOT="$(rvv_rootfs_dir)"
}

# Builds the package's riscv64 libraries in build/rv64: the C++ core and the operators'
# C++ kernels (librvv_inductor_ops.so, against the root filesystem's LibTorch), so that
# what scripts/demo, scripts/rv64 and scripts/test run is the C++ operator path, not the
# ctypes fallback. Extra arguments are ninja targets (default: the two libraries). ninja
# is quiet and quick when nothing changed. Output goes to stdout; callers redirect it.
rvv_build_rv64() {
  local targets=("$@")
  [ ${#targets[@]} -gt 0 ] || targets=(rvv_inductor_core rvv_inductor_ops)
  local tree=$RVV_REPO/build/rv64 sysroot
  sysroot=$(rvv_rootfs_dir)
  # Configured once for this root filesystem; after that ninja re-runs cmake itself when a
  # CMakeLists.txt changes.
  if ! [ -f "$tree/build.ninja" ] || ! grep -qx "RVV_TORCH_SYSROOT:PATH=$sysroot" "$tree/CMakeCache.txt" 2>/dev/null; then
    cmake -S "$RVV_REPO" -B "$tree" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$RVV_REPO/cmake/riscv64-clang.cmake" \
      -DCMAKE_BUILD_TYPE=Release -DRVV_TORCH_SYSROOT="$sysroot" || return 1
  fi
  ninja -C "$tree" "${targets[@]}"
}

# rvv_counted OUT_JSON PLUGIN_EXTRA CMD...: runs CMD in the riscv64 world at VLEN 256 under
# QEMU 10 with the rvvcount plugin (DLEN 128, each vector instruction's vtype read as it
# runs), its report in OUT_JSON; PLUGIN_EXTRA is appended to the plugin's arguments
# (e.g. ",profile=FILE.tsv", or ""). Needs "$RVV_CACHE/bench/env" sourced
# (scripts/build-qemu-plugins). Every counting benchmark runs through here.
rvv_counted() {
  local out=$1 extra=$2
  shift 2
  RV64_QEMU=$RVV_BENCH_QEMU10 RV64_BIND="$(dirname "$RVV_BENCH_PLUGIN10")${RV64_BIND:+:$RV64_BIND}" \
    QEMU_PLUGIN="$RVV_BENCH_PLUGIN10,out=$out,vlen=256,dlen=128,vtype=read$extra" \
    "$RVV_REPO/scripts/rv64" --vlen 256 "$@"
}

rvv_log() { printf '[rvv] %s\n' "$*" >&2; }
rvv_die() {
  printf '[rvv] error: %s\n' "$1" >&2
  shift
  for line in "$@"; do printf '[rvv]   %s\n' "$line" >&2; done
  exit 1
}

# Each supported VLEN must be a power of two in [128, 1024]: the RVV spec allows more,
# but that is the range this project tests, and QEMU rejects anything else anyway.
rvv_check_vlen() {
  case "$1" in
    128|256|512|1024) ;;
    *) rvv_die "VLEN must be one of 128, 256, 512, 1024 (got '$1')" ;;
  esac
}

# QEMU CPU model string, the one definition (scripts/lib/qemu-cpu is its command-line
# form). $1 VLEN, $2 vector on/off (1/0), $3 BF16 extensions on/off, $4 (optional) scalar
# FP16 (Zfh, as on the K1) on/off. The vector BF16/half extensions exist only in
# QEMU >= 8, so they select the newer binary; "Zfh" is spelled as QEMU 7.2 needs it.
rvv_qemu_cpu() {
  local vlen=$1 v=$2 bf16=$3 zfh=${4:-0} cpu
  if [ "$v" = 0 ]; then
    cpu="rv64,v=false"
  elif [ "$bf16" = 1 ]; then
    cpu="rv64,v=true,vlen=$vlen,elen=64,vext_spec=v1.0,zvfh=true,zvfbfmin=true,zvfbfwma=true"
  else
    cpu="rv64,v=true,vlen=$vlen,elen=64,vext_spec=v1.0"
  fi
  [ "$zfh" = 1 ] && cpu="$cpu,Zfh=true"
  echo "$cpu"
}

# The static QEMU used as the binfmt interpreter: 7.2 (bookworm) by default, 10.x
# (trixie) when the BF16 extensions are wanted.
rvv_qemu_static() {
  if [ "$1" = 1 ]; then echo "$RVV_CACHE/qemu/10/riscv64-binfmt-P"; else echo "$RVV_CACHE/qemu/7.2/riscv64-binfmt-P"; fi
}

# A kernel >= 6.7 gives each user namespace its own binfmt_misc; without it we would
# have to register handlers on the host, which this project never does.
rvv_check_kernel() {
  local major minor
  IFS=. read -r major minor _ <<<"$(uname -r)"
  if [ "$major" -lt 6 ] || { [ "$major" -eq 6 ] && [ "${minor%%[!0-9]*}" -lt 7 ]; }; then
    rvv_die "Linux $(uname -r) has no per-user-namespace binfmt_misc (needs >= 6.7)." \
      "scripts/rv64 runs riscv64 programs by registering QEMU in a private binfmt_misc" \
      "instance, without touching the host. Use a newer kernel, or a riscv64 machine."
  fi
}

# Runs "$@" as uid 0 of a new user+mount namespace with an identity uid/gid map and a
# private binfmt_misc in which QEMU ($1, a static binary) is registered for riscv64 ELF.
# The 'F' flag makes the kernel open the interpreter now, so it need not exist in a chroot.
rvv_in_ns() {
  local interp=$1; shift
  rvv_check_kernel
  [ -x "$interp" ] || rvv_die "QEMU binary $interp is missing: run scripts/setup"
  [ "$(id -u)" = 0 ] || rvv_die "scripts/rv64 needs root on x86 (an identity uid map 0..65535 needs it)."
  local magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xf3\x00'
  local mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  local reg=":qemu-riscv64:M::$magic:$mask:$interp:POF"
  # The child waits until the parent has written its id maps, then registers QEMU.
  # shellcheck disable=SC2016
  unshare --user --mount --propagation private -- bash -c '
    until grep -q . /proc/self/uid_map; do sleep 0.02; done
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null ||
      { echo "[rvv] error: cannot mount binfmt_misc in a user namespace (kernel >= 6.7 needed)" >&2; exit 97; }
    printf "%s" "$0" >/proc/sys/fs/binfmt_misc/register ||
      { echo "[rvv] error: cannot register QEMU in the private binfmt_misc" >&2; exit 97; }
    exec "$@"' "$reg" "$@" &
  local pid=$!
  # Wait for the child to exist as a namespace member before writing its maps.
  local i=0
  while [ "$(readlink /proc/$pid/ns/user 2>/dev/null)" = "$(readlink /proc/self/ns/user)" ]; do
    i=$((i + 1)); [ $i -gt 500 ] && break; sleep 0.01
  done
  if ! { echo '0 0 65536' >/proc/$pid/gid_map && echo '0 0 65536' >/proc/$pid/uid_map; } 2>/dev/null; then
    kill "$pid" 2>/dev/null
    rvv_die "cannot write uid/gid maps for the user namespace" \
      "Unprivileged user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)."
  fi
  # Forward termination to the child so an interrupted run does not linger.
  trap 'kill -TERM $pid 2>/dev/null' INT TERM
  local rc=0
  wait "$pid" || rc=$?
  trap - INT TERM
  return $rc
}
