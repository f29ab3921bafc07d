// One session: its header (status, cwd, model, tokens, interrupt, the thread operations of
// threads.js), the timeline streamed from
// /api/sessions/{id}/stream (history first, then live; resumed after the last seq seen), and a
// follow-up box that starts a turn when idle and steers the running one otherwise.

import { get, post, del } from './api.js';
import { h, tokens, statusBadge, running } from './dom.js';

const BUSY = {
  active: 'Codex is working',
  awaiting_approval: 'Codex waits for your approval',
  awaiting_input: 'Codex waits for your answer',
};
import { openStream } from './stream.js';
import { Timeline, stopLabel } from './timeline.js';
import { setBase } from './diff.js';
import { threadActions } from './threads.js';
import { worktreePanel } from './worktree.js';

export function sessionView(root, id, { onRelayEvent }) {
  const path = `/api/sessions/${encodeURIComponent(id)}`;
  let status = null;
  let lastSeq = 0;
  let applied = 0;

  const statusSlot = h('span', { class: 'status-slot', role: 'status', 'aria-live': 'polite' });
  const cwd = h('code', { class: 'cwd' });
  const model = h('span', { class: 'model' });
  const usage = h('span', { class: 'usage', title: 'Tokens this session spent, summed over every model request' });
  // A budget the session reached: it starts no turn until raised (here, or over the API).
  const budgetNote = h('p', { class: 'budget-note', role: 'alert', hidden: true });
  const raise = h('button', { class: 'button small', type: 'button', dataset: { needs: 'operator' }, onclick: raiseBudget }, 'Raise budget');
  // A rate limit is hit and the session's new turn waits in the relay's queue.
  const queueNote = h('p', { class: 'queue-note', role: 'status', hidden: true });
  // A session with a git worktree: its diff against the base.
  const worktree = worktreePanel(path);
  let reached = null;
  const pendingNote = h('a', { class: 'badge pending', href: '#', hidden: true, onclick: (e) => { e.preventDefault(); root.querySelector('.card.request:not(.resolved)')?.scrollIntoView({ behavior: 'smooth', block: 'center' }); } });
  const interrupt = h('button', { class: 'button danger-outline small', type: 'button', disabled: true, dataset: { needs: 'operator' }, onclick: stop }, 'Interrupt');
  const close = h('button', { class: 'button small', type: 'button', dataset: { needs: 'operator' }, onclick: closeSession }, 'Close');
  const notice = h('p', { class: 'notice', role: 'alert' });
  // A thread of the Codex daemon the terminal uses (docs/ATTACH.md): where it lives, and a
  // warning when another client set it to ask nobody (approval policy `never`).
  const attachedNote = h('p', { class: 'attached-note', role: 'note', hidden: true });
  // The session's history (turn ids) and model, as the snapshot last said.
  let snapshot = {};
  const ops = threadActions(path, {
    notice,
    turns: () => snapshot.turns ?? [],
    model: () => ({ model: snapshot.model, effort: snapshot.effort }),
  });
  const streamState = h('span', { class: 'stream-state', role: 'status' });
  const events = h('div', { class: 'timeline', 'aria-label': 'Session events', role: 'log' });

  const input = h('textarea', { name: 'text', rows: 2, placeholder: 'Message Codex', 'aria-label': 'Message' });
  const send = h('button', { class: 'button primary', type: 'submit' }, 'Send');
  const hint = h('span', { class: 'hint' });
  const composer = h('form', { class: 'composer', dataset: { needs: 'operator' }, onsubmit: say }, input, send, hint);
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && window.matchMedia('(pointer: fine)').matches) {
      e.preventDefault();
      composer.requestSubmit();
    }
  });

  root.append(
    h('div', { class: 'session-head' },
      h('div', { class: 'line1' },
        h('a', { class: 'back', href: '#/', 'aria-label': 'Back to sessions' }, '←'),
        h('h1', { class: 'title' }, 'Session'),
        statusSlot, pendingNote),
      h('div', { class: 'line2' }, cwd, model, usage, streamState),
      h('div', { class: 'line3' }, interrupt, close, ops.buttons)),
    notice, budgetNote, queueNote, attachedNote, worktree.root, events, composer);

  const timeline = new Timeline(events, {
    onStatus: setStatus,
    onUsage: (u) => { usage.textContent = tokens(u) || ''; },
    onRequest: (n) => {
      pendingNote.hidden = n === 0;
      pendingNote.textContent = n === 1 ? '1 waiting for you' : `${n} waiting for you`;
    },
  });

  function setStatus(s) {
    status = s;
    statusSlot.replaceChildren(statusBadge(s));
    const busy = running(s);
    interrupt.disabled = !busy;
    ops.setBusy(busy || s === 'closed');
    close.disabled = s === 'closed';
    send.textContent = busy ? 'Steer' : 'Send';
    input.placeholder = busy ? 'Add to the running turn (steer)' : s === 'closed' ? 'Closed; a message resumes it' : 'Follow up';
    hint.textContent = busy ? `${BUSY[s]}; a message now steers the turn.` : '';
    root.dataset.status = s;
  }

  async function load() {
    try {
      const s = await get(path);
      snapshot = s;
      // Until the first message names it: every session of one directory would look alike.
      if (!title) document.title = `Session ${id.slice(0, 8)} · codex-relay`;
      cwd.textContent = s.cwd ?? '';
      setBase(s.cwd);
      cwd.title = s.cwd ?? '';
      model.textContent = [s.model, s.effort].filter(Boolean).join(' · ');
      usage.textContent = tokens(s.spent?.usage ?? s.usage) || '';
      showBudget(s.budgetReached);
      showAttached(s.attached);
      showQueued(s.queued);
      if (s.worktree) worktree.refresh();
      if (status === null) setStatus(s.status);
    } catch (e) {
      notice.textContent = e.status === 404 ? `No session ${id}: ${e.message}` : e.message;
    }
  }

  function showAttached(a) {
    attachedNote.hidden = !a;
    if (!a) return;
    attachedNote.dataset.state = a.state;
    const where = { live: 'followed live', idle: 'idle in the daemon', detached: 'the daemon is away' }[a.state] ?? a.state;
    const parts = [`On the Codex daemon the terminal uses (${where}): the terminal and this page answer the same requests; the first answer wins.`];
    const asksNobody = a.approvalPolicy === 'never';
    attachedNote.classList.toggle('asks-nobody', asksNobody);
    attachedNote.dataset.policy = a.approvalPolicy ?? '';
    if (asksNobody) {
      parts.push(`It no longer asks for approval: ${a.policyChangedBy ?? 'a client of the daemon'} set its approval policy to “never”, so Codex acts without asking anyone, this relay included.`);
    }
    attachedNote.textContent = parts.join(' ');
  }

  function showBudget(r) {
    reached = r ?? null;
    budgetNote.hidden = !reached;
    if (reached) budgetNote.replaceChildren(`Budget reached (${stopLabel(reached)}): the session starts no new turn until it is raised. `, raise);
  }

  function showQueued(q) {
    queueNote.hidden = !q;
    if (!q) return;
    const hold = q.hold;
    const at = hold?.resetsAt ? `; it resets at ${new Date(hold.resetsAt * 1000).toLocaleTimeString()}` : '';
    const what = hold ? `The ${hold.limitId} rate limit is hit (${hold.window} window at ${hold.usedPercent}%${at})` : 'Turns wait for a rate limit';
    queueNote.textContent = `${what}: the new turn waits in the queue, position ${q.position}, and starts when it clears.`;
  }

  async function raiseBudget() {
    if (!reached) return;
    const next = window.prompt(`New ${reached.budget} budget (now ${reached.limit})`, String(reached.limit * 2));
    if (next === null) return;
    const value = Number(next);
    if (!Number.isFinite(value) || value < 0) { notice.textContent = `${next} is not a number`; return; }
    try {
      const view = await post(`${path}/limits`, { budget: { [reached.budget]: value } });
      showBudget(view.budgetReached);
    } catch (e) {
      notice.textContent = e.message;
    }
  }

  let title = false;
  let ended = false;
  // Opened again after the stream ended (the session closed) and a message resumed it.
  const connect = () => openStream(`${path}/stream`, {
    after: lastSeq,
    handlers: {
      envelope(env) {
        // A resumed stream starts after the last seq; anything at or below it was shown already.
        if (env.seq <= lastSeq) return;
        lastSeq = env.seq;
        applied += 1;
        // What the browser test compares with the log: every seq applied once, none skipped.
        root.dataset.lastSeq = String(lastSeq);
        root.dataset.applied = String(applied);
        if (!title && env.role === 'user' && env.ev && env.ev.t === 'text') {
          title = true;
          const text = env.ev.text.split('\n')[0].slice(0, 120);
          root.querySelector('.title').textContent = text;
          document.title = `${text} · codex-relay`;
        }
        timeline.apply(env);
        // A turn of the session ended: what it spent, and any budget it reached.
        // A queued turn that starts is no longer queued.
        if (env.ev && ['turn-end', 'turn-start', 'rolled-back'].includes(env.ev.t) && !env.agent) load();
        // A note may say the thread's approval policy changed (an attached thread).
        if (env.ev && env.ev.t === 'note') load();
      },
      delta(d) {
        timeline.delta(d);
      },
    },
    // Reconnect unless the session is unknown here (a 401 sends the person to log in).
    async retry() {
      try {
        await get(path);
        return true;
      } catch (e) {
        if (e.status !== 404) return true;
        notice.textContent = e.message;
        return false;
      }
    },
    onState(state) {
      ended = state === 'ended' || state === 'gone';
      streamState.textContent = { live: 'live', ended: 'stream ended', gone: 'not found' }[state] ?? 'reconnecting…';
      streamState.dataset.state = state;
    },
  });
  let stream = null;
  let left = false;

  const off = onRelayEvent((kind, d) => {
    if (kind === 'resync') load();
    if (d && d.sessionId === id && kind === 'session_usage') usage.textContent = tokens(d.usage) || '';
  });

  async function say(e) {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    send.disabled = true;
    notice.textContent = '';
    try {
      const r = await post(`${path}/messages`, { text });
      input.value = '';
      if (ended && stream) {
        stream.close();
        stream = connect();
      }
      hint.textContent = r.mode === 'steered' ? 'Added to the running turn.' : '';
      if (r.mode === 'queued') load();
    } catch (err) {
      notice.textContent = err.message;
    } finally {
      send.disabled = false;
    }
  }

  async function stop() {
    interrupt.disabled = true;
    try {
      const r = await post(`${path}/interrupt`);
      if (!r.interrupted) notice.textContent = 'No turn was running.';
    } catch (err) {
      notice.textContent = err.message;
      interrupt.disabled = false;
    }
  }

  async function closeSession() {
    if (!confirm('Close this session? Codex stops working on it; its history stays.')) return;
    try {
      await del(path);
    } catch (err) {
      notice.textContent = err.message;
    }
  }

  // The snapshot first (the directory that diffs are shown relative to), then the stream.
  load().finally(() => {
    if (!left) stream = connect();
  });
  return {
    leave() {
      left = true;
      if (stream) stream.close();
      off();
    },
  };
}
