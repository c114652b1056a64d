# Point-to-point and put/get integration tests (included from tests/integration/CMakeLists.txt).

# The rank program: one scenario per run, under orbite-run or started directly by the test.
add_executable(orbite-p2p-probe
  ${CMAKE_CURRENT_LIST_DIR}/p2p_probe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/p2p_probe_rma.cpp
  ${CMAKE_CURRENT_LIST_DIR}/p2p_probe_faults.cpp
  ${CMAKE_CURRENT_LIST_DIR}/p2p_probe_support.cpp)
target_link_libraries(orbite-p2p-probe PRIVATE orbite_internal orbite_warnings)
set_target_properties(orbite-p2p-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)

orbite_add_gtest(p2p_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/p2p_test.cpp
  LABELS integration
  TIMEOUT 600 COST 190)
target_compile_definitions(p2p_test PRIVATE
  ORBITE_P2P_PROBE="$<TARGET_FILE:orbite-p2p-probe>"
  ORBITE_RUN_BIN="$<TARGET_FILE:orbite-run>"
  ORBITE_SANITIZED=$<BOOL:${ORBITE_SANITIZE}>)
add_dependencies(p2p_test orbite-p2p-probe orbite-run)
if(TARGET softverbs)  # the rdma columns run on softverbs' default NIC
  target_compile_definitions(p2p_test PRIVATE ORBITE_SOFTVERBS_DIR="$<TARGET_FILE_DIR:softverbs>")
  add_dependencies(p2p_test softverbs)
endif()
