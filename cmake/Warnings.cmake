# Project-wide warnings, attached to every target through this interface lib.
add_library(pathkeeper_warnings INTERFACE)
target_compile_options(pathkeeper_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Woverloaded-virtual -Wconversion -Wsign-conversion
  -Wnull-dereference -Wformat=2 -Wimplicit-fallthrough)
if(PATHKEEPER_WERROR)
  target_compile_options(pathkeeper_warnings INTERFACE -Werror)
endif()
