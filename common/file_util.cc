#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace profctl {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  std::string tmp = absl::StrCat(path, ".tmp.XXXXXX");
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return ErrnoError("cannot create temporary file for", path, errno);
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return ErrnoError("cannot write", tmp, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fchmod(fd, 0644) != 0 || fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return ErrnoError("cannot sync", tmp, err);
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoError("cannot close", tmp, err);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoError("cannot rename temporary file onto", path, err);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  // Sized once from fstat for regular files (no doubling copies of big traces); files that grow
  // meanwhile, and pipes or /proc files (size 0), are read on in 64 KiB steps.
  struct stat st {};
  const size_t expected =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0;
  std::string out;
  out.resize(std::max<size_t>(expected, 1) + 1);
  size_t used = 0;
  for (;;) {
    if (used == out.size()) out.resize(out.size() + std::max<size_t>(out.size() / 2, 1 << 16));
    const ssize_t n = read(fd, out.data() + used, out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return ErrnoError("cannot read", path, err);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(used);
  return out;
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  for (size_t pos = 1;; ++pos) {
    pos = path.find('/', pos);
    const std::string part = path.substr(0, pos);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create directory", part, errno);
    }
    if (pos == std::string::npos) break;
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

absl::Status ValidateFileStem(absl::string_view what, absl::string_view stem) {
  const bool ok = !stem.empty() && stem.size() <= 128 && stem != "." && stem != ".." &&
                  std::all_of(stem.begin(), stem.end(), [](char c) {
                    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                           c == '_' || c == '-';
                  });
  if (ok) return absl::OkStatus();
  // The stem came from outside (a flag, a request): quoted escaped and clipped, so a huge or
  // escape-laden one makes a short message that cannot drive a terminal.
  constexpr size_t kQuoted = 80;
  const std::string quoted = stem.size() <= kQuoted
                                 ? absl::CHexEscape(stem)
                                 : absl::StrCat(absl::CHexEscape(stem.substr(0, kQuoted)), "... (",
                                                stem.size(), " bytes)");
  return absl::InvalidArgumentError(
      absl::StrCat(what, " '", quoted, "' must be 1-128 characters of [A-Za-z0-9._-]"));
}

std::string BoundedFileStem(absl::string_view stem, size_t max_chars) {
  max_chars = std::max<size_t>(max_chars, 24);
  if (stem.size() <= max_chars) return std::string(stem);
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (unsigned char c : stem) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return absl::StrCat(stem.substr(0, max_chars - 17), "-", absl::Hex(h, absl::kZeroPad16));
}

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  while (!a.empty() && a.back() == '/') a.remove_suffix(1);
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  return absl::StrCat(a, "/", b);
}

}  // namespace profctl
