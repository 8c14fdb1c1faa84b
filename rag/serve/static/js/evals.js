// The evaluation browser: runs, the metric table across the chosen ones with their intervals, rag.report.plots figures,
// one run in detail (per type, refusals, latency, failures with their traces), and the compiled artifacts.
import { getJSON } from "./api.js";
import { el, hiddenLabel, num, pct, scrollBox, show, table } from "./dom.js";
import { openPassage } from "./passage.js";
import { renderStep } from "./trace.js";

const $ = (id) => document.getElementById(id);
let loaded = false;

function chosen() {
  return [...document.querySelectorAll("#runs-table input[type=checkbox]:checked")].map((c) => c.value);
}

async function compare() {
  const runs = chosen();
  if (!runs.length) { show($("evals-error"), "Choose at least one run."); return; }
  show($("evals-error"), "");
  const q = new URLSearchParams(runs.map((r) => ["run", r]));
  try {
    const m = await getJSON(`/api/metrics?${q}`);
    $("metric-note").textContent = m.note;
    $("metric-table").replaceChildren(...table(["metric", ...m.runs], m.rows.map((r) => [r.metric, ...r.cells])));
    $("plots").replaceChildren(...["metrics", "latency", "steps"].map((k) =>
      el("img", { src: `/api/plots/${k}.png?${q}`, alt: `${k} plot` })));
  } catch (e) { show($("evals-error"), e.message); }
}

function failureCase(f) {
  const rec = f.record;
  const gold = new Set(rec.gold_ids || []);
  const steps = ((rec.prediction || {}).trace || {}).steps || [];
  return el("details", { class: "failure" },
    el("summary", {}, el("b", {}, f.diagnosis), ` · ${rec.id} (${rec.type}): `, rec.question),
    el("div", {}, "detail: ", f.diagnosis_detail || ""),
    el("div", {}, "reference: ", rec.reference_answer || "—"),
    el("div", {}, "answer: ", (rec.prediction || {}).answer || rec.error || "—"),
    rec.judge ? el("div", {}, `judge: correct=${rec.judge.correct} faithful=${rec.judge.faithful}; `, rec.judge.reason || "") : null,
    el("ol", { class: "timeline" }, steps.map((s, i) => renderStep({ ...s, index: i }, { gold, onPassage: openPassage }))));
}

async function openRun(name) {
  try {
    const r = await getJSON(`/api/runs/${encodeURIComponent(name)}`);
    const refusals = r.refusals.map((x) => [x.type, String(x.n), String(x.refused), String(x.correct), String(x.wrong),
      String(x["answered (unjudged)"]), String(x.error), `${pct(x.refusal_rate)} [${pct(x.refusal_lo)}, ${pct(x.refusal_hi)}]`]);
    const latency = r.latency.map((x) => [x.node, String(x.n), `${num(x.p50_ms, 0)} [${num(x.p50_lo, 0)}, ${num(x.p50_hi, 0)}]`,
      num(x.p95_ms, 0), num(x.tokens_in, 0), num(x.tokens_out, 0), pct(x.cached_share)]);
    $("run-detail").replaceChildren(el("div", { id: "run-view" },
      el("h2", {}, `Run ${r.name}`, el("small", {}, ` ${r.config}${r.artifact ? " + " + r.artifact : ""} · golden ${r.golden || "?"} `
        + `(${r.golden_hash}) · ${r.n_done}/${r.n_selected} items · ${r.updated || ""}`)),
      el("h3", {}, "By question type"),
      r.by_type.map((t) => el("div", {}, el("h4", {}, `${t.type} (${t.n} items)`),
        scrollBox(el("table", { class: "grid" }, ...table(["metric", "value"], t.rows.map((x) => [x.metric, x.value])))))),
      el("h3", {}, "Refusals by type"),
      scrollBox(el("table", { class: "grid" }, ...table(["type", "n", "refused", "correct", "wrong", "unjudged", "error",
        "refusal rate [95%]"], refusals))),
      el("h3", {}, "Latency per node (ms)"),
      scrollBox(el("table", { class: "grid" }, ...table(["node", "steps", "p50 [95%]", "p95", "tokens in", "tokens out", "cached"],
        latency))),
      el("h3", {}, `Failures: ${r.failures.length}`),
      el("div", { class: "muted" }, Object.entries(r.failure_counts).map(([k, v]) => `${k}: ${v}`).join(", ") || "none diagnosed"),
      r.failures.map(failureCase)));
  } catch (e) { show($("evals-error"), e.message); }
}

function artifactView(a) {
  const roles = a.roles.map((x) => [x.role, x.model || "", `${num(x.dev_before)} → ${num(x.dev_after)}`, x.dev_verdict,
    `${num(x.test_before)} → ${num(x.test_after)}`, x.test_verdict]);
  return el("div", { class: "artifact" },
    el("h3", {}, a.name, el("small", {}, ` ${a.optimizer || ""} · ${a.created || ""}`)),
    scrollBox(el("table", { class: "grid" }, ...table(["role", "model", "dev before → after", "dev", "test before → after", "test"],
      roles))),
    a.prompts.map((p) => el("details", {}, el("summary", {}, `${p.predictor} (${p.role}): instructions ${p.changed ? "changed by the optimizer" : "as written"}, ${p.n_demos} demo(s)`),
      el("pre", {}, p.instructions),
      (p.demos || []).map((d, i) => el("pre", { class: "demo" }, `${i + 1}. ` + Object.entries(d).filter(([k]) => !k.startsWith("augmented"))
        .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join("\n"))))));
}

export async function loadEvals() {
  if (loaded) return;
  loaded = true;
  try {
    const { root, runs } = await getJSON("/api/runs");
    $("runs-root").textContent = root;
    if (!runs.length) {
      $("runs-table").replaceChildren(el("caption", {}, `No runs under ${root}. Make some with: rag eval --config full --split test`));
    } else {
      const head = [hiddenLabel("compare"), "run", "config", "golden set", "items done / selected", "date"];
      $("runs-table").replaceChildren(...table(head, runs.map((r, i) => [
        el("input", { type: "checkbox", value: r.name, checked: i < 4, "aria-label": `choose ${r.name}` }),
        el("button", { type: "button", class: "link", onclick: () => openRun(r.name) }, r.name),
        r.error ? el("span", { class: "error" }, r.error) : `${r.config}${r.artifact ? " + " + r.artifact : ""}`,
        `${r.golden || "?"} (${r.golden_hash || "?"})`,
        el("span", { title: (r.notes || []).join("\n") || null },
          `${r.n_done ?? "?"} / ${r.n_selected ?? "?"}${r.complete ? "" : " (incomplete)"}${r.notes?.length ? " (recounted from results.jsonl)" : ""}`),
        r.updated || ""])));
      await compare();
    }
    const { artifacts } = await getJSON("/api/artifacts");
    $("artifacts").replaceChildren(...(artifacts.length ? artifacts.map(artifactView) : [el("p", { class: "muted" }, "No artifacts. Make one with: rag compile")]));
  } catch (e) { show($("evals-error"), e.message); }
}

export function initEvals() {
  $("compare-btn").addEventListener("click", compare);
}
