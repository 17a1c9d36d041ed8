# Optional dependencies (DESIGN.md "Conventions"): each is a cache option
# WEFT_WITH_<NAME> = AUTO | ON | OFF.
#   AUTO  build the feature when its dependency is found, say what was skipped;
#   ON    a missing dependency is a configure error carrying the install hint;
#   OFF   skip it.
# The outcome is WEFT_HAVE_<NAME> (0/1) in the generated <weft/config.h>, which
# every target sees through weft::common.
include(FindPkgConfig)

# weft_feature(NAME DOC PKG pkg-config-module HINT "apt-get install ...")
# Defines WEFT_HAVE_<NAME> and, when found, the imported target PkgConfig::<pkg>.
function(weft_feature name)
  cmake_parse_arguments(F "" "DOC;PKG;HINT" "" ${ARGN})
  set(WEFT_WITH_${name} AUTO CACHE STRING "${F_DOC} (AUTO|ON|OFF)")
  set_property(CACHE WEFT_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  set(mode "${WEFT_WITH_${name}}")
  if(NOT mode MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "WEFT_WITH_${name}=${mode}: expected AUTO, ON or OFF")
  endif()
  set(have 0)
  if(NOT mode STREQUAL "OFF")
    pkg_check_modules(WEFT_PKG_${name} QUIET IMPORTED_TARGET GLOBAL ${F_PKG})
    if(WEFT_PKG_${name}_FOUND)
      set(have 1)
    elseif(mode STREQUAL "ON")
      message(FATAL_ERROR "WEFT_WITH_${name}=ON but ${F_PKG} was not found: ${F_HINT}")
    else()
      message(STATUS "weft: ${F_PKG} not found, building without ${F_DOC} (${F_HINT})")
    endif()
  endif()
  set(WEFT_HAVE_${name} ${have} PARENT_SCOPE)
endfunction()

weft_feature(VERBS DOC "the RDMA verbs transport (collectives/verbs)"
  PKG libibverbs HINT "apt-get install libibverbs-dev ibverbs-providers")
set(WEFT_HAVE_MLX5DV 0)
if(WEFT_HAVE_VERBS)
  # mlx5dv_modify_qp_udp_sport sets a QP's UDP source port directly on mlx5
  # NICs; everything else uses the GRH flow label, so it stays optional.
  pkg_check_modules(WEFT_PKG_MLX5 QUIET IMPORTED_TARGET GLOBAL libmlx5)
  if(WEFT_PKG_MLX5_FOUND)
    set(WEFT_HAVE_MLX5DV 1)
  endif()
endif()

configure_file(${PROJECT_SOURCE_DIR}/cmake/weft_config.h.in
               ${PROJECT_BINARY_DIR}/generated/weft/config.h @ONLY)
