// The chat page's behaviour. Served by the gatekeeper beside the API; same origin only (CSP).
// The API key is what the person types: kept in sessionStorage (this tab only), sent in the
// Authorization header of each API call, never in a URL, a cookie or the page.
// Model text is put into the page as text nodes (textContent), never parsed as HTML.
"use strict";

(() => {
  const byId = (id) => document.getElementById(id);
  const MODEL = document.body.dataset.model;
  const MAX_REPLY = Number(document.body.dataset.maxReplyTokens);
  const MAX_CONTEXT = Number(document.body.dataset.maxModelLen);
  const KEY_STORE = "gemma-graviton.apiKey";
  // A rough count for text not yet tokenized, only to warn early: ~4 characters a token.
  const CHARS_PER_TOKEN = 4;

  const keyInput = byId("key");
  const limitInput = byId("limit");
  const log = byId("log");
  const notice = byId("notice");
  const form = byId("ask");
  const promptInput = byId("prompt");
  const sendButton = byId("send");
  const stopButton = byId("stop");
  const meter = byId("context-meter");
  const meterText = byId("context-text");

  let history = [];
  let used = 0;
  let controller = null;
  // Bumped by New chat, so a reply still finishing does not land in the new conversation.
  let conversation = 0;

  keyInput.value = sessionStorage.getItem(KEY_STORE) || "";
  keyInput.addEventListener("input", () => sessionStorage.setItem(KEY_STORE, keyInput.value));

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function showNotice(text, kind) {
    notice.textContent = text;
    notice.className = kind || "error";
    notice.hidden = false;
  }

  function clearNotice() {
    notice.hidden = true;
    notice.textContent = "";
  }

  // Text, with ``` fenced blocks shown as code. Rebuilt whole on each chunk: replies are short.
  function renderContent(container, text) {
    const parts = text.split("```");
    const nodes = parts.map((part, index) => {
      if (index % 2 === 0) return part ? element("p", "", part) : null;
      const newline = part.indexOf("\n");
      const language = newline >= 0 ? part.slice(0, newline).trim() : "";
      const code = element("code", "", newline >= 0 ? part.slice(newline + 1) : part);
      if (/^[\w+-]+$/.test(language)) code.dataset.language = language;
      const pre = element("pre");
      pre.appendChild(code);
      return pre;
    });
    container.replaceChildren(...nodes.filter((node) => node !== null));
  }

  function addMessage(role, text) {
    const wrap = element("article", "message " + role);
    const content = element("div", "content");
    renderContent(content, text);
    wrap.appendChild(content);
    log.appendChild(wrap);
    wrap.scrollIntoView({ block: "end" });
    return { wrap, content };
  }

  function showUsage(tokens) {
    used = tokens;
    meter.value = Math.min(used, MAX_CONTEXT);
    meterText.textContent = `${used} of ${MAX_CONTEXT} tokens of context used`;
  }

  function replyLimit() {
    const asked = limitInput.value === "" ? NaN : Math.floor(Number(limitInput.value));
    const limit = Number.isFinite(asked) ? Math.min(Math.max(asked, 1), MAX_REPLY) : MAX_REPLY;
    limitInput.value = String(limit);
    return limit;
  }

  // Before a turn would outgrow the context: the conversation so far, the new message and a
  // reply at the limit must fit in max_model_len, or vLLM refuses the request.
  function contextProblem(text, limit) {
    const needed = used + Math.ceil(text.length / CHARS_PER_TOKEN) + limit;
    if (needed <= MAX_CONTEXT) return null;
    const room = MAX_CONTEXT - used - Math.ceil(text.length / CHARS_PER_TOKEN);
    const lower = room > 16 ? ` or lower the reply limit to ${room}` : "";
    return (
      `This conversation has used ${used} of the model's ${MAX_CONTEXT} tokens of context; ` +
      `this message and a ${limit}-token reply would not fit. Start a New chat${lower}.`
    );
  }

  function statusMessage(status, retryAfter, detail) {
    const retry = retryAfter ? ` Retry in ${retryAfter} s.` : "";
    switch (status) {
      case 401:
        return "The API key was not accepted (401). Check the key and send again.";
      case 413:
        return "The request is too long for the endpoint (413). Start a New chat or send less.";
      case 429:
        return `Slow down: too many requests from this address (429).${retry || " Retry shortly."}`;
      case 503:
        return (
          "The model is starting, restarting or asleep (503); a stack that scales to zero " +
          `wakes in a few minutes.${retry || " Try again shortly."}`
        );
      case 504:
        return "The model did not answer in time (504). Try again, or lower the reply limit.";
      default:
        return `The endpoint answered ${status}${detail ? ": " + detail : ""}.`;
    }
  }

  async function errorDetail(response) {
    try {
      const body = await response.json();
      return body && body.error && typeof body.error.message === "string"
        ? body.error.message
        : "";
    } catch (_) {
      return "";
    }
  }

  // Server-sent events: blank-line separated, each "data: <json>" or "data: [DONE]".
  async function* events(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of block.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data && data !== "[DONE]") yield JSON.parse(data);
        }
      }
    }
  }

  function finishReply(reply, state) {
    const { wrap, tokens, limit, finish, first, last, started } = reply;
    wrap.dataset.state = state;
    if (finish) wrap.dataset.finish = finish;
    // The field report's bug: a reply cut at the limit looked like a model fault.
    if (finish === "length") {
      const more =
        limit < MAX_REPLY
          ? `Raise the limit (up to ${MAX_REPLY}) or ask it to continue.`
          : "Ask it to continue.";
      wrap.appendChild(
        element("p", "note cut-off", `Cut off at ${tokens} tokens: the reply limit. ${more}`)
      );
    } else if (state === "stopped") {
      wrap.appendChild(element("p", "note stopped", `Stopped after ${tokens} tokens.`));
    }
    const parts = [`${tokens} tokens`];
    if (first !== null) parts.push(`first token ${((first - started) / 1000).toFixed(2)} s`);
    if (first !== null && tokens > 1 && last > first) {
      parts.push(`${((tokens - 1) / ((last - first) / 1000)).toFixed(1)} tokens/s`);
    }
    wrap.appendChild(element("p", "meta", parts.join(" · ")));
  }

  function setBusy(busy) {
    sendButton.disabled = busy;
    stopButton.disabled = !busy;
  }

  async function send(event) {
    event.preventDefault();
    const text = promptInput.value.trim();
    if (!text || controller) return;
    const mine = conversation;
    const key = keyInput.value.trim();
    if (!key) {
      showNotice("Type the API key first (the stack's apiKey output).");
      keyInput.focus();
      return;
    }
    const limit = replyLimit();
    const problem = contextProblem(text, limit);
    if (problem) {
      showNotice(problem, "warning");
      return;
    }
    clearNotice();
    const user = addMessage("user", text);
    history.push({ role: "user", content: text });
    promptInput.value = "";
    const reply = {
      ...addMessage("assistant", ""),
      text: "",
      tokens: 0,
      limit,
      finish: null,
      usage: null,
      started: performance.now(),
      first: null,
      last: null,
    };
    reply.wrap.dataset.state = "waiting";
    controller = new AbortController();
    setBusy(true);
    let state = "done";
    try {
      const response = await fetch("/v1/chat/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
        body: JSON.stringify({
          model: MODEL,
          messages: history,
          max_tokens: limit,
          stream: true,
          stream_options: { include_usage: true },
        }),
        signal: controller.signal,
        cache: "no-store",
        credentials: "omit",
      });
      if (!response.ok) {
        const detail = await errorDetail(response);
        throw { status: response.status, retryAfter: response.headers.get("Retry-After"), detail };
      }
      reply.wrap.dataset.state = "streaming";
      for await (const chunk of events(response)) {
        if (chunk.error) throw { status: chunk.error.code || 500, detail: chunk.error.message };
        if (chunk.usage) reply.usage = chunk.usage;
        for (const choice of chunk.choices || []) {
          const delta = choice.delta && choice.delta.content;
          if (delta) {
            const now = performance.now();
            if (reply.first === null) reply.first = now;
            reply.last = now;
            reply.tokens += 1;
            reply.text += delta;
            renderContent(reply.content, reply.text);
          }
          if (choice.finish_reason) reply.finish = choice.finish_reason;
        }
      }
    } catch (error) {
      if (error && error.name === "AbortError") {
        state = "stopped";
      } else {
        state = "error";
        const message =
          error && error.status
            ? statusMessage(error.status, error.retryAfter, error.detail)
            : `Could not reach the endpoint: ${error && error.message ? error.message : error}.`;
        showNotice(message);
      }
    } finally {
      controller = null;
      setBusy(false);
    }
    if (mine !== conversation) return;
    if (state !== "done" && !reply.text) {
      // Nothing came back (refused, or stopped first): take the turn back to send it again.
      history.pop();
      user.wrap.remove();
      reply.wrap.remove();
      promptInput.value = text;
      return;
    }
    if (reply.usage) {
      reply.tokens = reply.usage.completion_tokens;
      showUsage(reply.usage.total_tokens);
    }
    history.push({ role: "assistant", content: reply.text });
    finishReply(reply, state);
    if (used + limit > MAX_CONTEXT) {
      showNotice(
        `This conversation has used ${used} of the model's ${MAX_CONTEXT} tokens of context: ` +
          `another ${limit}-token reply will not fit. Start a New chat, or lower the reply limit.`,
        "warning"
      );
    }
    reply.wrap.scrollIntoView({ block: "end" });
  }

  function newChat() {
    if (controller) controller.abort();
    conversation += 1;
    history = [];
    log.replaceChildren();
    showUsage(0);
    clearNotice();
    promptInput.value = "";
    promptInput.focus();
  }

  form.addEventListener("submit", send);
  stopButton.addEventListener("click", () => controller && controller.abort());
  byId("new-chat").addEventListener("click", newChat);
  promptInput.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  limitInput.addEventListener("change", () => limitInput.value !== "" && replyLimit());
})();
