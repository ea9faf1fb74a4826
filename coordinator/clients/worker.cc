#include "coordinator/clients/worker.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

namespace profctl::coordinator {
namespace {
constexpr absl::string_view kTslScheme = "grpc://";
}  // namespace

std::string WorkerAddress::target() const {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                      : absl::StrCat(host, ":", port);
}

std::string WorkerAddress::channel_target() const {
  in6_addr v6{};
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return absl::StrCat("ipv4:", target());
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return absl::StrCat("ipv6:", target());
  return target();
}

std::string WorkerAddress::file_stem() const {
  return BoundedFileStem(absl::StrReplaceAll(target(), {{":", "_"}, {"[", ""}, {"]", ""}}));
}

absl::StatusOr<WorkerAddress> ParseWorker(const std::string& text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("worker '", text, "': ", why));
  };
  WorkerAddress w;
  w.address = text;
  absl::string_view spec = text;
  if (absl::ConsumePrefix(&spec, kTslScheme)) w.protocol = WorkerAddress::Protocol::kTsl;
  if (absl::StrContains(spec, "://")) {
    return bad(absl::StrCat("unknown URL scheme; give host:port of a profctl-agent or ", kTslScheme,
                            "host:port of a TensorFlow/JAX profiler server"));
  }
  absl::string_view port_text;
  if (absl::StartsWith(spec, "[")) {
    const size_t close = spec.find(']');
    if (close == absl::string_view::npos) return bad("IPv6 address is missing its ']'");
    w.host = std::string(spec.substr(1, close - 1));
    absl::string_view rest = spec.substr(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) return bad("expected :port after ']'");
    port_text = rest;
    if (w.host.empty() || !std::all_of(w.host.begin(), w.host.end(), [](char c) {
          return absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
        })) {
      return bad("not a valid IPv6 address between [ and ]");
    }
  } else {
    const size_t colon = spec.rfind(':');
    if (colon == absl::string_view::npos) return bad("missing :port (expected host:port)");
    w.host = std::string(spec.substr(0, colon));
    port_text = spec.substr(colon + 1);
    if (w.host.empty()) return bad("missing host before ':'");
    if (absl::StrContains(w.host, ':')) {
      return bad("IPv6 addresses must be written as [addr]:port");
    }
    if (w.host.size() > 253 || !std::all_of(w.host.begin(), w.host.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                 c == '_';
        })) {
      return bad("host name may only contain letters, digits, '.', '-' and '_'");
    }
  }
  int port = 0;
  if (port_text.empty() ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return bad(absl::StrCat("port '", port_text, "' is not a number in 1..65535"));
  }
  w.port = port;
  return w;
}

absl::StatusOr<std::vector<WorkerAddress>> ParseWorkers(const std::vector<std::string>& entries) {
  if (entries.empty()) return absl::InvalidArgumentError("no workers given");
  std::vector<WorkerAddress> out;
  out.reserve(entries.size());
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string entry(absl::StripAsciiWhitespace(entries[i]));
    if (entry.empty())
      return absl::InvalidArgumentError(absl::StrCat("worker #", i + 1, " is empty"));
    absl::StatusOr<WorkerAddress> w = ParseWorker(entry);
    if (!w.ok()) return w.status();
    if (!seen.insert(w->target()).second) {
      return absl::InvalidArgumentError(absl::StrCat("worker '", entry, "' is listed twice"));
    }
    out.push_back(*std::move(w));
  }
  return out;
}

absl::StatusOr<std::vector<WorkerAddress>> ParseWorkerList(const std::string& text) {
  std::vector<std::string> entries;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    if (absl::StripAsciiWhitespace(item).empty()) {
      return absl::InvalidArgumentError(
          text.empty() ? "no workers given"
                       : absl::StrCat("empty entry in worker list '", text, "'"));
    }
    entries.emplace_back(item);
  }
  return ParseWorkers(entries);
}

absl::StatusOr<std::vector<WorkerAddress>> ParseWorkerFile(absl::string_view text,
                                                           absl::string_view source) {
  std::vector<WorkerAddress> out;
  absl::flat_hash_map<std::string, size_t> first_line;  // target -> line it was first named on
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    for (absl::string_view item : absl::StrSplit(line, absl::ByAnyChar(", \t\r"))) {
      if (item.empty()) continue;
      absl::StatusOr<WorkerAddress> w = ParseWorker(std::string(item));
      if (!w.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_number, ": ", w.status().message()));
      }
      auto [it, inserted] = first_line.try_emplace(w->target(), line_number);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": worker '", item,
                                                       "' is listed twice (first on line ",
                                                       it->second, ")"));
      }
      out.push_back(*std::move(w));
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no workers (only blank lines and comments)"));
  }
  return out;
}

}  // namespace profctl::coordinator
