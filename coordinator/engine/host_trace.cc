#include "coordinator/engine/host_trace.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "analysis/alignment.h"
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

int64_t CountSteps(const XSpace& space) {
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  if (host == nullptr) return 0;
  // Several threads (one per GPU process) mark the same step: count distinct step numbers.
  const xspace::XPlaneReader reader(*host);
  absl::flat_hash_set<int64_t> steps;
  reader.ForEachEvent([&](const xspace::XLine&, const xspace::XEvent& e) {
    if (reader.IntStat(e, xspace::kStatIsRoot).value_or(0) != 1) return;
    if (std::optional<int64_t> num = reader.IntStat(e, xspace::kStatStepNum)) steps.insert(*num);
  });
  return static_cast<int64_t>(steps.size());
}

// The breakdown's per-host summary, from the bytes (only the summary stays), or why not.
void Summarize(const std::string& bytes, const SaveInput& in, SaveOutcome& out) {
  absl::StatusOr<analysis::HostTrace> trace =
      in.steps == nullptr
          ? absl::StatusOr<analysis::HostTrace>(in.steps_error)
          : analysis::ReadXSpaceHost(StringByteSource(bytes), in.host, in.rtt_offset_ns, *in.steps);
  if (trace.ok()) {
    out.summary = analysis::SummarizeHost(*std::move(trace));
  } else {
    out.breakdown_error = std::string(trace.status().message());
  }
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
  CreateFile();
}

absl::Status HostTraceStream::OnData(std::string_view chunk) {
  if (!file_error_.ok()) return file_error_;
  if (!header_seen_ || file_ == nullptr) return absl::InternalError("trace data before the header");
  file_error_ = file_->Append(absl::string_view(chunk.data(), chunk.size()));
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
  if (valid.ok()) Summarize(*bytes, in, out);
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
  out.events = static_cast<uint64_t>(xspace::CountEvents(space));
  out.steps = static_cast<uint64_t>(CountSteps(space));
  if (in.collectives) {
    out.collective_ends = analysis::CollectiveEndsNs(space);
    if (out.collective_ends.size() > in.max_collective_ends) {
      out.collective_ends.resize(in.max_collective_ends);
    }
  }
  if (in.steps != nullptr) out.collectives = analysis::ReadRankCollectives(space, *in.steps);
  if (in.keep_space) out.space = std::move(decoded);
  return out;
}

}  // namespace profctl::coordinator
