#pragma once
// Printing what generate and demo measured, in one place so both read alike.
#include <ostream>
#include <string>

#include "decode_check.hpp"
#include "memory.hpp"

namespace yoco::cli {

// Five lines: weights, kv_cache, state, activations, total (bytes and decimal units).
void print_memory(std::ostream& os, const MemoryBreakdown& m, const std::string& indent);

// "max |diff| 1.2e-15, max RMS ratio 3.4e-16 (tolerance 1e-09): PASS"
std::string check_summary(const DecodeCheck& c);

}  // namespace yoco::cli
