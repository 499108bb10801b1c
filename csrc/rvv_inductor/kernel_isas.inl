// The ISA variants of the kernel table, strongest first: the dispatcher takes, for a
// weight format and call kind, the first variant the CPU supports that has a kernel for
// it (kernel_table.inl), else the portable scalar code.
//
//   RVV_ISA(name, march, path, required features)
//
// csrc/CMakeLists.txt reads this file: for each line it compiles csrc/src/kernel_set.inc
// once, with -march=<march>, into the kernel set `name` (one source, one TU per -march).
// `path` is the KernelPath / RVV_PATH_* it reports; features are rvv_cpu_features fields.
RVV_ISA(rvv_zvfbf, "rv64gcv_zvfbfmin_zvfbfwma", kRvvZvfbf, (has_v && has_zvfbfmin && has_zvfbfwma))
RVV_ISA(rvv_zvfh, "rv64gcv_zvfh", kRvvZvfh, (has_v && has_zvfh))
RVV_ISA(rvv, "rv64gcv", kRvv, (has_v))
