// The ask page: question, configuration and artifact, examples; the trace streams in step by step. Each question is
// sent with the conversation's last turns (conversation.js), shown above it.
import { getJSON, streamEvents } from "./api.js";
import * as conversation from "./conversation.js";
import * as playback from "./playback.js";
import { el, show, ms, secs } from "./dom.js";
import { openPassage } from "./passage.js";
import { sourceCard } from "./sources.js";
import { answerText, pendingStep, renderStep } from "./trace.js";

const $ = (id) => document.getElementById(id);
const ctx = { onPassage: openPassage };  // + keep, with rag serve --keep-sql (trace.js shows the button)
let lastRoute = null;  // the current question's route and answer, sent with a kept statement
let lastAnswer = "";
let running = null;
let started = 0;  // performance.now() when the question was sent: "Done in" is the wall time the person waited
let historyLimit = 0;  // the server's bound on a history's characters (/api/info)
let writing = false;  // the answer node's text is arriving (token events): the model is writing, not thinking
const retrieved = new Set();  // the chunk ids this question's retrieve steps showed: a draft's [id] of one is a link

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
  playback.examples(examples);  // which have a recording, offered while the model loads
  const box = $("examples");
  if (!examples.length) { box.replaceChildren(el("p", { class: "muted" }, "no golden set found")); return; }
  const types = [...new Set(examples.map((e) => e.type))];
  box.replaceChildren(...types.map((t) => el("div", { class: "example-group" }, el("h3", {}, t),
    examples.filter((e) => e.type === t).map((e) => el("button", { type: "button", class: "example", dataset: { type: t },
      onclick: () => { $("question").value = e.question; ask(); } }, e.question)))));
}

// What the server is doing now: waiting in the queue (how many ahead), loading (each phase with its own time: the
// model file, the program, the CPU check, the model), or running a node.
const PHASE = {
  assemble: (d) => `Preparing the model file${d ? ` ${d}` : ""} (assembled and verified once)`,
  program: () => "Loading the index and building the program",
  check: (d) => `Checking that llama.cpp runs${d ? ` ${d}` : " the model"} on this CPU (once)`,
  model: (d) => `Loading the model${d ? ` ${d}` : ""}`,
};
const PHASE_SHORT = { assemble: "model file", program: "index and program", check: "CPU check", model: "model" };

function progressText(p) {
  const total = `(total ${secs(p.total_s)})`;
  if (p.state === "queued") return p.ahead ? `Queued: ${p.ahead} ahead… ${secs(p.total_s)}` : `Queued: next… ${secs(p.total_s)}`;
  if (p.state === "loading") {
    if (p.phase && PHASE[p.phase]) return `${PHASE[p.phase](p.detail)}… ${secs(p.phase_s)} ${total}`;
    return `Waiting for the program to load… ${secs(p.total_s)}`;
  }
  if (p.node) {
    const doing = p.node === "retrieve" ? "searching" : p.node === "answer" && writing ? "writing" : "waiting for the model";
    return `${p.node}: ${doing}… ${secs(p.node_s)} ${total}`;
  }
  return `Running… ${secs(p.total_s)}`;
}

function showProgram(p) {
  $("program").replaceChildren(
    el("div", {}, "Using ", el("b", {}, p.description), ` · config ${p.config} (mode ${p.settings.mode}, k=${p.settings.top_k}, `
      + `reflection ${p.settings.reflection ? "on" : "off"}, max_rewrites ${p.settings.max_rewrites})`),
    el("div", { class: "muted" }, "models: " + Object.entries(p.models).map(([r, m]) => `${r}=${m}`).join(", ")),
    // the time the first question spent loading, phase by phase: never counted in a node's time
    ...((p.loaded || []).length ? [el("div", { id: "loaded", class: "muted" }, "loaded first: "
      + p.loaded.map((x) => `${PHASE_SHORT[x.phase] || x.phase} ${secs(x.s)}`).join(", "))] : []));
  // which artifacts were skipped and why: diagnostics, folded away below the answer (rag ask prints them with --verbose)
  $("notes").replaceChildren(...(p.messages.length ? [el("details", { class: "notes" },
    el("summary", {}, `Notes (${p.messages.length})`), p.messages.map((m) => el("div", {}, m)))] : []));
}

// A passage as a list item: a card with its id (a link that opens it), title, preview and whole text (sources.js);
// a SQL result with its statement and rows.
function sourceItem(s, withRows) {
  return sourceCard(s, withRows, ctx);
}

function showResult(d) {
  const t = d.trace.totals;
  const totals = el("div", { class: "meta" }, `${t.steps} steps, ${t.rewrites} rewrite(s), ${ms(t.latency_ms)}, `
    + `${t.tokens_in}+${t.tokens_out} tokens, $${Number(t.cost).toFixed(6)}`);
  if (d.refused) {
    $("result").replaceChildren(el("div", { id: "refusal", class: "result refused" }, el("h2", {}, "Refused"),
      el("p", { class: "answer-text" }, d.answer), el("h3", {}, "Closest passages (judged not relevant)"),
      el("ul", { class: "closest" }, d.closest.map((s) => sourceItem(s, false))), totals));
  } else {
    const flag = d.low_confidence
      ? [el("div", { id: "low-confidence", class: "warning" },
        `Low confidence, flagged by ${d.flagged_by || "the grounding critic"}: `,
        d.critic_reason || "", ".")] : [];
    // the passages the answerer was given but did not cite, apart from the ones it cites
    const uncited = (d.uncited || []).length ? [el("h3", {}, "Also read (not cited)"),
      el("ul", { class: "uncited" }, d.uncited.map((s) => sourceItem(s, false)))] : [];
    $("result").replaceChildren(el("div", { id: "answer", class: "result answered" },
      el("div", { class: "result-head" }, el("h2", {}, "Answer"), copyButton(d.answer)),
      answerText(d.answer, d.citations, ctx), ...flag, el("h3", {}, "Sources"),
      el("ul", { class: "sources" }, d.sources.map((s) => sourceItem(s, true))), ...uncited, totals));
  }
}

// The answer while the model writes it (token events: the text so far) where the answer will be, as text in which a
// complete [id] of a passage the retrieve steps showed is already a link; the done event replaces it with the answer
// the agent made of it (citations checked). A new answer step (the critic asked for the answer again) starts it over.
function showDraft(d) {
  let box = $("answer-draft");
  const index = String(d.index);
  if (!box || box.dataset.index !== index) {
    box = el("div", { id: "answer-draft", class: "result answered streaming", dataset: { index }, "aria-busy": "true" },
      el("div", { class: "result-head" }, el("h2", {}, "Answer"), el("span", { class: "meta draft-state" }, "writing…")),
      el("p", { class: "answer-text" }));
    $("result").replaceChildren(box);
    const spinner = $("timeline").querySelector(`li.pending[data-index="${Number(d.index)}"] .spinner`);
    if (spinner) spinner.textContent = "writing…";
    box.scrollIntoView({ block: "nearest" });
  }
  box.querySelector(".answer-text").replaceWith(answerText(String(d.text ?? ""), [...retrieved], ctx, false));
  writing = true;
}

// Copy the answer's text (with its [id] citations): the Clipboard API, or, where the page may not use it, a selected
// textarea and the copy command. The button says whether it worked.
function copyButton(text) {
  const button = el("button", { type: "button", class: "copy", id: "copy-answer", title: "Copy the answer's text" }, "Copy");
  const said = (word) => {
    button.textContent = word;
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
  };
  button.addEventListener("click", async () => {
    try {
      if (navigator.clipboard && window.isSecureContext) await navigator.clipboard.writeText(text);
      else if (!copyByCommand(text)) throw new Error("copy refused");
      said("Copied");
    } catch {
      said(copyByCommand(text) ? "Copied" : "Copy failed");
    }
  });
  return button;
}

function copyByCommand(text) {
  const back = document.activeElement;
  const area = el("textarea", { class: "visually-hidden", readonly: true, tabindex: "-1" });
  area.value = text;
  document.body.append(area);
  area.focus();
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  area.remove();
  if (back && back.focus) back.focus();
  return ok;
}

// The answer (or refusal) brought into view: below the form on a phone, or after a long live trace, it would be off screen.
function reveal() {
  const result = $("result").firstElementChild;
  if (result) result.scrollIntoView({ block: "nearest" });
}

// The trace while a question runs: open, the result (draft answer, then the answer) below it, as the steps arrive.
function traceLive() {
  $("trace").after($("result"), $("notes"));
  $("trace").hidden = false;
  $("trace").open = true;
  $("trace-summary").textContent = "How the answer is being found";
}

// Done: the answer (or refusal) first, with its notes, and the trace below it, folded (a click opens it).
function traceDone(d) {
  const t = d.trace.totals;
  $("trace").before($("result"), $("notes"));
  $("trace").open = false;
  $("trace-summary").textContent = `How this ${d.refused ? "refusal" : "answer"} was found: ${t.steps} step${t.steps === 1 ? "" : "s"}, `
    + secs(t.latency_ms / 1000);
}

// Wall time, as the person waited it (queue, loading and all), and beside it the time the agent's nodes took.
function showDone(d) {
  $("progress").classList.add("done");
  $("progress").textContent = `Done in ${secs((performance.now() - started) / 1000)} `
    + `(agent ${secs(d.trace.totals.latency_ms / 1000)})`;
}

function setRunning(on) {
  $("stop-btn").hidden = !on;
}

// Stop: abort the request. The server hears the client go and drops the question (it leaves the queue, or stops at its
// next node and gives its place to the next question).
export function stop() {
  if (!running) return;
  const controller = running;
  running = null;
  controller.abort();
  setRunning(false);
  const pending = $("timeline").querySelector("li.pending");
  if (pending) {
    pending.classList.add("stopped");
    const spinner = pending.querySelector(".spinner");
    if (spinner) spinner.replaceWith(el("span", { class: "meta" }, "stopped"));
  }
  const draft = $("answer-draft");
  if (draft) {
    draft.removeAttribute("aria-busy");
    draft.querySelector(".draft-state").textContent = "stopped: not the whole answer";
  }
  $("progress").classList.add("done");
  $("progress").textContent = `Stopped after ${secs((performance.now() - started) / 1000)}`;
  $("question").focus();
}

// Whether the next question is a follow-up (and to how many turns), with the button that starts a new conversation.
function showFollowUp() {
  const sent = conversation.history(historyLimit).length;
  $("follow-up").hidden = !sent;
  $("follow-up-note").textContent = sent ? `Follow-up: asked with the last ${sent === 1 ? "turn" : `${sent} turns`}` : "";
}

// New conversation: the earlier turns forgotten (here and in sessionStorage), the page as for a first question.
export function newConversation() {
  stop();
  conversation.clear();
  conversation.render($("conversation"), []);
  for (const id of ["timeline", "result", "program", "notes", "asked"]) $(id).replaceChildren();
  $("asked").hidden = true;
  traceLive();
  $("trace").hidden = true;
  show($("ask-error"), "");
  $("progress").textContent = "";
  showFollowUp();
  $("question").value = "";
  $("question").focus();
}

// What playback.js draws a recorded run with: the live answer's own pieces.
const page = { showResult, traceLive, traceDone, stop, reveal };

export async function ask() {
  const question = $("question").value.trim();
  if (!question) return;
  if (running) running.abort();
  const controller = new AbortController();
  running = controller;
  setRunning(true);
  const history = conversation.history(historyLimit);
  conversation.render($("conversation"), conversation.all());  // the earlier turns, above this question
  $("asked").replaceChildren(el("span", { class: "muted" }, history.length ? "Follow-up: " : "Question: "), question);
  $("asked").hidden = false;
  $("timeline").replaceChildren();
  $("result").replaceChildren();
  $("program").replaceChildren();
  $("notes").replaceChildren();
  traceLive();
  show($("ask-error"), "");
  $("progress").classList.remove("done");
  $("progress").textContent = "Sending…";
  writing = false;
  retrieved.clear();
  lastRoute = null;
  lastAnswer = "";
  started = performance.now();
  const body = { question, config: $("config").value, artifact: $("artifact").value, history };
  const onEvent = (kind, data) => {
    if (running !== controller) return;  // stopped, or replaced by a newer question
    if (kind === "progress") { $("progress").textContent = progressText(data); playback.progress(question, body.config, data, page); }
    else if (kind === "program") showProgram(data);
    else if (kind === "start") { writing = false; $("timeline").append(pendingStep(data.index, data.node)); }
    else if (kind === "token") showDraft(data);
    else if (kind === "step") {
      for (const h of data.node === "retrieve" ? data.hits || [] : []) retrieved.add(h.chunk_id);
      if (data.node === "route" && data.route) lastRoute = data.route;
      const old = $("timeline").querySelector(`li[data-index="${Number(data.index)}"]`);
      const node = renderStep(data, ctx);
      if (old) old.replaceWith(node); else $("timeline").append(node);
    } else if (kind === "done") {
      // a turn of the conversation (a refusal too): shown above the next question, and sent with it
      lastAnswer = data.refused ? "" : String(data.answer || "");
      conversation.add(question, data.answer, data.refused);
      showFollowUp();
      showResult(data); traceDone(data); showDone(data); setRunning(false); reveal();
    }
    else if (kind === "error") {
      if ($("answer-draft")) $("result").replaceChildren();  // an answer cut short by the error is no answer
      show($("ask-error"), data.message); $("progress").textContent = ""; setRunning(false);
    }
  };
  try {
    await streamEvents("/api/stream", onEvent, controller.signal, body);
  } catch (e) {
    if (e.name !== "AbortError" && running === controller) {
      show($("ask-error"), e.message); $("progress").textContent = "";
      if (e.status === 503) playback.busy(question, body.config, page);  // the queue is full: a recorded run, if any
    }
  } finally {
    if (running === controller) { running = null; setRunning(false); }
  }
}

// rag serve --keep-sql FILE: a SQL step's statement, with the question it answered and the route it took.
async function keepQuery(step) {
  return getJSON("/api/keep", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ question: step.query || "", sql: step.result.sql || "", written: step.sql || "",
                           route: lastRoute, answer: lastAnswer }) });
}

export function initAsk(info) {
  if (info.keep_sql) ctx.keep = keepQuery;
  fillChoices(info);
  fillExamples(info.examples);
  $("question").maxLength = info.max_question_chars;
  historyLimit = info.max_history_chars;
  conversation.render($("conversation"), conversation.all());  // kept over a reload
  showFollowUp();
  $("new-conversation").addEventListener("click", newConversation);
  $("ask-form").addEventListener("submit", (e) => { e.preventDefault(); ask(); });
  $("stop-btn").addEventListener("click", stop);
  $("question").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); ask(); } });
}
