# Target helpers (in the spirit of Abseil's absl_cc_library) and the layering rules they enforce.
#
# Every profctl target is declared through one of these, from the folder it belongs to:
#   profctl_cc_library(NAME n SRCS ... [HDRS ...] [DEPS ...] [PRIVATE_DEPS ...] [PIC_HIDDEN])
#   profctl_cc_binary(NAME n SRCS ... [DEPS ...])
#   profctl_cc_test(NAME n SRCS ... [DEPS ...] [DEFINES ...] [REAL_PROCESSES])
#                                                                    GoogleTest, in its layer's test
#                                                                    binary, registered with CTest
#   profctl_cc_benchmark(NAME n SRCS ... [DEPS ...])                 Google Benchmark
# A library with no SRCS is header-only (an INTERFACE target). DEPS are public (what the
# headers need), PRIVATE_DEPS what only the sources need.
#
# Layering (docs/design/decisions.md, "The house"): cmake/ProfctlLayers.cmake states, per folder,
# which folders its code may use. At the end of configuring, profctl_check_layering() refuses any
# profctl target that links a target of a folder its own folder may not use, and writes the table
# that cmake/CheckIncludes.cmake holds every #include "..." of every source against, as a step of
# every build: a wrong include or link fails the build, not a review.

include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/ProfctlLayerRules.cmake)

# Warnings for profctl's own targets (never for generated code). -Werror only with
# PROFCTL_WERROR (./dev and CI turn it on; a plain build with another compiler should not fail
# on a warning that compiler invents). Under clang also -Wthread-safety, always an error:
# ABSL_GUARDED_BY and friends are checked.
function(profctl_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wnon-virtual-dtor)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${target} PRIVATE -Wthread-safety -Werror=thread-safety)
  else()
    target_compile_options(${target} PRIVATE -Wshadow=local)
  endif()
  if(PROFCTL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
    # g++ 12's -Wmaybe-uninitialized at -O2/-O3 reports std::string members of aggregates built
    # with default member initializers (CapturePlan{}.retries, ReaderOptions in CapturePlan) as
    # maybe uninitialized: a known false positive of its inliner (GCC PR 105562 and friends). It
    # stays a warning there; the Debug/ASan build, which never reports it falsely, keeps it an
    # error.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
      target_compile_options(${target} PRIVATE -Wno-error=maybe-uninitialized)
    endif()
  endif()
endfunction()

# The folder of the calling CMakeLists.txt, relative to the project ("." for the root).
function(_profctl_folder out)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  if(rel STREQUAL "")
    set(rel ".")
  endif()
  set(${out} ${rel} PARENT_SCOPE)
endfunction()

function(_profctl_register name kind deps)
  _profctl_folder(folder)
  set_property(GLOBAL APPEND PROPERTY PROFCTL_TARGETS ${name})
  set_property(GLOBAL PROPERTY PROFCTL_FOLDER_${name} ${folder})
  set_property(GLOBAL PROPERTY PROFCTL_KIND_${name} ${kind})
  set_property(GLOBAL PROPERTY PROFCTL_DEPS_${name} "${deps}")
  set_property(GLOBAL APPEND PROPERTY PROFCTL_FOLDERS ${folder})
endfunction()

function(profctl_cc_library)
  cmake_parse_arguments(A "PIC_HIDDEN" "NAME" "SRCS;HDRS;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT A_NAME)
    message(FATAL_ERROR "profctl_cc_library: NAME is required")
  endif()
  if(A_SRCS)
    add_library(${A_NAME} STATIC ${A_SRCS} ${A_HDRS})
    target_include_directories(${A_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${A_NAME} PUBLIC ${A_DEPS} PRIVATE ${A_PRIVATE_DEPS})
    profctl_warnings(${A_NAME})
    if(A_PIC_HIDDEN)
      set_target_properties(${A_NAME} PROPERTIES
        POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
    endif()
  else()
    if(A_PRIVATE_DEPS)
      message(FATAL_ERROR "profctl_cc_library(${A_NAME}): header-only, PRIVATE_DEPS mean nothing")
    endif()
    add_library(${A_NAME} INTERFACE ${A_HDRS})
    target_include_directories(${A_NAME} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${A_NAME} INTERFACE ${A_DEPS})
  endif()
  _profctl_register(${A_NAME} library "${A_DEPS};${A_PRIVATE_DEPS}")
endfunction()

function(profctl_cc_binary)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  profctl_warnings(${A_NAME})
  _profctl_register(${A_NAME} binary "${A_DEPS}")
  set_property(GLOBAL APPEND PROPERTY PROFCTL_BINARY_SOURCES_${A_NAME} ${A_SRCS})
endfunction()

# A test's sources compile into an object library named NAME, linked into its layer's one test
# binary (profctl_test_binary below): every gtest binary links gRPC and protobuf, and the links,
# not the compiles, were most of a build. NAME still takes target_* calls (definitions, links,
# dependencies). REAL_PROCESSES: the tests start real processes or lean on real time (they go to
# the binary whose tests never run beside each other, profctl_real_process_test_properties).
function(profctl_cc_test)
  cmake_parse_arguments(A "REAL_PROCESSES" "NAME" "SRCS;DEPS;DEFINES" ${ARGN})
  add_library(${A_NAME} OBJECT ${A_SRCS})
  target_link_libraries(${A_NAME} PUBLIC ${A_DEPS} GTest::gmock GTest::gtest)
  if(A_DEFINES)
    target_compile_definitions(${A_NAME} PRIVATE ${A_DEFINES})
  endif()
  profctl_warnings(${A_NAME})
  _profctl_register(${A_NAME} test "${A_DEPS}")
  _profctl_folder(folder)
  if(A_REAL_PROCESSES)
    set(binary ${PROFCTL_REAL_PROCESS_TEST_BINARY})
  else()
    _profctl_test_binary_of(${folder} binary)
  endif()
  set_property(GLOBAL APPEND PROPERTY PROFCTL_TEST_PARTS_${binary} ${A_NAME})
endfunction()

# profctl_test_binary(NAME FOLDER PARTS_OF FOLDER...): one gtest binary, <build>/FOLDER/NAME,
# holding the tests of every folder in PARTS_OF and the folders below them.
function(profctl_test_binary name folder)
  cmake_parse_arguments(A "" "" "PARTS_OF" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY PROFCTL_TEST_BINARIES ${name})
  set_property(GLOBAL PROPERTY PROFCTL_TEST_BINARY_FOLDER_${name} ${folder})
  foreach(f IN LISTS A_PARTS_OF)
    set_property(GLOBAL PROPERTY PROFCTL_TEST_BINARY_OF_${f} ${name})
  endforeach()
endfunction()

# out = the test binary of `folder`: that of the folder itself or of the nearest one above it.
function(_profctl_test_binary_of folder out)
  set(f ${folder})
  while(TRUE)
    get_property(b GLOBAL PROPERTY PROFCTL_TEST_BINARY_OF_${f})
    if(b)
      set(${out} ${b} PARENT_SCOPE)
      return()
    endif()
    if(NOT f MATCHES "/")
      message(FATAL_ERROR "profctl_cc_test in ${folder}/: no test binary holds this folder's "
                          "tests (add it to a profctl_test_binary in cmake/ProfctlLayers.cmake)")
    endif()
    string(REGEX REPLACE "/[^/]*$" "" f ${f})
  endwhile()
endfunction()

# Links every test binary from its parts and registers its tests with CTest, one CTest test per
# gtest test. Called once, after every folder declared its tests.
function(profctl_link_test_binaries)
  get_property(binaries GLOBAL PROPERTY PROFCTL_TEST_BINARIES)
  foreach(b IN LISTS binaries)
    get_property(parts GLOBAL PROPERTY PROFCTL_TEST_PARTS_${b})
    if(NOT parts)
      continue()
    endif()
    get_property(folder GLOBAL PROPERTY PROFCTL_TEST_BINARY_FOLDER_${b})
    add_executable(${b})
    target_link_libraries(${b} PRIVATE ${parts} GTest::gtest_main)
    set_target_properties(${b} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/${folder})
    # Not position-independent: CTest starts the binary once per test, and a PIE this size (ASan,
    # every layer's libraries) spends each start applying millions of relocations.
    target_link_options(${b} PRIVATE -no-pie)
    get_property(properties GLOBAL PROPERTY PROFCTL_TEST_PROPERTIES_${b})
    # NO_PRETTY_VALUES: a value-parameterized test is named by its name generator
    # (".../eight_gpus_thirteen_kernels"), without gtest's "  # GetParam() = 80-byte object <...>"
    # dump, which made the longest test name 365 characters and padded every line of ctest's
    # output to it (a CI log that keeps its tail then held four lines).
    gtest_discover_tests(${b} DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES PROPERTIES ${properties})
  endforeach()
endfunction()

# profctl_test_binary_properties(NAME PROP VALUE ...): CTest properties of every test of one binary.
function(profctl_test_binary_properties name)
  set_property(GLOBAL APPEND PROPERTY PROFCTL_TEST_PROPERTIES_${name} ${ARGN})
endfunction()

function(profctl_cc_benchmark)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} benchmark::benchmark)
  profctl_warnings(${A_NAME})
  _profctl_register(${A_NAME} test "${A_DEPS}")
endfunction()

# --- layering ------------------------------------------------------------------------------

# profctl_layer(FOLDER [MAY_USE FOLDER...]): code in FOLDER may use its own folder and, through
# the table, every folder those may use. Folders not in the table (tests/, bench/, fuzz/) may use
# everything.
function(profctl_layer folder)
  cmake_parse_arguments(A "" "" "MAY_USE" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY PROFCTL_LAYERS ${folder})
  set_property(GLOBAL PROPERTY PROFCTL_LAYER_${folder} "${A_MAY_USE}")
endfunction()

# profctl_test_may_use(FOLDER...): what every folder's tests and benchmarks may use besides
# their own folder's rules (the shared fakes, the simulated job, ...).
function(profctl_test_may_use)
  set_property(GLOBAL APPEND PROPERTY PROFCTL_TEST_MAY_USE ${ARGN})
endfunction()

# out = every folder `folder` may use (itself included), following the table.
function(_profctl_closure folder out)
  set(seen ${folder})
  set(todo ${folder})
  while(todo)
    list(POP_FRONT todo f)
    get_property(uses GLOBAL PROPERTY PROFCTL_LAYER_${f})
    foreach(u IN LISTS uses)
      if(NOT u IN_LIST seen)
        list(APPEND seen ${u})
        list(APPEND todo ${u})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# What code of `folder` may use: "*" (anything) for folders outside the table. Test and
# benchmark code may use what profctl_test_may_use() names too; a binary's main may use the folders
# under its own.
function(_profctl_allowed folder kind out)
  get_property(layers GLOBAL PROPERTY PROFCTL_LAYERS)
  profctl_layer_of("${layers}" ${folder} layer)
  if(layer STREQUAL "")
    set(${out} "*" PARENT_SCOPE)
    return()
  endif()
  _profctl_closure(${layer} allowed)
  list(APPEND allowed ${folder})
  if(kind STREQUAL "test")
    get_property(test_uses GLOBAL PROPERTY PROFCTL_TEST_MAY_USE)
    foreach(u IN LISTS test_uses)
      _profctl_closure(${u} sub)
      list(APPEND allowed ${sub})
    endforeach()
  elseif(kind STREQUAL "binary")
    foreach(l IN LISTS layers)
      if(l MATCHES "^${folder}/")
        _profctl_closure(${l} sub)
        list(APPEND allowed ${sub})
      endif()
    endforeach()
  endif()
  list(REMOVE_DUPLICATES allowed)
  set(${out} "${allowed}" PARENT_SCOPE)
endfunction()

# Checks every registered target's links against the table and writes the table for
# CheckIncludes.cmake; adds the build step that checks every include.
function(profctl_check_layering)
  # The two sides never use each other, whatever the table says.
  get_property(layers GLOBAL PROPERTY PROFCTL_LAYERS)
  foreach(l IN LISTS layers)
    _profctl_closure(${l} c)
    foreach(side_pair "agent;coordinator" "coordinator;agent")
      list(GET side_pair 0 a)
      list(GET side_pair 1 b)
      if(l STREQUAL a OR l MATCHES "^${a}/")
        foreach(u IN LISTS c)
          if(u STREQUAL b OR u MATCHES "^${b}/")
            message(FATAL_ERROR "layering: ${l} may use ${u} (cmake/ProfctlLayers.cmake): "
                                "${a}/ and ${b}/ never use each other")
          endif()
        endforeach()
      endif()
    endforeach()
  endforeach()

  get_property(targets GLOBAL PROPERTY PROFCTL_TARGETS)
  set(errors "")
  foreach(t IN LISTS targets)
    get_property(folder GLOBAL PROPERTY PROFCTL_FOLDER_${t})
    get_property(kind GLOBAL PROPERTY PROFCTL_KIND_${t})
    get_property(deps GLOBAL PROPERTY PROFCTL_DEPS_${t})
    _profctl_allowed(${folder} ${kind} allowed)
    foreach(d IN LISTS deps)
      if(d STREQUAL "" OR NOT d IN_LIST targets)
        continue()
      endif()
      get_property(dfolder GLOBAL PROPERTY PROFCTL_FOLDER_${d})
      profctl_may_use("${layers}" "${allowed}" ${dfolder} ok)
      if(NOT ok)
        string(APPEND errors "\n  ${t} (${folder}/) links ${d} (${dfolder}/)")
      endif()
    endforeach()
  endforeach()
  if(errors)
    message(FATAL_ERROR "layering: targets link what their folder may not use "
                        "(cmake/ProfctlLayers.cmake):${errors}")
  endif()

  # The include table: one line per folder and kind, "folder|kind|allowed;folders".
  get_property(folders GLOBAL PROPERTY PROFCTL_FOLDERS)
  list(REMOVE_DUPLICATES folders)
  string(REPLACE ";" "," layer_list "${layers}")
  set(table "layers|all|${layer_list}\n")
  foreach(f IN LISTS folders)
    foreach(kind library test)
      _profctl_allowed(${f} ${kind} allowed)
      string(REPLACE ";" "," allowed "${allowed}")
      string(APPEND table "${f}|${kind}|${allowed}\n")
    endforeach()
  endforeach()
  foreach(t IN LISTS targets)
    get_property(kind GLOBAL PROPERTY PROFCTL_KIND_${t})
    if(kind STREQUAL "binary")
      get_property(folder GLOBAL PROPERTY PROFCTL_FOLDER_${t})
      get_property(srcs GLOBAL PROPERTY PROFCTL_BINARY_SOURCES_${t})
      _profctl_allowed(${folder} binary allowed)
      string(REPLACE ";" "," allowed "${allowed}")
      foreach(s IN LISTS srcs)
        string(APPEND table "${folder}/${s}|file|${allowed}\n")
      endforeach()
    endif()
  endforeach()
  set(table_file ${PROJECT_BINARY_DIR}/profctl_layering.txt)
  file(WRITE ${table_file}.new "${table}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${table_file}.new ${table_file})

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS LIST_DIRECTORIES false RELATIVE ${PROJECT_SOURCE_DIR}
       ${PROJECT_SOURCE_DIR}/*.h ${PROJECT_SOURCE_DIR}/*.cc)
  list(FILTER sources EXCLUDE REGEX "^(build|fuzz/corpus|\\.git)/")
  file(RELATIVE_PATH binary_rel ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  if(NOT binary_rel MATCHES "^\\.\\.")  # a build folder inside the tree: not sources
    list(FILTER sources EXCLUDE REGEX "^${binary_rel}/")
  endif()
  # The script checks exactly these (a new source reconfigures: CONFIGURE_DEPENDS).
  set(sources_file ${PROJECT_BINARY_DIR}/profctl_sources.txt)
  string(REPLACE ";" "\n" sources_text "${sources}")
  file(WRITE ${sources_file}.new "${sources_text}\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${sources_file}.new ${sources_file})
  list(TRANSFORM sources PREPEND ${PROJECT_SOURCE_DIR}/ OUTPUT_VARIABLE source_paths)
  set(stamp ${PROJECT_BINARY_DIR}/profctl_layering.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DTABLE=${table_file}
            -DSOURCES=${sources_file} -DSTAMP=${stamp}
            -P ${PROJECT_SOURCE_DIR}/cmake/CheckIncludes.cmake
    DEPENDS ${source_paths} ${table_file} ${sources_file}
            ${PROJECT_SOURCE_DIR}/cmake/CheckIncludes.cmake
            ${PROJECT_SOURCE_DIR}/cmake/ProfctlLayerRules.cmake
    COMMENT "Checking every #include against cmake/ProfctlLayers.cmake"
    VERBATIM)
  add_custom_target(profctl_layering ALL DEPENDS ${stamp})
endfunction()
