#include "common/yaml_config.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace profctl {
namespace {

// `text` itself, or its first `max_bytes` bytes and "... (N bytes)".
std::string Clip(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return absl::StrCat(text.substr(0, max_bytes), "... (", text.size(), " bytes)");
}

}  // namespace

std::string YamlConfig::Quote(absl::string_view value) {
  if (value.size() <= kMaxEchoedBytes) return absl::StrCat("\"", absl::CHexEscape(value), "\"");
  return absl::StrCat("\"", absl::CHexEscape(value.substr(0, kMaxEchoedBytes)), "\"... (",
                      value.size(), " bytes)");
}

absl::StatusOr<YamlConfig> YamlConfig::Parse(const std::string& text, std::string source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.msg));
    }
    return absl::InvalidArgumentError(absl::StrCat(source, ":", e.mark.line + 1,
                                                   ": not valid YAML at column ", e.mark.column + 1,
                                                   ": ", e.msg));
  }
  return YamlConfig(root, std::move(source));
}

absl::StatusOr<YamlConfig> YamlConfig::Load(const std::string& path) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string text, YamlConfig::ReadFile(path));
  return Parse(text, path);
}

absl::StatusOr<std::string> YamlConfig::ReadFile(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<std::string> text = profctl::ReadFile(path, max_bytes, "a config file may hold");
  if (text.status().code() == absl::StatusCode::kResourceExhausted) {
    return absl::InvalidArgumentError(
        absl::StrCat(text.status().message(), ": is it the right file?"));
  }
  return text;
}

absl::Status YamlConfig::Error(const YAML::Node& at, absl::string_view path,
                               absl::string_view problem) const {
  return absl::InvalidArgumentError(
      absl::StrCat(source_, ":", at.Mark().line + 1, ": ", Clip(path, kMaxMessageBytes),
                   path.empty() ? "" : ": ", Clip(problem, kMaxMessageBytes)));
}

absl::Status YamlConfig::RequireTopLevelMap() const {
  if (root_.IsMap()) return absl::OkStatus();
  return Error(root_, "(top level)", "expected a mapping of settings");
}

absl::Status YamlConfig::CheckKeys(const YAML::Node& map, absl::string_view path,
                                   absl::Span<const absl::string_view> known,
                                   UnknownKeyWording wording) const {
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    bool ok = false;
    for (absl::string_view k : known) ok = ok || k == key;
    if (ok) continue;
    const std::string list = absl::StrJoin(known, ", ");
    switch (wording) {
      case UnknownKeyWording::kUnknownKey:
        return Error(kv.first, Join(path, key), absl::StrCat("unknown key (known: ", list, ")"));
      case UnknownKeyWording::kNotASetting:
        return Error(kv.first, "",
                     absl::StrCat("'", Join(path, key), "' is not a setting (", list, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> YamlConfig::AsString(const YAML::Node& v, bool allow_empty) {
  if (!v.IsScalar() || (!allow_empty && v.Scalar().empty())) {
    return absl::InvalidArgumentError(allow_empty ? "expected a string"
                                                  : "expected a non-empty string");
  }
  return v.Scalar();
}

absl::StatusOr<int64_t> YamlConfig::AsInt(const YAML::Node& v, int64_t min, int64_t max) {
  if (!v.IsScalar()) return absl::InvalidArgumentError("expected an integer");
  int64_t n = 0;
  if (!absl::SimpleAtoi(v.Scalar(), &n)) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(v.Scalar()), " is not an integer"));
  }
  if (n < min || n > max) {
    return absl::InvalidArgumentError(absl::StrCat(n, " is not in ", min, "..", max));
  }
  return n;
}

absl::StatusOr<bool> YamlConfig::AsBool(const YAML::Node& v) {
  // yaml-cpp's reading: true/false, yes/no, on/off, y/n in lower, Title or UPPER case.
  if (!v.IsScalar()) return absl::InvalidArgumentError("expected true or false");
  bool b = false;
  if (!YAML::convert<bool>::decode(v, b)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(v.Scalar()), " is not a boolean (true or false)"));
  }
  return b;
}

absl::StatusOr<std::vector<std::string>> YamlConfig::AsStringList(const YAML::Node& v,
                                                                  bool allow_empty) {
  if (!v.IsSequence()) return absl::InvalidArgumentError("expected a list of strings");
  std::vector<std::string> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StatusOr<std::string> s = AsString(v[i], allow_empty);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("[", i, "]: ", s.status().message()));
    }
    out.push_back(*std::move(s));
  }
  return out;
}

absl::StatusOr<std::string> YamlConfig::String(const YAML::Node& v, absl::string_view path) const {
  absl::StatusOr<std::string> s = AsString(v, /*allow_empty=*/false);
  if (!s.ok()) return Error(v, path, s.status().message());
  return s;
}

absl::StatusOr<int64_t> YamlConfig::Int(const YAML::Node& v, absl::string_view path, int64_t min,
                                        int64_t max) const {
  absl::StatusOr<int64_t> n = AsInt(v, min, max);
  if (!n.ok()) return Error(v, path, n.status().message());
  return n;
}

absl::StatusOr<bool> YamlConfig::Bool(const YAML::Node& v, absl::string_view path) const {
  absl::StatusOr<bool> b = AsBool(v);
  if (!b.ok()) return Error(v, path, b.status().message());
  return b;
}

absl::StatusOr<std::vector<std::string>> YamlConfig::StringList(const YAML::Node& v,
                                                                absl::string_view path) const {
  if (!v.IsSequence()) return Error(v, path, "expected a list of strings");
  std::vector<std::string> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    PROFCTL_ASSIGN_OR_RETURN(std::string s, String(v[i], Index(path, i)));
    out.push_back(std::move(s));
  }
  return out;
}

std::string YamlConfig::Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string YamlConfig::Index(absl::string_view path, size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

}  // namespace profctl
