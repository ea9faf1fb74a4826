#include "common/flags.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace profctl {

absl::Status ParseInt64(const std::string& text, const std::string& what, int64_t* out) {
  if (!absl::SimpleAtoi(text, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a whole number, got '", text, "'"));
  }
  return absl::OkStatus();
}

namespace {

// Optimal string alignment distance: Levenshtein plus swaps of adjacent characters.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestName(const std::string& typed, const std::vector<std::string>& known) {
  constexpr size_t kMaxEdits = 2;
  std::string best;
  size_t best_distance = kMaxEdits + 1;
  for (const std::string& k : known) {
    const size_t d = EditDistance(typed, k);
    if (d < best_distance && 2 * d < typed.size()) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

FlagSet::FlagSet(std::string command, std::string synopsis)
    : command_(std::move(command)), synopsis_(std::move(synopsis)) {}

void FlagSet::Add(Flag flag) { flags_.push_back(std::move(flag)); }

FlagSet::Flag* FlagSet::Find(const std::string& name) {
  for (Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

void FlagSet::String(const std::string& name, std::string* value, const std::string& help) {
  Add({.name = name,
       .help = help,
       .default_text = value->empty() ? "" : absl::StrCat("\"", *value, "\""),
       .parse = [value](const std::string& v) {
         *value = v;
         return absl::OkStatus();
       }});
}

void FlagSet::RejectEmpty(const std::string& name) {
  if (Flag* f = Find(name)) f->non_empty = true;
}

void FlagSet::Int64(const std::string& name, int64_t* value, const std::string& help) {
  Add({.name = name,
       .help = help,
       .default_text = absl::StrCat(*value),
       .parse = [value, name](const std::string& v) {
         return ParseInt64(v, absl::StrCat("--", name), value);
       }});
}

void FlagSet::Bool(const std::string& name, bool* value, const std::string& help) {
  Add({.name = name,
       .help = help,
       .default_text = *value ? "true" : "false",
       .is_bool = true,
       .parse = [value, name](const std::string& v) {
         if (v == "true" || v == "1") {
           *value = true;
         } else if (v == "false" || v == "0") {
           *value = false;
         } else {
           return absl::InvalidArgumentError(
               absl::StrCat("--", name, ": expected true or false, got '", v, "'"));
         }
         return absl::OkStatus();
       }});
}

void FlagSet::Require(const std::string& name) {
  if (Flag* f = Find(name)) f->required = true;
}

std::string FlagSet::DidYouMean(const std::string& name) const {
  std::vector<std::string> known;
  known.reserve(flags_.size() + 1);
  for (const Flag& f : flags_) known.push_back(f.name);
  known.emplace_back("help");
  const std::string closest = ClosestName(name, known);
  return closest.empty() ? "" : absl::StrCat(" (did you mean --", closest, "?)");
}

bool FlagSet::WasSet(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return f.set;
  }
  return false;
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional_.insert(positional_.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      return absl::OkStatus();
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      if (!arg.empty() && arg[0] == '-') {
        return absl::InvalidArgumentError(
            absl::StrCat("bad flag '", arg, "' (flags look like --name=value)"));
      }
      positional_.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    Flag* flag = Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, DidYouMean(name), " (see --help)"));
    }
    if (flag->set) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " given more than once"));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (flag->is_bool) {
      value = "true";
    } else if (i + 1 < args.size()) {
      value = args[++i];
      // `--logdir --session=x` took the next flag as the log dir.
      if (value.size() > 2 && value.compare(0, 2, "--") == 0) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name,
                                                       " needs a value, got the flag '", value,
                                                       "' (write --", name, "=VALUE)"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
    }
    flag->set = true;
    // `--session=` would silently mean the default; say so instead.
    if (flag->non_empty && value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " is empty; leave the flag out to get its default"));
    }
    if (absl::Status s = flag->parse(value); !s.ok()) {
      return s;
    }
  }
  for (const Flag& f : flags_) {
    if (f.required && !f.set) {
      return absl::InvalidArgumentError(absl::StrCat("--", f.name, " is required"));
    }
  }
  return absl::OkStatus();
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat("usage: ", command_, " ", synopsis_, "\n\nflags:\n");
  size_t width = 0;
  for (const Flag& f : flags_) width = std::max(width, f.name.size());
  for (const Flag& f : flags_) {
    absl::StrAppendFormat(&out, "  --%-*s  %s", static_cast<int>(width), f.name, f.help);
    if (f.required) {
      absl::StrAppend(&out, " (required)");
    } else if (!f.default_text.empty()) {
      absl::StrAppend(&out, " (default ", f.default_text, ")");
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppendFormat(&out, "  --%-*s  %s\n", static_cast<int>(width), "help", "show this help");
  return out;
}

}  // namespace profctl
