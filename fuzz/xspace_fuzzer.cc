// Fuzzes what the coordinator does with the XSpace bytes an agent sends, and the agent with a
// framework profiler server's answer (xspace/xspace.h, xspace/xspace_merge.h): parse, Validate,
// and for a valid space everything that relies on Validate having passed: event times, collective
// ends (clock alignment), the per-host summary (capture_engine.cc reads the same bytes with the
// wire-format reader), merging planes into another space (the tsl collector), and the pod trace
// (pod_trace_writer.h), whose JSON must parse.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "analysis/alignment.h"
#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "fuzz/analyze_trace.h"
#include "fuzz/fuzz_util.h"
#include "google/protobuf/stubs/logging.h"
#include "rapidjson/document.h"
#include "report/pod_trace_writer.h"
#include "xspace/xspace.h"
#include "xspace/xspace_merge.h"

namespace {

using profctl::fuzz::Check;
using profctl::xspace::XSpace;

void CheckPodTrace(const XSpace& space) {
  const std::string path = profctl::JoinPath(profctl::fuzz::ScratchDir(), "pod.trace.json.gz");
  absl::StatusOr<profctl::report::PodTraceWriter> writer =
      profctl::report::PodTraceWriter::Open(path, /*base_ns=*/0);
  Check(writer.ok());
  Check(writer->AddHost("fuzz\"<host>", space, /*offset_ns=*/-5).ok());
  Check(writer->Finish().ok());
  absl::StatusOr<std::string> gz = profctl::ReadFile(path);
  Check(gz.ok());
  absl::StatusOr<std::string> json = profctl::GzipDecompress(*gz);
  Check(json.ok());
  rapidjson::Document doc;
  doc.Parse(json->data(), json->size());
  Check(!doc.HasParseError() && doc.IsObject());
  unlink(path.c_str());
}

}  // namespace

// Protobuf logs every string field that is not UTF-8 (such a message fails to parse): quiet.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  XSpace space;
  if (!space.ParseFromArray(data, static_cast<int>(size))) return 0;
  const absl::Status valid = profctl::xspace::Validate(space);
  (void)profctl::xspace::ProfileStartNs(space);
  (void)profctl::xspace::CountEvents(space);
  if (!valid.ok()) {
    Check(valid.code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }

  const int64_t start = profctl::xspace::ProfileStartNs(space);
  const int64_t events = profctl::xspace::CountEvents(space);
  for (const auto& plane : space.planes()) {
    profctl::xspace::XPlaneReader reader(plane);
    reader.ForEachEvent([&](const profctl::xspace::XLine& line, const profctl::xspace::XEvent& e) {
      (void)reader.EventName(e);
      Check(profctl::xspace::EventStartNs(start, line, e) <=
            profctl::xspace::EventEndNs(start, line, e));
    });
  }
  (void)profctl::analysis::CollectiveEndsNs(space);

  absl::StatusOr<profctl::analysis::HostTrace> trace = profctl::analysis::ReadXSpaceHost(
      profctl::StringByteSource(bytes), "fuzz-host", /*offset_ns=*/0);
  if (trace.ok()) profctl::fuzz::AnalyzeTrace(*trace);

  // Merging keeps a space valid and every event: the duplicates of one space's planes into the
  // first of each name, and every plane of a copy into the space (each event then twice).
  XSpace merged = space;
  profctl::xspace::MergeDuplicatePlanes(&merged);
  Check(profctl::xspace::Validate(merged).ok());
  Check(profctl::xspace::CountEvents(merged) == events);
  XSpace twice = merged;
  XSpace other = merged;
  for (auto& plane : *other.mutable_planes()) profctl::xspace::AddOrMergePlane(&plane, &twice);
  Check(profctl::xspace::Validate(twice).ok());
  Check(profctl::xspace::CountEvents(twice) == 2 * events);

  CheckPodTrace(space);
  return 0;
}
