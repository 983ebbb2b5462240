// The agent's prose rendered as Markdown. Raw HTML in it is text (html:
// false: "<script>" shows as "<script>"), links open in a new tab without
// the opener or a referrer, and images are links to them (the page's CSP
// loads images from this node only, and an agent's reply does not make the
// browser fetch anything by itself).
import MarkdownIt from "markdown-it";

// breaks: a line break the agent wrote is one on the page.
const md = new MarkdownIt({ html: false, linkify: true, typographer: false, breaks: true });

const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  const t = tokens[idx];
  t.attrSet("target", "_blank");
  t.attrSet("rel", "noopener noreferrer");
  return defaultLinkOpen(tokens, idx, options, env, self);
};
md.renderer.rules.image = (tokens, idx, _options, _env, self) => {
  const t = tokens[idx];
  const src = md.utils.escapeHtml(String(t.attrGet("src") ?? ""));
  const alt = md.utils.escapeHtml(self.renderInlineAsText(t.children ?? [], _options, _env) || src);
  return `<a href="${src}" target="_blank" rel="noopener noreferrer">${alt}</a>`;
};

/** markdown renders text into a new element (class "md"). */
export function markdown(text: string): HTMLElement {
  const el = document.createElement("div");
  el.className = "text md";
  // markdown-it escapes every character of the input that HTML would read
  // (html: false) and drops links whose scheme it does not allow
  // (javascript:, vbscript:, file:, most data:).
  el.innerHTML = md.render(text);
  return el;
}
