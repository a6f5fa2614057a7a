# Network check tests (issue #8).
# Unit: the analysis on hand-made snapshots, open-iscsi's records, and
# doctor's option parsing, binding choice and output (ctl/doctor.cpp is
# compiled in, as ctl_test does with discover.cpp).
add_executable(netcheck_test daemon/netcheck_test.cpp ${PROJECT_SOURCE_DIR}/ctl/doctor.cpp)
target_include_directories(netcheck_test PRIVATE ${PROJECT_SOURCE_DIR}/ctl)
target_include_directories(netcheck_test SYSTEM PRIVATE ${NLOHMANN_JSON_INCLUDE_DIR})
target_link_libraries(netcheck_test PRIVATE pathkeeper_daemon pathkeeper_warnings GTest::gtest_main GTest::gmock)
gtest_discover_tests(netcheck_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)

