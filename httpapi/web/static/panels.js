// panels.js: the panels of a campaign's live page.
//
// A panel is { id, title, applies(ev), mount(body, ctx) }: applies says
// whether it has something to show for a reading (ev: the data of a
// "tick" event, { campaign, live }, or for a discount campaign its status
// read every second, { campaign }); mount builds its content once and
// returns the function that draws each reading. Each kind of campaign has
// its list of panels (panels, discountPanels); a panel shows when its
// data appears in the reading (a sharded campaign's shards). ctx.base is
// the campaign's path in the API, for the panels that act on it.
import {
  clear, el, fmtCents, fmtDuration, fmtInt, fmtMoney, fmtTime, setText, svg,
} from './common.js';

// stat is a labelled figure; id, if given, names its value.
function stat(label, cls, id) {
  const value = el('span', { class: 'stat-value ' + (cls || ''), id });
  const sub = el('span', { class: 'stat-sub' });
  return { node: el('div', { class: 'stat' }, el('span', { class: 'stat-label', text: label }), value, sub), value, sub };
}

const leftPanel = {
  id: 'left',
  title: 'Left',
  applies: () => true,
  mount(body) {
    const packets = stat('Packets left', 'big');
    const amount = stat('Amount left', 'big');
    const granted = stat('Granted');
    const refunded = stat('Refunded');
    const fill = el('span', { class: 'bar-fill' });
    body.append(el('div', { class: 'stats' }, packets.node, amount.node),
      el('div', { class: 'bar', role: 'presentation' }, fill),
      el('div', { class: 'stats' }, granted.node, refunded.node));
    return ({ campaign: c }) => {
      setText(packets.value, fmtInt(c.remaining_count), c.remaining_count);
      setText(packets.sub, 'of ' + fmtInt(c.count));
      setText(amount.value, fmtMoney(c.remaining), c.remaining_cents);
      setText(amount.sub, 'of ' + fmtMoney(c.total));
      setText(granted.value, fmtInt(c.granted_count), c.granted_count);
      setText(granted.sub, fmtMoney(c.granted));
      setText(refunded.value, fmtMoney(c.refunded), c.refunded_cents);
      fill.style.width = (c.total_cents > 0 ? (100 * c.granted_cents) / c.total_cents : 0).toFixed(2) + '%';
    };
  },
};

// niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// segments splits a series where readings are missing.
function segments(points, gapMs) {
  const out = [];
  let cur = [];
  for (const p of points) {
    if (cur.length && p.t - cur[cur.length - 1].t > gapMs) {
      out.push(cur);
      cur = [];
    }
    cur.push(p);
  }
  if (cur.length) out.push(cur);
  return out;
}

const W = 600;
const H = 160;

const ratesPanel = {
  id: 'rates',
  title: 'Per second, last minute',
  applies: () => true,
  mount(body) {
    const grabs = stat('Grab answers / s', 'series-grabs');
    const grants = stat('Grants / s', 'series-grants');
    setText(grabs.sub, 'this server');
    setText(grants.sub, 'all servers, from Redis');
    const plot = svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'rates over the last minute' });
    const top = el('span', { class: 'axis-top' });
    body.append(el('div', { class: 'stats' }, grabs.node, grants.node),
      el('div', { class: 'chart-wrap' }, top, plot,
        el('div', { class: 'axis-x' }, el('span', { text: '60 s ago' }), el('span', { text: 'now' }))));
    return ({ live }) => {
      const pts = live.rates;
      const last = pts[pts.length - 1] || { grabs: 0, grants: 0 };
      setText(grabs.value, fmtInt(Math.round(last.grabs)), last.grabs);
      setText(grants.value, fmtInt(Math.round(last.grants)), last.grants);
      const ymax = niceMax(Math.max(1, ...pts.map((p) => Math.max(p.grabs, p.grants))));
      setText(top, fmtInt(ymax) + ' / s');
      const now = Date.parse(live.read_at);
      const x = (t) => (W * (t - (now - 60000))) / 60000;
      const y = (v) => H - 2 - ((H - 4) * v) / ymax;
      clear(plot);
      for (const y0 of [0.25, 0.5, 0.75]) plot.append(svg('line', { class: 'grid', x1: 0, x2: W, y1: y(ymax * y0), y2: y(ymax * y0) }));
      for (const seg of segments(pts, 2.5 * live.interval_ms)) {
        for (const [key, cls] of [['grants', 'series-grants'], ['grabs', 'series-grabs']]) {
          const d = seg.map((p) => x(p.t).toFixed(1) + ',' + y(p[key]).toFixed(1)).join(' ');
          plot.append(svg('polyline', { class: 'line ' + cls, points: seg.length === 1 ? d + ' ' + d : d }));
        }
      }
    };
  },
};

const outcomeLabels = [
  ['granted', 'Granted'],
  ['already_granted', 'Already (the same packet again)'],
  ['sold_out', 'Sold out'],
  ['not_open', 'Not open yet'],
  ['closed', 'Closed'],
  ['paused', 'Paused'],
  ['blocked', 'Blocked users'],
  ['rate_limited', 'Refused by limits'],
  ['busy', 'Shed: queue full'],
  ['error', 'Errors, outcome unknown'],
];

const outcomesPanel = {
  id: 'outcomes',
  title: 'Answers to grabs',
  applies: () => true,
  mount(body) {
    const rows = new Map();
    const list = el('div', { class: 'hbars' });
    for (const [key, label] of outcomeLabels) {
      const count = el('span', { class: 'hbar-count', id: 'outcome-' + key });
      const fill = el('span', { class: 'hbar-fill outcome-' + key });
      list.append(el('div', { class: 'hbar' }, el('span', { class: 'hbar-label', text: label }), count,
        el('span', { class: 'hbar-track' }, fill)));
      rows.set(key, { count, fill });
    }
    const since = el('p', { class: 'muted small' });
    body.append(list, since);
    return ({ live }) => {
      const o = live.outcomes;
      const top = Math.max(1, ...Object.values(o));
      for (const [key, r] of rows) {
        setText(r.count, fmtInt(o[key] || 0), o[key] || 0);
        r.fill.style.width = ((100 * (o[key] || 0)) / top).toFixed(2) + '%';
      }
      setText(since, 'Answers of this server since ' + fmtTime(live.since) + '.');
    };
  },
};

const amountsPanel = {
  id: 'amounts',
  title: 'Granted amounts',
  applies: () => true,
  mount(body) {
    const bars = el('div', { class: 'histogram', id: 'histogram' });
    const axis = el('div', { class: 'axis-x' });
    const summary = el('p', { class: 'muted small' });
    const empty = el('p', { class: 'empty', text: 'No packet granted by this server yet.' });
    body.append(empty, bars, axis, summary);
    return ({ live }) => {
      const a = live.amounts;
      empty.hidden = a.count > 0;
      bars.hidden = axis.hidden = a.count === 0;
      clear(bars);
      clear(axis);
      if (a.count === 0) {
        setText(summary, '');
        return;
      }
      const top = Math.max(1, ...a.bins.map((b) => b.count));
      for (const b of a.bins) {
        const range = b.to_cents - b.from_cents === 1 ? fmtCents(b.from_cents)
          : fmtCents(b.from_cents) + ' to ' + fmtCents(b.to_cents - 1);
        const bar = el('span', { class: 'hist-bar', title: range + ': ' + fmtInt(b.count), dataset: { count: b.count } });
        bar.style.height = ((100 * b.count) / top).toFixed(2) + '%';
        bars.append(el('span', { class: 'hist-col' }, bar));
      }
      axis.append(el('span', { text: fmtCents(a.min_cents) }), el('span', { text: fmtCents(a.max_cents) }));
      setText(summary, fmtInt(a.count) + ' packets granted by this server, average '
        + fmtCents(Math.round(a.sum_cents / a.count)) + '; the tallest bar is ' + fmtInt(top) + '.');
    };
  },
};

const settlementPanel = {
  id: 'settlement',
  title: 'Settlement',
  applies: () => true,
  mount(body, ctx) {
    const lag = stat('Waiting for a worker');
    const pending = stat('Being written');
    const dead = stat('Dead', 'dead');
    const oldest = stat('Oldest unsettled');
    const redrive = el('button', { class: 'btn', type: 'button', id: 'redrive', text: 'Redrive dead entries' });
    body.append(el('div', { class: 'stats stats-4' }, lag.node, pending.node, dead.node, oldest.node),
      el('p', { class: 'muted small', text: 'Counts are of grant batches (one per grab script call). Dead entries wait for an operator: fix their cause, then redrive them.' }),
      el('div', { class: 'actions' }, redrive));
    let armed = 0;
    redrive.addEventListener('click', async () => {
      if (!armed) {
        armed = setTimeout(() => { armed = 0; setText(redrive, 'Redrive dead entries'); }, 4000);
        setText(redrive, 'Confirm redrive');
        return;
      }
      clearTimeout(armed);
      armed = 0;
      setText(redrive, 'Redrive dead entries');
      redrive.disabled = true;
      try {
        const { data } = await ctx.act('POST', '/v1/campaigns/' + encodeURIComponent(ctx.id) + '/redrive');
        ctx.toast('Moved ' + fmtInt(data.redriven_entries) + ' dead entries back to the grants stream.');
      } catch (err) {
        if (!ctx.authFailed(err)) ctx.error('Redrive failed: ' + err.message);
      }
    }, { signal: ctx.signal });
    return ({ campaign: c, live }) => {
      const s = c.settlement;
      setText(lag.value, fmtInt(s.lag_entries), s.lag_entries);
      setText(pending.value, fmtInt(s.pending_entries), s.pending_entries);
      setText(dead.value, fmtInt(s.dead_entries), s.dead_entries);
      dead.node.classList.toggle('alarm', s.dead_entries > 0);
      setText(oldest.value, live.oldest_pending_seconds > 0 ? fmtDuration(live.oldest_pending_seconds) : 'none', live.oldest_pending_seconds);
      if (!armed) redrive.disabled = s.dead_entries === 0;
    };
  },
};

// A campaign spread over several shards (groups of Redis keys, on a
// cluster over several masters) moves packets between them as users
// arrive; a packet on its way is still left, in flight.
const shardsPanel = {
  id: 'shards',
  title: 'Shards',
  applies: ({ campaign: c }) => c.shards > 1,
  mount(body) {
    const shards = stat('Shards');
    const inFlight = stat('In flight');
    setText(inFlight.sub, 'packets moving between shards');
    body.append(el('div', { class: 'stats' }, shards.node, inFlight.node),
      el('p', { class: 'muted small', text: 'Users are homed on a shard by their id; a shard that runs dry takes packets from the others, one journaled transfer at a time. Sold out only when every shard is empty.' }));
    return ({ campaign: c }) => {
      setText(shards.value, fmtInt(c.shards), c.shards);
      setText(inFlight.value, fmtInt(c.in_flight || 0), c.in_flight || 0);
    };
  },
};

const specPanel = {
  id: 'spec',
  title: 'Campaign',
  applies: () => true,
  mount(body) {
    const dl = el('dl', { class: 'spec' });
    body.append(dl);
    return ({ campaign: c }) => {
      clear(dl);
      const rows = [
        ['Total', fmtMoney(c.total) + ' in ' + fmtInt(c.count) + ' packets'],
        ['Split', c.split],
        ['Smallest packet', fmtMoney(c.min)],
        ['Largest packet', c.max ? fmtMoney(c.max) : 'no limit'],
        ['Funding account', c.funding_account],
        ['Shards', fmtInt(c.shards || 1)],
        ['Opens', fmtTime(c.opens_at)],
        ['Closes', fmtTime(c.closes_at)],
      ];
      if (c.close_reason) rows.push(['Closed because', c.close_reason.replace('_', ' ')]);
      for (const [k, v] of rows) dl.append(el('dt', { text: k }), el('dd', { text: v }));
    };
  },
};

// The users an operator blocked: a page of them with an Unblock each, and
// a form to block more. The page is read again when the reading's count
// changes, and after each action.
const blockedPanel = {
  id: 'blocked',
  title: 'Blocked users',
  applies: () => true,
  mount(body, ctx) {
    const PAGE = 100;
    const total = stat('Blocked', '', 'blocked-total');
    const input = el('input', {
      id: 'block-users', autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off',
      placeholder: 'user ids', 'aria-label': 'Users to block, separated by spaces or commas',
    });
    const submit = el('button', { class: 'btn', type: 'submit', id: 'block-submit', text: 'Block' });
    const list = el('ul', { class: 'blocked-list', id: 'blocked-list' });
    const more = el('p', { class: 'muted small' });
    body.append(el('div', { class: 'stats' }, total.node),
      el('form', { class: 'block-form', id: 'block-form', method: 'post', action: '#', novalidate: true }, input, submit),
      el('p', { class: 'muted small', text: 'Ids separated by spaces or commas. A blocked user\'s new grabs or orders answer "blocked"; what the user already holds is kept.' }),
      list, more);
    let shown = -1; // the count the list was read at
    let reading = false;
    const load = async () => {
      if (reading) return;
      reading = true;
      try {
        const { data } = await ctx.act('GET', ctx.base + '/blocked?limit=' + PAGE);
        clear(list);
        for (const u of data.users) {
          const unblock = el('button', { class: 'btn btn-quiet unblock', type: 'button', text: 'Unblock', 'aria-label': 'Unblock ' + u.user });
          unblock.addEventListener('click', () => change('/blocked/remove', [u.user], unblock), { signal: ctx.signal });
          list.append(el('li', { dataset: { user: u.user } },
            el('span', { class: 'mono', text: u.user }),
            el('span', { class: 'muted small', title: fmtTime(u.since), text: 'since ' + fmtTime(u.since) }), unblock));
        }
        setText(total.value, fmtInt(data.total), data.total);
        shown = data.total;
        setText(more, data.more ? 'The first ' + fmtInt(PAGE) + ' by user id are listed; hongbao campaign blocked lists every one.' : '');
      } catch (err) {
        if (!ctx.signal.aborted && !ctx.authFailed(err)) ctx.error('Reading the blocked users failed: ' + err.message);
      } finally {
        reading = false;
      }
    };
    const change = async (path, users, btn) => {
      btn.disabled = true;
      try {
        const { data } = await ctx.act('POST', ctx.base + path, { users });
        ctx.toast(data.added !== undefined
          ? 'Blocked ' + fmtInt(users.length) + ' users, ' + fmtInt(data.added) + ' of them new.'
          : 'Unblocked ' + fmtInt(data.removed) + ' of ' + fmtInt(users.length) + ' users.');
        if (data.added !== undefined) input.value = '';
        await load();
      } catch (err) {
        if (!ctx.signal.aborted && !ctx.authFailed(err)) ctx.error((path.endsWith('remove') ? 'Unblock' : 'Block') + ' failed: ' + err.message);
      } finally {
        btn.disabled = false;
      }
    };
    body.querySelector('form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const users = input.value.split(/[\s,]+/).filter(Boolean);
      if (users.length === 0) {
        ctx.error('Give the ids of the users to block.');
        input.focus();
        return;
      }
      change('/blocked', users, submit);
    }, { signal: ctx.signal });
    return ({ campaign: c }) => {
      if (c.blocked_users !== shown) load();
    };
  },
};

// panels, in the order they show: a red packet rain's.
export const panels = [leftPanel, ratesPanel, outcomesPanel, amountsPanel, settlementPanel, shardsPanel, blockedPanel, specPanel];

// A discount campaign's budget and quota: always confirmed + reserved +
// remaining = the budget, and = the quota.
const budgetPanel = {
  id: 'budget',
  title: 'Budget',
  applies: () => true,
  mount(body) {
    const amount = stat('Amount left', 'big', 'remaining-cents');
    const count = stat('Discounts left', 'big', 'remaining-count');
    const confirmed = stat('Confirmed', '', 'confirmed-count');
    const reserved = stat('Reserved', '', 'reserved-count');
    const refunded = stat('Refunded', '', 'refunded-cents');
    const fillC = el('span', { class: 'bar-fill' });
    const fillR = el('span', { class: 'bar-fill bar-reserved' });
    body.append(el('div', { class: 'stats' }, amount.node, count.node),
      el('div', { class: 'bar bar-split', role: 'presentation' }, fillC, fillR),
      el('div', { class: 'stats stats-3' }, confirmed.node, reserved.node, refunded.node),
      el('p', { class: 'muted small', text: 'Reserved discounts wait for the payment\'s confirm or cancel, or expire after the hold; confirmed + reserved + left is always the budget, and the quota.' }));
    return ({ campaign: d }) => {
      setText(amount.value, fmtMoney(d.remaining), d.remaining_cents);
      setText(amount.sub, 'of ' + fmtMoney(d.budget));
      setText(count.value, fmtInt(d.remaining_count), d.remaining_count);
      setText(count.sub, 'of ' + fmtInt(d.quota));
      setText(confirmed.value, fmtInt(d.confirmed_count), d.confirmed_count);
      setText(confirmed.sub, fmtMoney(d.confirmed));
      setText(reserved.value, fmtInt(d.reserved_count), d.reserved_count);
      setText(reserved.sub, fmtMoney(d.reserved));
      setText(refunded.value, fmtCents(d.refunded_cents), d.refunded_cents);
      const pct = (c) => (d.budget_cents > 0 ? (100 * c) / d.budget_cents : 0).toFixed(2) + '%';
      fillC.style.width = pct(d.confirmed_cents);
      fillR.style.width = pct(d.reserved_cents);
    };
  },
};

// perUser says what one user may hold of a discount campaign.
function perUser(d) {
  if (d.per_user_unlimited) return 'no limit';
  const parts = [];
  if (d.per_user_count) parts.push(fmtInt(d.per_user_count) + (d.per_user_count === 1 ? ' discount' : ' discounts'));
  if (d.per_user_amount) parts.push(fmtMoney(d.per_user_amount) + ' in all');
  return 'at most ' + parts.join(' and ');
}

const discountSpecPanel = {
  id: 'spec',
  title: 'Campaign',
  applies: () => true,
  mount(body) {
    const dl = el('dl', { class: 'spec' });
    body.append(dl);
    return ({ campaign: d }) => {
      clear(dl);
      const rows = [
        ['Budget', fmtMoney(d.budget) + ' over ' + fmtInt(d.quota) + ' discounts'],
        ['Smallest discount', fmtMoney(d.min)],
        ['Largest discount', fmtMoney(d.max)],
        ['Per user', perUser(d)],
        ['Hold', d.hold],
        ['Funding account', d.funding_account],
        ['Shards', fmtInt(d.shards || 1)],
        ['Opens', fmtTime(d.opens_at)],
        ['Closes', fmtTime(d.closes_at)],
      ];
      if (d.close_reason) rows.push(['Closed because', d.close_reason.replace('_', ' ')]);
      for (const [k, v] of rows) dl.append(el('dt', { text: k }), el('dd', { text: v, dataset: { row: k } }));
    };
  },
};

// discountPanels, in the order they show: a discount campaign's.
export const discountPanels = [budgetPanel, blockedPanel, discountSpecPanel];
