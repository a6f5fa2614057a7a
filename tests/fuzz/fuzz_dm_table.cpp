// Fuzzes the table parser: any input must give a table or an error, and a
// parsed table must render to text that parses back to the same table.
#include "dm_table.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  for (bool withPrefix : {true, false}) {
    auto table = pathkeeper::selector::parseDmTable(text, withPrefix);
    if (!table) {
      continue;
    }
    // Params without the prefix carry no length; give the re-render one.
    if (!withPrefix) {
      table->length = 1;
    }
    auto again = pathkeeper::selector::parseDmTable(pathkeeper::selector::renderDmTable(*table));
    if (!again || *again != *table) {
      std::abort();
    }
  }
  return 0;
}
