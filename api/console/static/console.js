// Progressive enhancement of the console: the pages work without it.
// On a session page it follows the session's server-sent events and
// re-renders the live part in place, and sends the action forms with
// fetch so the page does not reload.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource || !window.fetch) return;
  var id = live.getAttribute("data-session");
  var url = "/ui/sessions/" + encodeURIComponent(id);
  var busy = false, again = false;

  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.getElementById("live");
    if (!fresh) {
      var main = doc.querySelector("main");
      if (main) live.innerHTML = main.innerHTML;
      return;
    }
    var state = document.getElementById("livestate");
    var cls = state ? state.className : "", text = state ? state.textContent : "";
    live.innerHTML = fresh.innerHTML;
    live.setAttribute("data-last-seq", fresh.getAttribute("data-last-seq"));
    state = document.getElementById("livestate");
    if (state) { state.className = cls; state.textContent = text; }
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(url, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(swap)
      .catch(function () {}).then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  function mark(on, text) {
    var state = document.getElementById("livestate");
    if (!state) return;
    state.className = "livestate " + (on ? "on" : "off");
    state.textContent = text;
  }

  // Live output (docs/design/streaming.md): each attempt's text as it is
  // written, kept by length, so the repeat a reconnection sends is skipped.
  var box = document.getElementById("liveoutput"), outputs = {};
  function output(e) {
    var d = {};
    try { d = JSON.parse(e.data); } catch (x) { return; }
    var key = d.step + "#" + d.attempt, o = outputs[key];
    if (!o) {
      if (d.type !== "output") return;
      var p = document.createElement("div"), h = document.createElement("p"), pre = document.createElement("pre");
      h.className = "muted";
      h.textContent = d.step + ", attempt " + d.attempt + ": writing…";
      pre.className = "text";
      p.appendChild(h); p.appendChild(pre); box.appendChild(p);
      box.hidden = false;
      o = outputs[key] = { head: h, pre: pre, bytes: 0 };
    }
    if (d.type === "output") {
      var text = new TextEncoder().encode(d.text), end = d.offset + text.length;
      if (end <= o.bytes || d.offset > o.bytes) return;
      o.pre.textContent += new TextDecoder().decode(text.subarray(o.bytes - d.offset));
      o.bytes = end;
    } else {
      o.head.textContent = d.step + ", attempt " + d.attempt + (d.type === "output_ended" ? ": whole; the committed result below replaces it" : ": abandoned, the attempt failed; a retry streams anew");
    }
  }

  var es = new EventSource(url + "/events?after=" + live.getAttribute("data-last-seq"));
  es.onopen = function () { mark(true, "live"); };
  es.addEventListener("dex", refresh);
  if (box && window.TextEncoder) es.addEventListener("output", output);
  es.addEventListener("fail", function (e) {
    var d = {};
    try { d = JSON.parse(e.data); } catch (x) {}
    mark(false, d.message || "the watch failed");
    if (d.gone) es.close();
  });
  es.onerror = function () { mark(false, "reconnecting…"); };

  live.addEventListener("submit", function (e) {
    var f = e.target;
    if (!f.classList || !f.classList.contains("action")) return;
    e.preventDefault();
    var body = new URLSearchParams(new FormData(f));
    var buttons = f.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(f.action, { method: "POST", body: body, credentials: "same-origin" })
      .then(function (r) { return r.text(); }).then(swap)
      .catch(function (err) { mark(false, "the action could not be sent: " + err); })
      .then(function () { buttons.forEach(function (b) { b.disabled = false; }); });
  });
})();
