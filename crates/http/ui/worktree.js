// A session's git worktree: its branch, base and the diff against the base (every changed
// file as a coloured diff), from /api/sessions/{id}/worktree; refreshed when a turn ends.

import { get } from './api.js';
import { h } from './dom.js';
import { diffBlock } from './diff.js';

const KIND = { A: 'add', D: 'delete' };

/** The unified patch cut into one chunk per file, keyed by its new path. */
function perFile(patch) {
  const chunks = new Map();
  let path = null;
  let lines = [];
  const flush = () => { if (path !== null) chunks.set(path, lines.join('\n')); };
  for (const line of (patch ?? '').split('\n')) {
    const head = /^diff --git a\/.* b\/(.*)$/.exec(line);
    if (head) {
      flush();
      path = head[1];
      lines = [];
    } else if (path !== null && !/^(index |new file mode|deleted file mode|similarity index|rename (from|to) )/.test(line)) {
      lines.push(line);
    }
  }
  flush();
  return chunks;
}

export function worktreePanel(sessionPath) {
  const title = h('h2', { class: 'worktree-title' }, 'Worktree');
  const summary = h('p', { class: 'worktree-summary' });
  const files = h('div', { class: 'worktree-files', role: 'region', 'aria-label': 'Worktree changes' });
  const root = h('section', { class: 'worktree', hidden: true, 'aria-labelledby': 'worktree-title' }, title, summary, files);
  title.id = 'worktree-title';

  async function refresh() {
    try {
      const d = await get(`${sessionPath}/worktree`);
      root.hidden = false;
      title.textContent = `Worktree: ${d.branch}`;
      const n = d.files.length;
      summary.textContent = `${n === 1 ? '1 file' : `${n} files`} changed since ${d.base} (${d.baseCommit.slice(0, 8)})${d.truncated ? '; the diff is cut short' : ''}.`;
      const chunks = perFile(d.patch);
      files.replaceChildren(...d.files.map((f) => diffBlock(f.path, KIND[f.status[0]] ?? 'update', chunks.get(f.path) ?? '')));
      root.dataset.files = String(n);
    } catch (e) {
      root.hidden = false;
      summary.textContent = e.message;
    }
  }
  return { root, refresh };
}
