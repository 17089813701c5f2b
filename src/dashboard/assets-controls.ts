// The controls' part of the page script and style, served with ops.js and dashboard.css: a form
// marked data-control (lane pause, resume, concurrency, rate; scheduler run now, remove) is
// posted in the background once its confirm (dashboard.js) is accepted; on success the page
// reloads to show the new state and the toast says what the control did; a refusal stays on
// the page in a toast. The lanes page polls its lanes' counts every 5 s. Text only through textContent, as in the other scripts.

// Plain ES2017 for the browser. No template literals here: this whole script is one.
export const CONTROLS_JS = String.raw`(function () {
  'use strict';
  var KEY = 'emq-control-toast';
  function meta(name) {
    var m = document.querySelector('meta[name="' + name + '"]');
    return m ? m.getAttribute('content') : null;
  }
  function toast(text, kind) {
    var box = document.getElementById('toasts');
    if (!box) { box = document.createElement('div'); box.id = 'toasts'; box.setAttribute('aria-live', 'polite'); document.body.appendChild(box); }
    var t = document.createElement('div');
    t.className = 'toast control-toast ' + kind;
    t.setAttribute('data-state', kind === 'ok' ? 'done' : 'failed');
    var msg = document.createElement('span');
    msg.className = 'toast-text';
    msg.textContent = text;
    var close = document.createElement('button');
    close.type = 'button'; close.className = 'toast-close'; close.setAttribute('aria-label', 'dismiss');
    close.textContent = '\u00d7';
    close.addEventListener('click', function () { t.remove(); });
    t.appendChild(msg); t.appendChild(close);
    box.appendChild(t);
  }
  // What the control did before the reload.
  try {
    var kept = sessionStorage.getItem(KEY);
    if (kept) { sessionStorage.removeItem(KEY); toast(kept, 'ok'); }
  } catch (e) { /* storage off: no toast after the reload */ }

  // The lanes page polls its lanes' counts (a lane has no events of its own to follow).
  function duration(ms) {
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    var s = Math.floor(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60 < 10 ? '0' : '') + (s % 60) + ' s';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + (Math.floor(s / 60) % 60 < 10 ? '0' : '') + (Math.floor(s / 60) % 60) + ' min';
    return Math.floor(s / 86400) + ' d ' + (Math.floor(s / 3600) % 24) + ' h';
  }
  var queue = document.body.getAttribute('data-queue');
  if (queue && document.body.getAttribute('data-page') === 'lanes') {
    var live = document.getElementById('live');
    if (live) { live.textContent = 'every 5 s'; live.title = 'lane counts are polled'; }
    setInterval(function () {
      fetch((meta('emq-base') || '') + '/api/queues/' + encodeURIComponent(queue) + '/lanes', { headers: { accept: 'application/json' }, credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (v) {
          if (!v) return;
          v.lanes.forEach(function (l) {
            var cards = document.querySelectorAll('[data-lane-card]');
            for (var i = 0; i < cards.length; i++) {
              if (cards[i].getAttribute('data-lane-card') !== l.group) continue;
              var w = v.oldestWaitingMs[l.group];
              cards[i].querySelector('[data-lane-pending]').textContent = String(l.pending);
              cards[i].querySelector('[data-lane-running]').textContent = String(l.running);
              cards[i].querySelector('[data-lane-wait]').textContent = w === undefined ? '—' : duration(w);
            }
          });
        })
        .catch(function () {});
    }, 5000);
  }

  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    if (ev.defaultPrevented || !f || !f.getAttribute || !f.getAttribute('data-control')) return;
    ev.preventDefault();
    var fields = new URLSearchParams();
    new FormData(f).forEach(function (v, k) { fields.append(k, String(v)); });
    if (ev.submitter && ev.submitter.name) fields.append(ev.submitter.name, ev.submitter.value);
    fetch(f.getAttribute('action'), {
      method: 'POST', credentials: 'same-origin', body: fields,
      headers: { accept: 'application/json', 'x-csrf-token': meta('csrf-token') || '', 'content-type': 'application/x-www-form-urlencoded' }
    }).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) throw new Error(j.error || 'HTTP ' + r.status); return j.result; });
    }).then(function (result) {
      var text = result && result.message ? result.message : 'done';
      try { sessionStorage.setItem(KEY, text); location.reload(); } catch (e) { toast(text, 'ok'); }
    }).catch(function (e) { toast(String(e.message || e), 'fail'); });
  });
})();
`;

export const CONTROLS_CSS = `
form.control { display: flex; flex-wrap: wrap; gap: .3rem .5rem; align-items: end; margin: 0; }
form.control label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
form.control input { font: inherit; font-size: 13px; width: 6.5rem; padding: .2rem .4rem; border: 1px solid var(--line); border-radius: 5px; background: var(--card); color: var(--fg); }
.lane-cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 26rem), 1fr)); gap: 0 1rem; }
.lane-card .controls { display: flex; flex-wrap: wrap; gap: .6rem 1.4rem; }
.lane-card h2 { overflow-wrap: anywhere; }
td.actions { white-space: nowrap; }
`;
