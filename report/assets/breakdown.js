(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  var CAT_COLORS = { compute: '#4e79a7', output: '#f28e2b', d2d: '#edc948', collectives: '#e15759',
    input: '#b07aa1', host: '#59a14f', idle: '#c9c3bf' };
  var HOST_COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
    '#7f7f7f', '#bcbd22', '#17becf'];
  var MAX_COLORED_HOSTS = 10;

  var P = window.profctl;
  function fmt(v) { return P.fixed(v, 3); }
  // The width a chart gets: its box's content width (a chart is as wide as its card).
  function widthOf(box) { return Math.max(320, (box.clientWidth || 1200) - 12); }
  function stepLabel(s) { return s < 0 ? 'whole window' : String(s); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function titled(node, text) { node.appendChild(svg('title', null, text)); return node; }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  // `name` in at most n characters, elided in the middle ("void at::nat\u2026float, 4>)").
  function elide(name, n) {
    name = String(name);
    if (name.length <= n) return name;
    var head = Math.ceil((n - 1) / 2);
    return name.slice(0, head) + '\u2026' + name.slice(name.length - (n - 1 - head));
  }
  // A table cell for a name: elided to n characters, the whole name on hover.
  function nameCell(name, n, cls) {
    var text = String(name);
    var c = { text: elide(text, n), cls: cls || 'name' };
    if (text.length > n) c.title = text;
    return c;
  }
  // A relative link, each segment percent-encoded; null for absolute paths and URLs.
  function safeHref(path) {
    if (typeof path !== 'string' || path === '' || path.charAt(0) === '/' ||
        path.indexOf('\\') >= 0 || /^[A-Za-z][A-Za-z0-9+.-]*:/.test(path)) return null;
    return path.split('/').map(encodeURIComponent).join('/');
  }
  function fileItem(path) {
    var li = el('li');
    var href = safeHref(path);
    if (href === null) { li.textContent = String(path) + ' (not linked: not a relative path)'; }
    else { li.appendChild(el('a', { href: href }, path)); }
    return li;
  }
  function niceTicks(lo, hi, count) {
    var span = hi - lo;
    if (!(span > 0)) span = Math.abs(hi) || 1;
    var raw = span / count;
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; })
        .find(function (s) { return s >= raw; }) || 10 * mag;
    var first = Math.floor(lo / step) * step;
    var ticks = [];
    for (var t = first; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
    if (ticks[ticks.length - 1] < hi) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
    return ticks;
  }

  var data = JSON.parse(document.getElementById('breakdown-data').textContent);
  var series = JSON.parse(document.getElementById('series-data').textContent);
  var sampledSteps = data.steps.length < series.steps_total;
  var cats = data.categories;
  var hostNames = data.hosts.map(function (h) { return h.host; });
  var hostIndex = {};
  hostNames.forEach(function (h, i) { hostIndex[h] = i; });
  data.steps.forEach(function (s) {
    s.hosts.forEach(function (h) {
      if (!(h.host in hostIndex)) { hostIndex[h.host] = hostNames.length; hostNames.push(h.host); }
    });
  });
  var slow = {};
  data.consistently_slow.forEach(function (h) { slow[h] = true; });

  // --- Header and the answer ---
  var pageNode = document.getElementById('page-data');
  var page = pageNode ? JSON.parse(pageNode.textContent) : {};
  // A snapshot's past: whole seconds as "30 s", else in ms.
  var past = !(page.snapshot_past_ms > 0) ? '' : page.snapshot_past_ms % 1000 === 0 ?
      P.fixed(page.snapshot_past_ms / 1000, 0) + ' s' : P.duration(page.snapshot_past_ms, 'ms');
  if (past) {
    // A snapshot (capture --last) shows the past, not a window that was recorded from then on.
    var banner = document.getElementById('snapshot');
    banner.hidden = false;
    banner.textContent = 'Snapshot: the past ' + past + ' of every host, taken at one instant ' +
        '(profctl capture --last).';
  }
  document.getElementById('meta').textContent =
      (past ? 'snapshot of the past ' + past + ' \u00b7 ' : '') +
      (data.session ? 'session ' + data.session + ' \u00b7 ' : '') + 'from ' + data.source + ' \u00b7 ' +
      data.pod.hosts + ' hosts \u00b7 ' + data.pod.steps + ' steps \u00b7 pod step time mean ' +
      fmt(data.pod.step_time.mean_ms) + ' ms, p50 ' + fmt(data.pod.step_time.p50_ms) + ' ms, p90 ' +
      fmt(data.pod.step_time.p90_ms) + ' ms';
  document.getElementById('footer').textContent = 'Generated by ' + data.producer +
      ' \u00b7 pod_step_breakdown.json schema version ' + data.schema_version;

  var answer = document.getElementById('answer');
  function para(parts, cls) {
    var p = el('p', cls ? { class: cls } : null);
    parts.forEach(function (x) { p.appendChild(typeof x === 'string' ? document.createTextNode(x) : x); });
    answer.appendChild(p);
  }
  // Every verdict is the analysis's sentence (pod_step_breakdown.json "verdict"), with its
  // confidence; a found straggler's and input-bound host's sentences start with the host. The
  // hang (found, or judged and cannot tell) is the page's own section above.
  var v = data.verdict;
  function hostSentence(verdict, cls, id) {
    para([el('span', { class: cls, id: id }, verdict.host), verdict.text.slice(verdict.host.length)]);
  }
  if (v.straggler.finding === 'found') {
    hostSentence(v.straggler, 'straggler', 'answer-straggler');
    if (v.straggler.why) para(['Step ' + stepLabel(v.straggler.example_step) + ': ' + v.straggler.why], 'why');
  } else {
    para([v.straggler.text]);
  }
  if (v.slow_device.finding === 'found' || (v.slow_device.finding === 'none' && v.slow_device.of_steps > 0)) {
    para([v.slow_device.text]);
  }
  if (v.input_bound.finding === 'found') {
    hostSentence(v.input_bound, 'host-name', 'answer-input');
  } else if (data.pod.hosts > 0) {
    para([v.input_bound.text]);
  }
  if (data.straggler_changes.length > 0) {
    var shown = data.straggler_changes.slice(0, 20).map(stepLabel).join(', ');
    para(['The straggler changes at ' + data.straggler_changes.length + ' step' +
        (data.straggler_changes.length === 1 ? '' : 's') + ': ' + shown +
        (data.straggler_changes.length > 20 ? ', \u2026' : '') + '.']);
  } else if (v.straggler.finding === 'found') {
    para(['The straggler never changes.']);
  }
  if (v.consistently_slow.finding !== 'cannot_tell') para([v.consistently_slow.text]);
  if (v.stands_out.finding === 'found') para([v.stands_out.text]);
  if (v.what_if.finding !== 'cannot_tell' && v.what_if.steps > 0 &&
      v.what_if.median_pace_cost_ms_per_step > 0) {
    para([v.what_if.text]);
  }
  if (v.bottleneck.finding === 'found') para([v.bottleneck.text]);
  if (v.evidence.warmup_steps.length > 0) {
    para(['Warm-up steps (not judged, left out of the means): ' +
        v.evidence.warmup_steps.map(stepLabel).join(', ') + '.']);
  }

  // --- Stacked bars, one step ---
  var legend = document.getElementById('category-legend');
  cats.forEach(function (c) {
    var item = el('span');
    item.appendChild(el('span', { class: 'sw', style: 'background:' + (CAT_COLORS[c] || '#888') }));
    item.appendChild(document.createTextNode(c));
    legend.appendChild(item);
  });
  var yMaxBars = 0;
  data.steps.forEach(function (s) {
    s.hosts.forEach(function (h) { yMaxBars = Math.max(yMaxBars, h.step_time_ms); });
  });
  var barTicks = niceTicks(0, yMaxBars, 5);
  var barTop = barTicks[barTicks.length - 1] || 1;
  var slider = document.getElementById('step-slider');
  var current = -1;

  function drawBars(index) {
    var box = document.getElementById('bars');
    clear(box);
    var caption = document.getElementById('step-caption');
    clear(caption);
    if (data.steps.length === 0) { box.textContent = 'No steps.'; return; }
    current = index;
    slider.value = String(index);
    var step = data.steps[index];
    document.getElementById('step-label').textContent =
        'step ' + stepLabel(step.step) + ' (' + (index + 1) + ' of ' + data.steps.length + ')';
    var n = hostNames.length;
    var left = 64, right = 16, top = 24, bottom = 96, plotH = 300;
    var width = widthOf(box);
    var slot = (width - left - right) / Math.max(n, 1);
    var barW = Math.min(slot * 0.8, 96);
    var root = svg('svg', { width: width, height: top + plotH + bottom, id: 'bars-svg' });
    var y = function (v) { return top + plotH - plotH * v / barTop; };
    var grid = svg('g', { class: 'grid' });
    var axis = svg('g', { class: 'axis' });
    barTicks.forEach(function (t) {
      grid.appendChild(svg('line', { x1: left, x2: width - right, y1: y(t), y2: y(t) }));
      axis.appendChild(svg('text', { x: left - 6, y: y(t) + 4, 'text-anchor': 'end' }, t));
    });
    axis.appendChild(svg('text', { x: 12, y: top + plotH / 2, transform: 'rotate(-90 12 ' +
        (top + plotH / 2) + ')', 'text-anchor': 'middle' }, 'ms'));
    root.appendChild(grid);
    root.appendChild(axis);
    var byHost = {};
    step.hosts.forEach(function (h) { byHost[h.host] = h; });
    var labelEvery = Math.ceil(n / Math.max(1, Math.floor((width - left - right) / 14)));
    var stragglerAt = step.straggler === null ? -1 : hostNames.indexOf(step.straggler);
    var bars = svg('g', { id: 'bars-g' });
    hostNames.forEach(function (name, i) {
      var x = left + i * slot + (slot - barW) / 2;
      var w = barW;
      var h = byHost[name];
      var isStraggler = step.straggler !== null && name === step.straggler;
      if (h) {
        var acc = 0;
        cats.forEach(function (c) {
          var v = h.categories_ms[c];
          if (!(v > 0)) return;
          var r = svg('rect', { class: 'seg', 'data-cat': c, x: x, width: w, y: y(acc + v),
            height: Math.max(0, y(acc) - y(acc + v)), fill: CAT_COLORS[c] || '#888' });
          titled(r, name + ', step ' + stepLabel(step.step) + '\n' + c + ': ' + fmt(v) + ' ms of ' +
              fmt(h.step_time_ms) + ' ms');
          bars.appendChild(r);
          acc += v;
        });
        if (isStraggler) {
          var cx = x + w / 2, ty = y(h.step_time_ms) - 4;
          titled(bars.appendChild(svg('path', { class: 'straggler-mark', fill: '#c5221f',
            d: 'M' + (cx - 5) + ' ' + (ty - 8) + 'L' + (cx + 5) + ' ' + (ty - 8) + 'L' + cx + ' ' + ty + 'Z' })),
            'straggler: ' + name);
        }
      }
      // Every labelEvery-th host is labelled, and always the straggler (its neighbours give way).
      var nearStraggler = stragglerAt >= 0 && i !== stragglerAt && Math.abs(i - stragglerAt) < labelEvery;
      if ((i % labelEvery === 0 && !nearStraggler) || isStraggler) {
        var lx = x + w / 2, ly = top + plotH + 10;
        var label = svg('text', { x: lx, y: ly, 'text-anchor': 'end',
          transform: 'rotate(-45 ' + lx + ' ' + ly + ')', class: isStraggler ? 'straggler' : '' },
          elide(name, 18));
        bars.appendChild(titled(label, name));
      }
    });
    root.appendChild(bars);
    if (step.hosts.length > 0) {
      var py = y(step.pod_step_time_ms);
      titled(root.appendChild(svg('line', { x1: left, x2: width - right, y1: py, y2: py,
        stroke: '#202124', 'stroke-dasharray': '4 3' })), 'pod step time ' + fmt(step.pod_step_time_ms) + ' ms');
    }
    box.appendChild(root);
    caption.appendChild(document.createTextNode('Step ' + stepLabel(step.step) + ': pod step time '));
    caption.appendChild(el('b', { id: 'caption-pod-time' }, fmt(step.pod_step_time_ms) + ' ms'));
    caption.appendChild(document.createTextNode(', spread ' + fmt(step.spread_ms) + ' ms, bottleneck ' +
        step.bottleneck + '. ' + (step.why || '')));
    Array.prototype.forEach.call(document.querySelectorAll('#stragglers tbody tr'), function (tr) {
      tr.classList.toggle('selected', Number(tr.getAttribute('data-index')) === index);
    });
  }
  slider.max = String(Math.max(0, data.steps.length - 1));
  slider.addEventListener('input', function () { drawBars(Number(slider.value)); });
  document.getElementById('step-prev').addEventListener('click', function () {
    if (current > 0) drawBars(current - 1);
  });
  document.getElementById('step-next').addEventListener('click', function () {
    if (current + 1 < data.steps.length) drawBars(current + 1);
  });

  // --- Step time (or one category) over steps, per host ---
  var metricSelect = document.getElementById('line-metric');
  metricSelect.appendChild(el('option', { value: '' }, 'step time'));
  cats.forEach(function (c) { metricSelect.appendChild(el('option', { value: c }, c)); });
  function metricOf(h, metric) { return metric === '' ? h.step_time_ms : h.categories_ms[metric]; }
  function drawLines(metric) {
    var box = document.getElementById('lines');
    var hl = document.getElementById('host-legend');
    clear(box);
    clear(hl);
    if (data.steps.length === 0) { box.textContent = 'No steps.'; return; }
    var what = metric === '' ? 'step time' : metric;
    var lo = Infinity, hi = -Infinity;
    data.steps.forEach(function (s) {
      s.hosts.forEach(function (h) {
        var v = metricOf(h, metric);
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      });
    });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    var pad = Math.max((hi - lo) * 0.08, hi * 0.005, 0.001);
    var ticks = niceTicks(Math.max(0, lo - pad), hi + pad, 5);
    var y0 = ticks[0], y1 = ticks[ticks.length - 1];
    if (!(y1 > y0)) y1 = y0 + 1;
    var S = data.steps.length;
    var left = 64, right = 28, top = 16, bottom = 40, plotH = 280;
    var width = widthOf(box);
    var plotW = width - left - right;
    // A sample of the steps (html_report.h) is placed by step number, so its gaps show.
    var s0 = data.steps[0].step, s1 = data.steps[S - 1].step;
    var byStep = sampledSteps && s1 > s0;
    var x = function (i) {
      if (S === 1) return left + plotW / 2;
      return left + plotW * (byStep ? (data.steps[i].step - s0) / (s1 - s0) : i / (S - 1));
    };
    var y = function (v) { return top + plotH - plotH * (v - y0) / (y1 - y0); };
    var root = svg('svg', { width: width, height: top + plotH + bottom, id: 'lines-svg' });
    var grid = svg('g', { class: 'grid' });
    var axis = svg('g', { class: 'axis' });
    ticks.forEach(function (t) {
      grid.appendChild(svg('line', { x1: left, x2: left + plotW, y1: y(t), y2: y(t) }));
      axis.appendChild(svg('text', { x: left - 6, y: y(t) + 4, 'text-anchor': 'end' }, t));
    });
    // A step's label where it has room: at least the widest label's width (about 7 px a
    // character) after the last one drawn. Spaced by position, not by index: a sample of the
    // steps is placed by step number, and its slowest steps may lie side by side.
    var widest = 0;
    data.steps.forEach(function (s) { widest = Math.max(widest, stepLabel(s.step).length); });
    var gap = Math.max(40, widest * 7 + 12);
    var lastX = -Infinity;
    data.steps.forEach(function (s, i) {
      if (x(i) - lastX >= gap) {
        lastX = x(i);
        axis.appendChild(svg('text', { x: x(i), y: top + plotH + 16, 'text-anchor': 'middle' }, stepLabel(s.step)));
      }
    });
    axis.appendChild(svg('text', { x: left + plotW / 2, y: top + plotH + 34, 'text-anchor': 'middle' }, 'step'));
    axis.appendChild(svg('text', { x: 12, y: top + plotH / 2, transform: 'rotate(-90 12 ' +
        (top + plotH / 2) + ')', 'text-anchor': 'middle' }, what + ' (ms)'));
    root.appendChild(grid);
    root.appendChild(axis);
    // Colored: every host when few; else the most frequent stragglers, the others grey.
    var colored = {};
    var order = data.hosts.slice().sort(function (a, b) { return b.straggler_steps - a.straggler_steps; });
    var pick = hostNames.length <= MAX_COLORED_HOSTS ? hostNames :
        order.slice(0, 5).filter(function (h) { return h.straggler_steps > 0; }).map(function (h) { return h.host; });
    pick.forEach(function (h, i) { colored[h] = HOST_COLORS[i % HOST_COLORS.length]; });
    var series = {};
    data.steps.forEach(function (s, i) {
      s.hosts.forEach(function (h) {
        (series[h.host] = series[h.host] || []).push([i, metricOf(h, metric)]);
      });
    });
    var drawOrder = hostNames.filter(function (h) { return !(h in colored); }).concat(pick);
    drawOrder.forEach(function (name) {
      var pts = series[name] || [];
      if (pts.length === 0) return;
      var d = '', prev = -2;
      pts.forEach(function (p) { d += (p[0] === prev + 1 ? 'L' : 'M') + x(p[0]) + ' ' + y(p[1]); prev = p[0]; });
      var color = colored[name] || '#c0c0c0';
      titled(root.appendChild(svg('path', { class: 'host-line', d: d, fill: 'none', stroke: color,
        'stroke-width': name in colored ? 2 : 1 })), name);
      if (S <= 60 && name in colored) {
        pts.forEach(function (p) {
          titled(root.appendChild(svg('circle', { cx: x(p[0]), cy: y(p[1]), r: 2.5, fill: color })),
              name + ', step ' + stepLabel(data.steps[p[0]].step) + ': ' + what + ' ' + fmt(p[1]) + ' ms');
        });
      }
    });
    if (metric === '') {
      var pod = '';
      data.steps.forEach(function (s, i) { pod += (i === 0 ? 'M' : 'L') + x(i) + ' ' + y(s.pod_step_time_ms); });
      titled(root.appendChild(svg('path', { d: pod, fill: 'none', stroke: '#202124', 'stroke-width': 1,
        'stroke-dasharray': '4 3' })), 'pod step time');
    }
    data.steps.forEach(function (s, i) {
      if (s.straggler === null) return;
      var h = s.hosts.find(function (e) { return e.host === s.straggler; });
      if (!h) return;
      titled(root.appendChild(svg('circle', { class: 'straggler-point', cx: x(i), cy: y(metricOf(h, metric)),
        r: 4.5, fill: 'none', stroke: '#c5221f', 'stroke-width': 1.5 })),
          'step ' + stepLabel(s.step) + ': straggler ' + s.straggler + ', ' + what + ' ' +
          fmt(metricOf(h, metric)) + ' ms');
    });
    box.appendChild(root);
    pick.forEach(function (h) {
      var item = el('span');
      item.appendChild(el('span', { class: 'sw', style: 'background:' + colored[h] }));
      item.appendChild(document.createTextNode(h));
      hl.appendChild(item);
    });
    if (pick.length < hostNames.length) {
      hl.appendChild(el('span', null, (hostNames.length - pick.length) + ' other hosts in grey'));
    }
    var mark = el('span');
    mark.appendChild(el('span', { class: 'sw', style: 'background:#fff;border:1.5px solid #c5221f;border-radius:50%' }));
    mark.appendChild(document.createTextNode('straggler of the step' +
        (metric === '' ? '; dashed: pod step time' : '')));
    hl.appendChild(mark);
  }
  metricSelect.addEventListener('change', function () { drawLines(metricSelect.value); });

  // --- Tables ---
  function row(cells, header) {
    var tr = el('tr');
    cells.forEach(function (c) {
      var td = el(header ? 'th' : 'td', c.cls ? { class: c.cls } : null);
      if (c.title) td.setAttribute('title', c.title);
      if (c.node) { td.appendChild(c.node); } else { td.textContent = c.text === undefined ? '' : String(c.text); }
      tr.appendChild(td);
    });
    return tr;
  }
  // Milliseconds with three decimals and the unit; counts grouped.
  function num(v) { return { text: typeof v === 'number' && isFinite(v) ? P.fixed(v, 3) + ' ms' : '\u2013', cls: 'num' }; }
  function cnt(v) { return { text: P.count(v), cls: 'num' }; }
  (function stragglerTable() {
    var t = document.getElementById('stragglers');
    var head = el('thead');
    head.appendChild(row([{ text: 'step', cls: 'num' }, { text: 'pod step', cls: 'num' },
      { text: 'spread', cls: 'num' }, { text: 'straggler' }, { text: 'cause' },
      { text: 'excess', cls: 'num' }, { text: 'bottleneck' }, { text: 'why' }], true));
    t.appendChild(head);
    var body = el('tbody');
    data.steps.forEach(function (s, i) {
      var tr = row([{ text: stepLabel(s.step), cls: 'num' }, num(s.pod_step_time_ms), num(s.spread_ms),
        s.straggler === null ? { text: '\u2013', cls: 'straggler' } : nameCell(s.straggler, 24, 'straggler'),
        { text: s.cause === null ? '\u2013' : s.cause },
        s.cause === null ? { text: '\u2013', cls: 'num' } : num(s.cause_excess_ms),
        { text: s.bottleneck }, { text: s.why, cls: 'why' }]);
      tr.setAttribute('data-index', String(i));
      tr.addEventListener('click', function () { drawBars(i); });
      body.appendChild(tr);
    });
    t.appendChild(body);
  })();
  (function hostTable() {
    var t = document.getElementById('hosts');
    var head = el('thead');
    var cols = [{ text: 'host' }, { text: 'steps', cls: 'num' }, { text: 'partial', cls: 'num' },
      { text: 'markers' }, { text: 'step mean', cls: 'num' }, { text: 'p50', cls: 'num' },
      { text: 'p90', cls: 'num' }];
    cats.forEach(function (c) { cols.push({ text: c, cls: 'num' }); });
    cols.push({ text: 'straggler steps', cls: 'num' }, { text: 'files' }, { text: 'warnings' });
    head.appendChild(row(cols, true));
    t.appendChild(head);
    var body = el('tbody');
    data.hosts.forEach(function (h) {
      var files = el('span');
      h.files.forEach(function (f, k) {
        var href = safeHref(f);
        var link = href === null ? el('span', null, elide(f, 22)) : el('a', { href: href }, elide(f, 22));
        if (f.length > 22) link.setAttribute('title', f);
        files.appendChild(link);
      });
      var hostCell = nameCell(h.host, 28, slow[h.host] ? 'straggler' : 'host-name');
      if (slow[h.host]) hostCell.text += ' (consistently slow)';
      var cells = [hostCell,
        cnt(h.steps), cnt(h.partial_steps),
        { text: h.has_markers ? 'yes' : 'none' }, num(h.step_time.mean_ms),
        num(h.step_time.p50_ms), num(h.step_time.p90_ms)];
      cats.forEach(function (c) { cells.push(num(h.categories[c].mean_ms)); });
      cells.push(cnt(h.straggler_steps), { node: files, cls: 'files' },
          { text: h.warnings.join('; '), cls: 'warn' });
      body.appendChild(row(cells));
    });
    t.appendChild(body);
  })();
  (function lists() {
    var w = document.getElementById('warnings');
    data.warnings.forEach(function (m) { w.appendChild(el('li', null, m)); });
    data.hosts.forEach(function (h) {
      h.warnings.forEach(function (m) { w.appendChild(el('li', null, h.host + ': ' + m)); });
    });
    if (!w.firstChild) w.appendChild(el('li', null, 'none'));
    var f = document.getElementById('files');
    f.appendChild(fileItem('pod_step_breakdown.json'));
    f.appendChild(fileItem('pod_step_breakdown.csv'));
    data.files.forEach(function (p) { f.appendChild(fileItem(p)); });
  })();

  // --- Over every step, from the series: stacked categories and the pod view ---
  var points = series.points;
  function pointLabel(p) {
    return p.first === p.last ? 'step ' + p.first : 'steps ' + p.first + '\u2013' + p.last;
  }
  // A bar's width in its slot: a 1 px gap between wide bars, none between narrow ones (stripes).
  function gapless(slot) { return slot >= 6 ? slot - 1 : slot; }
  (function stepStack() {
    var box = document.getElementById('step-stack');
    var legend = document.getElementById('stack-legend');
    cats.forEach(function (c) {
      var item = el('span');
      item.appendChild(el('span', { class: 'sw', style: 'background:' + (CAT_COLORS[c] || '#888') }));
      item.appendChild(document.createTextNode(c));
      legend.appendChild(item);
    });
    if (series.per_point > 1) {
      legend.appendChild(el('span', null, 'each bar: the mean of ' + series.per_point + ' steps'));
    }
    if (points.length === 0) { box.textContent = 'No steps.'; return; }
    var left = 64, right = 16, top = 12, plotH = 220, bottom = 36;
    var width = widthOf(box), slot = (width - left - right) / points.length;
    var hi = 0;
    points.forEach(function (p) {
      var sum = 0;
      p.categories_ms.forEach(function (v) { sum += v; });
      hi = Math.max(hi, sum);
    });
    var ticks = niceTicks(0, hi > 0 ? hi : 1, 4);
    var y1 = ticks[ticks.length - 1];
    var y = function (v) { return top + plotH - plotH * v / y1; };
    var root = svg('svg', { width: width, height: top + plotH + bottom });
    var grid = svg('g', { class: 'grid' }), axis = svg('g', { class: 'axis' });
    ticks.forEach(function (t) {
      grid.appendChild(svg('line', { x1: left, x2: width - right, y1: y(t), y2: y(t) }));
      axis.appendChild(svg('text', { x: left - 6, y: y(t) + 4, 'text-anchor': 'end' }, t));
    });
    axis.appendChild(svg('text', { x: 12, y: top + plotH / 2, transform: 'rotate(-90 12 ' +
        (top + plotH / 2) + ')', 'text-anchor': 'middle' }, 'ms'));
    axis.appendChild(svg('text', { x: left, y: top + plotH + 16 }, pointLabel(points[0]).replace(/\u2013.*/, '')));
    axis.appendChild(svg('text', { x: width - right, y: top + plotH + 16, 'text-anchor': 'end' },
        'step ' + points[points.length - 1].last));
    root.appendChild(grid);
    root.appendChild(axis);
    points.forEach(function (p, i) {
      var acc = 0, x = left + i * slot;
      cats.forEach(function (c, k) {
        var v = p.categories_ms[k];
        if (!(v > 0)) return;
        titled(root.appendChild(svg('rect', { class: 'seg-step', x: x, width: gapless(slot),
          y: y(acc + v), height: Math.max(0, y(acc) - y(acc + v)), fill: CAT_COLORS[c] || '#888' })),
          pointLabel(p) + '\n' + c + ': ' + fmt(v) + ' ms (mean host)' +
          (p.straggler ? '\nstraggler: ' + p.straggler : ''));
        acc += v;
      });
      if (p.straggler) {
        root.appendChild(svg('rect', { x: x, width: Math.max(1, slot - 1), y: top + plotH + 2,
          height: 3, fill: '#c5221f' }));
      }
    });
    box.appendChild(root);
  })();
  (function podView() {
    var box = document.getElementById('pod-view');
    var hosts = series.hosts;
    if (points.length === 0 || hosts.length === 0) { box.textContent = 'No steps.'; return; }
    var left = 150, right = 16, top = 8, bottom = 24;
    var slot = (widthOf(box) - left - right) / points.length;
    var rowH = Math.max(4, Math.min(18, Math.floor(400 / hosts.length)));
    var width = left + slot * points.length + right;
    var root = svg('svg', { width: width, height: top + rowH * hosts.length + bottom });
    var lo = [], hi = [];
    points.forEach(function (p, i) {
      lo[i] = Infinity; hi[i] = -Infinity;
      series.busy_ms.forEach(function (row) {
        var v = row[i];
        if (v === null) return;
        lo[i] = Math.min(lo[i], v);
        hi[i] = Math.max(hi[i], v);
      });
    });
    var labelEvery = Math.ceil(12 / rowH);
    hosts.forEach(function (name, h) {
      var yy = top + h * rowH;
      if (h % labelEvery === 0) {
        root.appendChild(titled(svg('text', { x: left - 6, y: yy + Math.min(rowH, 12) - 1,
          'text-anchor': 'end', class: slow[name] ? 'straggler' : '' }, elide(name, 22)), name));
      }
      series.busy_ms[h].forEach(function (v, i) {
        if (v === null) return;
        var f = hi[i] > lo[i] ? (v - lo[i]) / (hi[i] - lo[i]) : 0;
        var light = Math.round(95 - 55 * f);
        titled(root.appendChild(svg('rect', { class: 'cell', x: left + i * slot, y: yy,
          width: gapless(slot), height: Math.max(1, rowH - 1),
          fill: 'hsl(4,' + Math.round(30 + 50 * f) + '%,' + light + '%)' })),
          name + ', ' + pointLabel(points[i]) + ': ' + fmt(v) + ' ms busy' +
          (points[i].straggler === name ? ' (straggler)' : ''));
      });
    });
    var axisY = top + rowH * hosts.length + 16;
    root.appendChild(svg('text', { x: left, y: axisY, class: 'axis' }, 'step ' + points[0].first));
    root.appendChild(svg('text', { x: width - right, y: axisY, 'text-anchor': 'end' },
        'step ' + points[points.length - 1].last));
    box.appendChild(root);
  })();
  if (data.steps.length < series.steps_total) {
    var note = document.getElementById('sample-note');
    note.hidden = false;
    note.textContent = 'The slider and the straggler table show ' + data.steps.length + ' of the ' +
        series.steps_total + ' steps (evenly spaced, and the slowest); the charts over steps cover ' +
        'every step; pod_step_breakdown.json has them all.';
    var tableNote = note.cloneNode(true);
    tableNote.removeAttribute('id');
    var st = document.getElementById('stragglers').parentNode;
    st.parentNode.insertBefore(tableNote, st);
  }

  // Deep links: report.html#step=12&metric=compute shows step 12 and compute over steps.
  var params = {};
  location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
    var at = kv.indexOf('=');
    if (at > 0) params[decodeURIComponent(kv.slice(0, at))] = decodeURIComponent(kv.slice(at + 1));
  });
  var first = data.steps.length - 1;
  data.steps.forEach(function (s, i) { if (String(s.step) === params.step) first = i; });
  var metric = cats.indexOf(params.metric) >= 0 ? params.metric : '';
  metricSelect.value = metric;
  drawLines(metric);
  drawBars(first);
  document.body.setAttribute('data-rendered', 'ok');
})();
