# D-Bus tests (issue #6).
# Unit: object path escaping, snapshot diffing, method checks, and
# pathkeeperctl's status/watch rendering, without a bus.
add_executable(dbus_test
  dbus/bus_names_test.cpp
  dbus/snapshot_diff_test.cpp
  dbus/method_checks_test.cpp
  dbus/status_test.cpp
  ${PROJECT_SOURCE_DIR}/ctl/status.cpp
  ${PROJECT_SOURCE_DIR}/ctl/dbus_client.cpp
)
target_include_directories(dbus_test PRIVATE ${PROJECT_SOURCE_DIR}/ctl ${CMAKE_CURRENT_SOURCE_DIR}/dbus)
target_include_directories(dbus_test SYSTEM PRIVATE ${NLOHMANN_JSON_INCLUDE_DIR})
target_link_libraries(dbus_test PRIVATE pathkeeper_dbus pathkeeper_warnings GTest::gtest_main GTest::gmock)
gtest_discover_tests(dbus_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)

# Host: a real private dbus-daemon (system-bus-like policy with ours
# included), the test server below standing in for pathkeeperd, busctl,
# the generated proxies and pathkeeperctl. Skips without root or dbus-daemon.
add_executable(pathkeeper_dbus_test_server dbus/pathkeeper_dbus_test_server.cpp)
target_include_directories(pathkeeper_dbus_test_server PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/dbus)
target_link_libraries(pathkeeper_dbus_test_server PRIVATE pathkeeper_dbus pathkeeper_warnings)

add_executable(dbus_host_test dbus/dbus_host_test.cpp ${PROJECT_SOURCE_DIR}/ctl/dbus_client.cpp)
target_include_directories(dbus_host_test PRIVATE ${PROJECT_SOURCE_DIR}/ctl ${CMAKE_CURRENT_SOURCE_DIR}/dbus)
target_include_directories(dbus_host_test SYSTEM PRIVATE ${NLOHMANN_JSON_INCLUDE_DIR})
target_link_libraries(dbus_host_test PRIVATE pathkeeper_dbus pathkeeper_warnings GTest::gtest_main GTest::gmock)
target_compile_definitions(dbus_host_test PRIVATE
  PK_DBUS_TEST_SERVER="$<TARGET_FILE:pathkeeper_dbus_test_server>"
  PK_PATHKEEPERCTL="$<TARGET_FILE:pathkeeperctl>"
  PK_DBUS_POLICY="${PROJECT_SOURCE_DIR}/dbus/org.pathkeeper.PathKeeper1.conf"
  PK_README="${PROJECT_SOURCE_DIR}/README.md"
  PK_DBUS_XML="${PROJECT_SOURCE_DIR}/dbus/org.pathkeeper.PathKeeper1.xml"
  PK_POLKIT_POLICY="${PROJECT_SOURCE_DIR}/dbus/org.pathkeeper.PathKeeper1.policy")
add_dependencies(dbus_host_test pathkeeper_dbus_test_server pathkeeperctl)
gtest_discover_tests(dbus_host_test TEST_PREFIX host.dbus. PROPERTIES LABELS host TIMEOUT 120 RUN_SERIAL TRUE
                     DISCOVERY_TIMEOUT 60)
