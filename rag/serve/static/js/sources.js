// The answer's passages (its sources, the ones read but not cited, a refusal's closest ones) as cards: the id (a link
// that opens the passage dialog) and title, a preview of the text with its reST/Markdown decoration taken out
// (passage.js), and a button that shows the whole passage in the card. The done event carries each passage's text
// (Programs.with_texts); where it does not (an older server), the card fetches it when opened. A SQL result keeps its
// statement and table. All of it goes in as text.
import { getJSON } from "./api.js";
import { el } from "./dom.js";
import { passageLines, passageNodes } from "./passage.js";
import { chunkLink, sqlResult } from "./trace.js";

const PREVIEW_CHARS = 200;
let cards = 0;  // numbers the cards' text boxes, for the buttons' aria-controls

// The first PREVIEW_CHARS characters of the text as one line, decoration out, cut at a word with an ellipsis. Its
// headings are left out (the card's title is the passage's heading path) unless the passage has nothing else.
export function previewText(text) {
  const lines = passageLines(text).filter((l) => l.text.trim());
  const body = lines.some((l) => !l.heading) ? lines.filter((l) => !l.heading) : lines;
  const flat = body.map((l) => l.text.trim()).join(" ").replace(/\s+/g, " ");
  if (flat.length <= PREVIEW_CHARS) return flat;
  const cut = flat.slice(0, PREVIEW_CHARS);
  const space = cut.lastIndexOf(" ");
  return `${(space > PREVIEW_CHARS / 2 ? cut.slice(0, space) : cut).replace(/[\s.,;:]+$/, "")}…`;
}

// The button that shows and hides the whole passage in `box`, with the text from `s.text` or, failing that, /api/chunk.
function expander(s, box) {
  const button = el("button", { type: "button", class: "card-toggle", "aria-expanded": "false", "aria-controls": box.id },
    "Show the whole passage");
  let filled = false;
  button.addEventListener("click", async () => {
    const open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "Hide the passage" : "Show the whole passage";
    box.hidden = !open;
    if (!open || filled) return;
    filled = true;
    if (typeof s.text === "string") { box.replaceChildren(...passageNodes(s.text)); return; }
    box.textContent = "loading…";
    try {
      box.replaceChildren(...passageNodes((await getJSON(`/api/chunk?${new URLSearchParams({ id: s.chunk_id })}`)).text));
    } catch (e) {
      filled = false;  // a later click tries again
      box.textContent = e.message;
    }
  });
  return button;
}

// A passage as a list item: a card; a SQL result (rows only where `withRows`) as its id, title and table.
export function sourceCard(s, withRows, ctx) {
  if (s.sql || /^sql:\d+$/.test(s.chunk_id)) {
    return el("li", {}, chunkLink(s.chunk_id, ctx), " ", s.title || "", withRows && s.sql ? sqlResult(s) : "");
  }
  const head = el("div", { class: "card-head" }, chunkLink(s.chunk_id, ctx), " ", el("span", { class: "card-title" }, s.title || ""));
  const box = el("div", { id: `card-text-${++cards}`, class: "passage-text card-text", hidden: true });
  const preview = typeof s.text === "string" ? previewText(s.text) : "";
  return el("li", { class: "source-card", dataset: { chunk: s.chunk_id } }, head,
    preview ? el("p", { class: "card-preview" }, preview) : "", expander(s, box), box);
}
