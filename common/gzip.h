// gzip compression (zlib): of an in-memory buffer, and streamed into a file.
#ifndef PROFCTL_COMMON_GZIP_H_
#define PROFCTL_COMMON_GZIP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

// CRC-32 as zlib computes it (ISO-HDLC), continued from `crc` (0 to start).
uint32_t Crc32(uint32_t crc, absl::string_view data);

absl::StatusOr<std::string> GzipCompress(absl::string_view data);
// RESOURCE_EXHAUSTED (naming the limit) once the output would exceed `max_output_bytes`: a few
// KB of gzip can inflate a thousandfold, and callers hold the result in memory.
absl::StatusOr<std::string> GzipDecompress(absl::string_view data,
                                           uint64_t max_output_bytes = uint64_t{4} << 30);

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
// Lifecycle: Open, Append any number of times, Finish once. Destroying a writer that was not
// finished abandons the file (nothing appears at `path`). Movable; not thread-safe.
class GzipFileWriter {
 public:
  // Creates the temporary file; the folder must exist.
  static absl::StatusOr<GzipFileWriter> Open(const std::string& path);

  GzipFileWriter(GzipFileWriter&& other) noexcept;
  GzipFileWriter& operator=(GzipFileWriter&& other) noexcept;
  GzipFileWriter(const GzipFileWriter&) = delete;
  GzipFileWriter& operator=(const GzipFileWriter&) = delete;
  ~GzipFileWriter();

  // Compresses `data` and writes what zlib emits. FAILED_PRECONDITION after Finish or on a
  // moved-from writer.
  absl::Status Append(absl::string_view data);
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
