// yoco history: the performance history (reports/history.py, Python beside the
// report code): the command runs it with Debian's interpreter, passing the
// arguments through, so that `yoco history …` and the script are one command.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "errors.hpp"

#ifndef YOCO_SOURCE_DIR
#define YOCO_SOURCE_DIR "."
#endif

namespace yoco::cli {

int cmd_history(const Args& args) {
  // The script of this checkout; YOCO_REPORTS_DIR points elsewhere (a binary
  // carried to another machine with the tree beside it).
  const char* env = std::getenv("YOCO_REPORTS_DIR");
  std::string script = std::string(env && *env ? env : YOCO_SOURCE_DIR "/reports") + "/history.py";
  if (!std::filesystem::exists(script) && std::filesystem::exists("reports/history.py")) script = "reports/history.py";
  if (!std::filesystem::exists(script))
    throw InputError("yoco history: " + script + " not found (set YOCO_REPORTS_DIR to the reports/ folder)");
  const char* python = "/usr/bin/python3";
  std::vector<std::string> argv_s{python, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execv(python, argv.data());
  throw InputError(std::string("yoco history: cannot run ") + python + ": " + std::strerror(errno) +
                   " (scripts/install-deps.sh installs it)");
}

}  // namespace yoco::cli
