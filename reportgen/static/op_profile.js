/* Op profile: the op tree with expand/collapse, a grouping switch, idle
   time on or off, one host or all, ordered by time or by wasted time, how
   many ops to list, the top-90%-of-time filter, and the selected op's details. Everything stays inside this function: the Vega
   bundle owns short global names, and page data only ever arrives as JSON;
   capture text is only ever set as textContent. */
(function () {
  "use strict";

  function pct(value, digits) {
    return (100 * value).toFixed(digits === undefined ? 1 : digits) + "%";
  }

  // XProf's op table percentages: "-" where there is no value, "0.0%" below 0.001%.
  function share(value, missing) {
    if (value === undefined || value === null || isNaN(value)) return missing;
    return value < 1e-5 ? "0.0%" : (100 * value).toFixed(2) + "%";
  }

  function utilColor(util) {
    // Red (poor) through yellow to green (good), light enough for text.
    var hue = Math.round(120 * Math.max(0, Math.min(1, util)));
    return "hsl(" + hue + ", 70%, 85%)";
  }

  function duration(ps) {
    if (ps >= 1e12) return (ps / 1e12).toFixed(3) + " s";
    if (ps >= 1e9) return (ps / 1e9).toFixed(3) + " ms";
    if (ps >= 1e6) return (ps / 1e6).toFixed(3) + " µs";
    return (ps / 1e3).toFixed(3) + " ns";
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  // The children listed under a row, as [index in node.ch, child]: as many as "Ops to show" (fewer with the
  // top-90% filter, counted in time order as XProf counts them), ordered by wasted time when asked (most
  // wasted first, children without a wasted time last).
  function visibleChildren(node, show, top90, byWasted) {
    var kids = node.ch || [];
    var count = 0;
    var cumulative = 0;
    for (var i = 0; i < kids.length && count < show; i++) {
      if (top90 && node.t > 0 && cumulative >= 0.9 * node.t) break;
      count++;
      cumulative += kids[i].t;
    }
    var order = kids.map(function (child, index) { return [index, child]; });
    if (byWasted) {
      order.sort(function (a, b) {
        var wa = a[1].w, wb = b[1].w;
        if (wa === undefined || wb === undefined) return (wa === undefined) - (wb === undefined) || a[0] - b[0];
        return wb - wa || a[0] - b[0];
      });
    }
    return order.slice(0, count);
  }

  function OpProfile(root, data) {
    this.root = root;
    this.data = data;
    this.rows = root.querySelector("[data-op-rows]");
    this.details = root.querySelector("[data-op-details]");
    this.group = "program";
    this.idle = true;
    this.show = data.show[0];
    this.top90 = false;
    this.byWasted = false;
    this.host = "";  // "": all hosts combined
    this.expanded = {};
    this.selected = null;
  }

  OpProfile.prototype.treeKey = function () {
    return this.group + (this.idle ? "" : "-noidle");
  };

  OpProfile.prototype.tree = function () {
    var trees = this.host ? (this.data.hosts || {})[this.host] : this.data.trees;
    return trees ? trees[this.treeKey()] : null;
  };

  OpProfile.prototype.isExpanded = function (path, depth) {
    var key = this.host + "|" + this.treeKey() + "|" + path;
    if (key in this.expanded) return this.expanded[key];
    // Open by default: the root, and the programs in the program view.
    return depth === 0 || (this.group === "program" && depth === 1);
  };

  OpProfile.prototype.toggle = function (path, depth) {
    var key = this.host + "|" + this.treeKey() + "|" + path;
    this.expanded[key] = !this.isExpanded(path, depth);
    this.render();
  };

  OpProfile.prototype.addRows = function (node, depth, path) {
    var self = this;
    var kids = node.ch || [];
    var open = kids.length > 0 && this.isExpanded(path, depth);
    var tr = el("tr");
    tr.tabIndex = 0;
    tr.dataset.path = path;
    tr.dataset.depth = depth;
    if (this.selected === path) tr.setAttribute("aria-selected", "true");
    var nameCell = el("td", null, "name op-name");
    nameCell.style.paddingLeft = (0.4 + 1.2 * depth) + "em";
    if (kids.length) {
      var button = el("button", open ? "▾" : "▸", "op-toggle");
      button.type = "button";
      button.setAttribute("aria-expanded", open ? "true" : "false");
      button.setAttribute("aria-label", (open ? "Collapse " : "Expand ") + node.n);
      button.addEventListener("click", function (e) { e.stopPropagation(); self.toggle(path, depth); });
      nameCell.appendChild(button);
    } else {
      nameCell.appendChild(el("span", "", "op-toggle-space"));
    }
    nameCell.appendChild(el("span", node.n, "op-label"));
    if (node.c && depth > 0 && node.c !== node.n) nameCell.appendChild(el("span", node.c, "op-cat"));
    tr.appendChild(nameCell);
    var sym = node.x !== undefined ? this.data.symbols[node.x] : null;
    tr.appendChild(el("td", sym ? sym.op_type : "-", "op-type"));
    tr.appendChild(el("td", node.p.toFixed(2) + "%", "num"));
    tr.appendChild(el("td", share(node.w, "-"), "num"));
    tr.appendChild(el("td", share(node.h, ""), "num"));
    var flops = el("td", pct(node.f, 2), "num util");
    flops.style.background = utilColor(node.f);
    tr.appendChild(flops);
    var bw = el("td", pct(node.b[0], 2), "num util");
    bw.style.background = utilColor(node.b[0]);
    tr.appendChild(bw);
    tr.addEventListener("click", function () { self.select(path, node); });
    tr.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); self.select(path, node); }
      else if (e.key === "ArrowRight" && kids.length && !open) self.toggle(path, depth);
      else if (e.key === "ArrowLeft" && open) self.toggle(path, depth);
    });
    this.rows.appendChild(tr);
    if (!open) return;
    var shown = visibleChildren(node, this.show, this.top90, this.byWasted);
    shown.forEach(function (pair) { self.addRows(pair[1], depth + 1, path + "/" + pair[0]); });
    var hidden = kids.length - shown.length;
    if (hidden > 0) {
      var rest = node.t;
      shown.forEach(function (pair) { rest -= pair[1].t; });
      var more = el("tr", null, "muted op-more");
      var cell = el("td", "… " + hidden + " more (" + (node.t > 0 ? (100 * rest / node.t).toFixed(1) : "0.0") +
        "% of this row's time)");
      cell.colSpan = 7;
      cell.style.paddingLeft = (1.6 + 1.2 * (depth + 1)) + "em";
      more.appendChild(cell);
      this.rows.appendChild(more);
    }
  };

  OpProfile.prototype.render = function () {
    var tree = this.tree();
    this.rows.textContent = "";
    if (tree) this.addRows(tree, 0, "0");
    var node = this.selected !== null ? this.find(this.selected) : null;
    if (node) this.showDetails(node); else this.clearDetails();
  };

  OpProfile.prototype.find = function (path) {
    var node = this.tree();
    var parts = path.split("/").slice(1);
    for (var i = 0; i < parts.length && node; i++) node = (node.ch || [])[Number(parts[i])];
    return node || null;
  };

  OpProfile.prototype.select = function (path, node) {
    this.selected = path;
    this.rows.querySelectorAll("tr[aria-selected]").forEach(function (r) { r.removeAttribute("aria-selected"); });
    var row = this.rows.querySelector("tr[data-path='" + path + "']");
    if (row) row.setAttribute("aria-selected", "true");
    this.showDetails(node);
  };

  OpProfile.prototype.clearDetails = function () {
    this.details.textContent = "";
    this.details.appendChild(el("p", "Select an op to see its details.", "muted"));
  };

  OpProfile.prototype.showDetails = function (node) {
    var d = this.details;
    var sym = node.x !== undefined ? this.data.symbols[node.x] : null;
    d.textContent = "";
    d.appendChild(el("h3", node.n));
    var dl = el("dl");
    function item(label, value, code) {
      if (value === undefined || value === null || value === "") return;
      dl.appendChild(el("dt", label));
      var dd = el("dd");
      if (code) dd.appendChild(el("code", value)); else dd.textContent = String(value);
      dl.appendChild(dd);
    }
    item("Category", sym ? sym.category : (node.c || "(group)"));
    if (sym) item("Program", sym.program);
    if (sym && sym.program && document.querySelector("header nav a[href='graph_viewer.html']")) {
      var graph = el("a", "Show in the graph viewer");
      var where = /^\d+$/.test(sym.program) ? {program: sym.program} : {module: sym.program};
      where.op = node.n.replace(/ and its duplicate\(s\)$/, "");  // a deduplicated group: its first op
      graph.href = "graph_viewer.html#" + new URLSearchParams(where).toString();
      dl.appendChild(el("dt", "Graph"));
      var graphCell = el("dd");
      graphCell.appendChild(graph);
      dl.appendChild(graphCell);
    }
    if (this.host) item("Host", this.host);
    item("Time", node.p.toFixed(3) + "% of the tree (" + duration(node.t) + ")");
    item("Wasted time", share(node.w, "–") + (node.w !== undefined ? " of the tree's time" : ""));
    item("HBM traffic", node.h !== undefined ? share(node.h, "") + " of the tree's HBM bytes" : "");
    if (node.o) item("Occurrences", node.o + " (average " + duration(node.a) + ")");
    item("FLOPS utilization", pct(node.f, 3));
    item("HBM bandwidth utilization", pct(node.b[0], 3));
    item("On-chip read bandwidth utilization", pct(node.b[1], 3));
    item("On-chip write bandwidth utilization", pct(node.b[2], 3));
    if (sym) {
      item("Framework op", sym.provenance, true);
      item("Framework op type", sym.op_type !== "-" ? sym.op_type : "", true);
      item("Deduplicated name", sym.deduplicated_name, true);
      item("Shape and layout", sym.shape, true);
      item("Window", sym.window, true);
      item("Source", sym.source, true);
      item("Kernel metadata", sym.kernel_metadata, true);
    }
    d.appendChild(dl);
    if (sym && sym.layout && sym.layout.length) {
      d.appendChild(el("h4", "Layout (memory order, with tile padding)"));
      var table = el("table", null, "op-layout-table");
      var head = el("tr");
      ["Dimension", "Size", "Padded to", "Semantics"].forEach(function (h) { head.appendChild(el("th", h)); });
      var thead = el("thead");
      thead.appendChild(head);
      table.appendChild(thead);
      var body = el("tbody");
      sym.layout.forEach(function (dim) {
        var tr = el("tr");
        tr.appendChild(el("td", dim.dim, "num"));
        tr.appendChild(el("td", dim.size, "num"));
        var padded = el("td", dim.padded + (dim.padded !== dim.size ? " (+" + (dim.padded - dim.size) + ")" : ""),
          "num" + (dim.padded !== dim.size ? " op-padded" : ""));
        tr.appendChild(padded);
        tr.appendChild(el("td", dim.semantics || "–"));
        body.appendChild(tr);
      });
      table.appendChild(body);
      d.appendChild(table);
    }
    if (sym && sym.expression) {
      d.appendChild(el("h4", "HLO expression"));
      d.appendChild(el("pre", sym.expression, "op-expression"));
    }
    if (sym && sym.stack) {
      var details = el("details");
      details.appendChild(el("summary", "Source stack"));
      details.appendChild(el("pre", sym.stack));
      d.appendChild(details);
    }
  };

  OpProfile.prototype.wire = function () {
    var self = this;
    this.root.querySelectorAll("input[name='op-group']").forEach(function (radio) {
      radio.addEventListener("change", function () {
        if (radio.checked) { self.group = radio.value; self.selected = null; self.render(); }
      });
    });
    var idle = this.root.querySelector("[data-op-idle]");
    idle.addEventListener("change", function () { self.idle = idle.checked; self.selected = null; self.render(); });
    var show = this.root.querySelector("[data-op-show]");
    show.addEventListener("change", function () { self.show = Number(show.value); self.render(); });
    var top90 = this.root.querySelector("[data-op-top90]");
    top90.addEventListener("change", function () { self.top90 = top90.checked; self.render(); });
    var wasted = this.root.querySelector("[data-op-wasted]");
    wasted.addEventListener("change", function () { self.byWasted = wasted.checked; self.render(); });
    var host = this.root.querySelector("[data-op-host]");
    if (host) host.addEventListener("change", function () { self.host = host.value; self.selected = null; self.render(); });
    this.render();
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-op-profile]").forEach(function (root) {
      var source = document.getElementById(root.dataset.opProfile);
      if (!source) return;
      new OpProfile(root, JSON.parse(source.textContent)).wire();
    });
  });
})();
