// Checkpoints: the safetensors layout read back exactly, checked byte by byte
// against the format's definition, and bad files refused with the path.
#include "core/train/safetensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/common/check.h"

namespace mddp::train {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))).string();
}

// What we write reads back: names, shapes, values, metadata.
TEST(Checkpoint, RoundTrip) {
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
TEST(Checkpoint, FollowsTheSafetensorsLayout) {
  const std::string path = temp_path("ckpt-layout.safetensors");
  save_safetensors(path, {{"w", tensor::Tensor::from_vector({2}, {1.5f, -2.0f})}}, {{"format", "x"}});
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

// Truncated, garbage and missing files are refused with a message naming the file.
TEST(Checkpoint, BadFilesAreRefusedWithThePath) {
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

}  // namespace
}  // namespace mddp::train
