#include "core/train/lab_fault.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>
#include <vector>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::train {
namespace {

std::vector<std::string> fields_of(const std::string& text) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == ':')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

int64_t whole(const std::string& text, const std::string& field, const std::string& all) {
  try {
    std::size_t used = 0;
    const int64_t v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InputError(
      str("MDDP_LAB_FAULT '", all, "': ", field, " '", text, "' is not a whole number"));
}

}  // namespace

LabFault LabFault::parse(const std::string& text) {
  LabFault f;
  if (text.empty()) return f;
  const auto p = fields_of(text);
  const auto bad = [&]() -> InputError {
    return InputError(
        str("MDDP_LAB_FAULT '", text,
            "': give hang:RANK:STEP:PHASE, slow:RANK:PHASE:MS, mismatch:RANK:SETTING "
            "(width or depth), short:RANK:STEPS, nan:RANK:STEP, link:RANK:PEER:MBPS or "
            "flip:RANK:STEP"));
  };
  if (p.size() < 3) throw bad();
  f.rank = static_cast<int>(whole(p[1], "the rank", text));
  if (p[0] == "hang" && p.size() == 4) {
    f.kind = Kind::kHang;
    f.step = whole(p[2], "the step", text);
    f.phase = p[3];
  } else if (p[0] == "slow" && p.size() == 4) {
    f.kind = Kind::kSlow;
    f.phase = p[2];
    f.ms = static_cast<double>(whole(p[3], "the milliseconds", text));
  } else if (p[0] == "mismatch" && p.size() == 3 && (p[2] == "width" || p[2] == "depth")) {
    f.kind = Kind::kMismatch;
    f.setting = p[2];
  } else if (p[0] == "short" && p.size() == 3) {
    f.kind = Kind::kShort;
    f.step = whole(p[2], "the steps", text);
  } else if (p[0] == "nan" && p.size() == 3) {
    f.kind = Kind::kNan;
    f.step = whole(p[2], "the step", text);
  } else if (p[0] == "flip" && p.size() == 3) {
    f.kind = Kind::kFlip;
    f.step = whole(p[2], "the step", text);
  } else if (p[0] == "link" && p.size() == 4) {
    f.kind = Kind::kLink;
    f.peer = static_cast<int>(whole(p[2], "the peer", text));
    f.mbps = static_cast<double>(whole(p[3], "the MB/s", text));
    if (f.peer == f.rank || f.mbps < 1)
      throw InputError(
          str("MDDP_LAB_FAULT '", text, "': a link joins two ranks at 1 MB/s or more"));
  } else {
    throw bad();
  }
  const bool has_phase = f.kind == Kind::kHang || f.kind == Kind::kSlow;
  if (has_phase && f.phase != "data" && f.phase != "forward" && f.phase != "backward")
    throw InputError(str("MDDP_LAB_FAULT '", text, "': the phase is data, forward or backward"));
  return f;
}

LabFault LabFault::from_environment() {
  const char* v = std::getenv("MDDP_LAB_FAULT");
  return parse(v ? v : "");
}

void LabFault::at_phase(int r, int64_t s, std::string_view p) const {
  if (r != rank || p != phase) return;
  if (kind == Kind::kSlow)
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  // Stopped for good, as a rank stuck in a driver call or a deadlock is:
  // the process lives on (its heartbeat thread too) until it is killed.
  if (kind == Kind::kHang && s == step)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void LabFault::adjust_config(int r, TrainConfig& cfg) const {
  if (r != rank) return;
  if (kind == Kind::kShort) cfg.steps = step;
  if (kind != Kind::kMismatch) return;
  if (setting == "width") cfg.model.width = cfg.model.width * 3 / 4;
  if (setting == "depth") cfg.model.depth += 1;
}

void LabFault::poison(int r, int64_t s, tensor::Tensor& y) const {
  if (kind != Kind::kNan || r != rank || s != step) return;
  std::vector<float> values = y.to_vector();  // once, on any device
  values.at(0) = std::numeric_limits<float>::quiet_NaN();
  y.copy_from(values);
}

void LabFault::corrupt(int r, int64_t s, nn::Module& model) const {
  if (kind != Kind::kFlip || r != rank || s != step) return;
  tensor::Tensor& w = model.parameters().front()->value;
  std::vector<float> values = w.to_vector();
  values.at(0) =
      std::bit_cast<float>(std::bit_cast<uint32_t>(values[0]) ^ 1u);  // the lowest mantissa bit
  w.copy_from(values);
}

void LabFault::adjust_comm(int r, int world_size, comm::CommOptions& options) const {
  if (kind != Kind::kLink) return;
  if (std::max(rank, peer) >= world_size)
    throw InputError(str("MDDP_LAB_FAULT 'link:", rank, ":", peer, ":", mbps, "': rank ",
                         std::max(rank, peer), " is not in a job of ", world_size, " ranks"));
  if (r != rank && r != peer) return;
  options.slow_peer = r == rank ? peer : rank;
  options.slow_peer_bytes_per_second = mbps * 1e6;
}

}  // namespace mddp::train
