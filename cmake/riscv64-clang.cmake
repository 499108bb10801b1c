# Cross toolchain: clang-19 targeting riscv64 Linux, with Debian's riscv64 cross libc and
# libstdc++ (libc6-dev-riscv64-cross, libstdc++-12-dev-riscv64-cross) found by clang's
# GCC-installation detection under /usr/lib/gcc-cross. Test binaries run under QEMU user
# mode through CMAKE_CROSSCOMPILING_EMULATOR; tests/cpp picks the VLEN per test.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(RVV_CLANG_SUFFIX "-19" CACHE STRING "Suffix of the clang binaries (clang-19)")
set(CMAKE_C_COMPILER clang${RVV_CLANG_SUFFIX})
set(CMAKE_CXX_COMPILER clang++${RVV_CLANG_SUFFIX})
set(CMAKE_C_COMPILER_TARGET riscv64-linux-gnu)
set(CMAKE_CXX_COMPILER_TARGET riscv64-linux-gnu)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-fuse-ld=lld")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-fuse-ld=lld")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-fuse-ld=lld")
set(RVV_CROSS_SYSROOT /usr/riscv64-linux-gnu CACHE PATH "riscv64 libc for QEMU's -L")
set(CMAKE_FIND_ROOT_PATH ${RVV_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# QEMU_CPU (set per test) chooses V on/off and the VLEN; qemu-riscv64 is bookworm's 7.2.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-riscv64 -L ${RVV_CROSS_SYSROOT})
