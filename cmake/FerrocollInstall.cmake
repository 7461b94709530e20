# Install rules. Layout (fixed, so the wrappers and the package config can find
# everything relative to themselves and the prefix stays relocatable):
#   bin/ferrorun, bin/mpiexec, bin/mpirun (links to ferrorun), bin/mpicc, bin/mpicxx
#   include/*.h
#   lib/libferrocoll.so, lib/libferrocoll.a, lib/libmpi.so.12, lib/libmpich.so.12 (links)
#   lib/cmake/Ferrocoll/FerrocollConfig.cmake, FerrocollConfigVersion.cmake
include(CMakePackageConfigHelpers)

set(FERROCOLL_INSTALL_CMAKEDIR lib/cmake/Ferrocoll)
set(_links "${PROJECT_BINARY_DIR}/install-links")
file(MAKE_DIRECTORY "${_links}/lib" "${_links}/bin")

# Relative symlinks made at configure time and installed as links: file(INSTALL)
# copies a symlink as a symlink, and a relative target survives moving the prefix.
foreach(_name IN ITEMS libmpi.so.12 libmpich.so.12)
  file(CREATE_LINK libferrocoll.so "${_links}/lib/${_name}" SYMBOLIC)
endforeach()
# ferrorun dispatches on argv[0] identically for all three names.
foreach(_name IN ITEMS mpiexec mpirun)
  file(CREATE_LINK ferrorun "${_links}/bin/${_name}" SYMBOLIC)
endforeach()

install(FILES "${FERROCOLL_SHARED_LIB}" "${FERROCOLL_STATIC_LIB}"
        "${_links}/lib/libmpi.so.12" "${_links}/lib/libmpich.so.12"
  DESTINATION lib)
install(PROGRAMS "${FERROCOLL_FERRORUN}" "${_links}/bin/mpiexec" "${_links}/bin/mpirun"
  DESTINATION bin)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
  DESTINATION include
  FILES_MATCHING PATTERN "*.h")

# Compiler wrappers, one template for both languages.
foreach(_lang IN ITEMS C CXX)
  if(_lang STREQUAL "C")
    set(FERROCOLL_WRAPPER_NAME mpicc)
    set(FERROCOLL_WRAPPER_LANG C)
    set(FERROCOLL_WRAPPER_COMPILER_VAR FERROCOLL_CC)
    set(FERROCOLL_WRAPPER_ENV_VAR CC)
    set(FERROCOLL_WRAPPER_DEFAULT cc)
  else()
    set(FERROCOLL_WRAPPER_NAME mpicxx)
    set(FERROCOLL_WRAPPER_LANG C++)
    set(FERROCOLL_WRAPPER_COMPILER_VAR FERROCOLL_CXX)
    set(FERROCOLL_WRAPPER_ENV_VAR CXX)
    set(FERROCOLL_WRAPPER_DEFAULT c++)
  endif()
  configure_file("${PROJECT_SOURCE_DIR}/cmake/mpiwrapper.sh.in"
    "${PROJECT_BINARY_DIR}/wrappers/${FERROCOLL_WRAPPER_NAME}" @ONLY)
  install(PROGRAMS "${PROJECT_BINARY_DIR}/wrappers/${FERROCOLL_WRAPPER_NAME}" DESTINATION bin)
endforeach()

# CMake package.
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/FerrocollConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/package/FerrocollConfig.cmake"
  INSTALL_DESTINATION "${FERROCOLL_INSTALL_CMAKEDIR}")
# 0.x releases may break compatibility between minor versions.
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/package/FerrocollConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/package/FerrocollConfig.cmake"
  "${PROJECT_BINARY_DIR}/package/FerrocollConfigVersion.cmake"
  DESTINATION "${FERROCOLL_INSTALL_CMAKEDIR}")
