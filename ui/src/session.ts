// A session's page, following the resumption design: status header, resume
// banner and error badge, transcript streamed live, prompt box, and the
// workspace (terminals, files, git), disabled while the executor starts.
import { Agent, AgentCommand, AgentModes, api, ApiError, Controller, Event, Message, Permission, Session, Status } from "./api";
import { badge, h, replace, stateLabel, timeEl } from "./dom";
import { connected, EventStream } from "./events";
import { markdown } from "./markdown";
import { navigate } from "./nav";
import { TerminalPanel } from "./terminal";
import { setPendingCount } from "./title";
import { keepOpen, permissionView, planList, thought, toolCard, WorkLinks } from "./work";
import { FilesPanel, GitPanel } from "./workspace";

const autoResumeKey = "paddock.autoResume";
const notResumableText = "This agent cannot resume previous sessions. Create a new session.";
// Resume reasons after which a new session is the way on, and the one after
// which nothing can be resumed or retried (the workspace is gone).
const newSessionReasons = new Set(["not_resumable", "missing_resume_token"]);
const workspaceMissing = "workspace_missing";
// How often the page reads the status while it shows: who controls the
// session (a chat's registration, a terminal's attach) changes with no
// event of its own.
const statusEvery = 5_000;

/** controllerView is the header's Controller field: how and where the
 * session is controlled ("In chat on HOST", "Attached on HOST"), its pid
 * and since in the title; "—" when nobody controls it. */
function controllerView(c: Controller | null | undefined): HTMLElement {
  if (!c) return h("span", {}, "—");
  const where = c.host ? ` on ${c.host}` : "";
  const text = c.via === "chat" ? `In chat${where}` : `Attached${where}`;
  const since = new Date(c.since);
  const title = [c.pid ? `pid ${c.pid}` : "", isNaN(since.getTime()) ? "" : `since ${since.toLocaleString()}`].filter(Boolean).join(", ");
  return h("span", { class: "controller", "data-via": c.via, title }, text);
}

/** A tab of the workspace: a terminal, the files or git. */
interface Tab { name: string; tab: HTMLElement; panel: HTMLElement; show: (focus: boolean) => void; dispose: () => void }

export async function sessionPage(root: HTMLElement, id: string): Promise<() => void> {
  const path = `/v1/sessions/${encodeURIComponent(id)}`;
  // Subscribe first, then read: message events carry whole messages, so
  // applying one twice is harmless and nothing falls between the two. Events
  // that come before the page is built wait for it.
  const early: Event[] = [];
  let onEvent = (ev: Event) => { early.push(ev); };
  let onReconnect = () => {};
  const events = new EventStream({ session_id: id }, (ev) => onEvent(ev), () => onReconnect());
  let session: Session, agents: Agent[], initial: Message[], firstStatus: Status, firstPerms: Permission[] | null;
  try {
    [session, agents, initial, firstStatus, firstPerms] = await Promise.all([
      api<Session>("GET", path),
      api<{ agents: Agent[] }>("GET", "/v1/agents").then((r) => r.agents, () => [] as Agent[]),
      api<{ messages: Message[] }>("GET", `${path}/messages`).then((r) => r.messages),
      api<Status>("GET", `${path}/status`),
      readPermissions(path),
    ]);
  } catch (err) {
    events.close();
    throw err;
  }
  const isPty = agents.find((a) => a.name === session.agent)?.protocol === "pty";
  const header = h("dl", { class: "status" });
  const banner = h("div", { class: "banner", role: "status" });
  const alertText = h("span");
  const retryButton = h("button", { type: "button" }, "Retry");
  const alert = h("div", { class: "error-badge", role: "alert", hidden: true }, alertText, " ", retryButton);
  const resumeButton = h("button", { type: "button", hidden: true }, "Resume session");
  const newSessionButton = h("button", { type: "button", hidden: true }, "New session");
  const stopButton = h("button", { type: "button", class: "secondary", hidden: true }, "Stop session");
  const deleteButton = h("button", { type: "button", class: "secondary danger" }, "Delete session");
  // Why a control cannot act now (its title says it too).
  const resumeWhy = h("span", { id: "resume-why", class: "muted why", hidden: true });
  const promptWhy = h("span", { id: "prompt-why", class: "muted why", hidden: true });
  const error = h("p", { class: "error", "aria-live": "polite" });
  const transcript = h("ol", { class: "messages", "aria-label": "Messages" });
  const prompt = h("textarea", { id: "prompt", name: "prompt", rows: 3, "aria-autocomplete": "list", "aria-controls": "prompt-commands" });
  const send = h("button", { type: "submit" }, "Send");
  const cancel = h("button", { type: "button" }, "Cancel turn");
  // The agent's slash commands, offered while the prompt is "/WORD", and its
  // modes (a select that switches them).
  const commandList = h("ul", { id: "prompt-commands", class: "commands", role: "listbox", "aria-label": "Commands", hidden: true });
  const modeSelect = h("select", { id: "mode", name: "mode" });
  const modeBox = h("span", { class: "mode", hidden: true }, h("label", { for: "mode" }, "Mode"), " ", modeSelect);
  const form = h("form", { class: "prompt", "aria-label": "Prompt the agent" },
    h("label", { for: "prompt" }, "Prompt"), prompt, commandList, h("div", { class: "row" }, send, cancel, modeBox), promptWhy);
  // The agent's permission requests: pending ones as cards with the
  // agent's options, ended ones as a line with the outcome.
  const permList = h("ol", { class: "permissions", "aria-label": "Permission requests", hidden: true });
  const approvalBadge = h("span", { class: "badge needs-approval", hidden: true }, "Needs approval");
  const perms = new Map<string, Permission>();
  let permsKnown = firstPerms !== null;
  let commands: AgentCommand[] = [];
  // The workspace's directory as the agent names it (absolute): a tool
  // call's paths are shown and opened relative to it.
  let workspaceRoot = firstStatus.worktree_path ?? "";
  let rootOf = "";
  const entries = new Map<string, Message>();
  const autoResume = h("input", { type: "checkbox", id: "auto-resume", checked: localStorage.getItem(autoResumeKey) === "1" });
  const messages = new Map<string, HTMLElement>();
  let autoResumed = false;

  // The workspace: tabs over terminals, files and git. It is inert (and says
  // why) until the executor is ready; terminals connect on first show.
  const tablist = h("div", { class: "tabs", role: "tablist", "aria-label": "Workspace" });
  const panels = h("div", { class: "tab-panels" });
  const placeholder = h("p", { class: "muted workspace-note" });
  const workspace = h("section", { class: "workspace", "aria-label": "Workspace" }, tablist, placeholder, panels);
  const tabs: Tab[] = [];
  let active = "";
  let ready = false;
  const shellsKey = `paddock.shells.${id}`;
  const extraShells: string[] = JSON.parse(sessionStorage.getItem(shellsKey) ?? "[]");

  function addTab(name: string, label: string, panel: HTMLElement, show: (focus: boolean) => void, dispose = () => {}): void {
    const tabID = `tab-${name}`;
    const panelID = `panel-${name}`;
    const tab = h("button", { type: "button", role: "tab", id: tabID, "aria-controls": panelID, "aria-selected": "false", tabindex: -1 }, label);
    const wrap = h("div", { role: "tabpanel", id: panelID, "aria-labelledby": tabID, hidden: true }, panel);
    tab.addEventListener("click", () => select(name, true));
    tab.addEventListener("keydown", (e) => {
      const i = tabs.findIndex((t) => t.name === name);
      const next = e.key === "ArrowRight" ? i + 1 : e.key === "ArrowLeft" ? i - 1 : -2;
      if (next === -2) return;
      const t = tabs[(next + tabs.length) % tabs.length];
      select(t.name, false);
      t.tab.focus();
    });
    tablist.insertBefore(tab, newShell);
    panels.append(wrap);
    tabs.push({ name, tab, panel: wrap, show, dispose });
  }

  /** select shows a tab; focus moves into it only when the user chose it
   * (a tab shown again when the executor comes back takes no focus). */
  function select(name: string, focus: boolean): void {
    active = name;
    for (const t of tabs) {
      const on = t.name === name;
      t.tab.setAttribute("aria-selected", String(on));
      t.tab.tabIndex = on ? 0 : -1;
      t.panel.hidden = !on;
      if (on && ready) t.show(focus);
    }
  }

  function terminalTab(name: string, label: string, readOnly = false): void {
    let term: TerminalPanel | null = null;
    const slot = h("div", { class: "term-slot" });
    addTab(name, label, slot, (focus) => {
      if (!term) {
        term = new TerminalPanel(id, name, readOnly);
        replace(slot, term.el);
        term.start();
      }
      if (focus) term.focus();
    }, () => term?.dispose());
  }

  const newShell = h("button", { type: "button", class: "new-shell", onclick: () => {
    let n = 2;
    while (tabs.some((t) => t.name === `shell-${n}`)) n++;
    const name = `shell-${n}`;
    extraShells.push(name);
    sessionStorage.setItem(shellsKey, JSON.stringify(extraShells));
    terminalTab(name, name);
    select(name, true);
  } }, "New shell");
  tablist.append(newShell);
  terminalTab("shell", "Shell");
  if (isPty) terminalTab("agent", "Agent");
  for (const name of extraShells) terminalTab(name, name);
  const files = new FilesPanel(path);
  const git = new GitPanel(path);
  addTab("files", "Files", files.el, () => files.show());
  addTab("git", "Git", git.el, () => git.show());

  function setReady(on: boolean, why: string): void {
    workspace.inert = !on;
    workspace.setAttribute("aria-disabled", String(!on));
    workspace.classList.toggle("disabled", !on);
    replace(placeholder, why);
    placeholder.hidden = on;
    if (on && !ready) {
      ready = true;
      // A pty agent's session opens on the agent's own terminal.
      select(active || (isPty ? "agent" : "shell"), false);
    }
    ready = on;
  }

  const act = (fn: () => Promise<unknown>) => async () => {
    error.textContent = "";
    try { await fn(); } catch (err) { error.textContent = err instanceof ApiError ? err.message : String(err); }
    refresh();
  };
  const resume = act(() => api("POST", `${path}/resume`));
  const stop = act(() => api("POST", `${path}/stop`));
  retryButton.addEventListener("click", resume);
  resumeButton.addEventListener("click", resume);
  stopButton.addEventListener("click", stop);
  const newSession = act(async () => {
    const s = await api<Session>("POST", `/v1/tasks/${encodeURIComponent(session.task_id)}/sessions`, { agent: session.agent, runtime: session.runtime });
    navigate(`/ui/sessions/${s.id}`);
  });
  newSessionButton.addEventListener("click", newSession);
  deleteButton.addEventListener("click", async () => {
    if (!window.confirm(`Delete the session ${id.slice(0, 8)}? Its agent is stopped and its conversation removed.`)) return;
    error.textContent = "";
    try {
      await api("DELETE", path);
      navigate(`/ui/tasks/${session.task_id}`);
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.message : String(err);
    }
  });

  // Links out of the transcript: a tool call's files open in the Files
  // panel, its terminal (a command the agent runs, read-only) in a tab.
  const links: WorkLinks = {
    relPath,
    openFile: (p, line) => {
      select("files", true);
      void files.openPath(relPath(p), line);
    },
    openTerminal: (name) => {
      if (!name) return;
      if (!tabs.some((t) => t.name === name)) terminalTab(name, name, name.startsWith("cmd-"));
      select(name, true);
    },
  };

  /** relPath is a path of the agent's (absolute, in its workspace) as the
   * file API names it: relative to the workspace. */
  function relPath(p: string): string {
    const root = workspaceRoot.replace(/\/+$/, "");
    if (root && p.startsWith(root + "/")) return p.slice(root.length + 1);
    if (root && p === root) return "";
    return p;
  }

  function messageBody(m: Message): (Node | null)[] {
    switch (m.role) {
      case "tool":
        if (m.tool_call) return [toolCard(m, m.tool_call, links, toolPerms(m.tool_call.id))];
        break;
      case "plan":
        if (m.plan) return [planList(m.plan)];
        break;
      case "thought":
        return [thought(m)];
      case "agent":
        return [h("span", { class: "role" }, m.role), markdown(m.text)];
    }
    return [h("span", { class: "role" }, m.role), h("div", { class: "text" }, m.text)];
  }

  /** learnWorkspace reads the directory of the session's executor once per
   * executor; tool calls already shown are shown again with it. */
  async function learnWorkspace(executorID: string | undefined): Promise<void> {
    if (!executorID || executorID === rootOf) return;
    rootOf = executorID;
    let root = "";
    try {
      root = (await api<{ workspace_path?: string }>("GET", `/v1/executors/${encodeURIComponent(executorID)}`)).workspace_path ?? "";
    } catch { /* gone: keep what is known */ }
    if (!root || root === workspaceRoot) return;
    workspaceRoot = root;
    for (const m of entries.values()) if (m.role === "tool") showMessage(m, false);
  }

  function toolPerms(toolCallID: string): Permission[] {
    return sortedPerms().filter((p) => p.tool_call_id === toolCallID);
  }

  function sortedPerms(): Permission[] {
    return [...perms.values()].sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  /** toolShown is whether a tool call has its card in the transcript. */
  function toolShown(toolCallID: string): boolean {
    for (const m of entries.values()) if (m.tool_call?.id === toolCallID) return true;
    return false;
  }

  // The transcript follows its end while the reader is there; it scrolls
  // itself only (never the page).
  function atEnd(el: HTMLElement): boolean {
    return el.scrollHeight - el.scrollTop - el.clientHeight < 48;
  }

  function showMessage(m: Message, follow = true): void {
    entries.set(m.id, m);
    const end = atEnd(transcript);
    const el = h("li", { class: `msg ${m.role}${m.complete ? "" : " streaming"}`, "data-message": m.id, "data-role": m.role },
      h("span", { class: "msg-time" }, timeEl(m.created_at)), ...messageBody(m));
    const old = messages.get(m.id);
    if (old) {
      keepOpen(old, el);
      old.replaceWith(el);
    } else {
      transcript.append(el);
    }
    messages.set(m.id, el);
    markTurns();
    if (follow && end) transcript.scrollTop = transcript.scrollHeight;
    if (!old && m.tool_call && [...perms.values()].some((p) => p.tool_call_id === m.tool_call!.id)) showPermissions();
  }

  function showPermissions(): void {
    const all = sortedPerms();
    // Pending requests are cards here; an ended one is a line on its tool
    // call's card, or here when the transcript has no such card.
    const here = all.filter((p) => p.state === "pending" || !toolShown(p.tool_call_id));
    // A card being answered keeps its element (and the focus on it).
    const views = here.map((p) => {
      const old = permList.querySelector<HTMLElement>(`[data-permission="${CSS.escape(p.id)}"]`);
      if (old && old.dataset.state === p.state) return old;
      const el = permissionView(p, answer);
      el.dataset.state = p.state;
      return el;
    });
    replace(permList, ...views);
    permList.hidden = here.length === 0;
    const pending = all.filter((p) => p.state === "pending").length;
    approvalBadge.hidden = pending === 0;
    approvalBadge.textContent = pending > 1 ? `Needs approval (${pending})` : "Needs approval";
    setPendingCount(pending);
    permList.scrollTop = permList.scrollHeight;
  }

  /** showToolsOf shows again the tool cards of these tool calls. */
  function showToolsOf(ids: Set<string>): void {
    for (const m of entries.values()) if (m.tool_call && ids.has(m.tool_call.id)) showMessage(m, false);
  }

  function upsertPermission(p: Permission): void {
    const old = perms.get(p.id);
    // A request never goes back to pending: an older copy does not win.
    if (old && old.state !== "pending" && p.state === "pending") return;
    perms.set(p.id, p);
    showPermissions();
    showToolsOf(new Set([p.tool_call_id]));
  }

  async function loadPermissions(): Promise<void> {
    const list = await readPermissions(path);
    if (list === null) return;
    permsKnown = true;
    const ids = new Set([...perms.values(), ...list].map((p) => p.tool_call_id));
    perms.clear();
    for (const p of list) perms.set(p.id, p);
    showPermissions();
    showToolsOf(ids);
  }

  function answer(p: Permission, optionID: string, buttons: HTMLButtonElement[]): void {
    for (const b of buttons) b.disabled = true;
    error.textContent = "";
    api<Permission>("POST", `${path}/permissions/${encodeURIComponent(p.id)}`, { option_id: optionID })
      .then((answered) => upsertPermission(answered))
      .catch((err) => {
        error.textContent = err instanceof ApiError ? err.message : String(err);
        for (const b of buttons) b.disabled = false;
        // Answered elsewhere meanwhile (409), or gone: show what is so.
        void loadPermissions().catch(() => {});
      });
  }

  // The commands offered while the prompt is "/WORD".
  let activeCommand = -1;
  function matchingCommands(): AgentCommand[] {
    const m = prompt.value.match(/^\/(\S*)$/);
    if (!m || commands.length === 0) return [];
    return commands.filter((c) => c.name.startsWith(m[1]));
  }
  function showCommands(): void {
    const list = matchingCommands();
    if (activeCommand >= list.length) activeCommand = list.length - 1;
    replace(commandList, ...list.map((c, i) => {
      const li = h("li", { role: "option", id: `prompt-command-${i}`, "aria-selected": String(i === activeCommand), "data-command": c.name },
        h("code", {}, `/${c.name}`), c.input_hint ? h("span", { class: "muted" }, ` ${c.input_hint}`) : null,
        c.description ? h("span", { class: "muted" }, ` — ${c.description}`) : null);
      li.addEventListener("mousedown", (e) => { e.preventDefault(); pickCommand(c); });
      return li;
    }));
    commandList.hidden = list.length === 0;
    if (activeCommand >= 0 && list.length > 0) prompt.setAttribute("aria-activedescendant", `prompt-command-${activeCommand}`);
    else prompt.removeAttribute("aria-activedescendant");
  }
  function pickCommand(c: AgentCommand): void {
    prompt.value = `/${c.name} `;
    activeCommand = -1;
    showCommands();
    prompt.focus();
    prompt.setSelectionRange(prompt.value.length, prompt.value.length);
  }

  // The modes: the select follows the status unless it is being changed.
  let modesKey = "";
  let modeBusy = false;
  function showModes(modes: AgentModes | null | undefined): void {
    const avail = modes?.available ?? [];
    modeBox.hidden = avail.length === 0;
    const key = JSON.stringify(modes ?? null);
    if (key === modesKey || modeBusy) return;
    modesKey = key;
    replace(modeSelect, ...avail.map((m) => h("option", { value: m.id, title: m.description ?? "" }, m.name || m.id)));
    if (modes) modeSelect.value = modes.current_mode_id;
  }

  async function loadStatus(known?: [Status, Session]): Promise<void> {
    const [st, s] = known ?? await Promise.all([api<Status>("GET", `${path}/status`), api<Session>("GET", path)]);
    session = s;
    void learnWorkspace(s.executor_id);
    commands = st.commands ?? [];
    if (document.activeElement === prompt) showCommands();
    showModes(st.modes);
    // The list of requests was read before, or events were missed: the
    // status says how many wait; when the list disagrees it is read again.
    const pendingHere = [...perms.values()].filter((p) => p.state === "pending").length;
    if (st.pending_permissions !== undefined && (st.pending_permissions !== pendingHere || !permsKnown)) {
      void loadPermissions().catch(() => {});
    }
    let exError = "";
    if (st.executor_status === "error" && s.executor_id) {
      try { exError = (await api<{ error_message?: string }>("GET", `/v1/executors/${encodeURIComponent(s.executor_id)}`)).error_message ?? ""; } catch { /* gone */ }
    }
    const starting = st.executor_status === "starting" || st.state === "STARTING";
    const field = (k: string, v: Node | string) => [h("dt", {}, k), h("dd", {}, v)];
    replace(header, ...field("State", badge(st.state)), ...field("Agent", s.agent), ...field("Runtime", s.runtime),
      ...field("Node", st.node ?? "—"), ...field("Executor", stateLabel(st.executor_status)),
      ...field("Controller", controllerView(st.controller)),
      ...field("Last activity", timeEl(s.last_activity_at ?? s.updated_at)));
    markStale();
    lastOutcome = st.last_turn_outcome ?? null;
    turnRunning = st.state === "RUNNING";
    markTurns();
    if (starting) header.append(h("span", { class: "spinner", role: "progressbar", "aria-label": "Starting" }));
    header.dataset.state = st.state;
    header.dataset.executor = st.executor_status ?? "";

    const notResumable = st.resume_reason === "not_resumable";
    const noWorkspace = st.resume_reason === workspaceMissing;
    // The banner carries the server's resume_message (said once); a session
    // whose agent cannot resume says so even from a server that gives none.
    const bannerText = st.resume_message || (notResumable ? notResumableText : "");
    if (banner.dataset.key !== bannerText) {
      banner.dataset.key = bannerText;
      replace(banner, bannerText ? h("span", { class: "detail" }, bannerText) : null);
    }
    banner.hidden = !bannerText;
    const errMsg = s.error_message || exError;
    const failed = st.state === "ERROR" || st.executor_status === "error";
    // The controls and live regions stay the same elements across reads (a
    // focused button keeps its focus, a screen reader hears a change once);
    // a read only shows, hides or retexts them.
    alert.hidden = !(failed && errMsg);
    if (alertText.textContent !== errMsg) alertText.textContent = errMsg;
    retryButton.hidden = !st.is_resumable && !noWorkspace;
    resumeButton.hidden = !(st.needs_resume && st.is_resumable) && !noWorkspace;
    // The workspace is gone: nothing to resume into, and the buttons say why.
    const resumeReason = noWorkspace ? (st.resume_message || "The session's workspace is gone.") : "";
    for (const b of [retryButton, resumeButton]) setDisabled(b, resumeReason, resumeWhy);
    showWhy(resumeWhy, resumeReason);
    newSessionButton.hidden = !newSessionReasons.has(st.resume_reason ?? "");
    stopButton.hidden = !st.is_agent_running;
    // Send and Cancel act only when the agent can take them.
    setDisabled(send, sendReason(st), promptWhy);
    setDisabled(cancel, st.state === "RUNNING" && st.is_agent_running ? "" : "No turn is running.", promptWhy);
    showWhy(promptWhy, sendReason(st));
    setDisabled(modeSelect, st.is_agent_running ? "" : "The agent is not running.", null);
    if (st.needs_resume && st.is_resumable && !noWorkspace && autoResume.checked && !autoResumed) {
      autoResumed = true;
      void resume();
    }
    if (st.is_agent_running) autoResumed = false;

    // Terminals and files need the executor; once open, a terminal keeps
    // its screen and reconnects by itself when the executor comes back.
    const ok = st.executor_status === "ready";
    setReady(ok, ok ? "" : starting ? "The executor is starting; the terminals and files open when it is ready…"
      : "No executor is running; resume the session to open its terminals and files.");
  }

  /** sendReason is why a prompt cannot be sent now ("" when it can). */
  function sendReason(st: Status): string {
    switch (st.state) {
      case "WAITING_FOR_INPUT": case "CREATED": case "STARTING":
        return "";
      case "RUNNING":
        return "The agent is working on a turn; wait for it or cancel it.";
      case "COMPLETED":
        return "This session was deleted; start a new session.";
      default:
        return st.resume_message || `The session is ${stateLabel(st.state).toLowerCase()}; its agent is not running.`;
    }
  }

  /** setDisabled disables a control with the reason (its title, and the
   * element "why" that describes it), or enables it. */
  function setDisabled(el: HTMLButtonElement | HTMLSelectElement, reason: string, why: HTMLElement | null): void {
    el.disabled = reason !== "";
    if (reason) {
      el.title = reason;
      if (why) el.setAttribute("aria-describedby", why.id);
    } else {
      el.removeAttribute("title");
      el.removeAttribute("aria-describedby");
    }
  }

  function showWhy(el: HTMLElement, reason: string): void {
    if (el.textContent !== reason) el.textContent = reason;
    el.hidden = reason === "";
  }

  // While the page's connection to the server is down, what the header
  // shows may be out of date: every field is marked stale.
  function markStale(): void {
    const stale = !connected();
    header.classList.toggle("stale", stale);
    header.setAttribute("aria-busy", String(stale));
    for (const dd of header.querySelectorAll("dd")) {
      dd.classList.toggle("stale", stale);
      if (stale) {
        dd.setAttribute("aria-describedby", "connection");
        dd.title = "Out of date: reconnecting to the server";
      } else {
        dd.removeAttribute("aria-describedby");
        dd.removeAttribute("title");
      }
    }
  }
  const onConnection = () => markStale();
  window.addEventListener("paddock:connection", onConnection);

  // How the last turn ended (the status's last_turn_outcome): a cancelled,
  // interrupted or failed turn's messages are marked, and a cancelled one
  // ends with a line saying so (the server writes the line of an
  // interrupted or failed turn itself, which is marked as its end).
  let lastOutcome: string | null = null;
  let turnRunning = false;
  const outcomeOf = new Map<string, string>(); // a turn's first message id → outcome
  const outcomeText: Record<string, string> = { cancelled: "Turn cancelled", interrupted: "Turn interrupted", failed: "Turn failed" };
  function markTurns(): void {
    const turns: HTMLElement[][] = [];
    for (const el of transcript.querySelectorAll<HTMLElement>(":scope > li.msg")) {
      if (el.dataset.role === "user" || turns.length === 0) turns.push([]);
      turns[turns.length - 1].push(el);
    }
    // The outcome is of the last turn that ended: the one before a running turn.
    const ended = turnRunning ? turns.length - 2 : turns.length - 1;
    if (ended >= 0 && lastOutcome && turns[ended][0].dataset.role === "user") outcomeOf.set(turns[ended][0].dataset.message!, lastOutcome);
    for (const m of transcript.querySelectorAll(":scope > li.turn-end-note")) m.remove();
    for (const turn of turns) {
      const outcome = outcomeOf.get(turn[0].dataset.message ?? "");
      const marked = outcome !== undefined && outcome !== "completed";
      for (const el of turn) {
        el.classList.toggle("turn-marked", marked);
        if (marked) el.dataset.turnOutcome = outcome; else delete el.dataset.turnOutcome;
        el.classList.remove("turn-end");
      }
      if (!marked) continue;
      const last = turn[turn.length - 1];
      const said = last.dataset.role === "system" && /^This turn (was interrupted|failed)/.test(last.textContent ?? "");
      if (said) {
        last.classList.add("turn-end");
        last.setAttribute("aria-label", outcomeText[outcome] ?? "Turn ended");
      } else {
        last.after(h("li", { class: "turn-end-note", "data-outcome": outcome, role: "note" }, outcomeText[outcome] ?? `Turn ${outcome}`));
      }
    }
  }

  // refresh reads the status again soon: events that come close together
  // share one read, and a read is never put off by later events.
  let pending = 0;
  function refresh(): void {
    if (pending) return;
    pending = window.setTimeout(() => {
      pending = 0;
      loadStatus().catch((e) => { error.textContent = String(e.message); });
    }, 50);
  }

  // showStarting shows at once that the executor is starting (the status
  // read that follows fills in the rest): the spinner, and the workspace
  // disabled until it is ready.
  function showStarting(): void {
    header.dataset.executor = "starting";
    if (!header.querySelector(".spinner")) header.append(h("span", { class: "spinner", role: "progressbar", "aria-label": "Starting" }));
    setReady(false, "The executor is starting; the terminals and files open when it is ready…");
  }

  autoResume.addEventListener("change", () => localStorage.setItem(autoResumeKey, autoResume.checked ? "1" : "0"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = prompt.value;
    if (!text.trim() || send.disabled) return;
    await act(async () => { await api("POST", `${path}/prompt`, { text }); prompt.value = ""; })();
  });
  prompt.addEventListener("keydown", (e) => {
    const list = commandList.hidden ? [] : matchingCommands();
    if (list.length > 0 && (e.key === "ArrowDown" || e.key === "ArrowUp")) {
      e.preventDefault();
      activeCommand = (activeCommand + (e.key === "ArrowDown" ? 1 : list.length - 1 + (activeCommand < 0 ? 1 : 0))) % list.length;
      showCommands();
      return;
    }
    if (list.length > 0 && (e.key === "Tab" || (e.key === "Enter" && activeCommand >= 0)) && !e.shiftKey) {
      e.preventDefault();
      pickCommand(list[Math.max(0, activeCommand)]);
      return;
    }
    if (e.key === "Escape" && !commandList.hidden) {
      commandList.hidden = true;
      return;
    }
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  prompt.addEventListener("input", () => { activeCommand = -1; showCommands(); });
  prompt.addEventListener("blur", () => { commandList.hidden = true; });
  modeSelect.addEventListener("change", async () => {
    const want = modeSelect.value;
    modeBusy = true;
    error.textContent = "";
    try {
      const modes = await api<AgentModes>("POST", `${path}/mode`, { mode_id: want });
      modeBusy = false;
      modesKey = "";
      showModes(modes);
    } catch (err) {
      modeBusy = false;
      error.textContent = err instanceof ApiError ? err.message : String(err);
      modesKey = "";
      refresh();
    }
  });
  cancel.addEventListener("click", act(() => api("POST", `${path}/cancel`)));

  setReady(false, "Loading…");
  replace(root,
    h("nav", {}, h("a", { href: "/ui/" }, "Tasks"), " / ", h("a", { href: `/ui/tasks/${session.task_id}` }, "Task")),
    h("h1", {}, "Session ", (session as { name?: string }).name ? h("span", { class: "session-name" }, (session as { name?: string }).name!, " ") : null,
      h("code", {}, id.slice(0, 8)), " ", approvalBadge),
    header, banner, alert,
    h("div", { class: "actions" }, resumeButton, newSessionButton, resumeWhy, stopButton, deleteButton,
      h("label", { for: "auto-resume", class: "toggle" }, autoResume, " Auto-resume")),
    error,
    h("div", { class: "panes" },
      h("section", { class: "chat", "aria-label": "Conversation" }, transcript, permList, form),
      workspace));

  onEvent = (ev) => {
    if (ev.type === "session.message.added" || ev.type === "session.message.updated") {
      showMessage(ev.data.message as Message);
    } else if (ev.type === "session.permission.requested" || ev.type === "session.permission.answered") {
      if (ev.data.permission) upsertPermission(ev.data.permission as Permission);
    } else {
      if (ev.type === "session.agentctl_starting" || (ev.type === "session.state_changed" && ev.data.to === "STARTING")) showStarting();
      refresh();
    }
  };
  onReconnect = () => { refresh(); void loadPermissions().catch(() => {}); };
  await learnWorkspace(session.executor_id);
  for (const p of firstPerms ?? []) perms.set(p.id, p);
  for (const m of initial) showMessage(m);
  showPermissions();
  for (const ev of early.splice(0)) onEvent(ev);
  // A User Timing mark (the benchmark reads it): the transcript is shown.
  performance.mark("paddock:transcript-ready");
  await loadStatus([firstStatus, session]);
  const statusTimer = window.setInterval(() => { if (!document.hidden) refresh(); }, statusEvery);
  return () => { window.removeEventListener("paddock:connection", onConnection); window.clearTimeout(pending); window.clearInterval(statusTimer); events.close(); for (const t of tabs) t.dispose(); setPendingCount(0); };
}

/** readPermissions reads a session's permission requests; null from a node
 * that has no such route. */
async function readPermissions(path: string): Promise<Permission[] | null> {
  try {
    return (await api<{ permissions: Permission[] | null }>("GET", `${path}/permissions`)).permissions ?? [];
  } catch (err) {
    if (err instanceof ApiError && (err.status === 404 || err.status === 405)) return null;
    throw err;
  }
}
