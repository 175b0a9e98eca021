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

  var es = new EventSource(url + "/events?after=" + live.getAttribute("data-last-seq"));
  es.onopen = function () { mark(true, "live"); };
  es.addEventListener("dex", refresh);
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
