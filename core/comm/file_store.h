// FileStore: the Store for processes on one host (multi-process tests,
// `bench allreduce --nproc N`): one file per key in a shared directory.
#pragma once

#include <string>

#include "core/comm/store.h"

namespace mddp::comm {

// set() writes a temporary file and renames it into place, so a reader sees
// either nothing or the whole value. get() polls (1 ms, backing off to 10 ms)
// until the file exists. Keys may contain any bytes; they are escaped into
// file names. Thread- and process-safe. The directory must exist.
class FileStore : public Store {
 public:
  explicit FileStore(std::string dir);
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;

  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

}  // namespace mddp::comm
