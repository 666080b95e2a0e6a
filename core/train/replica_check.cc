#include "core/train/replica_check.h"

#include <numeric>

#include "core/common/check.h"
#include "core/common/rank_groups.h"
#include "core/common/sha256.h"
#include "core/common/strings.h"
#include "core/train/word_collectives.h"

namespace mddp::train {

// Note [Replica check]
// DDP keeps replicas equal by giving every rank the same averaged gradient
// and the same optimiser arithmetic; nothing compares the weights
// themselves. A bit flipped by faulty memory, a kernel that rounds
// differently on one GPU, or a bug that skips one rank's update leaves that
// replica different for good (averaged gradients never pull it back), and
// nothing fails: the job trains on, and the checkpoint rank 0 writes is
// rank 0's model alone. So at the check's steps every rank hashes each of
// its tensors, the ranks all-gather the hashes (8 bytes a tensor: the check
// costs the hashing, not the network), and every rank judges the same
// table. Checking before every checkpoint means a checkpoint is written
// only from replicas that agree, so resuming from it is safe.

namespace {

uint64_t hash_of(const tensor::Tensor& t) {
  Sha256 sha;
  if (t.device().is_cpu()) {  // in place: no copy of a tensor of hundreds of MB
    sha.update(t.data(), static_cast<std::size_t>(t.numel()) * sizeof(float));
  } else {
    const std::vector<float> values = t.to_vector();
    sha.update(values.data(), values.size() * sizeof(float));
  }
  return std::stoull(sha.hex().substr(0, 16), nullptr, 16);
}

// The names of the tensors where rows a and b of `all` differ: the first
// three, and how many more.
std::string differing(const std::vector<std::string>& names, const uint64_t* a, const uint64_t* b) {
  std::vector<std::string> shown;
  std::size_t more = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (shown.size() < 3)
      shown.push_back(names[i]);
    else
      ++more;
  }
  std::string text = join(shown, ", ");
  if (more > 0) text += str(" and ", more, " more tensor", more == 1 ? "" : "s");
  return text;
}

}  // namespace

ReplicaDigest replica_digest(nn::Module& model, nn::Optimizer* optimizer) {
  ReplicaDigest d;
  for (const nn::Parameter* p : model.parameters()) {
    d.names.push_back(p->name);
    d.hashes.push_back(hash_of(p->value));
  }
  if (optimizer) {
    for (const auto& [name, t] : optimizer->state()) {
      d.names.push_back(name);
      d.hashes.push_back(hash_of(t));
    }
  }
  return d;
}

std::string replica_divergence(const std::vector<std::string>& names,
                               const std::vector<uint64_t>& all, int world_size) {
  const std::size_t n = names.size();
  MDDP_CHECK(all.size() == n * static_cast<std::size_t>(world_size));
  const auto row = [&](int r) { return all.data() + static_cast<std::size_t>(r) * n; };
  std::vector<int> ranks(world_size);
  std::iota(ranks.begin(), ranks.end(), 0);
  const auto groups =
      group_ranks(ranks, [&](int a, int b) { return std::equal(row(a), row(a) + n, row(b)); });
  if (groups.size() == 1) return "";
  const std::vector<int>& job = largest_group(groups);
  std::vector<std::string> parts;
  for (const std::vector<int>& g : groups) {
    if (&g == &job) continue;
    parts.push_back(str(ranks_phrase(g), g.size() > 1 ? " differ from " : " differs from ",
                        ranks_phrase(job), " in ",
                        differing(names, row(g.front()), row(job.front()))));
  }
  return join(parts, "; ");
}

void check_replicas(comm::ProcessGroup& comm, const ReplicaDigest& mine, int64_t step,
                    const tensor::Device& device) {
  const std::vector<uint64_t> all = all_gather_words(comm, mine.hashes, device);
  const std::string diverged = replica_divergence(mine.names, all, comm.size());
  if (!diverged.empty())
    throw Error(str("the replicas diverged by step ", step, ": ", diverged,
                    " (each checkpoint is written only after this check passed: --resume from one "
                    "continues from replicas that agreed)"));
}

}  // namespace mddp::train
