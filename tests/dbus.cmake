# D-Bus tests (issue #6).
