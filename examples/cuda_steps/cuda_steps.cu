// A small training-like CUDA loop for trying profctl's GPU tracing (docs/cupti.md): every step is
// an NVTX range "train_step <n>" holding a host-to-device copy of the batch, a few compute
// kernels (a tiled matmul and an elementwise activation), an all-reduce-shaped pair of kernels
// (reduce-scatter then all-gather over gradient chunks, as NCCL's ring does within one GPU) and a
// device-to-host copy of the loss. Nothing in it knows about profctl: run it under injection,
//
//   CUDA_INJECTION64_PATH=/path/to/libprofctl_inject.so \
//   NVTX_INJECTION64_PATH=/path/to/libprofctl_inject.so ./cuda_steps --steps=2000
//
// and capture the agent's host with `profctl capture`. It prints the mean step time at the end
// (for overhead measurements: run it with and without the library loaded).
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                 \
  do {                                                                   \
    cudaError_t err_ = (call);                                           \
    if (err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(err_));                            \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

constexpr int kTile = 16;

__global__ void MatmulKernel(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[kTile][kTile];
  __shared__ float tb[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float sum = 0.f;
  for (int t = 0; t < n; t += kTile) {
    ta[threadIdx.y][threadIdx.x] =
        row < n && t + threadIdx.x < n ? a[row * n + t + threadIdx.x] : 0.f;
    tb[threadIdx.y][threadIdx.x] =
        col < n && t + threadIdx.y < n ? b[(t + threadIdx.y) * n + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = sum;
}

__global__ void GeluKernel(float* x, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

// Reduce-scatter: chunk r of the result is the sum of chunk r of every "rank's" gradient.
__global__ void ReduceScatterKernel(const float* grads, float* reduced, int ranks, int chunk) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= ranks * chunk) return;
  float sum = 0.f;
  for (int r = 0; r < ranks; ++r) sum += grads[r * ranks * chunk + i];
  reduced[i] = sum / ranks;
}

// All-gather: every "rank" gets the whole reduced vector.
__global__ void AllGatherKernel(const float* reduced, float* grads, int ranks, int chunk) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int total = ranks * chunk;
  if (i >= total * ranks) return;
  grads[i] = reduced[i % total];
}

__global__ void LossKernel(const float* x, float* loss, int count) {
  __shared__ float partial[256];
  float sum = 0.f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += x[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0] / count;
}

int IntFlag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoi(argv[i] + prefix.size());
    }
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = IntFlag(argc, argv, "steps", 200);
  const int n = IntFlag(argc, argv, "size", 1024);          // matmul dimension
  const int layers = IntFlag(argc, argv, "layers", 4);      // matmul + gelu per layer
  const int ranks = IntFlag(argc, argv, "ranks", 8);        // all-reduce width
  const int chunk = IntFlag(argc, argv, "chunk", 1 << 16);  // floats per rank chunk
  const int warmup = IntFlag(argc, argv, "warmup", 10);
  const size_t matrix = static_cast<size_t>(n) * n;
  const size_t grad_count = static_cast<size_t>(ranks) * ranks * chunk;

  float* host_batch = nullptr;
  CHECK_CUDA(cudaMallocHost(&host_batch, matrix * sizeof(float)));
  for (size_t i = 0; i < matrix; ++i) host_batch[i] = static_cast<float>(i % 97) / 97.f;
  float *batch, *weights, *act, *grads, *reduced, *loss;
  CHECK_CUDA(cudaMalloc(&batch, matrix * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&weights, matrix * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&act, matrix * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&grads, grad_count * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&reduced, static_cast<size_t>(ranks) * chunk * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&loss, sizeof(float)));
  CHECK_CUDA(cudaMemset(weights, 0, matrix * sizeof(float)));
  CHECK_CUDA(cudaMemset(grads, 0, grad_count * sizeof(float)));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  const dim3 tile(kTile, kTile);
  const dim3 grid((n + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  const int threads = 256;
  float host_loss = 0.f;
  double total_ms = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    const std::string name = "train_step " + std::to_string(step);
    const auto start = std::chrono::steady_clock::now();
    nvtxRangePushA(name.c_str());
    nvtxRangePushA("data");
    CHECK_CUDA(
        cudaMemcpyAsync(batch, host_batch, matrix * sizeof(float), cudaMemcpyHostToDevice, stream));
    nvtxRangePop();
    nvtxRangePushA("forward_backward");
    const float* in = batch;
    for (int l = 0; l < layers; ++l) {
      MatmulKernel<<<grid, tile, 0, stream>>>(in, weights, act, n);
      GeluKernel<<<(matrix + threads - 1) / threads, threads, 0, stream>>>(act, matrix);
      in = act;
    }
    nvtxRangePop();
    nvtxRangePushA("allreduce");
    ReduceScatterKernel<<<(ranks * chunk + threads - 1) / threads, threads, 0, stream>>>(
        grads, reduced, ranks, chunk);
    AllGatherKernel<<<(grad_count + threads - 1) / threads, threads, 0, stream>>>(reduced, grads,
                                                                                  ranks, chunk);
    nvtxRangePop();
    LossKernel<<<1, 256, 0, stream>>>(act, loss, matrix);
    CHECK_CUDA(cudaMemcpyAsync(&host_loss, loss, sizeof(float), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    nvtxRangePop();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step >= warmup) total_ms += ms;
  }
  std::printf("cuda_steps: %d steps, mean step %.3f ms (size %d, layers %d, loss %g)\n", steps,
              steps > 0 ? total_ms / steps : 0.0, n, layers, host_loss);
  CHECK_CUDA(cudaStreamDestroy(stream));
  cudaFree(batch);
  cudaFree(weights);
  cudaFree(act);
  cudaFree(grads);
  cudaFree(reduced);
  cudaFree(loss);
  cudaFreeHost(host_batch);
  return 0;
}
