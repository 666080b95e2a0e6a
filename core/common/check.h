// Errors. Two tiers (docs/errors.md):
//  * recoverable conditions (bad input, peer gone, timeout) throw a typed
//    exception derived from mddp::Error, carrying what failed and what to do;
//  * programmer errors go through MDDP_CHECK, which names the expression,
//    file:line and the values involved.
#pragma once

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mddp {

// Base of every error microddp throws on purpose. what() is one line a user can act on.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: flags, config, files.
class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void check_failed(const char* expr, const char* file, int line,
                               const std::string& msg);

inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  return os.str();
}
}  // namespace detail

// The message of a caught exception (e.g. one a worker thread stored), for
// reports that name what failed.
std::string what_of(std::exception_ptr e);

// Builds a message from any streamable pieces: str("rank ", r, " of ", n).
template <typename... Args>
std::string str(const Args&... args) {
  return detail::concat(args...);
}

}  // namespace mddp

#define MDDP_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) [[unlikely]]                                                            \
      ::mddp::detail::check_failed(#cond, __FILE__, __LINE__, ::mddp::str(__VA_ARGS__)); \
  } while (0)

#define MDDP_CHECK_EQ(a, b, ...)                                                               \
  do {                                                                                         \
    const auto& mddp_a_ = (a);                                                                 \
    const auto& mddp_b_ = (b);                                                                 \
    if (!(mddp_a_ == mddp_b_)) [[unlikely]]                                                    \
      ::mddp::detail::check_failed(#a " == " #b, __FILE__, __LINE__,                           \
                                   ::mddp::str(mddp_a_, " vs ", mddp_b_, " ", ##__VA_ARGS__)); \
  } while (0)
