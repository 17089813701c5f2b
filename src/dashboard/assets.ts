// The dashboard's stylesheet and page script, served from /assets (the CSP allows scripts and
// styles from 'self' only: nothing inline). The script follows the server-sent events of the
// queues on the page and refreshes counts, rows and job details from the JSON API; it writes
// text with textContent and builds elements with createElement, never from markup strings,
// except the chart, an SVG the server renders (parsed as SVG, so nothing in it can run).

import { JOB_CSS, JOB_JS } from './assets-job.js';

export const DASHBOARD_CSS = `
:root { color-scheme: light dark; --bg: #f7f7f8; --fg: #1d1d1f; --muted: #6b6b72; --card: #fff;
  --line: #e2e2e6; --accent: #3355cc; --ok: #2e7d32; --fail: #c62828; --warn: #b26a00; }
@media (prefers-color-scheme: dark) { :root { --bg: #141416; --fg: #ececf0; --muted: #9a9aa3;
  --card: #1e1e22; --line: #33333a; --accent: #8aa2ff; --ok: #66bb6a; --fail: #ef5350; --warn: #ffb74d; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
header.top { display: flex; gap: 1rem; align-items: center; padding: .6rem 1.2rem; background: var(--card); border-bottom: 1px solid var(--line); }
.brand { font-weight: 700; color: var(--fg); }
.crumbs { flex: 1; min-width: 0; overflow-wrap: anywhere; } .crumbs .sep { margin: 0 .4rem; color: var(--muted); }
.live { font-size: 12px; color: var(--muted); } .live.on { color: var(--ok); } .live.on::before { content: "● "; }
main { padding: 1rem 1.2rem 3rem; max-width: 1400px; margin: 0 auto; }
@media (max-width: 600px) { header.top { flex-wrap: wrap; padding: .5rem .8rem; gap: .4rem .8rem; } main { padding-left: .6rem; padding-right: .6rem; } }
h1 { font-size: 1.4rem; margin: .4rem 0 1rem; } h2 { font-size: 1rem; margin: 0 0 .6rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .9rem 1rem; margin-bottom: 1rem; overflow-x: auto; }
table.grid { border-collapse: collapse; width: 100%; }
.grid th, .grid td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
.grid th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.num { text-align: right !important; font-variant-numeric: tabular-nums; }
.mono, pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { margin: 0; white-space: pre-wrap; word-break: break-word; max-height: 30rem; overflow: auto; }
.err { color: var(--fail); max-width: 28rem; overflow: hidden; text-overflow: ellipsis; }
.badge { display: inline-block; font-size: 11px; padding: 1px 6px; border-radius: 9px; border: 1px solid var(--line); color: var(--muted); }
.badge.paused { color: var(--warn); border-color: var(--warn); }
.badge.dead, .badge.lease-expired { color: var(--fail); border-color: var(--fail); }
.warn { border-left: 3px solid var(--warn); padding: .4rem .6rem; margin: .4rem 0; }
.state { display: inline-block; font-size: 12px; padding: 1px 8px; border-radius: 9px; background: var(--line); }
.state-completed { background: var(--ok); color: #fff; } .state-dead { background: var(--fail); color: #fff; }
.state-active { background: var(--accent); color: #fff; } .state-cancelled { background: var(--muted); color: #fff; }
.state-scheduled { background: var(--warn); color: #fff; }
.tabs { display: flex; flex-wrap: wrap; gap: .3rem; margin: 0 0 .8rem; align-items: center; }
.tabs-label { color: var(--muted); margin-right: .3rem; }
.tab { padding: .3rem .7rem; border-radius: 6px; border: 1px solid var(--line); background: var(--card); color: var(--fg); }
.tab.active { border-color: var(--accent); color: var(--accent); font-weight: 600; }
.tab .count { color: var(--muted); margin-left: .2rem; }
.toolbar { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; margin-bottom: .6rem; }
.toolbar h2 { margin: 0; flex: 1; }
form.action { display: inline; margin: 0 .15rem 0 0; }
.btn { font: inherit; font-size: 12.5px; padding: .25rem .7rem; border-radius: 6px; border: 1px solid var(--line); background: var(--card); color: var(--fg); cursor: pointer; display: inline-block; }
.btn:hover { border-color: var(--accent); text-decoration: none; } .btn.danger { color: var(--fail); }
.pager { display: flex; gap: .6rem; align-items: center; margin-top: .6rem; color: var(--muted); }
.empty { color: var(--muted); }
.chart { width: 100%; height: auto; display: block; }
.chart .bar-ok { fill: var(--ok); } .chart .bar-fail { fill: var(--fail); }
.chart .axis { stroke: var(--line); } .chart .tick { fill: var(--muted); font-size: 12px; }
.legend { color: var(--muted); font-size: 12px; margin: .3rem 0 0; }
.key { display: inline-block; width: 10px; height: 10px; margin: 0 .2rem 0 .6rem; border-radius: 2px; }
.key.ok { background: var(--ok); } .key.fail { background: var(--fail); }
.stats { margin: 0 0 .4rem; color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1.2rem; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
ol.timeline { list-style: none; padding: 0; margin: 0; }
ol.timeline li { padding: .25rem 0; border-bottom: 1px dashed var(--line); }
ol.timeline time { color: var(--muted); font-variant-numeric: tabular-nums; }
.event { font-weight: 600; } .event-completed { color: var(--ok); } .event-failed, .event-retries_exhausted { color: var(--fail); }
.fields { color: var(--muted); font-family: ui-monospace, monospace; font-size: 12px; }
.error-message { color: var(--fail); }
.chart .bar-cut { fill: var(--warn); }
.badge.cap { color: var(--warn); border-color: var(--warn); margin-left: .2rem; }
form.filters { display: flex; flex-wrap: wrap; gap: .4rem .8rem; align-items: end; margin: 0 0 .5rem; }
form.filters label, form.find-id label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
form.filters input, form.filters select, form.find-id input { font: inherit; font-size: 13px; padding: .2rem .4rem; border: 1px solid var(--line); border-radius: 5px; background: var(--card); color: var(--fg); min-width: 8rem; }
form.filters .hint { flex-basis: 100%; margin: 0; font-size: 12px; color: var(--muted); }
form.find-id { display: flex; gap: .4rem; align-items: end; margin: 0 0 .6rem; }
.search-note { margin: .2rem 0 .5rem; color: var(--warn); }
form.bulk { display: flex; gap: .4rem; align-items: center; margin: 0 0 .4rem; color: var(--muted); }
.pick { width: 1.6rem; } .grid time { white-space: nowrap; } td.actions { white-space: nowrap; }
td.preview { color: var(--muted); max-width: 18rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
#toasts { position: fixed; right: 1rem; bottom: 1rem; display: flex; flex-direction: column; gap: .4rem; z-index: 10; max-width: min(28rem, calc(100vw - 2rem)); }
.toast { background: var(--card); border: 1px solid var(--line); border-left: 4px solid var(--accent); border-radius: 6px; padding: .5rem .7rem; box-shadow: 0 2px 8px rgba(0,0,0,.15); display: flex; flex-wrap: wrap; gap: .4rem; align-items: center; }
.toast.ok { border-left-color: var(--ok); } .toast.fail { border-left-color: var(--fail); }
.toast-text { flex: 1; } .toast progress { flex-basis: 100%; width: 100%; }
.toast-close { border: 0; background: none; color: var(--muted); cursor: pointer; font-size: 16px; }
[hidden] { display: none !important; }
${JOB_CSS}`;

// Plain ES2017 for the browser. No template literals here: this whole script is one.
export const DASHBOARD_JS = String.raw`(function () {
  'use strict';
  var body = document.body;
  var page = body.getAttribute('data-page');
  var base = meta('emq-base') || '';
  var csrf = meta('csrf-token');
  var liveEl = document.getElementById('live');
  var MAX_STREAM_QUEUES = 100; // the event stream's limit (routes.ts)
  var ACTIONS = { promote: ['scheduled'], retry: ['dead', 'cancelled', 'completed'], cancel: ['scheduled', 'pending', 'active'],
    remove: ['scheduled', 'pending', 'completed', 'dead', 'cancelled'] };

  function meta(name) {
    var m = document.querySelector('meta[name="' + name + '"]');
    return m ? m.getAttribute('content') : null;
  }
  function enc(s) { return encodeURIComponent(s); }
  function api(path) {
    return fetch(base + path, { headers: { accept: 'application/json' }, credentials: 'same-origin' })
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); });
  }
  function fmtTime(ms) {
    if (!ms || ms <= 0) return '\u2014';
    return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }
  function pretty(v) {
    if (v === undefined) return '';
    if (typeof v === 'string') return v;
    try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); }
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  // "at cap N" beside an ended count: shown while the count has reached what retention keeps.
  function caps(root, counts) {
    var b = root.querySelectorAll('[data-cap]');
    for (var i = 0; i < b.length; i++) b[i].hidden = (counts[b[i].getAttribute('data-cap')] || 0) < Number(b[i].getAttribute('data-kept'));
  }
  function setText(id, text) { var e = document.getElementById(id); if (e) e.textContent = text; }
  function throttle(fn, ms) {
    var timer = null, again = false;
    return function () {
      if (timer) { again = true; return; }
      fn();
      timer = setTimeout(function () { timer = null; if (again) { again = false; fn(); } }, ms);
    };
  }
  function replaceChart(box, queue) {
    fetch(base + '/api/chart.svg' + (queue ? '?queue=' + enc(queue) : ''), { credentials: 'same-origin' })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var doc = new DOMParser().parseFromString(text, 'image/svg+xml');
        var svg = doc.documentElement;
        if (!svg || svg.nodeName !== 'svg') return;
        box.replaceChildren(document.importNode(svg, true));
      })
      .catch(function () {});
  }
  function refreshCharts() {
    var boxes = document.querySelectorAll('[data-chart]');
    for (var i = 0; i < boxes.length; i++) replaceChart(boxes[i], boxes[i].getAttribute('data-chart'));
  }

  // ── live: one EventSource for the queues of this page ───────────────────────
  // onEvent runs for every event, and once when the stream is ready: whatever happened between
  // the page's render and the subscription is picked up by that first refresh.
  function follow(queues, onEvent) {
    if (!window.EventSource || queues.length === 0) return;
    var es = new EventSource(base + '/api/events?' + queues.map(function (q) { return 'queue=' + enc(q); }).join('&'));
    es.addEventListener('ready', function () {
      liveEl.textContent = 'live'; liveEl.classList.add('on'); body.setAttribute('data-live', 'ready');
      onEvent(null);
    });
    es.addEventListener('error', function () {
      liveEl.textContent = 'reconnecting'; liveEl.classList.remove('on'); body.setAttribute('data-live', 'down');
    });
    es.addEventListener('down', function (m) {
      var why = 'Redis down';
      try { why = JSON.parse(m.data).error || why; } catch (err) { /* keep the short form */ }
      liveEl.textContent = 'Redis down'; liveEl.title = why; liveEl.classList.remove('on');
      body.setAttribute('data-live', 'redis-down');
    });
    es.addEventListener('job', function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      onEvent(e);
    });
    window.addEventListener('pagehide', function () { es.close(); });
  }

  // ── confirmations for destructive forms ─────────────────────────────────────
  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    var text = f && f.getAttribute && f.getAttribute('data-confirm');
    if (text && !window.confirm(text)) ev.preventDefault();
  });

  function actionForm(action, label, ret, danger) {
    var f = el('form', { class: 'action', method: 'post', action: action });
    f.appendChild(el('input', { type: 'hidden', name: '_csrf', value: csrf }));
    f.appendChild(el('input', { type: 'hidden', name: 'return', value: ret }));
    f.appendChild(el('button', { type: 'submit', class: 'btn' + (danger ? ' danger' : ''), 'data-action': label.toLowerCase() }, label));
    return f;
  }

  // ── overview ───────────────────────────────────────────────────────────────
  function overview() {
    var queues = (body.getAttribute('data-queues') || '').split('\n').filter(Boolean);
    var refresh = throttle(function () {
      api('/api/overview').then(function (data) {
        var rows = document.querySelectorAll('#queues tr[data-queue]');
        var byName = {};
        data.queues.forEach(function (s) { byName[s.name] = s; });
        for (var i = 0; i < rows.length; i++) {
          var s = byName[rows[i].getAttribute('data-queue')];
          if (!s) continue;
          var cells = rows[i].querySelectorAll('[data-count]');
          for (var j = 0; j < cells.length; j++) cells[j].textContent = String(s.counts[cells[j].getAttribute('data-state')] || 0);
          caps(rows[i], s.counts);
          var badge = rows[i].querySelector('[data-paused]');
          if (badge) badge.hidden = !s.paused;
        }
      }).catch(function () {});
    }, 500);
    var charts = throttle(refreshCharts, 5000);
    if (queues.length > MAX_STREAM_QUEUES) {
      // One event reader per queue does not scale to hundreds of queues: poll the counts instead.
      liveEl.textContent = 'every 5 s'; liveEl.title = queues.length + ' queues: counts are polled';
      body.setAttribute('data-live', 'polling');
      setInterval(refresh, 5000);
    } else follow(queues, function () { refresh(); charts(); });
    setInterval(function () { refresh(); refreshCharts(); }, 30000);
  }

  // ── one queue ──────────────────────────────────────────────────────────────
  function queuePage() {
    var queue = body.getAttribute('data-queue');
    var state = body.getAttribute('data-state');
    var lane = body.getAttribute('data-lane');
    var offset = body.getAttribute('data-offset') || '0';
    var limit = body.getAttribute('data-limit') || '25';
    var self = body.getAttribute('data-self');
    var qbase = '/queues/' + enc(queue);
    function timeEl(ms) {
      if (!ms || ms <= 0) return document.createTextNode('\u2014');
      return el('time', { datetime: new Date(ms).toISOString(), 'data-ms': String(ms) }, fmtTime(ms));
    }
    function row(job) {
      var tr = el('tr', { 'data-job': job.id });
      var td;
      if (csrf) {
        td = el('td', { class: 'pick' });
        td.appendChild(el('input', { type: 'checkbox', name: 'id', value: job.id, form: 'bulk', 'aria-label': 'select ' + job.id }));
        tr.appendChild(td);
      }
      td = el('td'); td.appendChild(el('a', { class: 'mono', href: base + qbase + '/jobs/' + enc(job.id) }, job.id)); tr.appendChild(td);
      tr.appendChild(el('td', null, job.name || ''));
      td = el('td'); td.appendChild(el('span', { class: 'state state-' + job.state }, job.state));
      if (job.leaseExpired) { td.appendChild(document.createTextNode(' ')); td.appendChild(el('span', { class: 'badge lease-expired' }, 'lease expired')); }
      tr.appendChild(td);
      tr.appendChild(el('td', { class: 'num' }, job.attempts + ' / ' + job.maxAttempts));
      tr.appendChild(el('td', null, job.group || ''));
      tr.appendChild(el('td', { class: 'preview mono', title: job.preview || '' }, job.preview || ''));
      td = el('td'); td.appendChild(timeEl(job.createdAt)); tr.appendChild(td);
      td = el('td'); td.appendChild(timeEl(job.leaseUntil || job.finishedAt || job.startedAt || job.runAt)); tr.appendChild(td);
      tr.appendChild(el('td', { class: 'err' }, job.error ? job.error.message : ''));
      td = el('td', { class: 'actions' });
      if (csrf) {
        ['promote', 'retry', 'cancel', 'remove'].forEach(function (a) {
          if (ACTIONS[a].indexOf(job.state) < 0) return;
          td.appendChild(actionForm(base + qbase + '/jobs/' + enc(job.id) + '/' + a, a.charAt(0).toUpperCase() + a.slice(1), self, a === 'remove'));
        });
      }
      tr.appendChild(td);
      return tr;
    }
    var refresh = throttle(function () {
      var qs = '?state=' + enc(state) + '&offset=' + enc(offset) + '&limit=' + enc(limit) + (lane ? '&lane=' + enc(lane) : '') +
        ['tag', 'name', 'error', 'text'].map(function (k) { var v = body.getAttribute('data-' + k); return v ? '&' + k + '=' + enc(v) : ''; }).join('');
      Promise.all([api('/api/queues/' + enc(queue) + '/stats'), api('/api/queues/' + enc(queue) + '/jobs' + qs)])
        .then(function (r) {
          var stats = r[0], page = r[1];
          var counts = document.querySelectorAll('[data-count]');
          for (var i = 0; i < counts.length; i++) counts[i].textContent = String(stats.counts[counts[i].getAttribute('data-state')] || 0);
          stats.lanes.forEach(function (l) {
            var c = document.querySelectorAll('[data-lane-count]');
            for (var k = 0; k < c.length; k++) if (c[k].getAttribute('data-lane-count') === l.group) c[k].textContent = String(l.pending);
            var rows = document.querySelectorAll('tr[data-lane]');
            for (var m = 0; m < rows.length; m++) {
              if (rows[m].getAttribute('data-lane') !== l.group) continue;
              rows[m].querySelector('[data-lane-pending]').textContent = String(l.pending);
              rows[m].querySelector('[data-lane-running]').textContent = String(l.running);
            }
          });
          var badge = document.querySelector('h1 [data-paused]');
          if (badge) badge.hidden = !stats.paused;
          ['completedLastHour', 'failedLastHour'].forEach(function (k) {
            var e = document.querySelector('[data-stat="' + k + '"]'); if (e) e.textContent = String(stats.rates[k]);
          });
          var fr = document.querySelector('[data-stat="failureRate"]');
          if (fr) fr.textContent = (stats.rates.failureRate * 100).toFixed(1);
          var tbody = document.querySelector('#jobs tbody');
          var keep = {};
          var boxes = tbody.querySelectorAll('input[name=id]:checked');
          for (var b = 0; b < boxes.length; b++) keep[boxes[b].value] = true;
          tbody.replaceChildren.apply(tbody, page.jobs.map(function (job) {
            var tr = row(job);
            var box = tr.querySelector('input[name=id]');
            if (box && keep[job.id]) box.checked = true;
            return tr;
          }));
          caps(document, stats.counts);
          var empty = document.getElementById('jobs-empty');
          if (empty) empty.hidden = page.jobs.length > 0;
          var from = page.total === 0 ? 0 : Number(offset) + 1;
          setText('jobs-range', from + '\u2013' + (Number(offset) + page.jobs.length) + ' of ' + page.total);
        })
        .catch(function () {});
    }, 700);
    var charts = throttle(refreshCharts, 5000);
    follow([queue], function () { refresh(); charts(); });
  }

${JOB_JS}
  if (page === 'overview') overview();
  else if (page === 'queue') queuePage();
  else if (page === 'job') jobPage();
})();
`;
