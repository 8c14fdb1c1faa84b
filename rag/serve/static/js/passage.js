// The passage dialog: a cited or retrieved chunk's text, title, source and where it sits in its document. A modal
// <dialog>: focus moves to its close button, Escape, the close button or a click beside it closes it, and focus goes
// back to the chunk link that opened it. The text is shown as text nodes, never as HTML, with the reST/Markdown
// decoration that reads as noise in plain text taken out (passageNodes).
import { getJSON } from "./api.js";
import { el, safeLink } from "./dom.js";

const $ = (id) => document.getElementById(id);
let current = null;
let opener = null;  // the element focused when the dialog opened: focus returns there

// A title's underline or overline (reST) or a Markdown setext underline / horizontal rule: ====, ----, ****, ~~~~ ...
const RULE = /^\s*([=\-~*^#+_])\1{2,}\s*$/;
const FENCE = /^\s*(```|~~~)/;
const ATX = /^#{1,6}\s+(.*?)(\s+#+)?\s*$/;  // "## A heading"
// Inline markers, taken off when they wrap a word on both sides: **strong**, *emphasis*, ``literal``, `code`. A lone
// star (2 * 3, *args, a grammar's ("," item)*) or a dunder name (__enter__) is not touched.
const INLINE = [
  /``(?!\s)(.+?)(?<!\s)``/g,
  /(?<![\w*])\*\*(?![\s*])(.+?)(?<![\s*])\*\*(?![\w*])/g,
  /(?<![\w*])\*(?![\s*])([^*]+?)(?<![\s*])\*(?![\w*])/g,
  /(?<![\w`])`(?![\s`])([^`]+?)(?<![\s`])`(?![\w`])/g,
];

function inline(line) {
  return INLINE.reduce((text, pattern) => text.replace(pattern, "$1"), line);
}

// The passage as lines ({text, heading}): decoration lines dropped (an underlined line becomes a heading), inline
// markers stripped; fenced code kept as written (its fences dropped); runs of blank lines cut to one.
export function passageLines(text) {
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (FENCE.test(line)) { fenced = !fenced; continue; }
    if (fenced) { out.push({ text: line }); continue; }
    if (RULE.test(line)) {
      const overline = i + 2 < lines.length && lines[i + 1].trim() && RULE.test(lines[i + 2]);
      const prev = out[out.length - 1];
      if (!overline && prev && prev.text.trim()) prev.heading = true;
      continue;
    }
    const atx = ATX.exec(line);
    out.push(atx ? { text: inline(atx[1]), heading: true } : { text: inline(line) });
  }
  const kept = out.filter((l, i) => l.text.trim() || (i > 0 && out[i - 1].text.trim()));
  while (kept.length && !kept[0].text.trim()) kept.shift();
  while (kept.length && !kept[kept.length - 1].text.trim()) kept.pop();
  return kept;
}

// The lines as DOM nodes for a white-space: pre-wrap box: headings in bold, the rest as plain text nodes.
export function passageNodes(text) {
  const nodes = [];
  let plain = [];
  const flush = () => { if (plain.length) nodes.push(document.createTextNode(plain.join("\n") + "\n")); plain = []; };
  for (const line of passageLines(text)) {
    if (!line.heading) { plain.push(line.text); continue; }
    flush();
    nodes.push(el("strong", { class: "passage-heading" }, line.text.trim()), document.createTextNode("\n"));
  }
  flush();
  return nodes;
}

export async function openPassage(id) {
  const dialog = $("passage");
  if (!dialog.open) {
    opener = document.activeElement;
    dialog.showModal();
  }
  $("passage-title").textContent = id;
  $("passage-where").textContent = "loading…";
  $("passage-text").replaceChildren();
  try {
    const p = await getJSON(`/api/chunk?${new URLSearchParams({ id })}`);
    current = p;
    $("passage-title").textContent = p.title || p.chunk_id;
    $("passage-where").replaceChildren(
      el("div", {}, el("code", {}, p.chunk_id)),
      el("div", {}, "source: ", safeLink(p.url, p.source || p.url || "—")),
      el("div", {}, p.doc_id ? `part ${p.part} of ${p.parts} of ${p.doc_id}` : `part ${p.part} of ${p.parts}`));
    $("passage-text").replaceChildren(...passageNodes(p.text));
    $("passage-prev").disabled = !p.previous;
    $("passage-next").disabled = !p.next;
  } catch (e) {
    current = null;
    $("passage-where").textContent = e.message;
    $("passage-prev").disabled = $("passage-next").disabled = true;
  }
}

export function closePassage() {
  const dialog = $("passage");
  if (dialog.open) dialog.close();
}

export function initPassage() {
  const dialog = $("passage");
  $("passage-close").addEventListener("click", closePassage);
  $("passage-prev").addEventListener("click", () => current && current.previous && openPassage(current.previous));
  $("passage-next").addEventListener("click", () => current && current.next && openPassage(current.next));
  // a click on the backdrop lands on the dialog element itself, outside its box
  dialog.addEventListener("click", (e) => {
    if (e.target !== dialog) return;
    const r = dialog.getBoundingClientRect();
    if (e.clientX < r.left || e.clientX > r.right || e.clientY < r.top || e.clientY > r.bottom) closePassage();
  });
  // Escape closes a modal dialog by itself ("cancel", then "close"); every way of closing ends here. The "close"
  // event comes a task after the dialog shut, and the browser may already have put focus back: focus moves to the
  // opener only when it is nowhere (or still in the dialog), so a Tab pressed in between is not undone
  dialog.addEventListener("close", () => {
    const at = document.activeElement;
    const lost = !at || at === document.body || dialog.contains(at);
    if (lost && opener && opener.isConnected && typeof opener.focus === "function") opener.focus();
    opener = null;
  });
}
