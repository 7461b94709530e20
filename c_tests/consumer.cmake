# Consumer test driver (cmake -P). Installs the ferrocoll build tree into a scratch
# prefix, moves the prefix (the install must be relocatable), then builds and runs a
# separate project against it with a fresh cmake.
#
#   -DMODE=find_package   c_tests/consumer: find_package(Ferrocoll) + Ferrocoll::ferrocoll
#   -DMODE=findmpi        c_tests/consumer_findmpi: stock find_package(MPI) with only the
#                         prefix's bin/ first on PATH; also the wrappers used directly
# Other inputs: BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR C_COMPILER CXX_COMPILER
cmake_minimum_required(VERSION 3.20)

foreach(_var IN ITEMS MODE BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "consumer.cmake: -D${_var}=... is required")
  endif()
endforeach()
get_filename_component(_cmake_bin_dir "${CMAKE_COMMAND}" DIRECTORY)
find_program(CTEST_EXE ctest HINTS "${_cmake_bin_dir}" NO_DEFAULT_PATH)
find_program(CTEST_EXE ctest REQUIRED)

# Runs a command, echoing it; fails the test on a non-zero exit. With OUTPUT <var>
# the combined output is also returned.
function(run)
  cmake_parse_arguments(PARSE_ARGV 0 R "" "OUTPUT" "")
  string(REPLACE ";" " " _shown "${R_UNPARSED_ARGUMENTS}")
  message(STATUS "+ ${_shown}")
  execute_process(COMMAND ${R_UNPARSED_ARGUMENTS}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  message("${_out}")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "command failed (${_rc}): ${_shown}")
  endif()
  if(R_OUTPUT)
    set(${R_OUTPUT} "${_out}" PARENT_SCOPE)
  endif()
endfunction()

# Escapes a literal string for use inside a regular expression.
function(regex_escape out text)
  string(REGEX REPLACE "([][.*+?^$()|\\\\])" "\\\\\\1" _e "${text}")
  set(${out} "${_e}" PARENT_SCOPE)
endfunction()

function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: output does not match '${regex}'")
  endif()
endfunction()

# Checks that a binary resolves its MPI library to this prefix's libferrocoll.so and
# loads no MPICH or Open MPI library (both may be installed system-wide).
function(check_linked_to_ferrocoll binary)
  run(ldd "${binary}" OUTPUT _ldd)
  regex_escape(_lib_re "${PREFIX_REAL}/lib/libferrocoll.so")
  expect_match("${_ldd}" "=> ${_lib_re} " "ldd ${binary}")
  if(_ldd MATCHES "libmpich|libmpi\\.so|libmpi_cxx|libopen-|libopen_|not found")
    message(FATAL_ERROR "ldd ${binary}: unexpected or missing library:\n${_ldd}")
  endif()
endfunction()

set(_generator_args "")
if(GENERATOR)
  list(APPEND _generator_args -G "${GENERATOR}")
endif()
if(C_COMPILER)
  list(APPEND _generator_args "-DCMAKE_C_COMPILER=${C_COMPILER}")
endif()
if(CXX_COMPILER)
  list(APPEND _generator_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()

# ---------------------------------------------------------------------------
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(STAGE "${WORK_DIR}/stage")
set(PREFIX "${WORK_DIR}/prefix")
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${STAGE}")
file(RENAME "${STAGE}" "${PREFIX}")
file(REAL_PATH "${PREFIX}" PREFIX_REAL)
regex_escape(PREFIX_RE "${PREFIX}")
regex_escape(PREFIX_REAL_RE "${PREFIX_REAL}")

foreach(_f IN ITEMS lib/libferrocoll.so lib/libferrocoll.a lib/libmpi.so.12 lib/libmpich.so.12
    include/mpi.h bin/ferrorun bin/mpiexec bin/mpirun bin/mpicc bin/mpicxx
    lib/cmake/Ferrocoll/FerrocollConfig.cmake lib/cmake/Ferrocoll/FerrocollConfigVersion.cmake)
  if(NOT EXISTS "${PREFIX}/${_f}")
    message(FATAL_ERROR "install tree lacks ${_f}")
  endif()
endforeach()
# The drop-in names must reach the real library inside the (moved) prefix.
foreach(_f IN ITEMS lib/libmpi.so.12 lib/libmpich.so.12)
  file(REAL_PATH "${PREFIX}/${_f}" _target)
  if(NOT _target STREQUAL "${PREFIX_REAL}/lib/libferrocoll.so")
    message(FATAL_ERROR "${_f} resolves to ${_target}, not the installed libferrocoll.so")
  endif()
endforeach()

set(CONSUMER_BUILD "${WORK_DIR}/build")
if(MODE STREQUAL "find_package")
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/consumer" -B "${CONSUMER_BUILD}" ${_generator_args}
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}")
  file(STRINGS "${CONSUMER_BUILD}/CMakeCache.txt" _dir REGEX "^Ferrocoll_DIR:")
  if(NOT _dir STREQUAL "Ferrocoll_DIR:PATH=${PREFIX}/lib/cmake/Ferrocoll")
    message(FATAL_ERROR "found the wrong package: ${_dir}")
  endif()
  run("${CMAKE_COMMAND}" --build "${CONSUMER_BUILD}")
  check_linked_to_ferrocoll("${CONSUMER_BUILD}/consumer_allreduce")
  # ctest runs the programs through FERROCOLL_FERRORUN from the package.
  run("${CTEST_EXE}" --test-dir "${CONSUMER_BUILD}" --output-on-failure -V OUTPUT _out)
  expect_match("${_out}" "Test command: ${PREFIX_RE}/bin/ferrorun \"-n\" \"2\"" "ctest command line")
  expect_match("${_out}" "consumer: allreduce on 2 ranks ok" "consumer_allreduce")
  expect_match("${_out}" "100% tests passed, 0 tests failed out of 2" "consumer ctest")

elseif(MODE STREQUAL "findmpi")
  set(_path "${PREFIX}/bin:$ENV{PATH}")
  set(_env "${CMAKE_COMMAND}" -E env "PATH=${_path}" --unset=MPI_HOME --unset=CMAKE_PREFIX_PATH)
  run(${_env} "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/consumer_findmpi" -B "${CONSUMER_BUILD}"
    ${_generator_args} -DCMAKE_BUILD_TYPE=Release)
  foreach(_entry IN ITEMS "MPI_C_COMPILER:FILEPATH=${PREFIX}/bin/mpicc"
      "MPI_CXX_COMPILER:FILEPATH=${PREFIX}/bin/mpicxx"
      "MPIEXEC_EXECUTABLE:FILEPATH=${PREFIX}/bin/mpiexec"
      "MPI_ferrocoll_LIBRARY:FILEPATH=${PREFIX_REAL}/lib/libferrocoll.so")
    string(REGEX REPLACE ":.*" "" _key "${_entry}")
    file(STRINGS "${CONSUMER_BUILD}/CMakeCache.txt" _line REGEX "^${_key}:")
    if(NOT _line STREQUAL _entry)
      message(FATAL_ERROR "FindMPI chose '${_line}', expected '${_entry}'")
    endif()
  endforeach()
  run("${CMAKE_COMMAND}" --build "${CONSUMER_BUILD}")
  check_linked_to_ferrocoll("${CONSUMER_BUILD}/findmpi_c")
  check_linked_to_ferrocoll("${CONSUMER_BUILD}/findmpi_cxx")
  run(${_env} "${CTEST_EXE}" --test-dir "${CONSUMER_BUILD}" --output-on-failure -V OUTPUT _out)
  expect_match("${_out}" "Test command: ${PREFIX_RE}/bin/mpiexec \"-n\" \"2\"" "ctest command line")
  expect_match("${_out}" "findmpi C: 2 ranks, sum of ranks 1" "findmpi_c")
  expect_match("${_out}" "findmpi C\\+\\+: 2 ranks, max rank 1" "findmpi_cxx")

  # The wrappers used directly: one-step compile+link, separate -c and link, C++, and
  # called through a symlink from elsewhere (the prefix is found through the link).
  set(W "${WORK_DIR}/wrapped")
  file(MAKE_DIRECTORY "${W}/bin")
  file(CREATE_LINK "${PREFIX}/bin/mpicc" "${W}/bin/mpicc" SYMBOLIC)
  run("${PREFIX}/bin/mpicc" -O2 -o "${W}/one_step" "${SOURCE_DIR}/consumer_findmpi/main.c")
  run("${W}/bin/mpicc" -c -o "${W}/main.o" "${SOURCE_DIR}/consumer_findmpi/main.c")
  run("${W}/bin/mpicc" -o "${W}/two_step" "${W}/main.o")
  run("${PREFIX}/bin/mpicxx" -o "${W}/cxx" "${SOURCE_DIR}/consumer_findmpi/main.cpp")
  run("${W}/bin/mpicc" -show -c x.c OUTPUT _show)
  expect_match("${_show}" "^[^ ]+ -I${PREFIX_REAL_RE}/include -c x\\.c\n" "mpicc -show -c")
  foreach(_exe IN ITEMS one_step two_step cxx)
    check_linked_to_ferrocoll("${W}/${_exe}")
    run("${PREFIX}/bin/mpirun" -np 2 "${W}/${_exe}" OUTPUT _out)
    expect_match("${_out}" "findmpi C(\\+\\+)?: 2 ranks" "${_exe} under mpirun")
  endforeach()
else()
  message(FATAL_ERROR "consumer.cmake: unknown MODE '${MODE}'")
endif()
message(STATUS "consumer.${MODE}: passed")
