// Reading trace files for `profctl analyze` under ReaderOptions' caps, each checked before the
// memory it guards is spent: a file's size (fstat, before a byte is read); a gzipped file's
// inflated size (as it inflates, chunk by chunk); and, for a Chrome-trace JSON, its strings and
// nesting (CheckKinetoJsonLimits, run on each chunk as it is read or inflated). So a refused file
// costs about the cap it passed plus a chunk (1 MiB read, 64 KiB inflated), never its whole size.
#ifndef PROFCTL_ANALYSIS_READERS_TRACE_FILE_H_
#define PROFCTL_ANALYSIS_READERS_TRACE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analysis/host_trace.h"
#include "analysis/op_classify.h"

namespace profctl::analysis {

// OK, or RESOURCE_EXHAUSTED when the file at `path` is larger than options.max_file_bytes:
// "<path>: N bytes (X MiB), more than the cap on a trace file's size (M MiB, --max-file-mb)".
// Nothing is read. A file that cannot be stat'ed: NOT_FOUND / PERMISSION_DENIED naming it.
absl::Status CheckTraceFileSize(const std::string& path, const ReaderOptions& options);

// The bytes of the file at `path` (an XSpace), refused as CheckTraceFileSize before reading, and
// while reading when the file grows past the cap.
absl::StatusOr<std::string> ReadTraceFile(const std::string& path, const ReaderOptions& options);

// The JSON text of the Chrome-trace file at `path` (`*.pt.trace.json[.gz]`, gzip known by its
// magic bytes): ReadTraceFile's size cap; gzip inflated while the file is read (the compressed
// bytes are never held whole) and refused as soon as the text passes max_inflated_bytes or
// max_inflate_ratio times the file's size (RESOURCE_EXHAUSTED, as GunzipIfCompressed); the string
// and nesting caps checked on each chunk (INVALID_ARGUMENT "<path>: Kineto trace of <stem>: a
// string longer than ...", as ReadKinetoTraceFile). Bad gzip: INVALID_ARGUMENT naming `path`.
// The text is ready for ReadKinetoTraceFile / ReadKinetoToolsFileOwned.
absl::StatusOr<std::string> ReadKinetoTraceText(const std::string& path,
                                                const ReaderOptions& options);

// The Kineto trace file at `path` read as ReadKinetoTraceFile reads its bytes, with the caps of
// ReadKinetoTraceText, but parsed as it is read and inflated (ReadKinetoTraceFrom): the text is
// never held whole. Memory: two 256 KiB buffers, zlib's state and what the trace keeps per
// event, however large the file; a refused file (any cap) costs no more. With `threads` = 2 the
// file is read, inflated and scanned for the limits on a second thread while this one parses
// (up to kKinetoPiecesAhead pieces ahead); 1 does it all here. Errors as ReadKinetoTraceText's
// and ReadKinetoTraceFile's, each naming `path`.
inline constexpr int kKinetoPiecesAhead = 4;
absl::StatusOr<HostTrace> ReadKinetoTraceFromPath(const std::string& path, int64_t offset_ns,
                                                  const ReaderOptions& options, int threads = 1);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_READERS_TRACE_FILE_H_
