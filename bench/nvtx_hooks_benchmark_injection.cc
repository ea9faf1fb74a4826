// NVTX's static injection for nvtx_hooks_benchmark (as inject/nvtx_hooks_test_injection.cc: a
// strong definition of the pointer NVTX's implementation declares weak, in a file without it).
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

namespace profctl::inject {
int NVTX_API NvtxHooksBenchInjection(NvtxGetExportTableFunc_t get_export_table);
}  // namespace profctl::inject

extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr =
    &profctl::inject::NvtxHooksBenchInjection;
}
