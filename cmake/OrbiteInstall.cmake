# Installs the libraries, public headers, tools, a CMake package (find_package(orbite CONFIG))
# and a pkg-config file.
include(CMakePackageConfigHelpers)

set(ORBITE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/orbite)
set(_orbite_targets orbite)
if(ORBITE_WITH_MPI)
  list(APPEND _orbite_targets orbite_mpi)
endif()

install(TARGETS ${_orbite_targets} EXPORT orbiteTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/orbite DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/orbite/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/orbite)
install(EXPORT orbiteTargets NAMESPACE orbite:: DESTINATION ${ORBITE_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/orbiteConfig.cmake.in
  ${PROJECT_BINARY_DIR}/orbiteConfig.cmake INSTALL_DESTINATION ${ORBITE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/orbiteConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/orbiteConfig.cmake ${PROJECT_BINARY_DIR}/orbiteConfigVersion.cmake
  DESTINATION ${ORBITE_CMAKE_DIR})

file(RELATIVE_PATH ORBITE_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${PROJECT_SOURCE_DIR}/cmake/orbite.pc.in ${PROJECT_BINARY_DIR}/orbite.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/orbite.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
