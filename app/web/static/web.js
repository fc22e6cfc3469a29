// Copy buttons, and live refresh of the sessions view. Everything works without it except those two.
(function () {
  "use strict";

  function selectText(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function copied(button, label) {
    button.textContent = label;
    setTimeout(function () { button.textContent = "Copy"; }, 2000);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var text = source.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { copied(button, "Copied"); },
        function () { selectText(source); copied(button, "Press Ctrl+C"); }
      );
    } else {
      // Without the clipboard API (plain http, old browsers) select the text so that one keystroke copies it.
      selectText(source);
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      copied(button, ok ? "Copied" : "Press Ctrl+C");
    }
  });

  var live = document.querySelector("[data-events]");
  if (live && window.EventSource) {
    var target = document.getElementById(live.getAttribute("data-target"));
    var status = live.querySelector(".live-status");
    var pending = false;
    var again = false;
    var refresh = function () {
      // One fetch at a time; events arriving meanwhile cause one more fetch afterwards.
      if (pending) { again = true; return; }
      pending = true;
      fetch(live.getAttribute("data-panel"), { credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
        .then(function (html) { target.innerHTML = html; })
        .catch(function () { status.textContent = "could not refresh"; })
        .then(function () {
          pending = false;
          if (again) { again = false; refresh(); }
        });
    };
    var source = new EventSource(live.getAttribute("data-events"));
    source.addEventListener("ready", function () {
      live.classList.add("connected");
      status.textContent = "live";
      refresh();
    });
    ["claim", "release", "change"].forEach(function (kind) { source.addEventListener(kind, refresh); });
    source.onerror = function () {
      live.classList.remove("connected");
      status.textContent = "reconnecting…";
    };
  }
})();
