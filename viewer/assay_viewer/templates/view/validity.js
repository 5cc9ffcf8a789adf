// The judges page's "Judge validity (human)" table, redrawn when a verdict is logged:
// it follows the campaign's slice of the log and, on each JudgmentRecorded, fetches the
// table's rows as JSON from the viewer and writes them with textContent only.
"use strict";

function cell(x) {
  if (x === null || x === undefined) return "—";
  return typeof x === "number" && !Number.isInteger(x) ? x.toFixed(2) : String(x);
}

async function redraw(section) {
  const response = await fetch(section.dataset.src, { credentials: "same-origin" });
  if (!response.ok) return;
  const data = await response.json();
  document.getElementById("human-count").textContent = String(data.human_verdicts);
  const body = document.getElementById("human-rows");
  body.replaceChildren();
  for (const r of data.rows) {
    const row = document.createElement("tr");
    const cells = [r.subject || r.subject_kind, r.runs, r.n_runs,
      `${cell(r.subject_pass_share)} / ${cell(r.human_pass_share)}`, cell(r.kappa),
      `${cell(r.kappa_low)} – ${cell(r.kappa_high)}`, cell(r.pabak), cell(r.weighted_kappa),
      cell(r.spearman),
      r.both_pass, r.subject_only_pass, r.human_only_pass, r.both_fail];
    for (const value of cells) {
      const td = document.createElement("td");
      td.textContent = String(value);
      row.append(td);
    }
    body.append(row);
  }
  const warnings = document.getElementById("human-warnings");
  warnings.replaceChildren();
  for (const w of data.warnings) {
    const li = document.createElement("li");
    li.textContent = w;
    warnings.append(li);
  }
  section.dataset.drawn = String(data.human_verdicts);
}

document.addEventListener("DOMContentLoaded", () => {
  const section = document.getElementById("human-validity");
  if (!section || !section.dataset.live) return;
  const source = new EventSource(section.dataset.live);
  source.addEventListener("logged", (message) => {
    const e = JSON.parse(message.data);
    if (e.type === "JudgmentRecorded") redraw(section);
  });
});
