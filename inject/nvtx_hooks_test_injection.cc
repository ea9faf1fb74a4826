// NVTX's static injection for nvtx_hooks_test: a strong definition of the weak pointer NVTX's
// header-only implementation declares, in a file without that implementation (a second
// definition would clash).
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

namespace profctl::inject {
int NVTX_API NvtxHooksTestInjection(NvtxGetExportTableFunc_t get_export_table);
}  // namespace profctl::inject

extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr =
    &profctl::inject::NvtxHooksTestInjection;
}
