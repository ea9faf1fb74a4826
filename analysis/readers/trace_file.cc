#include "analysis/readers/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <new>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "analysis/readers/kineto_json.h"
#include "analysis/readers/kineto_reader.h"
#include "common/file_util.h"
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

// Opens `path` (a regular file only, common/file_util.h) and checks its reported size against
// the cap; the readers count the bytes they read against it too.
absl::StatusOr<int> OpenCapped(const std::string& path, const ReaderOptions& options,
                               uint64_t* size) {
  struct stat st {};
  absl::StatusOr<UniqueFd> fd = OpenRegularFile(path, &st);
  if (!fd.ok()) return fd.status();
  *size = static_cast<uint64_t>(std::max<off_t>(st.st_size, 0));
  if (*size > options.max_file_bytes) return FileSizeError(path, *size, options, "");
  return fd->release();
}

// Reads the next chunk of `fd` (at most `bytes`) into *buf (resized to what was read; empty at
// the end).
absl::Status ReadChunk(int fd, absl::string_view path, std::string* buf,
                       size_t bytes = kReadChunkBytes) {
  buf->resize(bytes);
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

namespace {

constexpr size_t kPieceBytes = size_t{256} << 10;

// A Kineto file's text in pieces of at most kPieceBytes, read (and inflated) as they are asked
// for, under ReadKinetoTraceText's caps.
class KinetoFileText : public KinetoTextSource {
 public:
  KinetoFileText(const std::string& path, const ReaderOptions& options)
      : path_(path), options_(options) {}

  // Opens the file under the size cap and reads its first bytes.
  absl::Status Open() {
    PROFCTL_ASSIGN_OR_RETURN(const int fd, OpenCapped(path_, options_, &size_));
    fd_.emplace(fd);
    PROFCTL_RETURN_IF_ERROR(ReadInto(&read_));
    gzipped_ = IsGzip(read_);
    input_ = read_;
    return absl::OkStatus();
  }

  absl::StatusOr<absl::string_view> Next() override {
    if (!gzipped_) {
      if (input_.empty()) PROFCTL_RETURN_IF_ERROR(ReadInto(&read_));
      const absl::string_view piece = read_;
      input_ = {};
      text_bytes_ += piece.size();
      if (text_bytes_ > options_.max_file_bytes) {
        return FileSizeError(path_, text_bytes_, options_, "at least ");
      }
      return piece;
    }
    text_.resize(kPieceBytes);
    for (;;) {
      if (input_.empty()) {
        PROFCTL_RETURN_IF_ERROR(ReadInto(&read_));
        input_ = read_;
        if (input_.empty()) {
          if (absl::Status s = inflater_.Finish(); !s.ok()) return NotGzip(path_, s);
          return absl::string_view();
        }
      }
      absl::StatusOr<size_t> n = inflater_.Inflate(&input_, text_.data(), text_.size());
      if (!n.ok()) return NotGzip(path_, n.status());
      if (*n == 0) {
        input_ = {};  // used up, or bytes after the last member (ignored, as gzip(1) does)
        continue;
      }
      text_bytes_ += *n;
      if (absl::Status s = CheckInflatedSize(text_bytes_, size_, options_.max_inflated_bytes,
                                             options_.max_inflate_ratio);
          !s.ok()) {
        return absl::ResourceExhaustedError(
            absl::StrCat(path_, ": ", s.message(), " (--max-inflated-mb, --max-inflate-ratio)"));
      }
      return absl::string_view(text_.data(), *n);
    }
  }

 private:
  absl::Status ReadInto(std::string* buf) { return ReadChunk(fd_->get(), path_, buf, kPieceBytes); }

  const std::string path_;
  const ReaderOptions& options_;
  std::optional<Fd> fd_;
  uint64_t size_ = 0;
  bool gzipped_ = false;
  std::string read_;         // the last bytes read from the file
  absl::string_view input_;  // what of them is not inflated yet
  std::string text_;         // the last piece inflated
  uint64_t text_bytes_ = 0;  // text handed out so far
  GzipInflater inflater_;
};

// Runs another source on a thread of its own, up to kKinetoPiecesAhead pieces ahead of the
// reader, each piece copied into a buffer of its own. The thread stops at the first error or at
// the end, and when this is destroyed.
class PrefetchedText : public KinetoTextSource {
 public:
  explicit PrefetchedText(KinetoTextSource& inner) : inner_(inner) {
    thread_ = std::thread([this] { Run(); });
  }
  PrefetchedText(const PrefetchedText&) = delete;
  PrefetchedText& operator=(const PrefetchedText&) = delete;
  ~PrefetchedText() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  absl::StatusOr<absl::string_view> Next() override {
    absl::MutexLock lock(&mu_);
    if (handed_out_) {  // the reader is done with the last piece: its buffer is free again
      free_.push_back(std::move(ready_.front().text));
      ready_.pop_front();
      handed_out_ = false;
    }
    mu_.Await(absl::Condition(this, &PrefetchedText::HasReady));
    Piece& piece = ready_.front();
    if (!piece.status.ok()) return piece.status;
    handed_out_ = true;
    return absl::string_view(piece.text);
  }

 private:
  struct Piece {
    absl::Status status;
    std::string text;  // empty at the end
  };

  bool HasReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !ready_.empty(); }
  bool MayRead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || ready_.size() < static_cast<size_t>(kKinetoPiecesAhead);
  }

  void Run() {
    for (;;) {
      std::string buf;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &PrefetchedText::MayRead));
        if (stop_) return;
        if (!free_.empty()) {
          buf = std::move(free_.back());
          free_.pop_back();
        }
      }
      absl::StatusOr<absl::string_view> next = inner_.Next();
      Piece piece;
      if (next.ok()) {
        buf.assign(next->data(), next->size());
        piece.text = std::move(buf);
      } else {
        piece.status = next.status();
      }
      const bool last = !next.ok() || next->empty();
      absl::MutexLock lock(&mu_);
      ready_.push_back(std::move(piece));
      if (last) return;
    }
  }

  KinetoTextSource& inner_;
  absl::Mutex mu_;
  std::deque<Piece> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> free_ ABSL_GUARDED_BY(mu_);
  bool handed_out_ ABSL_GUARDED_BY(mu_) = false;  // ready_.front() is the reader's
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<HostTrace> ReadKinetoTraceFromPath(const std::string& path, int64_t offset_ns,
                                                  const ReaderOptions& options, int threads) {
  KinetoFileText file(path, options);
  absl::StatusOr<HostTrace> trace = [&]() -> absl::StatusOr<HostTrace> {
    PROFCTL_RETURN_IF_ERROR(file.Open());
    if (threads < 2) return ReadKinetoTraceFrom(file, KinetoFileStem(path), offset_ns, options);
    PrefetchedText prefetched(file);
    return ReadKinetoTraceFrom(prefetched, KinetoFileStem(path), offset_ns, options);
  }();
  if (!trace.ok() && !absl::StartsWith(trace.status().message(), path)) {
    return absl::Status(trace.status().code(), absl::StrCat(path, ": ", trace.status().message()));
  }
  return trace;
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
