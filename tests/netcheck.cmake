# Network check tests (issue #8).
