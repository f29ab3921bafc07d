// Pending approvals and questions as cards: Approve / Approve for session / Deny with a reason
// for approvals, option buttons for questions. Answers go through the same broker as MCP; the
// first answer wins and a late one is told so.

import { get, respond } from './api.js';
import { h, shellCommand, whoAnswered } from './dom.js';
import { ruleForm } from './ruleform.js';
import { diffBlock } from './diff.js';
import { trailSection } from './trail.js';

const TITLE = {
  command_approval: 'Run this command?',
  file_change_approval: 'Apply these changes?',
  permissions_approval: 'Grant these permissions?',
  question: 'Codex asks',
  elicitation: 'An MCP server asks',
  tool_call: 'Tool call',
  other: 'Codex asks',
};

function countdown(deadline) {
  const el = h('span', { class: 'deadline' });
  const tick = () => {
    const s = Math.max(0, Math.round((deadline - Date.now()) / 1000));
    el.textContent = s > 0 ? `declined automatically in ${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}` : 'timing out…';
  };
  if (deadline) {
    tick();
    let seen = false;
    const t = setInterval(() => {
      if (el.isConnected) {
        seen = true;
        tick();
      } else if (seen || Date.now() > deadline) {
        clearInterval(t);
      }
    }, 1000);
  }
  return el;
}

/** What approving lets Codex do beyond its sandbox, as the relay worked it out. */
function reachOf(req) {
  if (!req.reach) return null;
  const wide = !['sandboxed', 'no_sandbox'].includes(req.reach.kind);
  return h('p', { class: `reach${wide ? ' wide' : ''}`, dataset: { reach: req.reach.kind } }, req.reach.text);
}

function detailsOf(req) {
  const d = req.details || {};
  switch (req.kind) {
    case 'command_approval': {
      const cmd = d.command ?? d.cmd ?? '';
      return [
        h('pre', { class: 'cmd' }, h('code', {}, `$ ${shellCommand(Array.isArray(cmd) ? cmd.join(' ') : cmd)}`)),
        d.cwd ? h('p', { class: 'meta' }, 'in ', h('code', {}, d.cwd)) : null,
        d.reason ? h('p', { class: 'reason' }, d.reason) : null,
      ];
    }
    case 'file_change_approval':
      return [
        d.reason ? h('p', { class: 'reason' }, d.reason) : null,
        (d.changes || []).map((c) => diffBlock(c.path, c.kind, c.diff)),
        d.changes && d.changes.length ? null : h('p', {}, req.question),
      ];
    case 'question':
      // Each question is shown with its options below.
      return d.questions && d.questions.length ? [] : [h('p', { class: 'question' }, req.question)];
    default:
      return [h('p', { class: 'question' }, req.question)];
  }
}

/** The approval words the buttons below stand for; any other option gets a button of its own. */
const BUTTON_WORDS = ['approve', 'approve for session', 'deny', 'cancel'];

/** What an option beyond the usual ones lets Codex do, when the card knows more than its word. */
function optionHint(req, option) {
  const prefix = req.details && req.details.codexRule;
  if (option === 'approve with codex rule' && prefix) {
    return `Codex writes a rule for commands starting with “${prefix.join(' ')}” into its own rules file: from then on it runs them without asking anyone, outside the sandbox, in every session of this Codex.`;
  }
  return null;
}

/** Buttons for an approval-like request. */
function approvalActions(req, send) {
  const reason = h('input', { type: 'text', class: 'reason-input', placeholder: 'Why not? (the model reads this)', 'aria-label': 'Reason for denying' });
  const denyBox = h('form', { class: 'deny-box', hidden: true, onsubmit: (e) => { e.preventDefault(); send('deny', reason.value.trim() ? { message: reason.value.trim() } : {}); } },
    reason,
    h('button', { class: 'button danger', type: 'submit' }, 'Deny'),
    h('button', { class: 'button', type: 'button', onclick: () => { denyBox.hidden = true; buttons.hidden = false; } }, 'Back'));
  const ruleBox = h('div', { class: 'rule-box', hidden: true });
  const ruleable = req.kind === 'command_approval' || req.kind === 'file_change_approval';
  // A rule for a request that may leave the sandbox answers requests like it only if ticked.
  const leaves = req.reach && ['outside_if_blocked', 'outside'].includes(req.reach.kind);
  async function alwaysAllow() {
    try {
      const spec = await get(`/api/rules/suggest?request=${encodeURIComponent(req.id)}&action=allow`);
      ruleBox.replaceChildren(
        h('p', { class: 'hint' }, 'A rule for requests like this one; it answers them from now on. This request is approved once.',
          leaves ? ' Approving requests like this one may run them outside the sandbox: the rule answers them only if you tick “Also when it may run outside the sandbox”.' : ''),
        ruleForm(spec, {
          submitLabel: 'Save rule and approve',
          onSaved: () => send('allow'),
          onCancel: () => { ruleBox.hidden = true; buttons.hidden = false; },
        }));
      buttons.hidden = true;
      ruleBox.hidden = false;
      ruleBox.querySelector('input')?.focus();
    } catch (e) {
      ruleBox.hidden = false;
      ruleBox.replaceChildren(h('p', { class: 'form-error', role: 'alert' }, e.message));
    }
  }
  const optionBox = h('div', { class: 'rule-box', hidden: true });
  function confirmOption(option, label, hint) {
    optionBox.replaceChildren(
      h('p', { class: 'hint', role: 'note' }, hint),
      h('div', { class: 'actions' },
        h('button', { class: 'button primary', type: 'button', onclick: () => send('allow', { option }) }, label),
        h('button', { class: 'button', type: 'button', onclick: () => { optionBox.hidden = true; buttons.hidden = false; } }, 'Back')));
    buttons.hidden = true;
    optionBox.hidden = false;
  }
  const buttons = h('div', { class: 'actions' },
    h('button', { class: 'button primary', type: 'button', onclick: () => send('allow') }, 'Approve'),
    h('button', { class: 'button', type: 'button', onclick: () => send('allow', { forSession: true }) }, 'Approve for session'),
    // Options the engine offers beyond those (it reads the word): one button each; one whose
    // effect outlives the request says what it lets Codex do and asks again first.
    (req.options || []).filter((o) => !BUTTON_WORDS.includes(o)).map((o) => {
      const hint = optionHint(req, o);
      const label = o.charAt(0).toUpperCase() + o.slice(1);
      return h('button', { class: 'button', type: 'button', dataset: { option: o },
        onclick: () => (hint ? confirmOption(o, label, hint) : send('allow', { option: o })) }, hint ? `${label}…` : label);
    }),
    ruleable ? h('button', { class: 'button', type: 'button', dataset: { needs: 'admin' }, onclick: alwaysAllow }, 'Always allow…') : null,
    h('button', { class: 'button danger-outline', type: 'button', onclick: () => { buttons.hidden = true; denyBox.hidden = false; reason.focus(); } }, 'Deny…'));
  return [buttons, denyBox, ruleBox, optionBox];
}

/** Option buttons per question; one question answers on click, several take a Submit. */
function questionActions(req, send) {
  const qs = (req.details && req.details.questions) || [];
  if (qs.length === 0) {
    return [h('div', { class: 'actions' }, (req.options || []).map((o) =>
      h('button', { class: 'button', type: 'button', onclick: () => send('allow', { updatedInput: { answers: { q0: o } } }) }, o)))];
  }
  const chosen = {};
  const submit = h('button', { class: 'button primary', type: 'button', hidden: qs.length === 1, onclick: () => send('allow', { updatedInput: { answers: chosen } }) }, 'Send answers');
  const groups = qs.map((q, i) => {
    const key = `q${i}`;
    const free = h('input', { type: 'text', placeholder: 'Or type an answer', 'aria-label': `Answer to: ${q.question}`,
      onchange: (e) => { chosen[key] = e.target.value; if (qs.length === 1 && e.target.value) send('allow', { updatedInput: { answers: { q0: e.target.value } } }); } });
    return h('fieldset', { class: 'question-group' },
      h('legend', {}, q.header ? h('strong', {}, `${q.header}: `) : null, q.question),
      h('div', { class: 'actions' }, (q.options || []).map((o) => {
        const label = typeof o === 'string' ? o : o.label;
        return h('button', {
          class: 'button option', type: 'button', title: o.description || null, 'aria-pressed': 'false',
          onclick: (e) => {
            chosen[key] = label;
            if (qs.length === 1) return send('allow', { updatedInput: { answers: { q0: label } } });
            for (const b of e.target.parentElement.children) b.setAttribute('aria-pressed', String(b === e.target));
          },
        }, label);
      })),
      (q.options || []).length === 0 || q.isOther ? free : null);
  });
  return [groups, h('div', { class: 'actions' }, submit,
    h('button', { class: 'button danger-outline', type: 'button', onclick: () => send('deny') }, 'Decline'))];
}

/** A caller-defined tool: the person types its result (or fails the call). */
function toolActions(req, send) {
  const result = h('textarea', { rows: 2, placeholder: 'The tool\'s result', 'aria-label': 'Tool result' });
  return [
    req.details && req.details.arguments
      ? h('pre', { class: 'cmd' }, h('code', {}, JSON.stringify(req.details.arguments, null, 2)))
      : null,
    result,
    h('div', { class: 'actions' },
      h('button', { class: 'button primary', type: 'button', onclick: () => send('allow', { updatedInput: { output: result.value } }) }, 'Send result'),
      h('button', { class: 'button danger-outline', type: 'button', onclick: () => send('deny', result.value.trim() ? { message: result.value.trim() } : {}) }, 'Fail the call')),
  ];
}

/** A card for `req` (a PendingView); `resolve(...)` marks it answered. */
export function requestCard(req) {
  const status = h('p', { class: 'card-status', role: 'status' });
  const card = h('section', { class: `card request kind-${req.kind}`, dataset: { request: req.id }, 'aria-label': TITLE[req.kind] ?? 'Request' });
  const controls = h('div', { class: 'card-controls', dataset: { needs: 'approver' } });
  // What a viewer sees instead of the buttons (styled by the signed-in role; see app.js).
  const watchOnly = h('p', { class: 'hint watch-only', dataset: { lacks: 'approver' } }, 'You can watch this request; answering it needs the approver role.');
  let done = false;

  async function send(action, extra = {}) {
    if (done) return;
    for (const b of card.querySelectorAll('button')) b.disabled = true;
    status.textContent = 'Sending…';
    try {
      await respond(req.id, action, extra);
      // The resolved event may have arrived first and said who answered; keep that.
      if (!done) status.textContent = 'Answered.';
    } catch (e) {
      if (done) return;
      status.textContent = e.status === 409 ? `Already answered: ${e.message}` : e.message;
      if (e.status !== 409) for (const b of card.querySelectorAll('button')) b.disabled = false;
    }
  }

  const approvalLike = ['command_approval', 'file_change_approval', 'permissions_approval', 'elicitation'].includes(req.kind);
  const actions = approvalLike ? approvalActions(req, send)
    : req.kind === 'tool_call' ? toolActions(req, send)
      : questionActions(req, send);
  controls.append(...actions.flat().filter(Boolean));
  card.append(
    h('header', { class: 'card-head' },
      h('h3', {}, TITLE[req.kind] ?? 'Codex asks',
        req.agent ? h('span', { class: 'agent-tag' }, ` · sub-agent ${req.agent.nickname || req.agent.role || req.agent.thread}`) : null),
      countdown(req.deadline)),
    ...detailsOf(req).flat().filter(Boolean),
    reachOf(req),
    controls, watchOnly, status,
    trailSection(`/api/requests/${encodeURIComponent(req.id)}/deliveries`, () => !done));

  return {
    el: card,
    resolve({ decision, by, byUser, reason }) {
      done = true;
      card.classList.add('resolved');
      controls.remove();
      watchOnly.remove();
      card.querySelector('.deadline')?.remove();
      const verdict = /^approve/.test(decision) ? 'ok' : decision === 'answer' ? 'ok' : 'no';
      status.replaceChildren(h('span', { class: `badge verdict-${verdict}` }, decision), ' by ', whoAnswered(by, byUser), reason ? ` — “${reason}”` : '');
      status.dataset.by = by;
    },
  };
}
