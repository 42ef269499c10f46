#include "commands.hpp"
#include "errors.hpp"
namespace yoco::cli {
int cmd_compare(const Args&) { throw InputError("yoco compare: not implemented yet"); }
}  // namespace yoco::cli
