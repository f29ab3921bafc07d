// The JSON API client: one fetch wrapper that turns `{"error":{code,message}}` into ApiError and
// sends the person to the login form when the relay wants a token.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function toLogin() {
  const next = location.pathname + location.hash;
  location.href = `/login?next=${encodeURIComponent(next)}`;
}

export async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unreachable', `The relay cannot be reached (${e.message}).`);
  }
  if (res.status === 401) {
    toLogin();
    throw new ApiError(401, 'unauthorized', 'Log in first.');
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = data && data.error;
    throw new ApiError(res.status, err?.code ?? `http_${res.status}`, err?.message ?? (text || res.statusText));
  }
  return data;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body ?? {});
export const del = (path) => api('DELETE', path);

/** Answers a pending request through the reference-001 endpoint (the same broker as MCP). */
export function respond(id, action, extra = {}) {
  return post('/api/codex/permission/respond', { id, action, ...extra });
}
