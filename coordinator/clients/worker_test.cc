#include "coordinator/clients/worker.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/clients/agent_credentials.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(GrpcAgentClientTest, UnimplementedGetInfoSaysThePeerIsNotAnAgent) {
  const absl::Status s =
      ExplainGetInfoError("127.0.0.1:7000", absl::UnimplementedError("GetInfo: "));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("127.0.0.1:7000 answered but is not a profctl agent "
                                     "(UNIMPLEMENTED GetInfo); is it the coordinator's port?"));
  const absl::Status refused = absl::UnavailableError("GetInfo: connection refused");
  EXPECT_EQ(ExplainGetInfoError("h:1", refused), refused);
}

TEST(WorkerTest, ParsesHostsAndIpv6) {
  absl::StatusOr<WorkerAddress> w = ParseWorker("host-1.example:6000");
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->host, "host-1.example");
  EXPECT_EQ(w->port, 6000);
  EXPECT_EQ(w->target(), "host-1.example:6000");
  EXPECT_EQ(w->file_stem(), "host-1.example_6000");
  w = ParseWorker("[::1]:7000");
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->host, "::1");
  EXPECT_EQ(w->target(), "[::1]:7000");
  EXPECT_EQ(w->file_stem(), "__1_7000");
}

// Channels to IP addresses skip gRPC's DNS resolver; names keep it.
TEST(WorkerTest, ChannelTargetNamesAnIpAddressAsOne) {
  EXPECT_EQ(ParseWorker("10.1.2.3:6000")->channel_target(), "ipv4:10.1.2.3:6000");
  EXPECT_EQ(ParseWorker("[::1]:7000")->channel_target(), "ipv6:[::1]:7000");
  EXPECT_EQ(ParseWorker("grpc://127.0.0.1:9")->channel_target(), "ipv4:127.0.0.1:9");
  EXPECT_EQ(ParseWorker("host-1.example:6000")->channel_target(), "host-1.example:6000");
  EXPECT_EQ(ParseWorker("localhost:6000")->channel_target(), "localhost:6000");
  // Not an address, though it looks like one: a name.
  EXPECT_EQ(ParseWorker("10.1.2:6000")->channel_target(), "10.1.2:6000");
}

TEST(WorkerTest, GrpcSchemeNamesATslProfilerServer) {
  absl::StatusOr<WorkerAddress> w = ParseWorker("grpc://tpu-host-3:9999");
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->protocol, WorkerAddress::Protocol::kTsl);
  EXPECT_EQ(w->address, "grpc://tpu-host-3:9999");
  EXPECT_EQ(w->target(), "tpu-host-3:9999");
  EXPECT_EQ(w->file_stem(), "tpu-host-3_9999");  // as TensorBoard names the host's file
  w = ParseWorker("grpc://[::1]:6000");          // IPv6, which TensorFlow's own client cannot do
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->target(), "[::1]:6000");
  EXPECT_EQ(ParseWorker("h:1")->protocol, WorkerAddress::Protocol::kAgent);

  absl::StatusOr<std::vector<WorkerAddress>> list = ParseWorkerList("h:1,grpc://h:2");
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ((*list)[1].protocol, WorkerAddress::Protocol::kTsl);
  EXPECT_THAT(ParseWorkerList("h:1,grpc://h:1").status().message(), HasSubstr("listed twice"));
}

// A 253-character host name is valid, but "<it>_6000.xplane.pb.tmp.XXXXXX" is not a valid file
// name (255 bytes at most): the stem is shortened with a stable hash, and stays distinct.
TEST(WorkerTest, LongHostNamesGetBoundedDistinctStableStems) {
  const std::string a(253, 'a');
  std::string b = a;
  b.back() = 'b';
  absl::StatusOr<WorkerAddress> wa = ParseWorker(a + ":6000");
  absl::StatusOr<WorkerAddress> wb = ParseWorker(b + ":6000");
  ASSERT_THAT(wa, IsOk());
  ASSERT_THAT(wb, IsOk());
  EXPECT_LE(wa->file_stem().size(), 100u);
  EXPECT_NE(wa->file_stem(), wb->file_stem());
  EXPECT_EQ(wa->file_stem(), ParseWorker(a + ":6000")->file_stem());
  EXPECT_EQ(wa->file_stem().substr(0, 10), "aaaaaaaaaa");
  EXPECT_EQ(ParseWorker("short:1")->file_stem(), "short_1");
}

TEST(WorkerTest, ErrorsNameTheEntry) {
  struct Case {
    const char* text;
    const char* why;
  } cases[] = {
      {"host", "missing :port"},
      {"host:", "port '' is not a number"},
      {"host:0", "port '0'"},
      {"host:65536", "port '65536'"},
      {"host:12ab", "port '12ab'"},
      {"host:-1", "port '-1'"},
      {":6000", "missing host"},
      {"::1:6000", "[addr]:port"},
      {"[::1:6000", "missing its ']'"},
      {"[::1]6000", "expected :port"},
      {"[zz]:1", "not a valid IPv6"},
      {"ho st:1", "host name may only contain"},
      {"http://h:1", "unknown URL scheme"},
      {"grpc://grpc://h:1", "unknown URL scheme"},
      {"grpc://h", "missing :port"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<WorkerAddress> w = ParseWorker(c.text);
    ASSERT_FALSE(w.ok()) << c.text;
    EXPECT_THAT(w.status().message(), HasSubstr(std::string("worker '") + c.text + "'"));
    EXPECT_THAT(w.status().message(), HasSubstr(c.why)) << c.text;
  }
}

TEST(WorkerTest, ListRejectsEmptyAndDuplicates) {
  absl::StatusOr<std::vector<WorkerAddress>> l = ParseWorkerList("a:1, b:2");
  ASSERT_THAT(l, IsOk());
  EXPECT_EQ(l->size(), 2u);
  EXPECT_THAT(ParseWorkerList("").status().message(), HasSubstr("no workers"));
  EXPECT_THAT(ParseWorkerList("a:1,,b:2").status().message(), HasSubstr("empty entry"));
  EXPECT_THAT(ParseWorkerList("a:1,a:1").status().message(), HasSubstr("listed twice"));
}

// A request's or a schedule's list stays a list: no entry is split on a comma.
TEST(WorkerTest, TypedListIsCheckedEntryByEntry) {
  absl::StatusOr<std::vector<WorkerAddress>> l = ParseWorkers({"a:1", " grpc://b:2 "});
  ASSERT_THAT(l, IsOk());
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[1].address, "grpc://b:2");
  EXPECT_THAT(ParseWorkers({}).status().message(), HasSubstr("no workers"));
  EXPECT_THAT(ParseWorkers({"a:1", " "}).status().message(), HasSubstr("worker #2 is empty"));
  EXPECT_THAT(ParseWorkers({"a:1,b:2"}).status().message(), HasSubstr("worker 'a:1,b:2'"));
  EXPECT_THAT(ParseWorkers({"a:1", "grpc://a:1"}).status().message(), HasSubstr("listed twice"));
}

// A pod too large for one command-line argument comes from a file: one address or several a
// line, comments and blank lines skipped, every error naming the file and the line.
TEST(WorkerFileTest, TakesAddressesByLineCommaOrSpaceWithComments) {
  absl::StatusOr<std::vector<WorkerAddress>> l = ParseWorkerFile(
      "# rack 1\nh1:6000\n\n  h2:6000, h3:6000\th4:6000  # two more\r\ngrpc://[::1]:9999\n",
      "pod.txt");
  ASSERT_THAT(l, IsOk());
  ASSERT_EQ(l->size(), 5u);
  EXPECT_EQ((*l)[0].address, "h1:6000");
  EXPECT_EQ((*l)[3].address, "h4:6000");
  EXPECT_EQ((*l)[4].protocol, WorkerAddress::Protocol::kTsl);
  EXPECT_EQ((*l)[4].host, "::1");
}

TEST(WorkerFileTest, ErrorsNameTheFileAndTheLine) {
  EXPECT_EQ(ParseWorkerFile("h1:6000\n# x\nh2:port\n", "pod.txt").status().message(),
            "pod.txt:3: worker 'h2:port': port 'port' is not a number in 1..65535");
  EXPECT_EQ(ParseWorkerFile("h1:6000\nh2:1\n\nh3:1, h1:6000\n", "pod.txt").status().message(),
            "pod.txt:4: worker 'h1:6000' is listed twice (first on line 1)");
  // The same target with and without grpc:// is one worker.
  EXPECT_THAT(ParseWorkerFile("h:1\ngrpc://h:1", "p").status().message(),
              HasSubstr("p:2: worker 'grpc://h:1' is listed twice (first on line 1)"));
  for (const char* empty : {"", "\n\n", "# nothing yet\n", " , ,\t\n"}) {
    EXPECT_EQ(ParseWorkerFile(empty, "pod.txt").status().message(),
              "pod.txt: no workers (only blank lines and comments)")
        << empty;
  }
}

// 10,000 hosts: far past what one argument of a command line can carry (128 KiB), in order.
TEST(WorkerFileTest, TenThousandHostsParseInOrder) {
  std::string text;
  for (int i = 0; i < 10'000; ++i) {
    absl::StrAppend(&text, "worker-", i, ".pod.example.com:", 6000 + i % 4, "\n");
  }
  ASSERT_GT(text.size(), 128u * 1024u);
  absl::StatusOr<std::vector<WorkerAddress>> l = ParseWorkerFile(text, "big.txt");
  ASSERT_THAT(l, IsOk());
  ASSERT_EQ(l->size(), 10'000u);
  EXPECT_EQ((*l)[9'999].address, "worker-9999.pod.example.com:6003");
}

// The bearer token travels in clear text without TLS: only to loopback, unless insisted on.
TEST(TokenDestinationTest, WithoutTlsTheTokenStaysOnLoopbackUnlessInsisted) {
  AgentCredentials c;
  c.token = "secret";
  for (const char* w : {"127.0.0.1:1", "127.9.9.9:1", "[::1]:1", "localhost:1"}) {
    EXPECT_TRUE(SendsTokenTo(c, *ParseWorker(w))) << w;
  }
  for (const char* w :
       {"10.0.0.7:1", "gpu-0:1", "[fe80::1]:1", "rogue.example:1", "grpc://127.0.0.1:1"}) {
    EXPECT_FALSE(SendsTokenTo(c, *ParseWorker(w))) << w;
  }
  std::vector<std::string> warnings;
  absl::Status st =
      CheckTokenDestinations(c, *ParseWorkers({"127.0.0.1:1", "gpu-0:1", "gpu-1:1"}), &warnings);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("worker 'gpu-0:1' (and 1 more), beyond loopback"));
  EXPECT_THAT(CheckTokenDestinations(c, *ParseWorkers({"127.0.0.1:1", "grpc://tf:1"}), &warnings),
              IsOk());
  EXPECT_TRUE(warnings.empty());
  c.token_in_clear_beyond_loopback = true;  // --insecure-token
  EXPECT_TRUE(SendsTokenTo(c, *ParseWorker("gpu-0:1")));
  EXPECT_FALSE(SendsTokenTo(c, *ParseWorker("grpc://gpu-0:1")));
  EXPECT_THAT(CheckTokenDestinations(c, *ParseWorkers({"gpu-0:1"}), &warnings), IsOk());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("WARNING: --insecure-token"));
  c.token_in_clear_beyond_loopback = false;
  c.tls = true;  // TLS: everywhere, no warning
  warnings.clear();
  EXPECT_TRUE(SendsTokenTo(c, *ParseWorker("gpu-0:1")));
  EXPECT_THAT(CheckTokenDestinations(c, *ParseWorkers({"gpu-0:1"}), &warnings), IsOk());
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace profctl::coordinator
