// A minimal HTTP/1.0 endpoint for Prometheus scrapers: GET /metrics answers with the text
// exposition, anything else 404. Threading: serve_metrics blocks its caller, one request at a
// time (a scraper every few seconds needs no more).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "mrc/common/result.h"

namespace mrc::mrcctl {

/// Splits "ADDR:PORT" ("[::1]:9464", "0.0.0.0:9464", ":9464" = every address) into a bound,
/// listening socket. Errors name what is wrong.
Result<int, std::string> listen_on(const std::string& addr_port);

/// Answers requests on `fd` until *stop is set; `body` is called per /metrics request.
void serve_metrics(int fd, const std::function<std::string()>& body, const std::atomic<bool>* stop);

}  // namespace mrc::mrcctl
