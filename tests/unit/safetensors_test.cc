// The safetensors layout (core/train/safetensors.h) read back exactly,
// checked byte by byte against the format's definition, and bad or hostile
// files refused with the path and the reason.
#include "core/train/safetensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/common/sha256.h"

namespace mddp::train {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid())))
      .string();
}

// A file written by hand: the header `json` and `data_bytes` bytes of data.
void write_raw(const std::string& path, const std::string& json, std::size_t data_bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << json << std::string(data_bytes, '\0');
}

// What we write reads back: names, shapes, values, metadata.
TEST(Safetensors, RoundTrip) {
  const std::string path = temp_path("ckpt-roundtrip.safetensors");
  const auto a = tensor::Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto b = tensor::Tensor::from_vector({1}, {-0.5f});
  save_safetensors(path, {{"layer.weight", a}, {"layer.bias", b}}, {{"step", "7"}});
  const Safetensors c = load_safetensors(path);
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].name, "layer.bias");  // sorted by name
  EXPECT_EQ(c.tensors[1].value.shape(), (tensor::Shape{2, 3}));
  EXPECT_EQ(c.tensors[1].value.to_vector(), a.to_vector());
  EXPECT_EQ(c.tensors[0].value.to_vector(), b.to_vector());
  EXPECT_EQ(c.metadata.at("step"), "7");
  std::filesystem::remove(path);
}

// The file follows the safetensors definition, independently parsed here:
// u64 little-endian header length, JSON header, then raw little-endian f32.
TEST(Safetensors, FollowsTheSafetensorsLayout) {
  const std::string path = temp_path("ckpt-layout.safetensors");
  save_safetensors(path, {{"w", tensor::Tensor::from_vector({2}, {1.5f, -2.0f})}},
                   {{"format", "x"}});
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  ASSERT_LE(8 + n + 8, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data section should be 8-byte aligned";
  const auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + n));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(header["w"]["data_offsets"], nlohmann::json::array({0, 8}));
  EXPECT_EQ(header["__metadata__"]["format"], "x");
  float v[2];
  std::memcpy(v, bytes.data() + 8 + n, 8);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], -2.0f);
  std::filesystem::remove(path);
}

// Note [Tensor checksums]: the header records each tensor's SHA-256 (checked
// here against the file's own bytes), the reader leaves them out of the
// metadata, one flipped bit is refused naming the tensor, and a file without
// checksums (another writer's) loads.
TEST(Safetensors, ChecksumsCatchAFlippedBitAndFilesWithoutThemLoad) {
  const std::string path = temp_path("st-checksum.safetensors");
  save_safetensors(path,
                   {{"a", tensor::Tensor::from_vector({2}, {1, 2})},
                    {"b", tensor::Tensor::from_vector({3}, {3, 4, 5})}},
                   {{"k", "v"}});
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  const auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + n));
  const auto sums =
      nlohmann::json::parse(header["__metadata__"]["tensor_sha256"].get<std::string>());
  for (const char* name : {"a", "b"}) {
    const auto offs = header[name]["data_offsets"];
    Sha256 h;
    h.update(bytes.data() + 8 + n + offs[0].get<uint64_t>(),
             offs[1].get<uint64_t>() - offs[0].get<uint64_t>());
    EXPECT_EQ(sums[name], h.hex()) << name;
  }
  EXPECT_EQ(load_safetensors(path).metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_EQ(load_safetensors_metadata(path).size(), 1u);

  bytes[8 + n + header["b"]["data_offsets"][0].get<uint64_t>() + 5] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  try {
    load_safetensors(path);
    ADD_FAILURE() << "a flipped bit was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + path + "' is damaged: tensor 'b' does not match"),
              std::string::npos)
        << e.what();
  }

  write_raw(path, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  EXPECT_EQ(load_safetensors(path).tensors.at(0).value.to_vector(), (std::vector<float>{0, 0}));
  std::filesystem::remove(path);
}

// Truncated, garbage and missing files are refused with a message naming the file.
TEST(Safetensors, BadFilesAreRefusedWithThePath) {
  const std::string path = temp_path("ckpt-bad.safetensors");
  save_safetensors(path, {{"w", tensor::Tensor::from_vector({4}, {1, 2, 3, 4})}}, {});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  const auto expect_refused = [&](const std::string& p) {
    try {
      load_safetensors(p);
      ADD_FAILURE() << "accepted " << p;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  expect_refused(path);
  std::ofstream(path, std::ios::trunc) << "definitely not a checkpoint, but long enough";
  expect_refused(path);
  expect_refused(path + ".missing");
  std::filesystem::remove(path);
}

// Headers that lie about the data: refused by reason, before any allocation
// the file cannot back (a shape whose size overflows, offsets outside the file).
TEST(Safetensors, HostileHeadersAreRefusedWithTheReason) {
  const std::string path = temp_path("st-hostile.safetensors");
  const auto refused_because = [&](const std::string& json, std::size_t data,
                                   const std::string& why) {
    write_raw(path, json, data);
    try {
      load_safetensors(path);
      ADD_FAILURE() << "accepted " << json;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused_because(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                  16, "which overflows");
  refused_because(R"({"w":{"dtype":"F32","shape":[1073741824],"data_offsets":[0,4294967296]}})", 16,
                  "truncated");
  refused_because(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", 16,
                  "microddp reads F32 only");
  refused_because(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8, "truncated");
  refused_because(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8,
                  "do not match its shape");
  refused_because(R"({"w":{"dtype":"F32","shape":"two","data_offsets":[0,8]}})", 8, "malformed");
  refused_because(
      R"({"__metadata__":{"step":7},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8,
      "metadata 'step' is not a string");
  refused_because(R"([1, 2])", 0, "not a JSON object");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mddp::train
