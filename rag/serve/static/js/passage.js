// The passage panel: a cited or retrieved chunk's text, title, source and where it sits in its document.
import { getJSON } from "./api.js";
import { el, safeLink } from "./dom.js";

const $ = (id) => document.getElementById(id);
let current = null;

export async function openPassage(id) {
  const panel = $("passage");
  panel.hidden = false;
  $("passage-title").textContent = id;
  $("passage-where").textContent = "loading…";
  $("passage-text").textContent = "";
  try {
    const p = await getJSON(`/api/chunk?${new URLSearchParams({ id })}`);
    current = p;
    $("passage-title").textContent = p.title || p.chunk_id;
    $("passage-where").replaceChildren(
      el("div", {}, el("code", {}, p.chunk_id)),
      el("div", {}, "source: ", safeLink(p.url, p.source || p.url || "—")),
      el("div", {}, p.doc_id ? `part ${p.part} of ${p.parts} of ${p.doc_id}` : `part ${p.part} of ${p.parts}`));
    $("passage-text").textContent = p.text;
    $("passage-prev").disabled = !p.previous;
    $("passage-next").disabled = !p.next;
  } catch (e) {
    current = null;
    $("passage-where").textContent = e.message;
    $("passage-prev").disabled = $("passage-next").disabled = true;
  }
}

export function initPassage() {
  $("passage-close").addEventListener("click", () => { $("passage").hidden = true; });
  $("passage-prev").addEventListener("click", () => current && current.previous && openPassage(current.previous));
  $("passage-next").addEventListener("click", () => current && current.next && openPassage(current.next));
}
