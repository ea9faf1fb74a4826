#include "analysis/readers/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/readers/kineto_json.h"
#include "analysis/readers/kineto_reader.h"
#include "common/gzip.h"
#include "common/status_macros.h"

namespace profctl::analysis {
namespace {

constexpr size_t kReadChunkBytes = size_t{1} << 20;

absl::Status ErrnoError(absl::string_view what, absl::string_view path, int err) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status FileSizeError(absl::string_view path, uint64_t size, const ReaderOptions& options,
                           absl::string_view at_least) {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s: %s%d bytes (%.1f MiB), more than the cap on a trace file's size (%.1f MiB, "
      "--max-file-mb)",
      path, at_least, size, static_cast<double>(size) / (1 << 20),
      static_cast<double>(options.max_file_bytes) / (1 << 20)));
}

// An open file, closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` and checks its size against the cap; *size is 0 for what is not a regular file.
absl::StatusOr<int> OpenCapped(const std::string& path, const ReaderOptions& options,
                               uint64_t* size) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoError("cannot stat", path, err);
  }
  *size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  if (*size > options.max_file_bytes) {
    close(fd);
    return FileSizeError(path, *size, options, "");
  }
  return fd;
}

// Reads the next chunk of `fd` into *buf (resized to what was read; empty at the end).
absl::Status ReadChunk(int fd, absl::string_view path, std::string* buf) {
  buf->resize(kReadChunkBytes);
  for (;;) {
    const ssize_t n = read(fd, buf->data(), buf->size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read", path, errno);
    buf->resize(static_cast<size_t>(n));
    return absl::OkStatus();
  }
}

// Reserves `bytes` when they are at most the machine's memory (a larger reservation could be
// refused as an obvious overcommit) and the allocator gives them: untouched pages cost no memory
// until written. Else the string grows as usual.
void TryReserve(std::string* s, uint64_t bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0 ||
      bytes > static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)) {
    return;
  }
  try {
    s->reserve(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {  // NOLINT(bugprone-empty-catch): growing as usual is fine
  } catch (const std::length_error&) {
  }
}

// A Chrome-trace document's text built from pieces, each checked as it comes (see the header).
class KinetoText {
 public:
  KinetoText(absl::string_view path, const ReaderOptions& options, bool gzipped,
             uint64_t compressed_bytes)
      : path_(path),
        options_(options),
        gzipped_(gzipped),
        compressed_bytes_(compressed_bytes),
        scanner_(kMaxJsonDepth, options.max_string_bytes) {}

  absl::Status Append(absl::string_view piece) {
    if (gzipped_) {
      if (absl::Status s =
              CheckInflatedSize(text_.size() + piece.size(), compressed_bytes_,
                                options_.max_inflated_bytes, options_.max_inflate_ratio);
          !s.ok()) {
        return absl::ResourceExhaustedError(
            absl::StrCat(path_, ": ", s.message(), " (--max-inflated-mb, --max-inflate-ratio)"));
      }
    } else if (text_.size() + piece.size() > options_.max_file_bytes) {
      return FileSizeError(path_, text_.size() + piece.size(), options_, "at least ");
    }
    text_.append(piece.data(), piece.size());
    const kineto_json::LimitBreach breach = scanner_.Feed(piece);
    if (breach.kind == kineto_json::LimitBreach::Kind::kNone) return absl::OkStatus();
    const absl::Status s =
        kineto_json::LimitError(breach, text_, kMaxJsonDepth, options_.max_string_bytes);
    return absl::Status(s.code(), absl::StrCat(path_, ": Kineto trace of ", KinetoFileStem(path_),
                                               ": ", s.message()));
  }

  // Reserves the most text the inflate caps allow: address space only (pages cost memory when
  // written), so the text never grows by copying and a refused file holds at most the cap (a
  // growing string holds twice its size while it is copied).
  void ReserveInflateCap() {
    TryReserve(&text_, InflatedSizeCap(compressed_bytes_, options_.max_inflated_bytes,
                                       options_.max_inflate_ratio));
  }
  void Reserve(uint64_t bytes) { TryReserve(&text_, bytes); }

  std::string Take() && { return std::move(text_); }

 private:
  std::string path_;
  const ReaderOptions& options_;
  const bool gzipped_;
  const uint64_t compressed_bytes_;
  kineto_json::LimitScanner scanner_;
  std::string text_;
};

bool IsGzip(absl::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

absl::Status NotGzip(absl::string_view path, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": cannot decompress gzip: ", s.message()));
}

}  // namespace

absl::Status CheckTraceFileSize(const std::string& path, const ReaderOptions& options) {
  uint64_t size = 0;
  PROFCTL_ASSIGN_OR_RETURN(const int fd, OpenCapped(path, options, &size));
  close(fd);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTraceFile(const std::string& path, const ReaderOptions& options) {
  uint64_t size = 0;
  PROFCTL_ASSIGN_OR_RETURN(const int raw_fd, OpenCapped(path, options, &size));
  const Fd fd(raw_fd);
  std::string out;
  TryReserve(&out, size);
  std::string buf;
  for (;;) {
    PROFCTL_RETURN_IF_ERROR(ReadChunk(fd.get(), path, &buf));
    if (buf.empty()) return out;
    if (out.size() + buf.size() > options.max_file_bytes) {
      return FileSizeError(path, out.size() + buf.size(), options, "at least ");
    }
    out.append(buf);
  }
}

absl::StatusOr<std::string> ReadKinetoTraceText(const std::string& path,
                                                const ReaderOptions& options) {
  uint64_t size = 0;
  PROFCTL_ASSIGN_OR_RETURN(const int raw_fd, OpenCapped(path, options, &size));
  const Fd fd(raw_fd);
  std::string buf;
  PROFCTL_RETURN_IF_ERROR(ReadChunk(fd.get(), path, &buf));
  const bool gzipped = IsGzip(buf);
  KinetoText text(path, options, gzipped, size);
  if (!gzipped) {
    text.Reserve(size);
    while (!buf.empty()) {
      PROFCTL_RETURN_IF_ERROR(text.Append(buf));
      PROFCTL_RETURN_IF_ERROR(ReadChunk(fd.get(), path, &buf));
    }
    return std::move(text).Take();
  }
  text.ReserveInflateCap();
  GzipInflater inflater;
  const auto sink = [&](absl::string_view piece) { return text.Append(piece); };
  while (!buf.empty()) {
    if (absl::Status s = inflater.Feed(buf, sink); !s.ok()) {
      return s.code() == absl::StatusCode::kDataLoss ? NotGzip(path, s) : s;
    }
    PROFCTL_RETURN_IF_ERROR(ReadChunk(fd.get(), path, &buf));
  }
  if (absl::Status s = inflater.Finish(); !s.ok()) return NotGzip(path, s);
  return std::move(text).Take();
}

absl::StatusOr<absl::string_view> GunzipIfCompressed(absl::string_view contents,
                                                     absl::string_view path, std::string* storage,
                                                     const ReaderOptions& options) {
  if (!IsGzip(contents)) return contents;
  KinetoText text(path, options, /*gzipped=*/true, contents.size());
  text.ReserveInflateCap();
  GzipInflater inflater;
  absl::Status s =
      inflater.Feed(contents, [&](absl::string_view piece) { return text.Append(piece); });
  if (s.ok()) s = inflater.Finish();
  if (!s.ok()) return s.code() == absl::StatusCode::kDataLoss ? NotGzip(path, s) : s;
  *storage = std::move(text).Take();
  return absl::string_view(*storage);
}

}  // namespace profctl::analysis
