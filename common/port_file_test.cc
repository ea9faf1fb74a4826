#include "common/port_file.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace profctl {
namespace {

using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PortFileTest, ListsTheGrpcPortsThenTheMetricsPort) {
  EXPECT_EQ(PortFileText({.ports = {6000}}), "6000\n");
  EXPECT_EQ(PortFileText({.ports = {6000, 6001}}), "6000\n6001\n");
  EXPECT_EQ(PortFileText({.ports = {41234}, .metrics_port = 9100}), "41234\nmetrics=9100\n");
}

TEST(PortFileTest, ReadsWhatItWritesAndSkipsServersItDoesNotKnow) {
  absl::StatusOr<PortFile> file = ParsePortFile("41234\n41235\nmetrics=9100\n");
  ASSERT_THAT(file, IsOk());
  EXPECT_THAT(file->ports, ElementsAre(41234, 41235));
  EXPECT_EQ(file->metrics_port, 9100);
  file = ParsePortFile("6000\nprofiler=7000\n");  // a server a later version may add
  ASSERT_THAT(file, IsOk());
  EXPECT_THAT(file->ports, ElementsAre(6000));
  EXPECT_EQ(file->metrics_port, -1);
}

TEST(PortFileTest, ABadLineIsNamedAndAnEmptyFileIsNotWrittenYet) {
  EXPECT_THAT(ParsePortFile("six\n"), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ParsePortFile("six\n").status().message(), HasSubstr("'six' is not a port"));
  EXPECT_THAT(ParsePortFile("6000\nmetrics=70000\n").status().message(),
              HasSubstr("'metrics=70000' is not a port"));
  EXPECT_THAT(ParsePortFile(""), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(ParsePortFile("metrics=9100\n"), StatusIs(absl::StatusCode::kNotFound));
}

TEST(PortFileTest, AServePortFileIsReadInTheOneFormatAndInItsOlderOne) {
  absl::StatusOr<PortFile> now = ParseServePortFile("7000\nmetrics=9100\n");
  ASSERT_THAT(now, IsOk());
  EXPECT_THAT(now->ports, ElementsAre(7000));
  EXPECT_EQ(now->metrics_port, 9100);
  absl::StatusOr<PortFile> older = ParseServePortFile("7000\n9100\n");  // before metrics=
  ASSERT_THAT(older, IsOk());
  EXPECT_THAT(older->ports, ElementsAre(7000));
  EXPECT_EQ(older->metrics_port, 9100);
  absl::StatusOr<PortFile> no_metrics = ParseServePortFile("7000\n");
  ASSERT_THAT(no_metrics, IsOk());
  EXPECT_EQ(no_metrics->metrics_port, -1);
  EXPECT_THAT(ParseServePortFile("7000\n7001\n7002\n").status().message(),
              HasSubstr("3 service ports"));
}

}  // namespace
}  // namespace profctl
