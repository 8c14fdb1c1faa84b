// The ask page: question, configuration and artifact, examples; the trace streams in step by step.
import { streamEvents } from "./api.js";
import { el, show, ms } from "./dom.js";
import { openPassage } from "./passage.js";
import { answerText, chunkLink, pendingStep, renderStep, sqlResult } from "./trace.js";

const $ = (id) => document.getElementById(id);
const ctx = { onPassage: openPassage };
let running = null;

function fillChoices(info) {
  const config = $("config");
  config.replaceChildren(...info.configs.map((c) => el("option", {
    value: c.name, disabled: !c.available, title: c.why || c.description, selected: c.default }, c.available ? c.name : `${c.name} (unavailable)`)));
  const artifact = $("artifact");
  artifact.replaceChildren(el("option", { value: "auto" }, "auto (as rag ask selects)"),
    el("option", { value: "none" }, "none (uncompiled)"),
    ...info.artifacts.map((a) => el("option", { value: a.name, title: a.problems.join("; ") || "fits" },
      a.problems.length ? `${a.name} (does not fit)` : a.name)));
  const describe = () => {
    const c = info.configs.find((x) => x.name === config.value) || {};
    const settings = Object.entries(c.settings || {}).map(([k, v]) => `${k}=${v}`).join(", ");
    $("config-info").replaceChildren(el("div", {}, el("b", {}, c.name || ""), ": ", c.description || ""),
      el("div", { class: "muted" }, settings), ...(c.why ? [el("div", { class: "error" }, c.why)] : []));
  };
  config.addEventListener("change", describe);
  describe();
}

function fillExamples(examples) {
  const box = $("examples");
  if (!examples.length) { box.replaceChildren(el("p", { class: "muted" }, "no golden set found")); return; }
  const types = [...new Set(examples.map((e) => e.type))];
  box.replaceChildren(...types.map((t) => el("div", { class: "example-group" }, el("h3", {}, t),
    examples.filter((e) => e.type === t).map((e) => el("button", { type: "button", class: "example", dataset: { type: t },
      onclick: () => { $("question").value = e.question; ask(); } }, e.question)))));
}

function progressText(p) {
  if (p.state === "queued") return p.ahead ? `Waiting: ${p.ahead} question(s) ahead (${p.total_s} s)` : `Queued (${p.total_s} s)`;
  if (p.state === "loading") return `Loading the program and its models… ${p.total_s} s`;
  if (p.node) return `${p.node}: ${p.node === "retrieve" ? "searching" : "waiting for the model"}… ${p.node_s} s (total ${p.total_s} s)`;
  return `Running… ${p.total_s} s`;
}

function showProgram(p) {
  $("program").replaceChildren(
    el("div", {}, "Using ", el("b", {}, p.description), ` · config ${p.config} (mode ${p.settings.mode}, k=${p.settings.top_k}, `
      + `reflection ${p.settings.reflection ? "on" : "off"}, max_rewrites ${p.settings.max_rewrites})`),
    el("div", { class: "muted" }, "models: " + Object.entries(p.models).map(([r, m]) => `${r}=${m}`).join(", ")),
    // which artifacts were skipped and why: folded away, as rag ask shows it only with --verbose
    ...(p.messages.length ? [el("details", { class: "muted" }, el("summary", {}, "Why these prompts"),
      ...p.messages.map((m) => el("div", {}, m)))] : []));
}

function showResult(d) {
  const t = d.trace.totals;
  const totals = el("div", { class: "meta" }, `${t.steps} steps, ${t.rewrites} rewrite(s), ${ms(t.latency_ms)}, `
    + `${t.tokens_in}+${t.tokens_out} tokens, $${Number(t.cost).toFixed(6)}`);
  if (d.refused) {
    $("result").replaceChildren(el("div", { id: "refusal", class: "result refused" }, el("h2", {}, "Refused"),
      el("p", { class: "answer-text" }, d.answer), el("h3", {}, "Closest passages (judged not relevant)"),
      el("ul", { class: "closest" }, d.closest.map((s) => el("li", {}, chunkLink(s.chunk_id, ctx), " ", s.title || ""))), totals));
  } else {
    const flag = d.low_confidence
      ? [el("div", { id: "low-confidence", class: "warning" }, "Low confidence: the grounding critic found a claim the evidence "
        + "does not state (", d.critic_reason || "", ").")] : [];
    $("result").replaceChildren(el("div", { id: "answer", class: "result answered" }, el("h2", {}, "Answer"),
      answerText(d.answer, d.citations, ctx), ...flag, el("h3", {}, "Sources"),
      el("ul", { class: "sources" }, d.sources.map((s) => el("li", {}, chunkLink(s.chunk_id, ctx), " ", s.title || "",
        s.sql ? sqlResult(s) : ""))), totals));
  }
}

export async function ask() {
  const question = $("question").value.trim();
  if (!question) return;
  if (running) running.abort();
  const controller = new AbortController();
  running = controller;
  $("timeline").replaceChildren();
  $("result").replaceChildren();
  $("program").replaceChildren();
  show($("ask-error"), "");
  $("progress").textContent = "Sending…";
  const params = new URLSearchParams({ question, config: $("config").value, artifact: $("artifact").value });
  const onEvent = (kind, data) => {
    if (kind === "progress") $("progress").textContent = progressText(data);
    else if (kind === "program") showProgram(data);
    else if (kind === "start") $("timeline").append(pendingStep(data.index, data.node));
    else if (kind === "step") {
      const old = $("timeline").querySelector(`li[data-index="${Number(data.index)}"]`);
      const node = renderStep(data, ctx);
      if (old) old.replaceWith(node); else $("timeline").append(node);
    } else if (kind === "done") { showResult(data); $("progress").textContent = `Done in ${ms(data.trace.totals.latency_ms)}`; }
    else if (kind === "error") { show($("ask-error"), data.message); $("progress").textContent = ""; }
  };
  try {
    await streamEvents(`/api/stream?${params}`, onEvent, controller.signal);
  } catch (e) {
    if (e.name !== "AbortError") { show($("ask-error"), e.message); $("progress").textContent = ""; }
  } finally {
    if (running === controller) running = null;
  }
}

export function initAsk(info) {
  fillChoices(info);
  fillExamples(info.examples);
  $("question").maxLength = info.max_question_chars;
  $("ask-form").addEventListener("submit", (e) => { e.preventDefault(); ask(); });
  $("question").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); ask(); } });
}
