// The tool-set service's console: the /v1 API in a page, with the token the
// person signs in with. Everything a tenant or a plugin chose (names,
// descriptions, labels, messages) goes into the page as text, never as HTML.

const TOKEN = "toolhost-console-token";
const $ = (id) => document.getElementById(id);

let selected = null; // the tool set shown, as last read
let watching = null; // the AbortController of its event watch
// Each read that fills part of the page takes a turn; an answer that comes
// back after a later read of the same part began is dropped, so a slow
// answer for the tool set shown before never overwrites the one shown now.
const turns = { sets: 0, show: 0, tools: 0 };

async function api(method, path, body, headers = {}) {
  const init = { method, headers: { authorization: `Bearer ${sessionStorage.getItem(TOKEN)}`, ...headers } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = { error: { message: text } };
  }
  return { status: response.status, ok: response.ok, body: json, etag: response.headers.get("etag") };
}

// The API's refusal as lines: its message, then each problem where it is.
function refusal(answer) {
  const error = (answer.body && answer.body.error) || {};
  const lines = [`${answer.status} ${error.status || ""}: ${error.message || "refused"}`];
  for (const detail of error.details || []) lines.push(`${detail.pointer || "/"}: ${detail.message}`);
  return lines.join("\n");
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function kindOf(set) {
  const adapter = (set.spec && set.spec.adapter) || {};
  return Object.keys(adapter)[0] || "none";
}

function lastSync(set) {
  const event = set.info && set.info.lastSyncEvent && set.info.lastSyncEvent.event;
  if (!event) return ["-", ""];
  if (event.type === "sync_completed") return [`completed (${event.syncCompleted.toolsSynced ?? 0} tools)`, "status-completed"];
  if (event.type === "sync_failed") return [`failed: ${event.syncFailed.message || ""}`, "status-failed"];
  return [event.type, ""];
}

function labelsText(labels) {
  return Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(", ");
}

function parseLabels(text) {
  const labels = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const [key, ...value] = part.split("=");
    labels[key.trim()] = value.join("=").trim();
  }
  return labels;
}

async function loadToolSets() {
  const selector = $("selector").value.trim();
  const query = new URLSearchParams({ pageSize: "1000" });
  if (selector) query.set("labelSelector", selector);
  const turn = ++turns.sets;
  const answer = await api("GET", `/v1/tool_sets?${query}`);
  if (turn !== turns.sets) return;
  const body = $("tool-sets").tBodies[0];
  body.replaceChildren();
  if (!answer.ok) {
    const row = body.insertRow();
    cell(row, refusal(answer), "error").colSpan = 5;
    return;
  }
  for (const set of answer.body.toolSets) {
    const row = body.insertRow();
    row.dataset.id = set.metadata.id;
    if (selected && selected.metadata.id === set.metadata.id) row.className = "selected";
    cell(row, set.metadata.name);
    cell(row, kindOf(set));
    cell(row, set.info.toolCount ?? "-");
    const [sync, className] = lastSync(set);
    cell(row, sync, className);
    cell(row, labelsText(set.metadata.labels));
    row.addEventListener("click", () => show(set.metadata.id));
  }
}

async function show(id) {
  const turn = ++turns.show;
  const answer = await api("GET", `/v1/tool_sets/${encodeURIComponent(id)}`);
  if (turn !== turns.show) return;
  if (!answer.ok) {
    $("detail-error").textContent = refusal(answer);
    return;
  }
  selected = answer.body;
  $("detail").hidden = false;
  $("detail-error").textContent = "";
  $("detail-name").textContent = selected.metadata.name;
  const [sync] = lastSync(selected);
  $("detail-summary").textContent =
    `${kindOf(selected)} · MCP prefix ${selected.info.mcpName} · last sync ${sync} · ${selected.metadata.id}`;
  const adapter = selected.spec.adapter || {};
  const source = adapter.mcp || adapter.uri;
  $("filters").disabled = !source;
  $("save-filters").disabled = !source;
  $("filters").value = source
    ? JSON.stringify(
        { includeTools: source.includeTools, excludeTools: source.excludeTools, toolApprovals: source.toolApprovals },
        null,
        2,
      )
    : "";
  await Promise.all([loadTools(), loadToolSets()]);
  if (turn === turns.show) watchEvents(id);
}

async function loadTools() {
  const id = selected.metadata.id;
  const turn = ++turns.tools;
  const answer = await api("GET", `/v1/tool_sets/${encodeURIComponent(id)}/tools?pageSize=1000`);
  if (turn !== turns.tools) return;
  const body = $("tools").tBodies[0];
  body.replaceChildren();
  if (!answer.ok) {
    cell(body.insertRow(), refusal(answer), "error").colSpan = 6;
    return;
  }
  for (const tool of answer.body.tools) {
    const row = body.insertRow();
    row.dataset.name = tool.metadata.name;
    cell(row, tool.metadata.name);
    const status = cell(row, "");
    if (tool.spec.status === "TOOL_STATUS_ARCHIVED") {
      status.textContent = "archived";
    } else {
      const choice = document.createElement("select");
      choice.className = "status";
      for (const [value, label] of [["TOOL_STATUS_AVAILABLE", "available"], ["TOOL_STATUS_FILTERED", "filtered"]]) {
        const option = new Option(label, value, false, tool.spec.status === value);
        choice.add(option);
      }
      choice.addEventListener("change", () => changeTool(tool, { status: choice.value }));
      status.appendChild(choice);
    }
    cell(row, tool.info.served ? "yes" : "no", "served");
    const approval = cell(row, "");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.className = "approval";
    box.checked = !!tool.spec.requiresApproval;
    box.addEventListener("change", () => changeTool(tool, { requiresApproval: box.checked }));
    approval.appendChild(box);
    cell(row, tool.info.mcpName);
    cell(row, tool.spec.description);
  }
}

async function changeTool(tool, change) {
  const path = `/v1/tool_sets/${encodeURIComponent(selected.metadata.id)}/tools/${encodeURIComponent(tool.metadata.id)}`;
  const body = { metadata: { name: tool.metadata.name, labels: tool.metadata.labels }, spec: { ...tool.spec, ...change } };
  const answer = await api("PUT", path, body, { "if-match": `"${tool.metadata.resourceVersion}"` });
  $("detail-error").textContent = answer.ok ? "" : refusal(answer);
  await loadTools();
}

async function saveFilters() {
  let filters;
  try {
    filters = JSON.parse($("filters").value || "{}");
  } catch (error) {
    $("detail-error").textContent = `the filters are not JSON: ${error.message}`;
    return;
  }
  const adapter = structuredClone(selected.spec.adapter);
  const kind = Object.keys(adapter)[0];
  for (const key of ["includeTools", "excludeTools", "toolApprovals"]) {
    if (filters[key] === undefined || filters[key] === null) delete adapter[kind][key];
    else adapter[kind][key] = filters[key];
  }
  const body = { metadata: { name: selected.metadata.name, labels: selected.metadata.labels }, spec: { ...selected.spec, adapter } };
  const path = `/v1/tool_sets/${encodeURIComponent(selected.metadata.id)}`;
  const answer = await api("PUT", path, body, { "if-match": `"${selected.metadata.resourceVersion}"` });
  if (!answer.ok) {
    $("detail-error").textContent = refusal(answer);
    return;
  }
  await show(selected.metadata.id);
}

function eventRow(event) {
  const row = $("events").tBodies[0].insertRow();
  const data = event.event || {};
  let what = "";
  if (data.type === "sync_started") what = data.syncStarted.detail || "";
  if (data.type === "sync_completed") what = `${data.syncCompleted.toolsSynced ?? 0} tools synced`;
  if (data.type === "sync_failed") what = `${data.syncFailed.errorType || "error"}: ${data.syncFailed.message || ""}`;
  cell(row, event.metadata.createdAt);
  cell(row, data.type, data.type === "sync_failed" ? "status-failed" : "");
  cell(row, event.metadata.profileId);
  cell(row, what);
}

// The tool set's events, then each as it is recorded: the watch's
// server-sent events, read from fetch (an EventSource cannot send the token).
async function watchEvents(id) {
  if (watching) watching.abort();
  watching = new AbortController();
  const signal = watching.signal;
  $("events").tBodies[0].replaceChildren();
  let last = null;
  while (!signal.aborted) {
    const headers = { authorization: `Bearer ${sessionStorage.getItem(TOKEN)}`, accept: "text/event-stream" };
    if (last) headers["last-event-id"] = last;
    let response;
    try {
      response = await fetch(`/v1/tool_sets/${encodeURIComponent(id)}/events?watch=true`, { headers, signal });
    } catch {
      return; // aborted: another tool set is shown
    }
    if (!response.ok) return;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = "";
    let data = "";
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch {
        return;
      }
      if (chunk.done) break;
      pending += chunk.value;
      let end;
      while ((end = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, end).replace(/\r$/, "");
        pending = pending.slice(end + 1);
        if (line.startsWith("data:")) data += line.slice(5).trim();
        else if (line.startsWith("id:")) last = line.slice(3).trim();
        else if (line === "" && data) {
          const event = JSON.parse(data);
          data = "";
          // Another tool set is shown now: its events are not this one's.
          if (signal.aborted) return;
          eventRow(event);
          if (event.event && event.event.type !== "sync_started") {
            await Promise.all([loadTools(), loadToolSets()]);
          }
        }
      }
    }
  }
}

async function create(event) {
  event.preventDefault();
  const kind = $("create-kind").value;
  const url = $("create-url").value.trim();
  const spec = { description: $("create-description").value };
  if (kind === "mcp") spec.adapter = { mcp: { url } };
  if (kind === "http") spec.adapter = { http: { baseUrl: url } };
  if (kind === "uri") spec.adapter = { uri: { url } };
  const body = { metadata: { name: $("create-name").value.trim(), labels: parseLabels($("create-labels").value) }, spec };
  const key = crypto.randomUUID();
  const answer = await api("POST", "/v1/tool_sets", body, { "idempotency-key": key });
  if (!answer.ok) {
    $("create-error").textContent = refusal(answer);
    return;
  }
  $("create-error").textContent = "";
  $("create-form").reset();
  await show(answer.body.metadata.id);
}

async function remove() {
  if (!selected) return;
  const answer = await api("DELETE", `/v1/tool_sets/${encodeURIComponent(selected.metadata.id)}`);
  if (!answer.ok) {
    $("detail-error").textContent = refusal(answer);
    return;
  }
  if (watching) watching.abort();
  selected = null;
  $("detail").hidden = true;
  await loadToolSets();
}

async function signIn(event) {
  event.preventDefault();
  sessionStorage.setItem(TOKEN, $("token").value.trim());
  const answer = await api("GET", "/v1/tool_sets?pageSize=1");
  if (!answer.ok) {
    sessionStorage.removeItem(TOKEN);
    $("sign-in-error").textContent = refusal(answer);
    return;
  }
  $("token").value = "";
  $("sign-in-error").textContent = "";
  enter();
}

function enter() {
  $("sign-in").hidden = true;
  $("console").hidden = false;
  $("sign-out").hidden = false;
  loadToolSets();
}

function signOut() {
  sessionStorage.removeItem(TOKEN);
  if (watching) watching.abort();
  selected = null;
  $("detail").hidden = true;
  $("console").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
}

$("sign-in-form").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", signOut);
$("create-form").addEventListener("submit", create);
$("delete").addEventListener("click", remove);
$("save-filters").addEventListener("click", saveFilters);
$("selector").addEventListener("change", loadToolSets);
if (sessionStorage.getItem(TOKEN)) enter();
else $("sign-in").hidden = false;
