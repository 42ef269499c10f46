#include "commands.hpp"
#include "errors.hpp"
namespace yoco::cli {
int cmd_model(const Args&) { throw InputError("yoco model: not implemented yet"); }
}  // namespace yoco::cli
