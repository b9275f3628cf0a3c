# Install rules (included by the top CMakeLists.txt when BLKMQ_SHARED):
#   include/blkmq/**                   the public headers, nothing of src/
#   lib/libblkmq.a, libblkmq.so*       both libraries (soname: CMakeLists.txt)
#   lib/cmake/blkmq/                   find_package(blkmq): blkmq::blkmq
#   lib/pkgconfig/blkmq.pc             pkg-config --cflags --libs blkmq
#   bin/blkmq, share/man/man1/blkmq.1  the command and its manual
# `lib` is GNUInstallDirs' CMAKE_INSTALL_LIBDIR (lib/<multiarch> under /usr).
include(CMakePackageConfigHelpers)

set(BLKMQ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/blkmq)

install(DIRECTORY include/blkmq DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# The archive and the shared library both install as "blkmq" (libblkmq.a,
# libblkmq.so); the package tells them apart by their exported names.
set_target_properties(blkmq PROPERTIES EXPORT_NAME blkmq_static)
set_target_properties(blkmq_shared PROPERTIES EXPORT_NAME blkmq_shared)
install(TARGETS blkmq blkmq_shared EXPORT blkmqTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
)
install(EXPORT blkmqTargets NAMESPACE blkmq:: DESTINATION ${BLKMQ_CMAKE_DIR})

# What a consumer's find_package(blkmq 0.1) accepts: the same major.minor
# while the version is 0.x (each 0.x minor may change the API, as the
# soname says), the same major from 1.0 on.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(BLKMQ_COMPAT SameMinorVersion)
else()
  set(BLKMQ_COMPAT SameMajorVersion)
endif()
configure_package_config_file(cmake/blkmqConfig.cmake.in ${CMAKE_BINARY_DIR}/blkmqConfig.cmake
                              INSTALL_DESTINATION ${BLKMQ_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/blkmqConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${BLKMQ_COMPAT})
install(FILES ${CMAKE_BINARY_DIR}/blkmqConfig.cmake ${CMAKE_BINARY_DIR}/blkmqConfigVersion.cmake
        DESTINATION ${BLKMQ_CMAKE_DIR})

# blkmq.pc names the prefix it was installed to, which `cmake --install
# --prefix P` chooses after configuration: it is written at install time,
# from the prefix in force then (DESTDIR still applies to where it goes).
if(BLKMQ_HAVE_RBD)
  set(BLKMQ_PC_RBD "-lrbd -lrados ")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(BLKMQ_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(BLKMQ_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(BLKMQ_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(BLKMQ_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# Two passes: everything now but the prefix, kept as @CMAKE_INSTALL_PREFIX@
# for the second.
set(BLKMQ_PC_PREFIX "@CMAKE_INSTALL_PREFIX@")
configure_file(cmake/blkmq.pc.in ${CMAKE_BINARY_DIR}/blkmq.pc.in @ONLY)
install(CODE "configure_file(\"${CMAKE_BINARY_DIR}/blkmq.pc.in\" \"${CMAKE_BINARY_DIR}/blkmq.pc\" @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/blkmq.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(BLKMQ_TOOLS)
  install(TARGETS blkmq_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES docs/blkmq.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()
