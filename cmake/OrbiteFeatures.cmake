# Required dependencies and optional features. Each optional feature defaults to ON when its
# headers are present; its library is loaded at run time and never linked.
include(CheckIncludeFileCXX)

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
find_package(nlohmann_json 3.10 REQUIRED)

# RDMA: rdma-core's headers for types; libibverbs.so.1 is dlopen'ed.
check_include_file_cxx(infiniband/verbs.h ORBITE_HAVE_VERBS_H)
option(ORBITE_WITH_RDMA "RDMA transport (needs rdma-core headers)" ${ORBITE_HAVE_VERBS_H})
if(ORBITE_WITH_RDMA AND NOT ORBITE_HAVE_VERBS_H)
  message(FATAL_ERROR "ORBITE_WITH_RDMA=ON but infiniband/verbs.h was not found (install libibverbs-dev)")
endif()

# CUDA: cuda.h for types only; libcuda.so.1 is dlopen'ed. No nvcc, no libcudart.
find_path(ORBITE_CUDA_INCLUDE_DIR cuda.h
  HINTS ENV CUDA_HOME ENV CUDA_PATH ${CUDAToolkit_ROOT}
  PATHS /usr/local/cuda /opt/cuda
  PATH_SUFFIXES include
  NO_DEFAULT_PATH)
if(ORBITE_CUDA_INCLUDE_DIR)
  set(ORBITE_HAVE_CUDA_H ON)
else()
  set(ORBITE_HAVE_CUDA_H OFF)
endif()
option(ORBITE_WITH_CUDA "CUDA transport (needs cuda.h)" ${ORBITE_HAVE_CUDA_H})
if(ORBITE_WITH_CUDA AND NOT ORBITE_HAVE_CUDA_H)
  message(FATAL_ERROR "ORBITE_WITH_CUDA=ON but cuda.h was not found (set CUDA_HOME)")
endif()

# MPI bootstrap: a separate library so that the core never links MPI.
find_package(MPI COMPONENTS C QUIET)
option(ORBITE_WITH_MPI "MPI bootstrap library orbite_mpi" ${MPI_C_FOUND})
if(ORBITE_WITH_MPI AND NOT MPI_C_FOUND)
  message(FATAL_ERROR "ORBITE_WITH_MPI=ON but MPI was not found (install libopenmpi-dev)")
endif()

# Metrics exporter: civetweb.h for types; libcivetweb.so.1 is dlopen'ed when metrics.listen is set.
check_include_file_cxx(civetweb.h ORBITE_HAVE_CIVETWEB_H)
option(ORBITE_WITH_METRICS "Prometheus exporter (needs civetweb.h)" ${ORBITE_HAVE_CIVETWEB_H})
if(ORBITE_WITH_METRICS AND NOT ORBITE_HAVE_CIVETWEB_H)
  message(FATAL_ERROR "ORBITE_WITH_METRICS=ON but civetweb.h was not found (install libcivetweb-dev)")
endif()

# Sanitizers: ORBITE_SANITIZE = "address;undefined" or "thread".
set(ORBITE_SANITIZE "" CACHE STRING "Sanitizers to build with (address;undefined or thread)")
if(ORBITE_SANITIZE)
  list(JOIN ORBITE_SANITIZE "," _orbite_san)
  add_compile_options(-fsanitize=${_orbite_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  if("thread" IN_LIST ORBITE_SANITIZE)
    # -O1 as TSan's documentation advises: at the Debug build's -O0 its multi-process tests ran up
    # to twice as long. -g1 (line tables: the reports keep their function names, files and
    # lines) because at -O1 full -g's variable tracking more than doubled each compile (40 s
    # against 18 s for config_json_test.cpp; CI time). ASan+UBSan stay at -O0: at -O1 GCC 12
    # reports -Wmaybe-uninitialized inside libstdc++'s <regex> (softcuda's module.cpp), an error
    # under -Werror.
    add_compile_options(-O1 -g1)
  else()
    # ASan+UBSan reports need line tables only; -g1 saves a tenth of each compile at -O0.
    add_compile_options(-g1)
  endif()
  add_link_options(-fsanitize=${_orbite_san})
endif()

# Unity builds (the sanitizer presets turn them on: CI compiles those cold, and a batch of
# sources parses the shared headers once). GCC takes a source included into the batch file for
# a header, so its -Wsubobject-linkage fires on every class that holds a type of the source's
# own anonymous namespace; in a batch that is no ODR hazard, so the warning is off there only.
if(CMAKE_UNITY_BUILD)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
endif()

find_program(ORBITE_CCACHE ccache)
if(ORBITE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER ${ORBITE_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${ORBITE_CCACHE})
endif()

# Warnings are errors in our own code.
add_library(orbite_warnings INTERFACE)
target_compile_options(orbite_warnings INTERFACE -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor
  -Wcast-align -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)

include(OrbitePython)
