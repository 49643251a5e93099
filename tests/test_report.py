"""The HTML report (`vmsched report`, `vmsched.report`; docs/report.md): what the page holds,
that it needs no network, that its figures agree with the run and with `vmsched explain`, and
that a real browser renders every figure without a console error.

The browser is Debian's `chromium`, which scripts/test.sh installs. Without it the browser test
skips with the reason, except under CI (CI=true), where a missing browser is a failure."""

import json
import os
import re
import shutil
import subprocess
from html import escape as html_escape

import numpy as np
import polars as pl
import pytest

import vmsched
from vmsched import _core
from vmsched.cli import main
from vmsched.explain import _dur, _source
from vmsched.report import axis_label, parse_window, sweep_figures
from vmsched.report import report as make_report

RUN_SECTIONS = ["run", "workloads", "entities", "latency", "attribution", "explained", "gantt"]
SWEEP_SECTIONS = ["sweep", "table", "figures"]


@pytest.fixture(scope="module")
def seed000(tmp_path_factory):
    """A seed 000 run directory (1 s: its warm-up is 500 ms) and its report."""
    d = tmp_path_factory.mktemp("report")
    run = d / "s0"
    # Fixed phases (run.vary = false): the child waits out domU2's slices (docs/explain.md).
    vmsched.run("seed000_context1_ratelimit", set={"run.duration_ms": 1000, "run.vary": False},
                out=run)
    html = make_report(run, out=d / "s0.html")
    return run, html


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep") / "sw"
    vmsched.sweep("seed000_context1_ratelimit", {"host.ratelimit_us": [1000, 20000]}, seeds=2,
                  jobs=1, out=d, progress=False,
                  set={"run.duration_ms": 400, "run.warmup_ms": 100})
    return d, make_report(d)


def _section_ids(text):
    return re.findall(r'<section id="([^"]+)">', text)


def _external_refs(text):
    """Attributes and CSS that would load something from elsewhere (the inline plotly.js
    mentions URLs in its code, which load nothing by themselves)."""
    refs = re.findall(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?[^"'\s>]*""",
                      text, flags=re.I)
    refs += re.findall(r"@import\s+url\(", text)
    return refs


def test_run_report_has_every_section_and_no_external_url(seed000):
    run, html = seed000
    text = html.read_text()
    assert _section_ids(text) == RUN_SECTIONS
    for anchor in RUN_SECTIONS:
        assert f'href="#{anchor}"' in text, f"the page's index links to {anchor}"
    assert _external_refs(text) == []
    # plotly.js inline, once; every figure is a div with its own script.
    assert text.count("<script") == 1 + text.count('class="vm-fig"')
    assert "Plotly.newPlot" in text
    # The two tasks' latency figures, the attribution, the Gantt chart.
    assert text.count('class="vm-fig"') == 4


def test_the_explained_worst_wakeup_is_explains_and_shows_the_credit2_slice(seed000):
    run, html = seed000
    text = html.read_text()
    ex = vmsched.explain(run, "context1.parent", worst=3)
    for w in ex.wakeups:
        for s in w["segments"]:
            assert html_escape(s["text"]) in text
    worst = ex.wakeups[0]
    host = [s for s in worst["segments"] if s["cause"] == "host wait"]
    assert host and host[0]["rule"] == "slice" and host[0]["who"] == "domU2.v0"
    assert f"#1: {_dur(worst['latency_ns'])} wait" in text


def test_the_gantt_slices_add_up_to_each_entitys_running_time(seed000):
    """Over the measured part of the run, what the pCPUs ran adds up to each vCPU's running
    time, and what the guest CPUs ran to each task's (the guest's view: its running_ns)."""
    run, _ = seed000
    path, text, ov, events = _source(run)
    s = json.loads((run / "summary.json").read_text())
    warm = s["duration_ns"] - s["measured_ns"]
    out = _core.explain(str(path), text, "context1.child", ov, 1, None, None,
                        (warm, s["duration_ns"]), None)
    assert tuple(out["gantt"]["window"]) == (warm, s["duration_ns"])
    g = pl.DataFrame(out["gantt"]["columns"])
    got = g.group_by("ent").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("ns"))
    got = dict(got.iter_rows())
    ents = pl.read_parquet(run / "entities.parquet")
    for e in ents.iter_rows(named=True):
        assert got.get(e["name"], 0) == e["running_ns"], e["name"]
    # Slices of one CPU never overlap.
    for _, c in g.group_by("cpu"):
        c = c.sort("start_ns")
        assert (c["start_ns"][1:] >= c["end_ns"][:-1]).all()


def test_the_default_gantt_window_holds_the_worst_wakeup(seed000):
    run, html = seed000
    ex = vmsched.explain(run, "context1.parent", worst=1)
    w = ex.wakeups[0]
    m = re.search(r"what each CPU ran, ([0-9.]+) to ([0-9.]+) ms", html.read_text())
    a, b = float(m.group(1)) * 1e6, float(m.group(2)) * 1e6
    assert a < w["start_ns"] and w["end_ns"] < b


def test_a_run_without_task_wakeups_still_has_its_timeline(tmp_path):
    """io_ping's guests run only CPU loops (the ping is kernel work): no task wake-up to
    explain, and the Gantt chart shows the first 10 ms measured."""
    run = tmp_path / "io"
    # Fixed window (run.vary = false): the timeline's bounds are checked exactly.
    vmsched.run("io_ping", set={"run.duration_ms": 300, "run.warmup_ms": 100, "run.vary": False},
                out=run)
    text = make_report(run).read_text()
    assert _section_ids(text) == RUN_SECTIONS
    assert "No task had a measured wake-up" in text
    assert "what each CPU ran, 100.000 to 110.000 ms" in text
    assert "host: pCPU 0" in text


def test_the_report_makes_the_run_once(seed000, tmp_path, monkeypatch):
    """The attribution, the explained wake-ups and the Gantt chart read one traced run: the
    report calls `_core.traced` once and none of the bindings that make a run of their own."""
    run, _ = seed000
    calls = []
    traced = _core.traced
    monkeypatch.setattr(_core, "traced", lambda *a: calls.append("traced") or traced(*a))
    for name in ("attribution", "explain", "gantt", "run"):
        monkeypatch.setattr(_core, name, lambda *a, _n=name, **k: calls.append(_n))
    text = make_report(run, out=tmp_path / "once.html").read_text()
    assert calls == ["traced"]
    assert _section_ids(text) == RUN_SECTIONS and "what each CPU ran" in text


def test_a_huge_gantt_window_is_refused_with_a_note_naming_the_option(seed000, tmp_path):
    run, _ = seed000
    out = tmp_path / "big.html"
    assert main(["report", str(run), "-o", str(out), "--window", "500ms..1000ms",
                 "--gantt-max-segments", "500"]) == 0
    text = out.read_text()
    assert _section_ids(text) == RUN_SECTIONS
    assert "what each CPU ran" not in text
    m = re.search(r"holds ([\d,]+) bars, more than the bound of 500", text)
    assert m and int(m.group(1).replace(",", "")) > 500
    assert "--gantt-max-segments N" in text and "gantt_max_segments" in text
    # The same window under the default bound is drawn (it holds fewer bars than that).
    n = int(m.group(1).replace(",", ""))
    if n <= 20_000:
        text = make_report(run, out=tmp_path / "b2.html", window="500ms..1000ms").read_text()
        assert "what each CPU ran, 500.000 to 1000.000 ms" in text
    with pytest.raises(ValueError, match="gantt_max_segments"):
        make_report(run, out=tmp_path / "b3.html", gantt_max_segments=0)


def test_window_and_task_options(seed000, tmp_path):
    run, _ = seed000
    out = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(out), "--task", "context1.child",
                 "--window", "700ms..710ms", "--worst", "1"]) == 0
    text = out.read_text()
    assert "what each CPU ran, 700.000 to 710.000 ms" in text
    assert "<b>context1.child</b>" in text
    # An existing file is refused without --force; a bad window before any work.
    assert main(["report", str(run), "-o", str(out)]) == 2
    assert main(["report", str(run), "-o", str(out), "--force", "--window", "9..3"]) == 2
    assert main(["report", str(tmp_path)]) == 2
    assert parse_window("1.5s..2s") == (1_500_000_000, 2_000_000_000)
    assert parse_window("10..20") == (10_000_000, 20_000_000)


def test_sweep_report_has_each_figure_against_each_parameter_with_spread(sweep):
    d, html = sweep
    text = html.read_text()
    assert _section_ids(text) == SWEEP_SECTIONS
    assert _external_refs(text) == []
    # context1 (lps) and the hog (cpus), each against the one swept parameter.
    assert text.count('class="vm-fig"') == 2
    assert "host.ratelimit_us (µs)" in text
    assert "bars min–max over the seeds" in text
    # The error bars are the min and max of the two seeds at each point.
    df = pl.read_parquet(d / "sweep.parquet")
    figs = sweep_figures(df)
    assert [(f[1], f[2]) for f in figs] == [("context1", "host.ratelimit_us"),
                                            ("hog", "host.ratelimit_us")]
    tr = figs[0][3].data[0]
    ctx = df.filter(pl.col("workload") == "context1")
    for x, mean, up, down in zip(tr.x, tr.y, tr.error_y.array, tr.error_y.arrayminus):
        v = ctx.filter(pl.col("host.ratelimit_us") == x)["value"]
        assert v.len() == 2 and v.min() < v.max(), "two seeds give two scores"
        assert mean == pytest.approx(v.mean())
        assert mean + up == pytest.approx(v.max()) and mean - down == pytest.approx(v.min())
    assert figs[0][3].layout.yaxis.rangemode == "tozero"


def test_the_sweep_png_starts_at_zero_with_the_mean_and_its_95_ci(sweep):
    from vmsched.plot import pyplot, sweep_figure
    from vmsched.stats import t_quantile

    d, _ = sweep
    df = pl.read_parquet(d / "sweep.parquet")
    fig = sweep_figure(df, ["host.ratelimit_us"])
    try:
        ax = fig.axes[0]
        assert ax.get_ylim()[0] == 0
        assert ax.get_xlabel() == "host.ratelimit_us (µs), log scale"  # 1 to 20 ms
        assert ax.get_ylabel() == "score of context1 (lps)"
        # One errorbar line: its caps are the mean's 95 % confidence interval at each point
        # (issue 14: the spread a sweep shows is the CI, Student's t with n − 1 = 1 here).
        (cont,) = ax.containers
        low, high = (c.get_ydata() for c in cont.lines[1])
        ctx = df.filter(pl.col("workload") == "context1").sort("host.ratelimit_us")
        agg = ctx.group_by("host.ratelimit_us", maintain_order=True).agg(
            pl.col("value").mean().alias("mean"), pl.col("value").std().alias("std"),
            pl.len().alias("n"))
        half = [t_quantile(n - 1) * sd / n ** 0.5 for sd, n in zip(agg["std"], agg["n"])]
        assert list(low) == pytest.approx([m - h for m, h in zip(agg["mean"], half)])
        assert list(high) == pytest.approx([m + h for m, h in zip(agg["mean"], half)])
        assert "bars 95 % CI" in ax.get_title()
    finally:
        pyplot().close(fig)


def test_finish_labels_units_and_starts_at_zero():
    from vmsched.plot import finish, mean_ci95, pyplot, spread

    plt = pyplot()
    fig, (a, b, c) = plt.subplots(1, 3)
    a.plot([1, 2], [100, 102])
    finish(a, "x (ms)", "score (lps)")
    assert a.get_ylim()[0] == 0 and a.get_ylim()[1] >= 102
    b.plot([1, 2], [1e-3, 10])
    finish(b, "x (ms)", "wait (ms)", log_y=True)
    assert b.get_yscale() == "log" and b.get_ylabel() == "wait (ms), log scale"
    c.plot([1, 2], [-3, 3])
    finish(c, "t (s)", "gap (ms)", zero=False)
    assert c.get_ylim()[0] < -3
    plt.close(fig)
    assert spread([3, 1, 2]) == (2.0, 1.0, 3.0)
    mean, half = mean_ci95([1.0, 2.0, 3.0])
    # t(2) = 4.303 in a printed table, to three decimals (scipy gives 4.30265).
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / 3 ** 0.5, rel=1e-4)


def test_axis_labels_carry_units():
    assert axis_label("host.ratelimit_us") == "host.ratelimit_us (µs)"
    assert axis_label("run.duration_ms") == "run.duration_ms (ms)"
    assert axis_label("domain.1.weight") == "domain.1.weight"


# ---- in a browser ---------------------------------------------------------------------------

#: Put first in <head>: records console errors and uncaught errors, and once the page has
#: loaded writes them and every figure's box into a <pre id="vm-probe"> that --dump-dom shows.
PROBE = """<script>
window.__vmErrors = [];
(function () {
  var err = console.error;
  console.error = function () { window.__vmErrors.push(Array.from(arguments).join(' '));
                                 err.apply(console, arguments); };
  window.addEventListener('error', function (e) { window.__vmErrors.push('error: ' + e.message); },
                          true);
  window.addEventListener('unhandledrejection', function (e) {
    window.__vmErrors.push('unhandled: ' + e.reason); });
  window.addEventListener('load', function () { setTimeout(function () {
    var figs = Array.from(document.querySelectorAll('.vm-fig')).map(function (d) {
      var r = d.getBoundingClientRect();
      return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height,
              svg: d.querySelectorAll('svg.main-svg').length,
              marks: d.querySelectorAll('.trace, .point, .bars path').length};
    });
    var pre = document.createElement('pre'); pre.id = 'vm-probe';
    pre.textContent = JSON.stringify({errors: window.__vmErrors, figs: figs,
                                      height: document.documentElement.scrollHeight});
    document.body.appendChild(pre);
  }, 300); });
})();
</script>"""


def _chromium():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    msg = "chromium is not installed (Debian's chromium; scripts/test.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{msg}: CI's install step must provide it")
    pytest.skip(msg)


def _browse(chromium, page, tmp_path, *args):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}",
           # No network: anything the page tried to fetch would fail (and log an error).
           "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000", *args,
           page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _check_in_browser(html, tmp_path):
    from PIL import Image

    chromium = _chromium()
    text = html.read_text()
    page = tmp_path / "probed.html"
    page.write_text(text.replace("<head>", "<head>" + PROBE, 1))
    width = 1280
    dom = _browse(chromium, page, tmp_path, f"--window-size={width},1000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'<pre id="vm-probe">(.*?)</pre>', dom.stdout, re.S)
    assert m, "the page loaded and ran its scripts: " + dom.stderr[-2000:]
    probe = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&")
                       .replace("&lt;", "<").replace("&gt;", ">"))
    assert probe["errors"] == [], probe["errors"]
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln and
               re.search(r"error|uncaught", ln, re.I)]
    assert console == [], console
    figs = probe["figs"]
    assert len(figs) == text.count('class="vm-fig"') > 0
    for i, f in enumerate(figs):
        assert f["svg"] >= 1 and f["marks"] >= 1, f"figure {i + 1} drew its plot: {f}"
        assert f["w"] > 300 and f["h"] > 150, f"figure {i + 1} has a size: {f}"
    # The whole page as a picture; each figure's box must hold more than the background.
    height = int(max(f["y"] + f["h"] for f in figs)) + 50
    shot = tmp_path / "page.png"
    r = _browse(chromium, page, tmp_path, f"--window-size={width},{height}",
                f"--screenshot={shot}")
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    im = Image.open(shot).convert("RGB")
    background = {(255, 255, 255), (229, 236, 246)}  # the page, plotly's plot area
    for i, f in enumerate(figs):
        box = im.crop((int(f["x"]), int(f["y"]), int(f["x"] + f["w"]), int(f["y"] + f["h"])))
        px = np.asarray(box).reshape(-1, 3)
        ink = px[~np.isin(px @ [65536, 256, 1], [(r << 16) + (g << 8) + b
                                                 for r, g, b in background])]
        assert len(ink) > 0.01 * len(px), f"figure {i + 1} is blank on the screenshot"
        colors = len(np.unique(ink, axis=0))
        assert colors > 20, f"figure {i + 1} shows only {colors} colours"
    return im


def test_the_run_report_renders_in_chromium(seed000, tmp_path):
    _, html = seed000
    _check_in_browser(html, tmp_path)


def test_the_sweep_report_renders_in_chromium(sweep, tmp_path):
    _, html = sweep
    _check_in_browser(html, tmp_path)
