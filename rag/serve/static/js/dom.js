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

export function table(header, rows) {
  return [el("thead", {}, el("tr", {}, header.map((h) => el("th", {}, h)))),
          el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c)))))];
}

export const ms = (v) => (v === null || v === undefined ? "—" : `${Math.round(v).toLocaleString()} ms`);
export const pct = (v) => (v === null || v === undefined ? "—" : `${(100 * v).toFixed(1)}%`);
export const num = (v, d = 3) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));

// Only http(s) links are made clickable; anything else (javascript:, data:) is shown as text.
export function safeLink(url, text) {
  return /^https?:\/\//i.test(url || "") ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, text || url)
                                          : el("span", {}, text || url || "");
}
