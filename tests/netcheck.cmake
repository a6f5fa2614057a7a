# Network check tests (issue #8).
# Unit: the analysis on hand-made snapshots, open-iscsi's records, and
# doctor's option parsing, binding choice and output (ctl/doctor.cpp is
# compiled in, as ctl_test does with discover.cpp).
add_executable(netcheck_test daemon/netcheck_test.cpp daemon/network_watch_test.cpp ${PROJECT_SOURCE_DIR}/ctl/doctor.cpp)
target_include_directories(netcheck_test PRIVATE ${PROJECT_SOURCE_DIR}/ctl)
target_include_directories(netcheck_test SYSTEM PRIVATE ${NLOHMANN_JSON_INCLUDE_DIR})
target_link_libraries(netcheck_test PRIVATE pathkeeper_daemon pathkeeper_warnings GTest::gtest_main GTest::gmock)
gtest_discover_tests(netcheck_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)

# Host: real kernel routing in network namespaces that
# tests/host/netcheck-netns.sh builds per test. The library runs on a test
# thread that entered the namespace with setns(); pathkeeperctl doctor runs
# under `ip netns exec`. Without root or netns support every test is SKIPPED
# with the reason.
add_executable(netcheck_host_test host/netcheck_host_test.cpp)
target_include_directories(netcheck_host_test SYSTEM PRIVATE ${NLOHMANN_JSON_INCLUDE_DIR})
target_link_libraries(netcheck_host_test PRIVATE pathkeeper_daemon pathkeeper_warnings GTest::gtest_main GTest::gmock)
target_compile_definitions(netcheck_host_test PRIVATE
  PK_NETCHECK_NETNS_SCRIPT="${CMAKE_CURRENT_SOURCE_DIR}/host/netcheck-netns.sh"
  PK_PATHKEEPERCTL="$<TARGET_FILE:pathkeeperctl>")
gtest_discover_tests(netcheck_host_test PROPERTIES LABELS host TIMEOUT 60 RUN_SERIAL TRUE DISCOVERY_TIMEOUT 60)
# std::regex in the host test: the same GCC 12 false positive as
# selector/config.cpp (bug 105562), seen in the sanitizer build.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set_source_files_properties(host/netcheck_host_test.cpp PROPERTIES COMPILE_OPTIONS -Wno-maybe-uninitialized)
endif()
