// File I/O with Status errors.
//
// Inputs are regular files only: a path is opened without blocking (a FIFO with no writer or a
// device cannot hang the open), and anything but a regular file (after following symbolic links)
// is refused with an error naming what it is ("a FIFO", "a character device", "a directory").
// Caps on what is read count the bytes actually read, never the size a file reports.
//
// Outputs are written atomically (a reader, or a crash, sees the old file or the whole new one,
// never a half-written file) and never replace anything but a regular file we may write: a
// device, FIFO, socket, directory, symbolic link or read-only file at the path is refused and
// left as it is.
#ifndef PROFCTL_COMMON_FILE_UTIL_H_
#define PROFCTL_COMMON_FILE_UTIL_H_

#include <sys/stat.h>

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

// An open file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  // Gives up ownership: the caller closes it.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// What a file of `mode` is, for messages: "a regular file", "a directory", "a FIFO", "a
// character device", "a block device", "a socket", "a symbolic link".
const char* FileTypeName(mode_t mode);

// Opens `path` read-only: O_NONBLOCK while opening (cleared at once, so reads of the regular
// file block as usual), symbolic links followed. Anything but a regular file is refused before
// it is opened, and again on what was opened (a path swapped in between): INVALID_ARGUMENT
// "PATH: a FIFO, not a regular file" (through a symbolic link: "PATH: a character device
// (/dev/zero, through a symbolic link), not a regular file"). A missing path: NOT_FOUND; no
// permission: PERMISSION_DENIED; both naming the path. With `st`, the opened file's fstat.
absl::StatusOr<UniqueFd> OpenRegularFile(const std::string& path, struct stat* st = nullptr);

// No cap: ReadFile reads a regular file whole, however large.
inline constexpr uint64_t kNoReadCap = std::numeric_limits<uint64_t>::max();

// The bytes of the regular file at `path` (opened as OpenRegularFile). With `max_bytes`, a file
// larger than that is refused: before reading when its reported size says so, else as soon as
// the bytes actually read pass it (a file that grows, or one of /proc or /sys that reports a
// size it does not have): RESOURCE_EXHAUSTED "PATH: [at least ]N bytes, more than <cap_name>
// (M bytes)", having held at most max_bytes plus 64 KiB. `cap_name` says what the cap is, e.g.
// "a session manifest may hold".
absl::StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes = kNoReadCap,
                                     absl::string_view cap_name = "the cap on this file");

// OK when an output may be written at `path`: nothing is there (or nothing that can be looked at:
// creating the file then says what is wrong with the path), or a regular file we may write
// (by its mode bits: its owner's write bit when it is ours, else its group's or others'; as root
// too, so a read-only file stays read-only). Else FAILED_PRECONDITION naming the path and what
// is there: "PATH: a character device, not a regular file: not replaced" (a symbolic link is
// never followed or replaced: "PATH: a symbolic link (to TARGET), not a regular file: not
// replaced"; "PATH: a read-only file (mode 0444): not replaced").
absl::Status CheckReplaceable(const std::string& path);

// Writes `contents` to a temporary file beside `path`, fsyncs it and renames it over `path`,
// when CheckReplaceable(path) allows it (checked before the temporary file is made and again
// just before the rename); else nothing is written and the check's error is returned.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// mkdir -p.
absl::Status MakeDirs(const std::string& path);

bool PathExists(const std::string& path);

// OK when `stem` is 1-128 characters of [A-Za-z0-9._-] and not "." or "..": safe as one file or
// folder name. The error names `what` (e.g. "session id").
absl::Status ValidateFileStem(absl::string_view what, absl::string_view stem);

// `stem` if it has at most `max_chars` characters (>= 24), else its first max_chars - 17
// characters, '-' and 16 hex digits of a stable hash (FNV-1a 64) of the whole stem: distinct
// long stems stay distinct, the same stem always maps to the same name, and a file name built
// from it (plus ".xplane.pb.tmp.XXXXXX") stays under the usual 255-byte limit.
inline constexpr size_t kMaxFileStemChars = 100;
std::string BoundedFileStem(absl::string_view stem, size_t max_chars = kMaxFileStemChars);

// Joins two path parts with exactly one '/'.
std::string JoinPath(absl::string_view a, absl::string_view b);

}  // namespace profctl

#endif  // PROFCTL_COMMON_FILE_UTIL_H_
