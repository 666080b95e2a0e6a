// Asio's and Beast's compiled parts, built once here (their "separate
// compilation" mode, BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION, which every file using them is compiled
// with: the mddp_beast target) instead of inline in every file that uses
// them: a quarter of the dashboard server's compile time.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
