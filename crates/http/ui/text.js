// Message text with the little Markdown agents write: ``` fenced blocks ```, `inline code` and
// **bold**, built as DOM nodes (never as HTML), everything else as plain text.

import { h } from './dom.js';

function inline(line) {
  const out = [];
  const re = /`([^`\n]+)`|\*\*([^*\n]+)\*\*/g;
  let last = 0;
  let m;
  while ((m = re.exec(line)) !== null) {
    if (m.index > last) out.push(line.slice(last, m.index));
    out.push(m[1] !== undefined ? h('code', {}, m[1]) : h('strong', {}, m[2]));
    last = re.lastIndex;
  }
  if (last < line.length) out.push(line.slice(last));
  return out;
}

/** The nodes for `text`. */
export function richText(text) {
  const parts = String(text ?? '').split(/^```[^\n]*\n?/m);
  // Even parts are prose, odd ones the insides of fenced blocks.
  return parts.map((part, i) => {
    if (i % 2 === 1) return h('pre', { class: 'code-block' }, h('code', {}, part.replace(/\n$/, '')));
    return inline(part);
  });
}
