// A small command-line flag parser: --name=value or --name value, booleans as --name or
// --name=true|false, "--" ends flags. Values are parsed into caller-owned variables; every error
// names the flag and the bad value (callers prefix the program name). No globals: each command
// builds its own FlagSet.
#ifndef PROFCTL_COMMON_FLAGS_H_
#define PROFCTL_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace profctl {

// The name in `known` closest to `typed` by edit distance (insertions, deletions, substitutions,
// and swaps of neighbours count 1), when it is close enough to be a typo: at most 2 edits and
// fewer than half of typed's length. Empty when none is. For "did you mean" hints.
std::string ClosestName(const std::string& typed, const std::vector<std::string>& known);

class FlagSet {
 public:
  // `command` names the program in errors and help, e.g. "profctl capture".
  explicit FlagSet(std::string command, std::string synopsis = "");

  void String(const std::string& name, std::string* value, const std::string& help);
  void Int64(const std::string& name, int64_t* value, const std::string& help);
  void Bool(const std::string& name, bool* value, const std::string& help);
  // Marks a flag that must be given.
  void Require(const std::string& name);
  // An explicitly empty value (`--session=`) is an error naming the flag, not the default.
  void RejectEmpty(const std::string& name);

  // Parses args (not including the program/subcommand name). Positional arguments are collected
  // into positional(). --help / -h sets help_requested() and stops parsing.
  absl::Status Parse(const std::vector<std::string>& args);

  bool help_requested() const { return help_requested_; }
  const std::vector<std::string>& positional() const { return positional_; }
  // Whether a flag appeared on the command line.
  bool WasSet(const std::string& name) const;
  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    bool required = false;
    bool non_empty = false;
    bool set = false;
    std::function<absl::Status(const std::string&)> parse;
  };
  Flag* Find(const std::string& name);
  void Add(Flag flag);
  // " (did you mean --NAME?)" for an unknown flag close to a known one, else "".
  std::string DidYouMean(const std::string& name) const;

  std::string command_;
  std::string synopsis_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
};

// Parses a whole decimal int64; the error names `what`.
absl::Status ParseInt64(const std::string& text, const std::string& what, int64_t* out);

}  // namespace profctl

#endif  // PROFCTL_COMMON_FLAGS_H_
