# The network check (issue #8): its sources, added to pathkeeper_daemon.
