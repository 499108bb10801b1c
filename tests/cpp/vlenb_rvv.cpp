// Compiled with V enabled; called only once detection has confirmed V.
#include <riscv_vector.h>
#include <cstddef>

size_t rvv_test_vlenb_by_intrinsic() { return __riscv_vsetvlmax_e8m1(); }
