// Tests of the report's scripts, run by node (ctest report_assets_test; skipped without node):
//   node report/assets/format_test.js
// Every script of report/assets/ compiles (strict mode), and format.js (the number and name
// formatting the pages share) formats as documented.
'use strict';
var assert = require('assert');
var fs = require('fs');
var path = require('path');
var vm = require('vm');
var f = require('./format.js');

var tests = {
  everyScriptCompiles: function () {
    fs.readdirSync(__dirname).filter(function (n) { return /\.js$/.test(n); }).forEach(function (n) {
      var file = path.join(__dirname, n);
      new vm.Script(fs.readFileSync(file, 'utf8'), { filename: file });  // throws on a syntax error
    });
  },
  fixedDecimalsAndThousands: function () {
    assert.strictEqual(f.fixed(1234567.891, 2), '1,234,567.89');
    assert.strictEqual(f.fixed(2, 2), '2.00');
    assert.strictEqual(f.fixed(0.008, 2), '0.01');
    assert.strictEqual(f.fixed(-0.0001, 2), '0.00');
    assert.strictEqual(f.fixed(-1500, 0), '-1,500');
    assert.strictEqual(f.fixed(NaN, 2), '\u2013');
    assert.strictEqual(f.fixed(null, 2), '\u2013');
  },
  durationsPickMsOrSecondsNotRawMicroseconds: function () {
    assert.strictEqual(f.duration(5156073.08, 'us'), '5,156.073 ms');
    assert.strictEqual(f.duration(12e6, 'us'), '12.000 s');
    assert.strictEqual(f.duration(3.24, 'us'), '3.2 \u00b5s');
    assert.strictEqual(f.duration(2739.43308, 'ms'), '2,739.433 ms');
    // One unit for a column, chosen by its largest value.
    var col = f.columnFormat('total_us', [5156073.08, 3.2]);
    assert.strictEqual(col(3.2), '0.003 ms');
    assert.strictEqual(col(5156073.08), '5,156.073 ms');
  },
  bytesInBinaryUnits: function () {
    assert.strictEqual(f.bytes(512), '512 B');
    assert.strictEqual(f.bytes(123456789), '117.74 MiB');
    assert.strictEqual(f.bytes(3 * 1073741824), '3.00 GiB');
    var col = f.columnFormat('requested_bytes', [1048576, 2048]);
    assert.strictEqual(col(2048), '0.00 MiB');
  },
  keysSayTheKind: function () {
    assert.strictEqual(f.kindOfKey('device_self_cum_pct'), 'pct');
    assert.strictEqual(f.kindOfKey('pct'), 'pct');
    assert.strictEqual(f.kindOfKey('total_us'), 'us');
    assert.strictEqual(f.kindOfKey('self_ms'), 'ms');
    assert.strictEqual(f.kindOfKey('ms'), 'ms');
    assert.strictEqual(f.columnFormat('ms', [0, 0])(0), '0.0 \u00b5s');
    assert.strictEqual(f.kindOfKey('bytes'), 'bytes');
    assert.strictEqual(f.kindOfKey('occurrences'), 'count');
    assert.strictEqual(f.kindOfKey('step'), 'id');
    assert.strictEqual(f.columnFormat('step', [12000])(12000), '12000');
    assert.strictEqual(f.columnFormat('occurrences', [12000])(12000), '12,000');
    assert.strictEqual(f.columnFormat('pct', [2])(2), '2.00 %');
  },
  templateKernelNamesStayDistinct: function () {
    var names = [
      'void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1ul> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1ul>)',
      'void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3ul>)',
      'void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3ul> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3ul>)',
      'ampere_sgemm_128x64_tn'];
    [24, 30, 40, 60, 90, 400].forEach(function (room) {
      var shown = f.distinctNames(names, room);
      var seen = {};
      shown.forEach(function (s, i) {
        assert.ok(!(s in seen), room + ': "' + s + '" twice');
        seen[s] = true;
        assert.ok(s.length <= room + 4, room + ': "' + s + '" longer than its room');
      });
      assert.strictEqual(shown[3], 'ampere_sgemm_128x64_tn');
    });
    // The middle of the templates goes first: the functor that tells them apart stays.
    var at60 = f.distinctNames(names, 60);
    assert.ok(at60[0].indexOf('FillFunctor') >= 0, at60[0]);
    assert.ok(at60[1].indexOf('Functor_add') >= 0, at60[1]);
  },
  namesThatDifferOnlyInTheMiddleStayDistinct: function () {
    var a = 'prefix_' + 'x'.repeat(50) + '_A_' + 'y'.repeat(50);
    var b = 'prefix_' + 'x'.repeat(50) + '_B_' + 'y'.repeat(50);
    var shown = f.distinctNames([a, b], 30);
    assert.notStrictEqual(shown[0], shown[1]);
    assert.ok(shown[0].indexOf('A') >= 0 && shown[1].indexOf('B') >= 0, shown.join(' | '));
  },
  equalNamesKeepEqualText: function () {
    assert.deepStrictEqual(f.distinctNames(['aten::add', 'aten::add', 'aten::mm'], 40),
                           ['aten::add', 'aten::add', 'aten::mm']);
  },
  shortFormsDropParametersThenTemplates: function () {
    var forms = f.shortForms('void ns::k<a::B<int>, 2>(int, float)');
    assert.deepStrictEqual(forms, ['void ns::k<a::B<int>, 2>(int, float)', 'ns::k<a::B<int>, 2>',
      'ns::k<a::B<\u2026>, 2>', 'ns::k<B<\u2026>, 2>', 'k<\u2026>']);
    assert.deepStrictEqual(f.shortForms('aten::add'), ['aten::add']);
    assert.deepStrictEqual(f.shortForms('<script>alert(1)</script>'), ['<script>alert(1)</script>']);
    assert.deepStrictEqual(f.shortForms('enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__'),
      ['enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__']);
  }
};

var failed = 0;
Object.keys(tests).forEach(function (name) {
  try {
    tests[name]();
    console.log('ok   ' + name);
  } catch (e) {
    failed++;
    console.log('FAIL ' + name + ': ' + e.message);
  }
});
console.log((Object.keys(tests).length - failed) + ' passed, ' + failed + ' failed');
process.exit(failed ? 1 : 0);
