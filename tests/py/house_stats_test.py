#!/usr/bin/env python3
"""scripts/house_stats.py's function finder: sizes by brace matching, not fooled by the braces
of control statements, lambdas, initializers, strings, comments, raw strings or digit
separators."""

import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import house_stats  # noqa: E402

CODE = r'''namespace profctl {
namespace {
struct Range { int a, b; };  // {
}  // namespace

int Small(int x) { return x; }

absl::Status Big(const Options& o,
                 int y) {
  for (const Range& r : {Range{1, 86'400'000}, Range{2, 3}}) {
    if (r.a > y) { return Err("}"); }
  }
  auto f = [&](int z) {
    return z + '{';
  };
  const char* raw = R"js(function () { if (x) {)js";
  /* } */
  return f(1);
}

class Widget {
 public:
  void Inline() const {
    Call();
  }
};
}  // namespace profctl
'''


class FunctionsTest(unittest.TestCase):

    def test_each_body_is_measured_from_its_signature_to_its_closing_brace(self):
        found = {where.split(" ", 1)[1]: n for n, where in house_stats.functions("x.cc", CODE)}
        self.assertEqual(found, {"Small": 1, "Big": 12, "Inline": 3})


if __name__ == "__main__":
    unittest.main()
