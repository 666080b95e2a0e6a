#include "core/ddp/ddp.h"

#include <algorithm>
#include <cstring>

#include "core/common/check.h"
#include "core/common/strings.h"
#include "core/tensor/tensor.h"

namespace mddp::ddp {
namespace {

// "name:[d0, d1]" per parameter, in registration order.
std::vector<std::string> fingerprint(nn::Module& model) {
  std::vector<std::string> out;
  for (nn::Parameter* p : model.parameters())
    out.push_back(p->name + ":" + tensor::shape_str(p->value.shape()));
  return out;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& model, comm::ProcessGroup& comm,
                                                 DdpOptions options)
    : model_(model), comm_(comm), options_(options) {
  if (options_.local_sgd < 0) throw InputError("--local-sgd must be >= 0");
  if (options_.local_sgd > 0 && options_.sync.mode == Mode::kSharded)
    throw InputError(
        "--local-sgd averages whole replicas, and --ddp sharded keeps 1/n of the optimiser state "
        "per "
        "rank: use one or the other (e.g. --ddp bucketed with --local-sgd)");
  check_same_model();
  broadcast_parameters(model_, comm_);
  sync_ = make_grad_sync(options_.sync, model_.parameters(), comm_);
  model_.set_grad_ready_hook([this](nn::Parameter& p) {
    if (sync_enabled_) sync_->on_grad_ready(p);
  });
}

DistributedDataParallel::~DistributedDataParallel() {
  model_.set_grad_ready_hook({});
}

// Every rank contributes its fingerprint (fixed-size, zero-padded) to an
// all_gather; each rank then compares all of them with rank 0's, so every
// rank reports the same, specific difference.
void DistributedDataParallel::check_same_model() {
  const std::vector<std::string> mine = fingerprint(model_);
  const std::string text = join(mine, ";") + ";";  // each entry ends with ';' (entry() below)
  constexpr int64_t kWords = 4096;  // 16 KiB of text per rank is plenty for a fingerprint
  std::vector<float> in(kWords, 0.0f), out(kWords * comm_.size());
  std::memcpy(in.data(), text.data(),
              std::min<std::size_t>(text.size(), kWords * sizeof(float) - 1));
  comm_.all_gather(in.data(), out.data(), kWords, comm::DataType::kFloat32)->wait();
  const auto text_of = [&](int r) {
    return std::string(reinterpret_cast<const char*>(out.data() + r * kWords));
  };
  const std::string ref = text_of(0);
  for (int r = 1; r < comm_.size(); ++r) {
    const std::string other = text_of(r);
    if (other == ref) continue;
    std::size_t i = 0;
    while (i < ref.size() && i < other.size() && ref[i] == other[i]) ++i;
    const auto entry = [&](const std::string& s) {
      const std::size_t begin = s.rfind(';', i == 0 ? 0 : i - 1);
      const std::size_t from = begin == std::string::npos ? 0 : begin + 1;
      const std::string e = s.substr(from, s.find(';', from) - from);
      return e.empty() ? std::string("(no more parameters)") : e;
    };
    throw InputError(
        str("rank ", r, " built a different model than rank 0: first difference at parameter '",
            entry(ref), "' on rank 0 vs '", entry(other), "' on rank ", r,
            " (check that every rank got the same --model/--width/--depth/--channels flags)"));
  }
}

void broadcast_parameters(nn::Module& model, comm::ProcessGroup& comm, int root) {
  for (nn::Parameter* p : model.parameters())
    comm.broadcast(p->value.data(), p->value.numel(), comm::DataType::kFloat32, root)->wait();
}

void DistributedDataParallel::before_backward(bool last_micro_batch) {
  sync_enabled_ = last_micro_batch && options_.local_sgd == 0;
  synced_this_step_ = false;
}

void DistributedDataParallel::after_backward() {
  if (!sync_enabled_) return;
  sync_->finish();
  synced_this_step_ = true;
}

void DistributedDataParallel::after_optimizer(int64_t step) {
  if (options_.local_sgd == 0 || step % options_.local_sgd != 0) return;
  std::vector<comm::WorkPtr> works;
  for (nn::Parameter* p : model_.parameters())
    works.push_back(comm_.all_reduce(p->value.data(), p->value.numel(), comm::DataType::kFloat32,
                                     comm::ReduceOp::kAvg));
  for (auto& w : works) w->wait();
}

double DistributedDataParallel::mean_over_ranks(double value) {
  float v = static_cast<float>(value);
  comm_.all_reduce(&v, 1, comm::DataType::kFloat32, comm::ReduceOp::kAvg)->wait();
  return v;
}

const SyncStats& DistributedDataParallel::last_stats() const {
  return synced_this_step_ ? sync_->stats() : empty_;
}

}  // namespace mddp::ddp
