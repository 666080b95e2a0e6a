#include "cli/bench_sweep.h"

#include <algorithm>
#include <cstring>

#include "core/comm/communicator.h"
#include "core/common/half.h"
#include "core/common/timer.h"

namespace mddp::cli {
namespace {

// Rank r's element i is ((r + i) mod 5) - 2: small integers, so every
// partial sum is exact in fp32, fp16 and bf16 (|sum| <= 2n <= 256 for n <= 128),
// and the exact result is periodic in i with period 5.
float bench_value(int rank, int64_t i) {
  return static_cast<float>((rank + i) % 5) - 2.0f;
}

void encode(comm::DataType t, float v, void* out) {
  if (t == comm::DataType::kFloat32) {
    std::memcpy(out, &v, 4);
    return;
  }
  const uint16_t h = t == comm::DataType::kFloat16 ? float_to_fp16(v) : float_to_bf16(v);
  std::memcpy(out, &h, 2);
}

// Fills data[count] with the pattern: the 5-periodic values are encoded once.
void fill(comm::DataType t, std::byte* data, int64_t count, int rank) {
  const std::size_t es = comm::element_size(t);
  std::byte period[5][4];
  for (int k = 0; k < 5; ++k) encode(t, bench_value(rank, k), period[k]);
  for (int64_t i = 0; i < count; ++i) std::memcpy(data + i * es, period[i % 5], es);
}

// The elements of data[count] that differ from the exact sum over n ranks.
int64_t count_wrong(comm::DataType t, const std::byte* data, int64_t count, int n) {
  const std::size_t es = comm::element_size(t);
  std::byte want[5][4];
  for (int k = 0; k < 5; ++k) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += bench_value(r, k);
    encode(t, sum, want[k]);
  }
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += std::memcmp(data + i * es, want[i % 5], es) != 0;
  return wrong;
}

class HostBuffer final : public SweepBuffer {
 public:
  explicit HostBuffer(std::shared_ptr<void> memory) : memory_(std::move(memory)) {}
  void* data() override { return memory_.get(); }
  std::byte* host() override { return static_cast<std::byte*>(memory_.get()); }
  void to_data() override {}
  void from_data() override {}
  void zero(std::size_t bytes) override { std::memset(memory_.get(), 0, bytes); }

 private:
  std::shared_ptr<void> memory_;
};

// The op inside "all_reduce(ring)": the algorithm kAuto resolved to.
std::string last_algorithm(const comm::ProcessGroup& group) {
  const auto history = group.history();
  if (history.empty()) return "";
  const std::string& op = history.back().op;
  const auto open = op.find('('), close = op.find(')');
  return open == std::string::npos ? op : op.substr(open + 1, close - open - 1);
}

// The bytes this rank sent to ranks on other hosts in `work`'s steps.
int64_t cross_host_bytes(const comm::Communicator& comm, const comm::Work& work) {
  const comm::HostTopology& topo = comm.topology();
  int64_t sent = 0;
  for (const comm::AlgoStep& s : work.steps())
    if (s.send_peer >= 0 && topo.host_of(s.send_peer) != topo.host_of(comm.rank()))
      sent += s.send_bytes;
  return sent;
}

// The checked all-reduce of one size: the elements that came out wrong on
// this rank, and (over several hosts) the bytes it sent between them.
std::pair<int64_t, int64_t> checked_run(comm::ProcessGroup& group, SweepBuffer& buffer,
                                        comm::DataType dtype, int64_t count,
                                        const comm::Communicator* hosts) {
  fill(dtype, buffer.host(), count, group.rank());
  buffer.to_data();
  const comm::WorkPtr work = group.all_reduce(buffer.data(), count, dtype, comm::ReduceOp::kSum);
  work->wait();
  buffer.from_data();
  const int64_t wrong = count_wrong(dtype, buffer.host(), count, group.size());
  return {wrong, hosts ? cross_host_bytes(*hosts, *work) : 0};
}

// The mean time of `iters` all-reduces issued back to back after `warmup`
// untimed ones, on zeros (sums of zeros stay zeros: no overflow to inf
// across iterations, the same arithmetic cost). This rank's, in us.
float timed_run(comm::ProcessGroup& group, SweepBuffer& buffer, comm::DataType dtype, int64_t count,
                const SweepOptions& o) {
  buffer.zero(static_cast<std::size_t>(count) * comm::element_size(dtype));
  for (int i = 0; i < o.warmup; ++i)
    group.all_reduce(buffer.data(), count, dtype, comm::ReduceOp::kSum);
  group.barrier()->wait();
  const int64_t t0 = now_ns();
  comm::WorkPtr last;
  for (int i = 0; i < o.iters; ++i)
    last = group.all_reduce(buffer.data(), count, dtype, comm::ReduceOp::kSum);
  if (last) last->wait();
  return static_cast<float>(static_cast<double>(now_ns() - t0) * 1e-3 / std::max(1, o.iters));
}

// What every rank agrees on: the slowest time, the total of wrong elements
// and of bytes sent between hosts. Host scalars (a GPU group stages them).
// Every step's bytes, summed over ranks: fp32 is exact below 2^24, so the
// per-rank count travels as two fp32 halves of 2^20.
void agree(comm::ProcessGroup& group, float& time_us, int64_t& wrong, int64_t& xhost, bool hosts) {
  float w = static_cast<float>(wrong);
  group.all_reduce(&time_us, 1, comm::DataType::kFloat32, comm::ReduceOp::kMax)->wait();
  group.all_reduce(&w, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();
  wrong = static_cast<int64_t>(w);
  if (!hosts) {
    xhost = -1;
    return;
  }
  float parts[2] = {static_cast<float>(xhost >> 20), static_cast<float>(xhost & ((1 << 20) - 1))};
  group.all_reduce(parts, 2, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();
  xhost = (static_cast<int64_t>(parts[0]) << 20) + static_cast<int64_t>(parts[1]);
}

}  // namespace

std::unique_ptr<SweepBuffer> host_buffer(std::size_t bytes, comm::ProcessGroup* group) {
  std::shared_ptr<void> memory = group ? group->allocate_shared(bytes) : nullptr;
  if (!memory)
    memory = std::shared_ptr<std::byte[]>(new std::byte[std::max<std::size_t>(bytes, 1)]);
  return std::make_unique<HostBuffer>(std::move(memory));
}

std::size_t sweep_buffer_bytes(const std::vector<std::size_t>& sizes, comm::DataType dtype) {
  const std::size_t es = comm::element_size(dtype);
  return sizes.back() / es * es + es;
}

std::vector<SweepRow> run_sweep(comm::ProcessGroup& group, SweepBuffer& buffer,
                                const SweepOptions& o,
                                const std::function<void(const SweepRow&)>& on_row) {
  // microddp's own group records its steps and knows the hosts: over several,
  // the bytes sent between them get a column.
  const auto* own = dynamic_cast<const comm::Communicator*>(&group);
  const comm::Communicator* hosts = own && own->topology().host_count() > 1 ? own : nullptr;
  const std::size_t es = comm::element_size(o.dtype);
  std::vector<SweepRow> rows;
  for (std::size_t size : o.sizes) {
    SweepRow row;
    row.count = static_cast<int64_t>(size / es);
    row.bytes = static_cast<std::size_t>(row.count) * es;
    auto [wrong, xhost] = checked_run(group, buffer, o.dtype, row.count, hosts);
    float time_us = timed_run(group, buffer, o.dtype, row.count, o);
    row.algo = last_algorithm(group);
    agree(group, time_us, wrong, xhost, hosts != nullptr);
    row.time_us = time_us;
    row.wrong = wrong;
    row.cross_host_bytes = xhost;
    const Bandwidth bw = allreduce_bandwidth(row.bytes, time_us, group.size());
    row.algbw = bw.algbw;
    row.busbw = bw.busbw;
    on_row(row);
    rows.push_back(row);
  }
  return rows;
}

SweepTotals totals_of(const std::vector<SweepRow>& rows) {
  SweepTotals t;
  double sum_busbw = 0;
  for (const auto& r : rows) t.wrong += r.wrong, sum_busbw += r.busbw;
  t.avg_busbw = rows.empty() ? 0.0 : sum_busbw / static_cast<double>(rows.size());
  return t;
}

void print_footer(const SweepTotals& t) {
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(t.wrong),
              t.ok() ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %.3f GB/s\n#\n%s\n", t.avg_busbw, t.ok() ? "OK" : "FAILED");
  std::fflush(stdout);
}

}  // namespace mddp::cli
