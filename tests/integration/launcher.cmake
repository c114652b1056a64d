# orbite-run's integration tests (included from tests/integration/CMakeLists.txt).

# A rank program for the tests: bootstraps from orbite-run's environment and misbehaves on demand.
add_executable(orbite-rank-probe ${CMAKE_CURRENT_LIST_DIR}/rank_probe.cpp)
target_link_libraries(orbite-rank-probe PRIVATE orbite_internal orbite_warnings)
set_target_properties(orbite-rank-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)

orbite_add_gtest(launcher_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/launcher_test.cpp
  LIBS orbite_launcher
  LABELS integration
  TIMEOUT 120)
target_compile_definitions(launcher_test PRIVATE
  ORBITE_RANK_PROBE="$<TARGET_FILE:orbite-rank-probe>"
  ORBITE_RUN_BIN="$<TARGET_FILE:orbite-run>")
add_dependencies(launcher_test orbite-rank-probe orbite-run)

# A 2-rank job that stalls on purpose (orbite-dump's test in tools_test.cpp, docs/hangs.md).
add_executable(orbite-stall-probe ${CMAKE_CURRENT_LIST_DIR}/stall_probe.cpp)
target_link_libraries(orbite-stall-probe PRIVATE orbite_internal orbite_warnings)
set_target_properties(orbite-stall-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
