#include "coordinator/cli/capture_flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<CapturePlan> Plan(const std::vector<std::string>& args) {
  CaptureFlags flags;
  FlagSet fs("profctl capture");
  AddCaptureFlags(&fs, &flags);
  if (absl::Status s = fs.Parse(args); !s.ok()) return s;
  return PlanFromCaptureFlags(flags, fs);
}

TEST(ParseWindowMsTest, TakesMillisecondsOrADurationWithAUnit) {
  EXPECT_EQ(*ParseWindowMs("2000"), 2000);
  EXPECT_EQ(*ParseWindowMs("2s"), 2000);
  EXPECT_EQ(*ParseWindowMs("500ms"), 500);
  EXPECT_EQ(*ParseWindowMs("1m30s"), 90'000);
  EXPECT_EQ(*ParseWindowMs("0"), 0);  // the range is the plan's to judge
}

TEST(ParseWindowMsTest, RefusesWhatIsNoWholeMillisecondWindow) {
  for (const char* bad : {"", "2x", "-5", "-1s", "1.5ms", "1500us1ns", "s", "2 s", "1e3"}) {
    EXPECT_THAT(ParseWindowMs(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_THAT(ParseWindowMs("2x").status().message(),
              HasSubstr("give whole milliseconds (2000) or a duration with a unit"));
}

TEST(CaptureFlagsTest, ADurationWithAUnitIsTheSamePlanAsItsMilliseconds) {
  absl::StatusOr<CapturePlan> with_unit = Plan({"--workers=h:1", "--duration=2s"});
  absl::StatusOr<CapturePlan> in_ms = Plan({"--workers=h:1", "--duration=2000"});
  ASSERT_THAT(with_unit, IsOk());
  ASSERT_THAT(in_ms, IsOk());
  EXPECT_EQ(with_unit->duration_ms, 2000);
  EXPECT_EQ(in_ms->duration_ms, 2000);
  EXPECT_EQ(Plan({"--workers=h:1"})->duration_ms, 2000);  // the default
}

TEST(CaptureFlagsTest, ALastAndAnEqualDurationAgreeAnUnequalOneIsRefused) {
  absl::StatusOr<CapturePlan> snap = Plan({"--workers=h:1", "--last=3s", "--duration=3000"});
  ASSERT_THAT(snap, IsOk());
  EXPECT_EQ(snap->past_ms, 3000);
  EXPECT_EQ(snap->duration_ms, 3000);
  EXPECT_THAT(Plan({"--workers=h:1", "--last=3s", "--duration=2s"}).status().message(),
              HasSubstr("give --last or --duration, not both"));
}

TEST(CaptureFlagsTest, EveryRowIsAFlagOfCaptureWithItsHelp) {
  CaptureFlags flags;
  FlagSet fs("profctl capture");
  AddCaptureFlags(&fs, &flags);
  const std::string help = fs.Help();
  for (const CaptureFlag& f : CaptureFlagTable()) {
    EXPECT_THAT(help, HasSubstr(std::string("--") + f.name)) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ((f.string_field != nullptr) + (f.int_field != nullptr) + (f.bool_field != nullptr), 1)
        << f.name;
  }
  EXPECT_THAT(help, HasSubstr("--tls-ca"));  // the credentials come along
}

TEST(CaptureFlagsTest, EachRowsValueLandsInThePlan) {
  absl::StatusOr<CapturePlan> plan =
      Plan({"--workers=h:1,h:2", "--duration=300ms", "--session=s", "--logdir=/tmp/l",
            "--prepare-timeout=700", "--late=fail", "--step-pattern=iter(\\d+)", "--align=ntp",
            "--tolerance=9", "--retries=4", "--deadline=90000", "--min-hosts=2",
            "--host-tracer-level=1", "--device-tracer-level=0", "--python-tracer-level=1"});
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->workers.size(), 2u);
  EXPECT_EQ(plan->duration_ms, 300);
  EXPECT_EQ(plan->session, "s");
  EXPECT_EQ(plan->logdir, "/tmp/l");
  EXPECT_EQ(plan->prepare_timeout_ms, 700);
  EXPECT_EQ(plan->late, profctl::v1::LATE_POLICY_FAIL);
  EXPECT_EQ(plan->reader.step_pattern, "iter(\\d+)");
  EXPECT_EQ(plan->align, profctl::v1::ALIGN_MODE_NTP);
  EXPECT_EQ(plan->tolerance_ms, 9);
  EXPECT_EQ(plan->retries, 4);
  EXPECT_EQ(plan->deadline_ms, 90000);
  EXPECT_EQ(plan->min_hosts, 2u);
  EXPECT_EQ(plan->host_tracer_level, 1);
  EXPECT_EQ(plan->device_tracer_level, 0);
  EXPECT_EQ(plan->python_tracer_level, 1);
  EXPECT_EQ(Plan({"--workers=h:1,h:2,h:3", "--require-all"})->min_hosts, 3u);
}

// A pod too large for a command line names its workers in a file.
TEST(WorkersFromFlagTest, AtFileReadsTheWorkersFromTheFile) {
  testkit::TempDir dir;
  const std::string path = dir.path() + "/pod.txt";
  std::ofstream(path) << "# two racks\nh1:6000\nh2:6000, h3:6000\n";
  absl::StatusOr<CapturePlan> plan = Plan({"--workers=@" + path, "--require-all"});
  ASSERT_THAT(plan, IsOk());
  ASSERT_EQ(plan->workers.size(), 3u);
  EXPECT_EQ(plan->workers[2].address, "h3:6000");
  EXPECT_EQ(plan->min_hosts, 3u);
  // Its errors name the file and the line.
  std::ofstream(path) << "h1:6000\nh1:6000\n";
  EXPECT_THAT(Plan({"--workers=@" + path}).status().message(),
              HasSubstr(path + ":2: worker 'h1:6000' is listed twice (first on line 1)"));
}

TEST(WorkersFromFlagTest, AFileThatCannotBeReadIsAnErrorNamingIt) {
  testkit::TempDir dir;
  const std::string missing = dir.path() + "/none.txt";
  EXPECT_THAT(WorkersFromFlag("@" + missing),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("--workers=@" + missing)));
  EXPECT_THAT(WorkersFromFlag("@" + dir.path()).status().message(),
              HasSubstr("not a regular file"));
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(WorkersFromFlag("@" + fifo).status().message(),
              HasSubstr("a FIFO, not a regular file"));  // refused without blocking on it
  // Past the cap: refused by its size, before reading (a sparse file costs nothing here).
  const std::string big = dir.path() + "/big.txt";
  std::ofstream(big) << "h:1\n";
  ASSERT_EQ(truncate(big.c_str(), static_cast<off_t>(kMaxWorkerFileBytes + 1)), 0);
  EXPECT_THAT(WorkersFromFlag("@" + big),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("a worker file may hold")));
  EXPECT_THAT(WorkersFromFlag("@").status().message(), HasSubstr("--workers=@ names no file"));
  std::ofstream(dir.path() + "/empty.txt") << "# filled in later\n";
  EXPECT_THAT(WorkersFromFlag("@" + dir.path() + "/empty.txt").status().message(),
              HasSubstr("empty.txt: no workers"));
  // Without '@' the value is the list itself; a file named without it gets a hint.
  EXPECT_EQ(WorkersFromFlag("a:1,b:2")->size(), 2u);
  const std::string pod = dir.path() + "/pod.txt";
  std::ofstream(pod) << "a:1\n";
  EXPECT_THAT(WorkersFromFlag(pod).status().message(),
              HasSubstr("(a file of workers? write --workers=@" + pod + ")"));
  EXPECT_THAT(WorkersFromFlag("nosuchfile").status().message(),
              Not(HasSubstr("a file of workers")));
}

}  // namespace
}  // namespace profctl::coordinator
