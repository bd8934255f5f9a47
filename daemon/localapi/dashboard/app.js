// The fly dashboard: it follows GET /v1/events (flyd's status, sent again
// on every change) and a selected run's GET /v1/runs/{id}/logs?follow=1,
// resuming after the last seq it showed when the connection comes back.
// The runs that have ended, and the names of their projects, come from
// GET /v1/runs once a connection starts and when a run of a root it has
// not named appears: the page never polls.
// The token comes once in the address's fragment (#token=..., which the
// browser never sends to a server), is kept in sessionStorage (per
// origin, port included: no other local server can read it, as it could
// a cookie) and goes to flyd as an Authorization header on every fetch.
"use strict";

const token = (() => {
  const m = /(?:^#|&)token=([0-9a-fA-F]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("fly_token", m[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("fly_token") || "";
})();

// api fetches from flyd with the token, and never with cookies.
function api(path, init = {}) {
  return fetch(path, { ...init, credentials: "omit", headers: { ...(init.headers || {}), Authorization: "Bearer " + token } });
}

const $ = (sel) => document.querySelector(sel);
const runs = new Map();   // run_id -> wire.Run, live and ended
const projects = new Map(); // root -> the name of its pubspec.yaml
const asked = new Set();  // roots GET /v1/runs was asked to name
const progress = new Map(); // run_id -> newest log line of a build
let selected = null;      // the run whose log is shown
let logAbort = null;
let paused = false, held = [];
let lastSeq = 0;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k ?? ""));
  return e;
}

// lines reads an NDJSON response body line by line.
async function* lines(resp) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim()) yield JSON.parse(line);
    }
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// follow calls open until the page is closed, waiting a little after each
// failure: flyd restarting is a pause, not the end.
async function follow(name, open) {
  for (;;) {
    try { await open(); } catch (e) { /* reconnect below */ }
    await sleep(500);
  }
}

function setConn(on, text) {
  const c = $("#conn");
  c.className = "conn " + (on ? "on" : "off");
  c.textContent = text;
}

function duration(r) {
  const start = new Date(r.started_at).getTime();
  const end = r.ended_at ? new Date(r.ended_at).getTime() : Date.now();
  const s = Math.max(0, Math.round((end - start) / 1000));
  return s < 60 ? s + "s" : Math.floor(s / 60) + "m " + (s % 60) + "s";
}

function device(r) {
  const i = (r.argv || []).findIndex((a) => a === "-d" || a === "--device-id");
  return i >= 0 ? r.argv[i + 1] : "";
}

// appName is what a run's App column says: its project's name (from its
// pubspec.yaml), else the last element of its root.
function appName(r) {
  return projects.get(r.root) || (r.root || "").split(/[\\/]/).filter(Boolean).pop() || "";
}

const isLive = (r) => r.state === "running" || r.state === "starting";
// A failed run whose app had started crashed (flyd says which: r.crashed).
const shownState = (r) => (r.crashed ? "crashed" : r.state);

// listed reports whether the runs table shows r: runs and builds (and the
// apps fly follows), not one-shot tools nor upstream servers, which have
// their own section.
const listed = (r) => r.kind !== "tool" && r.kind !== "upstream";

// loadRuns reads every run flyd keeps, the ended ones with their final
// records, and the names of their projects.
let loading = null;
function loadRuns() {
  if (loading) return loading;
  loading = (async () => {
    try {
      const resp = await api("/v1/runs");
      if (!resp.ok) return;
      const list = await resp.json();
      for (const [root, name] of Object.entries(list.projects || {})) projects.set(root, name);
      for (const r of list.runs || []) {
        asked.add(r.root);
        const known = runs.get(r.run_id);
        // The status says what is live; an ended run's record is final.
        if (!listed(r) || (known && isLive(r) && !isLive(known))) continue;
        runs.set(r.run_id, r);
      }
      renderRuns();
    } catch (e) { /* the next connection asks again */ } finally { loading = null; }
  })();
  return loading;
}

function bytes(n) {
  if (!n) return "-";
  const u = ["B", "KiB", "MiB", "GiB"]; let i = 0;
  while (n >= 1024 && i < 3) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}

async function post(path) {
  const r = await api(path, { method: "POST" });
  if (!r.ok) { const t = await r.text(); alert(t); }
  return r;
}

function renderStatus(st) {
  $("#daemon").textContent = `flyd ${st.version}, pid ${st.pid}`;
  $("#daemon").dataset.pid = st.pid;
  // Workspaces with their sessions.
  const wsBox = $("#workspaces");
  wsBox.replaceChildren();
  const byRoot = new Map((st.workspaces || []).map((w) => [w.root, { w, sessions: [] }]));
  for (const s of st.sessions || []) {
    if (!byRoot.has(s.workspace)) byRoot.set(s.workspace, { w: { root: s.workspace, files: 0 }, sessions: [] });
    byRoot.get(s.workspace).sessions.push(s);
  }
  if (byRoot.size === 0) wsBox.append(el("p", { class: "muted" }, "No workspace is open: an editor's flyctl mcp opens one."));
  for (const { w, sessions } of byRoot.values()) {
    const ul = el("ul");
    for (const s of sessions) {
      const since = new Date(s.since).toLocaleTimeString();
      ul.append(el("li", { "data-session": s.id },
        `${s.client_name || "unknown client"} ${s.client_version || ""} — via ${s.via}, since ${since}, ${s.tools_called} tools called, ${s.files_read} files read`));
    }
    if (!sessions.length) ul.append(el("li", { class: "muted" }, "no session (kept warm for a while)"));
    wsBox.append(el("div", { class: "ws" }, el("strong", { class: "mono" }, w.root), el("span", { class: "muted" }, `  ${w.files} files`), ul));
  }
  // Runs: the live ones from the status; an ended one is fetched once.
  const live = new Set();
  let unnamed = false;
  for (const r of (st.runs || []).filter(listed)) {
    runs.set(r.run_id, r); live.add(r.run_id);
    if (!asked.has(r.root)) { asked.add(r.root); unnamed = true; }
  }
  if (unnamed) loadRuns();
  for (const [id, r] of runs) {
    if (!live.has(id) && isLive(r)) {
      r.state = "ending…";
      api(`/v1/runs/${encodeURIComponent(id)}`)
        .then((x) => x.ok ? x.json() : null).then((x) => { if (x) { runs.set(id, x); renderRuns(); } });
    }
  }
  renderRuns();
  // Apps an IDE or a terminal runs, found through their DTD.
  const apps = st.apps || [];
  $("#apps-section").hidden = apps.length === 0;
  $("#apps tbody").replaceChildren(...apps.map((a) => el("tr", { "data-app": a.app_id },
    el("td", { class: "mono" }, a.app_id), el("td", {}, a.name), el("td", {}, a.ide || "-"),
    el("td", {}, new Date(a.since).toLocaleTimeString()), el("td", { class: "mono" }, a.vm_service_uri), el("td", { class: "mono" }, a.workspace))));
  // Upstreams.
  const ups = st.upstreams || [];
  $("#upstreams-section").hidden = ups.length === 0;
  const ub = $("#upstreams tbody");
  ub.replaceChildren(...ups.map((u) => el("tr", {},
    el("td", {}, u.name), el("td", { class: "state-" + u.state }, u.state + (u.error ? " — " + u.error : "")),
    el("td", {}, u.pid || "-"), el("td", {}, u.protocol || "-"), el("td", {}, String(u.sessions)), el("td", {}, String(u.restarts)),
    el("td", {}, bytes(u.rss_bytes)), el("td", { class: "mono" }, u.workspace || "(" + u.share + ")"))));
}

function renderRuns() {
  const tb = $("#runs tbody");
  const list = [...runs.values()].sort((a, b) => b.started_at.localeCompare(a.started_at));
  $("#no-runs").hidden = list.length > 0;
  tb.replaceChildren(...list.map((r) => {
    const live = isLive(r);
    const actions = el("td", {});
    if (live && r.kind === "run") {
      actions.append(el("button", { type: "button", "data-action": "reload", onclick: () => post(`/v1/runs/${r.run_id}/reload`) }, "Hot reload"), " ",
        el("button", { type: "button", "data-action": "restart", onclick: () => post(`/v1/runs/${r.run_id}/reload?full=1`) }, "Hot restart"), " ");
    }
    if (live) actions.append(el("button", { type: "button", class: "danger", "data-action": "stop", onclick: () => post(`/v1/runs/${r.run_id}/stop`) }, "Stop"));
    const tr = el("tr", { "data-run": r.run_id, class: r.run_id === selected ? "selected" : "" },
      el("td", {}, el("a", { class: "run mono", onclick: () => select(r.run_id) }, r.run_id)),
      el("td", {}, r.kind), el("td", { class: "state state-" + shownState(r) }, shownState(r)),
      el("td", { class: "app", title: [r.app_id, r.root].filter(Boolean).join(" — ") }, appName(r)),
      el("td", { class: "device" }, device(r)), el("td", {}, duration(r)), el("td", {}, r.exit_code ?? ""),
      el("td", { class: "by" }, r.started_by ? r.started_by.client || "unnamed" : r.kind === "upstream" ? "flyd" : "-"),
      el("td", { class: r.errors && r.errors.current ? "errors-count" : "muted" }, r.errors ? String(r.errors.current) : ""),
      el("td", { class: "muted" }, r.kind !== "run" && live ? (progress.get(r.run_id) || "") : (r.error || ""),
        r.claim ? el("div", { class: "claim" }, `claimed by ${r.claim.by.client} until ${new Date(r.claim.until).toLocaleTimeString()}` + (r.claim.note ? `: ${r.claim.note}` : "")) : "",
        r.last_action && r.last_action.what !== "start" ? el("div", {}, `last: ${r.last_action.what} by ${r.last_action.by.client}: ${r.last_action.outcome || ""}`) : ""),
      actions);
    return tr;
  }));
}

function filterRE() {
  const q = $("#search").value;
  if (!q) return null;
  try { return new RegExp(q, "i"); } catch { return null; }
}

// Lines are added in batches, once per tick: one layout per batch, not
// per line, so a run printing thousands of lines a second stays live.
let pending = [], flushing = false;
function appendLine(e) {
  pending.push(e);
  if (!flushing) { flushing = true; setTimeout(flushLines, 16); }
}

function flushLines() {
  flushing = false;
  const pre = $("#log-lines");
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  const re = filterRE();
  const frag = document.createDocumentFragment();
  for (const e of pending.splice(0)) {
    const text = e.type === "gap" ? `… ${e.text}` : `${e.seq} ${new Date(e.time).toLocaleTimeString()} ${e.text}`;
    const div = el("div", { class: "line stream-" + (e.stream || "fly"), "data-seq": e.seq, "data-time": e.time }, text);
    if (re && !re.test(text)) div.hidden = true;
    if (e.stream === "event") events++;
    frag.append(div);
  }
  pre.append(frag);
  for (let extra = pre.childElementCount - 5000; extra > 0; extra--) {
    if (pre.firstElementChild.classList.contains("stream-event")) events--;
    pre.firstElementChild.remove();
  }
  $("#events-count").textContent = `(${events})`;
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}

// Machine events (flutter's --machine protocol: app.progress, app.started
// …) are hidden unless the toggle shows them: a run's log is the app's.
let events = 0;
function showEvents() {
  $("#log-lines").classList.toggle("hide-events", !$("#show-events").checked);
}

// The errors panel follows the selected run's GET /v1/runs/{id}/errors?follow=1:
// each page holds the errors that changed, which replace what it showed.
// flyd keeps a run's error list in memory only: the panel of an ended run
// lists the errors of its log instead (the error stream: each as flutter
// rendered it), deduplicated as flyd does.
let errorsAbort = null;
let logErrors = null; // summary -> {count, where}, for an ended run
function followErrors(id) {
  if (errorsAbort) errorsAbort.abort();
  errorsAbort = null;
  const r = runs.get(id);
  $("#errors-panel").hidden = !(r && r.kind === "run");
  $("#errors-list").replaceChildren();
  $("#errors-state").textContent = "";
  logErrors = null;
  if ($("#errors-panel").hidden) return;
  if (!isLive(r)) {
    logErrors = new Map();
    $("#errors-state").textContent = "(from its log)";
    return;
  }
  const ctl = new AbortController();
  errorsAbort = ctl;
  const shown = new Map();
  const render = (gen) => {
    const list = [...shown.values()].sort((a, b) => b.last_seen.localeCompare(a.last_seen));
    $("#errors-list").replaceChildren(...list.map((e) => el("li", { "data-error": e.id, class: e.generation < gen ? "old" : "", title: e.library || "" }, e.line)));
  };
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        const resp = await api(`/v1/runs/${encodeURIComponent(id)}/errors?all=1&follow=1`, { signal: ctl.signal });
        if (!resp.ok) { $("#errors-state").textContent = await resp.text(); return; }
        shown.clear();
        let ended = false;
        for await (const pg of lines(resp)) {
          if (pg.type === "end") { $("#errors-state").textContent = "(run ended)"; ended = true; continue; }
          for (const e of pg.errors || []) shown.set(e.id, e);
          $("#errors-state").textContent = `${pg.total} reported` + (pg.dropped ? `, ${pg.dropped} dropped` : "");
          render(pg.generation);
          const r = runs.get(id); // the status is sent on state changes, not on every error
          if (r) {
            const current = [...shown.values()].filter((e) => e.generation === pg.generation).length;
            r.errors = { ...(r.errors || {}), total: pg.total, current };
            renderRuns();
          }
        }
        if (ended) return;
      } catch (err) {
        if (ctl.signal.aborted) return;
      }
      await sleep(500);
    }
  })();
}

// errorLine is an error of the log's error stream in one line, as flyd
// writes one: its summary (the line after the header of a rendered
// error, or what follows "Another exception was thrown:") and the
// error-causing widget's location in the project.
function errorLine(text, root) {
  const lines = text.replace(/^flutter: /, "").trim().split("\n").map((l) => l.replace(/^flutter: /, ""));
  const again = /^Another exception was thrown: (.*)$/.exec(lines[0]);
  if (again) return { summary: again[1], where: "" };
  const header = /^═+╡ EXCEPTION CAUGHT BY .+ ╞═*\s*$/.test(lines[0]);
  const summary = (header ? lines[2] || lines[1] : lines[0] || "").trim();
  let where = "";
  const i = lines.findIndex((l) => l.trim() === "The relevant error-causing widget was:");
  const m = i >= 0 && /^\s*(\S+)\s+\S*?(file:\/\/\S+?):(\d+):(\d+)\s*$/.exec(lines[i + 1] || "");
  if (m) {
    let path = decodeURI(m[2].slice("file://".length));
    if (root && path.startsWith(root + "/")) path = path.slice(root.length + 1);
    where = ` — ${m[1]} at ${path}:${m[3]}:${m[4]}`;
  }
  return { summary, where };
}

function addLogError(e) {
  const r = runs.get(selected);
  const { summary, where } = errorLine(e.text, r && r.root);
  if (!summary) return;
  const seen = logErrors.get(summary) || { count: 0, where: "" };
  seen.count++;
  seen.where = seen.where || where;
  logErrors.set(summary, seen);
  $("#errors-list").replaceChildren(...[...logErrors].map(([s, x]) => el("li", { "data-error": s }, `${x.count}× ${s}${x.where}`)));
}

function select(id) {
  followErrors(id);
  selected = id; lastSeq = 0; held = []; pending = []; events = 0;
  $("#log").hidden = false;
  $("#log-run").textContent = id;
  $("#log-lines").replaceChildren();
  renderRuns();
  if (logAbort) logAbort.abort();
  const ctl = new AbortController();
  logAbort = ctl;
  // take shows one line of the log; it reports whether the log has ended.
  const take = (e) => {
    if (e.type === "entry" || e.type === "gap") {
      lastSeq = e.seq;
      if (runs.get(id) && runs.get(id).kind !== "run" && e.stream !== "event") { progress.set(id, e.text); }
      if (logErrors && e.stream === "error") addLogError(e);
      if (paused) held.push(e); else appendLine(e);
    } else if (e.type === "exit" || e.type === "end") {
      $("#log-state").textContent = `ended: ${shownState(e)}` + (e.exit_code != null ? ` (exit ${e.exit_code})` : "");
      return true;
    }
    return false;
  };
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        const r = runs.get(id);
        if (r && !isLive(r) && !lastSeq) {
          // An ended run's log is read whole, not followed: a short
          // stream read to its end before its request completes is one
          // the browser reports as aborted.
          const resp = await api(`/v1/runs/${encodeURIComponent(id)}/logs?tail=2000`, { signal: ctl.signal });
          if (!resp.ok) { $("#log-state").textContent = await resp.text(); return; }
          let ended = false;
          for (const line of (await resp.text()).split("\n")) if (line.trim()) ended = take(JSON.parse(line)) || ended;
          if (ended) return; // else it has started again: follow it
        }
        const q = lastSeq ? `after=${lastSeq}` : "tail=500";
        const resp = await api(`/v1/runs/${encodeURIComponent(id)}/logs?${q}&follow=1`, { signal: ctl.signal });
        if (!resp.ok) { $("#log-state").textContent = await resp.text(); return; }
        $("#log-state").textContent = "following";
        let ended = false;
        for await (const e of lines(resp)) ended = take(e) || ended; // read to its end: a stream left unread is a failed request
        if (ended) return;
      } catch (err) {
        if (ctl.signal.aborted) return;
      }
      $("#log-state").textContent = "reconnecting…";
      await sleep(500);
    }
  })();
}

$("#pause").addEventListener("click", () => {
  paused = !paused;
  $("#pause").textContent = paused ? `Resume (${held.length})` : "Pause";
  if (!paused) { for (const e of held) appendLine(e); held = []; }
});
$("#show-events").addEventListener("change", showEvents);
$("#search").addEventListener("input", () => {
  const re = filterRE();
  for (const d of $("#log-lines").children) d.hidden = !!re && !re.test(d.textContent);
});
setInterval(() => { if (paused) $("#pause").textContent = `Resume (${held.length})`; }, 500);

follow("events", async () => {
  if (!token) { setConn(false, "not logged in: open the address flyctl dashboard prints"); await sleep(5000); return; }
  const resp = await api("/v1/events");
  if (resp.status === 401) { setConn(false, "the token was refused (rotated?): open the address flyctl dashboard prints"); await sleep(5000); return; }
  if (!resp.ok) throw new Error(resp.statusText);
  setConn(true, "live");
  loadRuns(); // the runs that ended while the page was away
  try {
    for await (const st of lines(resp)) renderStatus(st);
  } finally {
    setConn(false, "reconnecting…");
  }
});
