// The weight-format traits of weight_formats.inl as C++: lookup by code, and the C ABI
// struct rvv_weight_format that Python reads them through. Plain data and constexpr
// lookups, safe in translation units of any ISA.
#pragma once
#include <cstdint>
#include <cstring>

#include "rvv_inductor/config.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

struct WeightFormatTraits {
  DType code;
  const char* name;
  const char* gguf;
  int32_t bits, block_rows, super_rows, scales, offset, implicit_zero, record_bytes, file_block_bytes, configurable,
      lookup;
};

#define RVV_WEIGHT_FORMAT(name, code, gguf, bits, blk, sup, sc, off, z, rec, file, cfg, lut) \
  WeightFormatTraits{DType(code), #name, gguf, bits, blk, sup, sc, off, z, rec, file, cfg, lut},
inline constexpr WeightFormatTraits kWeightFormats[] = {
#include "rvv_inductor/weight_formats.inl"
};
#undef RVV_WEIGHT_FORMAT
inline constexpr int kNumWeightFormats = int(sizeof(kWeightFormats) / sizeof(kWeightFormats[0]));

// The traits of a format code, or null for a code that is not a weight format.
inline constexpr const WeightFormatTraits* weight_format(DType code) {
  for (const WeightFormatTraits& t : kWeightFormats)
    if (t.code == code) return &t;
  return nullptr;
}

// A fixed-record block format (Q4_1, Q4_K, ...): rows per record and bytes per column fixed
// by the format, not by the layout (block_quant.h).
inline constexpr bool is_block_format(DType code) {
  const WeightFormatTraits* t = weight_format(code);
  return t && t->record_bytes > 0;
}

// Fills the C struct for rvv_weight_format_info; false for an unknown code.
inline bool fill_weight_format(DType code, rvv_weight_format* out) {
  const WeightFormatTraits* t = weight_format(code);
  if (!t || !out) return false;
  rvv_weight_format f{};
  f.version = RVV_WEIGHT_FORMAT_VERSION;
  f.code = int32_t(t->code);
  std::strncpy(f.name, t->name, sizeof(f.name) - 1);
  std::strncpy(f.gguf_type, t->gguf, sizeof(f.gguf_type) - 1);
  f.bits = t->bits;
  f.block_rows = t->block_rows;
  f.super_rows = t->super_rows;
  f.scales = t->scales;
  f.offset = t->offset;
  f.implicit_zero = t->implicit_zero;
  f.record_bytes = t->record_bytes;
  f.file_block_bytes = t->file_block_bytes;
  f.configurable = t->configurable;
  f.lookup = t->lookup;
  *out = f;
  return true;
}

RVV_INDUCTOR_END_NAMESPACE
