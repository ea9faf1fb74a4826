# Build options shared by every profctl target.
option(PROFCTL_BUILD_TESTS "Build unit and end-to-end tests" ON)
option(PROFCTL_BUILD_BENCHMARKS "Build Google Benchmark programs in bench/" ON)
option(PROFCTL_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
# -Werror: on in ./dev and CI, off for a plain build (another compiler's new warning should not
# break someone's release build).
option(PROFCTL_WERROR "Treat warnings in profctl's own code as errors" OFF)
# libFuzzer targets in fuzz/ (clang only; docs/fuzzing.md). Everything is then compiled with
# coverage instrumentation (-fsanitize=fuzzer-no-link), ASan and UBSan, and profctl's own code with
# clang's -Wthread-safety as an error, which checks the ABSL_GUARDED_BY annotations g++ ignores.
option(PROFCTL_FUZZ "Build the libFuzzer targets in fuzz/ (clang only)" OFF)

# lld (Debian's `lld`, scripts/bootstrap.sh) links a test binary (gRPC, protobuf, ASan, -g) in a
# fraction of ld.bfd's time; links were most of a warm build.
find_program(PROFCTL_LLD ld.lld)
option(PROFCTL_USE_LLD "Link with lld when it is installed" ON)
if(PROFCTL_USE_LLD AND PROFCTL_LLD)
  add_link_options(-fuse-ld=lld)
endif()

# Unity (jumbo) compiles: each target's sources compiled in batches of up to 16 per translation
# unit (cmake/ProfctlUnity.cmake writes the batches). A test build spends most of its time
# generating the same instantiated templates (gtest, gmock, absl, protobuf, gRPC) under ASan and
# UBSan in every file; a batch generates each once (7 report tests: 42.5 s apart, 23.7 s as one
# unit). ./dev turns it on for the test build (docs/ci.md); a plain build compiles file by file.
# Every source must hold up on its own too (its own includes, no file-level names shared with
# another source of its target).
option(PROFCTL_UNITY_BUILD "Compile each target's sources in batches (unity build)" OFF)
if(PROFCTL_UNITY_BUILD)
  # g++ warns when a class in an included file has a member of a type from an anonymous
  # namespace (right for a header, whose includers would each get their own type); a batch
  # includes each .cc file, so the warning would misfire on every .cc file's own private types.
  add_compile_options(-Wno-subobject-linkage)
endif()

find_program(PROFCTL_CCACHE ccache)
if(PROFCTL_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${PROFCTL_CCACHE})
endif()

if(PROFCTL_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PROFCTL_FUZZ=ON needs clang (CXX=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # The fuzzer binaries add -fsanitize=fuzzer (libFuzzer's main) at link time (fuzz/).
  add_compile_options(-fsanitize=fuzzer-no-link
                      -fsanitize-ignorelist=${CMAKE_CURRENT_LIST_DIR}/sanitizer_ignorelist.txt)
endif()

if(PROFCTL_SANITIZE OR PROFCTL_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# CUPTI (docs/cupti.md): only its headers are needed to build the CUPTI record
# conversion (inject/cupti_records.cc) and its tests; without them everything else builds and
# tests. libcupti, when found too, lets a test check our buffer walker against CUPTI's own.
find_path(PROFCTL_CUPTI_INCLUDE_DIR cupti_activity.h
          HINTS $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include /usr/local/cuda/include)
find_library(PROFCTL_CUPTI_LIBRARY cupti
             HINTS $ENV{CUDA_HOME}/lib64 $ENV{CUDA_PATH}/lib64 /usr/local/cuda/lib64)
if(PROFCTL_CUPTI_INCLUDE_DIR)
  set(_profctl_cupti_default ON)
else()
  set(_profctl_cupti_default OFF)
endif()
option(PROFCTL_CUPTI "Build the CUPTI record conversion (needs cupti_activity.h)"
       ${_profctl_cupti_default})
if(PROFCTL_CUPTI AND NOT PROFCTL_CUPTI_INCLUDE_DIR)
  message(FATAL_ERROR "PROFCTL_CUPTI=ON but cupti_activity.h was not found "
                      "(set PROFCTL_CUPTI_INCLUDE_DIR or CUDA_HOME)")
endif()
