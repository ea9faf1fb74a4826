// One reader for profctl's YAML config files: the agent's settings (agent/agent_options.cc) and
// the coordinator's schedules (coordinator/schedule/schedule_config.cc).
//
// A YamlConfig is one parsed document and the name of its source. Every error it makes is
// INVALID_ARGUMENT and names the source, the line and the key path, e.g.
//   coordinator.yaml:9: schedules[1].retries: 21 is not in 0..20
// yaml-cpp's exceptions never leave this module: its getters return Statuses.
#ifndef PROFCTL_COMMON_YAML_CONFIG_H_
#define PROFCTL_COMMON_YAML_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "yaml-cpp/yaml.h"

namespace profctl {

class YamlConfig {
 public:
  // How CheckKeys words a key that is not in its list.
  enum class UnknownKeyWording {
    kUnknownKey,   // "<source>:<line>: <path>.<key>: unknown key (known: a, b)"
    kNotASetting,  // "<source>:<line>: '<key>' is not a setting (a, b)"
  };

  // Parses `text`; `source` (the file's name) starts every message. Text that is not YAML is
  // "<source>:<line>: not valid YAML at column <column>: <what yaml-cpp says>".
  static absl::StatusOr<YamlConfig> Parse(const std::string& text, std::string source);
  // Reads the file at `path` (its errors name it) and parses it with `path` as the source.
  static absl::StatusOr<YamlConfig> Load(const std::string& path);

  // A config file's text (a regular file only: common/file_util.h ReadFile), refused before it
  // is read (fstat), or as soon as the bytes read pass it, when it holds more than `max_bytes`:
  // INVALID_ARGUMENT "<path>: N bytes, more than a config file may hold (M bytes): is it the right
  // file?". yaml-cpp holds about 5 times a document in nodes and parses a 500 MB file for a minute
  // before any value can be checked, and a config is a few KB (a thousand schedules are ~300 KB):
  // kMaxFileBytes is 4 MiB. Every YAML file profctl reads comes through here (Load, the agent's
  // --config, `serve --config`).
  static constexpr uint64_t kMaxFileBytes = uint64_t{4} << 20;
  static absl::StatusOr<std::string> ReadFile(const std::string& path,
                                              uint64_t max_bytes = kMaxFileBytes);

  // The document; null for an empty file.
  const YAML::Node& root() const { return root_; }
  const std::string& source() const { return source_; }

  // "<source>:<line of `at`>: <path>: <problem>", or without "<path>: " when `path` is empty.
  // A path or problem longer than kMaxMessageBytes (a huge unknown key) is clipped the same way.
  absl::Status Error(const YAML::Node& at, absl::string_view path, absl::string_view problem) const;

  // The document must be a mapping: else "<source>:<line>: (top level): expected a mapping of
  // settings". An empty document is not one either; check root().IsNull() first to allow it.
  absl::Status RequireTopLevelMap() const;

  // Every key of the mapping `map` (named `path`, empty at the top level) must be in `known`;
  // the error names the first other one, where it is, and lists `known` in order.
  absl::Status CheckKeys(const YAML::Node& map, absl::string_view path,
                         absl::Span<const absl::string_view> known,
                         UnknownKeyWording wording = UnknownKeyWording::kUnknownKey) const;

  // Typed scalars. Errors name the value's line and `path`: "expected a non-empty string",
  // "expected an integer" (not a scalar), "\"x\" is not an integer", "21 is not in 0..20",
  // "\"maybe\" is not a boolean (true or false)", "expected a list of strings".
  absl::StatusOr<std::string> String(const YAML::Node& v, absl::string_view path) const;
  absl::StatusOr<int64_t> Int(const YAML::Node& v, absl::string_view path, int64_t min,
                              int64_t max) const;
  absl::StatusOr<bool> Bool(const YAML::Node& v, absl::string_view path) const;
  // A sequence of non-empty strings; element i's errors name "<path>[i]".
  absl::StatusOr<std::vector<std::string>> StringList(const YAML::Node& v,
                                                      absl::string_view path) const;

  // The same conversions, with errors that carry only the problem (no source, line or path),
  // for a file that words its messages itself. AsString allows "" when `allow_empty`.
  static absl::StatusOr<std::string> AsString(const YAML::Node& v, bool allow_empty);
  static absl::StatusOr<int64_t> AsInt(const YAML::Node& v, int64_t min, int64_t max);
  static absl::StatusOr<bool> AsBool(const YAML::Node& v);
  static absl::StatusOr<std::vector<std::string>> AsStringList(const YAML::Node& v,
                                                               bool allow_empty);

  // A value as an error message echoes it: in double quotes, C-escaped, and clipped to its
  // first kMaxEchoedBytes bytes followed by "... (N bytes)" when longer, so a 50 MB value makes
  // a short message: Quote("1x") is "\"1x\"".
  static constexpr size_t kMaxEchoedBytes = 80;
  static std::string Quote(absl::string_view value);
  static constexpr size_t kMaxMessageBytes = 1024;

  // Key paths: Join("schedules[1]", "retries") is "schedules[1].retries" (just the key when
  // `path` is empty); Index("schedules", 1) is "schedules[1]".
  static std::string Join(absl::string_view path, absl::string_view key);
  static std::string Index(absl::string_view path, size_t i);

 private:
  // YAML::Node is a handle: copying it shares the document.
  YamlConfig(const YAML::Node& root, std::string source)
      : root_(root), source_(std::move(source)) {}

  YAML::Node root_;
  std::string source_;
};

}  // namespace profctl

#endif  // PROFCTL_COMMON_YAML_CONFIG_H_
