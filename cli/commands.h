// Each subcommand lives in its own cmd_*.cc and registers itself on the
// root CLI11 app; main.cc only wires them. A command's callback throws
// mddp::Error on failure; main prints it as one line and exits non-zero.
#pragma once

#include <CLI/CLI.hpp>
#include <initializer_list>
#include <string>

namespace mddp::cli {

// A command that only groups others (`microddp bench <what>`, `microddp demo
// <what>`): exactly one of its sub-commands must be given; each registers itself.
inline void register_group(CLI::App& app, const std::string& name, const std::string& description,
                           std::initializer_list<void (*)(CLI::App&)> subcommands) {
  auto* group = app.add_subcommand(name, description);
  group->require_subcommand(1);
  for (auto register_subcommand : subcommands) register_subcommand(*group);
}

void register_train(CLI::App& app);
void register_coordinator(CLI::App& app);  // coordinator: the control plane of a job
void register_worker(CLI::App& app);       // worker: one rank of a job
void register_run(CLI::App& app);          // run: coordinator + N local workers
void register_bench(CLI::App& app);        // bench allreduce, bench train, ...
void register_demo(CLI::App& app);         // demo collectives, demo manual, demo hooks

// Sub-commands, registered by their parents.
void register_bench_train(CLI::App& bench);
void register_bench_gemm(CLI::App& bench);
void register_bench_allreduce(CLI::App& bench);
void register_demo_collectives(CLI::App& demo);
void register_demo_manual(CLI::App& demo);
void register_demo_hooks(CLI::App& demo);
void register_demo_bucketing(CLI::App& demo);
void register_demo_ring(CLI::App& demo);
void register_verify(CLI::App& app);
void register_model(CLI::App& app);    // model: the alpha-beta what-if calculator
void register_scale(CLI::App& app);    // scale: measured strong/weak scaling study
void register_analyze(CLI::App& app);  // analyze: where a run's time went (metrics.jsonl)
void register_certs(CLI::App& app);    // certs: a CA and per-host TLS certificates for a lab
void register_data(CLI::App& app);     // data verify, ...
void register_data_verify(CLI::App& data);
void register_gpu(CLI::App& app);     // gpu: the GPU stack as microddp sees it
void register_lab(CLI::App& app);     // lab list|check|reset|solution: the course's Labs
void register_sample(CLI::App& app);  // sample: text from a trained GPT

}  // namespace mddp::cli
