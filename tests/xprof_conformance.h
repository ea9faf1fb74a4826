// Does an XSpace follow the conventions XProf's tools rely on? Our own checker, written from the
// audited convention list (shared/design/TSL_WIRE.md, "How XProf reads an XSpace"), not from
// XProf's code. Every file our collectors write must pass it (tests/xprof_files_test.cc,
// tests/e2e_test.cc, agent/service/tsl_profiler_service_test.cc); docs/xprof-compatibility.md maps
// each rule to the XProf tool that needs it.
//
// RULES (each violation is one line "[rule] where: what is wrong, and what XProf does with it")
//   hostnames           XSpace.hostnames has exactly one entry, and the file stem contains it.
//   task-environment    one `Task Environment` plane with uint64 `profile_start_time` and
//                       `profile_stop_time` (absolute ns), 0 < start <= stop <= INT64_MAX.
//   relative-time       line timestamp_ns relative to the profile start (0 <= ts <= stop-start)
//                       and timestamp_ns * 1000 + offset_ps + duration_ps inside int64 ps.
//   window              every event lies inside [profile_start_time, profile_stop_time].
//   well-formed         event and stat metadata ids are defined; refs name a stat metadata.
//   no-cupti-plane      no `/host:CUPTI` plane (TSL merges it into `/host:CPU` before saving).
//   stat-type           exact value types: int64 `_r`, `step_num`, `iter_num`, `_pt`, `_ct`,
//                       `_p`, `_c` and the memory-profile integers; uint64 `correlation_id`,
//                       `device_id`; string-or-ref `kernel_details`, `memcpy_details`, `tf_op`,
//                       `hlo_op`, `allocator_name`, `region_type`, `shape`; double
//                       `theoretical_occupancy_pct`, `fragmentation`. Event, event-metadata and
//                       plane stats alike.
//   group-id            no `group_id` stat anywhere (XProf skips its own step grouping then).
//   step-root           on `/host:CPU`, every step root (`_r` >= 1) has an int64 `step_num`, and
//                       each step number has exactly one root per host.
//   step-join           context stats come in pairs (`_pt`+`_p`, `_ct`+`_c`); every consumer
//                       (`_ct`/`_c`) has a producer (`_pt`/`_p`) with the same values; and a host
//                       thread that launches GPU work during another thread's step root does so
//                       inside a consumer wrapper joined to that root (or XProf leaves the
//                       kernels out of the step).
//   kernel-details      every kernel (a GPU stream-line event that is not a memcpy or memset)
//                       has `kernel_details` exactly "regs:R static_shared:S dynamic_shared:D
//                       grid:x,y,z block:x,y,z occ_pct:P" and a double
//                       `theoretical_occupancy_pct` equal to P.
//   kernel-op           every kernel has `tf_op` in `scope/Name:Type` form (or an `hlo_op`).
//   memcpy-name         memcpy events are named `MemcpyHToD`/`MemcpyDToH`/`MemcpyDToD`... (XProf's
//                       classes; CUPTI's `MemcpyH2D` counts as compute there).
//   memcpy-details      memcpy events have `memcpy_details` exactly "kind_src:<k> kind_dst:<k>
//                       size:<n> dest:<device> async:<0|1>" with CUPTI memory kinds, agreeing
//                       with the direction in the name.
//   correlation         every GPU event has a `correlation_id` that a `/host:CPU` event (its
//                       launch) has too, exactly one launch per id, on the same device.
//   device-id           host launches (host events with `correlation_id`) carry `device_id`;
//                       device events never do.
//   device-capabilities every `/device:GPU:N` plane has id N and the stats `device_vendor`,
//                       `gpu_device_name`, `clock_rate` (kHz), `core_count`, `memory_bandwidth`,
//                       `memory_size`, `compute_cap_major`, `compute_cap_minor`, with the types
//                       TSL's CUPTI tracer writes, all positive except compute_cap_minor.
//   stream-line         GPU lines (other than XProf's derived lines) are named
//                       `Stream #<line id>(<kinds>)`, kinds from Compute, MemcpyH2D, MemcpyD2H,
//                       MemcpyD2D, MemcpyP2P, Memset, naming every kind of event on the line.
//   memory-event        `MemoryAllocation`/`MemoryDeallocation` are on `/host:CPU` and carry
//                       `bytes_allocated`, `allocation_bytes`, `addr` and an allocator
//                       (`allocator_name` or `device_ordinal`).
//   nesting             events on one line nest and never partly overlap.
//   derived-line        a GPU line named as XProf's derived lines (`Steps`, `TensorFlow Ops`,
//                       `XLA Ops`, ...) has TSL's id for that name (int32_t(0xdeadbeef) + n:
//                       XProf knows derived lines by id), its events are in start order, and
//                       the file is grouped (a `group_id` stat is declared): in an ungrouped
//                       file XProf derives its own lines into the same ids, doubling them.
// At most 5 violations per rule are listed, then one line with how many more there are.
#ifndef PROFCTL_TESTS_XPROF_CONFORMANCE_H_
#define PROFCTL_TESTS_XPROF_CONFORMANCE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::testkit {

// The violations of `space`, saved (or to be saved) as `<file_stem>.xplane.pb`; empty when it
// conforms.
std::vector<std::string> CheckXProfConformance(const tensorflow::profiler::XSpace& space,
                                               absl::string_view file_stem);

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_XPROF_CONFORMANCE_H_
