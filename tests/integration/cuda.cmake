# Device memory through tcp, shm and RDMA between real processes, on softcuda (included from
# tests/integration/CMakeLists.txt). The probe also talks to the driver (a producer kernel), so
# it links the CUDA toolkit's stub; at run time LD_LIBRARY_PATH names softcuda (and softverbs).
find_library(ORBITE_CUDA_STUB NAMES cuda HINTS ${ORBITE_CUDA_INCLUDE_DIR}/../lib64/stubs
             NO_DEFAULT_PATH REQUIRED)
add_executable(orbite-cuda-probe
  ${CMAKE_CURRENT_LIST_DIR}/cuda_probe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda_probe_direct.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda_probe_collectives.cpp
  ${CMAKE_CURRENT_LIST_DIR}/p2p_probe_support.cpp)
target_link_libraries(orbite-cuda-probe PRIVATE orbite_internal orbite_warnings ${ORBITE_CUDA_STUB})
target_include_directories(orbite-cuda-probe PRIVATE ${ORBITE_CUDA_INCLUDE_DIR}
                           ${PROJECT_SOURCE_DIR}/softcuda/include)
target_compile_definitions(orbite-cuda-probe PRIVATE ORBITE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
set_target_properties(orbite-cuda-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
add_dependencies(orbite-cuda-probe softcuda)

orbite_add_gtest(cuda_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_test.cpp
  LABELS "integration;cuda"
  TIMEOUT 600 COST 110)
target_compile_definitions(cuda_test PRIVATE
  ORBITE_CUDA_PROBE="$<TARGET_FILE:orbite-cuda-probe>"
  ORBITE_RUN_BIN="$<TARGET_FILE:orbite-run>"
  ORBITE_SOFTCUDA_DIR="$<TARGET_FILE_DIR:softcuda>"
  ORBITE_SANITIZED=$<BOOL:${ORBITE_SANITIZE}>)
add_dependencies(cuda_test orbite-cuda-probe orbite-run softcuda)
if(TARGET softverbs)
  target_compile_definitions(cuda_test PRIVATE ORBITE_SOFTVERBS_DIR="$<TARGET_FILE_DIR:softverbs>")
  add_dependencies(cuda_test softverbs)
endif()

# The sweeps with --memory cuda (acceptance of issue 23): putget_perf where the references are
# built, sendrecv_perf and all_reduce_perf always.
target_compile_definitions(cuda_test PRIVATE ORBITE_PERF_DIR="${PROJECT_BINARY_DIR}/perf_tests")
add_dependencies(cuda_test sendrecv_perf all_reduce_perf)
if(TARGET putget_perf)
  target_compile_definitions(cuda_test PRIVATE ORBITE_HAVE_PUTGET_PERF=1)
  add_dependencies(cuda_test putget_perf)
endif()
add_dependencies(cuda_test orbite-info)
