// Live updates: follow the page's slice of the log (server-sent events) and list each
// event as text; on a run page, new steps and verdicts are also drawn in place. Nothing
// received is ever parsed as markup: elements are made here and filled by textContent.
"use strict";

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function blobLink(url, size) {
  // Only the viewer's own blob route, by hash.
  if (!/^\/blob\/[0-9a-f]{64}\?name=output\.txt$/.test(url)) return null;
  const a = el("a", `full output (${size} bytes)`);
  a.href = url;
  return a;
}

function drawStep(d) {
  const item = el("li");
  item.id = `step-${d.step}`;
  item.dataset.live = "1";
  const heading = el("h3");
  const self = el("a", `step ${d.step}`);
  self.href = `#step-${d.step}`;  // each step can be linked to, like the drawn ones
  heading.append(self);
  item.append(heading, el("p", d.note, "note"));
  if (d.model_output) item.append(el("pre", d.model_output, "text"));
  for (const call of d.calls) {
    const box = el("div", null, "call");
    box.append(el("b", call.name), el("pre", call.arguments, "text"));
    for (const r of call.results) {
      const res = el("div", null, r.is_error ? "result bad" : "result");
      const exit = r.exit_code === null ? "" : `exit ${r.exit_code} · `;
      const cut = r.truncated ? " · truncated" : "";
      res.append(el("span", `→ ${exit}${Math.round(r.duration_ms)} ms${cut}`, "note"));
      res.append(el("pre", r.output, "text"));
      const link = r.blob ? blobLink(r.blob, r.blob_size) : null;
      if (link) res.append(link);
      box.append(res);
    }
    item.append(box);
  }
  return item;
}

function drawVerdict(d) {
  const card = el("div", null, "card");
  card.dataset.live = "1";
  card.append(el("h3", d.judge));
  if (d.failed !== undefined) {
    card.append(el("p", `failed: ${d.failed} (${d.attempts} attempts)`, "bad"));
    return card;
  }
  card.append(el("p", d.model, "note"));
  const scores = Object.entries(d.scores);
  if (scores.length) {
    const table = el("table");
    for (const [dim, score] of scores) {
      const row = el("tr");
      row.append(el("td", dim), el("td", score));
      table.append(row);
    }
    card.append(table);
  }
  if (d.tags.length) card.append(el("p", `tags: ${d.tags.join(", ")}`));
  if (d.rationale) card.append(el("pre", d.rationale, "text"));
  if (d.attempts > 1) card.append(el("p", `repaired: ${d.attempts} attempts`, "repair"));
  if (d.checks.length) {
    const list = el("ul", null, "checks");
    for (const c of d.checks) list.append(el("li", c));
    card.append(list);
  }
  return card;
}

function drawInPlace(e) {
  if (!e.detail) return false;
  if (e.type === "AgentStepLogged") {
    const steps = document.querySelector("#live-steps ol.steps");
    if (!steps) return false;
    steps.append(drawStep(e.detail));
    return true;
  }
  const verdicts = document.querySelector("#live-verdicts .side");
  if (!verdicts) return false;
  verdicts.append(drawVerdict(e.detail));
  return true;
}

document.addEventListener("DOMContentLoaded", () => {
  const url = document.body.dataset.live;
  const list = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!url || !list) return;
  const source = new EventSource(url);
  let drawn = 0;
  source.onopen = () => { status.textContent = "live"; };
  source.onerror = () => { status.textContent = "reconnecting…"; };
  source.addEventListener("logged", (message) => {
    const e = JSON.parse(message.data);
    const item = el("li", `#${e.sequence} ${e.type} ${e.run_id} ${e.summary}`, "event");
    item.dataset.type = e.type;
    list.prepend(item);
    if (drawInPlace(e)) drawn += 1;
    const more = list.children.length - drawn;
    status.textContent = drawn
      ? `live: ${drawn} drawn in place${more ? `, ${more} other event(s) listed below` : ""}`
      : `live: ${list.children.length} new event(s), reload for the full page`;
  });
});
