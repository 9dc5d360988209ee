// console.js: the operator console. Views: sign in, the campaign list
// (red packet rains and discount campaigns), a new campaign, one campaign
// live. The admin key lives in this tab's sessionStorage only and travels
// as an Authorization header; it is never put in a URL, a cookie or the
// page.
import {
  $, api, ApiError, clear, el, fmtInt, fmtMoney, fmtRelative, fmtTime, setText, streamEvents,
} from './common.js';
import { discountPanels, panels } from './panels.js';

const KEY = 'hongbao.console.key';
const LIST_EVERY_MS = 5000;
// A discount campaign has no event stream: its page reads its status
// this often while the tab is visible.
const DISCOUNT_EVERY_MS = 1000;

// The kinds of campaign, as hongbao campaign --kind spells them: where
// each lives in the API and in the console, and what the pages call it.
const kinds = {
  'red-packet': { name: 'Red packet', api: '/v1/campaigns/', route: '#/c/', panels },
  discount: { name: 'Discount', api: '/v1/discounts/', route: '#/d/', panels: discountPanels },
};

const app = {
  key: sessionStorage.getItem(KEY) || '',
  leave: null, // ends the current view's work: timers, requests, streams
  listKind: '', // the list's filter: '' (all) or a kind
};

function show(view) {
  for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + view;
  $('signout').hidden = view === 'login';
  $('conn').hidden = view !== 'detail';
  window.scrollTo(0, 0);
}

function route() {
  if (app.leave) {
    app.leave();
    app.leave = null;
  }
  if (!app.key) {
    showLogin();
    return;
  }
  const h = location.hash.replace(/^#/, '');
  const m = /^\/([cd])\/([A-Za-z0-9_-]{1,64})$/.exec(h);
  if (h === '/new') showCreate();
  else if (m) showDetail(m[1] === 'd' ? 'discount' : 'red-packet', m[2]);
  else showList();
}

function signOut(message) {
  sessionStorage.removeItem(KEY);
  app.key = '';
  route();
  if (message) setText($('login-error'), message);
}

// authFailed signs out when the server refused the key (it may have been
// rotated away); it says whether it did.
function authFailed(err) {
  if (err instanceof ApiError && err.status === 401) {
    signOut('The server refused the admin key. Sign in again.');
    return true;
  }
  return false;
}

function notice(e, text) {
  setText(e, text || '');
  e.hidden = !text;
}

// ---- sign in

function showLogin() {
  show('login');
  document.title = 'Sign in · hongbao console';
  $('login-key').focus();
}

async function login(ev) {
  ev.preventDefault();
  const input = $('login-key');
  const key = input.value.trim();
  const btn = ev.target.querySelector('button');
  setText($('login-error'), '');
  if (!key) {
    setText($('login-error'), 'Enter the admin key.');
    return;
  }
  if (/[^\x21-\x7e]/.test(key)) {
    // A header cannot carry it; the server's keys are printable text.
    setText($('login-error'), 'An admin key is printable text without spaces.');
    return;
  }
  btn.disabled = true;
  try {
    await api('GET', '/v1/campaigns', { auth: key });
    sessionStorage.setItem(KEY, key);
    app.key = key;
    input.value = '';
    route();
  } catch (err) {
    setText($('login-error'), err.status === 401 ? 'That admin key was refused.' : err.message);
    input.select();
  } finally {
    btn.disabled = false;
  }
}

// ---- campaign list

const stateOrder = { open: 0, scheduled: 1, closed: 2, settled: 3 };

function showList() {
  show('list');
  document.title = 'Campaigns · hongbao console';
  const ctl = new AbortController();
  let timer = 0;
  let last = null;
  const load = async () => {
    clearTimeout(timer);
    if (document.visibilityState === 'visible') {
      try {
        const get = (path) => api('GET', path, { auth: app.key, signal: ctl.signal }).then((r) => r.data);
        const [campaigns, discounts] = await Promise.all([get('/v1/campaigns'), get('/v1/discounts')]);
        last = { campaigns, discounts };
        renderList(last);
        notice($('list-error'), '');
      } catch (err) {
        if (ctl.signal.aborted || authFailed(err)) return;
        notice($('list-error'), err.message + ' Retrying.');
      }
    }
    if (!ctl.signal.aborted) timer = setTimeout(load, LIST_EVERY_MS);
  };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') load();
  }, { signal: ctl.signal });
  for (const b of document.querySelectorAll('#list-kinds .tab')) {
    b.addEventListener('click', () => {
      app.listKind = b.dataset.kind;
      if (last) renderList(last);
    }, { signal: ctl.signal });
  }
  load();
  app.leave = () => {
    ctl.abort();
    clearTimeout(timer);
  };
}

// listRows makes one row of each campaign of either kind: what the list
// shows of it, in the same columns.
function listRows(data) {
  const rows = [];
  for (const c of data.campaigns.campaigns) {
    rows.push({
      kind: 'red-packet', c, left: c.remaining_count, of: c.count, amountLeft: c.remaining, amountOf: c.total,
      given: fmtInt(c.granted_count) + ' granted · ' + fmtMoney(c.granted), dead: c.settlement.dead_entries,
    });
  }
  for (const d of data.discounts.discounts) {
    rows.push({
      kind: 'discount', c: d, left: d.remaining_count, of: d.quota, amountLeft: d.remaining, amountOf: d.budget,
      given: fmtInt(d.confirmed_count) + ' confirmed · ' + fmtMoney(d.confirmed)
        + (d.reserved_count > 0 ? ' · ' + fmtInt(d.reserved_count) + ' reserved' : ''),
      dead: 0,
    });
  }
  return rows.sort((a, b) => (stateOrder[a.c.state] ?? 9) - (stateOrder[b.c.state] ?? 9)
    || Date.parse(a.c.closes_at) - Date.parse(b.c.closes_at));
}

function renderList(data) {
  const rows = listRows(data).filter((r) => !app.listKind || r.kind === app.listKind);
  for (const b of document.querySelectorAll('#list-kinds .tab')) b.setAttribute('aria-pressed', String(b.dataset.kind === app.listKind));
  const body = clear($('list-body'));
  for (const { kind, c, left, of, amountLeft, amountOf, given, dead } of rows) {
    const href = kinds[kind].route + encodeURIComponent(c.id);
    // Each cell holds one span: on a phone the row becomes a card, and
    // the cell a line with its label on the left and this on the right.
    const td = (label, cls, ...content) => el('td', { class: cls, 'data-label': label }, el('span', { class: 'cell' }, ...content));
    body.append(el('tr', { dataset: { campaign: c.id, kind, state: c.state } },
      td('Campaign', '', el('a', { href, class: 'mono', text: c.id })),
      td('Kind', '', el('span', { class: 'kind kind-' + kind, text: kinds[kind].name })),
      td('State', '', stateBadge(c), c.paused ? el('span', { class: 'badge state-paused', text: 'paused' }) : null,
        dead > 0 ? el('span', { class: 'badge state-dead', text: fmtInt(dead) + ' dead' }) : null),
      td('Left', 'num',
        el('span', { class: 'left-count', text: fmtInt(left), dataset: { value: left } }),
        el('span', { class: 'muted', text: ' / ' + fmtInt(of) })),
      td('Amount left', 'num', fmtMoney(amountLeft), el('span', { class: 'muted', text: ' / ' + fmtMoney(amountOf) })),
      td('Given', 'num', given),
      td('Opens', '', el('span', { title: fmtTime(c.opens_at), text: fmtRelative(c.opens_at) })),
      td('Closes', '', el('span', { title: fmtTime(c.closes_at), text: fmtRelative(c.closes_at) }))));
  }
  $('list-empty').hidden = rows.length > 0;
  $('list-table').hidden = rows.length === 0;
  const more = [];
  if (data.campaigns.more) more.push(fmtInt(data.campaigns.total) + ' red packet campaigns');
  if (data.discounts.more) more.push(fmtInt(data.discounts.total) + ' discount campaigns');
  notice($('list-more'), more.length ? 'There are ' + more.join(' and ') + '; the 200 of each kind that close first are listed (hongbao campaign list shows every one).' : '');
  setText($('list-updated'), 'Updated ' + new Date().toLocaleTimeString() + '.');
}

function stateBadge(c) {
  const text = c.close_reason ? c.state + ': ' + c.close_reason.replace('_', ' ') : c.state;
  return el('span', { class: 'badge state-' + c.state, text, dataset: { state: c.state } });
}

// ---- new campaign

// The form's fields, in the order an error message is searched for them:
// longer names first, so "total_cents" is not taken for "total".
const formFields = ['total', 'count', 'split', 'min', 'max', 'closes_at', 'opens_at', 'funding_account', 'shards', 'seed'];
let idempotencyKey = '';

function showCreate() {
  show('create');
  document.title = 'New campaign · hongbao console';
  if (!idempotencyKey) idempotencyKey = crypto.randomUUID();
  clearFormErrors();
  $('f-total').focus();
}

function clearFormErrors() {
  for (const f of formFields) {
    setText($('err-' + f), '');
    const input = document.querySelector('[data-field="' + f + '"]');
    if (input) input.removeAttribute('aria-invalid');
  }
  notice($('err-form'), '');
}

// fieldOf finds the form field an error message of the API is about.
function fieldOf(message) {
  let m = /^invalid campaign: ([a-z_]+):/.exec(message) || /field "([a-z_]+)"/.exec(message);
  let name = m ? m[1] : '';
  if (!name) {
    for (const f of ['total_cents', 'min_cents', 'max_cents', ...formFields]) {
      if (new RegExp('(^|[^a-z_])' + f + '($|[^a-z_])').test(message)) {
        name = f;
        break;
      }
    }
  }
  name = name.replace(/_cents$/, '');
  return formFields.includes(name) ? name : '';
}

// createBody writes the request as JSON by hand: numbers stay as typed
// (a seed is a uint64, beyond what a JavaScript number holds exactly),
// and what is not a number goes as a string for the server to refuse.
function createBody() {
  const parts = [];
  const add = (k, v) => parts.push(JSON.stringify(k) + ':' + v);
  const val = (id) => $(id).value.trim();
  const str = (k, id) => { if (val(id)) add(k, JSON.stringify(val(id))); };
  const num = (k, id) => { if (val(id)) add(k, /^[0-9]{1,20}$/.test(val(id)) ? val(id) : JSON.stringify(val(id))); };
  const time = (k, id) => {
    if (!val(id)) return;
    const d = new Date(val(id)); // datetime-local: the browser's time zone
    add(k, JSON.stringify(Number.isNaN(d.getTime()) ? val(id) : d.toISOString()));
  };
  str('total', 'f-total');
  num('count', 'f-count');
  str('split', 'f-split');
  str('min', 'f-min');
  str('max', 'f-max');
  time('opens_at', 'f-opens');
  time('closes_at', 'f-closes');
  str('funding_account', 'f-funding');
  num('shards', 'f-shards');
  num('seed', 'f-seed');
  return '{' + parts.join(',') + '}';
}

async function create(ev) {
  ev.preventDefault();
  clearFormErrors();
  const btn = $('create-submit');
  btn.disabled = true;
  try {
    const { data } = await api('POST', '/v1/campaigns', {
      auth: app.key, body: createBody(), headers: { 'Idempotency-Key': idempotencyKey },
    });
    idempotencyKey = '';
    $('create-form').reset();
    location.hash = '#/c/' + encodeURIComponent(data.id);
  } catch (err) {
    if (authFailed(err)) return;
    const f = err.status === 400 ? fieldOf(err.message) : '';
    if (f) {
      setText($('err-' + f), err.message);
      const input = document.querySelector('[data-field="' + f + '"]');
      input.setAttribute('aria-invalid', 'true');
      if (input.closest('details')) input.closest('details').open = true;
      input.focus();
    } else {
      notice($('err-form'), err.message);
    }
    if (err.code === 'idempotency_mismatch') idempotencyKey = crypto.randomUUID();
  } finally {
    btn.disabled = false;
  }
}

// ---- one campaign, live

function showDetail(kind, id) {
  show('detail');
  const k = kinds[kind];
  document.title = id + ' · hongbao console';
  const base = k.api + encodeURIComponent(id);
  setText($('d-id'), id);
  setText($('d-kind'), k.name + ' campaign');
  $('d-play').hidden = kind !== 'red-packet';
  $('d-play').setAttribute('href', '/play/' + encodeURIComponent(id));
  notice($('d-error'), '');
  notice($('d-toast'), '');
  setText($('d-state'), '…');
  setText($('d-when'), '');
  const ctl = new AbortController();
  const ctx = detailContext(id, base, ctl.signal);
  const mounted = new Map();
  clear($('panels'));
  const render = (ev) => {
    header(ev.campaign);
    for (const p of k.panels) {
      if (!mounted.has(p.id) && p.applies(ev)) {
        const body = el('div', { class: 'panel-body' });
        $('panels').append(el('section', { class: 'panel panel-' + p.id, id: 'panel-' + p.id },
          el('h2', { text: p.title }), body));
        mounted.set(p.id, p.mount(body, ctx));
      }
      if (mounted.has(p.id)) mounted.get(p.id)(ev);
    }
  };
  ctx.render = render;
  bindClose(base, ctx, ctl.signal);
  bindPause(base, ctx, ctl.signal);
  showFairness(kind, base, id);
  if (kind === 'discount') {
    pollDiscount(base, render, ctx, ctl.signal);
  } else {
    streamEvents(base + '/events', app.key, {
      signal: ctl.signal,
      onEvent: (name, data) => onLiveEvent(name, data, render, ctx),
      onState: (st, err) => onStreamState(st, err, ctx),
    });
  }
  app.leave = () => ctl.abort();
}

// showFairness shows the root a red packet campaign committed to at
// create, and a link that downloads its draw log (docs/fairness.md); the
// draw log takes the admin key, so the link fetches it with the key.
async function showFairness(kind, base, id) {
  $('d-fair').hidden = true;
  if (kind !== 'red-packet') return;
  try {
    const { data } = await api('GET', base + '/commitment', { auth: app.key });
    setText($('d-root'), data.root);
    $('d-fair').hidden = false;
  } catch (err) {
    return; // no commitment: a campaign created without a ledger
  }
  $('d-drawlog').onclick = async (e) => {
    e.preventDefault();
    try {
      const res = await fetch(base + '/draw-log', { headers: { Authorization: 'Bearer ' + app.key } });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        notice($('d-error'), (body.error && body.error.message) || res.statusText);
        return;
      }
      const url = URL.createObjectURL(await res.blob());
      const a = el('a', { href: url, download: id + '.draw-log.jsonl' });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      notice($('d-error'), err.message);
    }
  };
}

// pollDiscount reads a discount campaign's status every second while the
// tab is visible, and draws each reading as a red packet page draws a
// tick: { campaign } (no live counts of this server's answers).
function pollDiscount(base, render, ctx, signal) {
  let timer = 0;
  const read = async () => {
    clearTimeout(timer);
    if (document.visibilityState === 'visible') {
      try {
        const { data } = await api('GET', base, { auth: app.key, signal });
        conn('live', 'Live');
        ctx.error('');
        render({ campaign: data });
      } catch (err) {
        if (signal.aborted || authFailed(err)) return;
        if (err.status === 404 || err.status === 400) {
          conn('off', 'Gone');
          ctx.error('No such discount campaign: it never was, or it was settled and its keys expired.');
          return;
        }
        conn('stale', 'Stale: ' + err.message);
      }
    }
    if (!signal.aborted) timer = setTimeout(read, DISCOUNT_EVERY_MS);
  };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') read();
  }, { signal });
  signal.addEventListener('abort', () => clearTimeout(timer));
  read();
}

// detailContext is what panels get to act: the campaign, its API path,
// the key, and the page's notices.
function detailContext(id, base, signal) {
  return {
    id,
    base,
    signal,
    act: (method, path, body) => api(method, path, {
      auth: app.key, signal, body: body === undefined ? undefined : JSON.stringify(body),
    }),
    toast: (text) => notice($('d-toast'), text),
    error: (text) => notice($('d-error'), text),
    authFailed,
    render: null,
  };
}

function onLiveEvent(name, data, render, ctx) {
  let v = {};
  try {
    v = JSON.parse(data);
  } catch {
    return false;
  }
  if (name === 'tick') {
    conn('live', 'Live');
    ctx.error('');
    render(v);
  } else if (name === 'stale') {
    conn('stale', 'Stale: ' + v.message);
  } else if (name === 'gone') {
    conn('off', 'Gone');
    ctx.error('This campaign no longer exists: it was settled and its keys expired.');
    return true;
  } else if (name === 'bye') {
    conn('stale', 'Server restarting; reconnecting');
  }
  return false;
}

function onStreamState(st, err, ctx) {
  if (st === 'retrying') conn('stale', 'Reconnecting…');
  if (st === 'failed') {
    if (authFailed(err)) return;
    conn('off', 'Stopped');
    ctx.error(err.status === 404 ? 'No such campaign.' : err.message);
  }
}

function conn(kind, text) {
  const c = $('conn');
  c.className = 'conn conn-' + kind;
  setText(c, text);
}

function header(c) {
  const badge = $('d-state');
  badge.className = 'badge state-' + c.state;
  setText(badge, c.state);
  const parts = ['Opens ' + fmtTime(c.opens_at) + ' (' + fmtRelative(c.opens_at, Date.parse(c.now)) + ')',
    'closes ' + fmtTime(c.closes_at) + ' (' + fmtRelative(c.closes_at, Date.parse(c.now)) + ')'];
  if (c.close_reason) parts.push('closed: ' + c.close_reason.replace('_', ' '));
  setText($('d-when'), parts.join(' · '));
  const btn = $('d-close');
  const over = c.state === 'closed' || c.state === 'settled';
  btn.disabled = over;
  btn.dataset.state = c.state;
  if (over) setText(btn, c.state === 'settled' ? 'Settled' : 'Closed');
  $('d-paused').hidden = !c.paused;
  const pb = $('d-pause');
  pb.dataset.paused = c.paused ? '1' : '';
  pb.disabled = over || pb.dataset.busy === '1';
  setText(pb, c.paused ? 'Resume' : 'Pause');
}

// bindPause wires the pause button: it pauses a running campaign and
// resumes a paused one (both reversible, so no confirmation). The answer
// is the campaign's status, shown at once; the live view follows.
function bindPause(base, ctx, signal) {
  const btn = $('d-pause');
  setText(btn, 'Pause');
  btn.dataset.paused = '';
  btn.dataset.busy = '';
  btn.disabled = false;
  btn.addEventListener('click', async () => {
    const resume = btn.dataset.paused === '1';
    btn.dataset.busy = '1';
    btn.disabled = true;
    try {
      const path = base + (resume ? '/resume' : '/pause');
      const { data } = await ctx.act('POST', path);
      btn.dataset.busy = '';
      header(data);
      if (data.overtaken) {
        // A pause or resume that started later (another operator's) wrote
        // first: the campaign is as that one wants, which header(data) shows.
        ctx.toast('Overtaken: a ' + (data.paused ? 'pause' : 'resume') + ' that started after yours decides; the campaign is ' +
          (data.paused ? 'paused.' : 'not paused.'));
      } else {
        ctx.toast(resume ? 'Resumed. Grabs (new orders) are answered again.'
          : 'Paused. Grabs (new orders) now answer "paused" until you resume; the window still runs.');
      }
    } catch (err) {
      btn.dataset.busy = '';
      if (signal.aborted || authFailed(err)) return;
      btn.disabled = false;
      ctx.error((resume ? 'Resume' : 'Pause') + ' failed: ' + err.message);
    }
  }, { signal });
}

// bindClose wires the close button: a first press arms it, a second one
// within four seconds closes.
function bindClose(base, ctx, signal) {
  const btn = $('d-close');
  setText(btn, 'Close now');
  btn.disabled = false;
  let armed = 0;
  const disarm = () => {
    clearTimeout(armed);
    armed = 0;
    if (!btn.disabled) setText(btn, 'Close now');
  };
  btn.addEventListener('click', async () => {
    if (!armed) {
      armed = setTimeout(disarm, 4000);
      setText(btn, 'Confirm close');
      return;
    }
    disarm();
    btn.disabled = true;
    try {
      const { data } = await ctx.act('POST', base + '/close');
      header(data);
      ctx.toast('Closed. Grabs (new orders) now answer "closed"; settlement refunds the rest.');
    } catch (err) {
      if (signal.aborted || authFailed(err)) return;
      btn.disabled = false;
      ctx.error('Close failed: ' + err.message);
    }
  }, { signal });
  signal.addEventListener('abort', disarm);
}

$('login-form').addEventListener('submit', login);
$('create-form').addEventListener('submit', create);
$('signout').addEventListener('click', () => {
  location.hash = '#/';
  signOut('');
});
window.addEventListener('hashchange', route);
route();
