// lane_math.h compiled for the base ISA (and natively on x86).
#include "attention_entries.h"
#include "lane_entries.h"

void exp_entry_lanes(const float* x, float* y, size_t n) { lanes_exp(x, y, n); }
void bf16_widen_entry_lanes(const uint16_t* h, float* f, size_t n) { lanes_widen(h, f, n); }
void bf16_narrow_entry_lanes(const float* f, uint16_t* h, size_t n) { lanes_narrow(f, h, n); }
