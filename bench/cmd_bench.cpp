#include "commands.hpp"
#include "errors.hpp"
namespace yoco::cli {
int cmd_bench(const Args&) { throw InputError("yoco bench: not implemented yet"); }
}  // namespace yoco::cli
