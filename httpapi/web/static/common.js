// common.js: what the console and the play page share.
//
// Rule of these pages: a value that comes from the server or the user
// goes into the page as text (textContent, text nodes, attributes), never
// as markup. The Content Security Policy requires Trusted Types, so an
// assignment of a string to innerHTML would throw anyway.

// el makes an element: props are attributes, except class, text (its
// textContent), dataset and on<event> listeners; children are nodes or
// strings (appended as text).
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  setProps(e, props);
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) e.append(c);
  }
  return e;
}

// svg makes an SVG element with attributes.
export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setProps(e, attrs);
  for (const c of children) {
    if (c) e.append(c);
  }
  return e;
}

function setProps(e, props) {
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.setAttribute('class', v);
    else if (k === 'text') e.textContent = String(v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
}

// $ finds an element by id.
export const $ = (id) => document.getElementById(id);

// clear removes every child of e.
export function clear(e) {
  while (e.firstChild) e.firstChild.remove();
  return e;
}

// setText sets an element's text, and its data-value (what tests and
// scripts read: the number before formatting).
export function setText(e, text, value) {
  if (e.textContent !== text) e.textContent = text;
  if (value !== undefined) e.dataset.value = String(value);
}

// ApiError is an answer of the API in its error shape, or a failure to
// reach it (status 0, code "network").
export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter || 0;
  }
}

async function errorOf(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    // not JSON: keep the status only
  }
  const e = (body && body.error) || {};
  return new ApiError(res.status, e.code || 'http_' + res.status,
    e.message || 'The server answered ' + res.status + '.', Number(res.headers.get('Retry-After')) || 0);
}

// api calls the JSON API. auth is an admin key or a user token, sent as a
// bearer credential; no cookie is ever sent (credentials: omit).
export async function api(method, path, { auth, body, headers, signal } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (auth) h.Authorization = 'Bearer ' + auth;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method, headers: h, body, signal, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'The server cannot be reached.');
  }
  if (!res.ok) throw await errorOf(res);
  let data = null;
  try {
    data = await res.json();
  } catch {
    throw new ApiError(res.status, 'bad_answer', 'The server sent an answer that is not JSON.');
  }
  return { status: res.status, data };
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// streamEvents reads a Server-Sent Events stream with fetch(), so that
// the request carries the Authorization header (EventSource cannot send
// one), and reconnects after the server's retry pause until signal
// aborts. onEvent(name, data) gets each event and returns true to stop;
// onState(state, error) hears 'open', 'retrying', and 'failed' (an answer
// that retrying cannot change: 400, 401, 404; the stream then stops).
export async function streamEvents(path, auth, { onEvent, onState, signal }) {
  let retry = 2000;
  while (!signal.aborted) {
    let err = null;
    try {
      const res = await fetch(path, {
        headers: { Authorization: 'Bearer ' + auth, Accept: 'text/event-stream' },
        cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer', signal,
      });
      if (!res.ok) {
        const err = await errorOf(res);
        if ([400, 401, 403, 404].includes(res.status)) {
          onState('failed', err);
          return;
        }
        throw err;
      }
      onState('open');
      const stop = await readEvents(res.body, onEvent, (ms) => { retry = ms; });
      if (stop) return;
    } catch (e) {
      err = e;
    }
    if (signal.aborted) return;
    onState('retrying', err);
    await sleep(retry, signal);
  }
}

// readEvents parses an event stream (the text/event-stream format) until
// it ends; it returns true when onEvent asked to stop.
async function readEvents(body, onEvent, setRetry) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let name = 'message';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      let line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length > 0 && onEvent(name, data.join('\n'))) {
          reader.cancel().catch(() => {});
          return true;
        }
        name = 'message';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      let val = c < 0 ? '' : line.slice(c + 1);
      if (val.startsWith(' ')) val = val.slice(1);
      if (field === 'event') name = val;
      else if (field === 'data') data.push(val);
      else if (field === 'retry' && /^\d+$/.test(val)) setRetry(Number(val));
    }
  }
}

const intFormat = new Intl.NumberFormat('en-US');

// fmtInt formats a count: 12,345.
export function fmtInt(n) {
  return intFormat.format(n);
}

// fmtMoney groups the integer part of a decimal amount as the API writes
// it ("12345.60" -> "12,345.60"), without going through a float.
export function fmtMoney(s) {
  const m = /^(-?)(\d+)(\.\d+)?$/.exec(String(s));
  if (!m) return String(s);
  return m[1] + intFormat.format(BigInt(m[2])) + (m[3] || '');
}

// fmtCents formats integer cents as a decimal amount.
export function fmtCents(c) {
  const neg = c < 0;
  const a = Math.abs(c);
  const s = String(Math.floor(a / 100)) + '.' + String(a % 100).padStart(2, '0');
  return fmtMoney((neg ? '-' : '') + s);
}

// fmtTime formats an RFC 3339 time in the browser's time zone.
export function fmtTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

const rel = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });

// fmtRelative says how far iso is from now: "in 5 minutes", "2 hours ago".
export function fmtRelative(iso, now = Date.now()) {
  const s = (new Date(iso).getTime() - now) / 1000;
  if (Number.isNaN(s)) return '';
  const a = Math.abs(s);
  if (a < 45) return rel.format(Math.round(s), 'second');
  if (a < 2700) return rel.format(Math.round(s / 60), 'minute');
  if (a < 64800) return rel.format(Math.round(s / 3600), 'hour');
  return rel.format(Math.round(s / 86400), 'day');
}

// fmtDuration formats seconds: "0.4 s", "12 s", "3 min 5 s".
export function fmtDuration(sec) {
  if (sec < 10) return sec.toFixed(1) + ' s';
  if (sec < 120) return Math.round(sec) + ' s';
  return Math.floor(sec / 60) + ' min ' + Math.round(sec % 60) + ' s';
}

// meta reads the content of <meta name="name">.
export function meta(name) {
  const m = document.querySelector('meta[name="' + name + '"]');
  return m ? m.getAttribute('content') || '' : '';
}
