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

# The Prometheus test's job (prometheus_test.py, docs/metrics.md).
add_executable(orbite-metrics-job ${CMAKE_CURRENT_LIST_DIR}/metrics_job.cpp)
target_link_libraries(orbite-metrics-job PRIVATE orbite_internal orbite_warnings)
set_target_properties(orbite-metrics-job PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
# Debian's prometheus scrapes the job and promtool lints its exposition; the test fails (it does
# not skip) where they are missing. Debian's interpreter runs it (stdlib only).
find_program(ORBITE_SYSTEM_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(ORBITE_WITH_METRICS AND ORBITE_SYSTEM_PYTHON)
  # On softverbs where it is built: the RDMA and NIC families are scraped and linted too.
  set(_orbite_prom_nic "")
  if(TARGET softverbs)
    set(_orbite_prom_nic "$<TARGET_FILE_DIR:softverbs>")
  endif()
  add_test(NAME prometheus
    COMMAND ${ORBITE_SYSTEM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/prometheus_test.py
      $<TARGET_FILE:orbite-run> $<TARGET_FILE:orbite-metrics-job> ${_orbite_prom_nic})
  set_tests_properties(prometheus PROPERTIES LABELS integration TIMEOUT 240)
else()
  message(STATUS "the prometheus test needs the metrics exporter and /usr/bin/python3: not registered")
endif()
