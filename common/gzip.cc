#include "common/gzip.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace profctl {
namespace {

constexpr int kGzipWindowBits = 15 + 16;  // zlib: 15-bit window, gzip wrapper.
constexpr int kRawWindowBits = -15;       // zlib: 15-bit window, raw deflate (no wrapper)
// The gzip member header GzipFileWriter writes (RFC 1952): deflate, no name, no time, Unix.
constexpr char kGzipHeader[10] = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3};
constexpr int kMemLevel = 8;  // zlib's default
constexpr size_t kOutBufferBytes = 64 << 10;
// zlib counts input in uInt: feed at most this much per deflate() call.
constexpr size_t kMaxInputChunk = 1 << 30;

absl::Status FileError(absl::string_view what, const std::string& path, const std::string& tmp,
                       int err) {
  std::string msg = absl::StrCat("gzip writer: ", what, " ", path, " (temporary ", tmp,
                                 "): ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace

struct GzipFileWriter::State {
  std::string path;
  std::string tmp;
  int fd = -1;
  z_stream zs{};
  bool zs_initialized = false;
  bool finished = false;
  // Text went into `zs` since it last started afresh: it must be flushed to a byte boundary and
  // restarted before a piece made elsewhere follows (the piece's back-references cannot reach
  // text before it, and text after it must not reach over it).
  bool zs_has_text = false;
  uint32_t crc = 0;    // of all the text, for the gzip trailer
  absl::Status error;  // sticky
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
  char out[kOutBufferBytes];

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() { Abandon(); }

  // Releases zlib and removes the temporary file unless it was renamed.
  void Abandon() {
    if (zs_initialized) deflateEnd(&zs);
    zs_initialized = false;
    if (fd >= 0) close(fd);
    fd = -1;
    if (!finished && !tmp.empty()) unlink(tmp.c_str());
  }

  absl::Status Fail(absl::Status status) {
    error = std::move(status);
    Abandon();
    return error;
  }

  absl::Status WriteAll(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Fail(FileError("cannot write", path, tmp, errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
      bytes_out += w;
    }
    return absl::OkStatus();
  }

  // Runs deflate over the pending input with `flush`, writing every byte it emits. With
  // Z_NO_FLUSH it returns once the input is consumed; with Z_FINISH once the stream is ended.
  absl::Status Deflate(int flush) {
    int rc = Z_OK;
    do {
      zs.next_out = reinterpret_cast<Bytef*>(out);
      zs.avail_out = static_cast<uInt>(sizeof(out));
      rc = deflate(&zs, flush);
      if (rc == Z_STREAM_ERROR) {
        return Fail(absl::InternalError(
            absl::StrCat("gzip writer: zlib stream error while writing ", path)));
      }
      if (absl::Status s = WriteAll(out, sizeof(out) - zs.avail_out); !s.ok()) return s;
    } while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    return absl::OkStatus();
  }

  absl::Status Usable() const {
    if (!error.ok()) return error;
    if (finished) {
      return absl::FailedPreconditionError(
          absl::StrCat("gzip writer: ", path, " is already finished"));
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<GzipFileWriter> GzipFileWriter::Open(const std::string& path, int level) {
  auto state = std::make_unique<State>();
  state->path = path;
  if (absl::Status s = CheckReplaceable(path); !s.ok()) return s;
  std::string tmp = absl::StrCat(path, ".tmp.XXXXXX");
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return FileError("cannot create temporary file for", path, tmp, errno);
  state->fd = fd;
  state->tmp = std::move(tmp);
  // Raw deflate inside a header and trailer of our own, so pieces deflated elsewhere can join
  // the one member (AppendDeflated).
  const int rc =
      deflateInit2(&state->zs, level, Z_DEFLATED, kRawWindowBits, kMemLevel, Z_DEFAULT_STRATEGY);
  if (rc == Z_STREAM_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat("gzip writer: compression level ", level,
                                                   " is not one of zlib's, 0..9 (", path, ")"));
  }
  if (rc != Z_OK) {
    return absl::ResourceExhaustedError(
        absl::StrCat("gzip writer: zlib could not start a stream for ", path));
  }
  state->zs_initialized = true;
  if (absl::Status s = state->WriteAll(kGzipHeader, sizeof(kGzipHeader)); !s.ok()) return s;
  return GzipFileWriter(std::move(state));
}

GzipFileWriter::GzipFileWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
GzipFileWriter::GzipFileWriter(GzipFileWriter&& other) noexcept = default;
GzipFileWriter& GzipFileWriter::operator=(GzipFileWriter&& other) noexcept = default;
GzipFileWriter::~GzipFileWriter() = default;

absl::Status GzipFileWriter::Append(absl::string_view data) {
  if (state_ == nullptr) return absl::FailedPreconditionError("gzip writer: moved from");
  if (absl::Status s = state_->Usable(); !s.ok()) return s;
  while (!data.empty()) {
    const size_t n = std::min(data.size(), kMaxInputChunk);
    state_->zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    state_->zs.avail_in = static_cast<uInt>(n);
    if (absl::Status s = state_->Deflate(Z_NO_FLUSH); !s.ok()) return s;
    state_->crc = Crc32(state_->crc, data.substr(0, n));
    state_->bytes_in += static_cast<int64_t>(n);
    state_->zs_has_text = true;
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::Status GzipFileWriter::AppendDeflated(const DeflatedPiece& piece) {
  if (state_ == nullptr) return absl::FailedPreconditionError("gzip writer: moved from");
  State& st = *state_;
  if (absl::Status s = st.Usable(); !s.ok()) return s;
  if (piece.size == 0) return absl::OkStatus();
  if (st.zs_has_text) {
    st.zs.next_in = nullptr;
    st.zs.avail_in = 0;
    if (absl::Status s = st.Deflate(Z_SYNC_FLUSH); !s.ok()) return s;
    deflateReset(&st.zs);
    st.zs_has_text = false;
  }
  if (absl::Status s = st.WriteAll(piece.bytes.data(), piece.bytes.size()); !s.ok()) return s;
  st.crc =
      static_cast<uint32_t>(crc32_combine(st.crc, piece.crc, static_cast<z_off_t>(piece.size)));
  st.bytes_in += static_cast<int64_t>(piece.size);
  return absl::OkStatus();
}

absl::Status GzipFileWriter::Finish() {
  if (state_ == nullptr) return absl::FailedPreconditionError("gzip writer: moved from");
  State& st = *state_;
  if (absl::Status s = st.Usable(); !s.ok()) return s;
  st.zs.next_in = nullptr;
  st.zs.avail_in = 0;
  if (absl::Status s = st.Deflate(Z_FINISH); !s.ok()) return s;
  deflateEnd(&st.zs);
  st.zs_initialized = false;
  // The trailer: CRC-32 and length mod 2^32 of all the text, little-endian.
  const auto isize = static_cast<uint32_t>(static_cast<uint64_t>(st.bytes_in));
  const char trailer[8] = {static_cast<char>(st.crc),       static_cast<char>(st.crc >> 8),
                           static_cast<char>(st.crc >> 16), static_cast<char>(st.crc >> 24),
                           static_cast<char>(isize),        static_cast<char>(isize >> 8),
                           static_cast<char>(isize >> 16),  static_cast<char>(isize >> 24)};
  if (absl::Status s = st.WriteAll(trailer, sizeof(trailer)); !s.ok()) return s;
  if (fchmod(st.fd, 0644) != 0 || fsync(st.fd) != 0) {
    return st.Fail(FileError("cannot sync", st.path, st.tmp, errno));
  }
  const int fd = std::exchange(st.fd, -1);
  if (close(fd) != 0) return st.Fail(FileError("cannot close", st.path, st.tmp, errno));
  if (absl::Status s = CheckReplaceable(st.path); !s.ok()) return st.Fail(s);
  if (rename(st.tmp.c_str(), st.path.c_str()) != 0) {
    return st.Fail(FileError("cannot rename the temporary file onto", st.path, st.tmp, errno));
  }
  st.finished = true;
  return absl::OkStatus();
}

absl::string_view GzipFileWriter::path() const {
  return state_ != nullptr ? absl::string_view(state_->path) : absl::string_view();
}
absl::string_view GzipFileWriter::temp_path() const {
  return state_ != nullptr ? absl::string_view(state_->tmp) : absl::string_view();
}
int64_t GzipFileWriter::bytes_in() const { return state_ != nullptr ? state_->bytes_in : 0; }
int64_t GzipFileWriter::bytes_out() const { return state_ != nullptr ? state_->bytes_out : 0; }

uint32_t Crc32(uint32_t crc, absl::string_view data) {
  return static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

namespace {

// zlib's deflate state for PieceDeflater, kept per thread between deflaters: deflateInit2
// allocates about 256 KiB in four blocks and deflateEnd frees them, which at one deflater per
// saved host made glibc trim and grow its arena each time (madvise, mprotect and page faults;
// the two calls alone were 3.7 % of the coordinator's CPU at 1,024 hosts, docs/perf.md). A
// state goes back to the thread that destroys its deflater, reset; at most kCachedDeflateStates
// wait per thread.
struct DeflateState {
  z_stream zs{};
  int level = 0;
  ~DeflateState() { deflateEnd(&zs); }
};

constexpr size_t kCachedDeflateStates = 2;

struct DeflateStateCache {
  std::vector<std::unique_ptr<DeflateState>> states;
  int64_t created = 0;
};

DeflateStateCache& ThreadDeflateStates() {
  thread_local DeflateStateCache cache;
  return cache;
}

// A reset state of `level` from this thread's cache, else a new one; null when zlib refuses
// (an invalid level, no memory).
std::unique_ptr<DeflateState> TakeDeflateState(int level) {
  DeflateStateCache& cache = ThreadDeflateStates();
  for (auto it = cache.states.begin(); it != cache.states.end(); ++it) {
    if ((*it)->level != level) continue;
    std::unique_ptr<DeflateState> st = std::move(*it);
    cache.states.erase(it);
    return st;
  }
  auto st = std::make_unique<DeflateState>();
  st->level = level;
  if (deflateInit2(&st->zs, level, Z_DEFLATED, kRawWindowBits, kMemLevel, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    st->zs = z_stream{};  // nothing for deflateEnd to free
    return nullptr;
  }
  ++cache.created;
  return st;
}

void ReturnDeflateState(std::unique_ptr<DeflateState> st) {
  if (st == nullptr || deflateReset(&st->zs) != Z_OK) return;
  DeflateStateCache& cache = ThreadDeflateStates();
  if (cache.states.size() < kCachedDeflateStates) cache.states.push_back(std::move(st));
}

}  // namespace

int64_t PieceDeflater::StatesCreatedOnThisThread() { return ThreadDeflateStates().created; }

struct PieceDeflater::State {
  std::unique_ptr<DeflateState> z;  // null when deflateInit2 failed
  bool ok = false;                  // z is set and no deflate call failed since
  int level = 0;
  DeflatedPiece piece;

  ~State() {
    if (ok) ReturnDeflateState(std::move(z));  // a failed stream is not reused
  }
  void Run(int flush) {
    char buf[kOutBufferBytes];
    z_stream& zs = z->zs;
    do {
      zs.next_out = reinterpret_cast<Bytef*>(buf);
      zs.avail_out = static_cast<uInt>(sizeof(buf));
      if (deflate(&zs, flush) == Z_STREAM_ERROR) {
        ok = false;
        return;
      }
      piece.bytes.append(buf, sizeof(buf) - zs.avail_out);
    } while (zs.avail_out == 0);
  }
};

PieceDeflater::PieceDeflater(int level) : state_(std::make_unique<State>()) {
  state_->level = level;
  state_->z = TakeDeflateState(level);
  state_->ok = state_->z != nullptr;
}

PieceDeflater::~PieceDeflater() = default;

void PieceDeflater::Append(absl::string_view text) {
  State& st = *state_;
  while (st.ok && !text.empty()) {
    const size_t n = std::min(text.size(), kMaxInputChunk);
    st.z->zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    st.z->zs.avail_in = static_cast<uInt>(n);
    st.Run(Z_NO_FLUSH);
    st.piece.crc = Crc32(st.piece.crc, text.substr(0, n));
    st.piece.size += n;
    text.remove_prefix(n);
  }
}

absl::StatusOr<DeflatedPiece> PieceDeflater::Take() {
  State& st = *state_;
  if (st.ok && st.piece.size > 0) {
    st.z->zs.next_in = nullptr;
    st.z->zs.avail_in = 0;
    st.Run(Z_SYNC_FLUSH);
  }
  if (!st.ok) {
    return absl::InternalError(
        absl::StrCat("gzip: zlib could not compress (level ", st.level, ")"));
  }
  deflateReset(&st.z->zs);
  return std::exchange(st.piece, DeflatedPiece{});
}

absl::StatusOr<std::string> GzipCompress(absl::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("gzip: deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&zs, data.size()));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t written = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return absl::InternalError(absl::StrCat("gzip: deflate returned ", rc));
  out.resize(written);
  return out;
}

struct GzipInflater::State {
  z_stream zs{};
  bool init = false;
  bool member_ended = false;  // between members (or after the last one)
  bool done = false;          // trailing bytes that are no member: the rest is ignored
  absl::Status error;
  char buf[kGzipInflateChunkBytes];
};

GzipInflater::GzipInflater() : state_(std::make_unique<State>()) {
  if (inflateInit2(&state_->zs, kGzipWindowBits) != Z_OK) {
    state_->error = absl::InternalError("gzip: inflateInit2 failed");
  } else {
    state_->init = true;
  }
}

GzipInflater::~GzipInflater() {
  if (state_->init) inflateEnd(&state_->zs);
}

absl::Status GzipInflater::Feed(absl::string_view compressed, Sink sink) {
  State& st = *state_;
  if (!st.error.ok()) return st.error;
  while (!compressed.empty() && !st.done) {
    if (st.member_ended) {
      if (static_cast<unsigned char>(compressed[0]) != 0x1f) {
        st.done = true;  // trailing bytes, not another member
        break;
      }
      inflateReset(&st.zs);
      st.member_ended = false;
    }
    const size_t take = std::min<size_t>(compressed.size(), std::numeric_limits<uInt>::max());
    st.zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
    st.zs.avail_in = static_cast<uInt>(take);
    int rc = Z_OK;
    while (rc == Z_OK && (st.zs.avail_in > 0 || st.zs.avail_out == 0)) {
      st.zs.next_out = reinterpret_cast<Bytef*>(st.buf);
      st.zs.avail_out = sizeof(st.buf);
      rc = inflate(&st.zs, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        st.error = absl::DataLossError(absl::StrCat("gzip: corrupt data (zlib ", rc, ")"));
        return st.error;
      }
      const size_t produced = sizeof(st.buf) - st.zs.avail_out;
      if (produced > 0) {
        bytes_out_ += produced;
        if (absl::Status s = sink(absl::string_view(st.buf, produced)); !s.ok()) {
          st.error = s;
          return s;
        }
      }
      if (rc == Z_BUF_ERROR) break;  // needs more input
    }
    compressed.remove_prefix(take - st.zs.avail_in);
    if (rc == Z_STREAM_END) st.member_ended = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> GzipInflater::Inflate(absl::string_view* compressed, char* out,
                                             size_t out_size) {
  State& st = *state_;
  if (!st.error.ok()) return st.error;
  out_size = std::min<size_t>(out_size, std::numeric_limits<uInt>::max());
  size_t produced = 0;
  while (produced == 0 && !compressed->empty() && !st.done && out_size > 0) {
    if (st.member_ended) {
      if (static_cast<unsigned char>((*compressed)[0]) != 0x1f) {
        st.done = true;  // trailing bytes, not another member
        break;
      }
      inflateReset(&st.zs);
      st.member_ended = false;
    }
    const size_t take = std::min<size_t>(compressed->size(), std::numeric_limits<uInt>::max());
    st.zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed->data()));
    st.zs.avail_in = static_cast<uInt>(take);
    st.zs.next_out = reinterpret_cast<Bytef*>(out);
    st.zs.avail_out = static_cast<uInt>(out_size);
    const int rc = inflate(&st.zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      st.error = absl::DataLossError(absl::StrCat("gzip: corrupt data (zlib ", rc, ")"));
      return st.error;
    }
    compressed->remove_prefix(take - st.zs.avail_in);
    produced = out_size - st.zs.avail_out;
    if (rc == Z_STREAM_END) st.member_ended = true;
    if (rc == Z_BUF_ERROR) break;  // needs more input
  }
  bytes_out_ += produced;
  return produced;
}

absl::Status GzipInflater::Finish() {
  if (!state_->error.ok()) return state_->error;
  if (!state_->member_ended && !state_->done) {
    return absl::DataLossError("gzip: corrupt or truncated data (the stream ends inside a member)");
  }
  return absl::OkStatus();
}

uint64_t InflatedSizeCap(uint64_t compressed_bytes, uint64_t max_output_bytes, uint64_t max_ratio) {
  const uint64_t ratio_cap =
      max_ratio == 0 || compressed_bytes > std::numeric_limits<uint64_t>::max() / max_ratio
          ? std::numeric_limits<uint64_t>::max()
          : max_ratio * compressed_bytes;
  return std::min(ratio_cap, max_output_bytes);
}

absl::Status CheckInflatedSize(uint64_t inflated_bytes, uint64_t compressed_bytes,
                               uint64_t max_output_bytes, uint64_t max_ratio) {
  // The ratio cap, when it is the tighter one (saturating: a huge ratio is no cap).
  const uint64_t ratio_cap =
      max_ratio == 0 || compressed_bytes > std::numeric_limits<uint64_t>::max() / max_ratio
          ? std::numeric_limits<uint64_t>::max()
          : max_ratio * compressed_bytes;
  const bool ratio_binds = ratio_cap < max_output_bytes;
  const uint64_t cap = ratio_binds ? ratio_cap : max_output_bytes;
  if (inflated_bytes <= cap) return absl::OkStatus();
  if (ratio_binds) {
    return absl::ResourceExhaustedError(
        absl::StrCat("gzip: inflates to more than ", max_ratio, " times its ", compressed_bytes,
                     " compressed bytes (the inflate ratio cap, ", cap,
                     " bytes): refused as a likely gzip bomb"));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("gzip: inflates to more than ", max_output_bytes,
                   " bytes (the cap on inflated data held in memory); decompress it first"));
}

absl::StatusOr<std::string> GzipDecompress(absl::string_view data, uint64_t max_output_bytes,
                                           uint64_t max_ratio) {
  std::string out;
  GzipInflater inflater;
  absl::Status s = inflater.Feed(data, [&](absl::string_view text) -> absl::Status {
    PROFCTL_RETURN_IF_ERROR(
        CheckInflatedSize(out.size() + text.size(), data.size(), max_output_bytes, max_ratio));
    out.append(text.data(), text.size());
    return absl::OkStatus();
  });
  if (s.ok()) s = inflater.Finish();
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::string> GzipInflatePrefix(absl::string_view data, size_t max_output_bytes) {
  z_stream zs{};
  if (inflateInit2(&zs, kGzipWindowBits) != Z_OK) {
    return absl::InternalError("gzip: inflateInit2 failed");
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(std::min<size_t>(data.size(), std::numeric_limits<uInt>::max()));
  std::string out(max_output_bytes, '\0');
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&zs, Z_SYNC_FLUSH);
  out.resize(out.size() - zs.avail_out);
  inflateEnd(&zs);
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
    return absl::DataLossError(absl::StrCat("gzip: corrupt data (zlib ", rc, ")"));
  }
  return out;
}

}  // namespace profctl
