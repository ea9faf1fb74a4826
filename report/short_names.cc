#include "report/short_names.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace profctl::report {
namespace {

constexpr absl::string_view kEllipsis = "...";

// The index of the bracket closing the one at `open`, or npos.
size_t Closing(absl::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' || c == '(' || c == '[') {
      ++depth;
    } else if (c == '>' || c == ')' || c == ']') {
      if (--depth == 0) return i;
    }
  }
  return absl::string_view::npos;
}

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// A '<' that opens a template argument list: right after a name (not "<<", " < ", "<b>" first).
bool OpensTemplate(absl::string_view s, size_t i) {
  if (s[i] != '<' || i == 0 || !IsIdentChar(s[i - 1])) return false;
  return i + 1 >= s.size() || s[i + 1] != '<';
}

// `s` with every template argument list nested `depth` or deeper collapsed to <...>.
std::string CollapseTemplates(absl::string_view s, int depth) {
  std::string out;
  int level = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (OpensTemplate(s, i)) {
      if (++level >= depth) {
        const size_t end = Closing(s, i);
        if (end == absl::string_view::npos) return absl::StrCat(out, s.substr(i));
        absl::StrAppend(&out, "<", kEllipsis, ">");
        --level;
        i = end;
        continue;
      }
    } else if (c == '>' && level > 0) {
      --level;
    }
    out.push_back(c);
  }
  return out;
}

// `s` without `identifier::` and `(anonymous namespace)::` qualifiers.
std::string DropQualifiers(absl::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (absl::StartsWith(s.substr(i), "(anonymous namespace)::")) {
      i += absl::string_view("(anonymous namespace)::").size();
      continue;
    }
    if (IsIdentChar(s[i]) && (i == 0 || !IsIdentChar(s[i - 1]))) {
      size_t j = i;
      while (j < s.size() && IsIdentChar(s[j])) ++j;
      if (s.substr(j, 2) == "::") {
        i = j + 2;
        continue;
      }
      out.append(s.data() + i, j - i);
      i = j;
      continue;
    }
    out.push_back(s[i++]);
  }
  return out;
}

// `s` in at most `room` characters keeping [from, to) visible: the start, "...", the part where
// a group of names differs, "...", the end.
std::string ElideAround(absl::string_view s, size_t from, size_t to, size_t room) {
  if (s.size() <= room) return std::string(s);
  if (to - from + 10 >= room) to = from + std::max<size_t>(1, room - 10);
  const size_t keep = to - from;
  const size_t rest = room > keep + 6 ? room - keep - 6 : 0;
  const size_t head = std::min(from, (rest + 1) / 2);
  const size_t tail = rest - std::min(rest, head);
  std::string out =
      from <= head ? std::string(s.substr(0, from)) : absl::StrCat(s.substr(0, head), kEllipsis);
  absl::StrAppend(&out, s.substr(from, keep));
  const size_t end_at = s.size() - std::min(s.size(), tail);
  if (to >= end_at) {
    absl::StrAppend(&out, s.substr(to));
  } else {
    absl::StrAppend(&out, kEllipsis, s.substr(std::max(to, end_at)));
  }
  return out;
}

}  // namespace

std::string ElideMiddle(absl::string_view s, size_t room) {
  if (s.size() <= room) return std::string(s);
  room = std::max<size_t>(room, kEllipsis.size() + 2);
  const size_t head = (room - kEllipsis.size() + 1) / 2;
  const size_t tail = room - kEllipsis.size() - head;
  return absl::StrCat(s.substr(0, head), kEllipsis, s.substr(s.size() - tail));
}

std::vector<std::string> ShortForms(absl::string_view name) {
  std::vector<std::string> forms = {std::string(name)};
  const auto add = [&forms](std::string f) {
    if (!f.empty() && f != forms.back()) forms.push_back(std::move(f));
  };
  absl::string_view s = name;
  for (absl::string_view prefix : {"void ", "auto ", "static ", "__global__ "}) {
    if (absl::ConsumePrefix(&s, prefix)) break;
  }
  // The parameter list: the trailing (...) that balances.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size() - 1; i > 0; --i) {
      if (s[i] == ')') {
        ++depth;
      } else if (s[i] == '(' && --depth == 0) {
        if (s[i - 1] != ' ') s = s.substr(0, i);
        break;
      }
    }
  }
  add(std::string(s));
  size_t open = 0;
  while (open < s.size() && !OpensTemplate(s, open)) ++open;
  if (open == s.size()) return forms;
  add(CollapseTemplates(s, 3));
  const std::string t = CollapseTemplates(s, 2);
  add(t);
  size_t t_open = 0;
  while (t_open < t.size() && !OpensTemplate(t, t_open)) ++t_open;
  const std::vector<absl::string_view> outer =
      absl::StrSplit(absl::string_view(t).substr(0, t_open), "::");
  const size_t keep = std::min<size_t>(2, outer.size());
  const std::string outer_short =
      absl::StrJoin(outer.end() - static_cast<std::ptrdiff_t>(keep), outer.end(), "::");
  add(absl::StrCat(outer_short, DropQualifiers(absl::string_view(t).substr(t_open))));
  add(absl::StrCat(outer.back(), "<", kEllipsis, ">"));
  return forms;
}

std::vector<std::string> DistinctShortNames(const std::vector<std::string>& names, size_t room) {
  room = std::max<size_t>(room, 12);
  const size_t n = names.size();
  std::vector<std::vector<std::string>> forms(n);
  std::vector<size_t> level(n);
  for (size_t i = 0; i < n; ++i) {
    forms[i] = ShortForms(names[i]);
    level[i] = forms[i].size() - 1;
    for (size_t k = 0; k < forms[i].size(); ++k) {
      if (forms[i][k].size() <= room) {
        level[i] = k;
        break;
      }
    }
  }
  const auto shown = [&](size_t i) { return ElideMiddle(forms[i][level[i]], room); };
  std::vector<std::string> text(n);
  for (size_t i = 0; i < n; ++i) text[i] = shown(i);
  for (int round = 0; round < 8; ++round) {
    std::map<std::string, std::vector<size_t>> groups;
    for (size_t i = 0; i < n; ++i) groups[text[i]].push_back(i);
    bool clash = false;
    for (const auto& entry : groups) {
      const std::vector<size_t>& group = entry.second;
      std::set<std::string> distinct;
      for (const size_t i : group) distinct.insert(names[i]);
      if (group.size() < 2 || distinct.size() < 2) continue;
      clash = true;
      for (const size_t i : group) {
        if (level[i] > 0) --level[i];
        text[i] = shown(i);
      }
      const bool same = std::all_of(group.begin(), group.end(),
                                    [&](size_t i) { return text[i] == text[group[0]]; });
      if (!same) continue;
      // Still alike: each shown where the group's forms differ.
      std::vector<const std::string*> fs;
      fs.reserve(group.size());
      for (const size_t i : group) fs.push_back(&forms[i][level[i]]);
      size_t shortest = fs[0]->size();
      for (const std::string* f : fs) shortest = std::min(shortest, f->size());
      size_t pre = 0;
      while (pre < shortest && std::all_of(fs.begin(), fs.end(), [&](const std::string* f) {
               return (*f)[pre] == (*fs[0])[pre];
             })) {
        ++pre;
      }
      size_t suf = 0;
      while (suf < shortest - pre && std::all_of(fs.begin(), fs.end(), [&](const std::string* f) {
               return (*f)[f->size() - 1 - suf] == (*fs[0])[fs[0]->size() - 1 - suf];
             })) {
        ++suf;
      }
      for (size_t k = 0; k < group.size(); ++k) {
        text[group[k]] = ElideAround(*fs[k], pre, fs[k]->size() - suf, room);
      }
    }
    if (!clash) break;
  }
  // Texts that still clash (rarely): numbered by name, the first name's bare. Equal names keep
  // equal texts.
  std::map<std::string, std::map<std::string, size_t>> numbers;
  std::vector<std::string> out(n);
  for (size_t i = 0; i < n; ++i) {
    std::map<std::string, size_t>& by_name = numbers[text[i]];
    const size_t k = by_name.emplace(names[i], by_name.size() + 1).first->second;
    out[i] = k == 1 ? text[i] : absl::StrCat(text[i], " (", k, ")");
  }
  return out;
}

}  // namespace profctl::report
