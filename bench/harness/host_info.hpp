#pragma once
// What the CPU harness records about the machine and the process: the CPU's
// name (the device_name of CPU rows), the kernel release (their `driver`),
// and the process's peak resident set size per point.
#include <cstdint>
#include <string>

namespace yoco::cli {

// "AMD EPYC 7B13 (2 cores)" from /proc/cpuinfo; "unknown CPU (N cores)" otherwise.
std::string cpu_device_name();
// "Linux 6.1.0-18-amd64" (uname).
std::string kernel_release();
// A folder name for results: "cpu-amd-epyc-7b13".
std::string device_slug(const std::string& device, const std::string& device_name);

// Resets the kernel's peak-RSS mark (VmHWM) to the current RSS; false when the
// kernel refuses (then peak_rss_bytes is the peak since the process started).
bool reset_peak_rss();
// VmHWM of /proc/self/status in bytes (0 if unreadable).
int64_t peak_rss_bytes();

}  // namespace yoco::cli
