// play.js: a red packet rain a person can play. Packets fall; a tap grabs
// through the real API (POST /v1/campaigns/{id}/grab) with the user's
// token, and the answer shows: the amount, or why not.
//
// The token comes, in this order, from the URL fragment (#token=...,
// which never reaches the server; the page then takes it out of the
// address bar; when the tab already plays as another user the page asks
// which one plays), from this tab's sessionStorage (a reload), from the
// embedding app by postMessage (only from an origin the server lists in
// the hongbao-embedders meta tag, and only from the parent window), or,
// in `hongbao demo --web`, from POST /v1/demo/token.
import {
  $, api, el, fmtMoney, meta, setText, sleep,
} from './common.js';

const TOKEN_KEY = 'hongbao.play.token';
const MAX_PACKETS = 14;
const SPAWN_EVERY_MS = 650;

const campaign = decodeURIComponent(location.pathname.replace(/\/+$/, '').split('/').pop() || '');
const enc = encodeURIComponent(campaign);
const demo = meta('hongbao-demo') === 'on';
const embedders = meta('hongbao-embedders').split(/\s+/).filter(Boolean);
const framed = window.parent !== window;

const game = {
  token: '',
  busy: false,
  over: false,
  spawner: 0,
  answers: 0, // answers shown, as data-answers on #result
};

// ---- the token

// subOf reads the user id (sub) of a token, for display only: the server
// verifies the token, the page does not need to.
function subOf(token) {
  try {
    const p = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const sub = JSON.parse(atob(p.padEnd(Math.ceil(p.length / 4) * 4, '='))).sub;
    return typeof sub === 'string' ? sub : '';
  } catch {
    return '';
  }
}

function setToken(token) {
  game.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  const user = subOf(token);
  setText($('user'), user);
  $('user-line').hidden = !user;
  $('gate').hidden = true;
}

// fragmentToken takes a token from #token=..., and removes it from the
// address bar and the history.
function fragmentToken() {
  const t = new URLSearchParams(location.hash.slice(1)).get('token');
  if (t) history.replaceState(null, '', location.pathname + location.search);
  return t || '';
}

// listenToParent takes tokens from the embedding app: at start, and again
// whenever it refreshes one.
function listenToParent(onToken) {
  window.addEventListener('message', (e) => {
    if (e.source !== window.parent || !embedders.includes(e.origin)) return;
    const d = e.data;
    if (d && d.type === 'hongbao:token' && typeof d.token === 'string' && d.token) onToken(d.token);
  });
  for (const origin of embedders) window.parent.postMessage({ type: 'hongbao:ready', campaign }, origin);
}

async function demoToken() {
  const { data } = await api('POST', '/v1/demo/token');
  return data.token;
}

async function acquireToken() {
  const fromLink = fragmentToken();
  const kept = sessionStorage.getItem(TOKEN_KEY) || '';
  // A link must not silently swap the player of this tab for another
  // user (someone else's link, or one crafted to make this tab play, and
  // win, as them): ask first.
  if (fromLink && kept && subOf(fromLink) !== subOf(kept)) return chooseUser(kept, fromLink);
  const t = fromLink || kept;
  if (t) return t;
  if (demo) {
    try {
      return await demoToken();
    } catch (err) {
      status('Could not get a demo player: ' + err.message);
    }
  }
  return '';
}

// chooseUser asks whether to keep this tab's player or take the link's.
function chooseUser(kept, fromLink) {
  setText($('switch-kept'), subOf(kept) || 'someone');
  setText($('switch-link'), subOf(fromLink) || 'someone else');
  setText($('switch-keep-name'), subOf(kept) || 'the same');
  setText($('switch-take-name'), subOf(fromLink) || 'the new');
  $('switch').hidden = false;
  status('Who plays?');
  return new Promise((resolve) => {
    const pick = (t) => {
      $('switch').hidden = true;
      resolve(t);
    };
    $('switch-keep').addEventListener('click', () => pick(kept), { once: true });
    $('switch-take').addEventListener('click', () => pick(fromLink), { once: true });
  });
}

// ---- what the page shows

function status(text) {
  setText($('status'), text);
}

function showResult(outcome, title, amount, note) {
  const r = $('result');
  r.dataset.outcome = outcome;
  if (outcome !== 'opening') r.dataset.answers = String(++game.answers);
  setText($('result-title'), title);
  setText($('result-amount'), amount);
  setText($('result-note'), note);
  r.hidden = false;
}

function setMine(g) {
  setText($('mine-amount'), fmtMoney(g.amount), g.amount_cents);
  setText($('mine-id'), g.packet_id);
  $('mine').hidden = false;
  if (fair.root) $('fair-check').hidden = false;
}

// ---- fairness (docs/fairness.md): the commitment published before the
// rain, and the check of the player's own packet against it, here in the
// browser: the leaf from the proof's packet and salt, then the RFC 9162
// inclusion path up to the root the commitment published (not the
// proof's own), at leaf seq-1 of a tree of the count it published: a
// root over more packets than the commitment states (one added for an
// insider) has valid paths too, in a tree of another size.

const fair = { root: '', count: 0 };

const hexOf = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const bytesOf = (h) => new Uint8Array((h.match(/../g) || []).map((x) => parseInt(x, 16)));

async function sha256(...parts) {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return new Uint8Array(await crypto.subtle.digest('SHA-256', all));
}

// rootOf is the root a proof leads to (RFC 9162 2.1.3.2), '' when its path
// does not fit its tree.
async function rootOf(p) {
  const leaf = new TextEncoder().encode(`hongbao-packet-v1:${campaign}:${p.seq}:${p.cents}:${p.salt}`);
  let r = await sha256(Uint8Array.of(0), leaf);
  let fn = p.leaf_index;
  let sn = p.tree_size - 1;
  for (const s of p.path) {
    if (sn === 0) return '';
    const h = bytesOf(s);
    if (fn % 2 === 1 || fn === sn) {
      r = await sha256(Uint8Array.of(1), h, r);
      while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
    } else {
      r = await sha256(Uint8Array.of(1), r, h);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? hexOf(r) : '';
}

async function showCommitment() {
  try {
    const { data } = await api('GET', '/v1/campaigns/' + enc + '/commitment', { auth: game.token });
    fair.root = data.root;
    fair.count = data.count;
    setText($('fair-root'), data.root.slice(0, 16) + '…');
    $('fair-root').title = data.root;
    $('fair').hidden = false;
    if (!$('mine').hidden) $('fair-check').hidden = false;
  } catch (err) {
    // 404 no_commitment: a campaign without one; nothing to show
  }
}

async function checkMine() {
  const out = $('fair-result');
  try {
    const { data } = await api('GET', '/v1/campaigns/' + enc + '/grants/me/proof', { auth: game.token });
    const held = $('mine-amount').dataset.value;
    let why = '';
    if (data.tree_size !== fair.count) {
      why = '✗ this proof is of a draw of ' + data.tree_size + ' packets; the commitment has ' + fair.count;
    } else if (data.leaf_index !== data.seq - 1) {
      why = '✗ this proof puts packet ' + data.seq + ' at another place than its own';
    } else if (held && String(data.cents) !== String(held)) {
      why = '✗ this proof is of another amount than the packet you hold';
    } else if ((await rootOf(data)) !== fair.root) {
      why = '✗ this packet does not lead to the committed root';
    }
    out.dataset.verdict = why ? 'fails' : 'holds';
    setText(out, why || '✓ packet ' + data.packet_id + ' is in the committed draw');
  } catch (err) {
    out.dataset.verdict = 'error';
    setText(out, err.message);
  }
}

// ---- the rain

function spawn() {
  const sky = $('sky');
  if (game.over || document.visibilityState !== 'visible' || sky.childElementCount >= MAX_PACKETS) return;
  const p = el('button', { class: 'packet', type: 'button', 'aria-label': 'Red packet: tap to open', tabindex: '-1' },
    el('span', { class: 'packet-body' }, el('span', { class: 'packet-seal', 'aria-hidden': 'true' })));
  const width = sky.clientWidth > 700 ? 84 : 68;
  p.style.left = Math.round(Math.random() * Math.max(0, sky.clientWidth - width - 8) + 4) + 'px';
  p.style.setProperty('--fall', (4.5 + Math.random() * 3).toFixed(2) + 's');
  p.style.setProperty('--sway', (1.4 + Math.random()).toFixed(2) + 's');
  p.style.setProperty('--drift', Math.round((Math.random() - 0.5) * 60) + 'px');
  // pointerdown answers the moment a finger (or any pointer) lands, before
  // the packet falls away. The click a tap also fires comes after it, at
  // the same spot, where another packet may be falling by then: only a
  // click no pointer made (the keyboard's: detail 0) grabs, so one tap is
  // one grab.
  p.addEventListener('pointerdown', (e) => { e.preventDefault(); grab(p); });
  p.addEventListener('click', (e) => { if (e.detail === 0) grab(p); });
  p.addEventListener('animationend', (e) => { if (e.animationName === 'fall') p.remove(); });
  sky.append(p);
}

function startRain() {
  if (game.spawner) return;
  for (let i = 0; i < 4; i++) setTimeout(spawn, i * 180);
  game.spawner = setInterval(spawn, SPAWN_EVERY_MS);
}

function endRain() {
  game.over = true;
  clearInterval(game.spawner);
  game.spawner = 0;
  $('grab-any').hidden = true;
  if (demo) $('next-rain').hidden = false;
}

// ---- grabbing

async function grab(packet) {
  if (game.busy || !game.token) return;
  if (packet) {
    if (packet.classList.contains('caught')) return;
    packet.classList.add('caught');
    setTimeout(() => packet.remove(), 500);
  }
  game.busy = true;
  showResult('opening', 'Opening…', '', '');
  try {
    const { data } = await api('POST', '/v1/campaigns/' + enc + '/grab', { auth: game.token });
    onAnswer(data);
  } catch (err) {
    await onGrabError(err);
  } finally {
    game.busy = false;
  }
}

function onAnswer(g) {
  switch (g.outcome) {
    case 'granted':
      showResult('granted', 'You got', fmtMoney(g.amount), 'Packet ' + g.packet_id);
      setMine(g);
      status('It is yours. One packet per person per rain.');
      break;
    case 'already_granted':
      showResult('already_granted', 'Already yours', fmtMoney(g.amount), 'The same packet again (' + g.packet_id + '): one per person.');
      setMine(g);
      break;
    case 'sold_out':
      showResult('sold_out', 'Sold out', '', 'Every packet of this rain is taken.');
      status('Sold out.');
      endRain();
      break;
    case 'not_open':
      showResult('not_open', 'Not open yet', '', 'The rain has not started. Try again in a moment.');
      break;
    case 'closed':
      showResult('closed', 'This rain is over', '', 'It closed before this tap.');
      status('The rain is over.');
      endRain();
      break;
    case 'paused':
      showResult('paused', 'Paused', '', 'The rain is paused for now. Try again in a while.');
      break;
    case 'blocked':
      showResult('blocked', 'Not available', '', 'This rain is not open to your account.');
      break;
    default:
      showResult('error', 'Unexpected answer', '', String(g.outcome));
  }
  const a = $('result-amount');
  if (g.amount_cents) a.dataset.cents = String(g.amount_cents);
  else delete a.dataset.cents;
  $('result').dataset.packet = g.packet_id || '';
}

async function onGrabError(err) {
  switch (err.status) {
    case 429:
      showResult('error', 'Easy!', '', 'Too many taps: wait a second.');
      break;
    case 401:
      sessionStorage.removeItem(TOKEN_KEY);
      game.token = '';
      if (demo) {
        try {
          setToken(await demoToken());
          showResult('error', 'New player', '', 'Your demo session ended; you are a new player now. Tap again.');
        } catch (e) {
          showResult('error', 'Signed out', '', 'Your demo session ended and no new one came: ' + e.message);
        }
      } else {
        showResult('error', 'Signed out', '', 'Your session ended. Open the rain from the app again.');
        $('gate').hidden = false;
      }
      break;
    case 404:
      showResult('error', 'No such rain', '', 'This rain does not exist (any more).');
      endRain();
      break;
    case 503:
      showResult('error', 'Busy', '', 'Tap again: it is safe, you never get two packets.');
      break;
    default:
      showResult('error', err.status === 0 ? 'Offline?' : 'Something went wrong', '', err.message);
  }
}

// held shows the packet this user already holds, if any.
async function held() {
  try {
    const { data } = await api('GET', '/v1/campaigns/' + enc + '/grants/me', { auth: game.token });
    setMine(data);
    status('You hold a packet of this rain. Tap to see it again.');
  } catch (err) {
    if (err.status === 401) await onGrabError(err);
    // 404 no_grant: nothing yet; anything else shows on the next tap
  }
}

// ---- demo mode

async function newPlayer() {
  try {
    setToken(await demoToken());
    $('mine').hidden = true;
    $('result').hidden = true;
    status('New player. Tap a falling packet.');
  } catch (err) {
    status('Could not get a new player: ' + err.message);
  }
}

async function nextRain() {
  const btn = $('next-rain');
  btn.disabled = true;
  for (let i = 0; i < 10; i++) {
    try {
      const { data } = await api('GET', '/v1/demo');
      if (data.campaign && data.campaign !== campaign) {
        location.assign('/play/' + encodeURIComponent(data.campaign));
        return;
      }
    } catch (err) {
      status(err.message);
    }
    status('The next rain is being prepared…');
    await sleep(1000);
  }
  btn.disabled = false;
}

async function main() {
  setText($('campaign'), campaign);
  if (framed && embedders.length) listenToParent(setToken);
  const t = await acquireToken();
  if (!t) {
    status(framed && embedders.length ? 'Waiting for the app…' : 'Not signed in.');
    if (!(framed && embedders.length)) $('gate').hidden = false;
    await new Promise((resolve) => {
      const iv = setInterval(() => { if (game.token) { clearInterval(iv); resolve(); } }, 200);
    });
  } else {
    setToken(t);
  }
  status('Tap a falling packet.');
  $('grab-any').hidden = false;
  if (demo) $('new-player').hidden = false;
  startRain();
  held();
  showCommitment();
  $('fair-check').addEventListener('click', checkMine);
}

$('grab-any').addEventListener('click', () => grab(null));
$('new-player').addEventListener('click', newPlayer);
$('next-rain').addEventListener('click', nextRain);
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && !game.over && game.token) startRain();
});
main();
