# Installs weft::collectives as a CMake package (find_package(weft)) and a
# pkg-config file (weft-collectives), with the two libraries it needs
# (weft::plan, weft::common) and only their public headers.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set_target_properties(weft_collectives PROPERTIES EXPORT_NAME collectives)
set_target_properties(weft_plan PROPERTIES EXPORT_NAME plan)
set_target_properties(weft_common PROPERTIES EXPORT_NAME common)
# weft_flags (warnings only) rides along: static archives list their private
# link dependencies, and an exported target must name only exported ones.
install(TARGETS weft_collectives weft_plan weft_common weft_flags EXPORT weftTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/collectives/weft/collectives
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft)
install(FILES ${PROJECT_SOURCE_DIR}/common/weft/common/status.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft/common)
install(FILES ${PROJECT_SOURCE_DIR}/routing/weft/routing/plan.h ${PROJECT_SOURCE_DIR}/routing/weft/routing/schedule.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft/routing)
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/weftConfig.cmake.in
  ${PROJECT_BINARY_DIR}/weftConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/weftConfig.cmake ${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
set(WEFT_PC_VERBS_REQUIRES "")
set(WEFT_PC_VERBS_LIBS "")
if(WEFT_HAVE_VERBS)  # the verbs transport (collectives/verbs/CMakeLists.txt installs weft_verbs)
  set(WEFT_PC_VERBS_REQUIRES " libibverbs")
  set(WEFT_PC_VERBS_LIBS " -lweft_verbs")
  if(WEFT_HAVE_MLX5DV)
    string(APPEND WEFT_PC_VERBS_REQUIRES " libmlx5")
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/weft-collectives.pc.in ${PROJECT_BINARY_DIR}/weft-collectives.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/weft-collectives.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
