// CUPTI activity records -> compact records (records.h). Compiled only where the CUPTI headers
// are (PROFCTL_CUPTI); plain C++, libc and CUPTI's types only: part of the injection library.
//
// The one translation unit that names CUPTI's versioned record structs (CUDA 13.0:
// CUpti_ActivityKernel10, Memcpy6, Memset4, API, Marker2, Memory4, Device5, Synchronization2): a
// CUDA update that renames them is fixed here alone (CUPTI_NOTES.md).
#ifndef PROFCTL_INJECT_CUPTI_RECORDS_H_
#define PROFCTL_INJECT_CUPTI_RECORDS_H_

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "inject/record_batch_writer.h"
#include "inject/step_samples.h"

namespace profctl::inject {

// The bytes a record of `kind` takes in a CUPTI activity buffer (sizeof its struct, which CUPTI
// pads to 8), or 0 for kinds this file does not know. Verified against libcupti's
// cuptiActivityGetNextRecord (inject/cupti_records_test.cc).
size_t CuptiRecordSize(CUpti_ActivityKind kind);

// The record at `*offset` of a completed buffer holding `valid_size` bytes, advancing `*offset`
// past it; nullptr at the end, at a record of unknown kind (its size is unknown, so the rest of
// the buffer is skipped), or at a record cut short. `buffer` is 8-byte aligned, as CUPTI's are.
// In the library, cuptiActivityGetNextRecord does the same for any kind; this walker lets tests
// and tools read buffers without libcupti.
const CUpti_Activity* NextCuptiRecord(const uint8_t* buffer, size_t valid_size, size_t* offset);

// The CUDA driver API calls the library keeps from a window: the kernel launches and graph
// launches that libraries make through the driver directly (cuBLAS's CUTLASS kernels come through
// cuLaunchKernel, its GEMMs on CUDA 12+ through cuLaunchKernelEx, Triton and JAX/XLA use
// cuLaunchKernel). Without them such kernels have no launch on the host plane: XProf cannot give
// them a step. The window enables CUPTI_ACTIVITY_KIND_DRIVER (on an H100 with CUDA 13, libcupti
// gave no records at all for these calls enabled one by one with cuptiActivityEnableDriverApi:
// docs/gpu-verification.md) and the converter keeps the records of these calls only; the rest of
// the driver API is counted in ignored_records(). Their names are BuiltinApiName's for the driver
// domain. Stored in `*count`; the array is static.
struct ApiCallName {
  uint32_t cbid;     // CUPTI_DRIVER_TRACE_CBID_* or CUPTI_RUNTIME_TRACE_CBID_*
  const char* name;  // "cuLaunchKernelEx"
};
using DriverLaunchCall = ApiCallName;
const DriverLaunchCall* DriverLaunchCalls(size_t* count);

// The CUDA runtime calls a light window records one by one (PROFCTL_INJECT_WINDOW=launches, a
// diagnosis switch: docs/cupti.md) instead of every runtime call: the kernel and graph launches
// (the _ptsz forms and CUDA 13's __cudaLaunchKernel among them), copies, sets, synchronisation and
// allocation, the calls the breakdown reads. BuiltinApiName names each of them.
const ApiCallName* RuntimeWindowCalls(size_t* count);

// Name of a CUDA API call from its CUPTI domain (ApiDomain) and callback id, or nullptr. The
// library passes one built on cuptiGetCallbackName; without it a small built-in table of the
// common runtime calls (and of DriverLaunchCalls) is used.
using ApiNameFn = const char* (*)(uint8_t domain, uint32_t cbid);
const char* BuiltinApiName(uint8_t domain, uint32_t cbid);

// The step signal's view of a record: a MARKER start (with its name) or end goes to `tracker`,
// which keeps step ranges only (step_samples.h); other records and instantaneous markers are
// ignored. Times stay on the GPU clock. Allocates nothing.
void AddStepMarker(const CUpti_Activity& record, StepRangeTracker* tracker);

// Converts CUPTI records into a writer's batch. NVTX push/pop (and start/end) markers come as two
// records, flags START (name, id) and END (same id): the start waits here until its end arrives,
// across buffers and batches, and the pair becomes one NvtxRangeRecord. At most kMaxOpenRanges
// wait; more starts are dropped and counted. Not thread-safe (one per buffer-completed callback
// thread, as the writer).
class CuptiRecordConverter {
 public:
  static constexpr size_t kMaxOpenRanges = 65536;

  // `writer` must outlive the converter; `api_name` may be nullptr (BuiltinApiName).
  explicit CuptiRecordConverter(RecordBatchWriter* writer, ApiNameFn api_name = nullptr)
      : writer_(writer), api_name_(api_name != nullptr ? api_name : &BuiltinApiName) {}

  // One record. Kinds other than CONCURRENT_KERNEL, KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER,
  // MARKER, MEMORY2, DEVICE and SYNCHRONIZATION are ignored (counted).
  void Add(const CUpti_Activity& record);
  // Every record of a completed buffer, walked with NextCuptiRecord.
  void AddBuffer(const uint8_t* buffer, size_t valid_size);

  size_t open_ranges() const { return open_.size(); }
  uint64_t ignored_records() const { return ignored_; }
  // NVTX ends without a start, and starts dropped because kMaxOpenRanges were open.
  uint64_t unmatched_markers() const { return unmatched_; }

 private:
  struct OpenRange {
    uint64_t start_ns = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    std::string name;
    std::string domain;
  };
  void AddMarker(const CUpti_ActivityMarker2& m);

  RecordBatchWriter* writer_;
  ApiNameFn api_name_;
  std::unordered_map<uint32_t, OpenRange> open_;
  uint64_t ignored_ = 0;
  uint64_t unmatched_ = 0;
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_CUPTI_RECORDS_H_
