// The conversation: the questions asked on this page and the answers they got, kept in the browser only (in memory
// and in sessionStorage, so a reload keeps it; the server keeps nothing). Each question is sent with the last turns;
// the agent makes a follow-up standalone from them (the trace's condense step). A refused question is a turn too
// (its answer is the refusal); a stopped one is not.
import { el } from "./dom.js";

const KEY = "sieve.conversation";
const KEPT = 20;  // turns kept and shown; the oldest go first
const SENT = 4;  // turns sent with a question (the agent reads at most its setting history_turns, default 3)
const SENT_ANSWER_CHARS = 2000;  // of each answer sent: the condenser reads only the start of each
const SENT_CHARS = 8000;  // turns sent, in characters together (the oldest dropped first; the latest always goes)

let turns = load();

function valid(t) {
  return t && typeof t.question === "string" && typeof t.answer === "string" && t.question.trim();
}

function load() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(KEY) || "[]");
    return Array.isArray(stored) ? stored.filter(valid).slice(-KEPT) : [];
  } catch {
    return [];  // storage disabled, or not ours: start empty
  }
}

function save() {
  try {
    if (turns.length) sessionStorage.setItem(KEY, JSON.stringify(turns));
    else sessionStorage.removeItem(KEY);
  } catch { /* storage disabled or full: the conversation lasts as long as the page */ }
}

export function all() {
  return turns.slice();
}

export function add(question, answer, refused) {
  turns.push({ question, answer: answer || "", refused: Boolean(refused) });
  turns = turns.slice(-KEPT);
  save();
}

export function clear() {
  turns = [];
  save();
}

// The history a question is sent with: the last SENT turns as {question, answer}, each answer cut, the oldest left out
// while they are over `limit` characters (the server's own bound, from /api/info) or SENT_CHARS.
export function history(limit) {
  const budget = Math.min(SENT_CHARS, limit || SENT_CHARS);
  let sent = turns.slice(-SENT).map((t) => ({ question: t.question, answer: t.answer.slice(0, SENT_ANSWER_CHARS) }));
  const size = (list) => list.reduce((n, t) => n + t.question.length + t.answer.length, 0);
  while (sent.length > 1 && size(sent) > budget) sent = sent.slice(1);
  return sent;
}

// The earlier turns, compact (question and answer text, no trace), above the current question; hidden when none.
export function render(box, list) {
  box.hidden = !list.length;
  box.replaceChildren(...(list.length ? [
    el("h2", {}, `Earlier in this conversation (${list.length})`),
    el("ol", { class: "turns" }, list.map((t) => el("li", { class: `turn${t.refused ? " refused" : ""}` },
      el("div", { class: "turn-question" }, t.question),
      el("div", { class: "turn-answer" }, t.answer))))] : []));
}
