// The terminal panel: xterm.js over paddock.terminal.v1. It keeps the epoch
// and stream offset of what its screen shows, so a reconnect asks only for
// the bytes it missed; it reconnects by itself with backoff. Its element's
// data-connection says whether the screen is live (attached, reconnecting,
// taken-over); the style dims a screen that is not.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { token, wsURL } from "./api";
import { h } from "./dom";

const subprotocol = "paddock.terminal.v1";
const ackEvery = 64 * 1024;
const maxBacklog = 1 << 20; // received bytes xterm.js may still have to parse
const maxEarlyInput = 64 * 1024; // typed while connecting, sent once connected

export class TerminalPanel {
  readonly el: HTMLElement;
  private term: Terminal;
  private fit = new FitAddon();
  private ws: WebSocket | null = null;
  private epoch = "";
  private offset = -1; // stream position of the screen; -1: nothing yet
  private acked = 0; // the offset last acked
  private parsed = 0; // the offset xterm.js has parsed
  private delay = 250;
  private timer = 0;
  private closed = false;
  private everAttached = false;
  private reconnecting = false;
  private shown = false; // the first output is on the screen
  private early: Uint8Array<ArrayBuffer>[] = []; // input typed while connecting
  private earlyBytes = 0;
  private notice: HTMLElement;
  private screen: HTMLElement;
  private observer: ResizeObserver;
  private enc = new TextEncoder();

  /** A readOnly terminal (a command the agent runs) is watched, not typed
   * into: it sends no input and cannot be reset. */
  constructor(private sessionID: string, private name = "shell", private readOnly = false) {
    this.notice = h("p", { class: "term-notice", "aria-live": "polite" });
    this.screen = h("div", { class: "term-screen" });
    const reset = readOnly ? null : h("button", { type: "button", onclick: () => this.reset() }, "Reset terminal");
    // The first shell is "Terminal"; others carry their name.
    const label = name === "shell" ? "Terminal" : `Terminal ${name}`;
    this.el = h("section", { class: "terminal", role: "region", "aria-label": label },
      h("div", { class: "term-bar" }, h("span", { class: "term-name" }, name),
        readOnly ? h("span", { class: "badge read-only", title: "The agent runs this command; people watch it" }, "read-only") : null,
        this.notice, reset),
      this.screen);
    if (readOnly) this.el.dataset.readOnly = "true";
    this.term = new Terminal({ convertEol: false, cursorBlink: !readOnly, disableStdin: readOnly, scrollback: 5000, fontSize: 13 });
    this.term.loadAddon(this.fit);
    this.term.onData((d) => this.input(this.enc.encode(d)));
    this.term.onBinary((d) => this.input(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)));
    this.term.onResize(({ cols, rows }) => this.sendJSON({ type: "resize", cols, rows }));
    this.observer = new ResizeObserver(() => this.fitNow());
  }

  /** start opens the screen (the element must be in the document) and connects. */
  start(): void {
    this.term.open(this.screen);
    this.fitNow();
    this.observer.observe(this.screen);
    this.connect();
  }

  private fitNow(): void {
    try { this.fit.fit(); } catch { /* not laid out yet */ }
  }

  private setNotice(text: string, ...extra: HTMLElement[]): void {
    this.notice.replaceChildren(text, ...extra);
  }

  private connect(): void {
    if (this.closed) return;
    const q = new URLSearchParams({ name: this.name, cols: String(this.term.cols), rows: String(this.term.rows) });
    const ws = new WebSocket(wsURL(`/v1/sessions/${encodeURIComponent(this.sessionID)}/terminal?${q}`), subprotocol);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    let attached = false;
    let takenOver = false;
    ws.onopen = () => {
      const hello: Record<string, unknown> = { type: "hello", cols: this.term.cols, rows: this.term.rows, token: token() };
      if (this.epoch && this.offset >= 0) {
        hello.epoch = this.epoch;
        hello.offset = this.offset;
      }
      ws.send(JSON.stringify(hello));
      for (const f of this.early) ws.send(f);
      this.early = [];
      this.earlyBytes = 0;
    };
    ws.onmessage = (m) => {
      if (typeof m.data === "string") {
        const msg = JSON.parse(m.data);
        switch (msg.type) {
          case "attached":
            attached = true;
            this.delay = 250;
            if (msg.epoch !== this.epoch) { this.offset = -1; this.acked = 0; this.parsed = 0; }
            this.epoch = msg.epoch;
            // A new shell that has printed nothing yet (its rc files still
            // run) says so until its first output.
            this.setNotice(this.reconnecting ? "Session resumed" : msg.notice ?? (msg.offset === 0 && this.offset < 0 ? "Starting the shell…" : ""));
            this.el.dataset.output = msg.offset === 0 && this.offset < 0 ? "none" : "some";
            this.reconnecting = false;
            this.everAttached = true;
            this.el.dataset.pid = String(msg.pid);
            this.el.dataset.connection = "attached";
            break;
          case "reset":
            // A new shell: its stream starts again at 0 on a clean screen.
            this.term.reset();
            this.epoch = msg.epoch;
            this.offset = -1;
            this.acked = 0;
            this.parsed = 0;
            if (msg.pid) this.el.dataset.pid = String(msg.pid);
            break;
          case "exited":
            this.setNotice(`${this.readOnly ? "Command" : "Shell"} exited (code ${msg.code})`);
            break;
          case "taken_over":
            takenOver = true;
            this.el.dataset.connection = "taken-over";
            this.setNotice("This terminal was opened elsewhere.",
              h("button", { type: "button", onclick: () => { this.setNotice(""); this.connect(); } }, "Take back"));
            break;
          case "error":
            this.setNotice(`Terminal error: ${msg.message}`);
            break;
        }
        return;
      }
      this.output(new Uint8Array(m.data as ArrayBuffer));
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.closed || takenOver || e.code === 4001) return;
      if (!attached) this.delay = Math.min(this.delay * 2, 5000);
      this.reconnecting = this.everAttached;
      this.el.dataset.connection = "reconnecting";
      this.setNotice("Reconnecting…");
      this.timer = window.setTimeout(() => this.connect(), this.delay);
    };
  }

  private output(b: Uint8Array): void {
    if (b.length === 0) return;
    if (b[0] === 0x02) {
      this.term.write(b.subarray(1));
      return;
    }
    if (b[0] !== 0x01 || b.length < 9) return;
    const off = Number(new DataView(b.buffer, b.byteOffset, b.byteLength).getBigUint64(1));
    let data = b.subarray(9);
    if (this.offset < 0) this.parsed = off; // the first frame: the screen starts here
    if (this.el.dataset.output === "none") {
      this.el.dataset.output = "some";
      if (this.notice.textContent === "Starting the shell…") this.setNotice("");
    }
    if (this.offset >= 0 && off < this.offset) {
      data = data.subarray(Math.min(data.length, this.offset - off)); // already on screen
    }
    const end = off + b.length - 9;
    if (end > this.offset) this.offset = end;
    if (data.length > 0) {
      const epoch = this.epoch;
      this.term.write(data, () => {
        if (!this.shown) {
          // A User Timing mark (the benchmark reads it): the screen is
          // drawn in the next frame.
          this.shown = true;
          requestAnimationFrame(() => performance.mark("paddock:terminal-ready"));
        }
        if (epoch === this.epoch && end > this.parsed) this.parsed = end;
        this.ack();
      });
    }
    this.ack();
  }

  /** ack gives the server credit for more output (its window runs ahead of
   * the acked offset). Received bytes are acked while xterm.js has at most
   * maxBacklog of them still to parse, so a fast stream is not held to one
   * window per frame, and a screen that falls behind holds the server back.
   * Acks go once per ackEvery bytes, and when the screen has caught up. */
  private ack(): void {
    if (this.offset < 0) return;
    const to = Math.min(this.offset, this.parsed + maxBacklog);
    if (to <= this.acked) return;
    if (to - this.acked >= ackEvery || this.parsed >= this.offset) {
      this.acked = to;
      this.sendJSON({ type: "ack", offset: to });
    }
  }

  /** input sends typed bytes. While the connection is being opened they
   * wait for it (at most maxEarlyInput); with no connection they are dropped. */
  private input(b: Uint8Array): void {
    if (!this.ws || this.readOnly) return;
    const f = new Uint8Array(b.length + 1);
    f[0] = 0x00;
    f.set(b, 1);
    if (this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(f);
    } else if (this.ws.readyState === WebSocket.CONNECTING && this.earlyBytes + b.length <= maxEarlyInput) {
      this.early.push(f);
      this.earlyBytes += b.length;
    }
  }

  private sendJSON(v: unknown): void {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(v));
  }

  private reset(): void {
    if (!window.confirm("Reset the terminal? Its shell is ended and a new one started.")) return;
    this.sendJSON({ type: "reset" });
  }

  focus(): void { this.term.focus(); }

  dispose(): void {
    this.closed = true;
    window.clearTimeout(this.timer);
    this.observer.disconnect();
    this.ws?.close();
    this.term.dispose();
  }
}
