# Installation layout and the Debian package (`cpack` in the build folder, or `ninja package`):
# the binary, fabperf(1) generated from the CLI's own help, the systemd unit, bash completion,
# docs. docs/launch.md describes it; tests/package checks it with lintian and a real install.
include(GNUInstallDirs)

set(_man ${PROJECT_BINARY_DIR}/packaging/fabperf.1)
add_custom_command(OUTPUT ${_man}.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/packaging
  COMMAND ${PROJECT_SOURCE_DIR}/scripts/gen-manpage $<TARGET_FILE:fabperf> ${PROJECT_VERSION} > ${_man}
  COMMAND gzip -9n -c ${_man} > ${_man}.gz
  COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/packaging/changelog > ${PROJECT_BINARY_DIR}/packaging/changelog.gz
  DEPENDS fabperf ${PROJECT_SOURCE_DIR}/scripts/gen-manpage ${PROJECT_SOURCE_DIR}/packaging/changelog
  COMMENT "Generating fabperf(1) from the CLI help")
add_custom_target(fabperf_manpage ALL DEPENDS ${_man}.gz)

install(TARGETS fabperf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${_man}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/scripts/fabperf-agent.service DESTINATION lib/systemd/system)  # /usr/lib/systemd/system: systemd reads both
install(FILES ${PROJECT_SOURCE_DIR}/scripts/fabperf.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME fabperf)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/copyright ${PROJECT_BINARY_DIR}/packaging/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/usage.md ${PROJECT_SOURCE_DIR}/docs/security.md
        ${PROJECT_SOURCE_DIR}/docs/launch.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/slurm/fabperf.sbatch DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fabperf)
set(CPACK_PACKAGE_VENDOR "fabperf")
set(CPACK_PACKAGE_CONTACT "fabperf maintainers <fabperf@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "network fabric throughput and latency tester")
set(CPACK_PACKAGE_DESCRIPTION "fabperf measures what a cluster network delivers between many nodes
at once, in the manner of nsdperf: node agents on every host, a coordinator
that starts all flows at one instant and reports per-node and per-link
throughput, latency and retransmissions. Agents run as a systemd service or
are launched over ssh or inside a Slurm allocation.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/fabperf/fabperf")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "openssh-client, slurm-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/postinst ${PROJECT_SOURCE_DIR}/packaging/prerm ${PROJECT_SOURCE_DIR}/packaging/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
