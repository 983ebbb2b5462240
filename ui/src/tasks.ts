// The task list: create, open and close tasks.
import { api, ApiError, Task } from "./api";
import { Approvals } from "./approvals";
import { badge, h, replace, timeEl } from "./dom";
import { EventStream } from "./events";
import { setPendingCount } from "./title";

export async function tasksPage(root: HTMLElement): Promise<() => void> {
  const list = h("ul", { class: "tasks", "aria-label": "Tasks" });
  const error = h("p", { class: "error", "aria-live": "polite" });
  const title = h("input", { id: "task-title", name: "title", required: true });
  const path = h("input", { id: "task-path", name: "path", placeholder: "/path/to/repo" });
  const form = h("form", { class: "create", "aria-label": "New task" },
    h("label", { for: "task-title" }, "Title"), title,
    h("label", { for: "task-path" }, "Workspace path"), path,
    h("button", { type: "submit" }, "Create task"));

  // Tasks whose sessions wait for a person's answer say so.
  let shown: Task[] = [];
  const approvals = new Approvals(null, () => {
    show();
    setPendingCount(approvals.total());
  });
  function show(): void {
    replace(list, ...shown.map(row));
    if (shown.length === 0) list.append(h("li", { class: "empty" }, "No tasks yet."));
  }

  async function load(): Promise<void> {
    const { tasks } = await api<{ tasks: Task[] }>("GET", "/v1/tasks");
    tasks.sort((a, b) => b.created_at.localeCompare(a.created_at));
    shown = tasks;
    show();
  }

  function row(t: Task): HTMLElement {
    const close = t.state === "DONE" ? null : h("button", {
      type: "button", class: "secondary", "aria-label": `Close ${t.title}`,
      onclick: async () => {
        try { await api("POST", `/v1/tasks/${t.id}/close`); await load(); } catch (e) { error.textContent = String((e as Error).message); }
      },
    }, "Close");
    return h("li", { "data-task": t.id },
      h("a", { href: `/ui/tasks/${t.id}` }, t.title), " ", badge(t.state),
      approvals.taskCount(t.id) > 0 ? h("span", { class: "badge needs-approval" }, "Needs approval") : null,
      t.workspace?.path ? h("code", {}, t.workspace.path) : null,
      timeEl(t.created_at), close);
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const body: Record<string, unknown> = { title: title.value };
    if (path.value) body.workspace = { path: path.value };
    try {
      await api<Task>("POST", "/v1/tasks", body);
      title.value = "";
      path.value = "";
      await load();
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.message : String(err);
    }
  });

  replace(root, h("h1", {}, "Tasks"), form, error, list);
  await load();
  // Every session's events pass here; only their permission requests and
  // states are looked at (Approvals reads a status per change).
  const events = new EventStream({}, (ev) => approvals.onEvent(ev), () => void approvals.load().catch(() => {}));
  void approvals.load().catch(() => {});
  return () => { events.close(); approvals.close(); setPendingCount(0); };
}
