// The session's timeline: a fold over its session-protocol envelopes (docs/EVENTS.md) plus the
// live deltas. Messages, reasoning (collapsed), commands with their output, file diffs, the plan,
// request cards and turn boundaries; anything unknown is kept, collapsed, as raw JSON.

import { h, shellCommand, whoAnswered, tokens } from './dom.js';
import { diffBlock } from './diff.js';
import { requestCard } from './cards.js';
import { richText } from './text.js';

const TOOL_LABEL = { CodexBash: 'Command', CodexPatch: 'Edit files', CodexAgent: 'Sub-agent' };
const PLAN_MARK = { completed: '✓', in_progress: '▶', pending: '○' };

export class Timeline {
  /** `hooks`: onStatus(status), onUsage(usage), onRequest(open requests count). */
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks;
    this.calls = new Map();
    this.cards = new Map();
    this.drafts = new Map();
    this.plan = null;
    this.turn = null;
  }

  add(el) {
    const stick = this.atBottom();
    this.root.append(el);
    if (stick) this.scroll();
    return el;
  }

  atBottom() {
    const s = document.scrollingElement;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
  }

  scroll() {
    requestAnimationFrame(() => window.scrollTo({ top: document.scrollingElement.scrollHeight }));
  }

  openRequests() {
    return [...this.cards.values()].filter((c) => !c.done).length;
  }

  /** One logged event. */
  apply(env) {
    const ev = env.ev || {};
    // A sub-agent's events are shown in place, marked with the agent's name.
    const agent = env.agent ? (env.agent.nickname || env.agent.role || 'agent') : null;
    const node = (cls, ...children) => h('div', { class: `ev ${cls}${agent ? ' sub-agent' : ''}`, dataset: { seq: env.seq, t: ev.t } },
      agent ? h('span', { class: 'agent-tag' }, `Sub-agent ${agent}`) : null, ...children);
    switch (ev.t) {
      case 'turn-start':
        if (agent) {
          this.add(node('turn-sep', h('span', {}, 'Turn started')));
          break;
        }
        this.turn = env.turn;
        this.plan = null;
        this.add(node('turn-sep', h('span', {}, 'Turn started')));
        break;
      case 'turn-end': {
        if (!agent) {
          for (const d of this.drafts.values()) d.el.remove();
          this.drafts.clear();
        }
        const label = { completed: 'Turn completed', failed: 'Turn failed', cancelled: 'Turn interrupted' }[ev.status] ?? `Turn ${ev.status}`;
        // Stopped by the relay: a deadline, the idle watchdog or a budget, named.
        const stopped = ev.stopped ? h('span', { class: 'badge stopped', 'data-reason': ev.stopped.reason }, stopLabel(ev.stopped)) : null;
        const used = ev.usage && !agent ? h('span', { class: 'turn-usage' }, ` · ${tokens(ev.usage)}`) : null;
        this.add(node(`turn-sep end status-${ev.status}`, h('span', {}, label), stopped, used, ev.error ? h('span', { class: 'err' }, ` — ${ev.error}`) : null));
        break;
      }
      case 'text':
        this.text(env, ev, node);
        break;
      case 'tool-call-start':
        this.toolStart(ev, node);
        break;
      case 'tool-call-end':
        this.toolEnd(ev);
        break;
      case 'file':
        this.add(node('file', diffBlock(ev.path, ev.kind, ev.diff)));
        break;
      case 'photo':
        this.add(node('msg user photo', h('span', { class: 'who' }, 'Image'), h('code', {}, ev.url)));
        break;
      case 'request-opened': {
        const card = requestCard(ev.request);
        card.call = this.calls.get(ev.request.details && ev.request.details.itemId);
        if (card.call && !card.call.ended) card.call.badge.textContent = 'waiting for you';
        this.cards.set(ev.request.id, card);
        this.add(node('request', card.el));
        this.hooks.onRequest(this.openRequests());
        break;
      }
      case 'request-resolved': {
        const card = this.cards.get(ev.id);
        if (!card && ev.request) {
          // A rule answered it as it opened: nobody was asked.
          this.add(node(`ruled ruled-${/^approve/.test(ev.decision) ? 'ok' : 'no'}`,
            h('span', { class: 'who' }, /^approve/.test(ev.decision) ? 'Allowed' : 'Denied'), ' by ', whoAnswered(ev.by), ': ',
            h('code', {}, ev.request.kind === 'command_approval' ? shellCommand(ev.request.details?.command ?? '') : ev.request.question),
            ev.reason ? ` — “${ev.reason}”` : ''));
        }
        if (card) {
          card.resolve(ev);
          card.done = true;
          if (card.call && !card.call.ended) card.call.badge.textContent = 'running';
        }
        this.hooks.onRequest(this.openRequests());
        break;
      }
      case 'usage':
        this.hooks.onUsage(ev);
        break;
      case 'status':
        this.hooks.onStatus(ev.status);
        break;
      case 'error':
        this.add(node(ev.retrying ? 'notice' : 'error', ev.retrying ? 'Retrying: ' : 'Error: ', ev.message));
        break;
      case 'plan':
        this.showPlan(ev, node);
        break;
      case 'note':
        this.add(node('notice', 'Note: ', ev.message));
        break;
      case 'review':
        this.add(node('review', reviewBlock(ev.review)));
        break;
      case 'rolled-back':
        this.add(node('notice rolled-back', `Rolled back: ${ev.turns.length} turn(s) dropped from the thread's history (their events stay above).`));
        break;
      case 'forked':
        this.add(node('notice forked', 'Forked from ', h('a', { href: `#/s/${encodeURIComponent(ev.from)}` }, `session ${ev.from.slice(0, 8)}`),
          ev.through ? ` through turn ${ev.through}` : '', '; its history follows.'));
        break;
      case 'codex':
        if (ev.method === 'warning' && ev.params && ev.params.message) {
          this.add(node('notice', 'Codex warns: ', ev.params.message));
          break;
        }
        // Older Codex (0.98) mirrors every step as a legacy `codex/event/*` notification: kept
        // in the log (and the API), not repeated here.
        if (typeof ev.method === 'string' && ev.method.startsWith('codex/event/')) break;
      // falls through: kept, collapsed, as it came
      default:
        this.add(node('raw', h('details', {},
          h('summary', {}, ev.t === 'codex' ? `Codex: ${ev.method}` : `Event: ${ev.t}`),
          h('pre', {}, JSON.stringify(ev, null, 2)))));
        break;
    }
  }

  text(env, ev, node) {
    if (env.role === 'user') {
      this.add(node('msg user', h('span', { class: 'who' }, 'You'), h('div', { class: 'body' }, ev.text)));
      return;
    }
    const kind = ev.thinking ? 'thinking' : 'text';
    // The completed item replaces the oldest draft of its kind (deltas carry no seq).
    for (const [item, d] of this.drafts) {
      if (d.kind === kind) {
        d.el.remove();
        this.drafts.delete(item);
        break;
      }
    }
    if (ev.thinking) {
      this.add(node('reasoning', h('details', {}, h('summary', {}, 'Reasoning'), h('div', { class: 'body' }, ev.text))));
    } else {
      this.add(node('msg agent', h('span', { class: 'who' }, 'Codex'), h('div', { class: 'body' }, richText(ev.text))));
    }
  }

  toolStart(ev, node) {
    const label = TOOL_LABEL[ev.name] ?? ev.name;
    const output = h('pre', { class: 'output', hidden: true });
    const badge = h('span', { class: 'badge running' }, 'running');
    const title = ev.name === 'CodexBash' ? `$ ${shellCommand(ev.title ?? '')}` : ev.title ?? '';
    const el = node(`tool tool-${ev.name}`,
      h('div', { class: 'tool-head' },
        h('span', { class: 'tool-name' }, label),
        badge),
      title ? h('pre', { class: 'cmd' }, h('code', {}, title)) : null,
      ev.description && ev.description !== ev.title && ev.name !== 'CodexBash' ? h('p', { class: 'meta' }, ev.description) : null,
      ev.name !== 'CodexBash' && ev.name !== 'CodexPatch' && ev.args
        ? h('details', {}, h('summary', {}, 'Arguments'), h('pre', {}, JSON.stringify(ev.args, null, 2)))
        : null,
      output);
    this.calls.set(ev.call, { el, output, badge });
    this.add(el);
  }

  toolEnd(ev) {
    const c = this.calls.get(ev.call);
    if (!c) return;
    c.ended = true;
    c.badge.className = `badge ${ev.status}`;
    c.badge.textContent = ev.exit_code !== undefined && ev.exit_code !== null && ev.status !== 'declined'
      ? `${ev.status} · exit ${ev.exit_code}` : ev.status;
    if (ev.output !== undefined && ev.output !== null) {
      c.output.textContent = typeof ev.output === 'string' ? ev.output : JSON.stringify(ev.output, null, 2);
    }
    c.output.hidden = !c.output.textContent;
  }

  showPlan(ev, node) {
    // Codex 0.98 says inProgress, newer ones in_progress.
    const status = (s) => (s === 'inProgress' ? 'in_progress' : s);
    const list = h('ol', { class: 'plan-steps' }, (ev.steps || []).map((s) =>
      h('li', { class: `step ${status(s.status)}` },
        h('span', { class: 'mark', 'aria-hidden': 'true' }, PLAN_MARK[status(s.status)] ?? '•'),
        h('span', { class: 'sr' }, `${status(s.status).replace('_', ' ')}: `),
        s.step)));
    const el = node('plan', h('div', { class: 'plan-head' }, 'Plan'), list);
    // One plan per turn, kept current where it first appeared.
    if (this.plan && this.plan.isConnected) this.plan.replaceWith(el);
    else this.add(el);
    this.plan = el;
  }

  /** A live delta: `{turn, item, stream: text|thinking|output, delta}`. */
  delta(d) {
    if (d.stream === 'output') {
      const c = this.calls.get(d.item);
      if (c) {
        c.output.textContent += d.delta;
        c.output.hidden = false;
      }
      return;
    }
    let draft = this.drafts.get(d.item);
    if (!draft) {
      const body = h('div', { class: 'body' });
      const el = d.stream === 'thinking'
        ? h('div', { class: 'ev reasoning draft' }, h('details', {}, h('summary', {}, 'Reasoning…'), body))
        : h('div', { class: 'ev msg agent draft' }, h('span', { class: 'who' }, 'Codex'), body);
      draft = { el, body, kind: d.stream };
      this.drafts.set(d.item, draft);
      this.add(el);
    }
    draft.body.textContent += d.delta;
    if (this.atBottom()) this.scroll();
  }
}

/** What stopped a turn, in a few words. */
export function stopLabel(r) {
  if (r.reason === 'deadline') return `deadline ${Math.round(r.limitMs / 1000)} s`;
  if (r.reason === 'idle') return `no output for ${Math.round(r.idleMs / 1000)} s`;
  if (r.reason === 'budget') return `budget ${r.budget}: ${r.used} of ${r.limit}`;
  return r.reason;
}

/** A review's findings: the verdict, then one item per finding (priority, title, where, body). */
function reviewBlock(r) {
  const where = (f) => (f.file ? ` — ${f.file}${f.lines ? `:${f.lines[0]}-${f.lines[1]}` : ''}` : '');
  return h('div', { class: 'review-block' },
    h('span', { class: 'who' }, 'Review'),
    r.overallCorrectness ? h('strong', {}, ` ${r.overallCorrectness}`) : null,
    r.overallExplanation ? h('p', {}, r.overallExplanation) : null,
    r.findings.length === 0 ? h('p', {}, 'No findings.') : h('ol', { class: 'findings' },
      ...r.findings.map((f) => h('li', { dataset: { priority: f.priority ?? '' } },
        h('strong', {}, f.title), h('code', {}, where(f)), h('div', {}, f.body)))));
}
