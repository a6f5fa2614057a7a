// dm_grammar_check table|status LINE
//
// Runs pathkeeper's dm grammar on a line the real kernel printed, inside the
// VM lab. For a table, the parse must succeed and rendering the parse must
// give the kernel's line back word for word. For a status, the parse must
// succeed; the tool prints what it read so the lab can compare it with the
// kernel's view. Exit 0 on success, 1 on a mismatch or parse error.
#include "dm_status.hpp"
#include "dm_table.hpp"
#include "text.hpp"

#include <iostream>
#include <string>

namespace {

using namespace pathkeeper::selector;

std::string normalized(const std::string &line) {
  std::string out;
  for (const auto &word : splitWords(line)) {
    out += out.empty() ? "" : " ";
    out += word;
  }
  return out;
}

int checkTable(const std::string &line) {
  auto table = parseDmTable(line);
  if (!table) {
    std::cerr << "table parse error: " << table.error() << "\n";
    return 1;
  }
  const auto rendered = renderDmTable(*table);
  if (rendered != normalized(line)) {
    std::cerr << "render(parse(kernel)) differs\nkernel: " << normalized(line)
              << "\nours:   " << rendered << "\n";
    return 1;
  }
  std::cout << "table ok: " << table->groups.size()
            << " groups, features=" << table->featureArgs.size() << ", hw_handler='"
            << table->hwHandler << "'\n";
  return 0;
}

int checkStatus(const std::string &line) {
  auto status = parseDmStatus(line);
  if (!status) {
    std::cerr << "status parse error: " << status.error() << "\n";
    return 1;
  }
  std::cout << "status ok: queue_io=" << status->queueIo << " next_group=" << status->nextGroup
            << " active_paths=" << status->activePaths();
  for (std::size_t g = 0; g < status->groups.size(); ++g) {
    const auto &group = status->groups[g];
    std::cout << " | group " << g + 1 << " " << toChar(group.state);
    for (const auto &path : group.paths) {
      std::cout << " " << path.device << "=" << (path.active ? 'A' : 'F') << "/" << path.failCount;
    }
  }
  std::cout << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: dm_grammar_check table|status LINE\n";
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "table") {
    return checkTable(argv[2]);
  }
  if (mode == "status") {
    return checkStatus(argv[2]);
  }
  std::cerr << "unknown mode '" << mode << "'\n";
  return 2;
}
