// A subscription to /v1/events that reconnects by itself and resumes from the
// last index it saw, so no event is lost across a reconnect or a failover.
import { Event, token, wsURL } from "./api";

export class EventStream {
  private ws: WebSocket | null = null;
  private last = 0;
  private closed = false;
  private delay = 250;
  private timer = 0;

  constructor(private filter: Record<string, string>, private onEvent: (e: Event) => void, private onReconnect: () => void = () => {}) {
    this.connect();
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
      if (!opened) this.delay = Math.min(this.delay * 2, 5000);
      this.timer = window.setTimeout(() => this.connect(), this.delay);
    };
  }

  close(): void {
    this.closed = true;
    window.clearTimeout(this.timer);
    this.ws?.close();
  }
}
