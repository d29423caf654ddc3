"""The timeline (supervisor/timeline.py) as one self-contained HTML page: no network, no
server, no library; the data is embedded as JSON and drawn by a short script. The page
opens on the run's outcome (supervisor/timeline_outcome.py), then the chart.

Everything in a log may come from a hostile model or repository, so the script puts it
in the page as text only (textContent, never innerHTML), the embedded JSON cannot
close its script element, and every string has its control and format characters
written out by the terminal's own sanitiser (a bidirectional override reorders a page's
text as it does a terminal's).
"""

from __future__ import annotations

import html
import json
from typing import Any

from supervisor.terminal import one_line, visible
from supervisor.timeline import Timeline

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 0; color: #1d2430; background: #fafbfc; }
header { padding: 10px 16px; background: #1d2430; color: #fff; }
header h1 { font-size: 15px; margin: 0 0 4px; }
header .task { color: #c9d1e0; white-space: pre-wrap; max-height: 3.6em; overflow: hidden; }
main { display: flex; gap: 12px; padding: 12px 16px; align-items: flex-start; }
#chart { flex: 1 1 auto; min-width: 0; }
#panel { flex: 0 0 380px; background: #fff; border: 1px solid #d5dae3; border-radius: 6px;
  padding: 10px; max-height: 80vh; overflow: auto; position: sticky; top: 8px; }
#panel pre { white-space: pre-wrap; word-break: break-word; background: #f3f5f8; padding: 6px;
  border-radius: 4px; max-height: 40vh; overflow: auto; }
.axis { position: relative; height: 18px; margin-left: 170px; color: #6b7485; font-size: 11px; }
.axis span { position: absolute; transform: translateX(-50%); }
.lane { display: flex; align-items: center; height: 26px; border-bottom: 1px solid #e6e9ef; }
.lane .name { flex: 0 0 164px; padding: 0 3px; border-left: 6px solid #9aa3b2;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.lane.completed .name { border-color: #2f9e44; } .lane.failed .name { border-color: #e03131; }
.lane.interrupted .name, .lane.cancelled .name { border-color: #f08c00; }
.lane.limit .name, .lane.timeout .name { border-color: #f59f00; }
/* An isolated editor's change that did not come in: never green, whatever its end. */
.lane.merge-conflict .name { border-color: #e03131; background: #fff0f0; }
.lane.merge-skipped .name { border-color: #f59f00; background: #fff8e6; }
#outcome { padding: 10px 16px 12px; background: #fff; border-bottom: 1px solid #d5dae3;
  border-left: 8px solid #9aa3b2; }
#outcome.tone-green { border-left-color: #2f9e44; } #outcome.tone-red { border-left-color: #e03131; }
#outcome.tone-amber { border-left-color: #f59f00; }
#outcome h2 { font-size: 15px; margin: 0 0 4px; } #outcome .why { white-space: pre-wrap; } #outcome h3 { font-size: 13px; margin: 8px 0 4px; }
#outcome .cols { display: flex; gap: 16px; flex-wrap: wrap; }
#outcome .wide { flex: 2 1 480px; min-width: 0; } #outcome .side { flex: 1 1 320px; min-width: 0; }
#outcome pre.answer { white-space: pre-wrap; word-break: break-word; background: #f3f5f8;
  padding: 6px; border-radius: 4px; max-height: 16em; overflow: auto; margin: 0; }
#outcome ul { margin: 0; padding-left: 18px; } #outcome code { word-break: break-all; }
.pill { display: inline-block; padding: 0 8px; border-radius: 9px; color: #fff;
  background: #6b7485; font-weight: 600; margin-right: 6px; }
.pill.tone-green { background: #2f9e44; } .pill.tone-red { background: #e03131; }
.pill.tone-amber { background: #f59f00; }
#outcome li.trouble { list-style: none; margin: 0 0 4px -18px; padding: 2px 6px; }
li.trouble.tone-red { border-left: 4px solid #e03131; background: #fff0f0; }
li.trouble.tone-amber { border-left: 4px solid #f59f00; background: #fff8e6; }
.track { position: relative; flex: 1 1 auto; height: 20px; background: #f0f2f6; }
.bar { position: absolute; top: 2px; height: 16px; min-width: 2px; border-radius: 2px;
  cursor: pointer; box-sizing: border-box; }
.kind-model { background: #748ffc; }
/* Short events sit above the model calls they border, and stay wide enough to click. */
.kind-tool { background: #20c997; top: 5px; height: 10px; min-width: 5px; z-index: 1; }
.kind-retry, .kind-verification, .kind-limit, .kind-compaction { z-index: 1; min-width: 4px; }
.kind-wait { background: repeating-linear-gradient(45deg,#ced4da,#ced4da 3px,#e9ecef 3px,#e9ecef 6px); }
.kind-retry { background: #fab005; } .kind-compaction { background: #be4bdb; }
.kind-verification { background: #495057; } .kind-limit { background: #e03131; }
.bar.error { outline: 2px solid #e03131; } .bar.open { opacity: .55; border-right: 3px dashed #f08c00; }
.bar.crit { box-shadow: 0 0 0 2px #1d2430; }
.bar.selected { outline: 3px solid #f08c00; z-index: 3; }
table { border-collapse: collapse; margin: 8px 0 16px; }
td, th { padding: 2px 10px 2px 0; text-align: left; } th { color: #6b7485; font-weight: 600; }
.legend span { display: inline-block; margin-right: 12px; }
.legend i { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: middle; }
button { font: inherit; }
"""

SCRIPT = """
const data = JSON.parse(document.getElementById('timeline-data').textContent);
const el = (tag, text, cls) => { const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text); if (cls) e.className = cls; return e; };
const wall = Math.max(data.wall_s, 0.001);
const pct = s => (100 * s / wall) + '%';
const crit = new Set(data.critical);
const byId = Object.fromEntries(data.bars.map(b => [b.id, b]));
const pill = (text, tone) => el('span', text, 'pill tone-' + tone);
function outcome(o) {
  const box = document.getElementById('outcome');
  box.className = 'tone-' + o.tone;
  const head = el('h2'); head.append(pill(o.kind, o.tone), el('span', o.meaning));
  box.appendChild(head);
  if (o.reason && o.reason !== 'finished') box.appendChild(el('div', o.reason, 'why'));
  const cols = el('div', null, 'cols'), wide = el('div', null, 'wide'), side = el('div', null, 'side');
  wide.append(el('h3', 'Answer'), el('pre', o.answer || '(no answer)', 'answer'));
  const verdict = el('div', null, 'verdict');
  verdict.append(pill(o.verdict.verdict, o.verdict.tone), el('span', o.verdict.reason));
  side.append(el('h3', o.verdict.checked ? 'Check (run by gaffer)' : 'Verification'), verdict, el('h3', 'Files changed (' + o.files.length + ')'));
  const files = el('ul', null, 'files');
  for (const f of o.files) { const li = el('li'); li.append(el('code', f.path), el('span', ' ' + f.change + (f.by ? ' · ' + f.by : ''))); files.appendChild(li); }
  side.appendChild(o.files.length ? files : el('div', 'none'));
  if (o.troubles.length) {
    side.appendChild(el('h3', 'Workers that did not hold (' + o.troubles.length + ')'));
    const list = el('ul', null, 'troubles');
    for (const t of o.troubles) {
      const li = el('li', null, 'trouble tone-' + t.tone); li.dataset.agent = t.agent;
      li.append(pill(t.what, t.tone), el('span', t.agent + ' (' + t.profile + '): ' + t.reason));
      if (t.conflicts.length) { const c = el('ul', null, 'conflicts');
        for (const x of t.conflicts) { const i = el('li'); i.append(el('code', x.path), el('span', ': ' + x.why)); c.appendChild(i); }
        li.appendChild(c); }
      list.appendChild(li);
    }
    side.appendChild(list);
  }
  cols.append(wide, side); box.appendChild(cols);
}
outcome(data.outcome);
const chart = document.getElementById('chart');
const axis = el('div', null, 'axis');
const places = wall < 1 ? 2 : wall < 10 ? 1 : 0;
for (let i = 0; i <= 5; i++) { const t = el('span', (wall * i / 5).toFixed(places) + ' s');
  t.style.left = (i * 20) + '%'; axis.appendChild(t); }
chart.appendChild(axis);
for (const lane of data.lanes) {
  const row = el('div', null, 'lane ' + lane.status + (lane.merge ? ' merge-' + lane.merge : ''));
  row.dataset.agent = lane.agent;
  const name = el('div', '\\u00a0'.repeat(2 * lane.depth) + lane.agent + ' · ' + lane.profile, 'name');
  name.title = lane.agent + ' (' + lane.profile + '): ' + lane.status + (lane.reason ? ' — ' + lane.reason : '')
    + (lane.merge ? ' · merge: ' + lane.merge : '') + (lane.node ? ' · node ' + lane.node : '');
  row.appendChild(name);
  const track = el('div', null, 'track');
  for (const bar of data.bars.filter(b => b.agent === lane.agent)) {
    const b = el('div', null, 'bar kind-' + bar.kind + (bar.error ? ' error' : '') + (bar.open ? ' open' : '')
      + (crit.has(bar.id) ? ' crit' : ''));
    b.dataset.bar = bar.id; b.dataset.kind = bar.kind;
    b.style.left = pct(bar.start); b.style.width = pct(Math.max(bar.end - bar.start, 0));
    let tip = bar.label + ' · ' + (bar.end - bar.start).toFixed(2) + ' s';
    if (bar.kind === 'model') tip += ' · prompt ' + bar.detail.prompt_tokens + ' / completion ' + bar.detail.completion_tokens + ' tokens';
    if (bar.kind === 'tool') tip += ' · ' + bar.detail.sandbox + (bar.error ? ' · error' : '');
    if (bar.open) tip += ' · interrupted';
    b.title = tip;
    b.addEventListener('click', () => show(bar.id));
    track.appendChild(b);
  }
  row.appendChild(track);
  chart.appendChild(row);
}
function block(panel, title, text, limit) {
  if (text === undefined || text === null || text === '') return;
  panel.appendChild(el('h4', title));
  const full = typeof text === 'string' ? text : JSON.stringify(text, null, 2);
  const pre = el('pre', limit && full.length > limit ? full.slice(0, limit) + '\\n…' : full);
  panel.appendChild(pre);
  if (limit && full.length > limit) {
    const more = el('button', 'show all ' + full.length + ' characters');
    more.addEventListener('click', () => { pre.textContent = full; more.remove(); });
    panel.appendChild(more);
  }
}
function show(id) {
  const bar = byId[id];
  document.querySelectorAll('.bar.selected').forEach(b => b.classList.remove('selected'));
  const node = document.querySelector('[data-bar="' + id + '"]'); if (node) node.classList.add('selected');
  const panel = document.getElementById('panel');
  panel.replaceChildren(el('h3', bar.label));
  panel.appendChild(el('div', bar.agent + ' · ' + bar.kind + ' · ' + (bar.end - bar.start).toFixed(3) + ' s'
    + (bar.error ? ' · error' : '') + (bar.open ? ' · interrupted: the log ends here' : '')));
  const d = bar.detail || {};
  if (bar.kind === 'model') {
    panel.appendChild(el('div', 'tokens: prompt ' + d.prompt_tokens + ', completion ' + d.completion_tokens
      + ' · attempt ' + d.attempt + ' · ' + d.finish_reason));
    block(panel, 'text', d.text, 4000); if (d.calls && d.calls.length) block(panel, 'calls', d.calls, 4000);
  } else if (bar.kind === 'tool') {
    block(panel, 'arguments', d.args, 2000);
    block(panel, bar.child ? 'report of ' + bar.child + ' (written by gaffer)' : 'result', d.result, 3000);
    block(panel, 'change set', d.diff, 3000);
  } else { for (const [k, v] of Object.entries(d)) block(panel, k, v, 3000); }
}
function table(parent, head, rows) {
  const t = el('table'); const h = el('tr'); head.forEach(x => h.appendChild(el('th', x))); t.appendChild(h);
  rows.forEach(r => { const tr = el('tr'); r.forEach(x => tr.appendChild(el('td', x))); t.appendChild(tr); });
  parent.appendChild(t);
}
const totals = document.getElementById('totals');
totals.appendChild(el('h3', 'Per agent'));
table(totals, ['agent', 'profile', 'status', 'merge', 'tokens', 'model s', 'tools s', 'wall s'],
  data.lanes.map(l => [l.agent, l.profile, l.status, l.merge, l.tokens, l.model_s.toFixed(2), l.tool_s.toFixed(2), (l.end - l.start).toFixed(2)]));
totals.appendChild(el('h3', 'Per tool'));
table(totals, ['tool', 'calls', 'seconds', 'errors'], data.tools.map(t => [t.tool, t.calls, t.seconds.toFixed(2), t.errors]));
totals.appendChild(el('h3', 'Critical path (outlined in the chart)'));
table(totals, ['agent', 'what', 'seconds'], data.critical.map(id => byId[id]).map(b => [b.agent, b.label, (b.end - b.start).toFixed(2)]));
"""

LEGEND = [
    ("model", "#748ffc"),
    ("tool", "#20c997"),
    ("waiting for the workspace", "#ced4da"),
    ("retry", "#fab005"),
    ("compaction", "#be4bdb"),
    ("verification", "#495057"),
    ("limit", "#e03131"),
]


def render(timeline: Timeline) -> str:
    """The page: the outcome first, then chart, side panel and totals, all in one file."""
    payload = json.dumps(_shown(timeline.as_json()), ensure_ascii=True).replace("<", "\\u003c")
    legend = "".join(
        f'<span><i style="background:{colour}"></i>{html.escape(name)}</span>'
        for name, colour in LEGEND
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>gaffer run {_one_line(timeline.run_id)}</title><style>{STYLE}</style></head>
<body><header><h1>gaffer run {_one_line(timeline.run_id)} · {_one_line(timeline.status)} ·
{timeline.wall_s:.1f} s · {len(timeline.lanes)} agents{_cost(timeline.cost)}</h1>
<div class="task">{html.escape(visible(timeline.task))}</div></header>
<section id="outcome"></section>
<main><section id="chart"><div class="legend">{legend}</div></section>
<aside id="panel"><p>Click a bar to see the model's turn, the tool's result, or a worker's report and change set.</p></aside></main>
<section id="totals" style="padding: 0 16px 24px"></section>
<script type="application/json" id="timeline-data">{payload}</script>
<script>{SCRIPT}</script></body></html>
"""


def _one_line(text: str) -> str:
    return html.escape(one_line(text))


def _shown(value: Any) -> Any:
    """The page's data with every string made visible, keys included."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {_shown(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(v) for v in value]
    return value


def _cost(cost: str) -> str:
    return f" · {html.escape(cost)}" if cost else ""
