#include "core/common/record_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/common/check.h"
#include "core/common/log.h"

namespace mddp {
namespace {

// The offset just past the last '\n' of the file open as `fd` (0 when it has none).
off_t end_of_last_record(int fd, off_t size) {
  std::vector<char> buf(1 << 16);
  for (off_t end = size; end > 0;) {
    const off_t begin =
        end > static_cast<off_t>(buf.size()) ? end - static_cast<off_t>(buf.size()) : 0;
    const ssize_t got = ::pread(fd, buf.data(), static_cast<std::size_t>(end - begin), begin);
    if (got <= 0) return size;  // unreadable: leave the file as it is
    for (ssize_t i = got - 1; i >= 0; --i)
      if (buf[static_cast<std::size_t>(i)] == '\n') return begin + i + 1;
    end = begin;
  }
  return 0;
}

}  // namespace

RecordFile::RecordFile(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(str("cannot open ", path_.string(), " for appending: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
    const off_t whole = end_of_last_record(fd_, st.st_size);
    if (whole < st.st_size && ::ftruncate(fd_, whole) == 0)
      spdlog::warn("{}: cut off a torn last record ({} bytes) left by an earlier writer",
                   path_.string(), st.st_size - whole);
  }
}

RecordFile::~RecordFile() {
  if (fd_ >= 0) {
    ::fdatasync(fd_);
    ::close(fd_);
  }
}

std::size_t RecordFile::append(std::string_view lines) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    error_ = std::strerror(errno);
    return 0;
  }
  std::size_t done = 0;
  while (done < lines.size()) {
    const ssize_t n = ::write(fd_, lines.data() + done, lines.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      error_ = n < 0 ? std::strerror(errno) : "write returned 0";
      break;
    }
  }
  std::size_t kept = done;
  if (done < lines.size()) {
    // Keep the records that fit whole; cut the torn one.
    const std::size_t nl = done == 0 ? std::string_view::npos : lines.rfind('\n', done - 1);
    kept = nl == std::string_view::npos ? 0 : nl + 1;
    if (kept < done && ::ftruncate(fd_, st.st_size + static_cast<off_t>(kept)) != 0)
      error_ += str("; cutting the torn record failed too: ", std::strerror(errno));
  }
  std::size_t records = 0;
  for (std::size_t i = 0; i < kept; ++i) records += lines[i] == '\n';
  return records;
}

bool RecordFile::sync() {
  if (::fdatasync(fd_) == 0) return true;
  error_ = std::strerror(errno);
  return false;
}

void LostRecords::add(int rank, int64_t step, bool eval) {
  if (eval) {
    ++evals_;
    ++count_;
    return;
  }
  auto& ranges = steps_[rank];
  const auto next = ranges.upper_bound(step);  // the first range starting after `step`
  const auto prev = next == ranges.begin() ? ranges.end() : std::prev(next);
  if (prev != ranges.end() && step <= prev->second)
    return;  // already counted (a record sent twice)
  ++count_;
  int64_t first = step, last = step;  // merged with the ranges it touches
  if (next != ranges.end() && next->first == step + 1) {
    last = next->second;
    ranges.erase(next);
  }
  if (prev != ranges.end() && prev->second == step - 1) {
    first = prev->first;
    ranges.erase(prev);
  }
  ranges[first] = last;
}

std::string LostRecords::describe() const {
  std::string out;
  for (const auto& [rank, ranges] : steps_) {
    std::string list;
    for (const auto& [first, last] : ranges)
      list += str(list.empty() ? "" : ", ", first, first == last ? "" : str("-", last));
    out += str(out.empty() ? "" : "; ", rank >= 0 ? str("rank ", rank, " ") : "", "step",
               ranges.size() == 1 && ranges.begin()->first == ranges.begin()->second ? " " : "s ",
               list);
  }
  if (evals_ > 0)
    out += str(out.empty() ? "" : " and ", evals_, " evaluation", evals_ == 1 ? "" : "s");
  return out;
}

}  // namespace mddp
