// The tools' tabs of report.html (docs/tools.md): one tab per embedded tool document (ToolJson,
// <script type="application/json" class="tool-data">), drawn with plain DOM (trace text is never
// markup) at load, each tab shown while it draws so that its charts take the width it has. Every per-host
// tool has a host selector. Numbers carry fixed decimals and a unit, one per column, and names
// are shortened so that they stay distinct (format.js). Runs before the breakdown's script, so a
// failure here is reported in #errors and the breakdown still draws.
(function () {
  'use strict';
  var nodes = Array.prototype.slice.call(document.querySelectorAll('script.tool-data'));
  if (nodes.length === 0) return;
  var P = window.profctl;
  var SVG = 'http://www.w3.org/2000/svg';
  var DASH = '\u2013';
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function titled(node, text) { node.appendChild(svg('title', null, text)); return node; }
  function note(text, cls, id) {
    var attrs = { 'class': 'note' + (cls ? ' ' + cls : '') };
    if (id) attrs.id = id;
    return el('p', attrs, text);
  }
  // The width a chart drawn into `box` gets: its content box (the tab is shown when drawn).
  function widthIn(box, fallback) {
    var w = box && box.clientWidth ? box.clientWidth - 12 : 0;
    return Math.max(280, w > 0 ? w : fallback || 1180);
  }
  // `n` chart boxes in `parent`, side by side when more than one (each then half as wide), made
  // before any is drawn so that each is measured at the width it keeps.
  function chartBoxes(parent, n, cls) {
    var into = parent;
    if (n > 1) {
      into = el('div', { 'class': 'chart-row' });
      parent.appendChild(into);
    }
    var out = [];
    for (var i = 0; i < n; i++) {
      var b = el('div', { 'class': 'chart' + (cls ? ' ' + cls : '') });
      into.appendChild(b);
      out.push(b);
    }
    return out;
  }
  // A duration in ms in prose: ms (or s beyond 10 s), never a smaller unit, so that the numbers
  // of a sentence compare.
  function ms(v) {
    return P.duration(v, 'ms', P.durationUnit(Math.max(Math.abs(v) || 0, 1), 'ms'));
  }
  function us(v) { return P.duration(v, 'us'); }

  // --- Tables --------------------------------------------------------------------------------

  // What a cell of column `key` shows for value v, given the column's formatter.
  function cellText(v, format) {
    if (v === null || v === undefined) return DASH;
    if (Array.isArray(v)) return v.join('x');
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (typeof v === 'number') return format(v);
    return String(v);
  }
  // A sortable table of `rows` (objects) with `cols` [[key, title, format?], ...]: numbers right-
  // aligned, one unit and number of decimals per column (format.js columnFormat, or the column's
  // own `format`); names shortened to the room the numbers leave, distinct within the column,
  // whole on hover.
  function table(cols, rows, id) {
    // No header over nothing: an empty table says so in words.
    if (rows.length === 0) {
      return note('None in this trace (' + cols.map(function (c) { return c[1]; }).slice(0, 2)
        .join(', ') + ').', 'empty', id);
    }
    var t = el('table', id ? { id: id } : null);
    var head = el('tr');
    var body = el('tbody');
    var order = { key: null, dir: 1 };
    var formats = {};
    var textual = {};
    cols.forEach(function (c) {
      var values = rows.map(function (r) { return r[c[0]]; });
      formats[c[0]] = c[2] || P.columnFormat(c[0], values);
      textual[c[0]] = values.some(function (v) { return typeof v === 'string'; });
    });
    // Names get the room the numbers leave: fit() shortens them further until the table fits
    // its box.
    var room = 64;
    function fill() {
      while (body.firstChild) body.removeChild(body.firstChild);
      var shown = {};
      cols.forEach(function (c) {
        if (!textual[c[0]]) return;
        shown[c[0]] = P.distinctNames(rows.map(function (r) { return cellText(r[c[0]], String); }), room);
      });
      rows.forEach(function (r, i) {
        var tr = el('tr');
        cols.forEach(function (c) {
          var v = r[c[0]];
          if (typeof v === 'number' || (!textual[c[0]] && (v === null || v === undefined))) {
            tr.appendChild(el('td', { 'class': 'num' }, cellText(v, formats[c[0]])));
            return;
          }
          var full = cellText(v, formats[c[0]]);
          var text = shown[c[0]] ? shown[c[0]][i] : full;
          var td = el('td', { 'class': 'name' }, text);
          if (text !== full) td.setAttribute('title', full);
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
    }
    cols.forEach(function (c) {
      var numeric = !textual[c[0]];
      var th = el('th', { 'class': 'sortable' + (numeric ? ' num' : ''), 'data-key': c[0] }, c[1]);
      th.addEventListener('click', function () {
        order.dir = order.key === c[0] ? -order.dir : (numeric ? -1 : 1);
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
      while (wrap.clientWidth > 0 && wrap.scrollWidth > wrap.clientWidth + 1 && room > 16) {
        room -= 4;
        fill();
      }
    };
    return wrap;
  }
  function hex(v) { return typeof v === 'number' ? '0x' + v.toString(16) : DASH; }

  // --- Charts --------------------------------------------------------------------------------

  var CAT_COLORS = ['#9c755f', '#b07aa1', '#f28e2b', '#76b7b2', '#59a14f', '#edc948', '#e15759',
    '#4e79a7', '#c9c3bf'];
  function legend(names, colors, extra) {
    var box = el('div', { 'class': 'legend' });
    names.forEach(function (c, k) {
      var item = el('span');
      item.appendChild(el('span', { 'class': 'sw', style: 'background:' + colors[k % colors.length] }));
      item.appendChild(document.createTextNode(c));
      box.appendChild(item);
    });
    if (extra) box.appendChild(el('span', null, extra));
    return box;
  }
  // Step time stacked by category over steps, as wide as its box: beyond MAX_BARS bars each bar
  // is the mean of a run of consecutive steps (its title says which).
  var MAX_BARS = 240;
  function stacked(cats, steps, parent) {
    var box = el('div', { 'class': 'chart' });
    parent.appendChild(box);
    var left = 76, right = 12, top = 10, plotH = 200, H = plotH + 42;
    var W = widthIn(box), plotW = W - left - right;
    var per = Math.max(1, Math.ceil(steps.length / MAX_BARS));
    var bars = [];
    for (var at = 0; at < steps.length; at += per) {
      var run = steps.slice(at, at + per), mean = {}, total = 0, n = 0;
      cats.forEach(function (c) {
        var sum = 0;
        run.forEach(function (s) { sum += s.ms[c] || 0; });
        mean[c] = sum / run.length;
      });
      run.forEach(function (s) { total += s.step_time_ms; n += s.steps || 1; });
      var end = run[run.length - 1];
      bars.push({ first: run[0].step, last: end.last_step === undefined ? end.step : end.last_step,
        n: n, ms: mean, step_time_ms: total / run.length });
    }
    var slot = plotW / Math.max(1, bars.length);
    var max = 0;
    bars.forEach(function (b) { max = Math.max(max, b.step_time_ms); });
    box.appendChild(legend(cats, CAT_COLORS, bars.length && bars[0].n > 1 ?
      'each bar: the mean of ' + bars[0].n + ' steps' : null));
    var g = svg('svg', { width: W, height: H, 'class': 'step-stack-chart' });
    g.appendChild(svg('text', { x: left - 6, y: top + 4, 'text-anchor': 'end' }, ms(max)));
    g.appendChild(svg('text', { x: left - 6, y: top + plotH, 'text-anchor': 'end' }, '0 ms'));
    g.appendChild(svg('line', { x1: left, x2: W - right, y1: top + plotH, y2: top + plotH, stroke: '#dadce0' }));
    bars.forEach(function (s, i) {
      var y = top + plotH;
      cats.forEach(function (c, k) {
        var v = s.ms[c] || 0;
        if (!(v > 0) || !(max > 0)) return;
        var h = plotH * v / max;
        y -= h;
        g.appendChild(titled(svg('rect', { x: left + slot * i, y: y, width: Math.max(1, slot * 0.8),
          height: h, fill: CAT_COLORS[k % 9], 'class': 'tool-seg' }),
          (s.n === 1 ? 'step ' + s.first : 'steps ' + s.first + '\u2013' + s.last + ' (mean of ' +
            s.n + ')') + '\n' + c + ': ' + ms(v)));
      });
    });
    if (bars.length > 0) {
      g.appendChild(svg('text', { x: left, y: top + plotH + 16, 'text-anchor': 'start' }, 'step ' + bars[0].first));
      if (bars.length > 1) {
        g.appendChild(svg('text', { x: W - right, y: top + plotH + 16, 'text-anchor': 'end' },
          'step ' + bars[bars.length - 1].last));
      }
    }
    box.appendChild(g);
    return box;
  }
  // The top 10 rows by `key` as horizontal bars, as wide as the box: the name shortened (whole
  // in its title, distinct), the value and its share of the total at the bar's end.
  function barChart(rows, nameKey, key, title, box) {
    box.appendChild(el('div', { 'class': 'note' }, title));
    var top = rows.filter(function (r) { return typeof r[key] === 'number' && r[key] > 0; })
      .sort(function (a, b) { return b[key] - a[key]; }).slice(0, 10);
    var total = 0;
    rows.forEach(function (r) { if (typeof r[key] === 'number' && r[key] > 0) total += r[key]; });
    if (top.length === 0) { box.appendChild(note('Nothing to chart.')); return box; }
    var W = widthIn(box), rowH = 20;
    var labelW = Math.round(W * 0.42), valueW = 190, barW = Math.max(60, W - labelW - valueW);
    var chars = Math.max(16, Math.floor(labelW / 6.6));
    var format = P.columnFormat(key, top.map(function (r) { return r[key]; }));
    var full = top.map(function (r) { return cellText(r[nameKey], String); });
    var names = P.distinctNames(full, chars);
    var g = svg('svg', { width: W, height: rowH * top.length + 8, 'class': 'bar-chart' });
    box.appendChild(g);
    var max = top[0][key];
    var labels = [];
    top.forEach(function (r, i) {
      var name = full[i], y = 4 + i * rowH;
      labels.push(g.appendChild(titled(svg('text', { x: labelW - 6, y: y + 14, 'text-anchor': 'end' }, names[i]), name)));
      var w = Math.max(1, barW * r[key] / max);
      g.appendChild(titled(svg('rect', { x: labelW, y: y + 3, width: w, height: rowH - 6, fill: '#4e79a7',
        'class': 'bar' }), name + ': ' + format(r[key])));
      g.appendChild(svg('text', { x: labelW + w + 6, y: y + 14, 'class': 'value' }, format(r[key]) +
        (total > 0 ? ' (' + P.pct(100 * r[key] / total) + ')' : '')));
    });
    fitTexts(labels, full, chars, labelW - 8);
    return box;
  }
  // Shortens `texts` (svg <text> of `full` names, first shortened to `chars`) until every one is
  // at most `room` px wide as drawn, keeping them distinct: a label never runs off its chart.
  function fitTexts(texts, full, chars, room, suffix) {
    function widest() {
      var w = 0;
      texts.forEach(function (t) { w = Math.max(w, t.getComputedTextLength ? t.getComputedTextLength() : 0); });
      return w;
    }
    while (chars > 8 && widest() > room) {
      chars -= 2;
      var names = P.distinctNames(full, chars);
      texts.forEach(function (t, i) {
        t.firstChild.nodeValue = names[i] + (suffix ? suffix[i] : '');
      });
    }
  }
  // A donut of `slices` ({name, self_us, pct}: op_stats' top 10 and "other") with a legend of
  // the same colours, named by its <title> for screen readers; each slice's title has its name,
  // time and share. As wide as its box (the legend takes what the donut leaves).
  var PIE_COLORS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#bab0ac', '#86bcb6'];
  function pieChart(slices, title, id, box) {
    var W = widthIn(box, 520), R = 70, r = 38, cx = 80, cy = 80, rowH = 17, legendX = 172;
    var chars = Math.max(16, Math.floor((W - legendX - 90) / 6.6));
    var H = Math.max(2 * cy, 8 + rowH * slices.length);
    var g = svg('svg', { width: W, height: H, 'class': 'pie-chart', role: 'img',
      'aria-labelledby': id + '-title', id: id });
    g.appendChild(svg('title', { id: id + '-title' }, title));
    var total = 0;
    slices.forEach(function (s) { total += Math.max(0, s.self_us); });
    var format = P.columnFormat('self_us', slices.map(function (s) { return s.self_us; }));
    var names = P.distinctNames(slices.map(function (s) { return String(s.name); }), chars);
    box.appendChild(g);
    var legendTexts = [];
    var angle = -Math.PI / 2;
    function point(rad, a) { return (cx + rad * Math.cos(a)).toFixed(2) + ' ' + (cy + rad * Math.sin(a)).toFixed(2); }
    slices.forEach(function (s, i) {
      var color = PIE_COLORS[i % PIE_COLORS.length], share = total > 0 ? Math.max(0, s.self_us) / total : 0;
      var label = String(s.name) + ': ' + format(s.self_us) + ' (' + P.pct(s.pct) + ')';
      var mark = null;
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
      if (mark) g.appendChild(titled(mark, label));
      var y = 4 + i * rowH;
      g.appendChild(svg('rect', { x: legendX, y: y + 3, width: 10, height: 10, fill: color }));
      legendTexts.push(g.appendChild(titled(svg('text', { x: legendX + 16, y: y + 12 },
        names[i] + ' ' + P.pct(s.pct)), label)));
    });
    fitTexts(legendTexts, slices.map(function (s) { return String(s.name); }), chars, W - legendX - 24,
      slices.map(function (s) { return ' ' + P.pct(s.pct); }));
    return box;
  }
  // A line over time ([time_ns, value] points) as wide as its box: memory in use (bytes) or a
  // ratio (0..1), with its maximum and the time span (relative to the first point) on its axes.
  function lineChart(points, kind, cls, box, t0) {
    var W = widthIn(box), H = 160, left = 86, right = 12, top = 10, bottom = 24;
    var g = svg('svg', { width: W, height: H, 'class': cls });
    if (points.length > 0) {
      var first = t0 === undefined ? points[0][0] : t0, t1 = points[points.length - 1][0], max = 0;
      points.forEach(function (p) { max = Math.max(max, p[1]); });
      if (kind === 'ratio') max = Math.max(max, 1e-9);
      var plotW = W - left - right, plotH = H - top - bottom;
      var d = points.map(function (p) {
        var x = left + plotW * (t1 > first ? (p[0] - first) / (t1 - first) : 0.5);
        var y = top + plotH - plotH * (max > 0 ? p[1] / max : 0);
        return x.toFixed(1) + ',' + y.toFixed(1);
      }).join(' ');
      g.appendChild(svg('line', { x1: left, x2: W - right, y1: top + plotH, y2: top + plotH, stroke: '#dadce0' }));
      g.appendChild(svg('line', { x1: left, x2: W - right, y1: top, y2: top, stroke: '#dadce0' }));
      g.appendChild(svg('polyline', { points: d, fill: 'none', stroke: '#4e79a7', 'class': 'memory-line' }));
      var label = kind === 'ratio' ? P.fixed(max, 3) : P.bytes(max);
      g.appendChild(svg('text', { x: left - 6, y: top + 4, 'text-anchor': 'end' }, label));
      g.appendChild(svg('text', { x: left - 6, y: top + plotH, 'text-anchor': 'end' }, kind === 'ratio' ? '0' : '0 B'));
      var span = P.durationUnit(Math.max(t1 - first, 1), 'ns');
      g.appendChild(svg('text', { x: left, y: H - 6, 'text-anchor': 'start' }, '+' + P.duration(0, 'ns', span)));
      g.appendChild(svg('text', { x: W - right, y: H - 6, 'text-anchor': 'end' }, '+' + P.duration(t1 - first, 'ns', span)));
    }
    box.appendChild(g);
    return box;
  }
  // Vertical bars of `items` [{label, value, title}] (counts), as wide as the box.
  function columnChart(items, cls, box, unitLabel) {
    var W = widthIn(box), H = 190, left = 56, right = 10, top = 14, bottom = 40;
    var plotW = W - left - right, plotH = H - top - bottom, slot = plotW / Math.max(1, items.length);
    var max = 0;
    items.forEach(function (it) { max = Math.max(max, it.value); });
    var g = svg('svg', { width: W, height: H, 'class': cls });
    g.appendChild(svg('line', { x1: left, x2: W - right, y1: top + plotH, y2: top + plotH, stroke: '#dadce0' }));
    g.appendChild(svg('text', { x: left - 6, y: top + 4, 'text-anchor': 'end' }, P.count(max)));
    g.appendChild(svg('text', { x: left - 6, y: top + plotH, 'text-anchor': 'end' }, '0'));
    items.forEach(function (it, i) {
      var h = max > 0 ? plotH * it.value / max : 0;
      var x = left + i * slot;
      g.appendChild(titled(svg('rect', { x: x + slot * 0.12, y: top + plotH - h, width: slot * 0.76,
        height: Math.max(0, h), fill: '#4e79a7', 'class': 'bar' }), it.title));
      g.appendChild(svg('text', { x: x + slot / 2, y: top + plotH + 14, 'text-anchor': 'middle' }, it.label));
    });
    g.appendChild(svg('text', { x: left + plotW / 2, y: H - 6, 'text-anchor': 'middle' }, unitLabel));
    box.appendChild(g);
    return box;
  }
  // One horizontal bar split into parts [{name, value}] (a share of a whole), with a legend.
  function shareBar(parts, colors, cls, box, format) {
    var total = 0;
    parts.forEach(function (p) { total += Math.max(0, p.value); });
    box.appendChild(legend(parts.map(function (p) {
      return p.name + ' ' + format(p.value) + ' (' + P.pct(total > 0 ? 100 * p.value / total : 0) + ')';
    }), colors));
    var W = widthIn(box), H = 26;
    var g = svg('svg', { width: W, height: H, 'class': cls });
    var x = 0;
    parts.forEach(function (p, k) {
      var w = total > 0 ? W * Math.max(0, p.value) / total : 0;
      if (w > 0) {
        g.appendChild(titled(svg('rect', { x: x, y: 2, width: w, height: H - 4, fill: colors[k % colors.length],
          'class': 'bar' }), p.name + ': ' + format(p.value)));
      }
      x += w;
    });
    if (total === 0) g.appendChild(svg('rect', { x: 0, y: 2, width: W, height: H - 4, fill: '#eeeeee' }));
    box.appendChild(g);
    return box;
  }

  // --- Host selector -------------------------------------------------------------------------

  var WANT_HOST = (function () {
    var m = /(?:^#|&)host=([^&]*)/.exec(location.hash);
    return m ? decodeURIComponent(m[1]) : null;
  })();

  // A selector of `choices` [{name, label}] above `into`, calling show(name) now and on change.
  function selector(label, choices, into, show, cls) {
    var bar = el('div', { 'class': 'controls' });
    var lab = el('label', null, label + ' ');
    var select = el('select', { 'class': cls || 'host-select' });
    choices.forEach(function (c) { select.appendChild(el('option', { value: c.name }, c.label)); });
    lab.appendChild(select);
    bar.appendChild(lab);
    bar.appendChild(el('span', { 'class': 'note' }, choices.length + ' to choose from'));
    into.appendChild(bar);
    var body = el('div', { 'class': 'selected-view' });
    into.appendChild(body);
    function redraw() {
      while (body.firstChild) body.removeChild(body.firstChild);
      show(select.value, body);
      Array.prototype.forEach.call(body.querySelectorAll('.table-wrap'), function (w) { if (w.fit) w.fit(); });
    }
    // A deep link (report.html#tab=memory&host=worker-1) picks the host.
    if ((cls || 'host-select') === 'host-select' && WANT_HOST !== null) {
      choices.forEach(function (c) { if (c.name === WANT_HOST) select.value = c.name; });
    }
    select.addEventListener('change', redraw);
    redraw();
    return select;
  }
  function hostChoices(hosts, pod) {
    var out = pod ? [{ name: '', label: 'the pod (' + hosts.length + ' host' + (hosts.length === 1 ? '' : 's') + ')' }] : [];
    hosts.forEach(function (h) { out.push({ name: h, label: h }); });
    return out;
  }
  function byHost(list, host) {
    for (var i = 0; i < list.length; i++) if (list[i].host === host) return list[i];
    return null;
  }
  function warningsOf(d, sec) {
    if (!d.warnings || d.warnings.length === 0) return;
    sec.appendChild(el('h2', null, 'Warnings'));
    var ul = el('ul', { 'class': 'tool-warnings' });
    d.warnings.forEach(function (w) { ul.appendChild(el('li', null, w)); });
    sec.appendChild(ul);
  }

  // --- The tabs ------------------------------------------------------------------------------

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
      function stepStats(s, r, id) {
        var text = s.steps === 0 ? 'Step time: no complete steps.' :
          'Step time: average ' + ms(s.average) + ', standard deviation ' + ms(s.stddev) +
          ', min ' + ms(s.min) + ', max ' + ms(s.max) + '. ';
        text += r ? 'Input wait across devices: ' + P.pct(r.min_pct) + ' (' + r.min_at + ') to ' +
          P.pct(r.max_pct) + ' (' + r.max_at + ') of step time.' : 'Input wait across devices: no device in the steps.';
        return note(text, null, id);
      }
      function categories(avg, stepMs, into, id) {
        var rows = d.categories.map(function (c) {
          return { category: c, ms: avg[c], pct: stepMs > 0 ? 100 * avg[c] / stepMs : 0 };
        });
        into.appendChild(table([['category', 'category'], ['ms', 'mean per step'], ['pct', 'share']], rows, id));
      }
      var hosts = d.per_host.map(function (h) { return h.host; });
      sec.appendChild(el('p', null, 'Mean step ' + ms(d.pod.average_step_ms) + ' over ' + P.count(d.pod.steps) +
        ' host-steps (each host\u2019s complete steps, ' + hosts.length + ' host' + (hosts.length === 1 ? '' : 's') +
        '); device compute in 16-bit: ' + P.pct(d.pod.compute_16bit_pct) + '.'));
      sec.appendChild(stepStats(d.pod.step_time_ms, d.pod.input_wait_range, 'tool-overview-step-stats'));
      categories(d.pod.average_ms, d.pod.average_step_ms, sec, 'tool-overview-categories');
      selector('host', hostChoices(hosts, false), sec, function (name, body) {
        var h = byHost(d.per_host, name);
        if (!h) return;
        var env = h.environment;
        body.appendChild(el('h2', null, h.host));
        body.appendChild(note([env.framework, env.devices.length + ' device(s)',
          env.devices.length ? env.devices[0].name : '',
          env.devices.length && env.devices[0].device_type ? env.devices[0].device_type : '',
          env.cuda_version ? 'CUDA ' + env.cuda_version : '',
          env.driver_version ? 'driver ' + env.driver_version : ''].filter(Boolean).join(', ')));
        body.appendChild(stepStats(h.step_time_ms, h.input_wait_range));
        stacked(d.categories, h.steps, body);
        var two = chartBoxes(body, 2);
        barChart(h.top_kernels, 'name', 'self_ms', 'top kernels by time', two[0]);
        barChart(h.top_ops, 'name', 'self_ms', 'top ops by self time', two[1]);
        if (h.input_by_device.length > 0) {
          body.appendChild(table([['device', 'device'], ['input_ms', 'waits for input'],
            ['pct', 'of step time']], h.input_by_device));
        }
        body.appendChild(table([['name', 'top kernel'], ['self_ms', 'time'], ['pct', 'share'],
          ['cum_pct', 'cumulative']], h.top_kernels));
        body.appendChild(table([['name', 'top op'], ['category', 'category'], ['self_ms', 'self time'],
          ['pct', 'share'], ['cum_pct', 'cumulative']], h.top_ops));
      });
    },
    kernel_stats: function (d, sec) {
      sec.appendChild(el('h2', null, 'GPU kernel stats'));
      if (d.kernels.length === 0) {
        sec.appendChild(note('No GPU kernels in the trace (a CPU-only or TPU run, or device tracing ' +
          'was off).', null, 'tool-kernels-none'));
        return;
      }
      selector('host', hostChoices(d.hosts, true), sec, function (name, body) {
        var v = name === '' ? d : byHost(d.per_host, name);
        if (!v) return;
        barChart(v.kernels, 'kernel', 'total_us', 'top kernels by total time' +
          (name ? ' on ' + name : ' in the pod'), chartBoxes(body, 1)[0]);
        body.appendChild(el('h2', null, 'Top kernels by total time'));
        body.appendChild(table([['kernel', 'kernel'], ['total_us', 'total'], ['pct', 'share']],
          v.top_kernels, 'tool-top-kernels'));
        body.appendChild(el('h2', null, 'All kernels'));
        body.appendChild(table([['kernel', 'kernel'], ['op', 'op'], ['occurrences', 'count'],
          ['total_us', 'total'], ['pct', 'share'], ['cum_pct', 'cumulative'], ['avg_us', 'mean'],
          ['min_us', 'min'], ['max_us', 'max'], ['registers_per_thread', 'regs'],
          ['shared_memory_bytes', 'shared memory'], ['grid', 'grid'], ['block', 'block'],
          ['occupancy_pct', 'occupancy'], ['tensor_core_eligible', 'TC eligible'],
          ['tensor_core_used', 'TC used']], v.kernels, 'tool-kernels'));
      });
    },
    op_stats: function (d, sec) {
      selector('host', hostChoices(d.hosts, true), sec, function (name, body) {
        var v = name === '' ? d : byHost(d.per_host, name);
        if (!v) return;
        var cols = [['name', 'name'], ['type', 'type'], ['occurrences', 'count'],
          ['device_self_us', 'device self'], ['device_self_pct', 'device self share'],
          ['device_self_cum_pct', 'device cumulative'], ['device_total_us', 'device total'],
          ['host_self_us', 'host self'], ['host_self_pct', 'host self share'],
          ['host_self_cum_pct', 'host cumulative'], ['host_total_us', 'host total']];
        var peak = v.peak_teraflops_per_second === undefined ? d.peak_teraflops_per_second : v.peak_teraflops_per_second;
        if (peak !== null && peak !== undefined) cols.push(['flops_utilization_pct', 'FLOPS utilization']);
        var ops = v.by_op || [];
        var key = ops.some(function (r) { return r.device_self_us > 0; }) ? 'device_self_us' : 'host_self_us';
        if (ops.length > 0) {
          barChart(ops, 'name', key, 'top ops by ' + (key === 'device_self_us' ? 'device' : 'host') +
            ' self time' + (name ? ' on ' + name : ' in the pod'), chartBoxes(body, 1)[0]);
        }
        body.appendChild(note('Idle: host ' + us(v.idle.host_us) + ', devices ' + us(v.idle.device_us) +
          '; ' + (d.include_idle ? 'counted as the IDLE row (--include-idle).' :
            'not counted in the percentages (--include-idle counts it).'), null, 'tool-ops-idle'));
        [['device_by_type', 'Device self time by op type'], ['device_by_op', 'Device self time by op'],
          ['host_by_type', 'Host self time by op type'], ['host_by_op', 'Host self time by op']]
          .forEach(function (p) {
            body.appendChild(el('h2', null, p[1] + ' (top 10 and other)'));
            if (v.pie[p[0]].length === 0) {
              body.appendChild(note('No self time on this side in the trace.'));
              return;
            }
            // The donut beside its table (the table keeps the exact numbers).
            var row = el('div', { 'class': 'chart-row pie-row' });
            body.appendChild(row);
            var pie = el('div', { 'class': 'chart pie' });
            row.appendChild(pie);
            var cell = el('div', { 'class': 'pie-table' });
            row.appendChild(cell);
            pieChart(v.pie[p[0]], p[1] + ': share of self time, top 10 and other',
              'tool-pie-chart-' + p[0], pie);
            cell.appendChild(table([['name', 'name'], ['self_us', 'self time'], ['pct', 'share']],
              v.pie[p[0]], 'tool-pie-' + p[0]));
          });
        body.appendChild(el('h2', null, 'Ops'));
        body.appendChild(table(cols, ops, 'tool-ops'));
        body.appendChild(el('h2', null, 'Op types'));
        body.appendChild(table(cols, v.by_type, 'tool-op-types'));
      });
    },
    input_pipeline: function (d, sec) {
      selector('host', hostChoices(d.per_host.map(function (h) { return h.host; }), false), sec, function (name, body) {
        var h = byHost(d.per_host, name);
        if (!h) return;
        body.appendChild(el('h2', null, h.host + ': input ' + P.pct(h.input_pct) + ' of step time'));
        if (h.bottleneck) body.appendChild(el('p', { 'class': 'bottleneck' }, 'Bottleneck: ' + h.bottleneck));
        body.appendChild(table([['step', 'step'], ['step_time_ms', 'step time'],
          ['device_input_ms', 'device waits for input'], ['host_input_ms', 'host input']], h.steps));
        var tf = h.tf_data;
        if (tf.missing) {
          body.appendChild(note('tf.data bottleneck analysis: ' + tf.missing + '.', 'tf-data-missing'));
        } else {
          body.appendChild(el('h2', null, h.host + ': tf.data bottleneck analysis'));
          body.appendChild(note(P.count(tf.calls) + ' root iterator call(s), ' + P.count(tf.slow_calls) +
            ' slow (> 50 \u00b5s, ' + P.pct(tf.slow_pct) + '). ' +
            (tf.slowest ? 'Slowest execution: ' + tf.slowest.root + ', ' + us(tf.slowest.duration_us) +
              '; critical path ' + tf.critical_path.join(' > ') + '; bottleneck ' + tf.bottleneck + '.' : ''),
            null, 'tool-tf-data-summary'));
          body.appendChild(table([['name', 'iterator (long name)'], ['parent', 'input of'],
            ['count', 'count'], ['self_us', 'self'], ['total_us', 'total'], ['max_us', 'max'],
            ['slowest_self_us', 'self in the slowest'], ['critical_path', 'critical path']],
            tf.graph, 'tool-tf-data-graph'));
        }
        if (h.stages.length === 0 && !(h.h2d_copy_ms > 0)) {
          body.appendChild(note('No tf.data iterator, DataLoader or host-to-device copy events in this ' +
            'trace: the host side of the input pipeline is not recorded.'));
          return;
        }
        body.appendChild(table([['category', 'host input category'], ['ms', 'self time']],
          Object.keys(h.categories_ms).map(function (k) { return { category: k, ms: h.categories_ms[k] }; }),
          'tool-input-categories'));
        if (h.stages.length === 0) return;
        body.appendChild(table([['name', 'stage'], ['category', 'category'], ['self_ms', 'self time'],
          ['self_pct', 'self share'], ['total_ms', 'total'], ['count', 'count'], ['max_ms', 'max'],
          ['consumer', 'training loop'], ['critical_path', 'critical path']], h.stages));
      });
    },
    memory: function (d, sec) {
      var hosts = d.hosts.filter(function (h) {
        return d.devices.some(function (m) { return m.host === h; });
      });
      if (d.devices.length === 0 || (d.hosts_without_events || []).length > 0) {
        var without = d.hosts_without_events || d.hosts;
        sec.appendChild(note((d.devices.length === 0 ? 'No memory allocation events in the trace' :
          'No memory allocation events on ' + without.join(', ')) + '. ' + (d.how_to_record || '') + '.',
          'memory-none', 'tool-memory-none'));
      }
      if (hosts.length === 0) return;
      selector('host', hostChoices(hosts, false), sec, function (name, body) {
        var devices = d.devices.filter(function (m) { return m.host === name; });
        // One device at a time: its facts, its timelines side by side, its tables.
        selector('device', devices.map(function (m, k) {
          return { name: String(k), label: (m.device < 0 ? 'host memory' : 'device ' + m.device) +
            ', peak ' + P.bytes(m.peak_bytes) };
        }), body, function (k, view) {
          var m = devices[Number(k)];
          if (!m) return;
          view.appendChild(el('h2', null, m.host + (m.device < 0 ? ' host memory' : ' device ' + m.device) +
            ': peak ' + P.bytes(m.peak_bytes) + ' at +' + ms(m.peak_time_ms)));
          var facts = [P.count(m.allocations) + ' allocations, ' + P.count(m.frees) + ' frees, ' +
            P.count(m.live_at_peak) + ' live at the peak'];
          if (m.capacity_bytes !== null) facts.push('capacity ' + P.bytes(m.capacity_bytes) + ' (' + m.capacity_from + ')');
          if (m.peak_heap_since_start_bytes !== null) facts.push('peak heap since start ' + P.bytes(m.peak_heap_since_start_bytes));
          if (m.at_peak) {
            facts.push('at the peak: stack ' + P.bytes(m.at_peak.stack_bytes) + ', heap ' +
              P.bytes(m.at_peak.heap_bytes) + ', free ' + P.bytes(m.at_peak.free_bytes));
          }
          if (m.fragmentation_at_peak !== null) facts.push('fragmentation at the peak ' + P.fixed(m.fragmentation_at_peak, 3));
          view.appendChild(el('p', { 'class': 'memory-facts' }, facts.join('; ')));
          var frag = m.fragmentation_timeline.length > 0;
          var cells = chartBoxes(view, frag ? 2 : 1);
          cells[0].appendChild(el('div', { 'class': 'note' }, 'memory in use over time'));
          lineChart(m.timeline, 'bytes', 'memory-chart', cells[0]);
          if (frag) {
            cells[1].appendChild(el('div', { 'class': 'note' },
              'fragmentation over time (1 - largest free chunk / total free: a ratio)'));
            lineChart(m.fragmentation_timeline, 'ratio', 'fragmentation-chart', cells[1],
              m.timeline.length ? m.timeline[0][0] : undefined);
          }
          if (m.by_op_at_peak.length > 0) {
            view.appendChild(el('h2', null, 'Memory at the peak by op'));
            view.appendChild(table([['op', 'op'], ['allocations', 'allocations'], ['bytes', 'size'],
              ['requested_bytes', 'requested'], ['region_type', 'region'], ['data_type', 'data type'],
              ['shape', 'shape']], m.by_op_at_peak, 'tool-memory-by-op'));
          }
          if (m.largest_live_at_peak.length > 0) {
            view.appendChild(el('h2', null, 'Largest allocations live at the peak'));
            view.appendChild(table([['bytes', 'size'], ['requested_bytes', 'requested'], ['op', 'op'],
              ['step', 'step'], ['region_type', 'region'], ['data_type', 'data type'], ['shape', 'shape'],
              ['since_ms', 'allocated at (since the start)'], ['address', 'address', hex]], m.largest_live_at_peak));
          }
          m.missing.forEach(function (s) { view.appendChild(note('Not in this trace: ' + s, 'memory-missing')); });
        }, 'device-select');
      });
    },
    timeline: function (d, sec) {
      var IDLE_COLORS = ['#e15759', '#f28e2b', '#bab0ac'];
      function summary(t, into, where) {
        into.appendChild(el('h2', null, 'Communication hidden under computation' + where));
        into.appendChild(note(t.overlap_pct === null ? 'No communication kernels.' :
          P.pct(t.overlap_pct) + ' of the communication time (' + ms(t.communication_ms) +
          ') ran while computation kernels ran (' + ms(t.overlap_ms) + ' overlapped; computation ' +
          ms(t.computation_ms) + ').', 'timeline-overlap'));
        shareBar([{ name: 'hidden under computation', value: t.overlap_ms },
          { name: 'exposed', value: Math.max(0, t.communication_ms - t.overlap_ms) }],
          ['#59a14f', '#e15759'], 'overlap-chart', chartBoxes(into, 1)[0], ms);
        into.appendChild(el('h2', null, 'Device idle time by cause' + where));
        into.appendChild(note('Between the events of each stream: host wait (the next event was ' +
          'launched after the stream ran dry), kernel wait (a gap under ' + us(d.thresholds.kernel_wait_us) +
          ' between back-to-back launches), other (waiting on another stream, a synchronization, ...).'));
        shareBar([{ name: 'host wait', value: t.idle.host_wait_ms },
          { name: 'kernel wait', value: t.idle.kernel_wait_ms }, { name: 'other', value: t.idle.other_ms }],
          IDLE_COLORS, 'idle-chart', chartBoxes(into, 1)[0], ms);
        var l = t.launch_delay;
        into.appendChild(el('h2', null, 'Kernel launch delay' + where));
        if (l.launches === 0) {
          into.appendChild(note('No launch call linked to its device event in this trace.'));
          return;
        }
        into.appendChild(note(P.count(l.launches) + ' launches: from the launch call\u2019s end to the ' +
          'start on the device, mean ' + us(l.mean_us) +
          (l.p50_us === null ? '' : ', p50 ' + us(l.p50_us) + ', p90 ' + us(l.p90_us) + ', p99 ' + us(l.p99_us)) +
          ', max ' + us(l.max_us) + '; ' + P.count(l.outliers) + ' over ' + us(d.thresholds.launch_delay_outlier_us) +
          ', ' + P.count(l.slow_calls) + ' launch calls over ' + us(d.thresholds.slow_launch_call_us) + ', ' +
          P.count(l.shorter_than_launch) + ' device events shorter than their launch call.', 'timeline-launch'));
        var lo = null;
        columnChart(l.histogram.map(function (b) {
          var label = b.below_us === null ? '\u2265 ' + us(lo) : (lo === null ? '< ' + us(b.below_us) : us(lo) + '\u2013');
          var title = (b.below_us === null ? 'at least ' + us(lo) : (lo === null ? 'below ' + us(b.below_us) :
            us(lo) + ' to ' + us(b.below_us))) + ': ' + P.count(b.count) + ' launches';
          lo = b.below_us;
          return { label: label, value: b.count, title: title };
        }), 'launch-delay-chart', chartBoxes(into, 1)[0], 'launch-to-start delay (launches per bucket)');
      }
      summary(d.pod, sec, ' (the pod)');
      selector('host', hostChoices(d.per_host.map(function (h) { return h.host; }), false), sec, function (name, body) {
        var h = byHost(d.per_host, name);
        if (!h) return;
        summary(h, body, ' on ' + h.host);
        body.appendChild(el('h2', null, 'Streams on ' + h.host));
        body.appendChild(table([['device', 'device'], ['stream', 'stream'], ['events', 'events'],
          ['busy_ms', 'busy'], ['host_wait_ms', 'host wait'], ['kernel_wait_ms', 'kernel wait'],
          ['other_ms', 'other idle'], ['queue_mean', 'mean queue', function (v) { return P.fixed(v, 2) + ' queued'; }],
          ['queue_p50', 'median queue'], ['queue_max', 'max queue']], h.streams, 'tool-timeline-streams'));
      });
    }
  };

  // --- Tabs ----------------------------------------------------------------------------------

  var header = document.querySelector('header');
  var tabs = el('nav', { id: 'tabs' });
  header.parentNode.insertBefore(tabs, header.nextSibling);
  var breakdownNodes = Array.prototype.slice.call(document.querySelectorAll('body > section'));
  var panes = [{ name: 'breakdown', nodes: breakdownNodes }];
  var footer = document.getElementById('footer');
  nodes.forEach(function (n) {
    var d = JSON.parse(n.textContent);
    var sec = el('section', { id: 'tool-' + d.tool, 'class': 'tool-tab' });
    footer.parentNode.insertBefore(sec, footer);
    // Drawn while shown (so that its charts measure the width they get), then hidden: one
    // synchronous pass, nothing is painted in between.
    if (draw[d.tool]) draw[d.tool](d, sec);
    warningsOf(d, sec);
    sec.hidden = true;
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
