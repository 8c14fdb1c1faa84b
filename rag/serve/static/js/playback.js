// Recorded runs (GET /api/recording, rag.serve.recordings: an eval run's answer to the same question). When the server
// is busy (503, its queue full) or the model is still loading, the page offers the question's recording, if it has one,
// and plays it back: its steps one by one, then its answer, drawn as a live answer is (trace.js, ask.js's showResult),
// under a label that stays, says it is a recording, and names its date and model. The label lives in #program, which
// every new question clears and a live answer's program replaces: a live answer never carries it.
import { getJSON } from "./api.js";
import { el, show } from "./dom.js";
import { openPassage } from "./passage.js";
import { renderStep } from "./trace.js";

const $ = (id) => document.getElementById(id);
const ctx = { onPassage: openPassage };
const STEP_MS = 450;  // between two steps played back: slow enough to follow, and no one mistakes it for a model's pace
const known = new Map();  // example question -> what its recording is (/api/info): offered while the model loads

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const day = (iso) => String(iso || "").slice(0, 10);  // "2026-11-29" of the UTC time rag eval wrote
const url = (question, config) => `/api/recording?${new URLSearchParams({ question, config: config || "" })}`;

// The models that answered, the judge aside (it graded the run, not the answer): one name when the roles share it.
function modelText(models) {
  const used = Object.entries(models || {}).filter(([role]) => role !== "judge");
  const names = [...new Set(used.map(([, m]) => String(m)))];
  return names.length === 1 ? names[0] : used.map(([role, m]) => `${role}=${m}`).join(", ");
}

// The examples (/api/info), each with its recording's date, configuration and models, or none.
export function examples(list) {
  known.clear();
  for (const e of list || []) if (e.recording) known.set(e.question, e.recording);
}

function offer(rec, why, onplay) {
  return el("div", { id: "recording-offer", class: "recording-offer" }, el("p", {}, why),
    el("button", { type: "button", id: "recording-btn", onclick: onplay },
      `Show a recorded answer (recorded ${day(rec.recorded_at)} with ${modelText(rec.models)})`));
}

// The server refused the question (503): its recording, when there is one, is offered below the message. Nothing is
// offered when another question has been asked since.
export async function busy(question, config, page) {
  const error = $("ask-error");
  const said = error.textContent;
  let rec;
  try { rec = await getJSON(url(question, config)); } catch { return; }  // none (404), or the server is gone
  if (error.hidden || error.textContent !== said || $("result").childElementCount) return;
  $("result").replaceChildren(offer(rec, "An evaluation run answered this question before; you can watch that run "
    + "instead, or ask again later for a live answer.", () => play(rec, page)));
}

// Each progress event of a live question: while its program loads, an example's recording is offered (showing it stops
// the question; the model goes on loading for the next one); once loading is over, the offer goes.
export function progress(question, config, p, page) {
  const shown = $("recording-offer");
  if (p.state !== "loading") { if (shown) shown.remove(); return; }
  const rec = known.get(question);
  if (!rec || shown || $("result").childElementCount) return;
  $("result").replaceChildren(offer(rec, "The model is still loading. An evaluation run answered this question before; "
    + "showing it stops this question, and the model goes on loading for the next one.", async () => {
    try { await play(await getJSON(url(question, config)), page); } catch (e) { show($("ask-error"), e.message); }
  }));
}

// Play a recording back: the live question, if any, stopped; the label; the steps one by one; the answer (or refusal).
// A question asked meanwhile clears #program and the label with it: the playback then stops where it is.
export async function play(rec, page) {
  page.stop();
  const label = el("div", { id: "recorded-label", class: "recorded-label", role: "note", tabindex: "-1" }, "Recorded run, ",
    el("time", { datetime: rec.recorded_at }, day(rec.recorded_at)), `, ${modelText(rec.models)} — not a live answer`);
  const settings = Object.entries(rec.settings || {}).filter(([, v]) => v !== null).map(([k, v]) => `${k}=${v}`).join(", ");
  $("program").replaceChildren(label, el("div", { class: "muted" },
    `config ${rec.config || "unknown"}${settings ? ` (${settings})` : ""} · eval run ${rec.run}, item ${rec.item}`));
  for (const id of ["timeline", "result", "notes"]) $(id).replaceChildren();
  label.focus();  // the offer's button is gone: focus goes where the recording is said to be one
  show($("ask-error"), "");
  page.traceLive();
  $("progress").classList.remove("done");
  $("progress").textContent = "Playing back a recorded run…";
  for (const [i, step] of rec.steps.entries()) {
    await sleep(STEP_MS);
    if (!label.isConnected) return;
    $("timeline").append(renderStep(step, ctx));
    $("progress").textContent = `Playing back a recorded run: step ${i + 1} of ${rec.steps.length}…`;
  }
  await sleep(STEP_MS);
  if (!label.isConnected) return;
  page.showResult(rec.done);
  page.traceDone(rec.done);
  const box = $("result").firstElementChild;
  if (box) { box.classList.add("recorded"); box.setAttribute("aria-describedby", "recorded-label"); }
  $("progress").classList.add("done");
  $("progress").textContent = `Played back a run recorded ${day(rec.recorded_at)}; ask again for a live answer`;
  page.reveal();
}
