#include "core/train/checkpoint.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/common/check.h"

namespace mddp::train {

using nlohmann::json;

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", "F32"}, {"shape", t.value.shape()}, {"data_offsets", {offset, offset + t.value.bytes()}}};
    offset += t.value.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  const uint64_t n = text.size();

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write checkpoint '" + tmp + "'");
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(n));
    for (const auto& t : tensors) {
      const std::vector<float> host = t.value.to_vector();  // little-endian hosts only (x86, Arm)
      out.write(reinterpret_cast<const char*>(host.data()), static_cast<std::streamsize>(t.value.bytes()));
    }
    if (!out.flush()) throw Error("writing checkpoint '" + tmp + "' failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error("cannot rename '" + tmp + "' to '" + path + "'");
}

LoadedCheckpoint load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open checkpoint '" + path + "'");
  auto bad = [&](const std::string& why) { return InputError("'" + path + "' is not a valid checkpoint: " + why); };
  unsigned char len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8)) throw bad("shorter than 8 bytes");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  if (n > file_size - 8) throw bad("header length " + std::to_string(n) + " exceeds the file");
  in.seekg(8);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) throw bad("header is not a JSON object");

  LoadedCheckpoint out;
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (auto& [k, v] : entry.items())
        if (v.is_string()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    if (!entry.is_object() || entry.value("dtype", "") != "F32") throw bad("tensor '" + name + "' is not F32");
    const auto shape = entry.at("shape").get<tensor::Shape>();
    const auto offs = entry.at("data_offsets").get<std::vector<uint64_t>>();
    const uint64_t bytes = static_cast<uint64_t>(tensor::numel_of(shape)) * sizeof(float);
    if (offs.size() != 2 || offs[1] - offs[0] != bytes || offs[1] > data_size)
      throw bad("tensor '" + name + "' has inconsistent data_offsets");
    std::vector<float> values(tensor::numel_of(shape));
    in.seekg(static_cast<std::streamoff>(data_start + offs[0]));
    if (!in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(bytes))) throw bad("truncated data");
    out.tensors.push_back({name, tensor::Tensor::from_vector(shape, values)});
  }
  return out;
}

}  // namespace mddp::train
