// A task's page: its sessions with live state badges, and "New session".
import { Agent, api, ApiError, Session, Task } from "./api";
import { Approvals } from "./approvals";
import { badge, h, replace, timeEl } from "./dom";
import { EventStream } from "./events";
import { navigate } from "./nav";
import { setPendingCount } from "./title";

interface Plugin { name: string; healthy?: boolean }

export async function taskPage(root: HTMLElement, id: string): Promise<() => void> {
  const task = await api<Task>("GET", `/v1/tasks/${encodeURIComponent(id)}`);
  const [{ agents }, { plugins }] = await Promise.all([
    api<{ agents: Agent[] }>("GET", "/v1/agents"),
    api<{ plugins: Plugin[] }>("GET", "/v1/plugins"),
  ]);
  const list = h("ul", { class: "sessions", "aria-label": "Sessions" });
  const error = h("p", { class: "error", "aria-live": "polite" });
  const agent = h("select", { id: "session-agent", name: "agent" }, ...agents.map((a) => h("option", { value: a.name }, a.name)));
  const runtime = h("select", { id: "session-runtime", name: "runtime" }, ...plugins.map((p) => h("option", { value: p.name }, p.name)));
  const form = h("form", { class: "create", "aria-label": "New session" },
    h("label", { for: "session-agent" }, "Agent"), agent,
    h("label", { for: "session-runtime" }, "Runtime"), runtime,
    h("button", { type: "submit" }, "New session"));
  const stateBadge = h("span", {}, badge(task.state));
  // The task's own actions: close or reopen it, delete it (asked first).
  const closeButton = h("button", { type: "button", class: "secondary" }, "Close task");
  const deleteButton = h("button", { type: "button", class: "secondary danger" }, "Delete task");
  const showTask = (t: Task) => {
    replace(stateBadge, badge(t.state));
    closeButton.textContent = t.state === "DONE" ? "Reopen task" : "Close task";
    closeButton.dataset.action = t.state === "DONE" ? "reopen" : "close";
  };
  showTask(task);
  const taskPath = `/v1/tasks/${encodeURIComponent(id)}`;
  const fail = (err: unknown) => { error.textContent = err instanceof ApiError ? err.message : String(err); };
  closeButton.addEventListener("click", async () => {
    error.textContent = "";
    try { await api("POST", `${taskPath}/${closeButton.dataset.action}`); await load(); } catch (err) { fail(err); }
  });
  deleteButton.addEventListener("click", async () => {
    if (!window.confirm(`Delete the task "${task.title}" and all its sessions? This cannot be undone.`)) return;
    error.textContent = "";
    try { await api("DELETE", taskPath); navigate("/ui/"); } catch (err) { fail(err); }
  });
  async function deleteSession(s: Session): Promise<void> {
    if (!window.confirm(`Delete the session ${s.id.slice(0, 8)} (${s.agent})? Its agent is stopped and its conversation removed.`)) return;
    error.textContent = "";
    try { await api("DELETE", `/v1/sessions/${encodeURIComponent(s.id)}`); await load(); } catch (err) { fail(err); }
  }

  // Sessions whose agent waits for a person's answer say so.
  let shown: Session[] = [];
  const approvals = new Approvals(id, () => {
    show();
    setPendingCount(approvals.total());
  });
  function show(): void {
    replace(list, ...shown.map((s) => h("li", { "data-session": s.id },
      h("a", { href: `/ui/sessions/${s.id}` }, `${s.agent} · ${s.runtime}`), " ", badge(s.state),
      approvals.count(s.id) > 0 ? h("span", { class: "badge needs-approval" }, "Needs approval") : null,
      (s as { name?: string }).name ? h("span", { class: "session-name" }, (s as { name?: string }).name!) : null,
      h("code", {}, s.id.slice(0, 8)), timeEl(s.created_at),
      s.state === "COMPLETED" ? null : h("button", { type: "button", class: "secondary danger small", "aria-label": `Delete session ${s.id.slice(0, 8)}`,
        onclick: () => void deleteSession(s) }, "Delete"))));
    if (shown.length === 0) list.append(h("li", { class: "empty" }, "No sessions yet."));
  }

  async function load(): Promise<void> {
    const { sessions } = await api<{ sessions: Session[] }>("GET", `/v1/sessions?task_id=${encodeURIComponent(id)}`);
    sessions.sort((a, b) => b.created_at.localeCompare(a.created_at));
    shown = sessions;
    show();
    showTask(await api<Task>("GET", taskPath));
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      const s = await api<Session>("POST", `/v1/tasks/${encodeURIComponent(id)}/sessions`, { agent: agent.value, runtime: runtime.value });
      navigate(`/ui/sessions/${s.id}`);
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.message : String(err);
    }
  });

  replace(root,
    h("nav", {}, h("a", { href: "/ui/" }, "Tasks")),
    h("h1", {}, task.title, " ", stateBadge),
    h("div", { class: "actions" }, closeButton, deleteButton),
    task.workspace?.path ? h("p", {}, "Workspace ", h("code", {}, task.workspace.path)) : null,
    h("h2", {}, "Sessions"), list, form, error);

  let pending = 0;
  const refresh = () => {
    window.clearTimeout(pending);
    pending = window.setTimeout(() => { load().catch((e) => { error.textContent = String(e.message); }); }, 100);
  };
  const events = new EventStream({ task_id: id }, (ev) => {
    approvals.onEvent(ev);
    if (ev.type === "session.state_changed" || ev.type.startsWith("session.agentctl_")) refresh();
  }, () => { refresh(); void approvals.load().catch(() => {}); });
  await load();
  void approvals.load().catch(() => {});
  return () => { window.clearTimeout(pending); events.close(); approvals.close(); setPendingCount(0); };
}
