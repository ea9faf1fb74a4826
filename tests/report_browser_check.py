#!/usr/bin/env python3
"""report.html in a real browser: the demo's report, `analyze --tool=all` of a
multi-rank PyTorch set and the `profctl diff --html` page of two such sets, each opened in
headless Chromium at 1280 px.

  report_browser_check.py --profctl=BIN [--agent=BIN] [--chromium=BIN] [--out=DIR] [--skip-demo]

For every page and every tab of it, a checking script (added to a copy of the page, after the
page's own scripts) selects the tab and writes what it found into the DOM, which
`--dump-dom` returns. The diff page has no script of its own and a policy that forbids any: its
checked copy allows inline scripts and nothing more, so a fetch would still show as a console
error. A page fails on:
  - any console message or uncaught error in Chromium's log, or text in the page's #errors box;
  - a report not reaching data-rendered="ok"; the diff page holding a <script>;
  - any visible element wider than its container (or than the 1280 px window) that is not inside
    a scroll or clip box (overflow auto/scroll/hidden: a table's own scroll box, an elided cell);
  - any empty section (a visible <section> with no text beyond its heading and no chart), or a
    table with no rows;
  - a table wider than its own box (its numbers would hide behind a sideways scroll), or a chart;
  - a missing chart: every chart the page promises (see CHARTS) is an <svg> with drawn marks;
  - a chart narrower than 80 % of its card (the .chart box it is drawn in), or a label, legend or
    axis text of a chart that runs off it, or two axis labels on one line closer than 3 px;
  - a number in a table that is not right-aligned, or whose column mixes numbers of decimals, or
    that has decimals but no unit (us, ms, s, %, B, KiB, MiB, GiB, TiB);
  - two rows of one table that read the same, or two different names shown alike (the whole
    name is a cell's title when it is shortened);
  - a per-host tool tab without a host selector (select.host-select), unless it says it has
    nothing to select (the memory tab of a trace without allocations);
  - a snapshot's report (a `capture --last` session, re-analysed with --tool=all) that does not
    say it shows the past.
Screenshots of every tab (1280 px wide, without the checking script) are kept in --out
(default: build/report-browser) for a person to look at. Exit 0 when every page holds, 1 when one
does not, 77 (skipped) when Chromium is not installed.
"""

import argparse
import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.dont_write_bytecode = True
WIDTH = 1280
HEIGHT = 2200
SKIP = 77

# Charts each page must have: (tab, CSS selector of the <svg>, what it shows). Tabs that are not
# in the page (a page without tools) are not asked for.
CHARTS = [
    ("breakdown", "#bars svg", "stacked bar per host for one step"),
    ("breakdown", "#step-stack svg", "step time stacked by category over steps"),
    ("breakdown", "#pod-view svg", "pod view: every host over all steps"),
    ("breakdown", "#lines svg", "step time over steps, per host"),
    ("overview", "svg.step-stack-chart", "per-host step time stacked by category"),
    ("overview", "svg.bar-chart", "top kernels and top ops"),
    ("kernel_stats", "svg.bar-chart", "top kernels"),
    ("op_stats", "svg.bar-chart", "top ops"),
    ("memory", "svg.memory-chart", "memory in use over time"),
    ("timeline", "svg.overlap-chart", "communication hidden under computation"),
    ("timeline", "svg.idle-chart", "idle time by cause"),
    ("page", "svg.diff-chart", "each host's step in A and B by category"),
]
# Tool tabs that answer per host: each must offer a host selector.
PER_HOST_TABS = ["overview", "kernel_stats", "op_stats", "input_pipeline", "memory", "timeline"]

# Runs after the page's scripts: selects each tab in turn and checks it.
CHECKER = r"""
<script>
(function () {
  'use strict';
  var out = { tabs: [], problems: [], errors: '' };
  function clipped(e) {
    for (var a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      var s = getComputedStyle(a);
      if (/(auto|scroll|hidden|clip)/.test(s.overflowX)) return true;
    }
    return false;
  }
  function describe(e) {
    var s = e.tagName.toLowerCase();
    if (e.id) s += '#' + e.id;
    if (e.getAttribute('class')) s += '.' + String(e.getAttribute('class')).split(' ').join('.');
    for (var a = e.parentElement; a && !a.id; a = a.parentElement) {}
    if (a && a !== e) s += ' in #' + a.id;
    return s;
  }
  function visible(e) { return e.getClientRects().length > 0; }
  function check(tab) {
    var seen = 0;
    Array.prototype.forEach.call(document.querySelectorAll('body *'), function (e) {
      if (!visible(e) || e.closest('svg') && e.tagName.toLowerCase() !== 'svg') return;
      if (e.closest('script,style,title,noscript')) return;
      var r = e.getBoundingClientRect();
      var p = e.parentElement;
      if (clipped(e)) return;
      var pr = p.getBoundingClientRect();
      var tooWide = r.right > window.innerWidth + 1 || (p !== document.body && r.right > pr.right + 1 &&
          getComputedStyle(p).display !== 'inline');
      if (tooWide && seen++ < 20) {
        out.problems.push(tab + ': ' + describe(e) + ' is ' + Math.round(r.width) + ' px wide, ends at ' +
            Math.round(r.right) + ' px, its container at ' + Math.round(pr.right) + ' px (window ' +
            window.innerWidth + ')');
      }
    });
    if (document.documentElement.scrollWidth > window.innerWidth + 1) {
      out.problems.push(tab + ': the page scrolls sideways (' + document.documentElement.scrollWidth + ' px)');
    }
    // Tables fit their box: long names are elided, so every number shows without scrolling.
    Array.prototype.forEach.call(document.querySelectorAll('.table-wrap'), function (w) {
      if (visible(w) && w.scrollWidth > w.clientWidth + 1) {
        out.problems.push(tab + ': ' + describe(w.firstElementChild || w) + ' is ' + w.scrollWidth +
            ' px wide in a ' + w.clientWidth + ' px box: columns hidden behind a scroll');
      }
    });
    // A table with a header and no rows says nothing: the page must say so in words.
    Array.prototype.forEach.call(document.querySelectorAll('table'), function (t) {
      if (visible(t) && t.tBodies.length > 0 && t.querySelectorAll('tbody tr').length === 0) {
        out.problems.push(tab + ': ' + describe(t) + ' has no rows');
      }
    });
    // Charts fit too: at 1280 px no chart needs a sideways scroll.
    Array.prototype.forEach.call(document.querySelectorAll('.chart'), function (c) {
      if (visible(c) && c.scrollWidth > c.clientWidth + 1) {
        out.problems.push(tab + ': chart ' + describe(c) + ' is ' + c.scrollWidth + ' px wide in a ' +
            c.clientWidth + ' px box');
      }
    });
    Array.prototype.forEach.call(document.querySelectorAll('section'), function (s) {
      if (!visible(s)) return;
      var text = '';
      Array.prototype.forEach.call(s.childNodes, function (c) {
        if (c.nodeType === 1 && /^H[1-6]$/.test(c.tagName)) return;
        text += c.textContent || '';
      });
      if (text.trim() === '' && !s.querySelector('svg *')) {
        out.problems.push(tab + ': section ' + describe(s) + ' is empty');
      }
    });
    var charts = {};
    Array.prototype.forEach.call(document.querySelectorAll('svg'), function (g) {
      if (!visible(g)) return;
      var marks = g.querySelectorAll('rect,path,polyline,circle,line').length;
      CHART_SELECTORS.forEach(function (sel) {
        if (g.matches(sel) && marks > 0) charts[sel] = (charts[sel] || 0) + 1;
      });
    });
    // A chart fills its card: at least 80 % of the .chart box's content width.
    Array.prototype.forEach.call(document.querySelectorAll('.chart'), function (c) {
      if (!visible(c)) return;
      var widest = 0;
      Array.prototype.forEach.call(c.querySelectorAll(':scope > svg'), function (g) {
        widest = Math.max(widest, g.getBoundingClientRect().width);
      });
      var cs = getComputedStyle(c);
      var room = c.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
      if (widest > 0 && widest < 0.8 * room) {
        out.problems.push(tab + ': chart ' + describe(c) + ' is ' + Math.round(widest) + ' px wide in a ' +
            Math.round(room) + ' px card (under 80 %)');
      }
    });
    // No label, legend or axis text runs off its chart.
    var clippedText = 0;
    Array.prototype.forEach.call(document.querySelectorAll('.chart svg'), function (g) {
      if (!visible(g)) return;
      var box = g.getBoundingClientRect();
      Array.prototype.forEach.call(g.querySelectorAll('text'), function (t) {
        var r = t.getBoundingClientRect();
        if (r.width === 0) return;
        if ((r.left < box.left - 1 || r.right > box.right + 1) && clippedText++ < 10) {
          out.problems.push(tab + ': text "' + t.textContent.slice(0, 60) + '" runs off its chart (' +
              Math.round(r.left - box.left) + '..' + Math.round(r.right - box.left) + ' px in ' +
              Math.round(box.width) + ')');
        }
      });
    });
    // No two axis labels of one chart on one line overlap or touch (at least 3 px apart), so
    // that each reads as its own number.
    var overlapping = 0;
    Array.prototype.forEach.call(document.querySelectorAll('.chart svg g.axis'), function (a) {
      if (!visible(a)) return;
      var rows = {};
      Array.prototype.forEach.call(a.querySelectorAll(':scope > text'), function (t) {
        if (t.hasAttribute('transform')) return;
        var r = t.getBoundingClientRect();
        if (r.width === 0) return;
        (rows[t.getAttribute('y')] = rows[t.getAttribute('y')] || []).push({ r: r, t: t.textContent });
      });
      Object.keys(rows).forEach(function (y) {
        var row = rows[y].sort(function (p, q) { return p.r.left - q.r.left; });
        for (var i = 1; i < row.length; ++i) {
          if (row[i].r.left < row[i - 1].r.right + 3 && overlapping++ < 10) {
            out.problems.push(tab + ': axis labels "' + row[i - 1].t.slice(0, 30) + '" and "' +
                row[i].t.slice(0, 30) + '" overlap or touch');
          }
        }
      });
    });
    // Numbers in tables: right-aligned, one number of decimals per column, a unit with decimals.
    var NUMBER = /^[-+−]?[\d,]+(\.(\d+))?( ?(µs|us|ms|s|%|B|KiB|MiB|GiB|TiB|queued))?$/;
    var nbad = 0;
    Array.prototype.forEach.call(document.querySelectorAll('table'), function (t) {
      if (!visible(t)) return;
      var decimals = {};
      Array.prototype.forEach.call(t.querySelectorAll('tbody tr'), function (tr) {
        Array.prototype.forEach.call(tr.children, function (td, col) {
          var text = td.textContent.trim();
          var m = NUMBER.exec(text);
          if (!m) return;
          var why = null;
          if (getComputedStyle(td).textAlign !== 'right') why = 'is not right-aligned';
          else if (m[2] && !m[4]) why = 'has decimals but no unit';
          else if (col in decimals && decimals[col] !== (m[2] || '').length) why = 'has ' +
              (m[2] || '').length + ' decimals where its column has ' + decimals[col];
          if (!(col in decimals)) decimals[col] = (m[2] || '').length;
          if (why && nbad++ < 12) {
            out.problems.push(tab + ': ' + describe(t) + ' cell "' + text + '" (column ' + (col + 1) + ') ' + why);
          }
        });
      });
    });
    // Rows of a table never read the same, and two different names never look alike.
    Array.prototype.forEach.call(document.querySelectorAll('table'), function (t) {
      if (!visible(t)) return;
      var rows = {}, names = {}, reported = 0;
      Array.prototype.forEach.call(t.querySelectorAll('tbody tr'), function (tr) {
        var key = Array.prototype.map.call(tr.children, function (td) { return td.textContent; }).join('\u241f');
        if (key in rows && reported++ < 3) out.problems.push(tab + ': ' + describe(t) + ' has two rows reading "' + key.slice(0, 120) + '"');
        rows[key] = true;
        Array.prototype.forEach.call(tr.querySelectorAll('td.name'), function (td, k) {
          var shown = k + ':' + td.textContent, full = td.getAttribute('title') || td.textContent;
          if (shown in names && names[shown] !== full && reported++ < 3) {
            out.problems.push(tab + ': ' + describe(t) + ' shows "' + td.textContent + '" for "' +
                names[shown].slice(0, 80) + '" and for "' + full.slice(0, 80) + '"');
          }
          names[shown] = full;
        });
      });
    });
    var selectors = Array.prototype.filter.call(document.querySelectorAll('select.host-select'), visible).length;
    var nothing = Array.prototype.filter.call(document.querySelectorAll('.memory-none'), visible).length;
    var snapshot = document.getElementById('snapshot');
    out.tabs.push({ tab: tab, charts: charts, host_selectors: selectors, says_nothing_to_select: nothing,
      snapshot: snapshot && visible(snapshot) ? snapshot.textContent : '' });
  }
  window.addEventListener('load', function () {
    setTimeout(function () {
      var buttons = Array.prototype.slice.call(document.querySelectorAll('#tabs button'));
      if (buttons.length === 0) { check(FIRST_TAB); }
      buttons.forEach(function (b) { b.click(); check(b.getAttribute('data-tab')); });
      if (buttons.length) buttons[0].click();
      var box = document.getElementById('errors');
      out.errors = box ? box.textContent : 'no #errors box';
      out.rendered = document.body.getAttribute('data-rendered');
      var pre = document.createElement('pre');
      pre.id = 'browser-check';
      pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
    }, 50);
  });
})();
</script>
"""


class Failure(Exception):
    pass


def find_chromium(given):
    for c in [given, os.environ.get("PROFCTL_CHROMIUM"), "/usr/bin/chromium",
              "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]:
        if c and os.access(c, os.X_OK):
            return c
    return None


def chromium(binary, scratch, url, extra):
    cmd = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--disable-background-networking", "--no-first-run", "--hide-scrollbars",
           "--user-data-dir=" + os.path.join(scratch, "profile"), "--enable-logging=stderr",
           "--v=0", "--window-size=%d,%d" % (WIDTH, HEIGHT), "--virtual-time-budget=10000"]
    cmd += extra + [url]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120, cwd=scratch)
    return p.returncode, p.stdout, p.stderr


def console_lines(log):
    return [l for l in log.splitlines() if ":CONSOLE" in l or "Uncaught" in l]


CSP = re.compile(r'(<meta http-equiv="Content-Security-Policy" content=")([^"]*)(")')


def check_page(name, html_path, browser, out_dir, scripted=True, snapshot=False):
    """Checks one page; returns the problems found (empty: it holds). A report is `scripted`: it
    draws itself (data-rendered="ok", an #errors box, tabs); the diff page is not: it must hold no
    script, and is checked as one tab, "page"."""
    problems = []
    with open(html_path, encoding="utf-8") as f:
        html = f.read()
    size = len(html.encode("utf-8"))
    first_tab = "breakdown" if scripted else "page"
    checker = CHECKER.replace("FIRST_TAB", json.dumps(first_tab)).replace(
        "CHART_SELECTORS", json.dumps(sorted(set(c[1] for c in CHARTS))))
    if not scripted:
        if "<script" in html:
            problems.append("%s: holds a <script>; the page is documented as script-free" % name)
        # Its policy forbids scripts: the checking copy allows inline ones, nothing else.
        html = CSP.sub(lambda m: m.group(1) + m.group(2) + "; script-src 'unsafe-inline'" +
                       m.group(3), html, count=1)
    scratch = tempfile.mkdtemp(prefix="profctl-browser-")
    try:
        checked = os.path.join(scratch, "checked.html")
        at = html.rfind("</body>")
        if at < 0:
            return ["%s: no </body>" % name]
        with open(checked, "w", encoding="utf-8") as f:
            f.write(html[:at] + checker + html[at:])
        rc, dom, log = chromium(browser, scratch, "file://" + checked, ["--dump-dom"])
        if rc != 0:
            problems.append("%s: chromium exited %d: %s" % (name, rc, log[-2000:]))
        for line in console_lines(log):
            problems.append("%s: console: %s" % (name, line.strip()))
        m = re.search(r'<pre id="browser-check">(.*?)</pre>', dom, re.S)
        if not m:
            problems.append("%s: the checking script wrote nothing (the page did not load?)" % name)
            return problems
        found = json.loads(m.group(1).replace("&lt;", "<").replace("&gt;", ">")
                           .replace("&quot;", '"').replace("&amp;", "&"))
        if scripted and found.get("rendered") != "ok":
            problems.append("%s: the page did not finish drawing (data-rendered=%r)" %
                            (name, found.get("rendered")))
        if scripted and found["errors"].strip():
            problems.append("%s: #errors says: %s" % (name, found["errors"].strip()))
        problems += ["%s: %s" % (name, p) for p in found["problems"]]
        tabs = {t["tab"]: t["charts"] for t in found["tabs"]}
        for tab, selector, what in CHARTS:
            if tab in tabs and not tabs[tab].get(selector):
                problems.append("%s: tab %s has no chart %s (%s)" % (name, tab, selector, what))
        for t in found["tabs"]:
            if t["tab"] in PER_HOST_TABS and not t["host_selectors"] and not t["says_nothing_to_select"]:
                problems.append("%s: tab %s has no host selector" % (name, t["tab"]))
        if snapshot:
            said = [t["snapshot"] for t in found["tabs"] if t["snapshot"]]
            if not said or "the past" not in said[0]:
                problems.append("%s: a snapshot's report does not say it shows the past (#snapshot: %r)"
                                % (name, said[0] if said else None))
        # Screenshots of the page as a user gets it, one per tab.
        for tab in tabs:
            shot = os.path.join(out_dir, "%s-%s.png" % (name, tab))
            url = "file://" + os.path.abspath(html_path) + ("#tab=" + tab if tab != first_tab else "")
            rc, _, log = chromium(browser, scratch, url, ["--screenshot=" + shot])
            if rc != 0 or not os.path.exists(shot):
                problems.append("%s: no screenshot of tab %s (chromium exited %d)" % (name, tab, rc))
        print("%s: %d bytes, tabs %s, %d problem(s); screenshots in %s" %
              (name, size, ", ".join(tabs), len(problems), out_dir))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return problems


def memory_event(op, addr, size, total):
    """A PyTorch [memory] instant event on GPU 0 inside `op` (on its thread, 1 us after it starts)."""
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": op["pid"],
            "tid": op["tid"], "ts": op["ts"] + 1,
            "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": size,
                     "Total Allocated": total, "Total Reserved": 64 << 20}}


def multi_rank_set(folder, ranks=4, slow_ranks=(1,)):
    """Writes `ranks` PyTorch traces (rank0..) made from the H100 fixture: each claims its own rank,
    the GPU kernels of `slow_ranks` run 30 % longer, so there is a straggler to show, and each allocates
    and frees GPU 0 memory in its aten ops (the fixture has no [memory] events), for the memory
    tab."""
    src = os.path.join(SOURCE, "tests", "data", "traces", "h100_torch_profiler.pt.trace.json.gz")
    with gzip.open(src, "rt", encoding="utf-8") as f:
        base = json.load(f)
    for r in range(ranks):
        d = json.loads(json.dumps(base))
        d["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": ranks}
        if r in slow_ranks:
            for e in d["traceEvents"]:
                if e.get("cat") == "kernel" and isinstance(e.get("dur"), (int, float)):
                    e["dur"] = e["dur"] * 1.3
        ops = [e for e in d["traceEvents"] if e.get("cat") == "cpu_op"][::20]
        live, total = [], 0
        for k, op in enumerate(ops):
            size = (1 + k % 7) << 20
            live.append((0x7f0000000000 + (k << 24), size))
            total += size
            d["traceEvents"].append(memory_event(op, live[-1][0], size, total))
            if len(live) > 5:
                addr, freed = live.pop(0)
                total -= freed
                d["traceEvents"].append(memory_event(op, addr, -freed, total))
        with open(os.path.join(folder, "rank%d.pt.trace.json" % r), "w", encoding="utf-8") as f:
            json.dump(d, f)


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise Failure("%s exited %d:\n%s%s" % (what, p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profctl", required=True)
    ap.add_argument("--agent", default="")
    ap.add_argument("--chromium", default="")
    ap.add_argument("--out", default=os.path.join(SOURCE, "build", "report-browser"))
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--page", action="append", default=[],
                    help="also check this report.html (NAME=PATH)")
    args = ap.parse_args()
    browser = find_chromium(args.chromium)
    if not browser:
        print("SKIPPED: headless Chromium not found (/usr/bin/chromium; set PROFCTL_CHROMIUM): "
              "install it with scripts/bootstrap.sh --test")
        return SKIP
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    for old in glob.glob(os.path.join(args.out, "*.png")):
        os.remove(old)
    work = tempfile.mkdtemp(prefix="profctl-report-browser-")
    problems = []
    try:
        pages = [tuple(p.split("=", 1)) for p in args.page]
        static = []  # pages without a script of their own
        snapshots = []  # reports of snapshot sessions
        traces = os.path.join(work, "traces")
        os.makedirs(traces)
        multi_rank_set(traces)
        run([args.profctl, "analyze", traces, "--tool=all", "--out=" + os.path.join(work, "analyze")],
            "profctl analyze")
        pages.append(("pytorch-4-ranks", os.path.join(work, "analyze", "report.html")))
        # The diff page: the same set against one where ranks 1 and 2 are slow (kernels and ops
        # changed, rank 2 stands out).
        traces_b = os.path.join(work, "traces-b")
        os.makedirs(traces_b)
        multi_rank_set(traces_b, slow_ranks=(1, 2))
        diff_html = os.path.join(work, "diff.html")
        run([args.profctl, "diff", traces, traces_b, "--html=" + diff_html], "profctl diff")
        static.append(("diff", diff_html))
        if not args.skip_demo:
            # 8 ms steps for 4 s: ~400 steps, beyond the 300 the page embeds whole (a sample
            # in the slider and table, the series in the charts over steps).
            cmd = [args.profctl, "demo", "--workers=4", "--duration=4000", "--step-ms=8",
                   "--logdir=" + os.path.join(work, "logs")]
            if args.agent:
                cmd.append("--agent-binary=" + args.agent)
            run(cmd, "profctl demo")
            found = glob.glob(os.path.join(work, "logs", "plugins", "profile", "*", "report.html"))
            if len(found) != 1:
                raise Failure("the demo wrote %d report.html files" % len(found))
            pages.append(("demo", found[0]))
            # The demo's session made a snapshot (as `capture --last=4s` records it) and its tools
            # re-run by analyze: the page still says it shows the past.
            snap = os.path.join(work, "snapshot")
            shutil.copytree(os.path.dirname(found[0]), snap)
            manifest_path = os.path.join(snap, "session.json")
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
            manifest.setdefault("request", {})["pastMs"] = "4000"
            with open(manifest_path, "w", encoding="utf-8") as f:
                json.dump(manifest, f)
            run([args.profctl, "analyze", snap, "--tool=all"], "profctl analyze (snapshot)")
            snapshots.append(("snapshot", os.path.join(snap, "report.html")))
        for name, path in pages + static + snapshots:
            shutil.copy(path, os.path.join(args.out, name + ".html"))
            problems += check_page(name, path, browser, args.out,
                                   scripted=(name, path) not in static,
                                   snapshot=(name, path) in snapshots)
    except (Failure, subprocess.TimeoutExpired) as e:
        problems.append(str(e))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("ok: every page rendered without errors, overflow or empty sections, with its charts")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
