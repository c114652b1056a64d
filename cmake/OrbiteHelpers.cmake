# orbite_add_tool(name SOURCES ... [LIBS ...]): an installed executable in bin/.
function(orbite_add_tool name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE orbite_internal orbite_warnings ${ARG_LIBS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()

# orbite_add_gtest(name SOURCES ... LABELS ... [LIBS ...] [TIMEOUT s] [COST c]): one GoogleTest
# binary per component, registered as one ctest test. (One process per binary rather than per
# test case: under the sanitizers a process start costs a second, and there are hundreds of
# cases.) COST (seconds, roughly, under TSan) orders a cold run, which has no timing history:
# ctest starts the costliest first, so that the longest binary does not start last and run
# alone at the end. (Splitting the long binaries into GoogleTest shards was measured and does not
# pay: their cases are CPU-bound, and two shards side by side each took as long as the whole.)
function(orbite_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT;COST" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT ARG_COST)
    set(ARG_COST 1)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE orbite_internal orbite_warnings GTest::gtest GTest::gtest_main
    ${ARG_LIBS})
  target_compile_definitions(${name} PRIVATE
    ORBITE_BIN_DIR="${PROJECT_BINARY_DIR}/bin"
    ORBITE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ORBITE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    COST ${ARG_COST})
endfunction()
