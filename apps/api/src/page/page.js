// The conversation page (served by the API, no build step, no CDN). Every text from the API is put
// on the page with textContent, never parsed as HTML: an event holding <script> stays text.

// TERN_ENUMS is written above this script by the server (page/routes.ts), from @tern/core's lists
// and the agent's tool registry.

(() => {
  const { STAGES, FINAL, TOOLS } = TERN_ENUMS;
  let id = location.pathname.split("/").filter(Boolean)[1] || "";
  let readOnly = false;
  let followUp = false;
  let stream = null;

  const $ = (s) => document.getElementById(s);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  };
  // A tool the agent's registry does not hold is one of the user's MCP servers' (their own code).
  const toolLabel = (name) => (TOOLS.includes(name) ? name : `${name} (MCP)`);
  const api = (path, init = {}) =>
    fetch(path, {
      credentials: "same-origin",
      ...init,
      headers: { "x-tern-page": "1", ...(init.body ? { "content-type": "application/json" } : {}) },
    });
  const errorText = async (res) => {
    try {
      const body = await res.json();
      return body.detail || `HTTP ${res.status}`;
    } catch {
      return `HTTP ${res.status}`;
    }
  };

  const showSignIn = (message) => {
    $("main").hidden = true;
    $("sign-in").hidden = false;
    $("sign-out").hidden = true;
    $("sign-in-error").textContent = message || "";
  };

  const renderStages = (status, detail) => {
    const list = $("stages");
    list.replaceChildren();
    const at = STAGES.indexOf(status);
    STAGES.forEach((s, i) => {
      const li = el("li", "", s);
      if (status === "ERROR") li.className = i === 0 ? "done" : "";
      else if (i < at || status === "READY") li.className = "done";
      else if (i === at) li.className = "current";
      list.append(li);
    });
    const note = $("start-detail");
    if (status === "ERROR") {
      list.append(el("li", "failed", "ERROR"));
      note.hidden = false;
      note.className = "error";
      note.textContent = detail || "The start failed";
    } else {
      // What a start in flight waits for (no worker alive yet), until a worker takes it.
      note.hidden = !detail || status === "READY";
      note.className = "note";
      note.textContent = detail || "";
    }
  };

  // Tool calls with no result yet, by ActionEvent id: what waits when the status says so.
  const pending = new Map();
  let status = "";
  const renderConfirmation = () => {
    const waiting = !readOnly && status === "waiting_for_confirmation" && pending.size > 0;
    $("confirmation").hidden = !waiting;
    if (!waiting) return;
    const list = $("pending-actions");
    list.replaceChildren();
    for (const a of pending.values()) {
      const risk = a.security_risk || "UNKNOWN";
      const li = el("li", "pending-action");
      li.dataset.risk = risk;
      li.append(
        el("span", `risk ${risk}`, risk),
        el("span", "tool", toolLabel(a.tool_name)),
        el("span", "summary", a.summary || ""),
      );
      list.append(li);
    }
  };

  const setStatus = (value) => {
    status = value;
    renderConfirmation();
    const badge = $("execution-status");
    badge.textContent = value;
    badge.className = `badge ${value}`;
    // Stop (POST /interrupt) while the agent works; a session key may call it too, a read-only key not.
    $("stop").hidden = readOnly || value !== "running";
    if (FINAL.includes(value)) {
      $("final-state").hidden = false;
      $("final-state").textContent = `The agent stopped: ${value}`;
    } else {
      $("final-state").hidden = true;
    }
  };

  const textOf = (content) =>
    Array.isArray(content)
      ? content
          .map((c) => (c && typeof c.text === "string" ? c.text : ""))
          .filter(Boolean)
          .join("\n")
      : typeof content === "string"
        ? content
        : "";

  const diffBlock = (oldText, newText) => {
    const pre = el("pre", "diff");
    for (const line of String(oldText || "").split("\n")) if (oldText) pre.append(el("span", "del", `- ${line}`));
    for (const line of String(newText || "").split("\n")) if (newText) pre.append(el("span", "add", `+ ${line}`));
    return pre;
  };

  // The plan in force: the task list of the latest task_tracker result (events arrive in order).
  const PLAN_MARK = { todo: "☐", in_progress: "◐", done: "☑" };
  const renderPlan = (tasks) => {
    const list = $("plan-tasks");
    list.replaceChildren();
    for (const t of tasks) {
      const status = PLAN_MARK[t.status] ? t.status : "todo";
      const li = el("li", `task ${status}`);
      li.dataset.status = status;
      li.append(el("span", "mark", PLAN_MARK[status]), el("span", "title", t.title));
      if (t.notes) li.append(el("div", "notes", t.notes));
      list.append(li);
    }
    $("plan").hidden = tasks.length === 0;
  };

  // The model's reasoning, folded: its text (reasoning_content), else its thinking blocks' text.
  const reasoningOf = (reasoning, blocks) => {
    const text =
      reasoning ||
      (Array.isArray(blocks) ? blocks : [])
        .map((b) => (b && b.type === "thinking" ? b.thinking : b && b.type === "redacted_thinking" ? "(redacted)" : ""))
        .filter(Boolean)
        .join("\n\n");
    if (!text) return null;
    const d = el("details", "reasoning");
    d.append(el("summary", "", "Reasoning"), el("pre", "", text));
    return d;
  };

  // An LLM call waiting to be retried: "the model is rate-limited; retrying in 32 s".
  const RETRY_WORD = {
    rate_limited: "rate-limited",
    overloaded: "overloaded",
    server_error: "failing",
    network: "unreachable",
  };
  const retryText = (v) =>
    `the model is ${RETRY_WORD[v?.reason] || "unavailable"}; retrying in ${Math.max(1, Math.round(Number(v?.wait_seconds) || 0))} s`;

  const renderEvent = (ev) => {
    const box = el("article", `event ${ev.source || ""}`);
    box.dataset.kind = ev.kind;
    box.dataset.id = ev.id;
    box.append(el("div", "meta", `${ev.kind} · ${ev.source || ""} · ${ev.timestamp || ""}`));
    switch (ev.kind) {
      case "MessageEvent": {
        const m = ev.llm_message || {};
        const reasoning = reasoningOf(m.reasoning_content, m.thinking_blocks);
        if (reasoning) box.append(reasoning);
        box.append(el("div", "text", textOf(m.content)));
        break;
      }
      case "ActionEvent": {
        const a = ev.action || {};
        pending.set(ev.id, ev);
        if (ev.security_risk || ev.summary) {
          box.append(el("div", "meta", `risk ${ev.security_risk || "UNKNOWN"} · ${ev.summary || ""}`));
        }
        const reasoning = reasoningOf(ev.reasoning_content, ev.thinking_blocks);
        if (reasoning) box.append(reasoning);
        const thought = textOf(ev.thought);
        if (thought) box.append(el("div", "text", thought));
        if (ev.tool_name === "terminal" || a.command_line || (a.kind === "TerminalAction" && a.command)) {
          box.append(el("pre", "command", `$ ${a.command}`));
        } else if (ev.tool_name === "file_editor") {
          box.append(el("div", "text", `${a.command || "edit"} ${a.path || ""}`));
          if (a.command === "str_replace") box.append(diffBlock(a.old_str, a.new_str));
          else if (a.command === "create") box.append(diffBlock("", a.file_text));
          else if (a.command === "insert") box.append(diffBlock("", a.new_str));
        } else if (ev.tool_name === "task_tracker") {
          const n = Array.isArray(a.task_list) ? a.task_list.length : 0;
          box.append(el("div", "text", a.command === "plan" ? `Plan: ${n} task(s)` : "View the plan"));
        } else if (ev.tool_name === "finish") {
          box.append(el("div", "text", a.message || ""));
        } else {
          box.append(el("div", "meta", toolLabel(ev.tool_name)));
          box.append(el("pre", "", JSON.stringify(a, null, 2)));
        }
        break;
      }
      case "UserRejectObservation":
        pending.delete(ev.action_id);
        box.classList.add("error");
        box.append(el("div", "text", `Rejected ${ev.tool_name}: ${ev.rejection_reason}`));
        break;
      case "ObservationEvent": {
        pending.delete(ev.action_id);
        const o = ev.observation || {};
        if (o.kind === "TerminalObservation") box.append(el("div", "meta", `exit code ${o.exit_code}`));
        if (ev.tool_name === "task_tracker" && !o.is_error && Array.isArray(o.task_list)) renderPlan(o.task_list);
        box.append(el("pre", o.is_error ? "error" : "", textOf(o.content)));
        break;
      }
      case "AgentErrorEvent":
        box.classList.add("error");
        box.append(el("div", "text", ev.error));
        break;
      case "ConversationErrorEvent":
        box.classList.add("error");
        box.append(el("div", "text", ev.detail));
        break;
      case "ConversationStateUpdateEvent":
        if (ev.key === "llm_retry") {
          box.classList.add("retry");
          box.append(el("div", "text", retryText(ev.value)));
          break;
        }
        box.append(
          el("div", "text", `${ev.key} → ${typeof ev.value === "string" ? ev.value : JSON.stringify(ev.value)}`),
        );
        if (ev.key === "execution_status") setStatus(ev.value);
        break;
      case "SystemPromptEvent": {
        box.classList.add("system");
        const d = el("details");
        d.append(el("summary", "", "System prompt"));
        d.append(el("pre", "", textOf(ev.system_prompt?.content ?? ev.system_prompt)));
        box.append(d);
        break;
      }
      case "CondensationEvent": {
        box.classList.add("system");
        const d = el("details");
        d.append(el("summary", "", `History condensed: ${(ev.forgotten_event_ids || []).length} events summarized`));
        d.append(el("pre", "", ev.summary || ""));
        box.append(d);
        break;
      }
      default:
        box.append(el("pre", "", JSON.stringify(ev, null, 2)));
    }
    $("events").append(box);
    if (ev.kind === "ActionEvent" || ev.kind === "ObservationEvent" || ev.kind === "UserRejectObservation") {
      renderConfirmation();
    }
    if (innerHeight + scrollY >= document.body.scrollHeight - 200) box.scrollIntoView({ block: "end" });
  };

  const followEvents = () => {
    if (stream) stream.close();
    // EventSource resumes by itself after a cut, sending the last id it saw (Last-Event-ID).
    stream = new EventSource(`/api/v1/conversation/${id}/events/stream`);
    stream.onmessage = (m) => renderEvent(JSON.parse(m.data));
  };

  const showConversation = (conv) => {
    id = conv.id;
    $("sign-in").hidden = true;
    $("main").hidden = false;
    $("sign-out").hidden = false;
    document.title = `${conv.title} · tern`;
    $("title").textContent = conv.title;
    setStatus(conv.execution_status);
    $("sandbox-status").textContent = `sandbox ${conv.sandbox_status}`;
    renderStages("READY");
    $("follow-up").hidden = !followUp;
    $("read-only").hidden = !readOnly;
    followEvents();
  };

  const followTask = (task) => {
    $("sign-in").hidden = true;
    $("main").hidden = false;
    $("sign-out").hidden = false;
    $("title").textContent = "Starting…";
    renderStages(task.status, task.detail);
    const tasks = new EventSource(`/api/v1/app-conversations/start-tasks/${task.id}/stream`);
    tasks.onmessage = async (m) => {
      const t = JSON.parse(m.data);
      renderStages(t.status, t.detail);
      if (t.status === "ERROR") tasks.close();
      if (t.status === "READY") {
        tasks.close();
        history.replaceState(null, "", `/conversations/${t.app_conversation_id}`);
        id = t.app_conversation_id;
        await load();
      }
    };
  };

  const load = async () => {
    const session = await (await api("/conversations/session")).json();
    if (!session.signed_in) return showSignIn();
    readOnly = session.read_only;
    followUp = session.follow_up;
    const res = await api(`/api/v1/app-conversations?ids=${encodeURIComponent(id)}`);
    if (res.status === 401) return showSignIn(await errorText(res));
    const [conv] = res.ok ? await res.json() : [null];
    if (conv) return showConversation(conv);
    if (followUp) {
      const t = await api(`/api/v1/app-conversations/start-tasks?ids=${encodeURIComponent(id)}`);
      const [task] = t.ok ? await t.json() : [null];
      if (task) return followTask(task);
    }
    $("sign-in").hidden = true;
    $("main").hidden = false;
    $("title").textContent = "No such conversation (or not yours)";
  };

  const control = async (path, body) => {
    $("control-error").textContent = "";
    const res = await api(path, { method: "POST", body: body ? JSON.stringify(body) : undefined });
    if (!res.ok) $("control-error").textContent = await errorText(res);
    return res.ok;
  };

  document.addEventListener("DOMContentLoaded", () => {
    $("sign-in-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const res = await api("/conversations/session", {
        method: "POST",
        body: JSON.stringify({ key: $("key").value.trim() }),
      });
      $("key").value = "";
      if (!res.ok) return showSignIn(await errorText(res));
      await load();
    });
    $("sign-out").addEventListener("click", async () => {
      if (stream) stream.close();
      await api("/conversations/session", { method: "DELETE" });
      showSignIn();
    });
    $("follow-up").addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = $("message").value;
      if (!text.trim()) return;
      const ok = await control(`/api/v1/conversation/${id}/events`, {
        role: "user",
        content: [{ type: "text", text }],
        run: true,
      });
      if (ok) $("message").value = "";
    });
    $("pause").addEventListener("click", () => control(`/api/v1/conversation/${id}/pause`));
    $("stop").addEventListener("click", () => control(`/api/v1/conversation/${id}/interrupt`));
    $("run").addEventListener("click", () => control(`/api/v1/conversation/${id}/run`));
    const answer = async (accept) => {
      $("confirmation-error").textContent = "";
      const reason = $("reject-reason").value.trim();
      const res = await api(`/api/v1/conversation/${id}/events/respond_to_confirmation`, {
        method: "POST",
        body: JSON.stringify(accept || !reason ? { accept } : { accept, reason }),
      });
      if (!res.ok) $("confirmation-error").textContent = await errorText(res);
      else $("reject-reason").value = "";
    };
    $("approve").addEventListener("click", () => answer(true));
    $("reject").addEventListener("click", () => answer(false));
    load().catch((err) => showSignIn(String(err)));
  });
})();
