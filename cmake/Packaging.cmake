# Installing Yonder: `cmake --install BUILD [--prefix DIR]` and a
# .deb through CPack (`cpack --config BUILD/CPackConfig.cmake`; README
# "Install"). Completion scripts and man pages are generated at build time by
# the programs just built, from their own CLI11 definitions (src/release).
include(GNUInstallDirs)

# Sanitizer builds do not make the release files (their programs would run
# instrumented at build time) and are never packaged; scripts/deb-test.sh
# and the deb_install_test skip them too.
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  set(YONDER_SANITIZER_BUILD ON)
else()
  set(YONDER_SANITIZER_BUILD OFF)
endif()

set(release_dir ${PROJECT_BINARY_DIR}/release-files)
set(release_outputs
  ${release_dir}/completions/yonder ${release_dir}/completions/_yonder ${release_dir}/completions/yonder.fish
  ${release_dir}/man/yonder.1.gz ${release_dir}/man/yonderd.8.gz ${release_dir}/man/yonder-relay.8.gz)
add_custom_command(OUTPUT ${release_outputs}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${release_dir}/completions ${release_dir}/man
  COMMAND sh -c "$<TARGET_FILE:yonder> completion bash > completions/yonder"
  COMMAND sh -c "$<TARGET_FILE:yonder> completion zsh > completions/_yonder"
  COMMAND sh -c "$<TARGET_FILE:yonder> completion fish > completions/yonder.fish"
  COMMAND sh -c "$<TARGET_FILE:yonder> --help-man | gzip -9n > man/yonder.1.gz"
  COMMAND sh -c "$<TARGET_FILE:yonderd> --help-man | gzip -9n > man/yonderd.8.gz"
  COMMAND sh -c "$<TARGET_FILE:yonder-relay> --help-man | gzip -9n > man/yonder-relay.8.gz"
  DEPENDS yonder yonderd yonder-relay
  WORKING_DIRECTORY ${release_dir}
  COMMENT "Generating shell completions and man pages from the programs' definitions"
  VERBATIM)
if(YONDER_SANITIZER_BUILD)
  add_custom_target(yonder_release_files DEPENDS ${release_outputs})
else()
  add_custom_target(yonder_release_files ALL DEPENDS ${release_outputs})
endif()

install(TARGETS yonder yonderd yonder-relay RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The VRAM guard, where yonderd finds it (gpu.vram_guard): lib/yonder of
# the prefix, never the multiarch libdir (nothing links against it).
install(TARGETS yonder_vram_guard LIBRARY DESTINATION lib/yonder)
# Remote CUDA: the worker yonderd starts per session, and the stand-in
# driver `yonder cuda` puts first on a program's library path.
install(TARGETS yonder-cuda-worker RUNTIME DESTINATION lib/yonder)
install(TARGETS yonder_cuda_standin LIBRARY DESTINATION lib/yonder/cuda NAMELINK_SKIP)
# The web dashboard is compiled into yonderd (cmake/EmbedAssets.cmake): no files.
install(FILES ${release_dir}/completions/yonder DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${release_dir}/completions/_yonder DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
install(FILES ${release_dir}/completions/yonder.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
install(FILES ${release_dir}/man/yonder.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${release_dir}/man/yonderd.8.gz ${release_dir}/man/yonder-relay.8.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
# Units under lib/ of the prefix (/usr/lib/systemd/system for the .deb),
# never the multiarch libdir.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/yonderd.service ${PROJECT_SOURCE_DIR}/packaging/yonder-relay.service
        DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md"
        PATTERN "*.yaml")

# --- the .deb (Debian 12)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME yonder)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Yonder developers <yonder@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "share NVIDIA GPUs with people you trust, peer to peer")
set(CPACK_PACKAGE_DESCRIPTION
    "Yonder runs jobs on the GPUs of people you trust and lets them run jobs on\nyours: yonderd (the node daemon, a systemd service), the yonder CLI and\nyonder-relay (a self-hostable rendezvous and blind relay).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Libraries: from dpkg-shlibdeps on the binaries; the rest by hand. Docker
# runs provider jobs (a consumer-only node does without); e2fsprogs's
# mkfs.ext4 makes the per-job workspaces (yonderd mounts them itself).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, systemd")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "docker.io, e2fsprogs")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "runsc")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

# The .deb installs on a clean Debian 12 and its service answers (scripts/deb-test.sh;
# cold, it builds the root file system once per machine, then about 30 s).
if(NOT YONDER_SANITIZER_BUILD)
  add_test(NAME deb_install_test COMMAND ${PROJECT_SOURCE_DIR}/scripts/deb-test.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(deb_install_test PROPERTIES LABELS "integration;plain" TIMEOUT 900)
endif()
