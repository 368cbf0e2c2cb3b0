package bench

import (
	"encoding/json"
	"html"
	"io"
	"strings"
)

// WriteHTML writes the report as one self-contained page: the text report,
// and charts (throughput over time, server CPU and memory, latency
// histograms) drawn on canvases by inline script from the inline JSON. No
// network access is needed to view it.
func (r *Report) WriteHTML(w io.Writer) error {
	data, err := json.Marshal(r) // escapes <, > and &: safe inside <script>
	if err != nil {
		return err
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		return err
	}
	page := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString("parley bench "+r.Scenario),
		"{{TEXT}}", html.EscapeString(text.String()),
		"{{DATA}}", string(data),
	).Replace(htmlPage)
	_, err = io.WriteString(w, page)
	return err
}

const htmlPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{TITLE}}</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
pre{background:#f6f6f6;padding:12px;overflow:auto;font-size:12px}
canvas{width:100%;height:280px;border:1px solid #ddd;margin:6px 0 18px}
h2{font-size:16px;margin:18px 0 4px}.lg span{margin-right:14px}
</style></head><body>
<h1>{{TITLE}}</h1>
<div id="charts"></div>
<h2>Report</h2>
<pre>{{TEXT}}</pre>
<script>
const R = {{DATA}};
const colors = ['#1f77b4','#2ca02c','#d62728','#ff7f0e','#9467bd'];
function chart(title, xs, lines, xlabel, ylabel, bars) {
  const box = document.getElementById('charts');
  const h = document.createElement('h2'); h.textContent = title; box.appendChild(h);
  const lg = document.createElement('div'); lg.className = 'lg';
  lines.forEach((l, i) => { const s = document.createElement('span'); s.style.color = colors[i % colors.length]; s.textContent = '■ ' + l.name; lg.appendChild(s); });
  box.appendChild(lg);
  const c = document.createElement('canvas'); box.appendChild(c);
  const W = c.width = c.clientWidth * devicePixelRatio, H = c.height = c.clientHeight * devicePixelRatio;
  const g = c.getContext('2d'); g.scale(devicePixelRatio, devicePixelRatio);
  const w = W / devicePixelRatio, hh = H / devicePixelRatio, L = 70, B = 34, T = 10, Rm = 10;
  let ymax = 0; lines.forEach(l => l.ys.forEach(y => { if (y > ymax) ymax = y; }));
  if (ymax <= 0) ymax = 1;
  const xmin = xs.length ? xs[0] : 0, xmax = xs.length ? xs[xs.length - 1] : 1;
  const X = x => L + (xmax > xmin ? (x - xmin) / (xmax - xmin) : 0.5) * (w - L - Rm);
  const Y = y => hh - B - y / ymax * (hh - B - T);
  g.strokeStyle = '#999'; g.fillStyle = '#444'; g.font = '11px sans-serif';
  g.beginPath(); g.moveTo(L, T); g.lineTo(L, hh - B); g.lineTo(w - Rm, hh - B); g.stroke();
  for (let i = 0; i <= 4; i++) { const y = ymax * i / 4; g.fillText(fmt(y), 4, Y(y) + 4); }
  const lab = bars ? bars.labels : null;
  for (let i = 0; i <= 5; i++) {
    const k = Math.round((xs.length - 1) * i / 5); if (k < 0) break;
    g.fillText(lab ? lab[k] : fmt(xs[k]), X(xs[k]) - 14, hh - B + 14);
  }
  g.fillText(xlabel, w / 2, hh - 4); g.save(); g.translate(12, hh / 2); g.rotate(-Math.PI / 2); g.fillText(ylabel, 0, 0); g.restore();
  lines.forEach((l, i) => {
    g.strokeStyle = g.fillStyle = colors[i % colors.length];
    if (bars) {
      const bw = Math.max(1, (w - L - Rm) / xs.length - 1);
      xs.forEach((x, j) => g.fillRect(X(x) - bw / 2, Y(l.ys[j]), bw, hh - B - Y(l.ys[j])));
    } else {
      g.beginPath(); xs.forEach((x, j) => j ? g.lineTo(X(x), Y(l.ys[j])) : g.moveTo(X(x), Y(l.ys[j]))); g.stroke();
    }
  });
}
function fmt(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + 'M';
  if (v >= 1e3) return (v / 1e3).toFixed(1) + 'k';
  return Math.round(v * 100) / 100 + '';
}
function secs(ns) { return ns >= 1e9 ? (ns / 1e9).toFixed(2) + 's' : ns >= 1e6 ? (ns / 1e6).toFixed(1) + 'ms' : (ns / 1e3).toFixed(0) + 'µs'; }
// Bucket i of the histogram layout (see the JSON docs): its middle, in ns.
function mid(i, sub) { const n = 1 << sub; if (i < n) return i; const s = Math.floor(i / n) - 1, m = n + i % n; return (m * 2 + 1) * Math.pow(2, s) / 2; }
function histChart(title, h) {
  if (!h || !h.count) return;
  // Regroup the fine buckets into 40 log-spaced bins between min and max.
  const lo = Math.max(h.min_ns, 1), hi = Math.max(h.max_ns, lo * 1.01), n = 40;
  const bins = new Array(n).fill(0), edges = [];
  for (let i = 0; i <= n; i++) edges.push(lo * Math.pow(hi / lo, i / n));
  h.buckets.forEach(([i, c]) => {
    const v = Math.min(Math.max(mid(i, h.sub_bucket_bits), lo), hi);
    let k = Math.floor(Math.log(v / lo) / Math.log(hi / lo) * n); if (k >= n) k = n - 1; if (k < 0) k = 0;
    bins[k] += c;
  });
  const xs = bins.map((_, i) => i);
  chart(title, xs, [{name: 'requests per bin', ys: bins}], 'latency (log scale)', 'count', {labels: edges.map(secs)});
}
const S = R.series || [];
if (S.length) {
  const t = S.map(s => s.t);
  const rate = k => S.map((s, i) => { const dt = i ? s.t - S[i - 1].t : s.t; return dt > 0 ? s[k] / dt : 0; });
  const lines = [{name: 'requests/s', ys: rate('requests')}];
  if (R.delivery) { lines.push({name: 'acked/s', ys: rate('acked')}, {name: 'delivered/s', ys: rate('delivered')}); }
  lines.push({name: 'errors/s', ys: rate('errors')});
  chart('Throughput over time', t, lines, 'seconds', 'per second');
  if (R.conns) chart('Connections', t, [{name: 'connected', ys: S.map(s => s.connected)}], 'seconds', 'open');
  if (R.server) {
    chart('Server CPU', t, [{name: 'cpu % (100 = one core)', ys: S.map(s => s.server_cpu_percent || 0)}], 'seconds', '%');
    chart('Server memory', t, [{name: 'RSS MiB', ys: S.map(s => (s.server_rss_bytes || 0) / 1048576)}], 'seconds', 'MiB');
  }
}
histChart('Request latency histogram', R.latency);
if (R.search && R.search.index_series && R.search.index_series.length) {
  const X = R.search.index_series, t = X.map(s => s.t);
  chart('Search index: entries indexed per second', t, [{name: 'indexed/s', ys: X.map(s => s.indexed_per_sec)}], 'seconds', 'per second');
  chart('Search index: lag (entries stored, not yet indexed)', t, [{name: 'lag', ys: X.map(s => s.lag)}], 'seconds', 'entries');
}
if (R.search && R.search.query_steps) R.search.query_steps.forEach(st => Object.keys(st.queries).sort().forEach(k =>
  histChart('Search latency, ' + st.searchers + ' searchers: ' + k + ' queries', st.queries[k].latency)));
if (R.delivery) histChart('End-to-end latency histogram (send → receipt)', R.delivery.e2e_latency);
</script></body></html>
`
