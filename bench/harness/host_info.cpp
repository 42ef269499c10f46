#include "host_info.hpp"

#include <sys/utsname.h>

#include <cctype>
#include <fstream>
#include <string>
#include <thread>

namespace yoco::cli {

std::string cpu_device_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 1);
      break;
    }
  }
  model.erase(0, model.find_first_not_of(" \t"));
  while (!model.empty() && std::isspace(static_cast<unsigned char>(model.back()))) model.pop_back();
  if (model.empty()) model = "unknown CPU";
  return model + " (" + std::to_string(std::thread::hardware_concurrency()) + " cores)";
}

std::string kernel_release() {
  utsname u{};
  if (uname(&u) != 0) return "";
  return std::string(u.sysname) + " " + u.release;
}

std::string device_slug(const std::string& device, const std::string& device_name) {
  std::string name = device_name.substr(0, device_name.find(" ("));  // drop "(2 cores)", "(datasheet)"
  std::string slug = device;
  bool dash = true;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      if (dash) slug += '-';
      slug += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      dash = false;
    } else {
      dash = true;
    }
    if (slug.size() > 40) break;
  }
  return slug;
}

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";  // "5": reset the peak RSS mark (Linux >= 4.0)
  f.flush();
  return static_cast<bool>(f);
}

int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  return 0;
}

}  // namespace yoco::cli
