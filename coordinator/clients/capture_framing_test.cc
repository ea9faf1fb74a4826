#include "coordinator/clients/capture_framing.h"

#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::IsOk;

class HeaderOnly final : public CaptureStream {
 public:
  void OnStarted(int64_t /*agent_start_ns*/) override {}
  void OnHeader(const CaptureHeaderInfo& header) override { header_ = header; }
  absl::Status OnData(std::string_view /*chunk*/) override { return absl::OkStatus(); }
  void OnDone(absl::Status /*status*/) override {}
  CaptureHeaderInfo header_;
};

TEST(CaptureFramerTest, ShortfallsReachTheStreamBoundedAndWithoutControlCharacters) {
  profctl::v1::CaptureChunk chunk;
  profctl::v1::CaptureHeader& h = *chunk.mutable_header();
  h.set_total_bytes(0);
  // A sentence of 5 bytes with an escape sequence, then 400 two-byte characters: the cut at 300
  // bytes falls inside one of them.
  std::string long_detail = "\x1b[2J!";
  for (int i = 0; i < 400; ++i) long_detail += "\xc3\xa9";
  for (int i = 0; i < 20; ++i) {
    profctl::v1::Shortfall* s = h.add_shortfalls();
    s->set_kind(profctl::v1::SHORTFALL_KIND_DROPPED_RECORDS);
    s->set_amount(static_cast<uint64_t>(i));
    s->set_detail(i == 0 ? long_detail : "7 records dropped\n");
  }
  HeaderOnly stream;
  CaptureFramer framer("Capture", 1 << 20, &stream);
  ASSERT_THAT(framer.Accept(chunk), IsOk());
  const std::vector<profctl::v1::Shortfall>& got = stream.header_.shortfalls;
  ASSERT_EQ(got.size(), 16u);
  EXPECT_EQ(got[15].amount(), 15u);
  EXPECT_EQ(got[1].detail(), "7 records dropped?");
  const std::string& cut = got[0].detail();
  EXPECT_EQ(cut.size(), 299u + 3u);
  EXPECT_EQ(cut.substr(0, 5), "?[2J!");
  EXPECT_EQ(cut.substr(cut.size() - 5), "\xc3\xa9...");
}

TEST(CaptureFramerTest, AHeaderWithoutShortfallsGivesNone) {
  profctl::v1::CaptureChunk chunk;
  chunk.mutable_header()->set_total_bytes(0);
  HeaderOnly stream;
  CaptureFramer framer("Capture", 1 << 20, &stream);
  ASSERT_THAT(framer.Accept(chunk), IsOk());
  EXPECT_TRUE(stream.header_.shortfalls.empty());
}

}  // namespace
}  // namespace profctl::coordinator
