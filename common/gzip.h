// gzip compression (zlib): of an in-memory buffer, and streamed into a file.
#ifndef PROFCTL_COMMON_GZIP_H_
#define PROFCTL_COMMON_GZIP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

// CRC-32 as zlib computes it (ISO-HDLC), continued from `crc` (0 to start).
uint32_t Crc32(uint32_t crc, absl::string_view data);

absl::StatusOr<std::string> GzipCompress(absl::string_view data);
// RESOURCE_EXHAUSTED (naming the cap) as soon as the output would exceed `max_output_bytes`, or
// `max_ratio` times data.size() when max_ratio > 0: a few KB of gzip can inflate a
// millionfold, and callers hold the result in memory, so inflating stops there (memory: the
// output so far, under the cap, and a 64 KiB buffer).
absl::StatusOr<std::string> GzipDecompress(absl::string_view data,
                                           uint64_t max_output_bytes = uint64_t{4} << 30,
                                           uint64_t max_ratio = 0);

// Inflates a gzip stream given in pieces (a file read in chunks) and hands its text to a sink
// as it comes, in chunks of at most kGzipInflateChunkBytes: memory is zlib's state and one
// chunk, however large the text. A stream of several gzip members (`cat a.gz b.gz`) is inflated
// member after member; bytes after the last member that do not start another are ignored, as
// gzip(1) does. Not thread-safe; one stream per inflater.
inline constexpr size_t kGzipInflateChunkBytes = size_t{1} << 16;
class GzipInflater {
 public:
  using Sink = absl::FunctionRef<absl::Status(absl::string_view text)>;
  GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;
  ~GzipInflater();

  // Inflates the next `compressed` bytes of the stream, calling `sink` on each chunk of text.
  // Returns the sink's first error at once (nothing more is inflated: the sink enforces caps);
  // DATA_LOSS on bytes that are not gzip. Errors are sticky.
  absl::Status Feed(absl::string_view compressed, Sink sink);
  // Pull style, for a reader that asks for text as it needs it: inflates from the front of
  // *compressed (removing what it used) into `out`, at most `out_size` bytes, and returns how
  // many it wrote. 0 means *compressed is used up (or only bytes after the last member are left):
  // feed more, or Finish. DATA_LOSS on bytes that are not gzip. Errors are sticky. Do not mix
  // with Feed on one inflater.
  absl::StatusOr<size_t> Inflate(absl::string_view* compressed, char* out, size_t out_size);
  // After the last Feed: DATA_LOSS when the stream stops inside a member (truncated).
  absl::Status Finish();
  // Text handed to the sink so far.
  uint64_t bytes_out() const { return bytes_out_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  uint64_t bytes_out_ = 0;
};

// GzipDecompress's caps for a stream of `compressed_bytes`: OK while `inflated_bytes` of text
// are within them, else its RESOURCE_EXHAUSTED naming the cap that binds.
absl::Status CheckInflatedSize(uint64_t inflated_bytes, uint64_t compressed_bytes,
                               uint64_t max_output_bytes, uint64_t max_ratio);
// The most text those caps allow: min(max_output_bytes, max_ratio * compressed_bytes), the ratio
// saturating and ignored when 0.
uint64_t InflatedSizeCap(uint64_t compressed_bytes, uint64_t max_output_bytes, uint64_t max_ratio);

// The first up to `max_output_bytes` of what `data` inflates to, where `data` may be only the
// start of a gzip stream (a file's first bytes): for looking at what a file holds. DATA_LOSS
// when the bytes are not gzip.
absl::StatusOr<std::string> GzipInflatePrefix(absl::string_view data, size_t max_output_bytes);

// zlib's compression levels: on the demo's pod trace JSON (46 MB), level 1 compresses 1.8x
// faster than the default (6) into a file 1.27x larger (docs/perf.md).
inline constexpr int kGzipDefaultLevel = 6;
inline constexpr int kGzipFastLevel = 1;

// A run of text compressed on its own, to be joined with others into one gzip member, in order,
// by GzipFileWriter::AppendDeflated (as pigz does): raw deflate blocks that do not refer to any
// text before them, ending on a byte boundary (Z_SYNC_FLUSH) without a final block. Pieces of one
// file can be made on several threads at once.
struct DeflatedPiece {
  std::string bytes;
  uint32_t crc = 0;   // Crc32 of the text
  uint64_t size = 0;  // bytes of text
};

// Makes one DeflatedPiece from text appended in any number of parts; memory: zlib's state plus
// the compressed bytes so far. Not thread-safe; one per thread. zlib's state (about 256 KiB) is
// taken from, and given back to, a small per-thread cache, so that a deflater per saved host
// costs no allocation once its thread has made one (gzip.cc).
class PieceDeflater {
 public:
  explicit PieceDeflater(int level = kGzipDefaultLevel);
  PieceDeflater(const PieceDeflater&) = delete;
  PieceDeflater& operator=(const PieceDeflater&) = delete;
  ~PieceDeflater();

  void Append(absl::string_view text);
  // The piece so far; the deflater is then empty and ready for the next one. INTERNAL if zlib
  // failed (an invalid level, no memory); the deflater is then unusable.
  absl::StatusOr<DeflatedPiece> Take();

  // zlib states made for deflaters on the calling thread so far (the rest were reused).
  static int64_t StatesCreatedOnThisThread();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Writes one gzip file in a single pass with bounded memory, atomically.
//
// Data is compressed as it is appended and written to a temporary file beside `path`
// (`<path>.tmp.XXXXXX`, same folder, so the final rename is atomic). Finish() fsyncs it and
// renames it onto `path`, replacing any file there. So `path` holds either its old contents or
// the whole new file, never a half file, whatever fails or crashes (a crash may leave the
// temporary file behind; an error or an unfinished writer removes it).
//
// Memory: zlib's deflate state (~256 KiB) and a 64 KiB output buffer, however much is appended.
// Errors are Status naming `path` and the temporary file: NOT_FOUND / PERMISSION_DENIED for a
// missing or unwritable folder, RESOURCE_EXHAUSTED for a full disk, quota or file size limit,
// INTERNAL otherwise. An error is sticky: the temporary file is removed at once and every later
// call returns the same error.
//
// Lifecycle: Open, Append or AppendDeflated any number of times, Finish once. Destroying a writer
// that was not finished abandons the file (nothing appears at `path`). Movable; not
// thread-safe. The file is one gzip member whatever was appended, so every gzip reader takes it.
class GzipFileWriter {
 public:
  // Creates the temporary file; the folder must exist. `level`: zlib's, 0..9 (INVALID_ARGUMENT
  // otherwise).
  static absl::StatusOr<GzipFileWriter> Open(const std::string& path,
                                             int level = kGzipDefaultLevel);

  GzipFileWriter(GzipFileWriter&& other) noexcept;
  GzipFileWriter& operator=(GzipFileWriter&& other) noexcept;
  GzipFileWriter(const GzipFileWriter&) = delete;
  GzipFileWriter& operator=(const GzipFileWriter&) = delete;
  ~GzipFileWriter();

  // Compresses `data` and writes what zlib emits. FAILED_PRECONDITION after Finish or on a
  // moved-from writer.
  absl::Status Append(absl::string_view data);
  // Writes a piece made elsewhere as the next text of the file (its level is the piece's).
  absl::Status AppendDeflated(const DeflatedPiece& piece);
  // Ends the gzip stream, fsyncs, closes and renames the temporary file onto `path` (mode 0644).
  // FAILED_PRECONDITION if called twice or on a moved-from writer.
  absl::Status Finish();

  // The final path and, until Finish or an error, the temporary file being written.
  absl::string_view path() const;
  absl::string_view temp_path() const;
  // Uncompressed bytes appended and compressed bytes written so far.
  int64_t bytes_in() const;
  int64_t bytes_out() const;

 private:
  struct State;
  explicit GzipFileWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace profctl

#endif  // PROFCTL_COMMON_GZIP_H_
