// The vector extensions beyond V that the kernels can use, one line each: the
// rvv_cpu_features field and its ISA-string name (the RVV_INDUCTOR_CPU override token, the
// -march suffix, the /proc/cpuinfo token). The dispatcher's requirement predicates
// (kernel_isas.inl), the feature intersection and the per-variant feature sets, the
// override parser and the -march string all come from this list: a new extension is its
// field in cpu_features.h plus one line here (and its detection in cpu_features.cpp).
//
//          field          name
RVV_CPU_EXT(has_zvfh,      "zvfh")
RVV_CPU_EXT(has_zvfbfmin,  "zvfbfmin")
RVV_CPU_EXT(has_zvfbfwma,  "zvfbfwma")
