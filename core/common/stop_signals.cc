#include "core/common/stop_signals.h"

#include <signal.h>

#include <csignal>

namespace mddp {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_int = {}, g_old_term = {};

void on_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

StopSignals::StopSignals() {
  g_signal = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
}

int StopSignals::pending() const {
  return g_signal;
}

int StopSignals::take() {
  const int sig = g_signal;
  g_signal = 0;
  return sig;
}

}  // namespace mddp
