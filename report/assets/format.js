// Helpers the report's scripts share (breakdown.js, tools.js): numbers with fixed decimals and a
// unit, and names shortened so that they stay distinct. Pure functions of their arguments:
// window.profctl in the page, a module in node (format_test.js).
(function (root) {
  'use strict';
  var api = {};
  var DASH = '\u2013';
  var ELLIPSIS = '\u2026';

  // --- Numbers -------------------------------------------------------------------------------

  // `v` with `decimals` fixed decimals and thousands separated by commas: 1234567.891, 2 ->
  // "1,234,567.89". A dash for anything but a finite number.
  function fixed(v, decimals) {
    if (typeof v !== 'number' || !isFinite(v)) return DASH;
    var text = Math.abs(v).toFixed(decimals);
    var dot = text.indexOf('.');
    var whole = dot < 0 ? text : text.slice(0, dot);
    var grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
    var negative = v < 0 && Number(text) !== 0;
    return (negative ? '-' : '') + grouped + (dot < 0 ? '' : text.slice(dot));
  }
  api.fixed = fixed;

  // Durations: the unit a column of them is shown in, from its largest magnitude (in `from`:
  // 'ns', 'us', 'ms' or 's'): the largest of us, ms, s in which it is at least 1 (us below),
  // except that ms is kept up to 10,000 ms, so that seconds appear only for long totals.
  var TO_US = { ns: 1e-3, us: 1, ms: 1e3, s: 1e6 };
  var DURATION_UNITS = [
    { unit: 'us', label: '\u00b5s', us: 1, decimals: 1 },
    { unit: 'ms', label: 'ms', us: 1e3, decimals: 3 },
    { unit: 's', label: 's', us: 1e6, decimals: 3 }
  ];
  function durationUnit(maxAbs, from) {
    var us = Math.abs(maxAbs) * (TO_US[from] || 1);
    if (!(us >= 1e3)) return DURATION_UNITS[0];
    if (us < 1e7) return DURATION_UNITS[1];
    return DURATION_UNITS[2];
  }
  api.durationUnit = durationUnit;
  // "5,156.073 ms": `v` (in `from`) in `unit` (durationUnit's; else the unit `v` itself needs).
  function duration(v, from, unit) {
    if (typeof v !== 'number' || !isFinite(v)) return DASH;
    var u = unit || durationUnit(v, from);
    return fixed(v * (TO_US[from] || 1) / u.us, u.decimals) + ' ' + u.label;
  }
  api.duration = duration;

  // Bytes in binary units: B below 1 KiB (no decimals), else KiB, MiB, GiB, TiB with 2.
  var BYTE_UNITS = [
    { label: 'B', bytes: 1, decimals: 0 }, { label: 'KiB', bytes: 1024, decimals: 2 },
    { label: 'MiB', bytes: 1048576, decimals: 2 }, { label: 'GiB', bytes: 1073741824, decimals: 2 },
    { label: 'TiB', bytes: 1099511627776, decimals: 2 }
  ];
  function bytesUnit(maxAbs) {
    var a = Math.abs(maxAbs), u = BYTE_UNITS[0];
    BYTE_UNITS.forEach(function (c) { if (a >= c.bytes) u = c; });
    return u;
  }
  api.bytesUnit = bytesUnit;
  function bytes(v, unit) {
    if (typeof v !== 'number' || !isFinite(v)) return DASH;
    var u = unit || bytesUnit(v);
    return fixed(v / u.bytes, u.decimals) + ' ' + u.label;
  }
  api.bytes = bytes;

  function pct(v) { return typeof v === 'number' && isFinite(v) ? fixed(v, 2) + ' %' : DASH; }
  api.pct = pct;
  function count(v) { return typeof v === 'number' && isFinite(v) ? fixed(v, 0) : DASH; }
  api.count = count;

  // What the numbers under a JSON key are, by its name: durations ('us', 'ms', 'ns'), a share
  // ('pct'), memory ('bytes'), a ratio (0..1, 'ratio'), a number that names something (a step,
  // a device, a stream, a rank: 'id'), else a count ('count').
  function kindOfKey(key) {
    key = String(key);
    if (/^(step|device|stream|rank|id)$/.test(key)) return 'id';
    if (/(^|_)pct$/.test(key)) return 'pct';
    if (/(^|_)us$/.test(key)) return 'us';
    if (/(^|_)ms$/.test(key)) return 'ms';
    if (/(^|_)ns$/.test(key)) return 'ns';
    if (/(^|_)bytes$/.test(key)) return 'bytes';
    if (/(^|_)ratio$/.test(key)) return 'ratio';
    return 'count';
  }
  api.kindOfKey = kindOfKey;

  // A formatter for a column of `values` under `key` (kindOfKey): one unit and one number of
  // decimals for the whole column, so its numbers line up and compare at a glance.
  function columnFormat(key, values) {
    var kind = kindOfKey(key);
    var max = 0;
    values.forEach(function (v) { if (typeof v === 'number' && isFinite(v)) max = Math.max(max, Math.abs(v)); });
    if (kind === 'us' || kind === 'ms' || kind === 'ns') {
      var u = durationUnit(max, kind);
      return function (v) { return duration(v, kind, u); };
    }
    if (kind === 'bytes') {
      var b = bytesUnit(max);
      return function (v) { return bytes(v, b); };
    }
    if (kind === 'pct') return pct;
    if (kind === 'ratio') return function (v) { return typeof v === 'number' ? fixed(v, 3) : DASH; };
    if (kind === 'id') return function (v) { return typeof v === 'number' && isFinite(v) ? String(v) : DASH; };
    return count;
  }
  api.columnFormat = columnFormat;

  // --- Names ---------------------------------------------------------------------------------

  // `name` in at most n characters, elided in the middle ("void at::nat\u2026float, 4>)").
  function elide(name, n) {
    name = String(name);
    if (name.length <= n) return name;
    var head = Math.ceil((n - 1) / 2);
    return name.slice(0, head) + ELLIPSIS + name.slice(name.length - (n - 1 - head));
  }
  api.elide = elide;

  // The index of the bracket that closes the one at `open` (its match), or -1.
  function closing(s, open) {
    var depth = 0;
    for (var i = open; i < s.length; i++) {
      var c = s.charAt(i);
      if (c === '<' || c === '(' || c === '[') depth++;
      else if (c === '>' || c === ')' || c === ']') {
        depth--;
        if (depth === 0) return i;
      }
    }
    return -1;
  }

  // A '<' that opens a template argument list: right after a name (not "<<", " < ", "<b>" first).
  function opensTemplate(s, i) {
    return s.charAt(i) === '<' && i > 0 && /[A-Za-z0-9_]/.test(s.charAt(i - 1)) && s.charAt(i + 1) !== '<';
  }
  function firstTemplate(s) {
    for (var i = 0; i < s.length; i++) if (opensTemplate(s, i)) return i;
    return -1;
  }

  // `s` with every template argument list nested `depth` or deeper collapsed to <\u2026>.
  function collapseTemplates(s, depth) {
    var out = '', level = 0;
    for (var i = 0; i < s.length; i++) {
      var c = s.charAt(i);
      if (opensTemplate(s, i)) {
        level++;
        if (level >= depth) {
          var end = closing(s, i);
          if (end < 0) return out + s.slice(i);
          out += '<' + ELLIPSIS + '>';
          level--;
          i = end;
          continue;
        }
      } else if (c === '>' && level > 0) {
        level--;
      }
      out += c;
    }
    return out;
  }

  // The forms of a C++-like name (a kernel's demangled signature, an op), from whole to shortest:
  // without the return type and parameter list, with templates nested twice collapsed, without
  // namespaces inside the templates, and with every template collapsed. Names that are no C++
  // signature have the one form.
  function shortForms(name) {
    name = String(name);
    var forms = [name];
    function add(f) { if (f && f !== forms[forms.length - 1]) forms.push(f); }
    var s = name.replace(/^(?:void|auto|static|__global__)\s+/, '');
    // The parameter list: the trailing (...) that balances.
    if (s.charAt(s.length - 1) === ')') {
      var depth = 0;
      for (var i = s.length - 1; i > 0; i--) {
        var c = s.charAt(i);
        if (c === ')') depth++;
        else if (c === '(') {
          depth--;
          if (depth === 0) { if (s.charAt(i - 1) !== ' ' && i > 0) s = s.slice(0, i); break; }
        }
      }
    }
    add(s);
    if (firstTemplate(s) < 0) return forms;
    add(collapseTemplates(s, 3));
    var t = collapseTemplates(s, 2);
    add(t);
    // Namespaces inside the templates (a::b::Foo -> Foo), and all but the last two outside.
    var open = firstTemplate(t);
    var outer = t.slice(0, open).split('::');
    var inner = t.slice(open).replace(/(?:[A-Za-z_][A-Za-z0-9_]*|\(anonymous namespace\))::/g, '');
    add(outer.slice(-2).join('::') + inner);
    add(outer.slice(-1)[0] + '<' + ELLIPSIS + '>');
    return forms;
  }
  api.shortForms = shortForms;

  // `s` in at most `room` characters, keeping [from, to) (where the names of a group differ)
  // visible: the start, an ellipsis, the differing part, an ellipsis, the end.
  function elideAround(s, from, to, room) {
    if (s.length <= room) return s;
    if (to - from >= room - 10) to = from + Math.max(1, room - 10);
    var keep = to - from, rest = room - keep - 2;
    var head = Math.min(from, Math.max(0, Math.ceil(rest / 2)));
    var tail = Math.max(0, rest - head);
    var mid = s.slice(from, to);
    var start = from <= head ? s.slice(0, from) : s.slice(0, head) + ELLIPSIS;
    var endAt = s.length - tail;
    var end = to >= endAt ? s.slice(to) : ELLIPSIS + s.slice(Math.max(to, endAt));
    return start + mid + end;
  }

  // What each of `names` shows in at most `room` characters: the longest of its forms
  // (shortForms) that fits, else its shortest form elided in the middle; and where two names
  // would show the same text, each of them less shortened, or elided around where they differ,
  // so that distinct names never look the same.
  function distinctNames(names, room) {
    var forms = names.map(function (n) { return shortForms(n); });
    var level = forms.map(function (f) {
      for (var k = 0; k < f.length; k++) if (f[k].length <= room) return k;
      return f.length - 1;
    });
    function shown(i) { return elide(forms[i][level[i]], room); }
    var text = names.map(function (n, i) { return shown(i); });
    for (var round = 0; round < 8; round++) {
      var groups = {};
      text.forEach(function (t, i) { (groups[t] = groups[t] || []).push(i); });
      var clash = false;
      Object.keys(groups).forEach(function (t) {
        var g = groups[t];
        var full = {};
        g.forEach(function (i) { full[names[i]] = true; });
        if (g.length < 2 || Object.keys(full).length < 2) return;
        clash = true;
        g.forEach(function (i) { if (level[i] > 0) level[i]--; });
        g.forEach(function (i) { text[i] = shown(i); });
        var same = g.every(function (i) { return text[i] === text[g[0]]; });
        if (!same) return;
        // Still alike: show each where the group's forms differ.
        var fs = g.map(function (i) { return forms[i][level[i]]; });
        var pre = 0, suf = 0;
        var shortest = Math.min.apply(null, fs.map(function (f) { return f.length; }));
        while (pre < shortest && fs.every(function (f) { return f.charAt(pre) === fs[0].charAt(pre); })) pre++;
        while (suf < shortest - pre && fs.every(function (f) {
          return f.charAt(f.length - 1 - suf) === fs[0].charAt(fs[0].length - 1 - suf);
        })) suf++;
        g.forEach(function (i, k) { text[i] = elideAround(fs[k], pre, fs[k].length - suf, room); });
      });
      if (!clash) break;
    }
    // Texts that still clash (rarely): numbered by name, the first name's bare. Equal names keep
    // equal texts (a table tells their rows apart by another column).
    var numbers = {};
    return text.map(function (t, i) {
      var byName = numbers[t] = numbers[t] || {};
      if (!(names[i] in byName)) byName[names[i]] = Object.keys(byName).length + 1;
      var k = byName[names[i]];
      return k === 1 ? t : t + ' (' + k + ')';
    });
  }
  api.distinctNames = distinctNames;

  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.profctl = api;
})(this);
