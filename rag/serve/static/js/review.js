// The Review tab (rag serve --review FILE): the golden set's items with their review state and the counts rag golden
// check prints; one item at a time with its seed and gold passages and the model's proposal; Accept, Edit, Reject or
// Skip (keys a, e, r, s), each decision written into the file at once by the server (rag.serve.goldenview), then the
// next item without a human decision. A decision carries the version of the file its item was shown with: when the
// file changed since (another review), the server refuses it (409) and the page offers to reload. Every text from the
// file or the documents goes in as text (dom.js el, textContent), never as HTML.
import { getJSON } from "./api.js";
import { el, show } from "./dom.js";
import { passageNodes } from "./passage.js";

const $ = (id) => document.getElementById(id);
// replaceChildren, leaving out the parts that are not there (replaceChildren would write null as "null")
const fill = (node, ...children) => node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
const DONE = { accept: "accepted", edit: "edited", reject: "rejected" };
let listing = null;  // GET /api/review: version, summary, items
let current = null;  // GET /api/review/item: the item shown, with the version of the file it was shown with
const skipped = new Set();  // skipped on this page: the next item is another one while there is one
let busy = false;
let loaded = false;

function stateLabel(item) {
  if (!item.kind) return item.note ? "not reviewed (the model left a note)" : "not reviewed";
  return `${item.review} · ${item.kind === "human" ? "human" : item.reviewed_by}`;
}

const badge = (item) => el("span", { class: `badge review-badge state-${item.kind ? item.review : "none"}` }, stateLabel(item));

function setError(message, conflict = false) {
  show($("review-error-text"), message);
  $("review-error").hidden = !message;
  $("review-reload").hidden = !conflict;
}

function renderCounts() {
  const s = listing.summary;
  const d = s.decisions;
  const total = (k) => d[k].human + d[k].model;
  fill($("review-counts"),
    el("div", { id: "review-count-reviewed" }, el("b", {}, `${s.reviewed} of ${s.items}`),
      ` reviewed (human ${s.human}, model ${s.model}); not reviewed ${s.items - s.reviewed}`),
    el("div", { id: "review-count-human" }, el("b", {}, String(s.items - s.human)), " left for a human"),
    s.reviewed ? el("div", {}, `accept ${total("accept")} · edit ${total("edit")} · reject ${total("reject")}; kept `
      + `${s.kept} of ${s.reviewed} (${(s.kept / s.reviewed).toFixed(2)})`) : null,
    s.overlap_n ? el("div", {}, `human and model agreement ${s.agreement.toFixed(2)} (n=${s.overlap_n})`) : null);
  $("review-lines").textContent = s.lines.join("\n");
}

function renderList() {
  const only = $("review-filter").checked;
  const items = listing.items.filter((it) => !only || it.kind !== "human");
  fill($("review-items"), ...(items.length ? items.map((it) => el("li", {},
    el("button", { type: "button", class: "review-entry", dataset: { id: it.id },
                   "aria-current": current && current.id === it.id ? "true" : null, onclick: () => openItem(it.id) },
      el("span", { class: "entry-head" }, el("span", { class: "entry-id" }, it.id), ` ${it.type} `, badge(it)),
      el("span", { class: "entry-question" }, it.question))))
    : [el("li", { class: "muted" }, only ? "Every item has a human decision." : "The file has no items.")]));
}

function passageItem(p) {
  const marks = [p.gold ? el("span", { class: "badge gold" }, "gold") : null,
                 p.seed ? el("span", { class: "badge seed" }, "seed") : null];
  if (p.missing) {
    return el("li", { class: "review-passage missing" }, el("code", {}, p.id), ...marks,
      el("div", { class: "muted" }, "not in the index at hand"));
  }
  return el("li", { class: "review-passage" },
    el("div", { class: "card-title" }, el("code", {}, p.id), ...marks, " ", p.title || ""),
    p.source ? el("div", { class: "muted" }, p.source) : null,
    el("div", { class: "passage-text" }, ...passageNodes(p.text)));
}

function renderItem() {
  const it = current;
  closeEdit(false);
  $("review-item").hidden = false;
  fill($("review-item-heading"), `Item ${it.id} `,
    el("small", {}, `${it.type}${it.split ? ` · ${it.split} split` : ""} · ${it.position + 1} of ${it.total}`));
  fill($("review-state"), badge(it), it.drafted_by ? el("span", { class: "muted" }, ` drafted by ${it.drafted_by}`) : null);
  $("review-question").textContent = it.question;
  $("review-reference").textContent = it.reference_answer || "—";
  const old = it.edited_from;
  $("review-edited").hidden = !old;
  fill($("review-edited"), ...(old ? ["Edited from: ", el("q", {}, old.question || ""), " · reference: ",
                                                el("q", {}, old.reference_answer || "")] : []));
  const p = it.proposal;
  $("review-proposal").hidden = !p;
  fill($("review-proposal"), ...(p ? [
    el("b", {}, `${p.current ? "The model proposes" : "The model had proposed"} ${p.review === "reject" ? "reject" : "keep"}`),
    ` (${p.model})`, p.reason ? el("div", { class: "reason" }, p.reason) : null] : []));
  show($("review-note"), it.review_note ? `The automatic review left a note: ${it.review_note}` : "");
  $("review-passages-from").textContent = it.passages_from ? `from the index ${it.passages_from}` : "";
  show($("review-passages-note"), it.passages_note || "");
  fill($("review-passages"), ...(it.passages.length ? it.passages.map(passageItem)
    : [el("li", { class: "muted" }, "This item names no passage.")]));
}

async function openItem(id) {
  try {
    current = await getJSON(`/api/review/item?${new URLSearchParams({ id })}`);
    setError("");
  } catch (e) {
    setError(e.message, e.status === 409);
    return;
  }
  renderItem();
  renderList();
}

// The next item without a human decision after `afterId`, in the file's order and round to the start; one skipped on
// this page only when nothing else is left.
function nextId(afterId) {
  const items = listing.items;
  const at = items.findIndex((it) => it.id === afterId);
  const order = [...items.slice(at + 1), ...items.slice(0, at + 1)].filter((it) => it.kind !== "human" && it.id !== afterId);
  return (order.find((it) => !skipped.has(it.id)) || {}).id;
}

async function goOn(afterId, said) {
  const next = afterId === null ? (listing.items.find((it) => it.kind !== "human") || {}).id : nextId(afterId);
  if (next !== undefined) {
    $("review-status").textContent = said;
    await openItem(next);
    return;
  }
  const open = listing.items.filter((it) => it.kind !== "human").length;
  current = null;
  $("review-item").hidden = true;
  renderList();
  $("review-status").textContent = `${said} ${open ? `Nothing left but the ${open} item(s) you skipped: click one in the list.`
    : "Every item has a human decision: rag eval --golden FILE --reviewed-by human scores the kept ones."}`.trim();
}

function setBusy(value) {
  busy = value;
  for (const id of ["review-accept", "review-edit", "review-reject", "review-skip", "review-save"]) $(id).disabled = value;
}

// Returns whether the decision was written.
async function decide(decision, edits) {
  if (!current || busy) return false;
  const id = current.id;
  setBusy(true);
  try {
    const r = await getJSON("/api/review/decide", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ id, decision, version: current.version, ...(edits || {}) }) });
    listing = r;
    skipped.delete(id);
    setError("");
    renderCounts();
    const unchanged = decision === "edit" && r.decided.review === "accept" ? " (the edit changed nothing)" : "";
    await goOn(id, `${id}: ${DONE[r.decided.review]}${unchanged}, written to ${$("review-file").textContent}.`);
    return true;
  } catch (e) {
    setError(e.message, e.status === 409);
    return false;
  } finally {
    setBusy(false);
  }
}

async function skip() {
  if (!current || busy) return;
  const id = current.id;
  skipped.add(id);
  setBusy(true);  // a key pressed while the next item loads is not taken for this one
  try {
    await goOn(id, `${id}: skipped (nothing written).`);
  } finally {
    setBusy(false);
  }
}

function startEdit() {
  if (!current || busy) return;
  $("review-edit-question").value = current.question;
  $("review-edit-reference").value = current.reference_answer;
  $("review-edit-form").hidden = false;
  $("review-edit-question").focus();
}

function closeEdit(refocus = true) {
  const open = !$("review-edit-form").hidden;
  $("review-edit-form").hidden = true;
  if (open && refocus) $("review-edit").focus();
}

// a, e, r, s anywhere on the tab but in a text field (the edit form's boxes take the keys while it is open)
function onKey(e) {
  if ($("view-review").hidden || !current || e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
  if (e.target instanceof Element && e.target.matches("textarea, select, input:not([type=checkbox]), [contenteditable]")) return;
  if ($("passage").open || !$("review-edit-form").hidden) return;
  const action = { a: () => decide("accept"), e: startEdit, r: () => decide("reject"), s: skip }[e.key.toLowerCase()];
  if (!action) return;
  e.preventDefault();
  action();
}

async function load() {
  try {
    listing = await getJSON("/api/review");
    setError("");
  } catch (e) {
    setError(e.message);
    return;
  }
  renderCounts();
  renderList();
}

// The tab opened: the listing, then the first item without a human decision (once; Reload does it again, keeping the
// item shown when it is still there).
export async function loadReview(force = false) {
  if (loaded && !force) return;
  loaded = true;
  const keep = current && current.id;
  await load();
  if (!listing) return;
  if (keep && listing.items.some((it) => it.id === keep)) await openItem(keep);
  else await goOn(null, "");
}

export function initReview(review) {
  $("review-file").textContent = review.name;
  $("review-file").title = review.file;
  $("review-accept").addEventListener("click", () => decide("accept"));
  $("review-reject").addEventListener("click", () => decide("reject"));
  $("review-edit").addEventListener("click", startEdit);
  $("review-skip").addEventListener("click", skip);
  $("review-cancel").addEventListener("click", () => closeEdit());
  $("review-reload").addEventListener("click", () => loadReview(true));
  $("review-filter").addEventListener("change", () => listing && renderList());
  const form = $("review-edit-form");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    decide("edit", { question: $("review-edit-question").value, reference_answer: $("review-edit-reference").value })
      .then((written) => written && current && $("review-accept").focus());
  });
  form.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); closeEdit(); }
    else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });
  document.addEventListener("keydown", onKey);
}
