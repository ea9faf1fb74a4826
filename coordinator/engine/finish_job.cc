#include "coordinator/engine/finish_job.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/engine/saved_hosts.h"

namespace profctl::coordinator {

void FinishJob::Run() && {
  const Clock& clock = in_.executor->clock();
  profctl::v1::SessionManifest& manifest = in_.manifest;
  std::optional<analysis::PodBreakdown> breakdown;
  if (!in_.prepare_only) {
    const int64_t outputs_started = clock.MonoNs();
    std::vector<PodOutputHost> saved;
    for (size_t i = 0; i < in_.results.size(); ++i) {
      if (!IsSavedHost(in_.results[i])) continue;
      PodOutputHost& h = saved.emplace_back(std::move(in_.outputs[i]));
      h.r = &in_.results[i];
    }
    breakdown = WritePodOutputs(std::move(saved),
                                {.session = in_.session,
                                 .start_at_ns = in_.start_at_ns,
                                 .sink = in_.sink,
                                 .pool = in_.pool,
                                 .interrupted = in_.interrupted},
                                manifest);
    // The hosts' statuses stand (their traces are saved and synced); what an interrupt left out
    // is named in manifest.errors, which makes the exit code 3 and the headline say so.
    manifest.set_outputs_ms(static_cast<double>(clock.MonoNs() - outputs_started) / kNanosPerMilli);
  }
  for (profctl::v1::HostResult& r : in_.results) *manifest.add_hosts() = std::move(r);
  manifest.set_finished_ns(clock.WallNs());
  std::optional<std::string> written;
  if (!in_.prepare_only) {
    // A running snapshot still being written must not land over the final session.json.
    if (in_.snapshots != nullptr) in_.snapshots->Close();
    std::string json = ManifestJson(manifest);
    if (absl::StatusOr<std::string> f = in_.sink->Write(kManifestFileName, json); !f.ok()) {
      manifest.add_errors(absl::StrCat("manifest: ", f.status().message()));
    } else {
      written = std::move(json);
    }
  }
  // Reported as a task of its own on the executor (after the current one, when this runs there):
  // whoever waits may tear down its side as soon as it hears. The callbacks run there too, in
  // this order.
  in_.executor->Post([done = std::move(in_.done), manifest = std::move(manifest),
                      breakdown = std::move(breakdown), written = std::move(written),
                      on_breakdown = std::move(in_.on_breakdown),
                      on_written = std::move(in_.on_manifest_written)]() mutable {
    if (breakdown.has_value() && on_breakdown) on_breakdown(*breakdown);
    if (written.has_value() && on_written) on_written(*std::move(written));
    std::move(done)(std::move(manifest));
  });
}

}  // namespace profctl::coordinator
