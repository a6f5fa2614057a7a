# Packaging tests (issue #7). Each fast check is its own test so that a
# failure names its cause; the slow one builds the whole .deb.
set(PK_PACKAGING_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/packaging)

# systemd-analyze verify and the offline exposure score of the unit.
add_test(NAME packaging.unit
         COMMAND ${PK_PACKAGING_TESTS}/unit_test.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:pathkeeperd>
                 ${PROJECT_BINARY_DIR}/packaging/man)
set_tests_properties(packaging.unit PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)

# The udev rules through udevadm test's parser and evaluator, on the captured
# sysfs tree in a private mount namespace (root; otherwise SKIPPED).
add_test(NAME packaging.udev_rules
         COMMAND ${PK_PACKAGING_TESTS}/udev_rules_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(packaging.udev_rules PROPERTIES LABELS host TIMEOUT 60 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# The man pages render without warnings and document every config key.
add_test(NAME packaging.man
         COMMAND ${PK_PACKAGING_TESTS}/man_test.sh ${PROJECT_SOURCE_DIR}
                 ${PROJECT_BINARY_DIR}/packaging/man $<TARGET_FILE:man_config_keys>)
set_tests_properties(packaging.man PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)

# The Debian package, built from a clean copy of the tree with
# dpkg-buildpackage, then lintian, its contents, and the installed unit. It
# compiles the whole project again (see README "Installing" for the time), so
# it is a host test with a generous timeout. The .deb lands at a stable path
# for the VM test: ${CMAKE_BINARY_DIR}/packaging/pathkeeper.deb.
add_test(NAME packaging.deb
         COMMAND ${PK_PACKAGING_TESTS}/deb_test.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/packaging)
# PK_DEB_PARALLEL in ctest's environment overrides its parallel=2.
set_tests_properties(packaging.deb PROPERTIES LABELS host TIMEOUT 1800 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
                     FIXTURES_SETUP pathkeeper_deb)
