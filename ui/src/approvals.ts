// Which sessions wait for a person to answer a permission request, for the
// task and session lists. A session waiting is RUNNING (it stays RUNNING
// while its agent waits), so the lists read the status of the running
// sessions only, at most maxReads of them, a few at a time; afterwards a
// session's status is read again only when an event says its requests or
// its state changed.
import { api, Event, Session, Status } from "./api";

const maxReads = 50;
const parallel = 4;

export class Approvals {
  private pending = new Map<string, { task: string; n: number }>();
  private timers = new Map<string, number>();
  private closed = false;

  constructor(private taskID: string | null, private onChange: () => void) {}

  /** load reads every running session's status (again). */
  async load(): Promise<void> {
    const q = new URLSearchParams({ state: "RUNNING" });
    if (this.taskID) q.set("task_id", this.taskID);
    const { sessions } = await api<{ sessions: Session[] }>("GET", `/v1/sessions?${q}`);
    const todo = sessions.slice(0, maxReads);
    const fresh = new Map<string, { task: string; n: number }>();
    const worker = async () => {
      for (let s = todo.shift(); s; s = todo.shift()) {
        const n = await this.read(s.id);
        if (n > 0) fresh.set(s.id, { task: s.task_id, n });
      }
    };
    await Promise.all(Array.from({ length: parallel }, worker));
    if (this.closed) return;
    this.pending = fresh;
    this.onChange();
  }

  private async read(id: string): Promise<number> {
    try {
      const st = await api<Status>("GET", `/v1/sessions/${encodeURIComponent(id)}/status`);
      return st.state === "RUNNING" ? st.pending_permissions ?? 0 : 0;
    } catch {
      return 0; // gone
    }
  }

  /** onEvent reads a session's status again after a change of its
   * requests or state (events close together share one read). */
  onEvent(ev: Event): void {
    if (!ev.session_id || !(ev.type.startsWith("session.permission.") || ev.type === "session.state_changed")) return;
    const id = ev.session_id, task = ev.task_id;
    if (this.timers.has(id)) return;
    this.timers.set(id, window.setTimeout(async () => {
      const n = await this.read(id);
      this.timers.delete(id);
      if (this.closed) return;
      if (n > 0) this.pending.set(id, { task, n }); else this.pending.delete(id);
      this.onChange();
    }, 150));
  }

  /** count is how many requests of a session wait. */
  count(sessionID: string): number { return this.pending.get(sessionID)?.n ?? 0; }

  /** taskCount is how many requests of a task's sessions wait. */
  taskCount(taskID: string): number {
    let n = 0;
    for (const p of this.pending.values()) if (p.task === taskID) n += p.n;
    return n;
  }

  /** total is how many requests wait in all. */
  total(): number {
    let n = 0;
    for (const p of this.pending.values()) n += p.n;
    return n;
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers.values()) window.clearTimeout(t);
  }
}
