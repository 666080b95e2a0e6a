// What a microddp process's exit status tells whoever started it (`run`,
// `worker --restart`, a container's restart policy, a script): beyond 0
// (done) and 1 (failed, with one line), two outcomes have codes of their
// own, each with the error that ends the process with it (cli/main.cc
// turns the error into the code). Both ends of a job exit this way, so
// the codes live here, beside the other words they share.
#pragma once

#include "core/common/check.h"

namespace mddp::control {

// The work was done, but some of the records it should have left on disk
// could not be written (a full disk): the run's log is not whole. Exits with
// kExitRecordsLost, so scripts can tell it from success and from failure.
class RecordsLostError : public Error {
 public:
  using Error::Error;
};
inline constexpr int kExitRecordsLost = 3;

// This rank's attempt ended and the job goes on once the rank is started
// again (another rank died and restarts remain: Note [Attempts] in
// coordinator/job.cc). Exits with kExitRestart (EX_TEMPFAIL), which
// `microddp run`, `microddp worker --restart` and a container's restart
// policy take as "start it again".
class RestartError : public Error {
 public:
  using Error::Error;
};
inline constexpr int kExitRestart = 75;

}  // namespace mddp::control
