// The workspace panels of a session's page: a file tree with a viewer, and
// the git status and diff. Both read through the session's agentctl, which
// confines every path to the workspace.
import { api, apiBytes, ApiError, FileEntry, GitStatus } from "./api";
import { h, replace } from "./dom";

const maxView = 1 << 20; // the viewer shows at most the first MiB of a file

function message(err: unknown): string {
  return err instanceof ApiError ? err.message : String(err);
}

/** FilesPanel lists the workspace as a tree; a file opens in the viewer. */
export class FilesPanel {
  readonly el: HTMLElement;
  private tree: HTMLElement;
  private viewerName: HTMLElement;
  private viewer: HTMLElement;
  private loaded = false;

  constructor(private base: string) {
    this.tree = h("ul", { class: "tree", role: "tree", "aria-label": "Workspace files" });
    this.viewerName = h("h3", { class: "viewer-name" }, "No file open");
    this.viewer = h("pre", { class: "viewer", "aria-label": "File viewer", tabindex: 0 });
    this.el = h("section", { class: "files", "aria-label": "Files" },
      h("div", { class: "panel-bar" }, h("button", { type: "button", onclick: () => void this.reload() }, "Refresh files")),
      h("div", { class: "files-body" }, this.tree, h("div", { class: "viewer-pane" }, this.viewerName, this.viewer)));
  }

  /** show loads the tree the first time the panel is shown. */
  show(): void {
    if (!this.loaded) void this.reload();
  }

  async reload(): Promise<void> {
    this.loaded = true;
    await this.fill(this.tree, "");
  }

  private async fill(list: HTMLElement, dir: string): Promise<void> {
    let entries: FileEntry[];
    try {
      ({ entries } = await api<{ entries: FileEntry[] }>("GET", `${this.base}/files?path=${encodeURIComponent(dir)}`));
    } catch (err) {
      replace(list, h("li", { class: "error" }, message(err)));
      return;
    }
    entries.sort((a, b) => Number(b.type === "dir") - Number(a.type === "dir") || a.name.localeCompare(b.name));
    replace(list, ...entries.map((e) => this.item(e)));
    if (entries.length === 0) list.append(h("li", { class: "muted" }, "(empty)"));
  }

  // Each entry is a treeitem button (a directory's says whether it is
  // expanded); a directory's children load when it is first opened.
  private item(e: FileEntry): HTMLElement {
    if (e.type === "dir") {
      const children = h("ul", { role: "group", hidden: true, "aria-label": e.name });
      const toggle = h("button", { type: "button", class: "dir", role: "treeitem", "aria-expanded": "false", "aria-label": e.name }, `${e.name}/`);
      toggle.addEventListener("click", async () => {
        const open = toggle.getAttribute("aria-expanded") !== "true";
        toggle.setAttribute("aria-expanded", String(open));
        children.hidden = !open;
        if (open) await this.fill(children, e.path);
      });
      return h("li", { role: "none" }, toggle, children);
    }
    const open = h("button", { type: "button", class: "file", role: "treeitem", "aria-label": e.name }, e.name);
    open.addEventListener("click", () => void this.open(e));
    return h("li", { role: "none" }, open);
  }

  /** openPath shows a file of the workspace by its path (a tool call's
   * location); line, when given, is named beside it. */
  openPath(path: string, line?: number): Promise<void> {
    this.show();
    return this.open({ path, name: path.split("/").pop() ?? path }, line);
  }

  private async open(e: Pick<FileEntry, "path" | "name">, line?: number): Promise<void> {
    replace(this.viewerName, line ? `${e.path}:${line}` : e.path);
    replace(this.viewer, "Loading…");
    try {
      const b = await apiBytes(`${this.base}/files/content?path=${encodeURIComponent(e.path)}`);
      const head = b.subarray(0, Math.min(b.length, 8192));
      if (head.includes(0)) {
        replace(this.viewer, `Binary file, ${b.length} bytes.`);
        return;
      }
      let text = new TextDecoder().decode(b.subarray(0, maxView));
      if (b.length > maxView) text += `\n… (${b.length - maxView} more bytes not shown)`;
      replace(this.viewer, text);
    } catch (err) {
      replace(this.viewer, h("span", { class: "error" }, message(err)));
    }
  }
}

/** GitPanel shows the workspace's git status and its diff. */
export class GitPanel {
  readonly el: HTMLElement;
  private summary: HTMLElement;
  private changes: HTMLElement;
  private diff: HTMLElement;
  private staged: HTMLInputElement;
  private loaded = false;

  constructor(private base: string) {
    this.summary = h("p", { class: "git-branch" });
    this.changes = h("ul", { class: "changes", "aria-label": "Changed files" });
    this.diff = h("pre", { class: "diff", "aria-label": "Diff", tabindex: 0 });
    this.staged = h("input", { type: "checkbox", id: `git-staged-${Math.random().toString(36).slice(2)}` });
    this.staged.addEventListener("change", () => void this.reload());
    this.el = h("section", { class: "git", "aria-label": "Git" },
      h("div", { class: "panel-bar" },
        h("button", { type: "button", onclick: () => void this.reload() }, "Refresh git"),
        h("label", { for: this.staged.id, class: "toggle" }, this.staged, " Staged changes")),
      this.summary, this.changes, this.diff);
  }

  show(): void {
    if (!this.loaded) void this.reload();
  }

  async reload(): Promise<void> {
    this.loaded = true;
    try {
      const st = await api<GitStatus>("GET", `${this.base}/git/status`);
      if (!st.is_repo) {
        replace(this.summary, "The workspace is not a git repository.");
        replace(this.changes);
        replace(this.diff);
        return;
      }
      const entries = st.entries ?? [];
      replace(this.summary, "Branch ", h("code", {}, st.branch || "(detached)"), ` · ${entries.length} changed`);
      replace(this.changes, ...entries.map((e) => h("li", {}, h("code", { class: "xy" }, e.status), " ", e.path)));
      const { diff } = await api<{ diff: string }>("GET", `${this.base}/git/diff?staged=${this.staged.checked}`);
      replace(this.diff, diff || "No changes.");
    } catch (err) {
      replace(this.summary, h("span", { class: "error" }, message(err)));
    }
  }
}
