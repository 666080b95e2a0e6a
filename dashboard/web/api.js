// The coordinator's HTTP API (dashboard/API.md): JSON fetches and the
// /api/stream WebSocket, reconnecting with backoff.

export async function getJSON(path) {
  const res = await fetch(path, { cache: 'no-store' });
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

// Calls onFrame(obj) for every frame and onState('live' | 'down') on
// (dis)connection; reconnects after 0.5 s, doubling to at most 5 s.
export class Stream {
  constructor(path, { onFrame, onState }) {
    this.path = path;
    this.onFrame = onFrame;
    this.onState = onState;
    this.delay = 500;
    this.ws = null;
    this.connect();
  }

  url() {
    const u = new URL(this.path, location.href);
    u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return u.href;
  }

  connect() {
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch (e) {
      this.retry();
      return;
    }
    this.ws = ws;
    ws.onopen = () => { this.delay = 500; this.onState('live'); };
    ws.onmessage = (ev) => {
      let frame;
      try { frame = JSON.parse(ev.data); } catch { return; }
      this.onFrame(frame);
    };
    ws.onclose = () => { this.ws = null; this.onState('down'); this.retry(); };
    ws.onerror = () => ws.close();
  }

  retry() {
    setTimeout(() => this.connect(), this.delay);
    this.delay = Math.min(this.delay * 2, 5000);
  }

  get open() { return this.ws !== null && this.ws.readyState === WebSocket.OPEN; }
}
