// A session's page, following the resumption design: status header, resume
// banner and error badge, transcript streamed live, prompt box, terminal.
import { api, ApiError, Message, Session, Status } from "./api";
import { badge, h, replace } from "./dom";
import { EventStream } from "./events";
import { navigate } from "./nav";
import { TerminalPanel } from "./terminal";

const autoResumeKey = "paddock.autoResume";

export async function sessionPage(root: HTMLElement, id: string): Promise<() => void> {
  const path = `/v1/sessions/${encodeURIComponent(id)}`;
  let session = await api<Session>("GET", path);
  const header = h("dl", { class: "status" });
  const banner = h("div", { class: "banner", role: "status" });
  const alert = h("div", { class: "alert-slot" });
  const actions = h("div", { class: "actions" });
  const error = h("p", { class: "error", "aria-live": "polite" });
  const transcript = h("ol", { class: "messages", "aria-label": "Messages" });
  const prompt = h("textarea", { id: "prompt", name: "prompt", rows: 3 });
  const send = h("button", { type: "submit" }, "Send");
  const cancel = h("button", { type: "button" }, "Cancel turn");
  const form = h("form", { class: "prompt", "aria-label": "Prompt the agent" },
    h("label", { for: "prompt" }, "Prompt"), prompt, h("div", { class: "row" }, send, cancel));
  const autoResume = h("input", { type: "checkbox", id: "auto-resume", checked: localStorage.getItem(autoResumeKey) === "1" });
  const termSlot = h("div", { class: "term-slot" });
  const messages = new Map<string, HTMLElement>();
  let term: TerminalPanel | null = null;
  let autoResumed = false;

  const act = (fn: () => Promise<unknown>) => async () => {
    error.textContent = "";
    try { await fn(); } catch (err) { error.textContent = err instanceof ApiError ? err.message : String(err); }
    refresh();
  };
  const resume = act(() => api("POST", `${path}/resume`));
  const newSession = act(async () => {
    const s = await api<Session>("POST", `/v1/tasks/${encodeURIComponent(session.task_id)}/sessions`, { agent: session.agent, runtime: session.runtime });
    navigate(`/ui/sessions/${s.id}`);
  });

  function showMessage(m: Message): void {
    const el = h("li", { class: `msg ${m.role}${m.complete ? "" : " streaming"}`, "data-message": m.id },
      h("span", { class: "role" }, m.role), h("div", { class: "text" }, m.text));
    const old = messages.get(m.id);
    if (old) old.replaceWith(el); else transcript.append(el);
    messages.set(m.id, el);
    el.scrollIntoView({ block: "nearest" });
  }

  async function loadStatus(): Promise<void> {
    const [st, s] = await Promise.all([api<Status>("GET", `${path}/status`), api<Session>("GET", path)]);
    session = s;
    let node = "";
    if (s.executor_id) {
      try { node = (await api<{ node?: string }>("GET", `/v1/executors/${encodeURIComponent(s.executor_id)}`)).node ?? ""; } catch { /* gone */ }
    }
    const field = (k: string, v: Node | string) => [h("dt", {}, k), h("dd", {}, v)];
    replace(header, ...field("State", badge(st.state)), ...field("Agent", s.agent), ...field("Runtime", s.runtime),
      ...field("Node", node || "—"), ...field("Executor", st.executor_status ?? "—"));
    if (st.executor_status === "starting" || st.state === "STARTING") header.append(h("span", { class: "spinner", "aria-label": "Starting" }));

    const notResumable = st.resume_reason === "not_resumable";
    replace(banner, st.resume_message ?? "");
    banner.hidden = !st.resume_message;
    const errMsg = st.error_message ?? s.error_message ?? "";
    const failed = st.state === "ERROR" || st.executor_status === "error";
    replace(alert, failed && errMsg
      ? h("div", { class: "error-badge", role: "alert" }, h("span", {}, errMsg), " ", h("button", { type: "button", onclick: resume }, "Retry"))
      : null);
    replace(actions,
      st.needs_resume && st.is_resumable ? h("button", { type: "button", onclick: resume }, "Resume session") : null,
      notResumable ? h("button", { type: "button", onclick: newSession }, "New session") : null,
      h("label", { for: "auto-resume", class: "toggle" }, autoResume, " Auto-resume"));
    if (st.needs_resume && st.is_resumable && autoResume.checked && !autoResumed) {
      autoResumed = true;
      void resume();
    }
    if (st.is_agent_running) autoResumed = false;

    const ready = st.executor_status === "ready";
    termSlot.classList.toggle("disabled", !ready);
    if (ready && !term) {
      term = new TerminalPanel(id);
      replace(termSlot, term.el);
      term.start();
    } else if (!term) {
      replace(termSlot, h("p", { class: "muted" }, st.executor_status === "starting" ? "The terminal opens when the executor is ready…" : "No executor is running; resume the session to open its terminal."));
    }
  }

  let pending = 0;
  function refresh(): void {
    window.clearTimeout(pending);
    pending = window.setTimeout(() => { loadStatus().catch((e) => { error.textContent = String(e.message); }); }, 50);
  }

  autoResume.addEventListener("change", () => localStorage.setItem(autoResumeKey, autoResume.checked ? "1" : "0"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = prompt.value;
    if (!text.trim()) return;
    await act(async () => { await api("POST", `${path}/prompt`, { text }); prompt.value = ""; })();
  });
  prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  cancel.addEventListener("click", act(() => api("POST", `${path}/cancel`)));

  replace(root,
    h("nav", {}, h("a", { href: "/ui/" }, "Tasks"), " / ", h("a", { href: `/ui/tasks/${session.task_id}` }, "Task")),
    h("h1", {}, "Session ", h("code", {}, id.slice(0, 8))),
    header, banner, alert, actions, error,
    h("div", { class: "panes" },
      h("section", { class: "chat", "aria-label": "Conversation" }, transcript, form),
      termSlot));

  // Subscribe first, then read: message events carry whole messages, so
  // applying one twice is harmless and nothing falls between the two.
  const events = new EventStream({ session_id: id }, (ev) => {
    if (ev.type === "session.message.added" || ev.type === "session.message.updated") {
      showMessage(ev.data.message as Message);
    } else {
      refresh();
    }
  }, refresh);
  const { messages: initial } = await api<{ messages: Message[] }>("GET", `${path}/messages`);
  for (const m of initial) if (!messages.has(m.id)) showMessage(m);
  await loadStatus();
  return () => { window.clearTimeout(pending); events.close(); term?.dispose(); };
}
