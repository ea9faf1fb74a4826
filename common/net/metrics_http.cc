#include "common/net/metrics_http.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace profctl {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr uint32_t kRequestLimit = 8 * 1024;

std::string EscapeLabel(absl::string_view v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v < 9e15 && v > -9e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.9g", v);
}

}  // namespace

void PromText::Counter(absl::string_view name, absl::string_view help, double value,
                       const Labels& labels) {
  Sample("counter", name, help, value, labels);
}

void PromText::Gauge(absl::string_view name, absl::string_view help, double value,
                     const Labels& labels) {
  Sample("gauge", name, help, value, labels);
}

void PromText::Sample(absl::string_view type, absl::string_view name, absl::string_view help,
                      double value, const Labels& labels) {
  if (declared_.insert(std::string(name)).second) {
    absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  absl::StrAppend(&text_, name);
  if (!labels.empty()) {
    absl::StrAppend(&text_, "{");
    bool first = true;
    for (const auto& [k, v] : labels) {
      absl::StrAppend(&text_, first ? "" : ",", k, "=\"", EscapeLabel(v), "\"");
      first = false;
    }
    absl::StrAppend(&text_, "}");
  }
  absl::StrAppend(&text_, " ", FormatValue(value), "\n");
}

struct MetricsServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::thread thread;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
      } else {
        Serve(std::move(socket));
      }
      Accept();
    });
  }

  // One request, then the connection closes. Runs on the io thread: render() is cheap.
  void Serve(tcp::socket socket) {
    struct Conn {
      beast::tcp_stream stream;
      beast::flat_buffer buffer;
      http::request_parser<http::string_body> parser;
      http::response<http::string_body> response;
      explicit Conn(tcp::socket s) : stream(std::move(s)) {}
    };
    auto conn = std::make_shared<Conn>(std::move(socket));
    conn->parser.header_limit(kRequestLimit);
    conn->parser.body_limit(uint64_t{kRequestLimit});
    conn->stream.expires_after(std::chrono::seconds(5));
    http::async_read(conn->stream, conn->buffer, conn->parser,
                     [this, conn](beast::error_code ec, size_t /*bytes*/) {
                       if (ec) return;  // timeout, oversize, garbage: just close
                       const auto& req = conn->parser.get();
                       auto& res = conn->response;
                       res.version(req.version());
                       res.keep_alive(false);
                       res.set(http::field::server, "profctl");
                       const std::string target(req.target());
                       const std::string path = target.substr(0, target.find('?'));
                       if (req.method() != http::verb::get && req.method() != http::verb::head) {
                         res.result(http::status::method_not_allowed);
                         res.set(http::field::allow, "GET, HEAD");
                         res.body() = "method not allowed\n";
                       } else if (path == "/metrics") {
                         res.result(http::status::ok);
                         res.set(http::field::content_type, "text/plain; version=0.0.4");
                         res.body() = render();
                       } else if (path == "/healthz") {
                         res.result(http::status::ok);
                         res.set(http::field::content_type, "text/plain");
                         res.body() = "ok\n";
                       } else {
                         res.result(http::status::not_found);
                         res.body() = "not found: try /metrics\n";
                       }
                       res.prepare_payload();
                       if (req.method() == http::verb::head) res.body().clear();
                       http::async_write(conn->stream, res, [conn](beast::error_code, size_t) {
                         beast::error_code ignored;
                         conn->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
                       });
                     });
  }
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& bind, int port, std::function<std::string()> render) {
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
  beast::error_code ec;
  const asio::ip::address address =
      asio::ip::make_address(bind == "localhost" ? "127.0.0.1" : bind, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: bad bind address '", bind, "'"));
  }
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on ", bind, ":", port, ": ", ec.message()));
  }
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::~MetricsServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace profctl
