// The page script's operator part, served as /assets/ops.js after dashboard.js: times in the
// browser's local zone and relative ("3 min ago"), checked rows and bulk actions with a toast
// saying what each did, long actions (data-task forms) posted in the background with their
// progress followed in a toast, and copy buttons. Like dashboard.js it writes text with
// textContent and builds elements with createElement, never from markup strings.

// Plain ES2017 for the browser. No template literals here: this whole script is one.
export const OPS_JS = String.raw`(function () {
  'use strict';
  var body = document.body;
  var base = meta('emq-base') || '';
  var csrf = meta('csrf-token');
  var queue = body.getAttribute('data-queue');

  function meta(name) {
    var m = document.querySelector('meta[name="' + name + '"]');
    return m ? m.getAttribute('content') : null;
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(n) { return Number(n).toLocaleString('en-US'); }

  // ── times: local and relative, UTC in the title ─────────────────────────────
  function ago(ms) {
    var d = Date.now() - ms, future = d < 0, s = Math.round(Math.abs(d) / 1000), t;
    if (s < 45) t = s + ' s';
    else if (s < 2700) t = Math.round(s / 60) + ' min';
    else if (s < 86400) t = Math.round(s / 3600) + ' h';
    else t = Math.round(s / 86400) + ' d';
    return future ? 'in ' + t : t + ' ago';
  }
  function pad(n) { return (n < 10 ? '0' : '') + n; }
  function local(ms) {
    var d = new Date(ms);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + pad(d.getHours()) + ':' +
      pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }
  function localize() {
    var times = document.querySelectorAll('time[data-ms]');
    for (var i = 0; i < times.length; i++) {
      var t = times[i], ms = Number(t.getAttribute('data-ms'));
      if (!ms) continue;
      var text = local(ms) + ' (' + ago(ms) + ')';
      if (t.textContent !== text) t.textContent = text;
      t.title = new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') + ' (UTC)';
      t.setAttribute('data-local', '1');
    }
  }
  var pending = false;
  new MutationObserver(function () {
    if (pending) return;
    pending = true;
    setTimeout(function () { pending = false; localize(); pickCount(); }, 50);
  }).observe(body, { childList: true, subtree: true });
  localize();
  setInterval(localize, 15000);

  // ── toasts ─────────────────────────────────────────────────────────────────
  var toasts = el('div', { id: 'toasts', 'aria-live': 'polite' });
  body.appendChild(toasts);
  function toast(text, kind) {
    var t = el('div', { class: 'toast' + (kind ? ' ' + kind : '') });
    var msg = el('span', { class: 'toast-text' }, text);
    var close = el('button', { type: 'button', class: 'toast-close', 'aria-label': 'dismiss' }, '\u00d7');
    close.addEventListener('click', function () { t.remove(); });
    t.appendChild(msg); t.appendChild(close);
    toasts.appendChild(t);
    return { el: t, say: function (s, k) {
      msg.textContent = s; t.className = 'toast' + (k ? ' ' + k : '');
      if (k === 'fail') t.setAttribute('data-state', 'failed');
    } };
  }

  function post(form, submitter) {
    var data = new FormData(form);
    if (submitter && submitter.name) data.append(submitter.name, submitter.value);
    var fields = new URLSearchParams();
    data.forEach(function (v, k) { fields.append(k, String(v)); });
    return fetch(form.getAttribute('action'), { // not form.action: a button may be named action
      method: 'POST', credentials: 'same-origin', body: fields,
      headers: { accept: 'application/json', 'x-csrf-token': csrf || '', 'content-type': 'application/x-www-form-urlencoded' }
    }).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) throw new Error(j.error || 'HTTP ' + r.status); return j.result; });
    });
  }

  // ── long actions: post, then follow the task's progress ──────────────────────
  function follow(task, t) {
    t = t || toast(task.label + ': starting', 'running');
    t.el.setAttribute('data-task', task.id);
    var bar = el('progress', { max: '1', value: '0' });
    t.el.appendChild(bar);
    function show(v) {
      var of = v.total === null || v.total === undefined ? '' : ' of ' + num(v.total);
      if (v.total) { bar.max = v.total; bar.value = v.done; }
      if (v.state === 'running') t.say(v.label + ': ' + num(v.done) + of + '\u2026', 'running');
      else if (v.state === 'done') { bar.remove(); t.say(v.label + ': done, ' + num(v.done) + of, 'ok'); t.el.setAttribute('data-state', 'done'); }
      else { bar.remove(); t.say(v.label + ': failed after ' + num(v.done) + ': ' + v.error, 'fail'); t.el.setAttribute('data-state', 'failed'); }
    }
    show(task);
    (function poll() {
      if (task.state !== 'running') return;
      setTimeout(function () {
        fetch(base + '/api/tasks/' + encodeURIComponent(task.id), { headers: { accept: 'application/json' }, credentials: 'same-origin' })
          .then(function (r) { return r.ok ? r.json() : null; })
          .then(function (v) { if (v) { task = v; show(v); } poll(); })
          .catch(function () { setTimeout(poll, 2000); });
      }, 400);
    })();
  }

  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    if (ev.defaultPrevented || !f || !f.getAttribute) return;
    if (f.getAttribute('data-task')) {
      ev.preventDefault();
      var t = toast('starting\u2026', 'running');
      post(f, ev.submitter).then(function (r) { follow(r.task, t); }).catch(function (e) { t.say(String(e.message || e), 'fail'); });
    } else if (f.getAttribute('id') === 'bulk') { // not f.id: the checked boxes are named id
      ev.preventDefault();
      var picked = checked().length, verb = ev.submitter ? ev.submitter.value : '';
      if (picked === 0) { toast('Select jobs first (the boxes on the left).', 'fail'); return; }
      var ask = verb === 'promote' ? 'Run ' + picked + ' selected job(s) now?' : verb.charAt(0).toUpperCase() + verb.slice(1) + ' ' + picked + ' selected job(s)?';
      if (!window.confirm(ask)) return;
      var b = toast(verb + ' ' + picked + ' job(s)\u2026', 'running');
      post(f, ev.submitter).then(function (r) {
        var past = { promote: 'Promoted', retry: 'Retried', cancel: 'Cancelled', remove: 'Removed' }[r.action] || r.action;
        var text = past + ' ' + r.done + ' of ' + picked;
        if (r.refused.length) text += '; refused ' + r.refused.length + ': ' + r.refused.slice(0, 3).map(function (x) { return x.error; }).join('; ');
        b.say(text, r.refused.length ? 'fail' : 'ok');
        b.el.setAttribute('data-state', 'done');
        var all = document.getElementById('pick-all'); if (all) all.checked = false;
      }).catch(function (e) { b.say(String(e.message || e), 'fail'); });
    }
  });

  // ── checked rows ───────────────────────────────────────────────────────────
  function checked() { return document.querySelectorAll('#jobs input[type=checkbox][name=id]:checked'); }
  function pickCount() {
    var c = document.getElementById('bulk-count');
    if (c) c.textContent = checked().length + ' selected';
  }
  document.addEventListener('change', function (ev) {
    var t = ev.target;
    if (t && t.id === 'pick-all') {
      var boxes = document.querySelectorAll('#jobs input[type=checkbox][name=id]');
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = t.checked;
    }
    pickCount();
  });

  // ── copy buttons ───────────────────────────────────────────────────────────
  document.addEventListener('click', function (ev) {
    var b = ev.target && ev.target.closest ? ev.target.closest('[data-copy]') : null;
    if (!b) return;
    var src = document.getElementById(b.getAttribute('data-copy'));
    if (!src || !navigator.clipboard) return;
    navigator.clipboard.writeText(src.textContent || '').then(function () {
      b.textContent = 'Copied'; setTimeout(function () { b.textContent = 'Copy'; }, 1500);
    }, function () { b.textContent = 'Copy failed'; });
  });

  // A queue page picks up the tasks that still run (started before a reload, or from a form
  // posted without this script).
  if (queue && body.getAttribute('data-page') === 'queue') {
    fetch(base + '/api/queues/' + encodeURIComponent(queue) + '/tasks', { headers: { accept: 'application/json' }, credentials: 'same-origin' })
      .then(function (r) { return r.ok ? r.json() : []; })
      .then(function (list) { list.forEach(function (task) { if (task.state === 'running') follow(task); }); })
      .catch(function () {});
  }
})();
`;
