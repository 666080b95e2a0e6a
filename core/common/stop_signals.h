// SIGINT and SIGTERM, caught for the life of a StopSignals object (the old
// handlers come back when it dies). The handler only records the signal, in
// whichever thread it lands — libraries (OpenBLAS, gRPC) start threads before
// main can block signals in them — and the owner polls for it. One object at
// a time per process.
#pragma once

namespace mddp {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal caught and not yet taken (SIGINT or SIGTERM), else 0.
  int pending() const;
  // pending(), and forget it.
  int take();
};

}  // namespace mddp
