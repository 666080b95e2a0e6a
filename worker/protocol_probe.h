// Is the server at --coordinator a microddp coordinator at all? gRPC speaks
// HTTP/2, and a channel to a server that speaks something else (the
// dashboard's HTTP/1.1 port, a web server, SSH) does not fail: it retries
// until the connect timeout and then reports "cannot reach". This probe
// opens one TCP connection, sends HTTP/2's client preface and an empty
// SETTINGS frame, and reads the first bytes of the answer: an HTTP/2 server
// answers with a frame, anything else is named by what it sent.
#pragma once

#include <chrono>
#include <string>

namespace mddp::worker {

// "" when the server looks like HTTP/2, cannot be reached (yet), closes the
// connection without a word (a coordinator with TLS does) or says nothing
// within `timeout` (the normal connect path then decides); else one
// phrase saying what answered instead, e.g. "an HTTP/1.1 server (HTTP/1.1
// 400 Bad Request)".
std::string probe_other_protocol(const std::string& host_port, std::chrono::milliseconds timeout);

}  // namespace mddp::worker
