// A tiny element builder: h("button", {onclick}, "Send").
type Attrs = Record<string, unknown>;
export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v as EventListener);
    } else if (k === "class") {
      el.className = String(v);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, ...children);
  return el;
}

export function append(el: Element, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c);
  }
}

/** replace empties el and fills it with children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, ...children);
}

/** stateLabel is a state as a person reads it: "WAITING_FOR_INPUT" is
 * "Waiting for input". */
export function stateLabel(state: string | null | undefined): string {
  if (!state) return "—";
  const s = state.replace(/_/g, " ").toLowerCase();
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** badge shows a state as a small coloured label (the raw state is its
 * data-state). */
export function badge(state: string): HTMLElement {
  return h("span", { class: `badge state-${state.toLowerCase()}`, "data-state": state }, stateLabel(state));
}

/** relative says how long ago t was: "just now", "5 min ago", "2 d ago". */
export function relative(t: Date, now = Date.now()): string {
  const s = Math.round((now - t.getTime()) / 1000);
  if (s < 45) return "just now";
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const hrs = Math.round(m / 60);
  if (hrs < 24) return `${hrs} h ago`;
  const d = Math.round(hrs / 24);
  if (d < 30) return `${d} d ago`;
  return t.toLocaleDateString();
}

/** timeEl is a <time>: the time relative to now, the full time in its
 * title (kept current by a timer). */
export function timeEl(t: string | null | undefined): HTMLElement {
  const d = t ? new Date(t) : null;
  if (!d || isNaN(d.getTime())) return h("time", {});
  return h("time", { datetime: d.toISOString(), title: d.toLocaleString(), "data-relative": "" }, relative(d));
}

window.setInterval(() => {
  for (const el of document.querySelectorAll<HTMLTimeElement>("time[data-relative]")) {
    const text = relative(new Date(el.dateTime));
    if (el.textContent !== text) el.textContent = text;
  }
}, 30_000);

export function when(t: string | null | undefined): string {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d.getTime()) ? "" : d.toLocaleString();
}
