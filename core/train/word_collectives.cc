#include "core/train/word_collectives.h"

#include <cstring>

#include "core/tensor/tensor.h"

namespace mddp::train {
namespace {

tensor::Tensor as_floats(std::span<const uint64_t> words, const tensor::Device& device) {
  std::vector<float> bits(words.size() * 2);
  std::memcpy(bits.data(), words.data(), words.size_bytes());
  return tensor::Tensor::from_vector({static_cast<int64_t>(bits.size())}, bits, device);
}

void copy_words(const tensor::Tensor& floats, std::span<uint64_t> words) {
  const std::vector<float> bits = floats.to_vector();
  std::memcpy(words.data(), bits.data(), words.size_bytes());
}

}  // namespace

std::vector<uint64_t> all_gather_words(comm::ProcessGroup& comm, std::span<const uint64_t> mine,
                                       const tensor::Device& device) {
  const auto n = static_cast<int64_t>(mine.size() * 2);
  const tensor::Tensor in = as_floats(mine, device);
  tensor::Tensor out = tensor::Tensor::zeros({n * comm.size()}, device);
  comm.all_gather(in.data(), out.data(), n, comm::DataType::kFloat32)->wait();
  std::vector<uint64_t> all(mine.size() * static_cast<std::size_t>(comm.size()));
  copy_words(out, all);
  return all;
}

void broadcast_words(comm::ProcessGroup& comm, std::span<uint64_t> words, int root,
                     const tensor::Device& device) {
  tensor::Tensor buf = as_floats(words, device);
  comm.broadcast(buf.data(), buf.numel(), comm::DataType::kFloat32, root)->wait();
  copy_words(buf, words);
}

}  // namespace mddp::train
