# Build options shared by every profctl target.
option(PROFCTL_BUILD_TESTS "Build unit and end-to-end tests" ON)
option(PROFCTL_BUILD_BENCHMARKS "Build Google Benchmark programs in bench/" ON)
option(PROFCTL_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(PROFCTL_WERROR "Treat warnings in profctl's own code as errors" ON)

find_program(PROFCTL_CCACHE ccache)
if(PROFCTL_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${PROFCTL_CCACHE})
endif()

if(PROFCTL_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Warnings for profctl's own targets (never for generated code).
function(profctl_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor)
  if(PROFCTL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# profctl_test(NAME SOURCES... DEPS ...): one GoogleTest binary registered with CTest.
function(profctl_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  profctl_warnings(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
endfunction()
