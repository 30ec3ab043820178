/* Trace page: open an exported file in Perfetto UI.
   Perfetto UI accepts a trace from another page by postMessage once it
   answers PING with PONG; the page must fetch the file itself, which works
   when the site is served over http(s), not from file://. Everything stays
   inside this function (the Vega bundle owns short global names). */
(function () {
  "use strict";
  var PERFETTO = "https://ui.perfetto.dev";

  function say(button, text) {
    var out = document.getElementById(button.dataset.statusId);
    if (out) out.textContent = text;
  }

  function sendWhenReady(win, payload, button) {
    var tries = 0;
    var timer = setInterval(function () {
      tries += 1;
      if (win.closed || tries > 600) {
        clearInterval(timer);
        window.removeEventListener("message", onMessage);
        say(button, "Perfetto UI did not answer; download the file and open it there instead.");
        return;
      }
      win.postMessage("PING", PERFETTO);
    }, 100);
    function onMessage(event) {
      if (event.origin !== PERFETTO || event.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      win.postMessage({ perfetto: payload }, PERFETTO);
      say(button, "Sent to Perfetto UI.");
    }
    window.addEventListener("message", onMessage);
  }

  function openInPerfetto(button) {
    var url = new URL(button.dataset.perfettoUrl, window.location.href).href;
    // Open the window inside the click, or pop-up blockers stop it.
    var win = window.open(PERFETTO + "/#!/");
    if (!win) {
      say(button, "The browser blocked the new window: allow pop-ups for this site.");
      return;
    }
    say(button, "Loading the file…");
    fetch(url)
      .then(function (response) {
        if (!response.ok) throw new Error(response.status + " " + response.statusText);
        return response.arrayBuffer();
      })
      .then(function (buffer) {
        say(button, "Waiting for Perfetto UI…");
        sendWhenReady(win, { buffer: buffer, title: button.dataset.title, fileName: url.split("/").pop() }, button);
      })
      .catch(function (err) { say(button, "Could not load the file: " + err.message); });
  }

  // Every file row's button, those of a long table's later pages too (see reportgen.js's whenParsed).
  window.reportgen.whenParsed(function () {
    var served = window.location.protocol === "http:" || window.location.protocol === "https:";
    document.querySelectorAll("[data-perfetto-url]").forEach(function (button) {
      button.hidden = !served;
      button.addEventListener("click", function () { openInPerfetto(button); });
    });
    document.querySelectorAll("[data-when-file]").forEach(function (el) { el.hidden = served; });
    document.querySelectorAll("[data-when-served]").forEach(function (el) { el.hidden = !served; });
  });
})();
