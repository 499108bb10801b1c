// Keeps the C ABI of the static runtime alive in the shared library Python loads.
#include "rvv_inductor/cpu_features.h"

extern "C" {
__attribute__((visibility("default"), used)) void* const rvv_inductor_exports[] = {
    reinterpret_cast<void*>(&rvv_detect_cpu), reinterpret_cast<void*>(&rvv_effective_cpu),
    reinterpret_cast<void*>(&rvv_resolve_cpu), reinterpret_cast<void*>(&rvv_march_string)};
}
