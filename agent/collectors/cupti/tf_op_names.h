// tf_op, the framework op XProf's op tools file a kernel, copy or memset under:
// `<scope>/<Name>:<Type>`, which tf_op_utils' ParseTfOpFullname reads as a TensorFlow op (name
// [A-Za-z0-9.][A-Za-z0-9_./>-]*, type [A-Z_][A-Za-z0-9_]*). Used by BuildCuptiXSpace
// (cupti_xspace.h, OPS) with the scopes xspace::kNvtxOpScope and xspace::kApiOpScope.
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_TF_OP_NAMES_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_TF_OP_NAMES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace profctl::agent::cupti {

// Device work whose launching API call was not recorded.
inline constexpr absl::string_view kUnrecordedLaunchOp = "cuda/unrecorded_launch:UnrecordedLaunch";

// `s` as one component of an op name: each run of characters outside [A-Za-z0-9_.>-] becomes
// one '_' between the kept ones ("aten::mm, seq = 5" -> "aten_mm_seq_5"); "unnamed" if none.
std::string OpNamePart(absl::string_view s);

// `s` as an op type: its alphanumeric words, each capitalized ("forward_backward" ->
// "ForwardBackward"), '_' first when that would start with a digit; "Unnamed" if none.
std::string OpType(absl::string_view s);

// "<scope>/<OpNamePart(name)>:<OpType(name)>".
std::string TfOp(absl::string_view scope, absl::string_view name);

// CUPTI names API calls with their version ("cudaLaunchKernel_v7000"): the call without it.
absl::string_view ApiBaseName(absl::string_view name);

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_TF_OP_NAMES_H_
