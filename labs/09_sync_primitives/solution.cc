// Lab 9's reference solution, with the Communicator's primitives
// (core/comm/communicator.h): the parameter broadcast DDP starts with
// (core/ddp/ddp.cc), one gather of every rank's counts, and a barrier.
#include "core/ddp/ddp.h"
#include "labs/09_sync_primitives/lab.h"

namespace mddp::labs::impl {

void broadcast_model(nn::Module& model, comm::Communicator& comm, int root) {
  ddp::broadcast_parameters(model, comm, root);
}

GatheredEval gather_eval(const EvalCounts& mine, comm::Communicator& comm, int root) {
  // Counts travel as floats: exact up to 2^24 samples per rank.
  const float in[2] = {static_cast<float>(mine.correct), static_cast<float>(mine.samples)};
  std::vector<float> out(comm.rank() == root ? 2 * static_cast<std::size_t>(comm.size()) : 0);
  comm.gather(in, out.data(), 2, comm::DataType::kFloat32, root)->wait();
  GatheredEval result;
  int64_t correct = 0, samples = 0;
  for (std::size_t r = 0; 2 * r < out.size(); ++r) {
    result.per_rank.push_back(
        {static_cast<int64_t>(out[2 * r]), static_cast<int64_t>(out[2 * r + 1])});
    correct += result.per_rank.back().correct;
    samples += result.per_rank.back().samples;
  }
  // The whole test set's accuracy: total correct over total samples, not
  // the mean of the ranks' accuracies (their shards differ in size).
  if (samples > 0) result.accuracy = static_cast<double>(correct) / static_cast<double>(samples);
  return result;
}

void save_on_root(comm::Communicator& comm, int root, const std::function<void()>& save) {
  if (comm.rank() == root) save();
  comm.barrier()->wait();  // nobody leaves before the root's save is done
}

}  // namespace mddp::labs::impl
