// The job page's part of the stylesheet and of the page script (job-page.ts renders the page).
// JOB_JS is spliced into dashboard.js's function, so it uses its helpers (api, el, enc, follow,
// fmtTime, pretty, setText, throttle) and runs on a page whose data-page is "job". Plain ES2017,
// no template literals: the script is one.

/** Appended to the dashboard's stylesheet (assets.ts). */
export const JOB_CSS = `
.job-title { overflow-wrap: anywhere; }
dl.facts dd { min-width: 0; overflow-wrap: anywhere; }
details.json-box > summary { display: flex; gap: .6rem; align-items: center; cursor: pointer; list-style: none; }
details.json-box > summary::-webkit-details-marker { display: none; }
details.json-box > summary::before { content: "▸"; color: var(--muted); }
details.json-box[open] > summary::before { content: "▾"; }
details.json-box > summary h2 { margin: 0; }
details.json-box[open] > summary { margin-bottom: .6rem; }
details.json-box .copy { margin-left: auto; }
.j-k { color: var(--accent); } .j-s { color: var(--ok); } .j-n, .j-l { color: var(--warn); }
table.runs td .state, table.runs td.num { white-space: nowrap; }
table.runs .error-message { overflow-wrap: anywhere; }
@media (max-width: 600px) {
  dl.facts { grid-template-columns: minmax(5.5rem, max-content) minmax(0, 1fr); gap: .3rem .7rem; }
  table.runs thead { display: none; }
  table.runs, table.runs tbody, table.runs tr, table.runs td { display: block; width: 100%; }
  table.runs tr { border-bottom: 1px solid var(--line); padding: .3rem 0; }
  table.runs td { border: 0; padding: .1rem 0; display: flex; gap: .6rem; text-align: left !important; }
  table.runs td::before { content: attr(data-label); color: var(--muted); min-width: 5rem; flex: none; }
  table.runs td > * { min-width: 0; }
  table.runs td:empty { display: none; }
  ol.timeline li { overflow-wrap: anywhere; }
}
`;

/** The job page's script: the function dashboard.js calls on a job page. */
export const JOB_JS = String.raw`  // ── one job ────────────────────────────────────────────────────────────────
  // Refreshed from the JSON API on each of its events: facts, attempts, boxes, timeline. Text
  // that did not change is left alone (the formatted JSON keeps its marks, a selection stays).
  function jobPage() {
    var queue = body.getAttribute('data-queue');
    var id = body.getAttribute('data-job');
    var jobApi = '/api/queues/' + enc(queue) + '/jobs/' + enc(id);
    var COLUMNS = ['#', 'consumer', 'ready', 'started', 'waited', 'ran', 'outcome', 'error'];
    var OUTCOME = { running: 'state-active', completed: 'state-completed', failed: 'state-dead', stalled: 'state-scheduled', returned: 'state-cancelled', unknown: '' };
    function timeEl(ms) {
      if (!ms) return document.createTextNode('\u2014');
      return el('time', { datetime: new Date(ms).toISOString(), 'data-ms': String(ms) }, fmtTime(ms));
    }
    function dur(ms) {
      if (ms === undefined || ms === null || ms < 0) return '\u2014';
      if (ms < 1000) return Math.round(ms) + ' ms';
      if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
      var s = Math.floor(ms / 1000), p2 = function (n) { return (n < 10 ? '0' : '') + n; };
      if (s < 3600) return Math.floor(s / 60) + ' min ' + p2(s % 60) + ' s';
      if (s < 86400) return Math.floor(s / 3600) + ' h ' + p2(Math.floor(s / 60) % 60) + ' min';
      return Math.floor(s / 86400) + ' d ' + (Math.floor(s / 3600) % 24) + ' h';
    }
    function box(name, text) {
      var has = !(text === undefined || text === null || text === '');
      var b = document.getElementById(name + '-box');
      if (b) b.hidden = !has;
      var e = document.getElementById(name);
      if (e && e.textContent !== (has ? text : '')) e.textContent = has ? text : '';
      var size = document.getElementById(name + '-size');
      if (size && has) { var n = String(text).split('\n').length; size.textContent = n + (n === 1 ? ' line' : ' lines'); }
    }
    function when(elId, ms) {
      var e = document.getElementById(elId);
      if (!e) return;
      var t = e.querySelector('time');
      if (t ? t.getAttribute('data-ms') === String(ms) : !ms) return;
      e.replaceChildren(timeEl(ms));
    }
    function lease(job) {
      var dd = document.getElementById('job-lease');
      if (!dd) return;
      var has = job.leaseUntil !== undefined;
      dd.hidden = !has;
      if (dd.previousElementSibling) dd.previousElementSibling.hidden = !has;
      if (!has) return;
      var kids = [timeEl(job.leaseUntil)];
      if (job.leaseExpired) {
        kids.push(document.createTextNode(' '), el('span', { class: 'badge lease-expired' }, 'expired'), document.createTextNode(' '),
          el('span', { class: 'fields' }, 'its consumer died or hangs: echomq recover or a running consumer returns it'));
      }
      dd.replaceChildren.apply(dd, kids);
    }
    function runRow(r) {
      var tr = el('tr', { 'data-attempt': String(r.attempt), 'data-outcome': r.outcome });
      var out = el('span');
      out.appendChild(el('span', { class: 'state ' + (OUTCOME[r.outcome] || '') }, r.outcome));
      if (r.reason) { out.appendChild(document.createTextNode(' ')); out.appendChild(el('span', { class: 'fields' }, r.reason)); }
      var cells = [
        document.createTextNode(String(r.attempt)),
        r.consumer ? el('span', { class: 'mono' }, r.consumer) : document.createTextNode('\u2014'),
        timeEl(r.readyAt), timeEl(r.startedAt),
        document.createTextNode(dur(r.waitMs)), document.createTextNode(dur(r.runMs)),
        out, r.error ? el('span', { class: 'error-message' }, r.error) : null
      ];
      cells.forEach(function (c, i) {
        var td = el('td', i === 4 || i === 5 ? { 'data-label': COLUMNS[i], class: 'num' } : { 'data-label': COLUMNS[i] });
        if (c) td.appendChild(c);
        tr.appendChild(td);
      });
      return tr;
    }
    function runs(job) {
      var table = document.getElementById('job-runs');
      if (!table) return;
      table.hidden = job.runs.length === 0;
      var empty = document.getElementById('job-runs-empty');
      if (empty) empty.hidden = job.runs.length > 0;
      var partial = document.getElementById('job-runs-partial');
      if (partial) partial.hidden = !job.runsPartial;
      var tbody = table.querySelector('tbody');
      tbody.replaceChildren.apply(tbody, job.runs.map(runRow));
    }

    // Logs: the newest page is shown and kept fresh; Older and Newer page through the rest.
    var pager = document.getElementById('job-logs-pager');
    var logFrom = pager ? Number(pager.getAttribute('data-from')) : 0;
    var logSize = pager ? Number(pager.getAttribute('data-page')) : 100;
    var logCount = pager ? Number(pager.getAttribute('data-count')) : 0;
    var paging = false; // an older page is shown: live refreshes leave the log alone
    function showLogs(from) {
      api(jobApi + '/logs?from=' + from + '&count=' + logSize).then(function (p) {
        logFrom = from; logCount = p.count;
        setText('job-logs', p.logs.join('\n'));
        setText('job-logs-range', 'lines ' + (p.logs.length ? from + 1 : 0) + '\u2013' + (from + p.logs.length) + ' of ' + p.count);
        var last = from + p.logs.length >= p.count;
        pager.querySelector('[data-logs="older"]').disabled = from <= 0;
        pager.querySelector('[data-logs="newer"]').disabled = last;
        paging = !last;
      }).catch(function () {});
    }
    if (pager) pager.addEventListener('click', function (ev) {
      var b = ev.target && ev.target.closest ? ev.target.closest('[data-logs]') : null;
      if (!b || b.disabled) return;
      if (b.getAttribute('data-logs') === 'older') showLogs(Math.max(0, logFrom - logSize));
      else showLogs(Math.min(logFrom + logSize, Math.max(0, logCount - logSize)));
    });

    var refresh = throttle(function () {
      api(jobApi).then(function (job) {
        var st = document.getElementById('job-state');
        st.textContent = job.state; st.className = 'state state-' + job.state;
        setText('job-attempts', job.attempts + ' / ' + job.maxAttempts);
        var who = document.getElementById('job-consumer');
        if (who && who.textContent !== (job.consumer || '\u2014')) {
          who.replaceChildren(job.consumer ? el('span', { class: 'mono' }, job.consumer) : document.createTextNode('\u2014'));
        }
        setText('job-stalled', String(job.stalled));
        setText('job-cancel', job.cancelRequested ? 'yes' : 'no');
        when('job-runat', job.runAt);
        when('job-started', job.startedAt);
        when('job-finished', job.finishedAt);
        lease(job);
        runs(job);
        box('job-data', pretty(job.data));
        box('job-result', job.result === undefined ? undefined : pretty(job.result));
        box('job-error', job.error ? job.error.message : undefined);
        box('job-stack', job.error ? job.error.stack : undefined);
        box('job-last-error', job.lastError ? (job.lastError.message + '\n\n' + (job.lastError.stack || '')).trim() : undefined);
        box('job-progress', job.progress === undefined ? undefined : pretty(job.progress));
        if (!pager) {
          box('job-logs', job.logCount ? job.logs.join('\n') : undefined);
          setText('job-logs-range', job.logs.length < job.logCount ? 'the newest ' + job.logs.length + ' of ' + job.logCount + ' lines' : job.logCount + (job.logCount === 1 ? ' line' : ' lines'));
        }
        else if (!paging && job.logCount !== logCount) showLogs(Math.max(0, job.logCount - logSize));
        var forms = document.querySelectorAll('#job-actions form[data-states]');
        for (var i = 0; i < forms.length; i++) forms[i].hidden = forms[i].getAttribute('data-states').split(' ').indexOf(job.state) < 0;
        var list = document.getElementById('job-history');
        list.replaceChildren.apply(list, job.history.map(function (e) {
          var li = el('li');
          li.appendChild(el('time', null, fmtTime(Number(e.streamId.split('-')[0]))));
          li.appendChild(document.createTextNode(' '));
          li.appendChild(el('span', { class: 'event event-' + e.event }, e.event));
          li.appendChild(document.createTextNode(' '));
          var f = Object.keys(e.fields).filter(function (k) { return e.fields[k] !== ''; })
            .map(function (k) { return k + '=' + e.fields[k]; }).join(' ');
          li.appendChild(el('span', { class: 'fields' }, f));
          return li;
        }));
        body.setAttribute('data-job-state', job.state);
      }).catch(function () {});
    }, 300);
    follow([queue], function (e) { if (!e || e.id === id) refresh(); });
  }

`;
