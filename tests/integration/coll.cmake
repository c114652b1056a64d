# Collective integration tests (included from tests/integration/CMakeLists.txt).

add_executable(orbite-coll-probe
  ${CMAKE_CURRENT_LIST_DIR}/coll_probe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/coll_probe_route.cpp
  ${CMAKE_CURRENT_LIST_DIR}/p2p_probe_support.cpp)
target_link_libraries(orbite-coll-probe PRIVATE orbite_internal orbite_warnings)
set_target_properties(orbite-coll-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)

orbite_add_gtest(coll_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/coll_test.cpp
  LABELS integration
  TIMEOUT 1500 COST 200)
target_compile_definitions(coll_test PRIVATE
  ORBITE_COLL_PROBE="$<TARGET_FILE:orbite-coll-probe>"
  ORBITE_RUN_BIN="$<TARGET_FILE:orbite-run>"
  ORBITE_SANITIZED=$<BOOL:${ORBITE_SANITIZE}>)
add_dependencies(coll_test orbite-coll-probe orbite-run)
if(TARGET softverbs)  # CollRdma runs the matrix on softverbs' default NIC
  target_compile_definitions(coll_test PRIVATE ORBITE_SOFTVERBS_DIR="$<TARGET_FILE_DIR:softverbs>")
  add_dependencies(coll_test softverbs)
endif()
