// Copy buttons, confirmations before destructive forms, the new key kept in the install commands, and live refresh
// of the sessions view. Everything works without it, except copying and the live refresh.
(function () {
  "use strict";

  // A command wraps only between its words: a URL, a header or a key is never cut in two (browsers also break after
  // '-' and '/'). Without this script the command does not wrap at all, and scrolls sideways.
  function wrapBetweenWords(pre) {
    var text = pre.textContent;
    pre.textContent = "";
    text.split(/( +)/).forEach(function (part) {
      if (!part) return;
      if (!part.trim()) {
        pre.appendChild(document.createTextNode(part));
        return;
      }
      var word = document.createElement("span");
      word.className = "word";
      word.textContent = part;
      pre.appendChild(word);
    });
    pre.classList.add("wraps");
  }

  // Revoke, Disconnect, Delete: ask first. Registered before the listener below, which must see a cancelled submit.
  document.addEventListener("submit", function (event) {
    var message = event.target.getAttribute("data-confirm");
    // A form with several buttons asks only for the one named by data-confirm-action (bulk delete, not re-tag).
    var only = event.target.getAttribute("data-confirm-action");
    if (only && event.submitter && event.submitter.value === only) message = event.target.getAttribute("data-confirm-text");
    if (message && !window.confirm(message)) event.preventDefault();
  });

  // The memory browser's "select all on this page".
  document.addEventListener("change", function (event) {
    if (!event.target.matches("input[data-select-all]")) return;
    var form = event.target.form;
    document.querySelectorAll('input.pick[form="' + form.id + '"]').forEach(function (box) {
      box.checked = event.target.checked;
    });
  });

  // A new API key is shown once, by the page the key form lands on. The tab keeps it (sessionStorage) so that the
  // install commands still carry it after Build, another form of the dashboard, or a reload; it is forgotten as soon
  // as the person leaves the dashboard (any other page, or coming back to it from elsewhere), and with the tab.
  var KEY = "engram:new-key";
  var STAYING = "engram:staying-on-dashboard";
  var store = null;
  try { store = window.sessionStorage; } catch (e) { store = null; }
  var install = document.getElementById("install");
  if (store && !install) {
    store.removeItem(KEY);
    store.removeItem(STAYING);
  } else if (store) {
    var navigation = performance.getEntriesByType ? performance.getEntriesByType("navigation")[0] : null;
    var stayed = store.getItem(STAYING) === "1" || (navigation && navigation.type === "reload");
    store.removeItem(STAYING);
    var box = document.getElementById("new-key");
    var shown = document.querySelector("pre[data-new-key]");
    if (box && !box.hidden && shown && shown.textContent) {
      store.setItem(KEY, shown.textContent);
    } else if (!stayed) {
      store.removeItem(KEY);
    }
    var key = store.getItem(KEY);
    var placeholder = install.getAttribute("data-key-placeholder");
    if (key && placeholder) {
      install.querySelectorAll("pre.command").forEach(function (pre) {
        pre.textContent = pre.textContent.split(placeholder).join(key);
      });
      var testKey = document.querySelector("input[data-test-key]");
      if (testKey && !testKey.value) testKey.value = key;
      var hint = document.getElementById("key-hint");
      if (hint) hint.hidden = true;
      if (box && shown) {
        shown.id = "cmd-new-key";
        shown.textContent = key;
        box.hidden = false;
      }
    }
    document.addEventListener("submit", function (event) {
      if (!event.defaultPrevented && event.target.closest("main")) store.setItem(STAYING, "1");
    });
  }
  document.querySelectorAll("pre.command").forEach(wrapBetweenWords);

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
    ["claim", "release", "change", "agent", "message", "task"].forEach(function (kind) { source.addEventListener(kind, refresh); });
    source.onerror = function () {
      live.classList.remove("connected");
      status.textContent = "reconnecting…";
    };
  }
})();
