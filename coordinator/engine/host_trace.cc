#include "coordinator/engine/host_trace.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"

namespace profctl::coordinator {
namespace {

using tensorflow::profiler::XSpace;

google::protobuf::ArenaOptions TraceArenaOptions() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = 16 << 10;
  o.max_block_size = 1 << 20;
  return o;
}

// Everything the session keeps of the trace, from its bytes in one pass (the breakdown's
// summary, the hang record, alignment's collective ends, the counts), or why the summary is
// missing. False for bytes the wire reader finds malformed (the caller validated them already).
bool Decode(const std::string& bytes, const SaveInput& in, SaveOutcome& out) {
  const analysis::StepMatcher* matcher = in.steps.get();
  if (matcher == nullptr) {  // the step pattern does not compile: no summary, no hang record
    // Only the counts and the collective ends are read, which use no step pattern.
    static const auto* const kDefault =
        new analysis::StepMatcher(*analysis::StepMatcher::Create(analysis::kDefaultStepPattern));
    matcher = kDefault;
  }
  const analysis::HostDecodeOptions options{.breakdown = in.steps != nullptr,
                                            .collectives = in.steps != nullptr,
                                            .collective_ends = in.collectives,
                                            .counts = true};
  const StringByteSource source(bytes);
  absl::StatusOr<analysis::HostDecode> decoded =
      in.decode ? in.decode(source, in.host, in.rtt_offset_ns, *matcher, options)
                : analysis::DecodeXSpaceHost(source, in.host, in.rtt_offset_ns, *matcher, options);
  if (!decoded.ok()) return false;
  out.events = static_cast<uint64_t>(decoded->events);
  out.steps = static_cast<uint64_t>(decoded->steps);
  if (in.steps == nullptr) {
    out.breakdown_error = std::string(in.steps_error.message());
  } else if (decoded->trace.ok()) {
    out.summary = analysis::SummarizeHost(*std::move(decoded->trace));
    out.collectives = std::move(decoded->collectives);
  } else {
    out.breakdown_error = std::string(decoded->trace.status().message());
    out.collectives = std::move(decoded->collectives);
  }
  out.collective_ends = std::move(decoded->collective_ends);
  if (out.collective_ends.size() > in.max_collective_ends) {
    out.collective_ends.resize(in.max_collective_ends);
  }
  return true;
}

}  // namespace

HostTraceStream::HostTraceStream(TraceSink* sink, std::string name, StartedFn started, DoneFn done)
    : sink_(sink), name_(std::move(name)), started_(std::move(started)), done_(std::move(done)) {}

void HostTraceStream::OnStarted(int64_t agent_start_ns) {
  started_(agent_start_ns);
  CreateFile();
}

void HostTraceStream::OnHeader(const CaptureHeaderInfo& header) {
  header_ = header;
  header_seen_ = true;
  announced_.store(header.total_bytes, std::memory_order_relaxed);
  CreateFile();
}

absl::Status HostTraceStream::OnData(std::string_view chunk) {
  if (!file_error_.ok()) return file_error_;
  if (!header_seen_ || file_ == nullptr) return absl::InternalError("trace data before the header");
  file_error_ = file_->Append(absl::string_view(chunk.data(), chunk.size()));
  if (file_error_.ok()) received_.fetch_add(chunk.size(), std::memory_order_relaxed);
  return file_error_;
}

void HostTraceStream::OnDone(absl::Status status) { done_(std::move(status)); }

void HostTraceStream::CreateFile() {
  if (file_ != nullptr || !file_error_.ok()) return;
  absl::StatusOr<std::unique_ptr<TraceFile>> file = sink_->Create(name_);
  if (file.ok()) {
    file_ = *std::move(file);
  } else {
    file_error_ = file.status();
  }
}

DecodedTrace::DecodedTrace()
    : arena_(TraceArenaOptions()),
      space_(google::protobuf::Arena::CreateMessage<XSpace>(&arena_)) {}

SaveOutcome SaveHostTrace(TraceFile& file, const SaveInput& in) {
  SaveOutcome out;
  auto fail = [&](profctl::v1::FailureStep step, absl::Status status) {
    out.failed_step = step;
    out.status = std::move(status);
    return std::move(out);
  };
  absl::StatusOr<std::string> bytes = file.ReadAll();
  if (!bytes.ok()) return fail(profctl::v1::FAILURE_STEP_WRITE, bytes.status());
  auto decoded = std::make_unique<DecodedTrace>();
  const XSpace& space = decoded->space();
  absl::Status valid = decoded->Parse(*bytes) ? xspace::Validate(space)
                                              : absl::DataLossError("not a serialized XSpace");
  if (valid.ok() && !Decode(*bytes, in, out)) {
    valid = absl::DataLossError("the trace's bytes cannot be read as an XSpace");
  }
  bytes->clear();
  bytes->shrink_to_fit();
  if (!valid.ok()) {
    // Keep the bytes for inspection, under a name TensorBoard will not try to load.
    absl::StatusOr<std::string> kept = file.Commit(RejectedXPlaneFileName(in.host));
    return fail(profctl::v1::FAILURE_STEP_VALIDATE,
                absl::DataLossError(
                    absl::StrCat("agent sent an invalid trace (", valid.message(), ")",
                                 kept.ok() ? absl::StrCat("; raw bytes kept in ", *kept) : "")));
  }
  absl::StatusOr<std::string> path = file.Commit(XPlaneFileName(in.host));
  if (!path.ok()) return fail(profctl::v1::FAILURE_STEP_WRITE, path.status());
  out.path = *path;
  if (in.pod_trace_index >= 0) {
    absl::StatusOr<report::PerfettoHostFragment> part =
        report::RenderPerfettoHost(in.host, space, in.pod_trace_index);
    if (part.ok()) {
      out.pod_trace = std::make_unique<report::PerfettoHostFragment>(*std::move(part));
    } else {
      out.pod_trace_error = std::string(part.status().message());
    }
  }
  if (in.keep_space) out.space = std::move(decoded);
  return out;
}

}  // namespace profctl::coordinator
