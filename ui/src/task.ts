// A task's page: its sessions with live state badges, and "New session".
import { Agent, api, ApiError, Session, Task } from "./api";
import { Approvals } from "./approvals";
import { badge, h, replace, when } from "./dom";
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
      h("code", {}, s.id.slice(0, 8)), h("time", {}, when(s.created_at)))));
    if (shown.length === 0) list.append(h("li", { class: "empty" }, "No sessions yet."));
  }

  async function load(): Promise<void> {
    const { sessions } = await api<{ sessions: Session[] }>("GET", `/v1/sessions?task_id=${encodeURIComponent(id)}`);
    sessions.sort((a, b) => b.created_at.localeCompare(a.created_at));
    shown = sessions;
    show();
    const t = await api<Task>("GET", `/v1/tasks/${encodeURIComponent(id)}`);
    replace(stateBadge, badge(t.state));
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
