#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace profctl {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
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

// Where the chain of symbolic links at `path` ends (its first link's own text when that cannot
// be resolved); "" when `path` is not a symbolic link.
std::string LinkTarget(const std::string& path) {
  struct stat lst {};
  if (lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return "";
  char resolved[PATH_MAX] = {};
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  char text[PATH_MAX] = {};
  const ssize_t n = readlink(path.c_str(), text, sizeof(text) - 1);
  return n > 0 ? std::string(text, static_cast<size_t>(n)) : "";
}

absl::Status NotRegularInput(const std::string& path, mode_t mode) {
  const std::string target = LinkTarget(path);
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", FileTypeName(mode),
                   target.empty() ? "" : absl::StrCat(" (", target, ", through a symbolic link)"),
                   ", not a regular file"));
}

bool InOurGroups(gid_t gid) {
  if (gid == getegid()) return true;
  const int n = getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  const int got = getgroups(n, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) != groups.begin() + got;
}

// By the mode bits alone (root included: access() would let root write anything).
bool WritableByUs(const struct stat& st) {
  if (st.st_uid == geteuid()) return (st.st_mode & S_IWUSR) != 0;
  if (InOurGroups(st.st_gid)) return (st.st_mode & S_IWGRP) != 0;
  return (st.st_mode & S_IWOTH) != 0;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

absl::Status TooLarge(const std::string& path, uint64_t bytes, absl::string_view at_least,
                      uint64_t max_bytes, absl::string_view cap_name) {
  return absl::ResourceExhaustedError(absl::StrCat(
      path, ": ", at_least, bytes, " bytes, more than ", cap_name, " (", max_bytes, " bytes)"));
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

const char* FileTypeName(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return "not a file";
  }
}

absl::StatusOr<UniqueFd> OpenRegularFile(const std::string& path, struct stat* st_out) {
  // Checked before opening too: opening a device can itself act (a tape rewinds, a terminal
  // becomes ours), and a FIFO is then never opened at all.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return ErrnoError("cannot open", path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegularInput(path, st.st_mode);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("cannot open", path, errno);
  if (fstat(fd.get(), &st) != 0) return ErrnoError("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegularInput(path, st.st_mode);
  const int flags = fcntl(fd.get(), F_GETFL);
  if (flags < 0 || fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return ErrnoError("cannot open", path, errno);
  }
  if (st_out != nullptr) *st_out = st;
  return fd;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes,
                                     absl::string_view cap_name) {
  struct stat st {};
  absl::StatusOr<UniqueFd> fd = OpenRegularFile(path, &st);
  if (!fd.ok()) return fd.status();
  const auto reported = static_cast<uint64_t>(std::max<off_t>(st.st_size, 0));
  if (reported > max_bytes) return TooLarge(path, reported, "", max_bytes, cap_name);
  // Sized once from the reported size (no doubling copies of big traces); a file that grows
  // meanwhile, or a /proc file (size 0), is read on in steps, never held past the cap plus one.
  constexpr uint64_t kStep = uint64_t{1} << 16;
  const uint64_t most = SaturatingAdd(max_bytes, kStep + 1);
  std::string out;
  out.resize(static_cast<size_t>(std::min(std::max<uint64_t>(reported, 1) + 1, most)));
  size_t used = 0;
  for (;;) {
    if (used == out.size()) {
      const uint64_t grown = SaturatingAdd(out.size(), std::max<uint64_t>(out.size() / 2, kStep));
      out.resize(static_cast<size_t>(std::min(grown, most)));
    }
    const ssize_t n = read(fd->get(), out.data() + used, out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot read", path, errno);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (used > max_bytes) return TooLarge(path, used, "at least ", max_bytes, cap_name);
  }
  out.resize(used);
  return out;
}

absl::Status CheckReplaceable(const std::string& path) {
  struct stat st {};
  // Nothing there (or a path that cannot be looked at): nothing to replace; creating the file
  // then says what is wrong with the path.
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISREG(st.st_mode)) {
    const std::string target = S_ISLNK(st.st_mode) ? LinkTarget(path) : "";
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": ", FileTypeName(st.st_mode),
                     target.empty() ? "" : absl::StrCat(" (to ", target, ")"),
                     ", not a regular file: not replaced"));
  }
  if (!WritableByUs(st)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": a read-only file (mode ", absl::StrFormat("%04o", st.st_mode & 07777),
        st.st_uid == geteuid() ? "" : absl::StrCat(", owner uid ", st.st_uid), "): not replaced"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  PROFCTL_RETURN_IF_ERROR(CheckReplaceable(path));
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
  // Again: what is at `path` may have changed while the contents were written.
  if (absl::Status s = CheckReplaceable(path); !s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoError("cannot rename temporary file onto", path, err);
  }
  return absl::OkStatus();
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
