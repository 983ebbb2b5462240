// Paddock's web UI: a small router over three pages.
import { h, replace } from "./dom";
import { ApiError } from "./api";
import { tasksPage } from "./tasks";
import { taskPage } from "./task";
import { sessionPage } from "./session";
import { navigate } from "./nav";

/** A page renders into root and returns its cleanup. */
export type Page = (root: HTMLElement) => Promise<(() => void) | void>;

const root = document.getElementById("app") as HTMLElement;
let cleanup: (() => void) | void = undefined;
let generation = 0;

function route(path: string): Page {
  let m = path.match(/^\/ui\/tasks\/([^/]+)\/?$/);
  if (m) { const id = decodeURIComponent(m[1]); return (r) => taskPage(r, id); }
  m = path.match(/^\/ui\/sessions\/([^/]+)\/?$/);
  if (m) { const id = decodeURIComponent(m[1]); return (r) => sessionPage(r, id); }
  return tasksPage;
}

async function render(): Promise<void> {
  const gen = ++generation;
  if (cleanup) cleanup();
  cleanup = undefined;
  const page = h("div", { class: "page" });
  replace(root, page);
  try {
    const c = await route(location.pathname)(page);
    if (gen !== generation) { if (c) c(); return; }
    cleanup = c;
  } catch (err) {
    if (gen !== generation) return;
    const msg = err instanceof ApiError ? `${err.message} (${err.status})` : String(err);
    replace(page, h("p", { class: "error" }, msg), h("p", {}, h("a", { href: "/ui/" }, "Back to tasks")));
  }
}


document.addEventListener("click", (e) => {
  const a = (e.target as Element).closest?.("a");
  if (!a || a.target || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui/")) return;
  e.preventDefault();
  navigate(url.pathname);
});
window.addEventListener("popstate", () => void render());
void render();
