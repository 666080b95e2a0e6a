// HostTopology: which ranks of a job share a host, from the host identities
// (hostname + kernel boot id, transport/connect.h's host_identity()) that
// every rank publishes at rendezvous — never guessed from rank numbers. The
// transport choice (shm on one host) and the hierarchical all-reduce
// (algorithms/hierarchical_all_reduce.cc) both read it.
//
// Words: a host is a set of ranks with equal identities; hosts are numbered
// in the order of their lowest rank, and a host's ranks in rank order (its
// local ranks 0, 1, ...). Every rank computes the same topology from the
// same identities.
#pragma once

#include <string>
#include <vector>

#include "core/comm/store.h"
#include "core/comm/types.h"

namespace mddp::comm {

class HostTopology {
 public:
  HostTopology() = default;
  // identities[r]: rank r's host identity.
  static HostTopology from_identities(const std::vector<std::string>& identities);

  int world_size() const { return static_cast<int>(host_of_.size()); }
  int host_count() const { return static_cast<int>(hosts_.size()); }
  int host_of(int rank) const { return host_of_.at(static_cast<std::size_t>(rank)); }
  // The ranks of host h, ascending: its local ranks in order.
  const std::vector<int>& ranks_of(int host) const {
    return hosts_.at(static_cast<std::size_t>(host));
  }
  int local_rank(int rank) const { return local_rank_.at(static_cast<std::size_t>(rank)); }
  int local_size(int rank) const { return static_cast<int>(ranks_of(host_of(rank)).size()); }

  bool single_host() const { return host_count() == 1; }
  // More than one host and more than one rank on some host: the layout
  // where a two-level all-reduce saves inter-host bytes (`--algo auto`
  // picks it).
  bool multi_host_multi_rank() const;
  // "2 hosts: 2+3 ranks" (or "1 host: 4 ranks").
  std::string describe() const;

 private:
  std::vector<int> host_of_, local_rank_;  // [rank]
  std::vector<std::vector<int>> hosts_;    // [host] -> ranks
};

// Collective: publishes `identity` under "<prefix>/host/<rank>", reads every
// rank's, and returns the topology. TimeoutError names a rank that never
// published by the deadline.
HostTopology exchange_topology(Store& store, int rank, int size, const std::string& identity,
                               Deadline deadline, const std::string& prefix);

}  // namespace mddp::comm
