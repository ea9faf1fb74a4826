// A probe for LimitMallocArenas (process_setup_test.cc): starts 8 threads that each allocate
// while all of them are alive, then prints how many arenas glibc's malloc made (malloc_info's
// <heap> elements). `limit N` first calls LimitMallocArenas(N). Built without sanitizers, whose
// malloc is not glibc's.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "common/process_setup.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "limit") == 0) {
    if (!profctl::LimitMallocArenas(std::atoi(argv[2]))) {
      std::fprintf(stderr, "malloc_arena_probe: mallopt(M_ARENA_MAX) refused\n");
      return 2;
    }
  } else if (argc != 2 || std::strcmp(argv[1], "default") != 0) {
    std::fprintf(stderr, "usage: malloc_arena_probe default|limit N\n");
    return 2;
  }
  constexpr int kThreads = 8;
  std::latch allocated(kThreads), done(1);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<void*> blocks;
      blocks.reserve(64);
      for (int i = 0; i < 64; ++i) blocks.push_back(std::malloc(1024));
      allocated.count_down();
      done.wait();  // every thread holds its arena until all have taken one
      for (void* b : blocks) std::free(b);
    });
  }
  allocated.wait();
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (out == nullptr || malloc_info(0, out) != 0) return 2;
  std::fclose(out);
  int heaps = 0;
  for (const char* p = text; (p = std::strstr(p, "<heap nr=")) != nullptr; ++p) ++heaps;
  std::free(text);
  done.count_down();
  for (std::thread& t : threads) t.join();
  std::printf("%d\n", heaps);
  return 0;
}
