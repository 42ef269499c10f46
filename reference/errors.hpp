#pragma once
// Errors the command line maps to exit codes: InputError (exit 2) is anything
// the user can fix -- a malformed file, an impossible shape, an unknown name --
// and always names the file, field or tensor at fault. DeviceError (exit 1) is
// a device that failed under us -- its ceilings could not be measured, its
// context was lost -- and says what failed. Everything else is an internal
// failure (exit 1).
#include <stdexcept>
#include <string>

namespace yoco {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

class DeviceError : public std::runtime_error {
 public:
  explicit DeviceError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace yoco
