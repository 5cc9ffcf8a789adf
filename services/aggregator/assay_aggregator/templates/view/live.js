// Live updates: follow the page's slice of the log (server-sent events) and list each
// event as text. Nothing received is ever parsed as markup (textContent only).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const url = document.body.dataset.live;
  const list = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!url || !list) return;
  const source = new EventSource(url);
  source.onopen = () => { status.textContent = "live"; };
  source.onerror = () => { status.textContent = "reconnecting…"; };
  source.addEventListener("logged", (message) => {
    const e = JSON.parse(message.data);
    const item = document.createElement("li");
    item.className = "event";
    item.dataset.type = e.type;
    item.textContent = `#${e.sequence} ${e.type} ${e.run_id} ${e.summary}`;
    list.prepend(item);
    status.textContent = `live: ${list.children.length} new event(s), reload for the full page`;
  });
});
