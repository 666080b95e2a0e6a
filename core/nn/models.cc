#include "core/nn/models.h"

#include "core/common/check.h"
#include "core/common/memory.h"
#include "core/nn/layers.h"

namespace mddp::nn {
namespace {

std::unique_ptr<Sequential> build_mlp(const ModelConfig& cfg, int64_t in, Rng& rng,
                                      tensor::Device dev) {
  if (cfg.width < 1 || cfg.depth < 1) throw InputError("--width and --depth must be at least 1");
  auto m = std::make_unique<Sequential>();
  if (cfg.classes > 0) m->add(std::make_unique<Flatten>());
  for (int64_t i = 0; i < cfg.depth; ++i) {
    m->add(std::make_unique<Linear>(i == 0 ? in : cfg.width, cfg.width, rng, dev));
    if (cfg.classes > 0 || i + 1 < cfg.depth) m->add(std::make_unique<ReLU>());
  }
  if (cfg.classes > 0) m->add(std::make_unique<Linear>(cfg.width, cfg.classes, rng, dev));
  return m;
}

std::unique_ptr<Sequential> build_cnn(const ModelConfig& cfg, const std::vector<int64_t>& shape,
                                      Rng& rng, tensor::Device dev) {
  if (shape.size() != 3)
    throw InputError("--model cnn needs image inputs [C, H, W]; this dataset gives " +
                     tensor::shape_str(shape) + " (use --model mlp, or an image dataset)");
  if (cfg.classes < 1) throw InputError("--model cnn needs --classes >= 1");
  auto m = std::make_unique<Sequential>();
  int64_t c = shape[0], h = shape[1], w = shape[2];
  for (int64_t out : cfg.channels) {
    if (h < 2 || w < 2)
      throw InputError(
          str("--channels: too many conv blocks for a ", shape[1], "x", shape[2], " image"));
    m->add(std::make_unique<Conv2d>(c, out, 3, rng, dev));
    m->add(std::make_unique<ReLU>());
    m->add(std::make_unique<MaxPool2d>(2));
    c = out;
    h /= 2;
    w /= 2;
  }
  m->add(std::make_unique<Flatten>());
  m->add(std::make_unique<Linear>(c * h * w, cfg.hidden, rng, dev));
  m->add(std::make_unique<ReLU>());
  m->add(std::make_unique<Linear>(cfg.hidden, cfg.classes, rng, dev));
  return m;
}

std::unique_ptr<Module> build_gpt(const ModelConfig& cfg, const std::vector<int64_t>& shape,
                                  Rng& rng, tensor::Device dev) {
  if (shape.size() != 1 || shape[0] > cfg.block)
    throw InputError("--model gpt needs samples of at most --block " + std::to_string(cfg.block) +
                     " token ids; this dataset gives " + tensor::shape_str(shape) +
                     " (use a token dataset: synthetic-tokens, or text:PATH)");
  return std::make_unique<Gpt>(gpt_config(cfg), rng, dev);
}

}  // namespace

GptConfig gpt_config(const ModelConfig& cfg) {
  return {.vocab = cfg.vocab,
          .block = cfg.block,
          .layers = cfg.layers,
          .heads = cfg.heads,
          .embd = cfg.embd,
          .dropout = cfg.dropout};
}

std::unique_ptr<Sequential> build_sequential(const ModelConfig& cfg,
                                             const std::vector<int64_t>& sample_shape,
                                             tensor::Device device) {
  Rng rng(cfg.seed);
  if (cfg.kind == "mlp") return build_mlp(cfg, tensor::numel_of(sample_shape), rng, device);
  if (cfg.kind == "cnn") return build_cnn(cfg, sample_shape, rng, device);
  throw InputError("model '" + cfg.kind + "' is not a Sequential (mlp or cnn)");
}

std::unique_ptr<Module> build_model(const ModelConfig& cfg,
                                    const std::vector<int64_t>& sample_shape,
                                    tensor::Device device) {
  if (cfg.kind == "mlp" || cfg.kind == "cnn") return build_sequential(cfg, sample_shape, device);
  Rng rng(cfg.seed);
  if (cfg.kind == "gpt") return build_gpt(cfg, sample_shape, rng, device);
  throw InputError("unknown model '" + cfg.kind + "' (use mlp, cnn or gpt)");
}

void require_model_fits(const ModelConfig& cfg, int64_t input_features) {
  double params = 0;  // doubles: the flags' products may not fit in 64 bits
  std::string flags;
  if (cfg.kind == "gpt") {
    // Per block 12 C^2 (attention 4 C^2, MLP 8 C^2), plus the position
    // embeddings; the vocabulary is not known yet (a lower bound).
    const double c = static_cast<double>(cfg.embd);
    params = static_cast<double>(cfg.layers) * 12.0 * c * c + static_cast<double>(cfg.block) * c;
    flags = str("--layers ", cfg.layers, " and --embd ", cfg.embd);
  } else if (cfg.kind == "cnn") {
    double c_in = 1;
    for (int64_t c : cfg.channels) {
      params += c_in * 9.0 * static_cast<double>(c);
      c_in = static_cast<double>(c);
    }
    params += static_cast<double>(cfg.hidden) * (c_in + static_cast<double>(cfg.classes));
    flags = "--channels and --hidden";
  } else {
    const double w = static_cast<double>(cfg.width);
    params = static_cast<double>(input_features) * w + static_cast<double>(cfg.depth - 1) * w * w +
             w * static_cast<double>(cfg.classes);
    flags = str("--width ", cfg.width, " and --depth ", cfg.depth);
  }
  // fp32 values, gradients and at least one optimiser buffer each.
  const std::string count =
      params < 1e18 ? std::to_string(static_cast<int64_t>(params)) : str(params);
  require_memory(params * 4.0 * 3.0, str("a model of ", count, " parameters (", flags, ")"));
}

}  // namespace mddp::nn
