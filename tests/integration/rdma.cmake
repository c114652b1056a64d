# RDMA integration tests on softverbs (included from tests/integration/CMakeLists.txt when both
# the RDMA transport and softverbs are built).

add_executable(orbite-rdma-probe
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_faults.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_budgets.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_sched.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_cleanup.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_rails.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_rail_health.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_route.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_recovery.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_rendezvous.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_bounce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rdma_probe_numa.cpp
  ${CMAKE_CURRENT_LIST_DIR}/p2p_probe_support.cpp)
target_link_libraries(orbite-rdma-probe PRIVATE orbite_internal orbite_warnings ${CMAKE_DL_LIBS})
# Its scenario files each name their seeds and sizes alike (kOwnerSeed, kLength): no unity batch.
set_target_properties(orbite-rdma-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests
  UNITY_BUILD OFF)

add_executable(orbite-rdma-loader-probe ${CMAKE_CURRENT_LIST_DIR}/rdma_loader_probe.cpp)
target_link_libraries(orbite-rdma-loader-probe PRIVATE orbite orbite_warnings)
set_target_properties(orbite-rdma-loader-probe PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)

# A libibverbs.so.1 without ibv_create_qp, in a folder of its own.
add_library(orbite_stub_ibverbs SHARED ${CMAKE_CURRENT_LIST_DIR}/stub_ibverbs.c)
set_target_properties(orbite_stub_ibverbs PROPERTIES
  OUTPUT_NAME ibverbs SOVERSION 1 VERSION 1
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/stub-ibverbs)

# rdma_test: the data path; rdma_setup_test: the loader, the capability checks and the MR cache.
foreach(_rdma_gtest rdma_test rdma_setup_test)
  orbite_add_gtest(${_rdma_gtest}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/${_rdma_gtest}.cpp
    LABELS "integration;rdma"
    TIMEOUT 900)
  target_compile_definitions(${_rdma_gtest} PRIVATE
    ORBITE_RDMA_PROBE="$<TARGET_FILE:orbite-rdma-probe>"
    ORBITE_RDMA_LOADER_PROBE="$<TARGET_FILE:orbite-rdma-loader-probe>"
    ORBITE_RUN_BIN="$<TARGET_FILE:orbite-run>"
    ORBITE_SOFTVERBS_DIR="$<TARGET_FILE_DIR:softverbs>"
    ORBITE_SOFTVERBS_CONFIGS="${PROJECT_SOURCE_DIR}/softverbs/configs"
    ORBITE_STUB_IBVERBS="$<TARGET_FILE:orbite_stub_ibverbs>"
    ORBITE_SANITIZED=$<BOOL:${ORBITE_SANITIZE}>)
  add_dependencies(${_rdma_gtest} orbite-rdma-probe orbite-rdma-loader-probe orbite-run softverbs
    orbite_stub_ibverbs)
endforeach()
# Each data-path case runs two or three processes with a lane, a monitor and a softverbs NIC
# thread each: on a 2-core machine they run alone.
# (measured: two halves of it side by side took 144 and 166 s under TSan, against 144 s for the
# whole alone).
set_tests_properties(rdma_test PROPERTIES RUN_SERIAL TRUE COST 150)
