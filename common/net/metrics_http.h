// Prometheus metrics of profctl itself: the text exposition format (version 0.0.4), and a small
// HTTP server (Boost.Beast) that serves it at /metrics, with /healthz, on the agent and the
// coordinator daemon (--metrics-port).
#ifndef PROFCTL_COMMON_NET_METRICS_HTTP_H_
#define PROFCTL_COMMON_NET_METRICS_HTTP_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

// Builds one exposition: each metric family's HELP and TYPE once, then its samples.
class PromText {
 public:
  using Labels = std::map<std::string, std::string>;
  // `name` must match [a-zA-Z_:][a-zA-Z0-9_:]*; label values are escaped.
  void Counter(absl::string_view name, absl::string_view help, double value,
               const Labels& labels = {});
  void Gauge(absl::string_view name, absl::string_view help, double value,
             const Labels& labels = {});
  const std::string& text() const { return text_; }

 private:
  void Sample(absl::string_view type, absl::string_view name, absl::string_view help, double value,
              const Labels& labels);
  std::set<std::string> declared_;
  std::string text_;
};

// Serves GET /metrics (the text `render` returns, called per request on the server's thread)
// and GET /healthz ("ok") on bind:port (port 0: a free one), one request per connection, with a
// 5 s read timeout and an 8 KiB request limit. Other paths: 404; other methods: 405.
class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& bind, int port,
                                                              std::function<std::string()> render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const;

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace profctl

#endif  // PROFCTL_COMMON_NET_METRICS_HTTP_H_
