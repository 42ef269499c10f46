#include "result_output.hpp"

#include <filesystem>
#include <iostream>

#include "atomic_file.hpp"
#include "errors.hpp"
#include "mpi_job.hpp"

namespace yoco::cli {

OutputFormat parse_output_format(const ParsedArgs& a) {
  const std::string f = a.get_or("--format", "table");
  if (f == "table") return OutputFormat::table;
  if (f == "csv") return OutputFormat::csv;
  if (f == "json") return OutputFormat::json;
  throw InputError("--format: expected table, csv or json, got '" + f + "'");
}

void prepare_output_path(const std::string& path) {
  if (!primary_process()) return;  // under mpirun rank 0 writes the files
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);  // as save_results_csv does
  check_output_path(path);  // fails naming the path when the folder is missing or not writable
}

void refuse_output_over_input(const std::string& option, const std::string& out, const std::string& input,
                              const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::equivalent(out, input, ec) || ec) return;  // either missing: not the same file
  throw InputError(option + " " + out + " is " + what + " (" + input +
                   "): writing it would replace the input; give another " + option);
}

void emit_rows(const ParsedArgs& a, OutputFormat format, const std::vector<ResultRow>& rows,
               const std::function<void()>& print_table) {
  if (!primary_process()) return;  // under mpirun rank 0 prints and writes for the job
  if (auto out = a.get("--out")) {
    save_results_csv(*out, rows);
    std::cerr << "wrote " << rows.size() << " rows to " << *out << "\n";
  }
  switch (format) {
    case OutputFormat::table: print_table(); break;
    case OutputFormat::csv: write_results_csv(std::cout, rows); break;
    case OutputFormat::json: write_results_json(std::cout, rows); break;
  }
}

}  // namespace yoco::cli
