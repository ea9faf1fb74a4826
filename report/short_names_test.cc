#include "report/short_names.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace profctl::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Three elementwise kernels of the H100 fixture that differ only in their functor.
const std::vector<std::string> kKernels = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1ul> >(int, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1ul>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3ul>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, "
    "float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3ul> >(int, "
    "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> "
    ">, at::detail::Array<char*, 3ul>)",
    "ampere_sgemm_128x64_tn",
};

TEST(ShortNamesTest, FormsDropTheSignatureThenTheMiddleOfTemplates) {
  EXPECT_THAT(ShortForms("void ns::k<a::B<int>, 2>(int, float)"),
              ElementsAre("void ns::k<a::B<int>, 2>(int, float)", "ns::k<a::B<int>, 2>",
                          "ns::k<a::B<...>, 2>", "ns::k<B<...>, 2>", "k<...>"));
  EXPECT_THAT(ShortForms("aten::add"), ElementsAre("aten::add"));
  EXPECT_THAT(ShortForms("<script>alert(1)</script>"), ElementsAre("<script>alert(1)</script>"));
  EXPECT_THAT(ShortForms("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"),
              ElementsAre("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"));
}

TEST(ShortNamesTest, TemplateKernelsStayDistinctAtEveryWidth) {
  for (const size_t room : {12, 20, 30, 40, 60, 90, 400}) {
    const std::vector<std::string> shown = DistinctShortNames(kKernels, room);
    ASSERT_EQ(shown.size(), kKernels.size());
    EXPECT_EQ(std::set<std::string>(shown.begin(), shown.end()).size(), shown.size())
        << "room " << room << ": " << shown[0] << " | " << shown[1] << " | " << shown[2];
    for (const std::string& s : shown) EXPECT_LE(s.size(), room + 4) << s;
    if (room >= 22) {
      EXPECT_EQ(shown[3], "ampere_sgemm_128x64_tn");
    }
  }
  // At the diff page's width the functor that tells them apart is kept whole.
  const std::vector<std::string> at72 = DistinctShortNames(kKernels, 72);
  EXPECT_THAT(at72[0], HasSubstr("FillFunctor"));
  EXPECT_THAT(at72[1], HasSubstr("CUDAFunctor_add"));
}

TEST(ShortNamesTest, NamesThatDifferOnlyInTheMiddleShowTheDifference) {
  const std::string a = "prefix_" + std::string(50, 'x') + "_A_" + std::string(50, 'y');
  const std::string b = "prefix_" + std::string(50, 'x') + "_B_" + std::string(50, 'y');
  const std::vector<std::string> shown = DistinctShortNames({a, b}, 30);
  EXPECT_NE(shown[0], shown[1]);
  EXPECT_THAT(shown[0], HasSubstr("A"));
  EXPECT_THAT(shown[1], HasSubstr("B"));
}

TEST(ShortNamesTest, EqualNamesShowEqualTextsAndShortNamesStayWhole) {
  EXPECT_THAT(DistinctShortNames({"aten::add", "aten::add", "aten::mm"}, 40),
              ElementsAre("aten::add", "aten::add", "aten::mm"));
  EXPECT_EQ(ElideMiddle("abcdefghij", 10), "abcdefghij");
  EXPECT_EQ(ElideMiddle("abcdefghijk", 8), "abc...jk");
}

}  // namespace
}  // namespace profctl::report
