/* reportgen page behaviour: charts, sortable/filterable tables, host selector.
   Everything stays inside this function: the Vega bundle owns short global
   names, and page data only ever arrives as JSON, never as code. */
(function () {
  "use strict";

  function embedCharts(root) {
    root.querySelectorAll("[data-vega-spec]").forEach(function (el) {
      if (el.dataset.embedded) return;
      var source = document.getElementById(el.dataset.vegaSpec);
      if (!source || !window.vegaEmbed) return;
      el.dataset.embedded = "1";
      var spec = JSON.parse(source.textContent);
      window.vegaEmbed(el, spec, {
        renderer: "svg",
        actions: { export: true, source: false, compiled: false, editor: false }
      }).then(function (result) {
        el.vegaView = result.view;  // for page scripts that change a chart's variables (memory_profile.js)
        el.dispatchEvent(new CustomEvent("reportgen:chart", { bubbles: true }));
      }).catch(function (err) { console.error("chart " + el.id + ": " + err); });
    });
  }

  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) return "";
    var raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    var num = parseFloat(raw.replace(/,/g, ""));
    return raw !== "" && !isNaN(num) && /^[-+]?[\d,.]+(e[-+]?\d+)?\s*(%|ms|µs|s|B|KiB|MiB|GiB)?$/i.test(raw) ? num : raw.toLowerCase();
  }

  function makeSortable(table) {
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(headers, function (th, index) {
      th.tabIndex = 0;
      th.setAttribute("role", "button");
      function sort() {
        var body = table.tBodies[0];
        var dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, index), y = cellValue(b, index);
          if (typeof x === "number" && typeof y === "number") return dir * (x - y);
          return dir * String(x).localeCompare(String(y));
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
    });
  }

  function wireFilter(input) {
    var table = document.getElementById(input.dataset.filterTable);
    if (!table) return;
    input.addEventListener("input", function () {
      var needle = input.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        row.hidden = needle !== "" && row.textContent.toLowerCase().indexOf(needle) < 0;
      });
    });
  }

  function wireHostSelect(select) {
    var group = select.dataset.hostSelect;
    function show() {
      document.querySelectorAll("[data-host-panel='" + group + "']").forEach(function (panel) {
        panel.hidden = panel.dataset.host !== select.value;
        if (!panel.hidden) embedCharts(panel);
      });
    }
    select.addEventListener("change", show);
    show();
  }

  /* A link to a row (page.html#row-id) may point into a closed <details> or a hidden host panel:
     open and show what holds it, then scroll it into view (CSS :target highlights it). */
  function revealTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (!target) return;
    for (var el = target.parentElement; el; el = el.parentElement) {
      if (el.tagName === "DETAILS") el.open = true;
      if (el.hidden && el.dataset.hostPanel) {
        var select = document.querySelector("select[data-host-select='" + el.dataset.hostPanel + "']");
        if (select) { select.value = el.dataset.host; select.dispatchEvent(new Event("change")); }
      }
    }
    target.scrollIntoView({ block: "center" });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(makeSortable);
    document.querySelectorAll("input[data-filter-table]").forEach(wireFilter);
    document.querySelectorAll("select[data-host-select]").forEach(wireHostSelect);
    embedCharts(document);
    revealTarget();
  });
  window.addEventListener("hashchange", revealTarget);
  // Charts above the row render after the page loads and push it down: show it again once they have.
  window.addEventListener("load", function () { setTimeout(revealTarget, 300); });
})();
