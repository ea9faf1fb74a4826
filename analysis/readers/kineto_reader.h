// Reads PyTorch profiler traces (Kineto's Chrome-trace JSON, `*.pt.trace.json`, one file per rank)
// into the framework-neutral HostTrace. Pure: no I/O (read the file first; ReadKinetoTraceFile
// takes its bytes, gzip or not). Naming rules (markers, input wait, launch, sync, collectives,
// memcpy kinds) are op_classify.h's, shared with the XSpace reader.
//
// PARSING. RapidJSON's SAX Reader, not its DOM: a DOM of a 200 MB trace costs several times the
// file in memory (every event an object of members), while SAX keeps one event's fields at a time
// and the output vectors, and is faster. Numbers are taken as text (kParseNumbersAsStringsFlag)
// and converted exactly: `ts`/`dur` are microseconds with a fraction ("1700000000123.456"), and a
// double cannot hold 19 significant digits of ns.
//
// TIME. Chrome trace times (`ts`, `dur`) are always microseconds; `displayTimeUnit` ("ms" or
// "ns") only tells viewers how to show them and is ignored. Kineto since 2024 writes `ts` relative
// to `baseTimeNanoseconds` (absolute ns, before or after `traceEvents`): absolute time =
// baseTimeNanoseconds + ts. Older traces have absolute `ts` and no base. A trace whose times look
// relative (earliest event before 2001) without a base gets a warning: its times are not wall
// clock times, so it cannot be lined up with other hosts. Common timeline = absolute time -
// offset_ns (Kineto records one host, so one offset). Sub-microsecond digits are kept; ns are
// rounded to the nearest.
//
// WINDOW. The span of every complete (`"ph":"X"`) event, whatever its category (Kineto's
// `Trace` span covers the whole profile when present). Kineto records no profile window.
//
// EVENTS. Only `"ph":"X"` events (B/E pairs, instants, counters, flows and metadata are ignored),
// by `cat` (case-insensitive; older Kineto names in brackets):
//   kernel [Kernel]                  device op: collective (nccl*, ...) or compute
//   gpu_memcpy [Memcpy]              device op: kind from the name ("Memcpy HtoD (Pageable ->
//                                    Device)", "Memcpy DtoH", "Memcpy DtoD", "Memcpy PtoP")
//   gpu_memset [Memset]              device op: compute
//   cpu_op [Operator], user_annotation
//                                    step marker when the name matches the step pattern
//                                    (ProfilerStep#N), else a host op (ClassifyHostOpName)
//   cuda_runtime [Runtime], cuda_driver, and other `*_runtime`/`*_driver` categories
//                                    host op (launch / sync / other)
//   python_function                  dropped (stack frames wrap everything) unless an input wait
//   gpu_user_annotation, cuda_sync, Trace, overhead, cpu_instant_event, ac2g, fwdbwd, ...
//                                    not activity: ignored silently
//   anything else                    ignored, one warning naming the categories
// A device event's device is `args.device`, else an integer `pid`; DeviceTrace::name is
// "/device:GPU:<N>" (Kineto does not say GPU or accelerator type), devices in ordinal order.
// StepMarker::thread_id is the integer `tid` (0 when it is a string).
//
// LIMITS. Checked inside the parse, as it reaches each byte (nothing is scanned ahead): an array
// or object nested deeper than kMaxJsonDepth, or a string (as written between its quotes) longer
// than ReaderOptions::max_string_bytes, refuses the file with INVALID_ARGUMENT naming the limit
// and where, as soon as the parser reaches it, so the parser's recursion and string copies stay
// bounded. The first problem in the text's order is the one reported, however the text is cut
// into pieces. Gzip input is capped by ReaderOptions::max_inflated_bytes / max_inflate_ratio as
// it inflates; files are read under the same caps and a size cap by trace_file.h
// (ReadKinetoTraceFromPath parses a file as it is read and inflated, never holding its text).
//
// BAD INPUT. JSON that does not parse, or a document that is not a trace (no `traceEvents` array,
// `traceEvents` not an array, a top level that is neither object nor array): INVALID_ARGUMENT
// naming the problem, the byte offset, line and column. Bad events (a field of the wrong type,
// missing ts/dur, negative dur, numbers out of range) are dropped: one warning per kind of problem
// with its count and the first event's index. A bad distributedInfo.rank is a warning.
#ifndef PROFCTL_ANALYSIS_READERS_KINETO_READER_H_
#define PROFCTL_ANALYSIS_READERS_KINETO_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/host_trace.h"
#include "analysis/op_classify.h"

namespace profctl::analysis {

// Reads one rank's trace. HostTrace::host is "rank-<N>" when the trace has
// `distributedInfo.rank` (an integer >= 0, or a string of one), else `default_host`.
// `offset_ns`: as ReadXSpaceHost (agent clock - common clock; 0 when already common).
// Errors (INVALID_ARGUMENT): bad JSON or not a trace (see BAD INPUT), a bad step pattern,
// |offset_ns| > kMaxAbsOffsetNs.
absl::StatusOr<HostTrace> ReadKinetoTrace(absl::string_view json_text,
                                          const std::string& default_host, int64_t offset_ns,
                                          const ReaderOptions& options = {});

// A document's text in pieces, as a file is read or inflated, for ReadKinetoTraceFrom.
class KinetoTextSource {
 public:
  virtual ~KinetoTextSource() = default;
  // The next piece of the text, valid until the next call; empty at the end of the text. An
  // error (it names what was being read) stops the reading: Next is not called again.
  virtual absl::StatusOr<absl::string_view> Next() = 0;
};

// ReadKinetoTrace over text that arrives in pieces, parsed as it comes: memory is the pieces
// the source holds and what the trace keeps per event, however long the text. The result is the
// same however the text is cut, errors and their positions included; a source error is returned
// as it is.
absl::StatusOr<HostTrace> ReadKinetoTraceFrom(KinetoTextSource& source,
                                              const std::string& default_host, int64_t offset_ns,
                                              const ReaderOptions& options = {});

// `contents` itself, or, when it starts with the gzip magic, its inflated text kept in *storage.
// INVALID_ARGUMENT naming `path` when it does not inflate; RESOURCE_EXHAUSTED naming `path` and
// the cap as soon as it inflates past options.max_inflated_bytes or options.max_inflate_ratio
// times its size; INVALID_ARGUMENT "<path>: Kineto trace of <stem>: ..." as soon as the text
// inflated so far breaks CheckKinetoJsonLimits (checked per 64 KiB chunk). Nothing more is
// inflated after an error. Defined in trace_file.cc, with the reading of files under the caps.
absl::StatusOr<absl::string_view> GunzipIfCompressed(absl::string_view contents,
                                                     absl::string_view path, std::string* storage,
                                                     const ReaderOptions& options = {});

// OK, or INVALID_ARGUMENT naming the limit and where (offset, line, column) when `json_text`
// nests arrays/objects deeper than kMaxJsonDepth or holds a string longer than
// options.max_string_bytes. One pass, nothing allocated; the tools' Kineto reader runs it before
// parsing (its parser recurses per level and copies strings whole; ReadKinetoTrace checks the
// same limits inside its parse).
absl::Status CheckKinetoJsonLimits(absl::string_view json_text, const ReaderOptions& options);

// A trace file's bytes as read from `path` (used only for naming): gunzipped first when they
// start with the gzip magic (`*.pt.trace.json.gz`), then ReadKinetoTrace with the default host
// KinetoFileStem(path). Errors name `path`.
absl::StatusOr<HostTrace> ReadKinetoTraceFile(absl::string_view contents, absl::string_view path,
                                              int64_t offset_ns, const ReaderOptions& options = {});

// The file name without folders and without its trace extension (the first of `.pt.trace.json.gz`,
// `.pt.trace.json`, `.trace.json.gz`, `.trace.json`, `.json.gz`, `.json`, `.gz` it ends with):
// "/logs/worker3.1700000000.pt.trace.json.gz" -> "worker3.1700000000".
std::string KinetoFileStem(absl::string_view path);

// How a Kineto trace names its host: "rank-<rank>" when rank >= 0, else KinetoFileStem(path).
std::string KinetoHostName(int64_t rank, absl::string_view path);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_READERS_KINETO_READER_H_
