// Building the page from data. Every string goes in as text (textContent or a Text node), never as HTML:
// documents, questions and model output are untrusted.

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function show(node, message) {
  node.textContent = message || "";
  node.hidden = !message;
}

// Text that screen readers read and the eye does not see (a header cell over a column of checkboxes, say).
export function hiddenLabel(text) {
  return el("span", { class: "visually-hidden" }, text);
}

// A table's head and body. Every header cell has text: an empty one gets a hidden label ("column n").
export function table(header, rows) {
  const label = (h, i) => (h instanceof Node || String(h ?? "").trim() ? h : hiddenLabel(`column ${i + 1}`));
  return [el("thead", {}, el("tr", {}, header.map((h, i) => el("th", { scope: "col" }, label(h, i))))),
          el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c)))))];
}

// A table in a box of its own that scrolls sideways when the table is wider than the page (phones).
export function scrollBox(tableNode) {
  return keyboardScroll(el("div", { class: "table-scroll" }, tableNode));
}

// A scroll box that a keyboard can scroll: while its table is wider than it, it is a tab stop (Tab, then the arrow
// keys), and no tab stop otherwise. Checked whenever the box or its table changes size (rows arrive, a phone turns).
const resized = typeof ResizeObserver === "function"
  ? new ResizeObserver((entries) => entries.forEach((e) => tabStopWhileScrolling(e.target.closest(".table-scroll"))))
  : null;

function tabStopWhileScrolling(box) {
  if (!box) return;
  if (box.scrollWidth > box.clientWidth) box.tabIndex = 0;
  else box.removeAttribute("tabindex");
}

export function keyboardScroll(box) {
  if (resized) [box, box.firstElementChild].forEach((node) => node && resized.observe(node));
  return box;
}

// Seconds, for times people read ("0.03 s", "4.2 s", "189 s").
export const secs = (v) => (v === null || v === undefined ? "—"
  : `${v < 1 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : Math.round(v).toLocaleString()} s`);

export const ms = (v) => (v === null || v === undefined ? "—" : `${Math.round(v).toLocaleString()} ms`);
export const pct = (v) => (v === null || v === undefined ? "—" : `${(100 * v).toFixed(1)}%`);
export const num = (v, d = 3) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));

// Only http(s) links are made clickable; anything else (javascript:, data:) is shown as text.
export function safeLink(url, text) {
  return /^https?:\/\//i.test(url || "") ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, text || url)
                                          : el("span", {}, text || url || "");
}
