/* Memory profile: the HLO modules' runs of a TPU host. Selecting a run zooms that host's memory
   timelines (Vega charts whose time axis is the variable named by data-time-domain) to the run;
   selecting it again, or "Whole timeline", restores the axis. "Running at" keeps the runs whose
   span holds a time, as XProf's filter does. Capture text is only ever read as textContent. */
(function () {
  "use strict";

  // The memory-ID panels of the table's own page (a single-file report holds several pages).
  function panels(scope) {
    return Array.prototype.slice.call(scope.querySelectorAll("[data-host-panel][data-host-name]"));
  }

  function charts(scope, host) {
    var out = [];
    panels(scope).forEach(function (panel) {
      if (panel.dataset.hostName !== host) return;
      panel.querySelectorAll("[data-vega-spec]").forEach(function (el) { out.push(el); });
    });
    return out;
  }

  function ModuleRuns(root) {
    this.root = root;
    this.scope = root.closest("section.page") || document;
    this.host = root.dataset.hostName;
    this.variable = root.dataset.timeDomain;
    this.rows = Array.prototype.slice.call(root.querySelectorAll("tbody tr"));
    this.status = root.querySelector("[data-module-status]");
    this.selected = null;
    this.whole = {};  // chart id → its time axis before any zoom
    var starts = this.rows.map(function (r) { return Number(r.dataset.startMs); });
    var ends = this.rows.map(function (r) { return Number(r.dataset.endMs); });
    this.first = Math.min.apply(null, starts);
    this.last = Math.max.apply(null, ends);
  }

  ModuleRuns.prototype.apply = function () {
    var self = this;
    var row = this.selected;
    charts(this.scope, this.host).forEach(function (el) {
      var view = el.vegaView;
      if (!view) return;  // not drawn yet (a hidden panel): drawn with the current zoom when shown
      if (!(el.id in self.whole)) self.whole[el.id] = view.signal(self.variable);
      var domain = row ? [Number(row.dataset.startMs), Number(row.dataset.endMs)] : self.whole[el.id];
      if (domain[1] <= domain[0]) domain = [domain[0], domain[0] + 1e-6];
      view.signal(self.variable, domain).runAsync();
    });
    this.rows.forEach(function (r) { r.setAttribute("aria-selected", r === row ? "true" : "false"); });
    if (row) {
      var cells = row.cells;
      this.status.textContent = "Timeline zoomed to " + cells[1].textContent + " on " + cells[2].textContent + ": " +
        cells[3].textContent + "–" + cells[4].textContent + " ms.";
    } else {
      this.status.textContent = "";
    }
  };

  ModuleRuns.prototype.select = function (row) {
    this.selected = this.selected === row ? null : row;
    this.apply();
  };

  ModuleRuns.prototype.filter = function (text) {
    var t = Number(text);
    var all = text === "" || isNaN(t) || t < this.first || t > this.last;
    function holds(r) { return t >= Number(r.dataset.startMs) && t <= Number(r.dataset.endMs); }
    // Through the table, which shows a long list a page at a time: the runs that hold t, from its first page.
    // (The table is set up before the filter is wired: it is in no host panel.)
    var table = window.reportgen.tableOf(this.root.querySelector("table"));
    if (table) table.keepRows(all ? null : holds);
    if (!all) this.status.textContent = this.rows.filter(holds).length + " of " + this.rows.length + " runs hold " + t +
      " ms.";
  };

  ModuleRuns.prototype.wire = function () {
    var self = this;
    this.rows.forEach(function (row) {
      row.addEventListener("click", function () { self.select(row); });
      row.addEventListener("keydown", function (e) {  // on the row itself: Enter on a name cell opens the name
        if (e.target === row && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); self.select(row); }
      });
    });
    this.root.querySelector("[data-module-reset]").addEventListener("click", function () {
      self.selected = null;
      self.apply();
    });
    var time = this.root.querySelector("[data-module-time]");
    time.addEventListener("change", function () { self.filter(time.value.trim()); });
    // A chart drawn later (its panel shown by the Memory ID selector) takes the current zoom.
    this.scope.addEventListener("reportgen:chart", function () { if (self.selected) self.apply(); });
    this.showForHost();
    var select = this.scope.querySelector("select[data-host-select]");
    if (select) select.addEventListener("change", function () { self.showForHost(); });
  };

  ModuleRuns.prototype.showForHost = function () {
    // On a run of several hosts, only the table of the host whose memory ID is shown.
    var visible = null;
    panels(this.scope).forEach(function (panel) {
      if (!panel.hidden) visible = panel.dataset.hostName;
    });
    this.root.hidden = visible !== null && visible !== this.host;
  };

  // The runs are taken once the page is parsed, those of a long table's later pages too (see reportgen.js's
  // whenParsed); they are wired on DOMContentLoaded, after reportgen.js has wired the Memory ID selector.
  var runs = [];
  window.reportgen.whenParsed(function () {
    document.querySelectorAll("[data-module-runs]").forEach(function (root) { runs.push(new ModuleRuns(root)); });
  });
  document.addEventListener("DOMContentLoaded", function () { runs.forEach(function (r) { r.wire(); }); });
})();
