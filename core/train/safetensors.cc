#include "core/train/safetensors.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/common/sha256.h"

namespace mddp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the format's own limit
// The metadata key of the tensors' checksums (Note [Tensor checksums]).
constexpr const char* kChecksumKey = "tensor_sha256";

std::string sha256_hex(const float* data, std::size_t bytes) {
  Sha256 h;
  h.update(data, bytes);
  return h.hex();
}

// The checksum of the bytes save_safetensors writes for `t`: a CPU tensor
// hashed where it lies, a GPU tensor through a host copy.
std::string tensor_sha256(const tensor::Tensor& t) {
  if (t.device().is_cpu()) return sha256_hex(t.data(), t.bytes());
  const std::vector<float> host = t.to_vector();
  return sha256_hex(host.data(), t.bytes());
}

std::string hostname() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
}

std::string errno_text() {
  return std::strerror(errno);
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const void* data, std::size_t n, const std::string& tmp) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error(str("writing '", tmp, "' failed: ", errno_text()));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// The header text padded so that the data section starts 8-byte aligned.
std::string header_text(const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.value.shape()},
                      {"data_offsets", {offset, offset + t.value.bytes()}}};
    offset += t.value.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void write_file(const std::string& tmp, const std::vector<NamedTensor>& tensors,
                std::map<std::string, std::string> metadata) {
  Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (f.fd < 0) throw Error(str("cannot create '", tmp, "': ", errno_text()));
  json sums = json::object();  // in the header, so before the data
  for (const auto& t : tensors) sums[t.name] = tensor_sha256(t.value);
  metadata[kChecksumKey] = sums.dump();
  const std::string text = header_text(tensors, metadata);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  write_all(f.fd, len, 8, tmp);
  write_all(f.fd, text.data(), text.size(), tmp);
  for (const auto& t : tensors) {
    const std::vector<float> host = t.value.to_vector();  // little-endian hosts only (x86, Arm)
    write_all(f.fd, host.data(), t.value.bytes(), tmp);
  }
  if (::fsync(f.fd) != 0) throw Error(str("writing '", tmp, "' failed: ", errno_text()));
  const int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) throw Error(str("writing '", tmp, "' failed: ", errno_text()));
}

// The rename is durable only once the directory entry is on disk.
void fsync_dir(const fs::path& dir) {
  Fd d{::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0) ::fsync(d.fd);
}

bool process_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

struct Header {
  json entries;
  uint64_t data_start = 0, data_size = 0;
};

Header read_header(std::ifstream& in, const std::string& path) {
  const auto bad = [&](const std::string& why) {
    return InputError(str("'", path, "' is not a valid safetensors file: ", why));
  };
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char len[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(len), 8))
    throw bad(str("it has ", size, " bytes, less than the 8-byte header length"));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > kMaxHeaderBytes || n > size - 8)
    throw bad(str("its header length ", n, " exceeds the file (", size,
                  " bytes): truncated, or not safetensors"));
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  Header h;
  h.entries = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!h.entries.is_object()) throw bad("its header is not a JSON object");
  h.data_start = 8 + n;
  h.data_size = size - h.data_start;
  if (auto it = h.entries.find("__metadata__"); it != h.entries.end()) {
    if (!it->is_object()) throw bad("__metadata__ is not an object");
    for (auto& [k, v] : it->items())
      if (!v.is_string()) throw bad("metadata '" + k + "' is not a string");
  }
  return h;
}

// The caller's metadata: everything but the checksums, which are this file layer's.
std::map<std::string, std::string> metadata_of(const Header& h) {
  std::map<std::string, std::string> out;
  if (auto it = h.entries.find("__metadata__"); it != h.entries.end())
    for (auto& [k, v] : it->items())
      if (k != kChecksumKey) out[k] = v.get<std::string>();
  return out;
}

// The checksums by tensor name; null for a file written without them (by
// PyTorch, or by microddp before they were added).
json checksums_of(const Header& h, const std::string& path) {
  const auto meta = h.entries.find("__metadata__");
  if (meta == h.entries.end() || !meta->contains(kChecksumKey)) return nullptr;
  json sums = json::parse((*meta)[kChecksumKey].get<std::string>(), nullptr, false);
  if (!sums.is_object())
    throw InputError(str("'", path, "' is damaged: its ", kChecksumKey, " metadata is not JSON"));
  return sums;
}

// Throws InputError naming the file and the tensor when `values` are not the
// bytes that were written (Note [Tensor checksums]).
void check_tensor(const json& sums, const std::string& path, const std::string& name,
                  const std::vector<float>& values) {
  if (sums.is_null()) return;
  const auto it = sums.find(name);
  const std::string written = it != sums.end() && it->is_string() ? it->get<std::string>() : "";
  if (written.empty())
    throw InputError(str("'", path, "' is damaged: tensor '", name, "' has no checksum in ",
                         kChecksumKey, " (its header was changed)"));
  if (const std::string read = sha256_hex(values.data(), values.size() * sizeof(float));
      read != written)
    throw InputError(str("'", path, "' is damaged: tensor '", name,
                         "' does not match the SHA-256 written with it (", written.substr(0, 12),
                         "..., read ", read.substr(0, 12),
                         "...): the file changed after it was written"));
}

std::ifstream open_for_reading(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw InputError(str("cannot open '", path, "': it is a directory"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str("cannot open '", path, "': ", errno_text()));
  return in;
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  return str(path, ".tmp.", hostname(), ".", ::getpid());
}

void write_temp(const std::string& path, const std::vector<NamedTensor>& tensors,
                const std::map<std::string, std::string>& metadata) {
  const std::string tmp = temp_path_for(path);
  try {
    write_file(tmp, tensors, metadata);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

void commit_temp(const std::string& path) {
  const std::string tmp = temp_path_for(path);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error(str("cannot rename '", tmp, "' to '", path, "': ", why));
  }
  fsync_dir(fs::path(path).parent_path());
}

void discard_temp(const std::string& path) {
  ::unlink(temp_path_for(path).c_str());
}

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_temp(path, tensors, metadata);
  commit_temp(path);
}

Safetensors load_safetensors(const std::string& path) {
  std::ifstream in = open_for_reading(path);
  const Header h = read_header(in, path);
  const auto bad = [&](const std::string& why) {
    return InputError(str("'", path, "' is not a valid safetensors file: ", why));
  };
  Safetensors out;
  out.metadata = metadata_of(h);
  const json sums = checksums_of(h, path);
  for (auto& [name, entry] : h.entries.items()) {
    if (name == "__metadata__") continue;
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      throw bad("tensor '" + name + "' lacks dtype, shape or data_offsets");
    if (entry["dtype"] != "F32")
      throw bad(str("tensor '", name, "' is ", entry["dtype"].dump(),
                    "; microddp reads F32 only (in PyTorch: ",
                    "save {k: v.float() for k, v in state_dict.items()})"));
    tensor::Shape shape;
    std::vector<uint64_t> offs;
    try {
      shape = entry["shape"].get<tensor::Shape>();
      offs = entry["data_offsets"].get<std::vector<uint64_t>>();
    } catch (const json::exception&) {
      throw bad("tensor '" + name + "' has a malformed shape or data_offsets");
    }
    // Elements counted without overflow; the offsets checks below then bound
    // them by the file's size before anything is allocated.
    uint64_t numel = 1;
    for (int64_t d : shape) {
      constexpr uint64_t kMost = UINT64_MAX / sizeof(float);
      if (d < 0 || (d > 0 && numel > kMost / static_cast<uint64_t>(d)))
        throw bad(
            str("tensor '", name, "' has shape ", tensor::shape_str(shape), ", which overflows"));
      numel *= static_cast<uint64_t>(d);
    }
    const uint64_t bytes = numel * sizeof(float);
    if (offs.size() != 2 || offs[0] > offs[1] || offs[1] - offs[0] != bytes)
      throw bad(str("tensor '", name, "' has data_offsets that do not match its shape ",
                    tensor::shape_str(shape)));
    if (offs[1] > h.data_size)
      throw bad(str("tensor '", name, "' ends at byte ", offs[1], " of a data section of ",
                    h.data_size, " bytes: the file is truncated"));
    std::vector<float> values(static_cast<std::size_t>(numel));
    in.seekg(static_cast<std::streamoff>(h.data_start + offs[0]));
    if (!in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(bytes)))
      throw bad("reading tensor '" + name + "' failed");
    check_tensor(sums, path, name, values);
    out.tensors.push_back({name, tensor::Tensor::from_vector(shape, values)});
  }
  return out;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  std::ifstream in = open_for_reading(path);
  return metadata_of(read_header(in, path));
}

namespace {

// `file`'s tensors by name.
std::map<std::string, const tensor::Tensor*> tensors_by_name(const Safetensors& file) {
  std::map<std::string, const tensor::Tensor*> out;
  for (const auto& t : file.tensors) out[t.name] = &t.value;
  return out;
}

}  // namespace

void copy_tensors_by_name(const std::vector<std::pair<std::string, tensor::Tensor>>& targets,
                          const Safetensors& file, const std::string& what) {
  auto found = tensors_by_name(file);
  for (const auto& [name, target] : targets) {
    const auto it = found.find(name);
    if (it == found.end())
      throw InputError(str(what, ": tensor '", name, "' (shape ", tensor::shape_str(target.shape()),
                           ") is not in the file; is it of another model?"));
    if (it->second->shape() != target.shape())
      throw InputError(str(what, ": tensor '", name, "' has shape ",
                           tensor::shape_str(it->second->shape()), ", the model expects ",
                           tensor::shape_str(target.shape())));
    found.erase(it);
  }
  if (!found.empty())
    throw InputError(str(what, ": the file has tensor '", found.begin()->first, "' (shape ",
                         tensor::shape_str(found.begin()->second->shape()),
                         ") that the model does not"));
  const auto all = tensors_by_name(file);
  for (auto [name, target] : targets) target.copy_from(*all.at(name));
}

int remove_stale_temps(const std::string& dir) {
  const std::string marker = ".tmp." + hostname() + ".";
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::size_t at = name.rfind(marker);
    if (at == std::string::npos) continue;
    const std::string pid = name.substr(at + marker.size());
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (process_alive(std::stol(pid))) continue;
    if (fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace mddp::train
