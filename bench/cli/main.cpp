// yoco: the suite's command line. Exit status: 0 success, 1 internal failure
// (or a failed check), 2 bad input (yoco::InputError: the message names the
// file, field, option or tensor at fault).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "mpi_job.hpp"
#include "progress.hpp"

namespace {

struct Command {
  const char* name;
  int (*run)(const yoco::cli::Args&);
  const char* summary;
  // forward, generate and bench shard the sequence over mpirun's ranks; the
  // others run one process (every rank ran it whole: two ranks wrote the same
  // weights file, and history's exec of Python left MPI unfinalised, exit 1).
  bool sharded = false;
};

const Command kCommands[] = {
    {"forward", yoco::cli::cmd_forward, "logits of a model over a token sequence, written as .npy", true},
    {"generate", yoco::cli::cmd_generate,
     "prefill + greedy decoding: generated ids, timings, memory; --check against the full forward", true},
    {"weights", yoco::cli::cmd_weights, "init | inspect safetensors weight files"},
    {"bench", yoco::cli::cmd_bench,
     "measure memory, prefill, decode and throughput over models x lengths (no arguments: the default job)", true},
    {"model", yoco::cli::cmd_model, "analytic cost model: memory, FLOPs, bytes, roofline times, KV bytes per token"},
    {"compare", yoco::cli::cmd_compare, "compare two result CSVs (CI regression gate: exit 1 if a metric got worse)"},
    {"ratios", yoco::cli::cmd_ratios, "YOCO-vs-Transformer ratio rows of result CSVs measured apart (a point run alone)"},
    {"check", yoco::cli::cmd_check,
     "judge an implementation's outputs against the fp64 reference (gret, attention), or --generate inputs"},
    {"calibrate", yoco::cli::cmd_calibrate,
     "fit the calibrated cost model to a sweep's measurements and check it against every measured point"},
    {"history", yoco::cli::cmd_history,
     "the performance history: ingest result CSVs into a database, export series (yoco history --help)"},
    {"demo", yoco::cli::cmd_demo, "prefill, generate and check the tiny models (the suite's smoke test)"},
};

std::string top_usage() {
  std::string s =
      "usage: yoco <command> [options]\n"
      "\n"
      "YOCO efficiency suite: YOCO and the GQA Transformer baseline, their cost model and measurement harness.\n"
      "\n"
      "commands:\n";
  for (const auto& c : kCommands) {
    std::string name = c.name;
    s += "  " + name + std::string(10 - name.size(), ' ') + c.summary + "\n";
  }
  s +=
      "\n"
      "Run 'yoco <command> --help' or 'yoco help <command>' for a command's options.\n"
      "Exit status: 0 success, 1 internal failure or failed check, 2 bad input.\n";
  return s;
}

// "forward, generate, ..." from the table, so that a message cannot miss a command.
std::string command_names() {
  std::string s;
  for (const auto& c : kCommands) s += (s.empty() ? "" : ", ") + std::string(c.name);
  return s;
}

int dispatch(int argc, char** argv) {
  // Bad input is one line on stderr (the usage goes to stdout on --help only).
  if (argc < 2) throw yoco::InputError("no command given (commands: " + command_names() + "; see yoco --help)");
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    if (cmd == "help" && argc > 2) {
      for (const auto& c : kCommands)
        if (std::strcmp(c.name, argv[2]) == 0) return c.run({"--help"});
      throw yoco::InputError("unknown command '" + std::string(argv[2]) + "' (see yoco --help)");
    }
    std::cout << top_usage();
    return 0;
  }
  const yoco::cli::Args args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (cmd != c.name) continue;
    if (!c.sharded && yoco::cli::mpi_job() && !yoco::cli::wants_help(args)) {
      std::string sharded;
      for (const auto& s : kCommands)
        if (s.sharded) sharded += std::string(sharded.empty() ? "" : ", ") + s.name;
      throw yoco::InputError("yoco " + cmd + " runs one process: run it without mpirun (" + sharded +
                             " shard over mpirun's ranks)");
    }
    return c.run(args);
  }
  throw yoco::InputError("unknown command '" + cmd + "' (commands: " + command_names() + "; see yoco --help)");
}

// A message on one line: a name from the command line or a file (a path, a
// preset, an option) may hold a line break or other control bytes, which would
// cut the one-line error or garble the terminal, or bytes that are not UTF-8 (a
// UTF-16 token file's 0xff 0xfe). They are shown escaped; UTF-8 text (a path
// with accents) is kept as it is.
size_t utf8_sequence_length(const unsigned char* p) {
  const unsigned char u = p[0];
  const size_t n = u >= 0xf0 && u <= 0xf4 ? 4 : u >= 0xe0 ? 3 : u >= 0xc2 && u <= 0xdf ? 2 : 0;
  if (n == 0 || (n == 3 && u >= 0xf0)) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((p[k] & 0xc0) != 0x80) return 0;  // also stops at the terminating NUL
  // Overlong forms and surrogates are not text either.
  if ((u == 0xe0 && p[1] < 0xa0) || (u == 0xed && p[1] >= 0xa0) || (u == 0xf0 && p[1] < 0x90) ||
      (u == 0xf4 && p[1] >= 0x90))
    return 0;
  return n;
}

std::string one_line(const char* what) {
  std::string out;
  const char* hex = "0123456789abcdef";
  for (const char* p = what; *p; ++p) {
    const auto u = static_cast<unsigned char>(*p);
    if (u == '\n') {
      out += "\\n";
    } else if (u == '\r') {
      out += "\\r";
    } else if (u >= 0x80) {
      if (const size_t n = utf8_sequence_length(reinterpret_cast<const unsigned char*>(p))) {
        out.append(p, n);
        p += n - 1;
      } else {
        out += std::string("\\x") + hex[u >> 4] + hex[u & 15];
      }
    } else if ((u < 0x20 && u != '\t') || u == 0x7f) {
      out += std::string("\\x") + hex[u >> 4] + hex[u & 15];
    } else {
      out += *p;
    }
  }
  return out;
}

// Rows and tables go to stdout, often redirected to a file: a write that failed
// there (a full disk) is bad output, exit 2, not a silent exit 0 with a cut file.
int check_stdout(int status) {
  // Under mpirun only rank 0 prints (the others' std::cout is set bad on purpose).
  if (!yoco::cli::primary_process()) return status;
  errno = 0;
  std::cout.flush();
  if (std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
  const int err = errno;
  std::cerr << "yoco: error: cannot write standard output" << (err ? std::string(" (") + std::strerror(err) + ")" : "")
            << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using yoco::cli::end_job_after_error;
  using yoco::cli::rank_prefix;
  // Under mpirun every rank meets the same bad input: rank 0 says so for the job.
  const auto quiet = [] { return !yoco::cli::primary_process(); };
  try {
    yoco::cli::start_mpi_job();
    yoco::cli::check_progress_setting();
    return check_stdout(dispatch(argc, argv));
  } catch (const yoco::InputError& e) {
    std::cout.flush();
    if (quiet()) {
      // Rank 0 meets the same input and says so for the job (mpirun ends this
      // rank when it exits); an error of this rank's alone (a file only its
      // node has) is said after the wait, with the rank.
      std::this_thread::sleep_for(std::chrono::seconds(3));
      std::cerr << "yoco: " << rank_prefix() << "error: " << one_line(e.what()) << "\n";
    } else {
      std::cerr << "yoco: error: " << one_line(e.what()) << "\n";
    }
    return end_job_after_error(2);
  } catch (const yoco::DeviceError& e) {
    std::cout.flush();
    std::cerr << "yoco: " << rank_prefix() << "device error: " << one_line(e.what()) << "\n";
    return end_job_after_error(1);
  } catch (const std::bad_alloc&) {
    std::cout.flush();
    std::cerr << "yoco: " << rank_prefix() << "internal error: out of memory (std::bad_alloc)\n";
    return end_job_after_error(1);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "yoco: " << rank_prefix() << "internal error: " << one_line(e.what()) << "\n";
    return end_job_after_error(1);
  } catch (...) {
    std::cout.flush();
    std::cerr << "yoco: " << rank_prefix() << "internal error: unknown exception\n";
    return end_job_after_error(1);
  }
}
