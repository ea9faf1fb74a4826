#include "inject/socket_protocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace profctl::inject {
namespace {

std::vector<uint8_t> Frame(MessageType type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  AppendFrame(type, payload.data(), payload.size(), &out);
  return out;
}

TEST(SocketProtocolTest, RoundTripsEveryMessage) {
  std::vector<uint8_t> stream;
  RegisterMessage reg;
  reg.pid = 1234;
  reg.rank = 3;
  reg.local_rank = 1;
  SetText(reg.hostname, "node-7");
  AppendMessage(MessageType::kRegister, reg, &stream);
  EnableMessage enable;
  enable.token = 9;
  enable.start_wall_ns = 100;
  enable.end_wall_ns = 200;
  SetText(enable.session_id, "s1");
  AppendMessage(MessageType::kEnable, enable, &stream);
  AppendMessage(MessageType::kFlush, CommandMessage{9}, &stream);
  StatusMessage status;
  status.code = static_cast<uint32_t>(StatusCode::kUnavailable);
  SetText(status.text, "held by another CUPTI subscriber (Nsight)");
  AppendMessage(MessageType::kStatus, status, &stream);
  AppendFrame(MessageType::kBye, nullptr, 0, &stream);

  FrameDecoder decoder;
  decoder.Feed(stream.data(), stream.size());
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  ASSERT_EQ(type, static_cast<uint16_t>(MessageType::kRegister));
  RegisterMessage reg2;
  ASSERT_TRUE(DecodeMessage(payload.data(), payload.size(), &reg2));
  EXPECT_EQ(reg2.pid, 1234u);
  EXPECT_EQ(reg2.rank, 3);
  EXPECT_EQ(GetText(reg2.hostname), "node-7");
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EnableMessage enable2;
  ASSERT_TRUE(DecodeMessage(payload.data(), payload.size(), &enable2));
  EXPECT_EQ(enable2.token, 9u);
  EXPECT_EQ(enable2.end_wall_ns, 200);
  EXPECT_EQ(GetText(enable2.session_id), "s1");
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kFlush));
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  StatusMessage status2;
  ASSERT_TRUE(DecodeMessage(payload.data(), payload.size(), &status2));
  EXPECT_EQ(GetText(status2.text), "held by another CUPTI subscriber (Nsight)");
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kBye));
  EXPECT_TRUE(payload.empty());
  EXPECT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kNeedMore);
  EXPECT_EQ(decoder.buffered(), 0u);
}

TEST(SocketProtocolTest, StepSamplesRoundTripAndAreCapped) {
  std::vector<StepSampleEntry> samples(kMaxStepSamplesPerFrame + 5);
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i] = {static_cast<int64_t>(i) * 100, static_cast<int64_t>(i) * 100 + 40,
                  static_cast<int64_t>(i)};
  }
  std::vector<uint8_t> stream;
  AppendStepSamples(samples.data(), 3, &stream);
  AppendStepSamples(samples.data(), samples.size(), &stream);  // cut to the cap
  AppendStepSamples(nullptr, 0, &stream);
  FrameDecoder decoder;
  decoder.Feed(stream.data(), stream.size());
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  std::vector<StepSampleEntry> got;
  const char* why = nullptr;
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kStepSamples));
  EXPECT_EQ(payload.size(), sizeof(StepSamplesHeader) + 3 * sizeof(StepSampleEntry));
  ASSERT_TRUE(DecodeStepSamples(payload.data(), payload.size(), &got, &why));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].start_wall_ns, 200);
  EXPECT_EQ(got[2].end_wall_ns, 240);
  EXPECT_EQ(got[2].step_num, 2);
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_LE(payload.size(), kMaxControlFrameBytes);
  ASSERT_TRUE(DecodeStepSamples(payload.data(), payload.size(), &got, &why));
  EXPECT_EQ(got.size(), kMaxStepSamplesPerFrame);
  EXPECT_EQ(got.back().step_num, static_cast<int64_t>(kMaxStepSamplesPerFrame - 1));
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  ASSERT_TRUE(DecodeStepSamples(payload.data(), payload.size(), &got, &why));
  EXPECT_TRUE(got.empty());
}

// Builds a StepSamples payload by hand: header {count, entry_bytes} and `body_bytes` of entries.
std::vector<uint8_t> StepPayload(uint32_t count, uint32_t entry_bytes, size_t body_bytes) {
  std::vector<uint8_t> p(sizeof(StepSamplesHeader) + body_bytes, 0);
  const StepSamplesHeader h{count, entry_bytes};
  std::memcpy(p.data(), &h, sizeof(h));
  return p;
}

TEST(SocketProtocolTest, StepSamplesThatDoNotAddUpAreRefused) {
  std::vector<StepSampleEntry> got;
  const char* why = nullptr;
  auto decode = [&](const std::vector<uint8_t>& p) {
    why = nullptr;
    return DecodeStepSamples(p.data(), p.size(), &got, &why);
  };
  EXPECT_FALSE(decode(std::vector<uint8_t>(4, 0)));
  EXPECT_STREQ(why, "StepSamples shorter than its header");
  EXPECT_FALSE(
      decode(StepPayload(kMaxStepSamplesPerFrame + 1, 24, (kMaxStepSamplesPerFrame + 1) * 24)));
  EXPECT_STREQ(why, "StepSamples count over its cap");
  EXPECT_FALSE(decode(StepPayload(2, 24, 24)));
  EXPECT_STREQ(why, "StepSamples length does not match its count");
  EXPECT_FALSE(decode(StepPayload(2, 24, 72)));
  EXPECT_STREQ(why, "StepSamples length does not match its count");
  EXPECT_FALSE(decode(StepPayload(1, 16, 16)));
  EXPECT_STREQ(why, "StepSamples entry size not supported");
  EXPECT_FALSE(decode(StepPayload(1, 0xFFFFFFF8u, 0)));
  EXPECT_STREQ(why, "StepSamples entry size not supported");
  // A newer writer's longer entries: the prefix is read.
  std::vector<uint8_t> longer = StepPayload(2, 32, 64);
  const StepSampleEntry second{5, 9, 42};
  std::memcpy(longer.data() + sizeof(StepSamplesHeader) + 32, &second, sizeof(second));
  ASSERT_TRUE(decode(longer));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].step_num, 42);
  EXPECT_EQ(got[1].end_wall_ns, 9);
}

TEST(SocketProtocolTest, CollectiveLaunchesRoundTripWithTheirNames) {
  const CollectiveLaunchEntry entries[] = {{100, 7, 11, 1}, {200, 8, 12, 0}, {300, 9, 11, 1}};
  const std::string_view names[] = {"ncclDevKernel_AllGather_RING_LL",
                                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL"};
  std::vector<uint8_t> stream;
  AppendCollectiveLaunches(entries, 3, names, 2, /*dropped=*/5, &stream);
  RecorderMessage recorder;
  recorder.flags = kRecorderFlagCollectiveLaunches;
  AppendMessage(MessageType::kRecorder, recorder, &stream);
  FrameDecoder decoder;
  decoder.Feed(stream.data(), stream.size());
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kCollectiveLaunches));
  CollectiveLaunchesFrame got;
  const char* why = nullptr;
  ASSERT_TRUE(DecodeCollectiveLaunches(payload.data(), payload.size(), &got, &why)) << why;
  EXPECT_EQ(got.dropped, 5u);
  ASSERT_EQ(got.names.size(), 2u);
  EXPECT_EQ(got.names[1], "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  ASSERT_EQ(got.entries.size(), 3u);
  EXPECT_EQ(got.entries[2].wall_ns, 300);
  EXPECT_EQ(got.entries[2].seq, 9u);
  EXPECT_EQ(got.entries[2].tid, 11u);
  EXPECT_EQ(got.names[got.entries[2].name_index], "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kRecorder));
  RecorderMessage r;
  ASSERT_TRUE(DecodeMessage(payload.data(), payload.size(), &r));
  EXPECT_EQ(r.flags, kRecorderFlagCollectiveLaunches);
  // An empty frame (drops only) is valid too.
  stream.clear();
  AppendCollectiveLaunches(nullptr, 0, nullptr, 0, /*dropped=*/3, &stream);
  ASSERT_TRUE(DecodeCollectiveLaunches(stream.data() + sizeof(FrameHeader),
                                       stream.size() - sizeof(FrameHeader), &got, &why));
  EXPECT_TRUE(got.entries.empty());
  EXPECT_EQ(got.dropped, 3u);
  // Caps: more entries and names than a frame holds are cut, a name to its byte cap.
  std::vector<CollectiveLaunchEntry> many(kMaxCollectiveLaunchesPerFrame + 5);
  const std::string long_name(1'000, 'n');
  std::vector<std::string_view> many_names(kMaxCollectiveLaunchNamesPerFrame + 1, long_name);
  stream.clear();
  AppendCollectiveLaunches(many.data(), many.size(), many_names.data(), many_names.size(), 0,
                           &stream);
  ASSERT_LE(stream.size() - sizeof(FrameHeader), kMaxControlFrameBytes);
  ASSERT_TRUE(DecodeCollectiveLaunches(stream.data() + sizeof(FrameHeader),
                                       stream.size() - sizeof(FrameHeader), &got, &why))
      << why;
  EXPECT_EQ(got.entries.size(), kMaxCollectiveLaunchesPerFrame);
  EXPECT_EQ(got.names.size(), kMaxCollectiveLaunchNamesPerFrame);
  EXPECT_EQ(got.names[0].size(), kMaxCollectiveLaunchNameBytes - 1);
}

// A CollectiveLaunches payload by hand: header, `names` (as given, NULs included), `body_bytes`.
std::vector<uint8_t> LaunchPayload(CollectiveLaunchesHeader h, const std::string& names,
                                   size_t body_bytes) {
  std::vector<uint8_t> p(sizeof(h) + names.size() + body_bytes, 0);
  std::memcpy(p.data(), &h, sizeof(h));
  std::memcpy(p.data() + sizeof(h), names.data(), names.size());
  return p;
}

TEST(SocketProtocolTest, CollectiveLaunchesThatDoNotAddUpAreRefused) {
  CollectiveLaunchesFrame got;
  const char* why = nullptr;
  auto decode = [&](const std::vector<uint8_t>& p) {
    why = nullptr;
    return DecodeCollectiveLaunches(p.data(), p.size(), &got, &why);
  };
  const std::string one("ncclDevKernel_AllReduce\0", 24);
  EXPECT_FALSE(decode(std::vector<uint8_t>(20, 0)));
  EXPECT_STREQ(why, "CollectiveLaunches shorter than its header");
  EXPECT_FALSE(decode(LaunchPayload({kMaxCollectiveLaunchesPerFrame + 1, 24, 1, 24, 0}, one,
                                    (kMaxCollectiveLaunchesPerFrame + 1) * 24)));
  EXPECT_STREQ(why, "CollectiveLaunches count over its cap");
  EXPECT_FALSE(decode(LaunchPayload({0, 24, kMaxCollectiveLaunchNamesPerFrame + 1, 0, 0}, "", 0)));
  EXPECT_STREQ(why, "CollectiveLaunches count over its cap");
  EXPECT_FALSE(decode(LaunchPayload({1, 16, 1, 24, 0}, one, 16)));
  EXPECT_STREQ(why, "CollectiveLaunches entry size not supported");
  EXPECT_FALSE(decode(LaunchPayload({2, 24, 1, 24, 0}, one, 24)));
  EXPECT_STREQ(why, "CollectiveLaunches length does not match its counts");
  EXPECT_FALSE(decode(LaunchPayload({0, 24, 1, 300, 0}, std::string(300, 'x'), 0)));
  EXPECT_STREQ(why, "CollectiveLaunches length does not match its counts");
  // Names: one missing its NUL, two where one is counted, none where one is counted.
  EXPECT_FALSE(decode(LaunchPayload({0, 24, 1, 4, 0}, "nccl", 0)));
  EXPECT_STREQ(why, "CollectiveLaunches names do not match name_count");
  EXPECT_FALSE(decode(LaunchPayload({0, 24, 1, 4, 0}, std::string("a\0b\0", 4), 0)));
  EXPECT_STREQ(why, "CollectiveLaunches names do not match name_count");
  // An entry naming no name of its frame.
  std::vector<uint8_t> bad_index = LaunchPayload({1, 24, 1, 24, 0}, one, 24);
  const CollectiveLaunchEntry e{1, 2, 3, /*name_index=*/1};
  std::memcpy(bad_index.data() + sizeof(CollectiveLaunchesHeader) + 24, &e, sizeof(e));
  EXPECT_FALSE(decode(bad_index));
  EXPECT_STREQ(why, "CollectiveLaunches entry names no name of its frame");
  EXPECT_TRUE(got.entries.empty());
  // A newer writer's longer entries: the prefix is read.
  std::vector<uint8_t> longer = LaunchPayload({1, 32, 1, 24, 0}, one, 32);
  const CollectiveLaunchEntry ok{9, 8, 7, 0};
  std::memcpy(longer.data() + sizeof(CollectiveLaunchesHeader) + 24, &ok, sizeof(ok));
  ASSERT_TRUE(decode(longer)) << why;
  ASSERT_EQ(got.entries.size(), 1u);
  EXPECT_EQ(got.entries[0].seq, 8u);
  EXPECT_EQ(got.names[0], "ncclDevKernel_AllReduce");
}

TEST(SocketProtocolTest, ByteByByteFeedGivesTheSameFrames) {
  std::vector<uint8_t> stream;
  for (uint64_t i = 0; i < 20; ++i)
    AppendMessage(MessageType::kDisable, CommandMessage{i}, &stream);
  FrameDecoder decoder;
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  uint64_t next = 0;
  for (uint8_t byte : stream) {
    decoder.Feed(&byte, 1);
    while (decoder.Next(&type, &payload) == FrameDecoder::Result::kFrame) {
      CommandMessage m;
      ASSERT_TRUE(DecodeMessage(payload.data(), payload.size(), &m));
      EXPECT_EQ(m.token, next++);
    }
  }
  EXPECT_EQ(next, 20u);
}

TEST(SocketProtocolTest, UnknownTypesAreSkippedByLength) {
  std::vector<uint8_t> stream = Frame(static_cast<MessageType>(999), std::vector<uint8_t>(100, 7));
  AppendMessage(MessageType::kFlush, CommandMessage{5}, &stream);
  FrameDecoder decoder;
  decoder.Feed(stream.data(), stream.size());
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_EQ(type, 999);
  EXPECT_EQ(payload.size(), 100u);
  ASSERT_EQ(decoder.Next(&type, &payload), FrameDecoder::Result::kFrame);
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kFlush));
}

TEST(SocketProtocolTest, RefusesBadMagicVersionAndOversizeLengths) {
  const std::vector<uint8_t> good = Frame(MessageType::kBye, {});
  {
    std::vector<uint8_t> bad = good;
    bad[0] ^= 0xFF;
    FrameDecoder d;
    d.Feed(bad.data(), bad.size());
    uint16_t t = 0;
    std::vector<uint8_t> p;
    EXPECT_EQ(d.Next(&t, &p), FrameDecoder::Result::kError);
    EXPECT_STREQ(d.error(), "bad frame magic");
    EXPECT_EQ(d.Next(&t, &p), FrameDecoder::Result::kError);  // stays broken
  }
  {
    std::vector<uint8_t> bad = good;
    bad[4] = 2;  // version 2
    FrameDecoder d;
    d.Feed(bad.data(), bad.size());
    uint16_t t = 0;
    std::vector<uint8_t> p;
    EXPECT_EQ(d.Next(&t, &p), FrameDecoder::Result::kError);
  }
  for (MessageType type : {MessageType::kStatus, MessageType::kRecordBatch}) {
    FrameHeader header;
    header.type = static_cast<uint16_t>(type);
    header.length = MaxPayloadBytes(header.type) + 1;
    FrameDecoder d;
    d.Feed(reinterpret_cast<const uint8_t*>(&header), sizeof(header));
    uint16_t t = 0;
    std::vector<uint8_t> p;
    EXPECT_EQ(d.Next(&t, &p), FrameDecoder::Result::kError);
    EXPECT_STREQ(d.error(), "frame length over its cap");
  }
}

TEST(SocketProtocolTest, ShortPayloadsDoNotDecodeLongerOnesDo) {
  std::vector<uint8_t> payload(sizeof(EnableMessage) - 1, 0);
  EnableMessage m;
  EXPECT_FALSE(DecodeMessage(payload.data(), payload.size(), &m));
  payload.assign(sizeof(EnableMessage) + 40, 0x41);  // a newer, longer message
  EXPECT_TRUE(DecodeMessage(payload.data(), payload.size(), &m));
  // Unterminated text is read up to the array's end, never past it.
  EXPECT_EQ(GetText(m.session_id).size(), sizeof(m.session_id) - 1);
}

TEST(SocketProtocolTest, SetTextCutsAndTerminates) {
  char text[8];
  SetText(text, "0123456789");
  EXPECT_EQ(GetText(text), "0123456");
  SetText(text, "ab");
  EXPECT_EQ(GetText(text), "ab");
}

TEST(SocketProtocolTest, RandomGarbageNeverCrashesAndBuffersStayBounded) {
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    FrameDecoder d;
    std::vector<uint8_t> bytes(1 + rng() % 4096);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    if (round % 2 == 0 && bytes.size() >= sizeof(FrameHeader)) {
      FrameHeader h;  // a valid header with a random type and length
      h.type = static_cast<uint16_t>(rng() % 10);
      h.length = static_cast<uint32_t>(rng() % 8192);
      std::memcpy(bytes.data(), &h, sizeof(h));
    }
    d.Feed(bytes.data(), bytes.size());
    uint16_t t = 0;
    std::vector<uint8_t> p;
    for (int i = 0; i < 100; ++i) {
      const FrameDecoder::Result r = d.Next(&t, &p);
      if (r != FrameDecoder::Result::kFrame) break;
      EXPECT_LE(p.size(), MaxPayloadBytes(t));
    }
    EXPECT_LE(d.buffered(), bytes.size());
  }
}

}  // namespace
}  // namespace profctl::inject
