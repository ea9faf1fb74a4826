#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "analysis/tools/tool_internal.h"
#include "analysis/tools/tools.h"

namespace profctl::analysis {

bool ContainsAnyIgnoreCase(absl::string_view s, std::initializer_list<absl::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](absl::string_view p) { return ContainsIgnoreCase(s, p); });
}

bool UsesTensorCores(absl::string_view k) {
  return ContainsAnyIgnoreCase(
      k, {"hmma", "imma", "gmma", "xmma", "wmma", "tensorop", "tensor_op", "h884", "h1688",
          "h16816", "s1688", "s16816", "i8816", "i16832", "flash_fwd", "flash_bwd", "fmha"});
}

bool Is16BitKernel(absl::string_view k) {
  return ContainsAnyIgnoreCase(
      k, {"fp16", "bf16", "f16", "half", "bfloat16", "hmma", "h884", "h1688", "h16816"});
}

bool IsMatmulOrConv(absl::string_view name) {
  if (ContainsAnyIgnoreCase(name, {"matmul", "gemm", "conv", "einsum", "linear", "aten::mm",
                                   "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm"})) {
    return true;
  }
  // HLO `dot` / `dot.3` / `dot_general`, TF `Dot`.
  absl::string_view n = name;
  const size_t slash = n.rfind('/');
  if (slash != absl::string_view::npos) n = n.substr(slash + 1);
  return absl::StartsWithIgnoreCase(n, "dot");
}

namespace {

// The innermost dimensions of every input in `Input Dims` ("[[64, 128], [128, 256], []]"):
// false when some input with >= 2 dims has a last or second-last dimension not a multiple of 8.
bool DimsMultipleOf8(absl::string_view dims) {
  // Parse nested arrays of integers, tracking the current innermost list.
  std::vector<int64_t> current;
  int depth = 0;
  bool ok = true;
  std::string number;
  const auto flush_number = [&] {
    if (number.empty()) return;
    int64_t v = 0;
    if (absl::SimpleAtoi(number, &v)) current.push_back(v);
    number.clear();
  };
  for (const char c : dims) {
    if (c == '[') {
      ++depth;
      current.clear();
    } else if (c == ']') {
      flush_number();
      if (current.size() >= 2) {
        const int64_t a = current[current.size() - 1];
        const int64_t b = current[current.size() - 2];
        if (a % 8 != 0 || b % 8 != 0) ok = false;
      }
      current.clear();
      --depth;
    } else if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      number.push_back(c);
    } else {
      flush_number();
    }
  }
  return ok;
}

}  // namespace

bool TensorCoreEligible(absl::string_view kernel_name, absl::string_view op_name,
                        absl::string_view op_type, absl::string_view input_types,
                        absl::string_view input_dims) {
  if (UsesTensorCores(kernel_name)) return true;
  if (!IsMatmulOrConv(op_name) && !IsMatmulOrConv(op_type) && !IsMatmulOrConv(kernel_name)) {
    return false;
  }
  bool sixteen = Is16BitKernel(kernel_name);
  if (!input_types.empty()) {
    sixteen = ContainsAnyIgnoreCase(input_types, {"half", "bfloat16", "float16", "bf16", "fp16"});
  }
  if (!sixteen) return false;
  return input_dims.empty() || DimsMultipleOf8(input_dims);
}

}  // namespace profctl::analysis
