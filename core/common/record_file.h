// A file of whole records, one per line (metrics.jsonl, train.jsonl). A
// record is either in the file whole or not at all: when a write fails
// (disk full, quota, I/O error) the file is cut back to the end of the last
// record that fit, and append() says how many of its records made it. The
// next append() tries again, so records are written again as soon as space
// comes back; the caller keeps the account of what was lost
// (LostRecords). Not thread-safe: one writer, under its own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

namespace mddp {

class RecordFile {
 public:
  // Opens `path` for appending (created 0644). A last record left torn by an
  // earlier writer that died mid-write is cut off first, so that the next
  // record does not glue onto it. Throws Error naming the path.
  explicit RecordFile(std::filesystem::path path);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  // Appends `lines`, each ending in '\n'. Returns how many of them are in the
  // file: all, or, when a write failed, the ones before the first that did not
  // fit whole (error() then says why).
  std::size_t append(std::string_view lines);
  // Forces what was written to disk (fdatasync); false (and error()) when that fails.
  bool sync();
  // Why the last failed write failed ("No space left on device"), "" if none did.
  const std::string& error() const { return error_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::string error_;
};

// The account of records that could not be written, by rank and step, said
// in a few words: "rank 0 steps 38-2999, rank 1 steps 39-3000 and 3
// evaluations". Rank -1 for a file of one process's records.
class LostRecords {
 public:
  void add(int rank, int64_t step, bool eval = false);
  int64_t count() const { return count_; }
  // "" when nothing was lost.
  std::string describe() const;

 private:
  // Per rank: the lost steps as closed ranges [first, last], by first step.
  std::map<int, std::map<int64_t, int64_t>> steps_;
  int64_t evals_ = 0, count_ = 0;
};

}  // namespace mddp
