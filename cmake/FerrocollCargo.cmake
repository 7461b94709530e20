# Cargo glue: builds the Rust crate at the source root and describes its outputs.
#
# Inputs (all optional):
#   CARGO_TARGET_DIR        cache path; default: $ENV{CARGO_TARGET_DIR}, else <source>/target
#   FERROCOLL_CARGO_PROFILE cargo profile; default: dev for CMAKE_BUILD_TYPE=Debug, else release
#   FERROCOLL_CARGO_FLAGS   extra arguments for `cargo build` (e.g. --locked, --features x)
# Outputs:
#   target `ferrocoll_cargo`  always runs `cargo build` (cargo decides what is stale)
#   FERROCOLL_CARGO_OUT_DIR   directory holding the built artefacts
#   FERROCOLL_SHARED_LIB, FERROCOLL_STATIC_LIB, FERROCOLL_FERRORUN

find_program(CARGO_EXECUTABLE cargo
  HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin"
  DOC "cargo, used to build the ferrocoll Rust crate")
if(NOT CARGO_EXECUTABLE)
  message(FATAL_ERROR "cargo not found: install Rust (https://rustup.rs) or set CARGO_EXECUTABLE")
endif()

if(DEFINED ENV{CARGO_TARGET_DIR} AND NOT "$ENV{CARGO_TARGET_DIR}" STREQUAL "")
  set(_ferrocoll_default_target_dir "$ENV{CARGO_TARGET_DIR}")
else()
  set(_ferrocoll_default_target_dir "${PROJECT_SOURCE_DIR}/target")
endif()
set(CARGO_TARGET_DIR "${_ferrocoll_default_target_dir}" CACHE PATH
  "Cargo target directory for the ferrocoll crate")
# Cargo resolves a relative target dir against its working directory, which is the source root.
get_filename_component(_ferrocoll_target_dir "${CARGO_TARGET_DIR}" ABSOLUTE
  BASE_DIR "${PROJECT_SOURCE_DIR}")

get_property(_ferrocoll_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
if(_ferrocoll_multi_config)
  # One cargo profile per build tree keeps artefact paths plain (no generator
  # expressions), which other CMake files and the install rules rely on.
  message(STATUS "ferrocoll: multi-config generator; cargo profile set by FERROCOLL_CARGO_PROFILE")
endif()
if(NOT FERROCOLL_CARGO_PROFILE)
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    set(FERROCOLL_CARGO_PROFILE dev)
  else()
    set(FERROCOLL_CARGO_PROFILE release)
  endif()
endif()
# Cargo names the output directory of the dev profile "debug"; custom profiles use their name.
if(FERROCOLL_CARGO_PROFILE STREQUAL "dev")
  set(_ferrocoll_profile_dir debug)
else()
  set(_ferrocoll_profile_dir "${FERROCOLL_CARGO_PROFILE}")
endif()

set(FERROCOLL_CARGO_FLAGS "" CACHE STRING "Extra arguments for cargo build (e.g. --locked)")
separate_arguments(_ferrocoll_cargo_flags UNIX_COMMAND "${FERROCOLL_CARGO_FLAGS}")

set(FERROCOLL_CARGO_OUT_DIR "${_ferrocoll_target_dir}/${_ferrocoll_profile_dir}")
set(FERROCOLL_SHARED_LIB "${FERROCOLL_CARGO_OUT_DIR}/libferrocoll.so")
set(FERROCOLL_STATIC_LIB "${FERROCOLL_CARGO_OUT_DIR}/libferrocoll.a")
set(FERROCOLL_FERRORUN "${FERROCOLL_CARGO_OUT_DIR}/ferrorun")

# A custom target is always out of date, so cargo runs on every build and decides
# freshness itself; CMake cannot see the crate's Rust sources.
add_custom_target(ferrocoll_cargo ALL
  COMMAND "${CARGO_EXECUTABLE}" build
          --manifest-path "${PROJECT_SOURCE_DIR}/Cargo.toml"
          --profile "${FERROCOLL_CARGO_PROFILE}"
          --target-dir "${_ferrocoll_target_dir}"
          ${_ferrocoll_cargo_flags}
  BYPRODUCTS "${FERROCOLL_SHARED_LIB}" "${FERROCOLL_STATIC_LIB}" "${FERROCOLL_FERRORUN}"
  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
  COMMENT "cargo build --profile ${FERROCOLL_CARGO_PROFILE} (ferrocoll)"
  USES_TERMINAL
  VERBATIM)
message(STATUS "ferrocoll: cargo profile ${FERROCOLL_CARGO_PROFILE}, artefacts in ${FERROCOLL_CARGO_OUT_DIR}")
