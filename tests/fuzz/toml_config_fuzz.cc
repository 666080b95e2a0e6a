// `--config job.toml` (coordinator/flag_config.h) on a hostile file, applied
// to the coordinator's real flags (cli/train_flags.cc and the coordinator's
// own), then the validation the command runs. Every refusal must be one
// InputError naming the file; CLI11's and toml++'s own exceptions must not
// escape.
#include "cli/train_flags.h"
#include "coordinator/flag_config.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::InputFile file(data, size);
  CLI::App cmd("coordinator");
  train::TrainConfig cfg;
  int world_size = 0, port = 29500;
  std::string host, token;
  cmd.add_option("--world-size", world_size);
  cmd.add_option("--port", port);
  cmd.add_option("--host", host);
  cmd.add_option("--token", token);
  cli::add_training_flags(cmd, cfg);
  cli::add_checkpoint_flags(cmd, cfg);
  cli::add_ddp_flags(cmd, cfg);
  cmd.parse(std::vector<std::string>{});
  fuzz::refusals_allowed([&] {
    coordinator::apply_toml_config(cmd, file.path());
    cfg.validate();
  });
  return 0;
}
