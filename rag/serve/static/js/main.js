// Tabs (#ask, #evals) and start-up.
import { getJSON } from "./api.js";
import { initAsk } from "./ask.js";
import { initEvals, loadEvals } from "./evals.js";
import { initPassage } from "./passage.js";
import { show } from "./dom.js";

const $ = (id) => document.getElementById(id);

function route() {
  const evals = location.hash === "#evals";
  $("view-ask").hidden = evals;
  $("view-evals").hidden = !evals;
  $("tab-ask").classList.toggle("active", !evals);
  $("tab-evals").classList.toggle("active", evals);
  if (evals) loadEvals();
}

async function start() {
  initPassage();
  initEvals();
  window.addEventListener("hashchange", route);
  route();
  try {
    initAsk(await getJSON("/api/info"));
    document.body.dataset.ready = "1";
  } catch (e) {
    show($("ask-error"), `Could not load the configuration: ${e.message}`);
  }
}

start();
