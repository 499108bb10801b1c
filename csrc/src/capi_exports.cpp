// Keeps the C ABI of the static runtime alive in the shared library Python loads: the
// linker only pulls archive members something references.
#include "rvv_inductor/capi.h"
#include "rvv_inductor/cpu_features.h"

// `extern` because a namespace-scope const would otherwise have internal linkage.
extern "C" {
extern __attribute__((visibility("default"))) void* const rvv_inductor_exports[];
__attribute__((used)) void* const rvv_inductor_exports[] = {
    reinterpret_cast<void*>(&rvv_detect_cpu),  reinterpret_cast<void*>(&rvv_effective_cpu),
    reinterpret_cast<void*>(&rvv_resolve_cpu), reinterpret_cast<void*>(&rvv_march_string),
    reinterpret_cast<void*>(&rvv_last_error),  reinterpret_cast<void*>(&rvv_linear_bf16_packed),
    reinterpret_cast<void*>(&rvv_count_region)};
}
