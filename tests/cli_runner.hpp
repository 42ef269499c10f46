#pragma once
// Runs the built `yoco` binary (YOCO_CLI_PATH) through the shell for the
// end-to-end tests: exit status, stdout and stderr, in a per-test temp dir.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace yoco_test {

namespace fs = std::filesystem;

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << p;
}

struct CliRun {
  int status = -1;  // exit code, or -signal when killed by a signal
  std::string out, err;
  std::string all() const { return out + err; }
};

// One counter per process plus the pid: unique names even when test binaries run in parallel.
inline std::string unique_name(const std::string& stem) {
  static std::atomic<int> counter{0};
  return stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / unique_name("yoco_test");
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Runs `yoco <args>`; `args` is pasted into a shell command line as is.
  CliRun yoco(const std::string& args) { return shell(shell_quote(YOCO_CLI_PATH) + " " + args); }

  // Runs a shell command line, stdout and stderr captured apart.
  CliRun shell(const std::string& command) {
    const std::string out = path(unique_name("stdout")), err = path(unique_name("stderr"));
    const std::string cmd = command + " >" + shell_quote(out) + " 2>" + shell_quote(err);
    const int raw = std::system(cmd.c_str());
    CliRun r;
    if (raw == -1) r.status = -1000;
    else if (WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
    else if (WIFSIGNALED(raw)) r.status = -WTERMSIG(raw);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  fs::path dir_;
};

// Asserts exit 2 with "yoco: error: " on stderr and every `needles` in the message.
inline void expect_input_error(const CliRun& r, const std::vector<std::string>& needles, const std::string& what) {
  EXPECT_EQ(r.status, 2) << what << "\nstdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_NE(r.err.find("yoco: error: "), std::string::npos) << what << "\nstderr: " << r.err;
  for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << what << ": no '" << n << "' in: " << r.err;
}

}  // namespace yoco_test
