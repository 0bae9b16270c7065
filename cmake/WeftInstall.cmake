include(CMakePackageConfigHelpers)
install(TARGETS weft EXPORT weftTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/generated/weft/config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft)
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
configure_package_config_file(cmake/weftConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
# Relocatable: the prefix is found from the .pc file's own place, so `cmake --install --prefix X` works.
file(RELATIVE_PATH WEFT_PC_TO_PREFIX "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
configure_file(cmake/weft.pc.in ${CMAKE_CURRENT_BINARY_DIR}/weft.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
