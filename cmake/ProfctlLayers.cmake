# Who may use what: one row per folder, naming the folders its code may use directly (and so,
# through their rows, everything below them). Folders not listed here (tests/, bench/, fuzz/) may
# use everything; test and benchmark code of a listed folder may also use the folders
# profctl_test_may_use() names (the shared fakes in tests/, the simulated job as an input, and
# the readers that check what a collector wrote). profctl_check_layering() (ProfctlTargets.cmake) refuses a target that links past its row,
# and every build checks every #include "..." against it (CheckIncludes.cmake). agent/ and
# coordinator/ never use each other, whatever a row says. Why this shape:
# docs/design/decisions.md, "The house".
include_guard(GLOBAL)

profctl_layer(proto)
profctl_layer(common)                                      # base: no gRPC, no proto
profctl_layer(common/net        MAY_USE common)            # gRPC/OpenSSL/Beast: auth, metrics
profctl_layer(xspace            MAY_USE common proto)      # the trace model
profctl_layer(synthetic         MAY_USE xspace)            # the simulated training job
profctl_layer(analysis          MAY_USE xspace)            # steps, categories, alignment
profctl_layer(analysis/readers  MAY_USE analysis)          # XSpace wire, Kineto JSON
profctl_layer(analysis/tools    MAY_USE analysis/readers)  # the profiler tools
profctl_layer(report            MAY_USE analysis/tools)    # writers of every output
profctl_layer(inject)                                      # in the user's process: libc + CUPTI

profctl_layer(agent/collectors       MAY_USE proto)            # the Collector interface
profctl_layer(agent/collectors/synthetic MAY_USE agent/collectors synthetic)
profctl_layer(agent/collectors/tsl       MAY_USE agent/collectors xspace)
profctl_layer(agent/collectors/cupti     MAY_USE agent/collectors xspace inject)
profctl_layer(agent             MAY_USE agent/collectors/synthetic agent/collectors/tsl
                                        agent/collectors/cupti common/net)
profctl_layer(agent/service     MAY_USE agent)             # gRPC adapters, the server

profctl_layer(coordinator/clients  MAY_USE common/net xspace)
profctl_layer(coordinator/session  MAY_USE coordinator/clients)
profctl_layer(coordinator/plan     MAY_USE coordinator/clients analysis)
profctl_layer(coordinator/engine   MAY_USE coordinator/plan coordinator/session report)
profctl_layer(coordinator/schedule MAY_USE coordinator/plan coordinator/session)
profctl_layer(coordinator/service  MAY_USE coordinator/schedule coordinator/engine)
profctl_layer(coordinator/offline  MAY_USE coordinator/engine)
profctl_layer(coordinator/cli      MAY_USE coordinator/service coordinator/offline)

profctl_test_may_use(tests synthetic analysis/readers)

# One test binary per layer (profctl_cc_test puts a folder's tests in the binary of the nearest
# folder named here): every gtest binary links gRPC and protobuf, and 38 links were most of a
# build. Tests that start real processes (REAL_PROCESSES) share one binary whose tests take a
# CTest resource lock, so `ctest -j` never runs two of them side by side.
profctl_test_binary(base_tests        common  PARTS_OF common xspace synthetic inject)
profctl_test_binary(analysis_tests    analysis PARTS_OF analysis report)
profctl_test_binary(agent_tests       agent PARTS_OF agent)
profctl_test_binary(coordinator_tests coordinator PARTS_OF coordinator)
profctl_test_binary(integration_tests tests PARTS_OF tests)
profctl_test_binary(process_tests     tests)
profctl_test_binary(fuzz_corpus_tests fuzz PARTS_OF fuzz)
set(PROFCTL_REAL_PROCESS_TEST_BINARY process_tests)
set(PROFCTL_REAL_PROCESS_LOCK profctl_real_processes)
# COST: on a first run (no CTest history yet) the locked chain starts first, and the other tests
# fill the free slots beside it instead of waiting on its tail.
set(PROFCTL_REAL_PROCESS_COST 100)
profctl_test_binary_properties(process_tests RESOURCE_LOCK ${PROFCTL_REAL_PROCESS_LOCK}
                               COST ${PROFCTL_REAL_PROCESS_COST})
