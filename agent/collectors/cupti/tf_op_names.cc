#include "agent/collectors/cupti/tf_op_names.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace profctl::agent::cupti {

// `s` as one component of an op name: each run of characters outside [A-Za-z0-9_.>-] becomes
// one '_' between the kept ones ("aten::mm, seq = 5" -> "aten_mm_seq_5"); "unnamed" if none.
std::string OpNamePart(absl::string_view s) {
  std::string out;
  bool separate = false;
  for (const char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '>' ||
        c == '-') {
      if (separate && !out.empty()) out.push_back('_');
      separate = false;
      out.push_back(c);
    } else {
      separate = true;
    }
  }
  return out.empty() ? "unnamed" : out;
}

// `s` as an op type: its alphanumeric words, each capitalized ("forward_backward" ->
// "ForwardBackward"), '_' first when that would start with a digit; "Unnamed" if none.
std::string OpType(absl::string_view s) {
  std::string out;
  bool word_start = true;
  for (const char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      word_start = true;
      continue;
    }
    out.push_back(word_start ? absl::ascii_toupper(static_cast<unsigned char>(c)) : c);
    word_start = false;
  }
  if (out.empty()) return "Unnamed";
  // A new string rather than out.insert(0, "_"): g++ 12 -O3 reports a false -Werror=restrict
  // on that insert.
  if (absl::ascii_isdigit(static_cast<unsigned char>(out[0]))) return absl::StrCat("_", out);
  return out;
}

std::string TfOp(absl::string_view scope, absl::string_view name) {
  return absl::StrCat(scope, "/", OpNamePart(name), ":", OpType(name));
}

// CUPTI names API calls with their version ("cudaLaunchKernel_v7000"): the call without it.
absl::string_view ApiBaseName(absl::string_view name) {
  const size_t v = name.rfind("_v");
  if (v == absl::string_view::npos || v == 0 || v + 2 == name.size()) return name;
  const absl::string_view digits = name.substr(v + 2);
  return std::all_of(digits.begin(), digits.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })
             ? name.substr(0, v)
             : name;
}

}  // namespace profctl::agent::cupti
