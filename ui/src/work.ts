// The agent's work in the transcript: tool call cards (kind, title,
// status, the files they touch, diffs, output, terminals), the plan as a
// checklist, thoughts folded away; and the permission requests a person
// answers.
import { Message, Permission, Plan, ToolCall, ToolContent } from "./api";
import { Child, h } from "./dom";
import { diffLines, hunks, lines } from "./diff";

/** What a tool card's links do: open a file or a terminal of the session. */
export interface WorkLinks {
  openFile: (path: string, line?: number) => void;
  openTerminal: (name: string) => void;
  /** relPath is a location's path as the Files panel names it. */
  relPath: (path: string) => string;
}

// Text longer than this is folded (a <details> the reader opens).
const foldLines = 12;
const foldChars = 1500;
// A diff of more lines than this starts folded.
const foldDiffLines = 80;

const statusText: Record<string, string> = {
  pending: "pending", in_progress: "in progress", completed: "completed", failed: "failed",
};

/** folded wraps content in a <details> with summary; open when wanted. */
function folded(summary: string, key: string, open: boolean, ...content: Child[]): HTMLDetailsElement {
  return h("details", { class: "fold", "data-key": key, open }, h("summary", {}, summary), ...content);
}

/** textBlock is text in a <pre>, folded when it is long. */
function textBlock(text: string, key: string, what = "Output"): HTMLElement {
  const n = text.split("\n").length;
  const pre = h("pre", { class: "tool-text" }, text);
  if (n <= foldLines && text.length <= foldChars) return pre;
  return folded(`${what} (${n} lines)`, key, false, pre);
}

/** diffView renders one file's change as a unified diff. */
export function diffView(c: ToolContent, links: WorkLinks, key: string): HTMLElement {
  const path = c.path ?? "";
  const before = c.old_text ?? "";
  const ops = diffLines(lines(before), lines(c.new_text ?? ""));
  const added = ops.filter((o) => o.kind === "add").length;
  const removed = ops.filter((o) => o.kind === "del").length;
  const body = h("div", { class: "udiff", role: "group", "aria-label": `Diff of ${links.relPath(path)}` });
  const hs = hunks(ops);
  if (hs.length === 0) body.append(h("div", { class: "udiff-line hunk" }, "No changes."));
  for (const hk of hs) {
    body.append(h("div", { class: "udiff-line hunk" }, hk.header));
    for (const l of hk.lines) {
      const sign = l.kind === "add" ? "+" : l.kind === "del" ? "-" : " ";
      const label = l.kind === "add" ? "added" : l.kind === "del" ? "removed" : "unchanged";
      body.append(h("div", { class: `udiff-line ${l.kind}`, "data-kind": label, title: label },
        h("span", { class: "sign" }, sign), h("span", { class: "code" }, l.text)));
    }
  }
  const rel = links.relPath(path);
  const summary = `${c.old_text == null ? "New file" : "Changes to"} ${rel}: +${added} −${removed}`;
  const file = h("button", { type: "button", class: "link", onclick: () => links.openFile(path) }, `Open ${rel}`);
  const big = added + removed + hs.length > foldDiffLines;
  return h("div", { class: "tool-diff" },
    folded(summary, key, !big, body),
    h("div", { class: "tool-diff-open" }, file));
}

/** toolCard is a tool call entry. */
export function toolCard(m: Message, tc: ToolCall, links: WorkLinks, perms: Permission[] = []): HTMLElement {
  const status = tc.status || "pending";
  const parts: Child[] = [];
  const locs = tc.locations ?? [];
  if (locs.length > 0) {
    parts.push(h("ul", { class: "tool-locations", "aria-label": "Files" }, ...locs.map((l) => {
      const rel = links.relPath(l.path);
      const name = l.line ? `${rel}:${l.line}` : rel;
      return h("li", {}, h("button", {
        type: "button", class: "link", "aria-label": `Open ${name}`,
        onclick: () => links.openFile(l.path, l.line ?? undefined),
      }, name));
    })));
  }
  (tc.content ?? []).forEach((c, i) => {
    const key = `${tc.id}-${i}`;
    switch (c.type) {
      case "diff":
        parts.push(diffView(c, links, key));
        break;
      case "terminal": {
        const name = c.terminal ?? "";
        parts.push(h("p", { class: "tool-terminal" },
          h("button", { type: "button", onclick: () => links.openTerminal(name) }, `Open terminal ${name}`)));
        break;
      }
      case "text":
        parts.push(textBlock(c.text ?? "", key));
        break;
      default:
        parts.push(h("p", { class: "muted" }, `(${c.type} content)`));
    }
  });
  if (tc.raw_input !== undefined && tc.raw_input !== null) {
    parts.push(folded("Input", `${tc.id}-input`, false, h("pre", { class: "tool-text" }, JSON.stringify(tc.raw_input, null, 2))));
  }
  // The permission requests of the call: waiting (the card near the prompt
  // answers it), or how they ended.
  for (const p of perms) {
    parts.push(p.state === "pending"
      ? h("p", { class: "perm-note pending" }, h("span", { class: "badge needs-approval" }, "Needs approval"), " Waiting for your answer below.")
      : h("p", { class: `perm-note state-${p.state}` }, "Permission ", permissionOutcome(p)));
  }
  const title = tc.title || tc.id;
  return h("div", { class: "tool-card", "data-tool-call": tc.id, "data-status": status, role: "group", "aria-label": `Tool call: ${title}` },
    h("div", { class: "tool-head" },
      h("span", { class: `badge kind kind-${tc.kind || "other"}` }, tc.kind || "other"),
      h("span", { class: "tool-title" }, title),
      h("span", { class: `badge tool-status status-${status}` }, statusText[status] ?? status)),
    ...parts);
}

/** planList is a plan entry: a checklist with each step's status. */
export function planList(p: Plan): HTMLElement {
  const entries = p.entries ?? [];
  const done = entries.filter((e) => e.status === "completed").length;
  const list = h("ul", { class: "plan", "aria-label": "Plan" }, ...entries.map((e) => {
    const box = h("input", { type: "checkbox", disabled: true, checked: e.status === "completed", tabindex: -1 });
    box.indeterminate = e.status === "in_progress";
    return h("li", { "data-status": e.status },
      h("label", {}, box, " ", h("span", { class: "plan-text" }, e.content)),
      e.status === "in_progress" ? h("span", { class: "badge status-in_progress" }, "in progress") : null,
      e.priority && e.priority !== "medium" ? h("span", { class: `badge priority priority-${e.priority}` }, e.priority) : null);
  }));
  return h("div", { class: "plan-box" }, h("p", { class: "plan-head" }, `Plan · ${done} of ${entries.length} done`), list);
}

/** thought is the agent's reasoning, folded. */
export function thought(m: Message): HTMLElement {
  return folded("Thought", `thought-${m.id}`, false, h("div", { class: "text thought-text" }, m.text));
}

/** keepOpen carries the open state of old's <details> over to el's (an
 * entry re-rendered by an update keeps what the reader unfolded). */
export function keepOpen(old: Element, el: Element): void {
  const open = new Map<string, boolean>();
  for (const d of old.querySelectorAll<HTMLDetailsElement>("details[data-key]")) open.set(d.dataset.key!, d.open);
  for (const d of el.querySelectorAll<HTMLDetailsElement>("details[data-key]")) {
    const o = open.get(d.dataset.key!);
    if (o !== undefined) d.open = o;
  }
}

const stateText: Record<string, string> = { answered: "answered", cancelled: "cancelled", timed_out: "timed out" };

/** permissionView is a request: a card with one button per option while it
 * is pending, else one line with its outcome. */
export function permissionView(p: Permission, answer: (p: Permission, optionID: string, buttons: HTMLButtonElement[]) => void): HTMLElement {
  const title = p.title || p.tool_call_id || p.id;
  if (p.state === "pending") {
    const buttons: HTMLButtonElement[] = [];
    for (const o of p.options ?? []) {
      const reject = o.kind.startsWith("reject");
      const b = h("button", { type: "button", class: reject ? "secondary" : "", "data-option": o.option_id }, o.name || o.option_id);
      b.addEventListener("click", () => answer(p, o.option_id, buttons));
      buttons.push(b);
    }
    const titleID = `perm-${p.id}-title`;
    return h("li", { class: "permission pending", "data-permission": p.id, role: "group", "aria-labelledby": titleID },
      h("div", { class: "perm-head" },
        h("span", { class: "badge needs-approval" }, "Needs approval"),
        h("span", { class: `badge kind kind-${p.kind || "other"}` }, p.kind || "other"),
        h("strong", { id: titleID }, title)),
      h("div", { class: "perm-options" }, ...buttons));
  }
  return h("li", { class: `permission ended state-${p.state}`, "data-permission": p.id },
    h("span", { class: `badge kind kind-${p.kind || "other"}` }, p.kind || "other"), " ",
    h("span", {}, title), " — ", permissionOutcome(p));
}

/** permissionOutcome says how a request ended: "answered: Allow once
 * (allow_once) by user", "timed out: Reject (reject_once)", "cancelled". */
export function permissionOutcome(p: Permission): HTMLElement {
  const opt = (p.options ?? []).find((o) => o.option_id === p.option_id);
  const outcome = p.state === "cancelled" ? "cancelled"
    : `${stateText[p.state] ?? p.state}: ${opt ? `${opt.name} (${p.option_id})` : p.option_id}${p.answered_by ? ` by ${p.answered_by}` : ""}`;
  return h("span", { class: "perm-outcome" }, outcome);
}
