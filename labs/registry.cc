#include "labs/registry.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::labs {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// FNV-1a: a stable fingerprint of a work file's contents.
std::string fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return std::to_string(h);
}

std::filesystem::path status_file(const std::string& work_dir) {
  return std::filesystem::path(work_dir) / ".lab-status.json";
}

nlohmann::json read_status(const std::string& work_dir) {
  const auto j =
      nlohmann::json::parse(read_file(status_file(work_dir)), nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

}  // namespace

const std::vector<Lab>& all_labs() {
  static const std::vector<Lab> labs = {
      {1,
       "manual",
       "labs/01_manual",
       "manual gradient averaging with two replicas",
       "docs/naive.md",
       "manual.cc",
       "exercise.cc",
       {"core/ddp/manual_average.cc (ddp::average_replica_gradients)", "cli/cmd_demo_manual.cc"},
       "Each replica's backward gives the mean-loss gradient of its own equal share of the batch; "
       "the mean of those "
       "means is the whole batch's gradient. Replica 0's gradient accumulates the others' "
       "(tensor::axpy), is scaled "
       "by 1/K, and is copied back into every replica, so all replicas take the same optimiser "
       "step and stay "
       "identical. `microddp demo manual` trains two replicas that way next to one model on the "
       "whole batch.",
       check_manual},
      {2,
       "naive_allreduce",
       "labs/02_naive_allreduce",
       "naive all-reduce (gather to a root, then send back)",
       "docs/allreduce.md",
       "naive_allreduce.cc",
       "exercise.cc",
       {"core/comm/algorithms/naive_all_reduce.cc (comm::all_reduce_naive)"},
       "Ranks other than 0 send their whole buffer to rank 0 and wait for the result. Rank 0 "
       "receives the n-1 "
       "buffers one after another into a scratch buffer, reduces each into its own data, divides "
       "by n for kAvg, and "
       "sends the result to every rank. All 2(n-1) messages go through rank 0's link: 2(n-1)(alpha "
       "+ S/beta), the "
       "cost the ring and the tree improve on.",
       check_naive_allreduce},
      {3,
       "ring_allreduce",
       "labs/03_ring_allreduce",
       "ring all-reduce (reduce-scatter + all-gather)",
       "docs/allreduce.md",
       "ring_allreduce.cc",
       "exercise.cc",
       {"core/comm/algorithms/ring_reduce_scatter.cc (comm::ring_reduce_scatter_inplace)",
        "core/comm/algorithms/ring_all_gather.cc (comm::ring_all_gather_inplace)",
        "core/comm/algorithms/ring_all_reduce.cc (comm::all_reduce_ring)"},
       "The buffer is split into n blocks. In reduce-scatter step s rank r sends block (r-s-1) mod "
       "n to the right "
       "and receives block (r-s-2) mod n from the left, adding it into its copy: each block picks "
       "up one "
       "contribution per hop, and after n-1 steps rank r holds block r complete. kAvg divides that "
       "one block by n. "
       "The all-gather then passes the finished blocks round the ring: step s sends block (r-s) "
       "mod n. 2(n-1) steps "
       "of S/n bytes: 2(n-1)(alpha + S/(n beta)), every link busy in every step. The reference "
       "also cuts blocks "
       "into 1 MiB segments so the received data is reduced while still in cache. Watch it: "
       "`microddp demo ring`.",
       check_ring_allreduce},
      {4,
       "tree_allreduce",
       "labs/04_tree_allreduce",
       "tree all-reduce (binomial reduce + broadcast)",
       "docs/allreduce.md",
       "tree_allreduce.cc",
       "exercise.cc",
       {"core/comm/algorithms/tree_reduce.cc (comm::reduce_tree)",
        "core/comm/algorithms/tree_broadcast.cc (comm::broadcast_tree)",
        "core/comm/algorithms/tree_all_reduce.cc (comm::all_reduce_tree)"},
       "Ranks are numbered relative to the root (vrank v). In the reduce, round k: every vrank "
       "whose lowest set bit "
       "is 2^k sends its partial result to v - 2^k and drops out, the others receive from v + 2^k "
       "and add; after "
       "ceil(log2 n) rounds the root has everything. The broadcast is the same tree backwards, the "
       "number of ranks "
       "holding the data doubling each round. 2 ceil(log2 n)(alpha + S/beta): fewer latencies than "
       "the ring, but "
       "whole messages, so it wins for small S on many ranks "
       "(core/comm/algorithms/auto_select.cc).",
       check_tree_allreduce},
      {5,
       "naive_dp",
       "labs/05_naive_dp",
       "naive data parallelism (all-reduce every gradient after backward)",
       "docs/naive.md",
       "naive_dp.cc",
       "exercise.cc",
       {"core/ddp/naive_sync.cc (ddp::NaiveSync)"},
       "After backward, finish() all-reduces every parameter's gradient with ReduceOp::kAvg, one "
       "blocking call per "
       "parameter in registration order. Nothing overlaps backward and n parameters cost n "
       "latencies: the baseline "
       "that hooks and bucketing improve on.",
       check_naive_dp},
      {6,
       "hooks",
       "labs/06_hooks",
       "hooks (launch each all-reduce from its grad-ready hook)",
       "docs/hooks.md",
       "hooks.cc",
       "exercise.cc",
       {"core/ddp/hooked_sync.cc (ddp::HookedSync)", "core/nn/module.h (Note [Grad-ready hooks])"},
       "Backward calls the grad-ready hook the moment a parameter's gradient is final, last layer "
       "first. The hook "
       "starts that gradient's asynchronous all-reduce (the communicator's progress thread runs "
       "it) and returns at "
       "once, so the last layers' gradients travel while earlier layers are still in backward; "
       "finish() waits for "
       "them all. Still one collective per parameter: many small messages, each paying alpha.",
       check_hooks},
      {7,
       "bucketing",
       "labs/07_bucketing",
       "bucketing (assign buckets, flush in order)",
       "docs/bucketing.md",
       "bucketing.cc",
       "exercise.cc",
       {"core/ddp/bucket_assignment.cc (ddp::assign_buckets, ddp::flush_in_order)",
        "core/ddp/reducer.cc (ddp::Reducer)"},
       "assign_buckets walks the parameters in ready order (the last first) and closes a bucket "
       "when the next one "
       "would take it past its cap; bucket 0's cap is small so the first all-reduce starts early. "
       "The Reducer keeps "
       "each bucket's gradients in one flat buffer (grads are views into it) and counts the "
       "gradients each still "
       "waits for; flush_in_order launches bucket `next` and the ones after it only while each is "
       "complete, so "
       "every rank issues the same all-reduces in the same order (Note [Bucket order]).",
       check_bucketing},
      {8,
       "ddp",
       "labs/08_ddp",
       "the DDP wrapper (initial broadcast, no_sync)",
       "docs/ddp.md",
       "ddp.cc",
       "exercise.cc",
       {"core/ddp/ddp.cc (ddp::DistributedDataParallel)"},
       "The constructor checks every rank built the same model (an all-gather of the parameter "
       "names and shapes), "
       "broadcasts rank 0's parameters so the replicas start identical, builds the GradSync and "
       "installs the "
       "grad-ready hook. before_backward(last_micro_batch) turns synchronisation on only for the "
       "last micro-batch "
       "of an accumulation (no_sync): the others just accumulate; after_backward() waits for the "
       "averaged "
       "gradients when it synchronised.",
       check_ddp},
      {9,
       "sync_primitives",
       "labs/09_sync_primitives",
       "sync primitives (broadcast the initial model, gather the results, barrier)",
       "docs/sync_primitives.md",
       "sync_primitives.cc",
       "exercise.cc",
       {"core/ddp/ddp.cc (ddp::broadcast_parameters)", "core/comm/algorithms/linear_gather.cc",
        "core/comm/algorithms/dissemination_barrier.cc", "labs/09_sync_primitives/solution.cc"},
       "broadcast_model is one broadcast per parameter from the root (a binomial tree). "
       "gather_eval gathers every "
       "rank's (correct, samples) to the root and divides total correct by total samples: with "
       "uneven shards the "
       "mean of the ranks' accuracies is not the test set's accuracy. save_on_root lets the root "
       "save, then every "
       "rank meets at a barrier, so nobody reads the checkpoint before it is written.",
       check_sync_primitives},
      {10,
       "performance",
       "labs/10_performance",
       "performance (profile a run and explain it with analyze)",
       "docs/analyze.md",
       "performance.toml",
       "answers.toml",
       {"core/perf/analysis.cc (perf::analyze)",
        "core/perf/bottleneck.cc (Note [Bottleneck verdict])",
        "core/perf/cost_model.h (perf::allreduce_seconds)"},
       "Every answer is in `microddp analyze RUN`: the verdict line and its evidence, the "
       "stragglers' 'worst:' "
       "line, the exposed comm row (what the training thread waited for, not the total on the "
       "progress thread), "
       "the communication line (overlap, bytes per step = 4 bytes x parameters) and the "
       "all-reduces table. The "
       "ring's time is 2(n-1)(alpha + S/(n beta)) for the largest bucket's S.",
       check_performance},
      {11,
       "tied_weight",
       "labs/11_tied_weight",
       "the tied weight (a parameter used twice: count its contributions)",
       "docs/transformer.md",
       "tied_weight.cc",
       "exercise.cc",
       {"core/ddp/contributions.cc (ddp::count_contribution)", "core/ddp/reducer.cc (ddp::Reducer)",
        "core/nn/gpt.h (Note [Tied weight])"},
       "The GPT's LM head is its token embedding, so transformer.wte.weight gets two gradient "
       "contributions (uses = 2): the head's dW, the first thing backward does, and the "
       "embedding lookup's scatter-add, the last. Its hook fires after each. count_contribution "
       "counts uses_left[param] down at every firing, and only when it reaches 0 is the gradient "
       "final: then pending[bucket] is counted down, and the bucket is complete at 0. Counting "
       "firings instead launches the tied weight's bucket with the head's share alone.",
       check_tied_weight},
      {12,
       "hang",
       "labs/12_hang",
       "hang (a rank stopped: name it, and where)",
       "docs/diagnosis.md",
       "hang.toml",
       "answers.toml",
       {"coordinator/health.cc (Health::roll_call)", "control/progress.h (what a heartbeat says)",
        "core/train/lab_fault.h (how the fault is planted)"},
       "Every heartbeat carries where its rank is: step, phase, the collective entered last. "
       "When no rank moves for two heartbeat periods, the coordinator prints a roll call that "
       "groups the ranks by place: the ranks waiting in one collective, and the rank last seen "
       "in a phase of a step, which is the one they wait for. The job's error comes later and "
       "names whichever waiter timed out first.",
       check_hang},
      {13,
       "straggler",
       "labs/13_straggler",
       "straggler (a rank slightly slow in every step: name it and its cost)",
       "docs/diagnosis.md",
       "straggler.toml",
       "answers.toml",
       {"core/perf/timeline.cc (find_straggler, summarize_stragglers)",
        "core/perf/bottleneck.cc (the straggler's evidence)"},
       "Each step's first all-reduce starts when the last rank's first bucket is ready. "
       "analyze compares, step by step, when each rank got there with the median rank, and "
       "which phase of the late rank was longer than the median's; over many steps the "
       "planted rank is late in most of them, and the others' wait per step is its total "
       "lateness over the steps analysed.",
       check_straggler},
      {14,
       "poisoned_shard",
       "labs/14_poisoned_shard",
       "poisoned shard (a NaN in one rank's data: name the rank and the steps)",
       "docs/diagnosis.md",
       "poisoned_shard.toml",
       "answers.toml",
       {"core/train/trainer.cc (the loss of each rank)", "core/ddp/reducer.cc (the average)"},
       "Each rank's own loss is in its metrics (the dashboard's rank table, metrics.jsonl). The "
       "poisoned rank's loss is NaN at the poisoned step; the all-reduce averages its NaN "
       "gradients into everyone's, so after that step's optimizer every replica is NaN and "
       "every rank's loss is NaN from the next step. The console's loss is a mean over ranks.",
       check_poisoned_shard},
      {15,
       "mismatched_rank",
       "labs/15_mismatched_rank",
       "mismatched rank (one rank built another model: name it and the setting)",
       "docs/diagnosis.md",
       "mismatched_rank.toml",
       "answers.toml",
       {"core/ddp/ddp.cc (check_same_model, Note [Naming the odd rank])",
        "coordinator/fingerprint_check.h (the bucket plan's check)"},
       "Before the first step every rank all-gathers its parameters' names and shapes and "
       "compares them with every other rank's. The ranks that built what rank 0 built are "
       "counted against those that built what the first differing rank built; the smaller "
       "side is named, so rank 0 can be the odd one. Another width changes the shapes of the "
       "same parameters; another depth puts a [width, width] layer where the others have "
       "their output layer.",
       check_mismatched_rank},
      {16,
       "uneven_work",
       "labs/16_uneven_work",
       "uneven work (one rank's shard ran out first: name it, and where they parted)",
       "docs/diagnosis.md",
       "uneven_work.toml",
       "answers.toml",
       {"core/comm/transport/ (the size check of every message)",
        "core/train/loop.cc (what a rank does after its last step)"},
       "Every rank must run the same collectives in the same order. The rank whose shard ended "
       "reduced the loss of its last progress line, an all-reduce of one number, while the others "
       "went on to the next step's gradient all-reduce: the same sequence number, different sizes. "
       "The transport compares each message's size with the one expected and fails at once, "
       "naming both ranks; the rank with the 4-byte message is the one that had finished.",
       check_uneven_work},
      {17,
       "slow_link",
       "labs/17_slow_link",
       "slow link (one link of the ring is slow: name it and its bandwidth)",
       "docs/diagnosis.md",
       "slow_link.toml",
       "answers.toml",
       {"core/comm/transport/tcp/tcp_transport.cc (limit_send_rate)",
        "core/perf/collectives.cc (add_link_rates, Note [Link rate])"},
       "A ring all-reduce moves 2(n-1)/n of the buffer over every link, each step waiting for its "
       "slowest transfer, so every rank is as slow as the slowest link and busbw is that link's "
       "rate. Which link it is shows in where the time goes: each receiver waits on its "
       "left neighbour's bytes, and only the receiver on the slow link waits long.",
       check_slow_link},
  };
  return labs;
}

const Lab& find_lab(const std::string& name) {
  for (const Lab& lab : all_labs())
    if (lab.name == name || std::to_string(lab.number) == name) return lab;
  const std::string names = join(all_labs(), ", ", [](const Lab& lab) { return lab.name; });
  throw InputError(
      str("no Lab called '", name, "' (the Labs: ", names, "; `microddp lab list` shows them)"));
}

std::string source_root() {
  return MDDP_LABS_ROOT;
}
std::string built_work_dir() {
  return MDDP_LABS_WORK_DIR;
}

std::string lab_status(const Lab& lab, const std::string& root, const std::string& work_dir) {
  const auto work = std::filesystem::path(work_dir) / lab.work_file;
  if (!std::filesystem::exists(work)) return str("missing (microddp lab reset ", lab.name, ")");
  const std::string text = read_file(work);
  if (text == read_file(std::filesystem::path(root) / lab.folder / lab.template_file))
    return "not started";
  const auto status = read_status(work_dir);
  if (status.contains(lab.name) && status[lab.name].value("fingerprint", "") == fingerprint(text))
    return status[lab.name].value("result", "");
  return "edited, not checked";
}

void record_check(const Lab& lab, const std::string& work_dir, bool passed) {
  auto status = read_status(work_dir);
  status[lab.name] = {
      {"result", passed ? "passed" : "failed"},
      {"fingerprint", fingerprint(read_file(std::filesystem::path(work_dir) / lab.work_file))}};
  std::filesystem::create_directories(work_dir);
  std::ofstream out(status_file(work_dir));
  out << status.dump(2) << "\n";
  if (!out.flush())
    throw InputError(
        str("cannot write ", status_file(work_dir).string(), " (where `lab list` keeps results)"));
}

}  // namespace mddp::labs
