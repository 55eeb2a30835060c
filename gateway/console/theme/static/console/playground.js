/* The console's playground (templates/admin/playground.html): the conversation is sent as JSON to the
   reply endpoint (same origin, the session and the CSRF token) and its server-sent events are read
   with fetch() as they come: meta (the model that answers), delta (text), error (a reply cut midway),
   done (usage, cost, times). A refusal before the reply is the API's JSON error, shown with its status. */
(function () {
  "use strict";

  function $(id) { return document.getElementById(id); }

  function ready() {
    var form = $("playground-form");
    if (!form) { return; }
    var turns = $("playground-turns");
    var template = $("playground-turn-template");
    var send = $("playground-send");
    var stop = $("playground-stop");
    var replyBox = $("playground-reply");
    var errorBox = $("playground-error");
    var status = $("playground-status");
    var keep = $("playground-continue");
    var controller = null;
    var lastReply = "";

    function addTurn(role, content) {
      var turn = template.content.firstElementChild.cloneNode(true);
      turn.querySelector(".pg-role").value = role;
      turn.querySelector(".pg-content").value = content || "";
      turn.querySelector(".pg-remove").addEventListener("click", function () {
        turn.remove();
        if (!turns.children.length) { addTurn("user", ""); }
      });
      turns.appendChild(turn);
      return turn;
    }

    function figure(id, text) { $(id).textContent = text; }

    function resetOutput() {
      replyBox.textContent = "";
      errorBox.hidden = true;
      errorBox.textContent = "";
      keep.hidden = true;
      lastReply = "";
      ["playground-answered", "playground-ttft", "playground-latency", "playground-input-tokens",
       "playground-output-tokens", "playground-cost"].forEach(function (id) { figure(id, "–"); });
    }

    function showError(text) {
      errorBox.textContent = text;
      errorBox.hidden = false;
    }

    function milliseconds(value) {
      return value === null || value === undefined ? "–" : Math.round(value) + " ms";
    }

    function body() {
      var messages = [];
      var system = $("playground-system").value;
      if (system.trim()) { messages.push({role: "system", content: system}); }
      Array.prototype.forEach.call(turns.querySelectorAll(".pg-turn"), function (turn) {
        var content = turn.querySelector(".pg-content").value;
        if (content.trim()) { messages.push({role: turn.querySelector(".pg-role").value, content: content}); }
      });
      var request = {model: $("playground-model").value, messages: messages};
      var temperature = $("playground-temperature").value;
      var maxTokens = $("playground-max-tokens").value;
      if (temperature !== "") { request.temperature = Number(temperature); }
      if (maxTokens !== "") { request.max_tokens = Number(maxTokens); }
      return request;
    }

    function refusal(answer) {
      return answer.text().then(function (text) {
        var message = text;
        try {
          var parsed = JSON.parse(text);
          var error = parsed.error || parsed;
          message = error.message || parsed.detail || text;
          if (error.code) { message += " (" + error.code + ")"; }
        } catch (ignored) { /* not JSON: the text itself */ }
        showError(answer.status + " " + (answer.statusText || "") + ": " + message);
        status.textContent = "Refused.";
      });
    }

    function handle(name, data) {
      if (name === "meta") {
        figure("playground-answered", data.model);
        status.textContent = "Streaming from " + data.model + "…";
      } else if (name === "delta") {
        lastReply += data.text;
        replyBox.textContent = lastReply;
        replyBox.scrollTop = replyBox.scrollHeight;
      } else if (name === "error") {
        showError(data.status + ": " + data.error.message + (data.error.code ? " (" + data.error.code + ")" : ""));
      } else if (name === "done") {
        figure("playground-answered", data.model);
        figure("playground-ttft", milliseconds(data.ttft_ms));
        figure("playground-latency", milliseconds(data.latency_ms));
        figure("playground-input-tokens", String(data.usage.prompt_tokens));
        figure("playground-output-tokens", String(data.usage.completion_tokens));
        figure("playground-cost", data.cost);  // the currency is in the label
        status.textContent = errorBox.hidden ? "Done." : "Stopped midway.";
        keep.hidden = !lastReply;
      }
    }

    function read(answer) {
      var reader = answer.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      function frame(raw) {
        var name = "message";
        var data = [];
        raw.split("\n").forEach(function (line) {
          if (line.indexOf("event:") === 0) { name = line.slice(6).trim(); }
          else if (line.indexOf("data:") === 0) { data.push(line.slice(5).replace(/^ /, "")); }
        });
        if (data.length) { handle(name, JSON.parse(data.join("\n"))); }
      }
      function pump() {
        return reader.read().then(function (piece) {
          if (piece.done) {
            if (buffer.trim()) { frame(buffer); }
            return;
          }
          buffer += decoder.decode(piece.value, {stream: true}).replace(/\r\n/g, "\n");
          var end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            frame(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
          return pump();
        });
      }
      return pump();
    }

    function finish() {
      controller = null;
      send.disabled = false;
      stop.hidden = true;
    }

    function submit(event) {
      if (event) { event.preventDefault(); }
      if (controller) { return; }
      resetOutput();
      var request = body();
      if (!request.model) { showError("Pick a model or an alias."); return; }
      controller = new AbortController();
      send.disabled = true;
      stop.hidden = false;
      status.textContent = "Sending to " + request.model + "…";
      fetch(form.dataset.replyUrl, {
        method: "POST",
        credentials: "same-origin",
        signal: controller.signal,
        headers: {
          "Content-Type": "application/json",
          "Accept": "text/event-stream, application/json",
          "X-CSRFToken": form.querySelector("[name=csrfmiddlewaretoken]").value
        },
        body: JSON.stringify(request)
      }).then(function (answer) {
        if (answer.redirected) {
          showError("Your console session has ended: sign in again.");
          status.textContent = "Not sent.";
          return null;
        }
        return answer.ok ? read(answer) : refusal(answer);
      }).catch(function (error) {
        if (error.name === "AbortError") { status.textContent = "Stopped."; }
        else { showError("The reply could not be read: " + error.message); status.textContent = "Failed."; }
      }).then(finish);
    }

    form.addEventListener("submit", submit);
    form.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { submit(event); }
    });
    $("playground-add-turn").addEventListener("click", function () {
      var last = turns.lastElementChild;
      var role = last && last.querySelector(".pg-role").value === "user" ? "assistant" : "user";
      addTurn(role, "").querySelector(".pg-content").focus();
    });
    stop.addEventListener("click", function () { if (controller) { controller.abort(); } });
    keep.addEventListener("click", function () {
      addTurn("assistant", lastReply);
      addTurn("user", "").querySelector(".pg-content").focus();
      keep.hidden = true;
    });
    addTurn("user", "");
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", ready); }
  else { ready(); }
}());
