#include "core/ddp/ddp.h"

#include <algorithm>
#include <cstring>

#include "core/common/check.h"
#include "core/common/rank_groups.h"
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
  if (options_.broadcast_parameters) broadcast_parameters(model_, comm_);
  sync_ = make_grad_sync(options_.sync, model_.parameters(), comm_);
  model_.set_grad_ready_hook([this](nn::Parameter& p) {
    if (sync_enabled_) sync_->on_grad_ready(p);
  });
}

DistributedDataParallel::~DistributedDataParallel() {
  model_.set_grad_ready_hook({});
}

// Every rank contributes its fingerprint (fixed-size, zero-padded) to an
// all_gather; each rank then compares all of them (model_difference), so
// every rank reports the same, specific difference.
void DistributedDataParallel::check_same_model() {
  const std::vector<std::string> mine = fingerprint(model_);
  const std::string text = join(mine, ";") + ";";  // each entry ends with ';' (entry_at)
  constexpr int64_t kWords = 4096;  // 16 KiB of text per rank is plenty for a fingerprint
  std::vector<float> in(kWords, 0.0f), out(kWords * comm_.size());
  std::memcpy(in.data(), text.data(),
              std::min<std::size_t>(text.size(), kWords * sizeof(float) - 1));
  comm_.all_gather(in.data(), out.data(), kWords, comm::DataType::kFloat32)->wait();
  std::vector<std::string> texts;
  for (int r = 0; r < comm_.size(); ++r)
    texts.emplace_back(reinterpret_cast<const char*>(out.data() + r * kWords));
  const std::string difference = model_difference(texts);
  if (!difference.empty()) throw InputError(difference);
}

namespace {

// The ';'-terminated entry of `s` holding byte i.
std::string entry_at(const std::string& s, std::size_t i) {
  const std::size_t begin = s.rfind(';', i == 0 ? 0 : i - 1);
  const std::size_t from = begin == std::string::npos || i == 0 ? 0 : begin + 1;
  const std::string e = s.substr(from, s.find(';', from) - from);
  return e.empty() ? std::string("(no more parameters)") : e;
}

}  // namespace

// Note [Naming the odd rank]
// The first rank that differs from rank 0 is not always the odd one: when
// rank 0 itself built another model (a stale flag on the first host),
// every other rank differs from it, and "rank 1 differs from rank 0"
// blames the wrong process. So the ranks that built what rank 0 built are
// counted against those that built what the first differing rank built,
// and the smaller side is named (rank 0's side wins a tie: with two ranks
// there is no majority, and rank 1 is named as before).
std::string model_difference(const std::vector<std::string>& fp) {
  const auto first = std::find_if(fp.begin(), fp.end(), [&](const auto& t) { return t != fp[0]; });
  if (first == fp.end()) return "";
  std::vector<int> like_zero, like_first;
  for (std::size_t r = 0; r < fp.size(); ++r) {
    if (fp[r] == fp[0]) like_zero.push_back(static_cast<int>(r));
    if (fp[r] == *first) like_first.push_back(static_cast<int>(r));
  }
  const bool zero_odd = like_zero.size() < like_first.size();
  const std::vector<int>& odd = zero_odd ? like_zero : like_first;
  const std::vector<int>& rest = zero_odd ? like_first : like_zero;
  const std::string &a = fp[odd[0]], &b = fp[rest[0]];
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return str(ranks_phrase(odd), " built a different model than ", ranks_phrase(rest),
             ": first difference at parameter '", entry_at(a, i), "' on ", ranks_phrase(odd),
             " vs '", entry_at(b, i), "' on ", ranks_phrase(rest),
             " (check that every rank got the same --model/--width/--depth/--channels flags)");
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
