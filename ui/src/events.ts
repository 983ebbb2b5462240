// A subscription to /v1/events that reconnects by itself and resumes from the
// last index it saw, so no event is lost across a reconnect or a failover.
import { Event, token, wsURL } from "./api";

// The page's connection to the server, as the header's indicator shows it:
// down while any stream of the page is (re)connecting after it was open or
// failed to open. Pages hear changes as a "paddock:connection" event.
const streams = new Map<EventStream, boolean>();
let shownUp: boolean | null = null;

/** connected is whether every event stream of the page is open. */
export function connected(): boolean {
  for (const up of streams.values()) if (!up) return false;
  return true;
}

function report(): void {
  const up = connected();
  const el = document.getElementById("connection");
  if (el) {
    const text = up ? "Connected" : "Reconnecting…";
    if (el.textContent !== text) {
      el.textContent = text;
      el.setAttribute("aria-label", text);
      el.dataset.state = up ? "connected" : "reconnecting";
    }
  }
  if (up !== shownUp) {
    shownUp = up;
    window.dispatchEvent(new CustomEvent("paddock:connection", { detail: { connected: up } }));
  }
}

export class EventStream {
  private ws: WebSocket | null = null;
  private last = 0;
  private closed = false;
  private delay = 250;
  private timer = 0;

  constructor(private filter: Record<string, string>, private onEvent: (e: Event) => void, private onReconnect: () => void = () => {}) {
    streams.set(this, true);
    this.connect();
  }

  private setUp(up: boolean): void {
    if (this.closed || streams.get(this) === up) return;
    streams.set(this, up);
    report();
  }

  private connect(): void {
    const q = new URLSearchParams(this.filter);
    if (this.last > 0) q.set("since", String(this.last));
    const ws = new WebSocket(wsURL(`/v1/events?${q}`));
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.delay = 250;
      this.setUp(true);
      ws.send(JSON.stringify({ type: "auth", token: token() }));
      if (this.last > 0) this.onReconnect();
    };
    ws.onmessage = (m) => {
      const e = JSON.parse(m.data) as Event;
      if (e.index > this.last) this.last = e.index;
      this.onEvent(e);
    };
    ws.onclose = () => {
      if (this.closed) return;
      this.setUp(false);
      if (!opened) this.delay = Math.min(this.delay * 2, 5000);
      this.timer = window.setTimeout(() => this.connect(), this.delay);
    };
  }

  close(): void {
    this.closed = true;
    streams.delete(this);
    report();
    window.clearTimeout(this.timer);
    this.ws?.close();
  }
}
