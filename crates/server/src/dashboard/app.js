// The pinfold dashboard: the same REST API an agent uses, with the session cookie the sign-in
// set (HttpOnly, SameSite=Strict). Everything a request or a command put into the data is
// shown through textContent, never parsed as HTML, with control and bidirectional-override
// characters made visible, so an action shows exactly what would run.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);

// Control characters (escape sequences, carriage returns) and bidi overrides as \u{..}.
function shown(text) {
  return String(text ?? "").replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (c) => "\\u{" + c.codePointAt(0).toString(16) + "}");
}

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  let data = null;
  try { data = await r.json(); } catch (_) { data = null; }
  if (r.status === 401) { showLogin(); }
  if (!r.ok) {
    const e = new Error(data && data.error ? data.error.message : "HTTP " + r.status);
    e.status = r.status;
    throw e;
  }
  return data;
}

// --- sign in ---

function showLogin() {
  $("#login").hidden = false;
  $("#nav").hidden = true;
  $("#who").hidden = true;
  document.querySelectorAll(".view").forEach((v) => (v.hidden = true));
}

async function signIn(ev) {
  ev.preventDefault();
  $("#login-error").textContent = "";
  try {
    await api("POST", "/dashboard/login", { token: $("#token").value });
    $("#token").value = "";
    await start();
  } catch (e) {
    $("#login-error").textContent = e.message;
  }
}

async function signOut() {
  try { await api("POST", "/dashboard/logout"); } catch (_) { /* signed out either way */ }
  showLogin();
}

// --- views ---

let current = "approvals";
function show(view) {
  current = view;
  document.querySelectorAll(".view").forEach((v) => (v.hidden = v.id !== view));
  document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("on", t.dataset.view === view));
  refresh();
}

function detail(dl, key, value) {
  const dt = document.createElement("dt");
  dt.textContent = key;
  const dd = document.createElement("dd");
  dd.textContent = shown(value);
  dl.append(dt, dd);
}

function approvalCard(a) {
  const card = $("#approval-card").content.firstElementChild.cloneNode(true);
  card.dataset.id = a.id;
  $(".id", card).textContent = a.id;
  $(".by", card).textContent = shown(a.requested_by);
  $(".sandbox", card).textContent = a.sandbox;
  const st = $(".status", card);
  st.textContent = a.status;
  st.classList.add(a.status);
  $(".reason", card).textContent = shown(a.reason);
  const act = a.action || {};
  $(".command", card).textContent = shown(act.command ?? JSON.stringify(act));
  const dl = $(".details", card);
  detail(dl, "workspace", act.workspace);
  detail(dl, "preset", act.preset ?? "(the policy's)");
  if (act.stdin != null) detail(dl, "stdin", act.stdin);
  detail(dl, "timeout", (act.timeout_s ?? "") + " s");
  detail(dl, "action hash", a.action_hash);
  if (a.decided_by) detail(dl, "decided by", a.decided_by + (a.decision_reason ? " — " + a.decision_reason : ""));
  if (a.status !== "pending") $(".decide", card).hidden = true;
  const r = a.result;
  if (r) {
    $(".result", card).hidden = false;
    if (r.error) {
      $(".exit", card).textContent = "not run: " + shown(r.error.message || r.error.code);
    } else {
      $(".exit", card).textContent = "exit " + r.exit_code + (r.timed_out ? " (timed out)" : "") + " in " + r.duration_ms + " ms";
      $(".stdout", card).textContent = shown(r.stdout);
      $(".stderr", card).textContent = shown(r.stderr);
    }
  }
  const decide = async (how) => {
    $(".error", card).textContent = "";
    try {
      await api("POST", "/v1/approvals/" + encodeURIComponent(a.id) + "/" + how, { reason: $(".why", card).value || null });
      card.querySelector(".why").blur();
      refresh();
    } catch (e) {
      $(".error", card).textContent = e.message;
    }
  };
  $(".approve", card).addEventListener("click", () => decide("approve"));
  $(".deny", card).addEventListener("click", () => decide("deny"));
  return card;
}

async function refreshApprovals() {
  const pending = (await api("GET", "/v1/approvals?status=pending")).approvals;
  const all = (await api("GET", "/v1/approvals?limit=30")).approvals.filter((a) => a.status !== "pending");
  $("#pending-count").textContent = pending.length ? "(" + pending.length + ")" : "";
  $("#no-pending").hidden = pending.length > 0;
  // Cards are rebuilt only when what they show changed, and never under someone typing a
  // reason: a button does not move away from the pointer between refreshes.
  const typing = document.activeElement && document.activeElement.classList.contains("why");
  const p = JSON.stringify(pending);
  if (!typing && p !== lastPending) {
    lastPending = p;
    $("#pending").replaceChildren(...pending.map(approvalCard));
  }
  const d = JSON.stringify(all);
  if (d !== lastDecided) {
    lastDecided = d;
    $("#decided").replaceChildren(...all.map(approvalCard));
  }
}
let lastPending = null;
let lastDecided = null;

function sandboxCard(s) {
  const card = $("#sandbox-card").content.firstElementChild.cloneNode(true);
  card.dataset.id = s.id;
  $(".id", card).textContent = s.id;
  $(".owner", card).textContent = shown(s.owner);
  $(".preset", card).textContent = s.preset ?? "(the policy's)";
  $(".expires", card).textContent = new Date(s.expires_at * 1000).toISOString();
  $(".workspace", card).textContent = shown(s.workspace);
  $(".run", card).addEventListener("submit", (ev) => {
    ev.preventDefault();
    runLive(s.id, $("input.command", card).value, card);
  });
  return card;
}

// Run a command and show its output as it comes (server-sent events over fetch).
async function runLive(id, command, card) {
  const out = $(".output", card);
  const exit = $(".exit", card);
  out.textContent = "";
  exit.textContent = "running…";
  const r = await fetch("/v1/sandboxes/" + encodeURIComponent(id) + "/exec", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({ command }),
  });
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { msg = (await r.json()).error.message; } catch (_) { /* keep the status */ }
    exit.textContent = msg;
    return;
  }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const ev = /^event: (.*)$/m.exec(block);
      const data = /^data: (.*)$/m.exec(block);
      if (!ev || !data) continue;
      const d = JSON.parse(data[1]);
      if (ev[1] === "stdout" || ev[1] === "stderr") out.textContent += shown(d.data);
      else if (ev[1] === "result") exit.textContent = "exit " + d.exit_code + " in " + d.duration_ms + " ms";
      else if (ev[1] === "approval") exit.textContent = "needs approval: " + d.approval.id;
      else if (ev[1] === "error") exit.textContent = shown(d.error.message);
    }
  }
}

async function refreshSandboxes() {
  const list = (await api("GET", "/v1/sandboxes")).sandboxes;
  $("#no-sandboxes").hidden = list.length > 0;
  const known = new Set([...document.querySelectorAll("#sandbox-list .sandbox")].map((c) => c.dataset.id));
  const same = list.length === known.size && list.every((s) => known.has(s.id));
  if (!same) $("#sandbox-list").replaceChildren(...list.map(sandboxCard));
}

let ledgerAfter = null;
async function refreshLedger(older) {
  const v = await api("GET", "/v1/ledger/verify");
  const badge = $("#verify");
  badge.textContent = v.status;
  badge.className = "badge " + v.status;
  $("#verify-detail").textContent = v.records + " records, head " + v.head.slice(0, 16) + (v.problem ? " — " + v.problem : "");
  if (older && ledgerAfter !== null) ledgerAfter = Math.max(-1, ledgerAfter - 50);
  else ledgerAfter = Math.max(-1, v.records - 51);
  const q = ledgerAfter >= 0 ? "?limit=50&after=" + ledgerAfter : "?limit=50";
  const page = await api("GET", "/v1/ledger" + q);
  const rows = page.records.slice().reverse().map((rec) => {
    const tr = document.createElement("tr");
    const d = rec.data || {};
    const what = d.action ? (d.action.command ?? d.action.path ?? d.action.kind) : (d.command ?? d.approval ?? d.sandbox ?? "");
    const cells = [rec.seq, rec.ts ?? rec.time ?? "", rec.kind, d.actor ?? d.by ?? "", what];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = shown(typeof c === "string" ? c : JSON.stringify(c));
      tr.append(td);
    }
    tr.lastElementChild.className = "what";
    return tr;
  });
  $("#ledger-table tbody").replaceChildren(...rows);
}

async function refresh() {
  try {
    if (current === "approvals") await refreshApprovals();
    else if (current === "sandboxes") await refreshSandboxes();
    else if (current === "ledger") await refreshLedger(false);
  } catch (e) {
    if (e.status !== 401) console.error(e);
  }
}

async function start() {
  let me;
  try {
    me = await api("GET", "/dashboard/me");
  } catch (_) {
    showLogin();
    return;
  }
  $("#login").hidden = true;
  $("#nav").hidden = false;
  $("#who").hidden = false;
  $("#who-name").textContent = shown(me.name);
  show(current);
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login-form").addEventListener("submit", signIn);
  $("#signout").addEventListener("click", signOut);
  document.querySelectorAll(".tab").forEach((t) => t.addEventListener("click", () => show(t.dataset.view)));
  $("#ledger-older").addEventListener("click", () => refreshLedger(true));
  setInterval(() => { if (!$("#nav").hidden && current !== "ledger") refresh(); }, 1000);
  start();
});
