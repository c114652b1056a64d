# ctest softverbs.exports: softverbs' libibverbs.so.1 must be a drop-in for the system's.
#   cmake -DOBJDUMP=objdump -DSYSTEM_LIB=/usr/lib/.../libibverbs.so.1.14.44.0
#         -DSOFT_LIB=build/softverbs/libibverbs.so.1 [-DCONSUMERS=a,b,c] -P check_exports.cmake
# 1. Every (version, name) the system library defines, IBVERBS_1.0 ... IBVERBS_1.14 and
#    IBVERBS_PRIVATE_34, compat (hidden, "(IBVERBS_1.0)") and default versions alike, and every
#    version node, is defined by softverbs' library too.
# 2. Each installed CONSUMER (a library path, or a program name looked up on PATH, linked
#    against the system's libibverbs: librdmacm, libmlx5, libefa, perftest, ...) loads against
#    softverbs with every symbol bound (ldd -r: no "version ... not found", no "undefined
#    symbol"). The tests that need a consumer (softverbs.perftest.*) fail when it is missing.
foreach(v OBJDUMP SYSTEM_LIB SOFT_LIB)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "check_exports.cmake: -D${v}=... is required")
  endif()
endforeach()

# The defined dynamic symbols of lib as "VERSION NAME" entries (VERSION in parentheses for a
# hidden, non-default version, as objdump -T prints it).
function(exported lib out)
  execute_process(COMMAND ${OBJDUMP} -T ${lib} OUTPUT_VARIABLE text RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${OBJDUMP} -T ${lib} failed: ${err}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(result "")
  foreach(line IN LISTS lines)
    if(line MATCHES "\\*UND\\*")
      continue()
    endif()
    # 0000000000011e20 g    DF .text	00000000000000c1  IBVERBS_1.1 ibv_ack_async_event
    if(line MATCHES "^[0-9a-f]+ g .*\t[0-9a-f]+ +([^ ]+) +([^ ]+)$")
      list(APPEND result "${CMAKE_MATCH_1} ${CMAKE_MATCH_2}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

exported(${SYSTEM_LIB} system)
exported(${SOFT_LIB} soft)
list(LENGTH system n_system)
if(n_system LESS 100)
  message(FATAL_ERROR "only ${n_system} exports read from ${SYSTEM_LIB}: not rdma-core's library?")
endif()
set(missing "")
foreach(entry IN LISTS system)
  list(FIND soft "${entry}" at)
  if(at EQUAL -1)
    list(APPEND missing "${entry}")
  endif()
endforeach()
if(missing)
  list(LENGTH missing n_missing)
  list(JOIN missing "\n  " shown)
  message(FATAL_ERROR "softverbs' ${SOFT_LIB} lacks ${n_missing} of the ${n_system} (version, "
                      "name) pairs of ${SYSTEM_LIB}:\n  ${shown}\n"
                      "add them to softverbs/libibverbs.map (and src/stubs*.cpp)")
endif()
message(STATUS "exports: all ${n_system} (version, name) pairs of ${SYSTEM_LIB} are in ${SOFT_LIB}")

get_filename_component(soft_dir ${SOFT_LIB} DIRECTORY)
string(REPLACE "," ";" consumers "${CONSUMERS}")
set(failed "")
foreach(consumer IN LISTS consumers)
  if(NOT IS_ABSOLUTE ${consumer})
    unset(found)
    find_program(found ${consumer} NO_CACHE)
    if(NOT found)
      message(STATUS "loads: ${consumer} is not installed here; not checked")
      continue()
    endif()
    set(consumer ${found})
  endif()
  if(NOT EXISTS ${consumer})
    message(STATUS "loads: ${consumer} is not installed here; not checked")
    continue()
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${soft_dir} ldd -r ${consumer}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(all "${out}${err}")
  if(NOT all MATCHES "libibverbs\\.so\\.1 => ${soft_dir}/libibverbs\\.so\\.1")
    list(APPEND failed "${consumer}: does not resolve libibverbs.so.1 to ${soft_dir}:\n${all}")
  elseif(all MATCHES "not found|undefined symbol" OR NOT rc EQUAL 0)
    list(APPEND failed "${consumer}:\n${all}")
  else()
    message(STATUS "loads: ${consumer}")
  endif()
endforeach()
if(failed)
  list(JOIN failed "\n" shown)
  message(FATAL_ERROR "against softverbs (ldd -r with LD_LIBRARY_PATH=${soft_dir}):\n${shown}")
endif()
message(STATUS "exports: OK")
