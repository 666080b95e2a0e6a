// `microddp bench allreduce`: all-reduce time and bandwidth over a sweep of
// message sizes, in the shape of nccl-tests' all_reduce_perf, on --nproc
// real processes of this host (rendezvous through a FileStore) — or, with
// --rank, as one rank of a job whose other ranks run elsewhere (other hosts,
// the netns lab's namespaces) and meet in the --rendezvous directory.
//
// Per size: one checked all-reduce of integer-valued data (its exact sum is
// known, so #wrong counts every element that differs), then --warmup
// untimed and --iters timed all-reduces issued back to back and waited for
// at the end (the progress thread runs them in order). The time is the
// slowest rank's mean per all-reduce.
//
//   algbw = S / t                     (S = count * sizeof(type), the buffer)
//   busbw = algbw * 2(n-1)/n          (the bytes each rank's link carries for
//                                      a bandwidth-optimal all-reduce; comparable
//                                      across n and with a link's peak speed)
//   xhost = the bytes all ranks sent to ranks on other hosts in one all-reduce,
//           from the steps it recorded (a column only when the job spans hosts)
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "cli/bench_allreduce_fit.h"
#include "cli/bench_allreduce_nccl.h"
#include "cli/bench_sweep.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/local_ranks.h"
#include "core/comm/communicator.h"
#include "core/comm/file_store.h"
#include "core/comm/gloo/gloo.h"
#include "core/common/check.h"
#include "core/common/half.h"
#include "core/common/timer.h"

namespace mddp::cli {
namespace {

struct BenchOpts {
  int nproc = 2;
  std::string min_bytes = "4K", max_bytes = "64M";
  double factor = 4;
  int iters = 20, warmup = 5;
  std::string algo = "auto", transport = "auto", dtype = "fp32";
  int64_t timeout_ms = 60'000;
  std::string json;
  std::string backend = "cpu";
  int rank = -1;           // >= 0: run only this rank, in this process
  std::string rendezvous;  // with --rank: the directory the ranks meet in
  std::string bind_host = "127.0.0.1";
};

struct Row {
  std::size_t bytes;
  int64_t count;
  std::string algo;
  double time_us, algbw, busbw;
  int64_t wrong;
  int64_t cross_host_bytes;  // -1: one host
};

// "4096", "4K", "64M", "1G" (powers of 1024; a trailing B or iB is allowed).
std::size_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string suffix = s.substr(pos);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.ends_with("IB"))
    suffix.resize(suffix.size() - 2);
  else if (suffix.size() > 1 && suffix.ends_with("B"))
    suffix.pop_back();
  const std::size_t scale = suffix.empty() || suffix == "B" ? 1
                            : suffix == "K"                 ? std::size_t{1} << 10
                            : suffix == "M"                 ? std::size_t{1} << 20
                            : suffix == "G"                 ? std::size_t{1} << 30
                                                            : 0;
  if (pos == 0 || scale == 0)
    throw InputError(
        str("bad size '", s, "' (bytes, with an optional K, M or G suffix: 4096, 64K, 1G)"));
  return static_cast<std::size_t>(v) * scale;
}

std::vector<std::size_t> size_sweep(const BenchOpts& o) {
  const std::size_t lo = parse_size(o.min_bytes), hi = parse_size(o.max_bytes);
  if (lo == 0 || lo > hi)
    throw InputError(str("-b ", o.min_bytes, " must be positive and at most -e ", o.max_bytes));
  if (!(o.factor > 1.0)) throw InputError(str("-f must be greater than 1, got ", o.factor));
  std::vector<std::size_t> sizes;
  for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * (1 + 1e-9); s *= o.factor)
    sizes.push_back(static_cast<std::size_t>(s));
  return sizes;
}

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

// Fills data[count] with the pattern, or counts the elements that differ from
// the exact sum over n ranks: the 5-periodic values are encoded once.
void fill(comm::DataType t, std::byte* data, int64_t count, int rank) {
  const std::size_t es = comm::element_size(t);
  std::byte period[5][4];
  for (int k = 0; k < 5; ++k) encode(t, bench_value(rank, k), period[k]);
  for (int64_t i = 0; i < count; ++i) std::memcpy(data + i * es, period[i % 5], es);
}

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

void write_json(const BenchOpts& o, const std::string& transport, int n,
                const std::vector<Row>& rows, double avg_busbw, bool ok) {
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) throw InputError(str("cannot write --json file '", o.json, "': ", std::strerror(errno)));
  std::fprintf(f,
               "{\n  \"benchmark\": \"allreduce\",\n  \"nproc\": %d,\n  \"transport\": \"%s\",\n  "
               "\"algo\": \"%s\",\n"
               "  \"dtype\": \"%s\",\n  \"op\": \"sum\",\n  \"iters\": %d,\n  \"warmup\": %d,\n  "
               "\"results\": [\n",
               n, transport.c_str(), o.algo.c_str(), o.dtype.c_str(), o.iters, o.warmup);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    std::fprintf(f,
                 "    {\"bytes\": %zu, \"count\": %lld, \"algo\": \"%s\", \"time_us\": %.3f, "
                 "\"algbw_gbps\": %.6f, "
                 "\"busbw_gbps\": %.6f, \"wrong\": %lld, \"cross_host_bytes\": %lld}%s\n",
                 r.bytes, static_cast<long long>(r.count), r.algo.c_str(), r.time_us, r.algbw,
                 r.busbw, static_cast<long long>(r.wrong),
                 static_cast<long long>(r.cross_host_bytes), k + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"avg_busbw_gbps\": %.6f,\n  \"ok\": %s\n}\n", avg_busbw,
               ok ? "true" : "false");
  std::fclose(f);
}

// The op inside "all_reduce(ring)": the algorithm kAuto resolved to.
std::string last_algorithm(const comm::ProcessGroup& comm) {
  const std::string op = comm.history().back().op;
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

void bench_rank(const BenchOpts& o, int rank, comm::Store& store) {
  const auto dtype = comm::parse_dtype(o.dtype);
  const auto algo = comm::parse_algorithm(o.algo);
  const auto kind = comm::parse_transport(o.transport);
  const auto sizes = size_sweep(o);
  // --rank: the ranks share no parent; the rendezvous directory names the job.
  const comm::JobIdentity job{
      o.rank >= 0 ? str("bench-allreduce-", o.rendezvous) : str("bench-allreduce-", ::getppid()), 0,
      ""};
  const std::chrono::milliseconds timeout(o.timeout_ms);
  std::unique_ptr<comm::ProcessGroup> comm;
  if (o.backend == "gloo")
    comm = comm::gloo::connect_gloo(store, rank, o.nproc, {timeout, o.bind_host, "comm"});
  else
    comm = comm::connect(store, rank, o.nproc, job, kind, comm::CommOptions{algo, timeout},
                         o.bind_host);
  const auto* own =
      dynamic_cast<const comm::Communicator*>(comm.get());  // microddp's: steps and topology
  const int n = comm->size();
  const bool hosts = own && own->topology().host_count() > 1;
  const std::size_t es = comm::element_size(dtype);
  std::vector<std::byte> buf(sizes.back() / es * es + es);

  if (rank == 0) {
    std::printf(
        "# microddp bench allreduce: %d rank%s (processes), transport %s, algo %s, dtype %s, op "
        "sum\n",
        n, n == 1 ? "" : "s", comm->transport_name().c_str(), o.algo.c_str(), o.dtype.c_str());
    if (hosts) std::printf("# %s\n", own->topology().describe().c_str());
    std::printf("# iters %d, warmup %d; time = slowest rank's mean; busbw = algbw * 2(n-1)/n\n",
                o.iters, o.warmup);
    if (hosts)
      std::printf("# xhost = bytes sent between hosts per all-reduce, all ranks together\n");
    std::printf("#\n# %12s %12s %6s %6s %12s %12s %12s %12s %8s%s\n", "size(B)", "count", "type",
                "redop", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
                hosts ? "     xhost(B)" : "");
    std::fflush(stdout);
  }

  std::vector<Row> rows;
  for (std::size_t size : sizes) {
    const auto count = static_cast<int64_t>(size / es);
    const std::size_t bytes = static_cast<std::size_t>(count) * es;
    // Checked run.
    fill(dtype, buf.data(), count, rank);
    const comm::WorkPtr checked = comm->all_reduce(buf.data(), count, dtype, comm::ReduceOp::kSum);
    checked->wait();
    float wrong = static_cast<float>(count_wrong(dtype, buf.data(), count, n));
    // Every step's bytes, summed over ranks: fp32 is exact below 2^24, so
    // the per-rank count travels as two fp32 halves of 2^20.
    float xhost[2] = {0, 0};
    if (hosts) {
      const int64_t sent = cross_host_bytes(*own, *checked);
      xhost[0] = static_cast<float>(sent >> 20);
      xhost[1] = static_cast<float>(sent & ((1 << 20) - 1));
    }
    // Timed runs on zeros (sums of zeros stay zeros: no overflow to inf
    // across iterations, the same arithmetic cost).
    std::memset(buf.data(), 0, bytes);
    for (int i = 0; i < o.warmup; ++i)
      comm->all_reduce(buf.data(), count, dtype, comm::ReduceOp::kSum);
    comm->barrier()->wait();
    const int64_t t0 = now_ns();
    comm::WorkPtr last;
    for (int i = 0; i < o.iters; ++i)
      last = comm->all_reduce(buf.data(), count, dtype, comm::ReduceOp::kSum);
    if (last) last->wait();
    float time_us =
        static_cast<float>(static_cast<double>(now_ns() - t0) * 1e-3 / std::max(1, o.iters));
    const std::string used = last_algorithm(*comm);
    // Every rank agrees on the slowest time and the total of wrong elements.
    comm->all_reduce(&time_us, 1, comm::DataType::kFloat32, comm::ReduceOp::kMax)->wait();
    comm->all_reduce(&wrong, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();
    if (hosts) comm->all_reduce(xhost, 2, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();
    const int64_t xhost_bytes =
        hosts ? (static_cast<int64_t>(xhost[0]) << 20) + static_cast<int64_t>(xhost[1]) : -1;

    const Bandwidth bw = allreduce_bandwidth(bytes, time_us, n);
    rows.push_back({bytes, count, used, time_us, bw.algbw, bw.busbw, static_cast<int64_t>(wrong),
                    xhost_bytes});
    if (rank == 0) {
      std::printf("  %12zu %12lld %6s %6s %12s %12.2f %12.3f %12.3f %8lld", bytes,
                  static_cast<long long>(count), o.dtype.c_str(), "sum", used.c_str(), time_us,
                  bw.algbw, bw.busbw, static_cast<long long>(wrong));
      if (hosts) std::printf(" %12lld", static_cast<long long>(xhost_bytes));
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  const SweepTotals totals = totals_of(rows);
  const bool ok = totals.ok();
  if (rank == 0) {
    print_footer(totals);
    if (!o.json.empty()) write_json(o, comm->transport_name(), n, rows, totals.avg_busbw, ok);
  }
  comm->barrier()->wait();
  if (!ok) throw Error(str("all-reduce gave ", totals.wrong, " wrong elements"));
}

}  // namespace

void register_bench_allreduce(CLI::App& bench) {
  auto o = std::make_shared<BenchOpts>();
  auto* cmd = bench.add_subcommand("allreduce",
                                   "All-reduce time, algbw and busbw over a size sweep on --nproc "
                                   "local processes (nccl-tests style)");
  cmd->add_option("--nproc", o->nproc, "ranks (forked processes on this host)")
      ->check(CLI::Range(1, kMaxLocalRanks))
      ->capture_default_str();
  cmd->add_option("-b,--minbytes", o->min_bytes, "smallest message (bytes; K, M, G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", o->max_bytes, "largest message")->capture_default_str();
  cmd->add_option("-f,--stepfactor", o->factor, "multiply the size by this each step")
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "timed all-reduces per size")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed all-reduces per size")->capture_default_str();
  cmd->add_option("--algo", o->algo, "ring | naive | tree | doubling | hierarchical | auto")
      ->capture_default_str();
  cmd->add_option("--transport", o->transport, "tcp | shm | auto (shm on one host)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "fp32 | bf16 | fp16 (16-bit on the wire, summed in fp32)")
      ->capture_default_str();
  cmd->add_option("--timeout-ms", o->timeout_ms, "bound on each collective")
      ->check(CLI::Range(int64_t{1}, kMaxTimeoutMs))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the results to this file as JSON");
  cmd->add_option(
         "--rank", o->rank,
         "run only this rank, here (the others run elsewhere: other hosts, deploy/netns_lab.sh "
         "bench); needs --rendezvous")
      ->check(CLI::Range(0, kMaxLocalRanks - 1));
  cmd->add_option(
      "--rendezvous", o->rendezvous,
      "with --rank: an empty directory every rank reaches (a shared filesystem), one per run");
  cmd->add_option("--bind-host", o->bind_host, "this rank's data-plane address (tcp)")
      ->capture_default_str();
  cmd->add_option("--backend", o->backend,
                  "cpu (microddp's own) | gloo (Debian's libgloo, its ring over TCP) | nccl (one "
                  "process per "
                  "GPU); --algo and --transport are cpu's")
      ->capture_default_str();
  auto fit = add_fit_flags(*cmd);
  cmd->callback([o, fit] {
    // Validate once in the parent, so a typo is one clear line, not N.
    comm::parse_dtype(o->dtype);
    comm::parse_algorithm(o->algo);
    comm::parse_transport(o->transport);
    size_sweep(*o);
    if (o->nproc < 1) throw InputError(str("--nproc must be at least 1, got ", o->nproc));
    if (o->rank >= 0 && o->rendezvous.empty())
      throw InputError("--rank needs --rendezvous DIR, the directory the ranks meet in");
    if (o->rank < 0 && !o->rendezvous.empty())
      throw InputError(
          "--rendezvous is for --rank (one rank here, the others elsewhere); --nproc alone runs "
          "every rank here");
    if (o->rank >= o->nproc)
      throw InputError(str("--rank ", o->rank, " is not a rank of --nproc ", o->nproc));
    std::error_code ec;  // an unreadable or overlong name is "not a directory" too, not a throw
    if (!o->rendezvous.empty() && !std::filesystem::is_directory(o->rendezvous, ec))
      throw InputError(str("--rendezvous ", o->rendezvous, " is not a directory",
                           ec ? str(" (", ec.message(), ")") : std::string()));
    if (o->iters < 1 || o->warmup < 0)
      throw InputError("--iters must be at least 1 and --warmup at least 0");
    if (fit->on && o->rank >= 0)
      throw InputError(
          "--fit runs its own ranks (--fit-netns for the netns lab); leave out --rank");
    if (fit->on)  // the per-algorithm sweep and alpha-beta fit: cmd_bench_allreduce_fit.cc
      return run_allreduce_fit(*fit, {o->nproc, size_sweep(*o), o->iters, o->warmup, o->timeout_ms,
                                      o->algo, o->transport, o->json, o->backend});
    if (o->backend != "cpu" && o->backend != "nccl" && o->backend != "gloo")
      throw InputError(str("unknown --backend '", o->backend, "' (use cpu, gloo or nccl)"));
    if (o->backend != "cpu" && (o->algo != "auto" || o->transport != "auto"))
      throw InputError(str("--algo and --transport choose microddp's own collectives; --backend ",
                           o->backend, " brings its own: leave them out"));
    if (!o->json.empty()) {  // fail now, not after the whole sweep
      std::FILE* f = std::fopen(o->json.c_str(), "w");
      if (!f)
        throw InputError(str("cannot write --json file '", o->json, "': ", std::strerror(errno)));
      std::fclose(f);
    }
    if (o->backend == "nccl")  // cmd_bench_allreduce_nccl.cc
      return run_allreduce_nccl({o->nproc, size_sweep(*o), comm::parse_dtype(o->dtype), o->iters,
                                 o->warmup, o->timeout_ms, o->json, fill, count_wrong});
    if (o->rank >= 0) {  // one rank here; the others elsewhere
      comm::FileStore store(o->rendezvous);
      return bench_rank(*o, o->rank, store);
    }
    const int code = run_local_ranks(
        o->nproc, [o](int rank, comm::Store& store) { bench_rank(*o, rank, store); });
    if (code != 0)
      throw Error(
          str("bench allreduce failed (exit code ", code, "); the failing rank's error is above"));
  });
}

}  // namespace mddp::cli
