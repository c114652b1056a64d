# orbite_add_tool(name SOURCES ... [LIBS ...]): an installed executable in bin/.
function(orbite_add_tool name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE orbite_internal orbite_warnings ${ARG_LIBS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()

# orbite_add_gtest(name SOURCES ... LABELS ... [LIBS ...] [TIMEOUT s]): one GoogleTest binary per
# component, registered as one ctest test. (One process per binary rather than per test case:
# under the sanitizers a process start costs a second, and there are hundreds of cases.)
function(orbite_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
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
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
