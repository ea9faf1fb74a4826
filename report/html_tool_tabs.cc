#include "report/html_tool_tabs.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "report/html_escape.h"

namespace profctl::report {
namespace {

// The tools' tabs (docs/tools.md): one tab per embedded tool document (ToolJson), drawn from it
// with the same plain-DOM rules; tables sort by a click on a column header. Runs before the
// breakdown's script, so a failure here is reported in #errors and the breakdown still draws.
constexpr char kToolsScript[] = R"html(<style>
#tabs { display: flex; gap: 4px; margin: 14px 0 0; border-bottom: 1px solid var(--line); }
#tabs button { border: 1px solid var(--line); border-bottom: none; background: var(--bg-alt);
  padding: 6px 12px; border-radius: 6px 6px 0 0; cursor: pointer; font: inherit; }
#tabs button.active { background: #fff; font-weight: 600; }
th.sortable { cursor: pointer; }
.rec { margin: 6px 0; } .rec .why { color: var(--muted); margin-left: 1.5em; }
.chart-row { display: flex; flex-wrap: wrap; gap: 12px; }
.chart-row > .chart { flex: 1 1 540px; min-width: 0; }
.pie-row { align-items: flex-start; }
/* At most its row: a narrow row (two tools side by side, a small window) shrinks the donut
   (viewBox) instead of pushing the chart out of its box. */
.pie-row > .chart.pie { flex: 0 1 432px; max-width: 100%; min-width: 0; box-sizing: border-box; }
svg.pie-chart { max-width: 100%; height: auto; }
.pie-row > .pie-table { flex: 1 1 400px; min-width: 0; }
svg.pie-chart text { font-size: 12px; }
svg.bar-chart text.value { fill: var(--muted); }
</style>
<script>
(function () {
  'use strict';
  var nodes = Array.prototype.slice.call(document.querySelectorAll('script.tool-data'));
  if (nodes.length === 0) return;
  var SVG = 'http://www.w3.org/2000/svg';
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    return e;
  }
  // `name` in at most n characters, elided in the middle; the cell's title has it whole.
  function elide(name, n) {
    if (name.length <= n) return name;
    var head = Math.ceil((n - 1) / 2);
    return name.slice(0, head) + '\u2026' + name.slice(name.length - (n - 1 - head));
  }
  function show(v) {
    if (v === null || v === undefined) return '\u2013';
    if (Array.isArray(v)) return v.join('x');
    if (typeof v === 'number') return String(v);
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    return String(v);
  }
  // A sortable table of `rows` (objects) with `cols` [[key, title], ...].
  function table(cols, rows, id) {
    // No header over nothing: an empty table says so in words.
    if (rows.length === 0) {
      return el('p', id ? { 'class': 'note empty', id: id } : { 'class': 'note empty' },
        'None in this trace (' + cols.map(function (c) { return c[1]; }).slice(0, 2).join(', ') + ').');
    }
    var t = el('table', id ? { id: id } : null);
    var head = el('tr');
    var body = el('tbody');
    var order = { key: null, dir: 1 };
    // Names get the room the numbers leave: fit() elides them further until the table fits its
    // box (run when the tab shows: a hidden table has no width).
    var room = 60;
    function fill() {
      while (body.firstChild) body.removeChild(body.firstChild);
      rows.forEach(function (r) {
        var tr = el('tr');
        cols.forEach(function (c) {
          var v = r[c[0]];
          var text = show(v);
          if (typeof v === 'number') {
            tr.appendChild(el('td', { 'class': 'num' }, text));
          } else if (text.length > room) {
            tr.appendChild(el('td', { 'class': 'name', title: text }, elide(text, room)));
          } else {
            tr.appendChild(el('td', null, text));
          }
        });
        body.appendChild(tr);
      });
    }
    cols.forEach(function (c) {
      var th = el('th', { 'class': 'sortable', 'data-key': c[0] }, c[1]);
      th.addEventListener('click', function () {
        order.dir = order.key === c[0] ? -order.dir : (typeof (rows[0] || {})[c[0]] === 'number' ? -1 : 1);
        order.key = c[0];
        rows = rows.slice().sort(function (a, b) {
          var x = a[c[0]], y = b[c[0]];
          if (x === y) return 0;
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          return (x < y ? -1 : 1) * order.dir;
        });
        fill();
      });
      head.appendChild(th);
    });
    var thead = el('thead');
    thead.appendChild(head);
    t.appendChild(thead);
    t.appendChild(body);
    fill();
    var wrap = el('div', { 'class': 'table-wrap' });
    wrap.appendChild(t);
    wrap.fit = function () {
      while (wrap.clientWidth > 0 && wrap.scrollWidth > wrap.clientWidth + 1 && room > 12) {
        room -= 4;
        fill();
      }
    };
    return wrap;
  }
  var CAT_COLORS = ['#9c755f', '#b07aa1', '#f28e2b', '#76b7b2', '#59a14f', '#edc948', '#e15759',
    '#4e79a7', '#c9c3bf'];
  // Step time stacked by category over steps, at most MAX_BARS bars in at most 1000 px: beyond
  // that each bar is the mean of a run of consecutive steps (its title says which).
  var MAX_BARS = 240;
  function stacked(cats, steps) {
    var per = Math.max(1, Math.ceil(steps.length / MAX_BARS));
    var bars = [];
    for (var at = 0; at < steps.length; at += per) {
      var run = steps.slice(at, at + per), ms = {}, total = 0;
      cats.forEach(function (c) {
        var sum = 0;
        run.forEach(function (s) { sum += s.ms[c] || 0; });
        ms[c] = sum / run.length;
      });
      var n = 0;
      run.forEach(function (s) { total += s.step_time_ms; n += s.steps || 1; });
      var end = run[run.length - 1];
      bars.push({ first: run[0].step, last: end.last_step === undefined ? end.step : end.last_step,
        n: n, ms: ms, step_time_ms: total / run.length });
    }
    var left = 56, top = 10, plotH = 180, H = plotH + 40;
    var slot = Math.max(2, Math.min(26, Math.floor((1000 - left - 10) / Math.max(1, bars.length))));
    var W = left + slot * bars.length + 10;
    var max = 0;
    bars.forEach(function (b) { max = Math.max(max, b.step_time_ms); });
    var box = el('div', { 'class': 'chart' });
    var legend = el('div', { 'class': 'legend' });
    cats.forEach(function (c, k) {
      var item = el('span');
      item.appendChild(el('span', { 'class': 'sw', style: 'background:' + CAT_COLORS[k % 9] }));
      item.appendChild(document.createTextNode(c));
      legend.appendChild(item);
    });
    var runLength = bars.length > 0 ? bars[0].n : 1;
    if (runLength > 1) legend.appendChild(el('span', null, 'each bar: the mean of ' + runLength + ' steps'));
    box.appendChild(legend);
    var g = svg('svg', { width: W, height: H, 'class': 'step-stack-chart' });
    function text(x, y, anchor, t) {
      var e = svg('text', { x: x, y: y, 'text-anchor': anchor });
      e.textContent = t;
      g.appendChild(e);
    }
    text(left - 6, top + 4, 'end', max.toFixed(max >= 10 ? 1 : 3) + ' ms');
    text(left - 6, top + plotH, 'end', '0');
    g.appendChild(svg('line', { x1: left, x2: W - 10, y1: top + plotH, y2: top + plotH, stroke: '#dadce0' }));
    bars.forEach(function (s, i) {
      var y = top + plotH;
      cats.forEach(function (c, k) {
        var v = s.ms[c] || 0;
        if (!(v > 0) || !(max > 0)) return;
        var h = plotH * v / max;
        y -= h;
        var r = svg('rect', { x: left + slot * i, y: y, width: Math.max(1, slot * 0.8), height: h,
          fill: CAT_COLORS[k % 9], 'class': 'tool-seg' });
        var title = svg('title');
        title.textContent = (s.n === 1 ? 'step ' + s.first : 'steps ' + s.first + '\u2013' + s.last +
          ' (mean of ' + s.n + ')') + '\n' + c + ': ' + v.toFixed(3) + ' ms';
        r.appendChild(title);
        g.appendChild(r);
      });
    });
    if (bars.length > 0) {
      text(left, top + plotH + 16, 'start', 'step ' + bars[0].first);
      if (bars.length > 1) text(W - 10, top + plotH + 16, 'end', 'step ' + bars[bars.length - 1].last);
    }
    box.appendChild(g);
    return box;
  }
  // The top `count` rows by `key` as horizontal bars, the name elided in the middle (whole in
  // the bar's title), the value and its share of the total at the bar's end.
  // `narrow`: for two charts side by side (520 px instead of 720).
  function barChart(rows, nameKey, key, unit, narrow) {
    var top = rows.filter(function (r) { return typeof r[key] === 'number' && r[key] > 0; })
      .sort(function (a, b) { return b[key] - a[key]; }).slice(0, 10);
    var total = 0;
    rows.forEach(function (r) { if (typeof r[key] === 'number' && r[key] > 0) total += r[key]; });
    var box = el('div', { 'class': 'chart' });
    if (top.length === 0) { box.appendChild(el('p', { 'class': 'note' }, 'Nothing to chart.')); return box; }
    var labelW = narrow ? 200 : 290, barW = narrow ? 170 : 240, rowH = 20;
    var W = labelW + barW + (narrow ? 150 : 190), chars = narrow ? 26 : 38;
    var g = svg('svg', { width: W, height: rowH * top.length + 8, 'class': 'bar-chart' });
    var max = top[0][key];
    top.forEach(function (r, i) {
      var name = show(r[nameKey]), y = 4 + i * rowH;
      var label = svg('text', { x: labelW - 6, y: y + 14, 'text-anchor': 'end' });
      label.textContent = elide(name, chars);
      var lt = svg('title');
      lt.textContent = name;
      label.appendChild(lt);
      g.appendChild(label);
      var w = Math.max(1, barW * r[key] / max);
      var bar = svg('rect', { x: labelW, y: y + 3, width: w, height: rowH - 6, fill: '#4e79a7',
        'class': 'bar' });
      var bt = svg('title');
      bt.textContent = name + ': ' + r[key] + ' ' + unit;
      bar.appendChild(bt);
      g.appendChild(bar);
      var v = svg('text', { x: labelW + w + 6, y: y + 14, 'class': 'value' });
      v.textContent = r[key] + ' ' + unit + (total > 0 ? ' (' + (100 * r[key] / total).toFixed(1) + ' %)' : '');
      g.appendChild(v);
    });
    box.appendChild(g);
    return box;
  }
  // A donut of `slices` ({name, self_us, pct}: op_stats' top 10 and "other") with a legend of
  // the same colours, named by its <title> (role img) for screen readers; each slice's title has
  // its name, time and share.
  var PIE_COLORS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#bab0ac', '#86bcb6'];
  function pieChart(slices, title, id) {
    var R = 70, r = 38, cx = 80, cy = 80, rowH = 16, legendX = 170, chars = 28;
    var H = Math.max(2 * cy, 8 + rowH * slices.length);
    var g = svg('svg', { width: 420, height: H, viewBox: '0 0 420 ' + H, 'class': 'pie-chart',
      role: 'img',
      'aria-labelledby': id + '-title', id: id });
    var t = svg('title', { id: id + '-title' });
    t.textContent = title;
    g.appendChild(t);
    var total = 0;
    slices.forEach(function (s) { total += Math.max(0, s.self_us); });
    var angle = -Math.PI / 2;
    function point(rad, a) { return (cx + rad * Math.cos(a)).toFixed(2) + ' ' + (cy + rad * Math.sin(a)).toFixed(2); }
    slices.forEach(function (s, i) {
      var color = PIE_COLORS[i % PIE_COLORS.length], share = total > 0 ? Math.max(0, s.self_us) / total : 0;
      var label = show(s.name) + ': ' + s.self_us + ' us (' + s.pct + ' %)';
      var mark;
      if (share >= 0.9999) {  // one whole ring: an arc cannot start and end at one point
        mark = svg('circle', { cx: cx, cy: cy, r: (R + r) / 2, fill: 'none', stroke: color,
          'stroke-width': R - r, 'class': 'slice' });
      } else if (share > 0) {
        var a1 = angle + 2 * Math.PI * share, large = share > 0.5 ? 1 : 0;
        mark = svg('path', { d: 'M ' + point(R, angle) + ' A ' + R + ' ' + R + ' 0 ' + large + ' 1 ' +
          point(R, a1) + ' L ' + point(r, a1) + ' A ' + r + ' ' + r + ' 0 ' + large + ' 0 ' +
          point(r, angle) + ' Z', fill: color, 'class': 'slice' });
        angle = a1;
      }
      if (mark) {
        var mt = svg('title');
        mt.textContent = label;
        mark.appendChild(mt);
        g.appendChild(mark);
      }
      var y = 4 + i * rowH;
      g.appendChild(svg('rect', { x: legendX, y: y + 3, width: 10, height: 10, fill: color }));
      var lt = svg('text', { x: legendX + 16, y: y + 12 });
      lt.textContent = elide(show(s.name), chars) + ' ' + s.pct + ' %';
      var ltt = svg('title');
      ltt.textContent = label;
      lt.appendChild(ltt);
      g.appendChild(lt);
    });
    var box = el('div', { 'class': 'chart pie' });
    box.appendChild(g);
    return box;
  }
  function titledChart(title, chart) {
    var wrap = el('div', { 'class': 'chart' });
    wrap.appendChild(el('div', { 'class': 'note' }, title));
    while (chart.firstChild) wrap.appendChild(chart.firstChild);
    return wrap;
  }
  // Charts beside each tool's tables, added after the tab is drawn.
  var charts = {
    overview: function (d, sec) {
      var heads = Array.prototype.slice.call(sec.querySelectorAll('h2'));
      d.per_host.forEach(function (h) {
        var head = heads.find(function (e) { return e.textContent === h.host; });
        if (!head) return;
        var after = head;
        for (var n = head.nextElementSibling; n && n.tagName !== 'H2'; n = n.nextElementSibling) {
          if (n.classList.contains('chart')) { after = n; break; }
        }
        var row = el('div', { 'class': 'chart-row' });
        row.appendChild(titledChart('top kernels by time', barChart(h.top_kernels, 'name', 'self_ms', 'ms', true)));
        row.appendChild(titledChart('top ops by self time', barChart(h.top_ops, 'name', 'self_ms', 'ms', true)));
        after.parentNode.insertBefore(row, after.nextSibling);
      });
    },
    kernel_stats: function (d, sec) {
      if (d.kernels.length === 0) return;
      var head = sec.querySelector('h2');
      var chart = titledChart('top kernels by total time', barChart(d.kernels, 'kernel', 'total_us', 'us'));
      sec.insertBefore(chart, head ? head.nextSibling : sec.firstChild);
    },
    op_stats: function (d, sec) {
      var ops = d.by_op || [];
      var key = ops.some(function (r) { return r.device_self_us > 0; }) ? 'device_self_us' : 'host_self_us';
      if (ops.length === 0) return;
      var chart = titledChart('top ops by ' + (key === 'device_self_us' ? 'device' : 'host') +
        ' self time', barChart(ops, 'name', key, 'us'));
      sec.insertBefore(chart, sec.firstChild);
    }
  };
  // Memory in use over time ([time_ns, bytes] points): a line with the peak and the time span
  // on its axes.
  function sparkline(points) {
    var W = 720, H = 180, left = 70, right = 10, top = 10, bottom = 24, box = el('div', { 'class': 'chart' });
    var g = svg('svg', { width: W, height: H, 'class': 'memory-chart' });
    function text(x, y, anchor, t) {
      var e = svg('text', { x: x, y: y, 'text-anchor': anchor });
      e.textContent = t;
      g.appendChild(e);
    }
    if (points.length > 0) {
      var t0 = points[0][0], t1 = points[points.length - 1][0], max = 0;
      points.forEach(function (p) { max = Math.max(max, p[1]); });
      var plotW = W - left - right, plotH = H - top - bottom;
      var d = points.map(function (p) {
        var x = left + plotW * (t1 > t0 ? (p[0] - t0) / (t1 - t0) : 0.5);
        var y = top + plotH - plotH * (max > 0 ? p[1] / max : 0);
        return x.toFixed(1) + ',' + y.toFixed(1);
      }).join(' ');
      g.appendChild(svg('line', { x1: left, x2: W - right, y1: top + plotH, y2: top + plotH, stroke: '#dadce0' }));
      g.appendChild(svg('line', { x1: left, x2: W - right, y1: top, y2: top, stroke: '#dadce0' }));
      g.appendChild(svg('polyline', { points: d, fill: 'none', stroke: '#4e79a7', 'class': 'memory-line' }));
      text(left - 6, top + 4, 'end', (max / 1048576).toFixed(1) + ' MiB');
      text(left - 6, top + plotH, 'end', '0');
      text(left, H - 6, 'start', '+0 ms');
      text(W - right, H - 6, 'end', '+' + ((t1 - t0) / 1e6).toFixed(3) + ' ms');
    }
    box.appendChild(g);
    return box;
  }
  var draw = {
    overview: function (d, sec) {
      sec.appendChild(el('h2', null, 'Overview'));
      var recs = el('div', { id: 'tool-recommendations' });
      if (d.recommendations.length === 0) recs.appendChild(el('p', null, 'No category stands out.'));
      d.recommendations.forEach(function (r) {
        var p = el('div', { 'class': 'rec' });
        p.appendChild(el('div', null, r.advice));
        p.appendChild(el('div', { 'class': 'why' }, 'because ' + r.reason));
        recs.appendChild(p);
      });
      sec.appendChild(recs);
      var rows = d.categories.map(function (c) {
        var v = d.pod.average_ms[c];
        return { category: c, ms: v, pct: d.pod.average_step_ms > 0 ? +(100 * v / d.pod.average_step_ms).toFixed(1) : 0 };
      });
      sec.appendChild(el('p', null, 'Average step ' + d.pod.average_step_ms.toFixed(3) + ' ms over ' +
        d.pod.steps + ' steps; device compute in 16-bit: ' + d.pod.compute_16bit_pct + ' %'));
      sec.appendChild(table([['category', 'category'], ['ms', 'avg ms'], ['pct', '%']], rows, 'tool-overview-categories'));
      function stepStats(s, r, id) {
        var text = s.steps === 0 ? 'Step time: no complete steps.' :
          'Step time: average ' + s.average.toFixed(3) + ' ms, standard deviation ' +
          s.stddev.toFixed(3) + ' ms, min ' + s.min.toFixed(3) + ' ms, max ' + s.max.toFixed(3) + ' ms. ';
        text += r ? 'Input wait across devices: ' + r.min_pct + ' % (' + r.min_at + ') to ' +
          r.max_pct + ' % (' + r.max_at + ') of step time.' : 'Input wait across devices: no device in the steps.';
        return el('p', { 'class': 'note', id: id }, text);
      }
      sec.appendChild(stepStats(d.pod.step_time_ms, d.pod.input_wait_range, 'tool-overview-step-stats'));
      d.per_host.forEach(function (h) {
        sec.appendChild(el('h2', null, h.host));
        var env = h.environment;
        sec.appendChild(el('p', { 'class': 'note' }, [env.framework, env.devices.length + ' device(s)',
          env.devices.length ? env.devices[0].name : '',
          env.devices.length && env.devices[0].device_type ? env.devices[0].device_type : '', env.cuda_version ? 'CUDA ' + env.cuda_version : '',
          env.driver_version ? 'driver ' + env.driver_version : ''].filter(Boolean).join(', ')));
        sec.appendChild(stepStats(h.step_time_ms, h.input_wait_range));
        sec.appendChild(stacked(d.categories, h.steps));
        if (h.input_by_device.length > 0) {
          sec.appendChild(table([['device', 'device'], ['input_ms', 'waits for input ms'],
            ['pct', '% of step time']], h.input_by_device));
        }
        sec.appendChild(table([['name', 'top kernel'], ['self_ms', 'ms'], ['pct', '%'],
          ['cum_pct', 'cum. %']], h.top_kernels));
        sec.appendChild(table([['name', 'top op'], ['category', 'category'], ['self_ms', 'self ms'],
          ['pct', '%'], ['cum_pct', 'cum. %']], h.top_ops));
      });
    },
    kernel_stats: function (d, sec) {
      sec.appendChild(el('h2', null, 'GPU kernel stats'));
      if (d.kernels.length === 0) {
        sec.appendChild(el('p', { 'class': 'note', id: 'tool-kernels-none' }, 'No GPU kernels in ' +
          'the trace (a CPU-only or TPU run, or device tracing was off).'));
        return;
      }
      sec.appendChild(el('h2', null, 'Top kernels by total time'));
      sec.appendChild(table([['kernel', 'kernel'], ['total_us', 'total us'], ['pct', '%']],
        d.top_kernels, 'tool-top-kernels'));
      sec.appendChild(el('h2', null, 'All kernels'));
      sec.appendChild(table([['kernel', 'kernel'], ['op', 'op'], ['occurrences', 'count'],
        ['total_us', 'total us'], ['pct', '%'], ['cum_pct', 'cum. %'], ['avg_us', 'avg us'],
        ['min_us', 'min us'], ['max_us', 'max us'],
        ['registers_per_thread', 'regs'], ['shared_memory_bytes', 'shared B'], ['grid', 'grid'],
        ['block', 'block'], ['occupancy_pct', 'occupancy %'], ['tensor_core_eligible', 'TC eligible'],
        ['tensor_core_used', 'TC used']], d.kernels, 'tool-kernels'));
    },
    op_stats: function (d, sec) {
      var cols = [['name', 'name'], ['type', 'type'], ['occurrences', 'count'],
        ['device_self_us', 'device self us'], ['device_self_pct', 'device self %'],
        ['device_self_cum_pct', 'device cum. %'], ['device_total_us', 'device total us'],
        ['host_self_us', 'host self us'], ['host_self_pct', 'host self %'],
        ['host_self_cum_pct', 'host cum. %'], ['host_total_us', 'host total us']];
      if (d.peak_teraflops_per_second !== null) cols.push(['flops_utilization_pct', 'FLOPS utilization %']);
      sec.appendChild(el('p', { 'class': 'note', id: 'tool-ops-idle' }, 'Idle: host ' +
        d.idle.host_us.toFixed(3) + ' us, devices ' + d.idle.device_us.toFixed(3) + ' us; ' +
        (d.include_idle ? 'counted as the IDLE row (--include-idle).' :
          'not counted in the percentages (--include-idle counts it).')));
      [['device_by_type', 'Device self time by op type'], ['device_by_op', 'Device self time by op'],
        ['host_by_type', 'Host self time by op type'], ['host_by_op', 'Host self time by op']]
        .forEach(function (p) {
          sec.appendChild(el('h2', null, p[1] + ' (top ' + 10 + ' and other)'));
          if (d.pie[p[0]].length === 0) {
            sec.appendChild(el('p', { 'class': 'note' }, 'No self time on this side in the trace.'));
          } else {
            // The donut beside its table (the table keeps the exact numbers).
            var row = el('div', { 'class': 'chart-row pie-row' });
            row.appendChild(pieChart(d.pie[p[0]], p[1] + ': share of self time, top 10 and other',
              'tool-pie-chart-' + p[0]));
            var cell = el('div', { 'class': 'pie-table' });
            cell.appendChild(table([['name', 'name'], ['self_us', 'self us'], ['pct', '%']],
              d.pie[p[0]], 'tool-pie-' + p[0]));
            row.appendChild(cell);
            sec.appendChild(row);
          }
        });
      sec.appendChild(el('h2', null, 'Ops'));
      sec.appendChild(table(cols, d.by_op, 'tool-ops'));
      sec.appendChild(el('h2', null, 'Op types'));
      sec.appendChild(table(cols, d.by_type, 'tool-op-types'));
    },
    input_pipeline: function (d, sec) {
      d.per_host.forEach(function (h) {
        sec.appendChild(el('h2', null, h.host + ': input ' + h.input_pct + ' % of step time'));
        if (h.bottleneck) sec.appendChild(el('p', { 'class': 'bottleneck' }, 'Bottleneck: ' + h.bottleneck));
        sec.appendChild(table([['step', 'step'], ['step_time_ms', 'step ms'],
          ['device_input_ms', 'device waits for input ms'], ['host_input_ms', 'host input ms']], h.steps));
        var tf = h.tf_data;
        if (tf.missing) {
          sec.appendChild(el('p', { 'class': 'note tf-data-missing' }, 'tf.data bottleneck analysis: ' + tf.missing + '.'));
        } else {
          sec.appendChild(el('h2', null, h.host + ': tf.data bottleneck analysis'));
          sec.appendChild(el('p', { 'class': 'note', id: 'tool-tf-data-summary' }, tf.calls +
            ' root iterator call(s), ' + tf.slow_calls + ' slow (> 50 us, ' + tf.slow_pct + ' %). ' +
            (tf.slowest ? 'Slowest execution: ' + tf.slowest.root + ', ' + tf.slowest.duration_us +
              ' us; critical path ' + tf.critical_path.join(' > ') + '; bottleneck ' + tf.bottleneck + '.' : '')));
          sec.appendChild(table([['name', 'iterator (long name)'], ['parent', 'input of'],
            ['count', 'count'], ['self_us', 'self us'], ['total_us', 'total us'], ['max_us', 'max us'],
            ['slowest_self_us', 'self us in the slowest'], ['critical_path', 'critical path']],
            tf.graph, 'tool-tf-data-graph'));
        }
        if (h.stages.length === 0 && !(h.h2d_copy_ms > 0)) {
          sec.appendChild(el('p', { 'class': 'note' }, 'No tf.data iterator, DataLoader or ' +
            'host-to-device copy events in this trace: the host side of the input pipeline is not recorded.'));
          return;
        }
        sec.appendChild(table([['category', 'host input category'], ['ms', 'self ms']],
          Object.keys(h.categories_ms).map(function (k) { return { category: k, ms: h.categories_ms[k] }; }),
          'tool-input-categories'));
        if (h.stages.length === 0) return;
        sec.appendChild(table([['name', 'stage'], ['category', 'category'], ['self_ms', 'self ms'],
          ['self_pct', 'self %'], ['total_ms', 'total ms'], ['count', 'count'], ['max_ms', 'max ms'],
          ['consumer', 'training loop'], ['critical_path', 'critical path']], h.stages));
      });
    },
    memory: function (d, sec) {
      if (d.devices.length === 0) sec.appendChild(el('p', null, 'No memory allocation events.'));
      d.devices.forEach(function (m) {
        sec.appendChild(el('h2', null, m.host + (m.device < 0 ? ' host memory' : ' device ' + m.device) +
          ': peak ' + (m.peak_bytes / 1048576).toFixed(2) + ' MiB at +' + m.peak_time_ms.toFixed(3) + ' ms'));
        var facts = [];
        if (m.capacity_bytes !== null) facts.push('capacity ' + (m.capacity_bytes / 1048576).toFixed(2) +
          ' MiB (' + m.capacity_from + ')');
        if (m.peak_heap_since_start_bytes !== null) facts.push('peak heap since start ' +
          (m.peak_heap_since_start_bytes / 1048576).toFixed(2) + ' MiB');
        if (m.at_peak) facts.push('at the peak: stack ' + (m.at_peak.stack_bytes / 1048576).toFixed(2) +
          ' MiB, heap ' + (m.at_peak.heap_bytes / 1048576).toFixed(2) + ' MiB, free ' +
          (m.at_peak.free_bytes / 1048576).toFixed(2) + ' MiB');
        if (m.fragmentation_at_peak !== null) facts.push('fragmentation at the peak ' +
          (100 * m.fragmentation_at_peak).toFixed(1) + ' %');
        if (facts.length) sec.appendChild(el('p', { 'class': 'memory-facts' }, facts.join('; ')));
        sec.appendChild(sparkline(m.timeline));
        if (m.fragmentation_timeline.length > 0) {
          sec.appendChild(el('h2', null, 'Fragmentation over time (1 - largest free chunk / total free)'));
          sec.appendChild(sparkline(m.fragmentation_timeline));
        }
        if (m.by_op_at_peak.length > 0) {
          sec.appendChild(el('h2', null, 'Memory at the peak by op'));
          sec.appendChild(table([['op', 'op'], ['allocations', 'allocations'], ['bytes', 'bytes'],
            ['requested_bytes', 'requested bytes'], ['region_type', 'region'], ['data_type', 'data type'],
            ['shape', 'shape']], m.by_op_at_peak, 'tool-memory-by-op'));
        }
        if (m.largest_live_at_peak.length > 0) {
          sec.appendChild(el('h2', null, 'Largest allocations live at the peak'));
          sec.appendChild(table([['bytes', 'bytes'], ['requested_bytes', 'requested'], ['op', 'op'],
            ['step', 'step'], ['region_type', 'region'], ['data_type', 'data type'], ['shape', 'shape'],
            ['since_ns', 'since ns'], ['address', 'address']], m.largest_live_at_peak));
        }
        m.missing.forEach(function (s) {
          sec.appendChild(el('p', { 'class': 'note memory-missing' }, 'Not in this trace: ' + s));
        });
      });
    }
  };
  var header = document.querySelector('header');
  var tabs = el('nav', { id: 'tabs' });
  header.parentNode.insertBefore(tabs, header.nextSibling);
  var breakdownNodes = Array.prototype.slice.call(document.querySelectorAll('body > section'));
  var panes = [{ name: 'breakdown', nodes: breakdownNodes }];
  var footer = document.getElementById('footer');
  nodes.forEach(function (n) {
    var d = JSON.parse(n.textContent);
    var sec = el('section', { id: 'tool-' + d.tool, 'class': 'tool-tab' });
    sec.hidden = true;
    if (draw[d.tool]) draw[d.tool](d, sec);
    if (charts[d.tool]) charts[d.tool](d, sec);
    footer.parentNode.insertBefore(sec, footer);
    panes.push({ name: d.tool, nodes: [sec] });
  });
  function select(name) {
    panes.forEach(function (p) {
      p.nodes.forEach(function (n) { n.hidden = p.name !== name; });
      p.button.className = p.name === name ? 'active' : '';
    });
    panes.forEach(function (p) {
      if (p.name !== name) return;
      p.nodes.forEach(function (n) {
        Array.prototype.forEach.call(n.querySelectorAll('.table-wrap'), function (w) { if (w.fit) w.fit(); });
      });
    });
  }
  panes.forEach(function (p) {
    p.button = el('button', { type: 'button', 'data-tab': p.name }, p.name === 'breakdown' ? 'step breakdown' : p.name);
    p.button.addEventListener('click', function () { select(p.name); });
    tabs.appendChild(p.button);
  });
  var want = /(?:^#|&)tab=([a-z_]+)/.exec(location.hash);
  // The breakdown draws first (it measures its charts); a #tab= deep link switches after it.
  select('breakdown');
  if (want) setTimeout(function () { select(want[1]); }, 0);
})();
</script>
)html";

// `v`'s member `key`; nullptr when `v` is no object or has none.
const rapidjson::Value* Find(const rapidjson::Value& v, const char* key) {
  return v.IsObject() && v.HasMember(key) ? &v[key] : nullptr;
}

double NumberOr0(const rapidjson::Value* v) {
  return v != nullptr && v->IsNumber() ? v->GetDouble() : 0.0;
}

// The runs of `per` consecutive steps of an overview host's "steps": {"step": first,
// "last_step": last, "steps": count, "step_time_ms" and each "ms" category: the run's mean}.
rapidjson::Value StepRuns(const rapidjson::Value& in, size_t per,
                          rapidjson::Document::AllocatorType& alloc) {
  rapidjson::Value out(rapidjson::kArrayType);
  const size_t n = in.Size();
  for (size_t at = 0; at < n; at += per) {
    const size_t end = std::min(n, at + per);
    const double count = static_cast<double>(end - at);
    rapidjson::Value run(rapidjson::kObjectType);
    run.AddMember("step", static_cast<int64_t>(NumberOr0(Find(in[at], "step"))), alloc);
    run.AddMember("last_step", static_cast<int64_t>(NumberOr0(Find(in[end - 1], "step"))), alloc);
    run.AddMember("steps", static_cast<int64_t>(end - at), alloc);
    double time = 0;
    for (size_t i = at; i < end; ++i) time += NumberOr0(Find(in[i], "step_time_ms"));
    run.AddMember("step_time_ms", time / count, alloc);
    rapidjson::Value ms(rapidjson::kObjectType);
    if (const rapidjson::Value* first = Find(in[at], "ms"); first != nullptr && first->IsObject()) {
      for (const auto& cat : first->GetObject()) {
        double sum = 0;
        for (size_t i = at; i < end; ++i) {
          if (const rapidjson::Value* m = Find(in[i], "ms")) {
            sum += NumberOr0(Find(*m, cat.name.GetString()));
          }
        }
        rapidjson::Value key(cat.name, alloc);
        rapidjson::Value mean(sum / count);
        ms.AddMember(key, mean, alloc);
      }
    }
    run.AddMember("ms", ms, alloc);
    out.PushBack(run, alloc);
  }
  return out;
}

// The overview's per-host "steps" beyond kMaxToolChartSteps become StepRuns. Other documents,
// and overviews short enough, are returned as they are.
std::string DownsampledForPage(const std::string& tool_json) {
  rapidjson::Document d;
  d.Parse(tool_json.data(), tool_json.size());
  const rapidjson::Value* tool = Find(d, "tool");
  if (d.HasParseError() || tool == nullptr || !tool->IsString() ||
      std::string(tool->GetString()) != "overview" || !d.HasMember("per_host") ||
      !d["per_host"].IsArray()) {
    return tool_json;
  }
  bool changed = false;
  for (auto& host : d["per_host"].GetArray()) {
    if (!host.IsObject() || !host.HasMember("steps")) continue;
    rapidjson::Value& steps = host["steps"];
    if (!steps.IsArray() || steps.Size() <= kMaxToolChartSteps) continue;
    const size_t per = (steps.Size() + kMaxToolChartSteps - 1) / kMaxToolChartSteps;
    steps = StepRuns(steps, per, d.GetAllocator());
    changed = true;
  }
  if (!changed) return tool_json;
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.SetMaxDecimalPlaces(3);
  d.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

void AppendToolTabs(std::string* out, absl::Span<const std::string> tool_jsons) {
  for (const std::string& tool_json : tool_jsons) {
    out->append("<script type=\"application/json\" class=\"tool-data\">\n");
    AppendJsonForScript(out, DownsampledForPage(tool_json));
    out->append("</script>\n");
  }
  if (!tool_jsons.empty()) out->append(kToolsScript);
}

}  // namespace profctl::report
