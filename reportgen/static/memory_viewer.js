/* Memory viewer: pointing at (or selecting) a buffer shows its lifetime on
   the module's working-space chart. Everything stays inside this function:
   the Vega bundle owns short global names, and page data only ever arrives
   as JSON, never as code. */
(function () {
  "use strict";

  function spanOf(row) {
    if (!row) return [];
    return [{
      start: Number(row.dataset.spanStart),
      limit: Number(row.dataset.spanLimit),
      label: row.dataset.spanLabel
    }];
  }

  function wire(chart, view) {
    var scope = chart.closest("[data-mv-scope]");
    if (!scope) return;
    var status = scope.querySelector("[data-mv-status]");
    var pinned = null;

    function show(row) {
      view.data("highlight", spanOf(row)).runAsync();
      if (status) {
        status.textContent = row
          ? row.dataset.spanLabel + ": allocated at position " + row.dataset.spanStart +
            ", freed at position " + row.dataset.spanLimit + (row === pinned ? " (selected)" : "")
          : "Point at a buffer in the table to see its lifetime on the chart; click to keep it selected.";
      }
    }

    function select(row) {
      if (pinned) pinned.setAttribute("aria-selected", "false");
      pinned = pinned === row ? null : row;
      if (pinned) pinned.setAttribute("aria-selected", "true");
      show(pinned);
    }

    // Listened for on the scope, not on each row: a long buffer table shows a page of rows at a time, and the
    // rows of its other pages are put in the document only when their page is shown.
    function rowOf(node) {
      var row = node && node.closest ? node.closest("tr[data-span-start]") : null;
      return row && scope.contains(row) ? row : null;
    }
    scope.addEventListener("mouseover", function (e) {
      var row = rowOf(e.target);
      if (row && rowOf(e.relatedTarget) !== row) show(row);
    });
    scope.addEventListener("mouseout", function (e) {
      var row = rowOf(e.target);
      if (row && rowOf(e.relatedTarget) !== row) show(pinned);
    });
    scope.addEventListener("focusin", function (e) { var row = rowOf(e.target); if (row) show(row); });
    scope.addEventListener("focusout", function (e) { if (rowOf(e.target)) show(pinned); });
    scope.addEventListener("click", function (e) { var row = rowOf(e.target); if (row) select(row); });
    scope.addEventListener("keydown", function (e) {
      var row = rowOf(e.target);
      if (row && e.target === row && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); select(row); }
    });
    show(null);
  }

  function embed(chart) {
    var source = document.getElementById(chart.dataset.mvChart);
    if (!source || !window.vegaEmbed) return;
    var spec = JSON.parse(source.textContent);
    if (!spec.description && chart.dataset.label) spec.description = chart.dataset.label;
    window.vegaEmbed(chart, spec, {
      renderer: "svg",
      actions: { export: true, source: false, compiled: false, editor: false }
    }).then(function (result) { window.reportgen.nameChartMenu(chart); wire(chart, result.view); })
      .catch(function (err) { console.error("chart " + chart.id + ": " + err); });
  }

  // The charts of the module and memory space shown are drawn at once, the others when their panel is shown:
  // drawing a JAX run's 46 charts of every module before the page opened took most of its 0.8 s (3 s and more on
  // a loaded machine).
  function embedShown(root) {
    root.querySelectorAll("[data-mv-chart]").forEach(function (chart) {
      if (chart.dataset.drawn || chart.closest("[hidden]")) return;
      chart.dataset.drawn = "1";
      embed(chart);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    embedShown(document);
    new MutationObserver(function (changes) {
      changes.forEach(function (c) { if (!c.target.hidden) embedShown(c.target); });
    }).observe(document.body, { attributes: true, attributeFilter: ["hidden"], subtree: true });
  });
})();
