// Generates the key reference of pathkeeper.conf(5) from configSchema(), the
// list the parser accepts, so that the man page cannot drift from the code.
//
//   man_config_keys TEMPLATE OUTPUT   copies TEMPLATE to OUTPUT, replacing the
//                                     marker line (kMarker) with one .SS per
//                                     table and one .TP entry per key
//   man_config_keys --list            prints "table<TAB>key" for every key
//                                     (the man page test's expectation)

#include "config.hpp"

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

namespace {

using pathkeeper::selector::configSchema;
using pathkeeper::selector::configTables;

// A roff comment, so that the template renders as it is, and configure_file
// leaves it alone.
constexpr std::string_view kMarker = R"(.\" KEYS-FROM-CONFIG-SCHEMA)";

/// @brief Escapes text for a roff text line: backslashes, and a control
/// character at the start of the line.
std::string roff(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      // A real minus/hyphen: roff's "-" may become a typographic hyphen,
      // which breaks copy and paste of values such as service-time.
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) {
    out.insert(0, "\\&");
  }
  return out;
}

std::string tableHeading(std::string_view name, bool array) {
  return array ? "[[" + std::string(name) + "]]" : "[" + std::string(name) + "]";
}

std::string keyReference() {
  std::ostringstream out;
  for (const auto &table : configTables()) {
    out << ".SS \"" << tableHeading(table.name, table.array) << "\"\n";
    out << roff(table.description) << "\n";
    for (const auto &key : configSchema()) {
      if (key.table != table.name) {
        continue;
      }
      out << ".TP\n";
      out << ".B " << roff(key.key) << "\n";
      // Short keys (mode, nics) would share their line with the text.
      out << ".br\n";
      out << "(" << roff(key.type);
      if (key.defaultValue.empty()) {
        out << "; no default";
      } else {
        out << "; default \\fB" << roff(key.defaultValue) << "\\fR";
      }
      out << ")\n";
      out << roff(key.description) << "\n";
      out << ".br\n";
      out << "Example: \\fB" << roff(key.key) << " = " << roff(key.example) << "\\fR\n";
    }
  }
  return out.str();
}

int generate(const char *templatePath, const char *outputPath) {
  std::ifstream in(templatePath);
  if (!in) {
    std::cerr << "man_config_keys: cannot read " << templatePath << "\n";
    return 1;
  }
  std::ostringstream page;
  std::string line;
  int markers = 0;
  while (std::getline(in, line)) {
    if (line == kMarker) {
      page << keyReference();
      ++markers;
    } else {
      page << line << "\n";
    }
  }
  if (markers != 1) {
    std::cerr << "man_config_keys: " << templatePath << " must have exactly one line \"" << kMarker
              << "\", found " << markers << "\n";
    return 1;
  }
  std::ofstream out(outputPath, std::ios::trunc);
  out << page.str();
  if (!out.flush()) {
    std::cerr << "man_config_keys: cannot write " << outputPath << "\n";
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--list") {
    // Straight from the schema, so that a key whose table the page does not
    // describe still shows up here, and the test fails on it.
    for (const auto &key : configSchema()) {
      bool array = false;
      for (const auto &table : configTables()) {
        array = table.name == key.table ? table.array : array;
      }
      std::cout << tableHeading(key.table, array) << "\t" << key.key << "\n";
    }
    return 0;
  }
  if (argc == 3) {
    return generate(argv[1], argv[2]);
  }
  std::cerr << "usage: man_config_keys TEMPLATE OUTPUT | --list\n";
  return 2;
}
