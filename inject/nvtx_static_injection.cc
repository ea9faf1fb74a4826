// NVTX's static injection for a test or benchmark binary that is an NVTX module (it includes
// NVTX's header-only implementation) and defines profctl::inject::NvtxStaticInjection: a strong
// definition of the pointer NVTX's implementation declares weak, in a file without that
// implementation (a second definition would clash). NVTX takes it when NVTX_INJECTION64_PATH is
// unset.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

namespace profctl::inject {
int NVTX_API NvtxStaticInjection(NvtxGetExportTableFunc_t get_export_table);
}  // namespace profctl::inject

extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr =
    &profctl::inject::NvtxStaticInjection;
}
