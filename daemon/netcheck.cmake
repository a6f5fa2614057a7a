# The network check (issue #8): its sources, added to pathkeeper_daemon.
# The pure analysis (netcheck.cpp), the rtnetlink/sysctl/sysfs adapter
# (net_netlink.cpp) and open-iscsi's records (net_iscsi_records.cpp).
target_sources(pathkeeper_daemon PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/netcheck.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/net_netlink.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/net_iscsi_records.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/network_watch.cpp
)
# libnl-route-3 for links, addresses, rules and RTM_GETROUTE
# (Debian libnl-3-dev, libnl-route-3-dev).
pkg_check_modules(LIBNL REQUIRED IMPORTED_TARGET libnl-3.0 libnl-route-3.0)
target_link_libraries(pathkeeper_daemon PUBLIC PkgConfig::LIBNL)
