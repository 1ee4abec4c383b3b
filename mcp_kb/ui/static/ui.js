// mcp-kb admin page: live sync progress (polls /ui/status.json, updates in place) and the live filter
// of the failed-files table. Everything is written with textContent: nothing from the server is parsed as HTML.
"use strict";

function show(kb) {
  for (const box of document.querySelectorAll("[data-kb]")) {
    if (box.dataset.kb !== kb.name) continue;
    const bar = box.querySelector("[data-progress]");
    if (bar) {
      bar.hidden = !kb.sync_running;
      if (kb.sync_running) {
        const meter = bar.querySelector("progress");
        meter.max = Math.max(kb.progress.total || 1, 1);
        meter.value = kb.progress.done || 0;
        bar.querySelector(".progress-text").textContent = kb.progress_text;  // worded by the server
      }
    }
    for (const field of ["files", "chunks", "last_sync", "last_outcome", "last_error", "pending_text"]) {
      const cell = box.querySelector(`[data-field="${field}"]`);
      if (!cell) continue;
      const value = kb[field] === null || kb[field] === undefined ? "" : String(kb[field]);
      cell.textContent = field === "last_sync" ? kb.last_sync_text : value;  // worded by the server
      if (field === "last_error") cell.hidden = !value;
      if (field === "pending_text") cell.className = kb.pending_behind ? "notice alert" : "";
      if (field === "last_outcome") cell.className = "outcome-" + value.replace(/ /g, "-");
    }
  }
}

async function poll() {
  let running = false, wait = 0;
  try {
    const answer = await fetch("/ui/status.json", {credentials: "same-origin", cache: "no-store"});
    if (answer.status === 429) wait = 1000 * Number(answer.headers.get("retry-after") || 10);  // the token's rate limit
    if (answer.ok) {
      for (const kb of await answer.json()) {
        running = running || kb.sync_running;
        show(kb);
      }
    }
  } catch (error) {
    // the server restarting: try again on the next round
  }
  setTimeout(poll, Math.max(wait, running ? 700 : 3000));
}

function liveFilter(input) {
  const rows = document.getElementById(input.dataset.filter);
  const count = document.querySelector(`[data-count="${input.dataset.filter}"]`);
  input.addEventListener("input", () => {
    const wanted = input.value.toLocaleLowerCase();
    let shown = 0;
    for (const row of rows.rows) {
      row.hidden = !row.textContent.toLocaleLowerCase().includes(wanted);
      shown += row.hidden ? 0 : 1;
    }
    if (count) count.textContent = String(shown);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.querySelector("[data-kb]")) poll();
  for (const input of document.querySelectorAll("[data-filter]")) liveFilter(input);
  const passage = document.getElementById("passage");
  if (passage) passage.scrollIntoView({block: "center"});
});
