# Steps of scripts/setup, as functions (sourced; tests/scripts replaces the commands
# they call to check the failure paths). shellcheck shell=bash
HOST_PACKAGES_X86=(clang-19 lld-19 llvm-19 libc6-dev-riscv64-cross libstdc++-12-dev-riscv64-cross
  googletest cmake ninja-build mmdebstrap arch-test qemu-user dpkg-dev ca-certificates python3 python3-pytest python3-tqdm file)
HOST_PACKAGES_RISCV=(g++ cmake ninja-build googletest python3-torch libtorch-dev python3-dev
  python3-numpy python3-pytest python3-transformers python3-safetensors python3-matplotlib
  python3-scikit-build-core python3-pip binutils file)

apt_install() {
  local missing=()
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || rvv_die "missing Debian packages: ${missing[*]}" "Install them as root: apt-get install ${missing[*]}"
  rvv_log "installing Debian packages: ${missing[*]}"
  apt-get update -qq >/dev/null 2>&1 || rvv_die "apt-get update failed: is the Debian archive reachable?"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    rvv_die "apt-get install ${missing[*]} failed"
}

check_space() {  # $1 directory, $2 GiB needed
  mkdir -p "$1"
  local avail_kb
  avail_kb=$(df -Pk "$1" | awk 'NR==2 {print $4}')
  [ "$avail_kb" -ge $(($2 * 1024 * 1024)) ] ||
    rvv_die "not enough disk space in $1: $((avail_kb / 1024 / 1024)) GiB free, $2 GiB needed" \
      "Free space there, or point RVV_INDUCTOR_CACHE at a larger disk."
}

# A private apt configuration for other suites/architectures, so /etc/apt is never touched.
private_apt() {  # $1 name, $2 sources line(s); prints the apt option arguments
  local d="$RVV_CACHE/apt/$1"
  mkdir -p "$d/lists/partial" "$d/archives/partial" "$d/etc"
  printf '%s\n' "$2" >"$d/etc/sources.list"
  printf '%s\n' \
    "-o Dir::Etc::SourceList=$d/etc/sources.list -o Dir::Etc::SourceParts=/dev/null" \
    "-o Dir::State::Lists=$d/lists -o Dir::Cache::Archives=$d/archives" \
    "-o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root"
}

fetch_qemu() {  # $1 version dir, $2 suite, $3 package, $4 binary inside the package
  local out="$RVV_CACHE/qemu/$1"
  [ -x "$out/riscv64-binfmt-P" ] && [ -e "$out/qemu-riscv64" ] && return 0
  rvv_log "fetching QEMU $1 ($3 from $2)"
  local tmp opts
  tmp=$(mktemp -d)
  # shellcheck disable=SC2046
  opts=$(private_apt "$2" "deb http://deb.debian.org/debian $2 main")
  # shellcheck disable=SC2086
  apt-get $opts update -qq >/dev/null 2>&1 || rvv_die "cannot read the Debian $2 archive (no network?)"
  # shellcheck disable=SC2086
  (cd "$tmp" && apt-get $opts download "$3" >/dev/null 2>&1) || rvv_die "cannot download $3 from $2"
  dpkg-deb -x "$tmp"/*.deb "$tmp/x"
  mkdir -p "$out"
  # Debian's QEMU implements binfmt's P flag (argv[0] preserved) when its own name ends
  # in -binfmt-P, so the static binary is stored under that name.
  cp "$tmp/x/$4" "$out/riscv64-binfmt-P.tmp"
  mv "$out/riscv64-binfmt-P.tmp" "$out/riscv64-binfmt-P"
  # Under its own name it is an ordinary QEMU (ctest calls it directly with -L).
  ln -sf riscv64-binfmt-P "$out/qemu-riscv64"
  rm -rf "$tmp"
}

build_rootfs() {
  local dir partial
  dir=$(rvv_rootfs_dir)
  [ -f "$dir/.rvv-complete" ] && return 0
  # shellcheck disable=SC1091
  source "$RVV_REPO/scripts/lib/rootfs.conf"
  check_space "$RVV_CACHE" 6
  partial="$dir.partial"
  # An interrupted build leaves only $partial; it is never used, and is rebuilt from scratch.
  rm -rf "$partial"
  local pkgs
  pkgs=$(grep -v '^\s*#' "$RVV_REPO/scripts/rootfs-packages.txt" | tr -s ' \n' ',' | sed 's/^,//;s/,$//')
  rvv_log "building the riscv64 $RVV_ROOTFS_SUITE root filesystem in $dir (about 8 minutes, once)"
  local start=$SECONDS
  if ! rvv_in_ns "$(rvv_qemu_static 0)" mmdebstrap --mode=root --variant=apt --architectures=riscv64 \
      --aptopt='APT::Install-Recommends "false"' --aptopt='Acquire::Check-Valid-Until "false"' \
      --include="$pkgs" --skip=cleanup/apt/cache \
      "$RVV_ROOTFS_SUITE" "$partial" "$RVV_ROOTFS_MIRROR" >"$RVV_CACHE/rootfs-build.log" 2>&1; then
    tail -n 20 "$RVV_CACHE/rootfs-build.log" >&2
    rm -rf "$partial"
    rvv_die "building the root filesystem failed (full log: $RVV_CACHE/rootfs-build.log)"
  fi
  touch "$partial/.rvv-complete"
  mv "$partial" "$dir"
  rvv_log "root filesystem ready in $((SECONDS - start)) s"
  # Older root filesystems (other package lists) are dead weight; keep only this one.
  find "$RVV_CACHE" -maxdepth 1 -name 'rootfs-*' ! -name "$(basename "$dir")" ! -name '*.log' -exec rm -rf {} + 2>/dev/null || true
}

