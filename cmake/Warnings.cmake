# Project-wide warnings, attached to every target through this interface lib.
add_library(pathkeeper_warnings INTERFACE)
target_compile_options(pathkeeper_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Woverloaded-virtual -Wconversion -Wsign-conversion
  -Wformat=2 -Wimplicit-fallthrough)
# Not -Wnull-dereference: at -O2 GCC 12 reports it inside libstdc++'s
# <streambuf> for ordinary stream code, a false positive -Werror cannot carry.
if(PATHKEEPER_WERROR)
  target_compile_options(pathkeeper_warnings INTERFACE -Werror)
endif()
