#include "safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <nlohmann/json.hpp>

#include "atomic_file.hpp"
#include "errors.hpp"

namespace yoco {
namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // the format's own 100 MB limit

[[noreturn]] void fail(const std::string& path, const std::string& why) { throw InputError(path + ": " + why); }

// Far deeper than a safetensors header needs (header object, tensor entry,
// shape array: depth 3). Past it the header is rejected while it is parsed,
// before anything recursive (nlohmann's dump, a copy) could walk it and
// overflow the stack (issue 12).
constexpr int kMaxJsonDepth = 64;

// Names (tensor names, metadata keys) as they appear in messages: cut short,
// since a header may hold a name of many megabytes.
std::string cut(std::string s) {
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}
// A JSON value in a message: scalars as written (cut short), a container by
// its type only -- never a full dump, which is recursive.
std::string shown(const nlohmann::json& v) {
  if (v.is_structured()) return std::string("an ") + v.type_name();
  if (v.is_boolean()) return "a boolean (" + v.dump() + ")";
  return cut(v.dump());
}

constexpr const char* kOurDtypes = "F64, F32, BF16, F16, I64, I32";
constexpr const char* kFormatDtypes = "BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64";

// Bytes an element of one of the format's dtypes this suite does not read; 0 for a name the format lacks.
int other_dtype_size(const std::string& dt) {
  if (dt == "BOOL" || dt == "U8" || dt == "I8" || dt == "F8_E5M2" || dt == "F8_E4M3") return 1;
  if (dt == "I16" || dt == "U16") return 2;
  if (dt == "U32") return 4;
  if (dt == "U64") return 8;
  return 0;
}

}  // namespace

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const auto fsize = std::filesystem::file_size(path_, ec);
  if (ec) fail(path_, "cannot open (" + ec.message() + ")");
  std::ifstream in(path_, std::ios::binary);
  if (!in) fail(path_, "cannot open (" + std::generic_category().message(errno) + ")");
  if (fsize < 8) fail(path_, "truncated: shorter than the 8-byte header length");
  unsigned char lenbuf[8];
  in.read(reinterpret_cast<char*>(lenbuf), 8);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | lenbuf[i];
  // A file of another kind read as safetensors had its first 8 bytes taken for a header length
  // ("header length 379676406402707 exceeds the 100 MB limit" for a .npy): say what it is instead.
  if (std::memcmp(lenbuf, "\x93NUMPY", 6) == 0) fail(path_, "a .npy file, not safetensors");
  if (hlen > kMaxHeader || hlen > fsize - 8) {
    char first = '\0';
    if (fsize > 8 && in.get(first) && first != '{')
      fail(path_, "not a safetensors file (it does not start with an 8-byte header length and a JSON header)");
    in.clear();
    in.seekg(8);
  }
  if (hlen > kMaxHeader) fail(path_, "header length " + std::to_string(hlen) + " exceeds the 100 MB limit");
  if (hlen > fsize - 8)
    fail(path_, "header length " + std::to_string(hlen) + " runs past the end of the file (" + std::to_string(fsize) +
                    " bytes)");
  std::string header(hlen, '\0');
  in.read(header.data(), static_cast<std::streamsize>(hlen));
  if (!in) fail(path_, "truncated header");
  data_start_ = 8 + hlen;
  data_size_ = fsize - data_start_;

  nlohmann::json j;
  try {
    // Strict JSON: NaN, Infinity and comments are parse errors.
    j = nlohmann::json::parse(header, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
      if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth)
        fail(path_, "header JSON is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    // parse_error and also out_of_range (a number too large for a double, e.g. 1e400).
    fail(path_, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) fail(path_, "header is not a JSON object, got " + shown(j));
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path_, "__metadata__ is not an object of strings, got " + shown(v));
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) fail(path_, "__metadata__ value of '" + cut(k) + "' is not a string, got " + shown(s));
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + cut(name) + "': ";
    if (!v.is_object()) fail(path_, where + "entry is not an object, got " + shown(v));
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!v.contains(field)) fail(path_, where + "entry needs dtype, shape and data_offsets (no " + field + ")");
    SafetensorsEntry e;
    const auto& dtv = v.at("dtype");
    if (!dtv.is_string()) fail(path_, where + "dtype is not a string, got " + shown(dtv));
    const auto dt = dtv.get<std::string>();
    const bool ours = dtype_from_safetensors_name(dt, &e.dtype);
    const int other_size = ours ? 0 : other_dtype_size(dt);
    if (!ours && other_size == 0)
      fail(path_, where + "unknown dtype " + cut(dt) + " (the format's: " + kFormatDtypes + ")");
    const auto& shape = v.at("shape");
    if (!shape.is_array()) fail(path_, where + "shape is not an array, got " + shown(shape));
    // Element count <= 2^50, so the byte count (x 8 at most) cannot overflow:
    // each product is checked before it is formed.
    constexpr int64_t kMaxNumel = int64_t{1} << 50;
    int64_t numel = 1;
    bool zero = false;
    for (const auto& s : shape) {
      // Non-negative integers only: not a float (2.0 included), a boolean, null, a string or a container.
      if (!s.is_number_integer())
        fail(path_, where + "shape has a dimension that is not a non-negative integer: " + shown(s));
      if (s.is_number_unsigned() ? s.get<uint64_t>() > static_cast<uint64_t>(kMaxNumel) : s.get<int64_t>() < 0)
        fail(path_, where + "shape has a bad dimension " + shown(s) +
                        (s.is_number_unsigned() ? " (more than 2^50 elements)" : " (negative)"));
      const int64_t dim = s.get<int64_t>();
      e.shape.push_back(dim);
      if (dim == 0) zero = true;
      if (!zero && numel > kMaxNumel / dim)
        fail(path_, where + "shape has more than 2^50 elements (the product passes it at dimension " +
                        std::to_string(e.shape.size()) + ", " + std::to_string(dim) + ")");
      numel = zero ? 0 : numel * dim;
    }
    const auto& off = v.at("data_offsets");
    if (!off.is_array()) fail(path_, where + "data_offsets must be an array of two non-negative integers, got " + shown(off));
    if (off.size() != 2)
      fail(path_, where + "data_offsets must be two non-negative integers, got " + std::to_string(off.size()) + " values");
    for (const auto& o : off)
      if (!o.is_number_unsigned()) fail(path_, where + "data_offsets must be two non-negative integers, got " + shown(o));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end < e.begin) fail(path_, where + "data_offsets are reversed");
    if (e.end > data_size_)
      fail(path_, where + "data runs past the end of the file (truncated?): ends at " + std::to_string(e.end) +
                      ", data section has " + std::to_string(data_size_) + " bytes");
    const uint64_t want = static_cast<uint64_t>(numel) * (ours ? dtype_size(e.dtype) : other_size);
    if (e.end - e.begin != want)
      fail(path_, where + "holds " + std::to_string(e.end - e.begin) + " bytes but dtype and shape need " +
                      std::to_string(want));
    if (ours) entries_.emplace(name, std::move(e));
    else others_.emplace(name, SafetensorsOtherEntry{dt, std::move(e.shape), e.begin, e.end});
  }
  // The format requires the data section to be covered exactly: no two tensors
  // sharing bytes, no holes.
  struct Span {
    const std::string* name;
    uint64_t begin, end;
  };
  std::vector<Span> by_offset;
  for (const auto& [name, e] : entries_) by_offset.push_back({&name, e.begin, e.end});
  for (const auto& [name, e] : others_) by_offset.push_back({&name, e.begin, e.end});
  // By (begin, end): an empty tensor sits before a non-empty one at its offset, not inside it.
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Span& a, const Span& b) { return std::pair(a.begin, a.end) < std::pair(b.begin, b.end); });
  uint64_t covered = 0;
  for (const auto& s : by_offset) {
    if (s.begin < covered) fail(path_, "tensor '" + *s.name + "': data overlaps the previous tensor's");
    if (s.begin > covered) fail(path_, "tensor '" + *s.name + "': a hole of " + std::to_string(s.begin - covered) +
                                           " bytes precedes its data");
    covered = s.end;
  }
  if (covered != data_size_)
    fail(path_, std::to_string(data_size_ - covered) + " bytes after the last tensor's data (file is not ours or is corrupt)");
}

std::string SafetensorsReader::unsupported_dtype_message(const std::string& name) const {
  return path_ + ": tensor '" + cut(name) + "': unsupported dtype " + others_.at(name).dtype + " (accepted: " +
         kOurDtypes + ")";
}

template <class T>
void SafetensorsReader::read(const std::string& name, T* dst) const {
  const auto it = entries_.find(name);
  if (others_.count(name)) throw InputError(unsupported_dtype_message(name));
  if (it == entries_.end()) fail(path_, "no tensor '" + name + "'");
  read_range(name, 0, it->second.numel(), dst);
}

template <class T>
void SafetensorsReader::read_range(const std::string& name, int64_t first, int64_t count, T* dst) const {
  const auto it = entries_.find(name);
  if (others_.count(name)) throw InputError(unsupported_dtype_message(name));
  if (it == entries_.end()) fail(path_, "no tensor '" + name + "'");
  const auto& e = it->second;
  if (first < 0 || count < 0 || first > e.numel() - count)
    fail(path_, "tensor '" + name + "': elements [" + std::to_string(first) + ", " + std::to_string(first + count) +
                    ") outside its " + std::to_string(e.numel()));
  const uint64_t es = static_cast<uint64_t>(dtype_size(e.dtype));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin + static_cast<uint64_t>(first) * es));
  std::vector<unsigned char> raw(static_cast<size_t>(count) * es);
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (!in) fail(path_, "tensor '" + name + "': read failed (truncated?)");
  for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<T>(decode_value(e.dtype, raw.data() + i * es));
}

template void SafetensorsReader::read<float>(const std::string&, float*) const;
template void SafetensorsReader::read<double>(const std::string&, double*) const;
template void SafetensorsReader::read_range<float>(const std::string&, int64_t, int64_t, float*) const;
template void SafetensorsReader::read_range<double>(const std::string&, int64_t, int64_t, double*) const;

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<Spec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : tensors_(std::move(tensors)) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    int64_t n = 1;
    for (auto d : t.shape) n *= d;
    const uint64_t bytes = static_cast<uint64_t>(n) * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h.push_back(' ');  // data section 8-byte aligned
  out_ = std::make_unique<AtomicFile>(path);         // a failed write leaves any earlier file intact
  unsigned char lenbuf[8];
  const uint64_t hl = h.size();
  for (int i = 0; i < 8; ++i) lenbuf[i] = static_cast<unsigned char>((hl >> (8 * i)) & 0xff);
  out_->write(lenbuf, 8);
  out_->write(h);
}

SafetensorsWriter::~SafetensorsWriter() = default;

template <class T>
void SafetensorsWriter::append_impl(const T* x, int64_t count) {
  while (count > 0) {
    // Tensors already complete (or empty) are passed over.
    while (tensor_ < tensors_.size()) {
      int64_t n = 1;
      for (auto d : tensors_[tensor_].shape) n *= d;
      if (written_ < n) break;
      ++tensor_;
      written_ = 0;
    }
    if (tensor_ == tensors_.size())
      throw InputError(out_->path() + ": more elements appended than the header's tensors hold");
    const Spec& t = tensors_[tensor_];
    int64_t n = 1;
    for (auto d : t.shape) n *= d;
    const int64_t take = std::min(count, n - written_);
    const int es = dtype_size(t.dtype);
    buf_.resize(static_cast<size_t>(take) * es);
    for (int64_t i = 0; i < take; ++i) encode_value(t.dtype, static_cast<double>(x[i]), buf_.data() + i * es);
    out_->write(buf_.data(), buf_.size());
    written_ += take;
    x += take;
    count -= take;
  }
}

void SafetensorsWriter::append(const double* x, int64_t count) { append_impl(x, count); }
void SafetensorsWriter::append(const float* x, int64_t count) { append_impl(x, count); }

void SafetensorsWriter::commit() {
  for (; tensor_ < tensors_.size(); ++tensor_, written_ = 0) {
    int64_t n = 1;
    for (auto d : tensors_[tensor_].shape) n *= d;
    if (written_ < n)
      throw InputError(out_->path() + ": tensor '" + tensors_[tensor_].name + "' has " + std::to_string(written_) +
                       " of its " + std::to_string(n) + " elements at commit (nothing written)");
  }
  out_->commit();
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Spec> specs;
  for (const auto& t : tensors) specs.push_back({t.name, dtype, t.shape});
  SafetensorsWriter out(path, specs, metadata);
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (auto d : t.shape) n *= d;
    if (t.data64) out.append(t.data64, n);
    else out.append(t.data32, n);
  }
  out.commit();
}

}  // namespace yoco
