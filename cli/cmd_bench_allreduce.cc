// `microddp bench allreduce`: all-reduce time and bandwidth over a sweep of
// message sizes, in the shape of nccl-tests' all_reduce_perf, on --nproc
// real processes of this host (rendezvous through a FileStore) — or, with
// --rank, as one rank of a job whose other ranks run elsewhere (other hosts,
// the netns lab's namespaces) and meet in the --rendezvous directory.
//
// This file owns the flags and the table; the sweep itself, shared with
// --backend nccl, is bench_sweep.h: per size one checked all-reduce, then
// --warmup untimed and --iters timed ones (the progress thread runs them in
// order); the time is the slowest rank's mean per all-reduce.
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

namespace mddp::cli {
namespace {

struct AllreduceFlags {
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
  std::string buffer = "shared";
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

std::vector<std::size_t> size_sweep(const AllreduceFlags& o) {
  const std::size_t lo = parse_size(o.min_bytes), hi = parse_size(o.max_bytes);
  if (lo == 0 || lo > hi)
    throw InputError(str("-b ", o.min_bytes, " must be positive and at most -e ", o.max_bytes));
  if (!(o.factor > 1.0)) throw InputError(str("-f must be greater than 1, got ", o.factor));
  std::vector<std::size_t> sizes;
  for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * (1 + 1e-9); s *= o.factor)
    sizes.push_back(static_cast<std::size_t>(s));
  return sizes;
}

SweepOptions sweep_options(const AllreduceFlags& o) {
  return {size_sweep(o), comm::parse_dtype(o.dtype), o.iters, o.warmup};
}

void write_json(const AllreduceFlags& o, const std::string& transport, int n,
                const std::vector<SweepRow>& rows, double avg_busbw, bool ok) {
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) throw InputError(str("cannot write --json file '", o.json, "': ", std::strerror(errno)));
  std::fprintf(f,
               "{\n  \"benchmark\": \"allreduce\",\n  \"nproc\": %d,\n  \"transport\": \"%s\",\n  "
               "\"algo\": \"%s\",\n"
               "  \"dtype\": \"%s\",\n  \"op\": \"sum\",\n  \"iters\": %d,\n  \"warmup\": %d,\n  "
               "\"results\": [\n",
               n, transport.c_str(), o.algo.c_str(), o.dtype.c_str(), o.iters, o.warmup);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const SweepRow& r = rows[k];
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

// This rank's group: microddp's own collectives (cpu) or gloo's.
std::unique_ptr<comm::ProcessGroup> connect_sweep_group(const AllreduceFlags& o, int rank,
                                                        comm::Store& store) {
  // --rank: the ranks share no parent; the rendezvous directory names the job.
  const comm::JobIdentity job{
      o.rank >= 0 ? str("bench-allreduce-", o.rendezvous) : str("bench-allreduce-", ::getppid()), 0,
      ""};
  const std::chrono::milliseconds timeout(o.timeout_ms);
  if (o.backend == "gloo")
    return comm::gloo::connect_gloo(store, rank, o.nproc, {timeout, o.bind_host, "comm"});
  return comm::connect(store, rank, o.nproc, job, comm::parse_transport(o.transport),
                       comm::CommOptions{comm::parse_algorithm(o.algo), timeout}, o.bind_host);
}

// The table's head, with an xhost column when the job spans hosts.
void print_sweep_header(const AllreduceFlags& o, const comm::ProcessGroup& group, bool hosts) {
  const int n = group.size();
  std::printf(
      "# microddp bench allreduce: %d rank%s (processes), transport %s, algo %s, dtype %s, op "
      "sum\n",
      n, n == 1 ? "" : "s", group.transport_name().c_str(), o.algo.c_str(), o.dtype.c_str());
  const auto* own = dynamic_cast<const comm::Communicator*>(&group);
  if (hosts) std::printf("# %s\n", own->topology().describe().c_str());
  std::printf("# iters %d, warmup %d; time = slowest rank's mean; busbw = algbw * 2(n-1)/n\n",
              o.iters, o.warmup);
  if (hosts) std::printf("# xhost = bytes sent between hosts per all-reduce, all ranks together\n");
  std::printf("#\n# %12s %12s %6s %6s %12s %12s %12s %12s %8s%s\n", "size(B)", "count", "type",
              "redop", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
              hosts ? "     xhost(B)" : "");
  std::fflush(stdout);
}

void print_sweep_row(const AllreduceFlags& o, const SweepRow& r, bool hosts) {
  std::printf("  %12zu %12lld %6s %6s %12s %12.2f %12.3f %12.3f %8lld", r.bytes,
              static_cast<long long>(r.count), o.dtype.c_str(), "sum", r.algo.c_str(), r.time_us,
              r.algbw, r.busbw, static_cast<long long>(r.wrong));
  if (hosts) std::printf(" %12lld", static_cast<long long>(r.cross_host_bytes));
  std::printf("\n");
  std::fflush(stdout);
}

// One rank of the sweep over microddp's collectives or gloo's; rank 0 prints.
void bench_rank(const AllreduceFlags& o, int rank, comm::Store& store) {
  const SweepOptions sweep = sweep_options(o);
  const std::unique_ptr<comm::ProcessGroup> group = connect_sweep_group(o, rank, store);
  const auto* own = dynamic_cast<const comm::Communicator*>(group.get());
  const bool hosts = own && own->topology().host_count() > 1;
  if (rank == 0) print_sweep_header(o, *group, hosts);
  const auto buffer = host_buffer(sweep_buffer_bytes(sweep.sizes, sweep.dtype),
                                  o.buffer == "shared" ? group.get() : nullptr);
  const std::vector<SweepRow> rows = run_sweep(*group, *buffer, sweep, [&](const SweepRow& r) {
    if (rank == 0) print_sweep_row(o, r, hosts);
  });
  const SweepTotals totals = totals_of(rows);
  if (rank == 0) {
    print_footer(totals);
    if (!o.json.empty())
      write_json(o, group->transport_name(), group->size(), rows, totals.avg_busbw, totals.ok());
  }
  group->barrier()->wait();
  if (!totals.ok()) throw Error(str("all-reduce gave ", totals.wrong, " wrong elements"));
}

void add_allreduce_flags(CLI::App& cmd, AllreduceFlags& o) {
  cmd.add_option("--nproc", o.nproc, "ranks (forked processes on this host)")
      ->check(local_ranks())
      ->capture_default_str();
  cmd.add_option("-b,--minbytes", o.min_bytes, "smallest message (bytes; K, M, G suffixes)")
      ->capture_default_str();
  cmd.add_option("-e,--maxbytes", o.max_bytes, "largest message")->capture_default_str();
  cmd.add_option("-f,--stepfactor", o.factor, "multiply the size by this each step")
      ->capture_default_str();
  cmd.add_option("--iters", o.iters, "timed all-reduces per size")->capture_default_str();
  cmd.add_option("--warmup", o.warmup, "untimed all-reduces per size")->capture_default_str();
  cmd.add_option("--algo", o.algo, "ring | naive | tree | doubling | hierarchical | auto")
      ->capture_default_str();
  cmd.add_option("--transport", o.transport, "tcp | shm | auto (shm on one host)")
      ->capture_default_str();
  cmd.add_option("--dtype", o.dtype, "fp32 | bf16 | fp16 (16-bit on the wire, summed in fp32)")
      ->capture_default_str();
  cmd.add_option("--buffer", o.buffer,
                 "shared: in the shm transport's shared memory, as DDP's buckets are, where peers "
                 "read it in place (the direct all-reduce of --algo auto); private: ordinary "
                 "memory, which every algorithm copies through the transport")
      ->check(CLI::IsMember({"shared", "private"}))
      ->capture_default_str();
  cmd.add_option("--timeout-ms", o.timeout_ms, "bound on each collective")
      ->check(CLI::Range(int64_t{1}, kMaxTimeoutMs))
      ->capture_default_str();
  cmd.add_option("--json", o.json, "also write the results to this file as JSON");
  cmd.add_option(
         "--rank", o.rank,
         "run only this rank, here (the others run elsewhere: other hosts, deploy/netns_lab.sh "
         "bench); needs --rendezvous")
      ->check(CLI::Range(0, kMaxLocalRanks - 1));
  cmd.add_option(
      "--rendezvous", o.rendezvous,
      "with --rank: an empty directory every rank reaches (a shared filesystem), one per run");
  cmd.add_option("--bind-host", o.bind_host, "this rank's data-plane address (tcp)")
      ->capture_default_str();
  cmd.add_option("--backend", o.backend,
                 "cpu (microddp's own) | gloo (Debian's libgloo, its ring over TCP) | nccl (one "
                 "process per "
                 "GPU); --algo and --transport are cpu's")
      ->capture_default_str();
}

// What the flags' own checks cannot see, checked once in the parent so that
// a typo is one clear line, not N.
void check_allreduce_flags(const AllreduceFlags& o) {
  comm::parse_dtype(o.dtype);
  comm::parse_algorithm(o.algo);
  comm::parse_transport(o.transport);
  size_sweep(o);
  if (o.nproc < 1) throw InputError(str("--nproc must be at least 1, got ", o.nproc));
  if (o.rank >= 0 && o.rendezvous.empty())
    throw InputError("--rank needs --rendezvous DIR, the directory the ranks meet in");
  if (o.rank < 0 && !o.rendezvous.empty())
    throw InputError(
        "--rendezvous is for --rank (one rank here, the others elsewhere); --nproc alone runs "
        "every rank here");
  if (o.rank >= o.nproc)
    throw InputError(str("--rank ", o.rank, " is not a rank of --nproc ", o.nproc));
  std::error_code ec;  // an unreadable or overlong name is "not a directory" too, not a throw
  if (!o.rendezvous.empty() && !std::filesystem::is_directory(o.rendezvous, ec))
    throw InputError(str("--rendezvous ", o.rendezvous, " is not a directory",
                         ec ? str(" (", ec.message(), ")") : std::string()));
  if (o.iters < 1 || o.warmup < 0)
    throw InputError("--iters must be at least 1 and --warmup at least 0");
}

// The host buffers of the ranks here against the memory this machine has
// available: one clear line before anything is asked for, not a rank's
// std::bad_alloc (or the OOM killer) in the middle of the sweep.
void check_sweep_memory(const AllreduceFlags& o) {
  const auto available = available_memory_bytes();
  const int here = o.rank >= 0 ? 1 : o.nproc;
  const double per_rank =
      static_cast<double>(sweep_buffer_bytes(size_sweep(o), comm::parse_dtype(o.dtype)));
  if (!available || per_rank * here <= static_cast<double>(*available)) return;
  const auto gib = [](double b) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", b / (1 << 30));
    return std::string(text);
  };
  throw InputError(str("-e ", o.max_bytes, " asks for ", gib(per_rank), " per rank (", here,
                       " rank", here == 1 ? "" : "s", " here: ", gib(per_rank * here),
                       "), but this machine has ", gib(static_cast<double>(*available)),
                       " available; give a smaller -e"));
}

// The checks of the plain sweep (not --fit): the backend, the memory, and a
// --json file that can be written (failing now, not after the whole sweep).
void check_sweep_flags(const AllreduceFlags& o) {
  if (o.backend != "cpu" && o.backend != "nccl" && o.backend != "gloo")
    throw InputError(str("unknown --backend '", o.backend, "' (use cpu, gloo or nccl)"));
  if (o.backend != "cpu" && (o.algo != "auto" || o.transport != "auto"))
    throw InputError(str("--algo and --transport choose microddp's own collectives; --backend ",
                         o.backend, " brings its own: leave them out"));
  if (o.backend != "nccl") check_sweep_memory(o);  // nccl's buffers are the GPU's
  if (!o.json.empty()) {
    std::FILE* f = std::fopen(o.json.c_str(), "w");
    if (!f)
      throw InputError(str("cannot write --json file '", o.json, "': ", std::strerror(errno)));
    std::fclose(f);
  }
}

// The sweep on the ranks the flags ask for: one here (--rank), else
// --nproc local processes; nccl has a driver of its own.
void run_allreduce(const std::shared_ptr<AllreduceFlags>& o) {
  check_sweep_flags(*o);
  if (o->backend == "nccl")  // cmd_bench_allreduce_nccl.cc
    return run_allreduce_nccl(o->nproc, sweep_options(*o), o->timeout_ms, o->json);
  if (o->rank >= 0) {  // one rank here; the others elsewhere
    comm::FileStore store(o->rendezvous);
    return bench_rank(*o, o->rank, store);
  }
  const int code =
      run_local_ranks(o->nproc, [o](int rank, comm::Store& store) { bench_rank(*o, rank, store); });
  if (code != 0)
    throw Error(
        str("bench allreduce failed (exit code ", code, "); the failing rank's error is above"));
}

}  // namespace

void register_bench_allreduce(CLI::App& bench) {
  auto o = std::make_shared<AllreduceFlags>();
  auto* cmd = bench.add_subcommand("allreduce",
                                   "All-reduce time, algbw and busbw over a size sweep on --nproc "
                                   "local processes (nccl-tests style)");
  add_allreduce_flags(*cmd, *o);
  auto fit = add_fit_flags(*cmd);
  cmd->callback([o, fit] {
    check_allreduce_flags(*o);
    if (fit->on && o->rank >= 0)
      throw InputError(
          "--fit runs its own ranks (--fit-netns for the netns lab); leave out --rank");
    if (fit->on)  // the per-algorithm sweep and alpha-beta fit: cmd_bench_allreduce_fit.cc
      return run_allreduce_fit(*fit, {o->nproc, size_sweep(*o), o->iters, o->warmup, o->timeout_ms,
                                      o->algo, o->transport, o->json, o->backend});
    run_allreduce(o);
  });
}

}  // namespace mddp::cli
