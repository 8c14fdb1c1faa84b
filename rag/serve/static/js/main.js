// Tabs (#ask, #evals, and #review with rag serve --review FILE) and start-up.
import { getJSON } from "./api.js";
import { initAsk } from "./ask.js";
import { initEvals, loadEvals } from "./evals.js";
import { initPassage } from "./passage.js";
import { initReview, loadReview } from "./review.js";
import { keyboardScroll, show } from "./dom.js";

const $ = (id) => document.getElementById(id);
let reviewing = false;  // the server has a golden file to review (/api/info's review)

function route() {
  const view = location.hash === "#evals" ? "evals" : location.hash === "#review" && reviewing ? "review" : "ask";
  for (const name of ["ask", "evals", "review"]) {
    $(`view-${name}`).hidden = view !== name;
    $(`tab-${name}`).classList.toggle("active", view === name);
  }
  if (view === "evals") loadEvals();
  if (view === "review") loadReview();
}

async function start() {
  initPassage();
  initEvals();
  document.querySelectorAll(".table-scroll").forEach(keyboardScroll);  // the page's own (the runs, the metrics)
  window.addEventListener("hashchange", route);
  route();
  try {
    const info = await getJSON("/api/info");
    initAsk(info);
    if (info.review) {
      reviewing = true;
      initReview(info.review);
      $("tab-review").hidden = false;
      route();
    }
    document.body.dataset.ready = "1";
  } catch (e) {
    show($("ask-error"), `Could not load the configuration: ${e.message}`);
  }
}

start();
