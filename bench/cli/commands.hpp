#pragma once
// The subcommands of `yoco`. Each takes the arguments after its name, prints
// its own --help, and returns the exit status; InputError (exit 2) and other
// exceptions (exit 1) propagate to main().
#include <string>
#include <vector>

namespace yoco::cli {

using Args = std::vector<std::string>;

int cmd_forward(const Args& args);
int cmd_generate(const Args& args);
int cmd_weights(const Args& args);
int cmd_demo(const Args& args);
int cmd_model(const Args& args);
int cmd_bench(const Args& args);
int cmd_compare(const Args& args);
int cmd_ratios(const Args& args);
int cmd_check(const Args& args);
int cmd_calibrate(const Args& args);
int cmd_history(const Args& args);

}  // namespace yoco::cli
