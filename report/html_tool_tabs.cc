#include "report/html_tool_tabs.h"

#include <string>

#include "absl/types/span.h"
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
  function show(v) {
    if (v === null || v === undefined) return '\u2013';
    if (Array.isArray(v)) return v.join('x');
    if (typeof v === 'number') return String(v);
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    return String(v);
  }
  // A sortable table of `rows` (objects) with `cols` [[key, title], ...].
  function table(cols, rows, id) {
    var t = el('table', id ? { id: id } : null);
    var head = el('tr');
    var body = el('tbody');
    var order = { key: null, dir: 1 };
    function fill() {
      while (body.firstChild) body.removeChild(body.firstChild);
      rows.forEach(function (r) {
        var tr = el('tr');
        cols.forEach(function (c) {
          var v = r[c[0]];
          tr.appendChild(el('td', typeof v === 'number' ? { 'class': 'num' } : null, show(v)));
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
    return wrap;
  }
  var CAT_COLORS = ['#9c755f', '#b07aa1', '#f28e2b', '#76b7b2', '#59a14f', '#edc948', '#e15759',
    '#4e79a7', '#c9c3bf'];
  function stacked(cats, steps) {
    var W = Math.max(320, 26 * steps.length + 60), H = 220, left = 50, top = 10, plotH = 180;
    var max = 0;
    steps.forEach(function (s) { max = Math.max(max, s.step_time_ms); });
    var box = el('div', { 'class': 'chart' });
    var legend = el('div', { 'class': 'legend' });
    cats.forEach(function (c, k) {
      var item = el('span');
      item.appendChild(el('span', { 'class': 'sw', style: 'background:' + CAT_COLORS[k % 9] }));
      item.appendChild(document.createTextNode(c));
      legend.appendChild(item);
    });
    box.appendChild(legend);
    var g = svg('svg', { width: W, height: H });
    steps.forEach(function (s, i) {
      var y = top + plotH;
      cats.forEach(function (c, k) {
        var v = s.ms[c] || 0;
        if (!(v > 0) || !(max > 0)) return;
        var h = plotH * v / max;
        y -= h;
        var r = svg('rect', { x: left + 26 * i, y: y, width: 20, height: h, fill: CAT_COLORS[k % 9],
          'class': 'tool-seg' });
        var title = svg('title');
        title.textContent = 'step ' + s.step + '\n' + c + ': ' + v.toFixed(3) + ' ms';
        r.appendChild(title);
        g.appendChild(r);
      });
    });
    box.appendChild(g);
    return box;
  }
  function sparkline(points) {
    var W = 640, H = 160, box = el('div', { 'class': 'chart' });
    var g = svg('svg', { width: W, height: H });
    if (points.length > 0) {
      var t0 = points[0][0], t1 = points[points.length - 1][0], max = 0;
      points.forEach(function (p) { max = Math.max(max, p[1]); });
      var d = points.map(function (p) {
        var x = 10 + (W - 20) * (t1 > t0 ? (p[0] - t0) / (t1 - t0) : 0.5);
        var y = H - 10 - (H - 20) * (max > 0 ? p[1] / max : 0);
        return x.toFixed(1) + ',' + y.toFixed(1);
      }).join(' ');
      g.appendChild(svg('polyline', { points: d, fill: 'none', stroke: '#4e79a7', 'class': 'memory-line' }));
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
      d.per_host.forEach(function (h) {
        sec.appendChild(el('h2', null, h.host));
        var env = h.environment;
        sec.appendChild(el('p', { 'class': 'note' }, [env.framework, env.devices.length + ' device(s)',
          env.devices.length ? env.devices[0].name : '', env.cuda_version ? 'CUDA ' + env.cuda_version : '',
          env.driver_version ? 'driver ' + env.driver_version : ''].filter(Boolean).join(', ')));
        sec.appendChild(stacked(d.categories, h.steps));
        sec.appendChild(table([['name', 'top kernel'], ['self_ms', 'ms'], ['pct', '%']], h.top_kernels));
        sec.appendChild(table([['name', 'top op'], ['self_ms', 'self ms'], ['pct', '%']], h.top_ops));
      });
    },
    kernel_stats: function (d, sec) {
      sec.appendChild(el('h2', null, 'GPU kernel stats'));
      sec.appendChild(table([['kernel', 'kernel'], ['op', 'op'], ['occurrences', 'count'],
        ['total_us', 'total us'], ['avg_us', 'avg us'], ['min_us', 'min us'], ['max_us', 'max us'],
        ['registers_per_thread', 'regs'], ['shared_memory_bytes', 'shared B'], ['grid', 'grid'],
        ['block', 'block'], ['occupancy_pct', 'occupancy %'], ['tensor_core_eligible', 'TC eligible'],
        ['tensor_core_used', 'TC used']], d.kernels, 'tool-kernels'));
    },
    op_stats: function (d, sec) {
      var cols = [['name', 'name'], ['type', 'type'], ['occurrences', 'count'],
        ['device_self_us', 'device self us'], ['device_total_us', 'device total us'],
        ['host_self_us', 'host self us'], ['host_total_us', 'host total us']];
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
        sec.appendChild(table([['name', 'stage'], ['self_ms', 'self ms'], ['total_ms', 'total ms'],
          ['count', 'count'], ['max_ms', 'max ms'], ['consumer', 'training loop'],
          ['critical_path', 'critical path']], h.stages));
      });
    },
    memory: function (d, sec) {
      if (d.devices.length === 0) sec.appendChild(el('p', null, 'No memory allocation events.'));
      d.devices.forEach(function (m) {
        sec.appendChild(el('h2', null, m.host + (m.device < 0 ? ' host memory' : ' device ' + m.device) +
          ': peak ' + (m.peak_bytes / 1048576).toFixed(2) + ' MiB at +' + m.peak_time_ms.toFixed(3) + ' ms'));
        sec.appendChild(sparkline(m.timeline));
        sec.appendChild(table([['bytes', 'bytes'], ['op', 'op'], ['since_ns', 'since ns'],
          ['address', 'address']], m.largest_live_at_peak));
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
    footer.parentNode.insertBefore(sec, footer);
    panes.push({ name: d.tool, nodes: [sec] });
  });
  function select(name) {
    panes.forEach(function (p) {
      p.nodes.forEach(function (n) { n.hidden = p.name !== name; });
      p.button.className = p.name === name ? 'active' : '';
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

}  // namespace

void AppendToolTabs(std::string* out, absl::Span<const std::string> tool_jsons) {
  for (const std::string& tool_json : tool_jsons) {
    out->append("<script type=\"application/json\" class=\"tool-data\">\n");
    AppendJsonForScript(out, tool_json);
    out->append("</script>\n");
  }
  if (!tool_jsons.empty()) out->append(kToolsScript);
}

}  // namespace profctl::report
