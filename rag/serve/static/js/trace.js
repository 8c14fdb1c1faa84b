// One trace step as the page shows it, live (ask) and in the evaluation browser (failure cases) alike.
import { el, ms, scrollBox, table } from "./dom.js";

const LABEL = { condense: "Condense", route: "Route", retrieve: "Retrieve", grade: "Grade", rewrite: "Rewrite", sql: "SQL", answer: "Answer",
                critique: "Critic", refuse: "Refuse" };

// A SQL result (the data route's evidence): the statement that ran and its rows, as text (never markup).
export function sqlResult(r) {
  const rows = (r.rows || []).slice(0, 20);
  return el("div", { class: "sql-result" }, el("pre", { class: "sql" }, r.sql || ""),
    scrollBox(el("table", { class: "grid" },
      ...table(r.columns || [], rows.map((row) => row.map((v) => (v === null ? "NULL" : String(v))))))),
    (r.rows || []).length > rows.length || r.truncated ? el("div", { class: "muted" }, "more rows not shown") : "");
}

// A chunk id as a link that opens the passage; gold chunks (evaluation browser) are starred.
export function chunkLink(id, ctx) {
  if (/^sql:\d+$/.test(id)) return el("span", { class: "chunk sql-id", title: "a SQL result (shown in the SQL step)" }, id);
  const gold = ctx.gold && ctx.gold.has(id);
  return el("button", { type: "button", class: `chunk${gold ? " gold" : ""}`, title: gold ? "gold chunk" : "show the passage",
                        dataset: { chunk: id }, onclick: () => ctx.onPassage && ctx.onPassage(id) },
            gold ? `★ ${id}` : id);
}

function ids(list, ctx) {
  if (!list || !list.length) return el("span", { class: "muted" }, "none");
  return el("span", { class: "ids" }, list.map((id) => chunkLink(id, ctx)));
}

// Answer text with its [chunk id] citations turned into links (only ids the agent kept as valid citations).
export function answerText(text, citations, ctx, trailing = true) {
  const valid = new Set(citations || []);
  const out = el("p", { class: "answer-text" });
  const pattern = /\[([^\[\]]+)\]/g;
  const linked = new Set();
  let last = 0;
  for (const m of (text || "").matchAll(pattern)) {
    out.append(document.createTextNode(text.slice(last, m.index)));
    const id = m[1].trim();
    if (valid.has(id)) linked.add(id);
    out.append(valid.has(id) ? el("span", { class: "cite" }, "[", chunkLink(id, ctx), "]") : document.createTextNode(m[0]));
    last = m.index + m[0].length;
  }
  out.append(document.createTextNode((text || "").slice(last)));
  // a model that names its sources in the cited-ids field but not in the text (small models often do): its citations
  // still sit in the answer, as links after the text (``trailing``: not in a draft, whose ids are the passages shown)
  for (const id of trailing ? (citations || []).filter((c) => !linked.has(c)) : []) {
    out.append(" ", el("span", { class: "cite cite-end", title: "cited by the answer" }, "[", chunkLink(id, ctx), "]"));
  }
  return out;
}

function meta(s) {
  const parts = [ms(s.latency_ms)];
  if (s.model) parts.unshift(s.model);
  if (s.tokens_in || s.tokens_out) parts.push(`${s.tokens_in}+${s.tokens_out} tokens`);
  if (s.model) parts.push(`$${Number(s.cost || 0).toFixed(6)}`);
  return el("div", { class: "meta" }, parts.join(" · "), s.cached ? el("span", { class: "badge cached" }, "cache hit") : null);
}

function rank(hit, stage) {
  const st = (hit.stages || {})[stage] || {};
  return st.rank === null || st.rank === undefined ? "—" : `#${st.rank}`;
}

// Which of the query stages' lists (rephrasing n, the hypothetical passage) found a hit: "q1 q2 hyde".
function foundBy(hit) {
  const lists = ((hit.stages || {}).expand || {}).found_by || [];
  const extra = [...new Set(lists.filter((n) => n.includes(":")).map((n) => n.split(":")[1]))];
  return extra.length ? extra.join(" ") : "—";
}

// Where the LM reranker put a hit in its list ("not listed": it read the passage and left it out).
function lmRank(hit) {
  const st = (hit.stages || {}).rerank || {};
  if (st.rank === null || st.rank === undefined) return "—";
  return st.lm_rank ? `#${st.lm_rank}` : "not listed";
}

function hitsTable(hits, ctx) {
  if (!hits || !hits.length) return el("p", { class: "muted" }, "no passages found");
  const expanded = hits.some((h) => ((h.stages || {}).expand || {}).rank);
  const reranked = hits.some((h) => ((h.stages || {}).rerank || {}).rank);
  const byLm = hits.some((h) => ((h.stages || {}).rerank || {}).lm_rank);  // the LM reranker, not a cross-encoder
  const head = ["#", "passage", "title", "bm25", "dense", "fused", ...(expanded ? ["with expansions", "found by"] : []),
                ...(reranked ? ["reranked"] : []), ...(byLm ? ["LM's rank"] : []), "score"];
  return el("table", { class: "hits" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, hits.map((h) => el("tr", {},
      el("td", {}, String(h.rank)), el("td", {}, chunkLink(h.chunk_id, ctx)), el("td", { class: "title" }, h.title || ""),
      el("td", {}, rank(h, "bm25")), el("td", {}, rank(h, "dense")), el("td", {}, rank(h, "rrf")),
      ...(expanded ? [el("td", {}, rank(h, "expand")), el("td", {}, foundBy(h))] : []),
      ...(reranked ? [el("td", {}, rank(h, "rerank"))] : []), ...(byLm ? [el("td", {}, lmRank(h))] : []),
      el("td", {}, typeof h.score === "number" ? h.score.toFixed(4) : "—")))));
}

function expansions(s) {
  const out = (s.expansions || []).map((q, i) => el("div", { class: "query" }, `also searched (q${i + 1}): `, el("q", {}, q)));
  if (s.hyde) out.push(el("div", { class: "query" }, "hypothetical passage searched (hyde, never shown to the answerer): ",
                          el("q", {}, s.hyde)));
  return out;
}

function body(s, ctx) {
  switch (s.node) {
    case "condense":  // a follow-up made standalone from the conversation: what the rest of the run searched and answered
      return [el("div", { class: "query" }, el("q", {}, s.query || ""), " → ",
                 el("q", { class: "new-query" }, s.rewrite || s.query || ""))];
    case "retrieve":
      return [el("div", { class: "query" }, "query: ", el("q", {}, s.query || "")), ...expansions(s), hitsTable(s.hits, ctx)];
    case "grade":
      return [el("div", {}, el("span", { class: `badge ${s.verdict ? "yes" : "no"}` }, s.verdict ? "RELEVANT" : "NOT RELEVANT")),
              el("div", { class: "reason" }, "reason: ", s.reason || ""),
              el("div", {}, "shown: ", ids(s.shown_ids, ctx)), el("div", {}, "chosen: ", ids(s.chosen_ids, ctx))];
    case "rewrite":
      return [el("div", { class: "query" }, el("q", {}, s.query || ""), " → ", el("q", { class: "new-query" }, s.rewrite || ""))];
    case "answer":
      return [answerText(s.answer, s.chosen_ids, ctx), el("div", {}, "cited: ", ids(s.chosen_ids, ctx)),
              el("div", {}, "read, not cited: ", ids((s.shown_ids || []).filter((id) => !(s.chosen_ids || []).includes(id)), ctx))];
    case "route":
      return [el("div", {}, el("span", { class: "badge yes" }, (s.route || "").toUpperCase())),
              el("div", { class: "reason" }, "reason: ", s.reason || "")];
    case "sql":
      return [el("pre", { class: "sql" }, s.sql || "(no query)"),
              s.result ? el("div", {}, `[${s.result.id}] `, sqlResult(s.result))
                       : el("div", { class: "reason" }, "not run: ", s.reason || ""),
              s.result && ctx.keep ? keepButton(s, ctx) : ""];
    case "critique":
      return [el("div", {}, el("span", { class: `badge ${s.verdict ? "yes" : "no"}` }, s.verdict ? "GROUNDED" : "NOT GROUNDED"),
                      s.check ? el("span", { class: "muted" }, ` ${s.check} check`) : ""),
              el("div", { class: "reason" }, "reason: ", s.reason || ""), el("div", {}, "checked against: ", ids(s.shown_ids, ctx))];
    case "refuse":
      return [el("p", { class: "answer-text" }, s.answer || ""), el("div", { class: "reason" }, "reason: ", s.reason || ""),
              el("div", {}, "closest passages (judged not relevant): ", ids(s.shown_ids, ctx))];
    default:  // a node this page does not know (a newer server): what it has of the common fields, as text
      return [
        ...(s.query ? [el("div", { class: "query" }, "query: ", el("q", {}, String(s.query)))] : []),
        ...(s.rewrite ? [el("div", { class: "query" }, "→ ", el("q", {}, String(s.rewrite)))] : []),
        ...(s.reason ? [el("div", { class: "reason" }, "reason: ", String(s.reason))] : []),
        ...(s.answer ? [el("p", { class: "answer-text" }, String(s.answer))] : []),
      ];
  }
}

// rag serve --keep-sql FILE: the statement that ran, kept as a labelled example (the server runs it again).
function keepButton(s, ctx) {
  const status = el("span", { class: "muted keep-status", role: "status" });
  const button = el("button", { type: "button", class: "keep-sql" }, "Keep this query as an example");
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = " keeping…";
    try {
      const kept = await ctx.keep(s);
      status.textContent = ` kept as ${kept.id} in ${kept.file}`;
    } catch (e) {
      status.textContent = ` not kept: ${e.message}`;
      button.disabled = false;
    }
  });
  return el("div", { class: "keep" }, button, status);
}

export function renderStep(s, ctx = {}) {
  const node = String(s.node || "step");
  return el("li", { class: `step step-${node.replace(/[^\w-]/g, "_")}`, dataset: { node, index: s.index } },
    el("div", { class: "step-head" }, el("span", { class: "node" }, LABEL[node] || node), meta(s)),
    body(s, ctx),
    (s.notes || []).map((n) => el("div", { class: "note" }, "note: ", n)));
}

export function pendingStep(index, node) {
  return el("li", { class: `step pending step-${node}`, dataset: { node, index } },
    el("div", { class: "step-head" }, el("span", { class: "node" }, LABEL[node] || node), el("span", { class: "spinner" }, "running…")));
}
