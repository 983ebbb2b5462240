// The HTTP API with the user's token. A 401 asks for the token (once, however
// many requests are waiting) and retries. The token lives in sessionStorage
// only; it never goes into a URL.
import { h } from "./dom";

const tokenKey = "paddock.token";

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

export function token(): string {
  return sessionStorage.getItem(tokenKey) ?? "";
}

let pendingLogin: Promise<void> | null = null;

/** login asks for the token; concurrent callers share one form. */
export function login(failed = false): Promise<void> {
  if (!pendingLogin) {
    pendingLogin = showLogin(failed).finally(() => { pendingLogin = null; });
  }
  return pendingLogin;
}

function showLogin(failed: boolean): Promise<void> {
  return new Promise((resolve) => {
    const input = h("input", { type: "password", id: "login-token", name: "token", autocomplete: "current-password", required: true });
    const form = h("form", { class: "login", "aria-label": "Log in" },
      h("h2", {}, "Log in to Paddock"),
      failed ? h("p", { class: "error" }, "That token was refused; try again.") : null,
      h("label", { for: "login-token" }, "Token"),
      input,
      h("button", { type: "submit" }, "Log in"));
    const dialog = h("div", { class: "overlay", role: "dialog", "aria-modal": "true", "aria-label": "Log in" }, form);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      sessionStorage.setItem(tokenKey, input.value);
      dialog.remove();
      resolve();
    });
    document.body.append(dialog);
    input.focus();
  });
}

/** request sends an API call with the token, asking for it again on a 401. */
async function request(method: string, path: string, body?: unknown): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    const headers: Record<string, string> = {};
    const t = token();
    if (t) headers["Authorization"] = `Bearer ${t}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    if (resp.status === 401 && attempt < 5) {
      if (t) sessionStorage.removeItem(tokenKey);
      await login(t !== "");
      continue;
    }
    if (!resp.ok) {
      const text = await resp.text();
      let err: { code?: string; message?: string } = {};
      try { err = JSON.parse(text)?.error ?? {}; } catch { /* not JSON */ }
      throw new ApiError(resp.status, err.code ?? "error", err.message ?? `${method} ${path}: ${resp.status}`);
    }
    return resp;
  }
}

/** api calls a JSON route. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const text = await (await request(method, path, body)).text();
  return (text ? JSON.parse(text) : {}) as T;
}

/** apiBytes reads a route that answers raw bytes (a workspace file). */
export async function apiBytes(path: string): Promise<Uint8Array> {
  return new Uint8Array(await (await request("GET", path)).arrayBuffer());
}

/** wsURL is the WebSocket address of an API path on this page's node. */
export function wsURL(path: string): string {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}${path}`;
}

export interface Task {
  id: string; title: string; state: string;
  workspace: { path?: string; branch?: string };
  created_at: string; updated_at: string;
}
export interface Session {
  id: string; task_id: string; state: string; agent: string; runtime: string;
  executor_id?: string; has_resume_token: boolean; error_message?: string;
  created_at: string; updated_at: string; last_activity_at?: string;
}
export interface Status {
  session_id: string; task_id: string; state: string; agent_profile_id: string | null;
  executor_status: string | null; runtime: string | null; is_agent_running: boolean;
  is_resumable: boolean; needs_resume: boolean; resume_reason: string | null;
  resume_message: string | null;
  node: string | null; worktree_path: string | null; worktree_branch: string | null;
  // The agent's work (absent from a node that predates it).
  last_turn_outcome?: string | null;
  pending_permissions?: number; commands?: AgentCommand[] | null; modes?: AgentModes | null;
  // Who controls the session (absent from a node that predates it).
  controller?: Controller | null;
}
/** Controller: the client attached to the agent's terminal (via
 * "terminal") or the `paddock chat` holding the conversation (via "chat"). */
export interface Controller { host: string; pid: number; nonce: string; since: string; via: string }
export interface Message {
  id: string; role: string; text: string; complete: boolean; created_at: string; updated_at: string;
  tool_call?: ToolCall | null; plan?: Plan | null;
}
export interface ToolLocation { path: string; line?: number | null }
export interface ToolContent {
  type: string; text?: string; path?: string; old_text?: string | null; new_text?: string; terminal?: string;
}
export interface ToolCall {
  id: string; title: string; kind: string; status: string;
  locations: ToolLocation[] | null; content: ToolContent[] | null; raw_input?: unknown; raw_output?: unknown;
}
export interface PlanEntry { content: string; priority: string; status: string }
export interface Plan { entries: PlanEntry[] | null }
export interface PermissionOption { option_id: string; name: string; kind: string }
export interface Permission {
  id: string; session_id: string; tool_call_id: string; title: string; kind: string;
  options: PermissionOption[] | null; state: string; option_id: string; answered_by: string;
  created_at: string; answered_at: string | null;
}
export interface AgentCommand { name: string; description: string; input_hint?: string }
export interface AgentMode { id: string; name: string; description?: string }
export interface AgentModes { current_mode_id: string; available: AgentMode[] | null }
export interface TerminalInfo { name: string; command: string[] | null; owner: string; running: boolean; exit_code: number | null; read_only: boolean }
export interface Event { type: string; session_id: string; task_id: string; index: number; data: Record<string, any> }
export interface Agent { name: string; protocol: string; supports_session_resume?: boolean }
export interface FileEntry { name: string; path: string; type: string; size: number; mode: string; mod_time: string }
export interface GitStatus { is_repo: boolean; branch: string; entries: { path: string; status: string }[] | null }
