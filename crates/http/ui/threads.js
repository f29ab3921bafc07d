// A session's thread operations as buttons: review (what to review is asked), fork (the new
// session opens), roll back the last turns, compact, and the model and reasoning effort of the
// next turns (from GET /api/models). Each answers in the page's notice line when it fails.

import { get, post } from './api.js';
import { h } from './dom.js';

/** What "Review" asks for: `uncommitted`, `base:BRANCH`, `commit:SHA`, or instructions. */
export function reviewTarget(answer) {
  const a = answer.trim();
  if (a === '' || a === 'uncommitted') return { type: 'uncommittedChanges' };
  if (a.startsWith('base:') && a.length > 5) return { type: 'baseBranch', branch: a.slice(5).trim() };
  if (a.startsWith('commit:') && a.length > 7) return { type: 'commit', sha: a.slice(7).trim() };
  return { type: 'custom', instructions: a };
}

export function threadActions(path, { notice, turns, model }) {
  const button = (label, title, onclick) => h('button', { class: 'button small', type: 'button', title, onclick }, label);
  const act = async (fn) => {
    notice.textContent = '';
    try {
      await fn();
    } catch (e) {
      notice.textContent = e.message;
    }
  };

  const review = button('Review', 'Codex reviews changes; its findings end the turn', () => act(async () => {
    const answer = window.prompt('Review what? uncommitted (the default), base:BRANCH, commit:SHA, or instructions', 'uncommitted');
    if (answer === null) return;
    await post(`${path}/review`, { target: reviewTarget(answer) });
  }));

  const fork = button('Fork', 'A new session starting from this one\'s history', () => act(async () => {
    const all = turns();
    const through = window.prompt(`Fork through which turn? Empty: the whole history (${all.length} turns)`, '');
    if (through === null) return;
    const body = through.trim() ? { turnId: through.trim() } : {};
    const forked = await post(`${path}/fork`, body);
    location.hash = `#/s/${encodeURIComponent(forked.sessionId)}`;
  }));

  const rollback = button('Roll back', 'Drop the last turns from the thread\'s history (files stay as they are)', () => act(async () => {
    const n = window.prompt(`Drop how many of the last turns? (${turns().length} in the history; files they changed stay changed)`, '1');
    if (n === null) return;
    const count = Number(n);
    if (!Number.isInteger(count) || count < 1) throw new Error(`${n} is not a number of turns`);
    const r = await post(`${path}/rollback`, { turns: count });
    notice.textContent = `Dropped ${r.dropped.length} turn(s); ${r.turns.length} left in the history.`;
  }));

  const compact = button('Compact', 'Codex summarizes the history to free context', () => act(async () => {
    await post(`${path}/compact`);
  }));

  const choose = button('Model', 'The model and reasoning effort of the next turns', () => act(async () => {
    const { models } = await get('/api/models');
    const names = models.map((m) => m.id);
    const now = model();
    const picked = window.prompt(`Model of the next turns${names.length ? ` (${names.join(', ')})` : ''}`, now.model ?? names[0] ?? '');
    if (picked === null) return;
    const chosen = models.find((m) => m.id === picked.trim());
    const efforts = chosen?.efforts ?? [];
    const effort = window.prompt(`Reasoning effort${efforts.length ? ` (${efforts.join(', ')})` : ''}; empty keeps it`, now.effort ?? chosen?.defaultEffort ?? '');
    if (effort === null) return;
    const body = {};
    if (picked.trim()) body.model = picked.trim();
    if (effort.trim()) body.effort = effort.trim();
    const set = await post(`${path}/model`, body);
    notice.textContent = `Next turns: ${set.model ?? 'Codex\'s model'}${set.effort ? ` · ${set.effort}` : ''}.`;
  }));

  const all = [review, fork, rollback, compact, choose];
  return {
    buttons: h('span', { class: 'thread-ops', dataset: { needs: 'operator' } }, ...all),
    /** Operations that need the session between turns wait while one runs. */
    setBusy(busy) {
      for (const b of [review, rollback, compact]) b.disabled = busy;
    },
  };
}
