# orbite-run, the local launcher (included from tools/CMakeLists.txt).
orbite_add_tool(orbite-run SOURCES ${PROJECT_SOURCE_DIR}/tools/orbite_run.cpp LIBS orbite_launcher)
