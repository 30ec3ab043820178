/* Graph viewer: one HLO module at a time, one op's neighbourhood laid out by Graphviz at a time.

   A module's data arrives as a script (graph_viewer/<module>.js) that calls
   reportgenGraphViewer.register(...) when the reader picks the module: no
   fetch, so the page works from file://. Capture text (op names, shapes,
   HLO text) is only ever set as textContent, or escaped into Graphviz's
   HTML-like labels, whose SVG output Graphviz escapes again. */
(function () {
  "use strict";

  var registered = {};   // module name → prepared data
  var waiting = {};      // module name → callbacks waiting for its script
  var graphviz = null;   // the Graphviz instance, once its wasm is instantiated

  window.reportgenGraphViewer = {
    register: function (data) {
      registered[data.name] = prepare(data);
      (waiting[data.name] || []).forEach(function (cb) { cb(registered[data.name]); });
      delete waiting[data.name];
    }
  };

  function prepare(data) {
    var nodes = data.nodes, users = nodes.map(function () { return []; }), byName = {};
    nodes.forEach(function (node, i) {
      (node["in"] || []).forEach(function (j) { if (users[j].indexOf(i) < 0) users[j].push(i); });
      if (!(node.n in byName)) byName[node.n] = i;
    });
    var callers = data.computations.map(function () { return -1; });
    nodes.forEach(function (node, i) {
      if (node.o === "fusion" && node.calls && node.calls.length) callers[node.calls[0]] = i;
    });
    var compByName = {};
    data.computations.forEach(function (c, i) { compByName[c.n] = i; });
    data.users = users;
    data.byName = byName;
    data.compByName = compByName;
    data.fusionCaller = callers;
    data.names = Object.keys(byName).concat(Object.keys(compByName).filter(function (n) { return !(n in byName); }));
    return data;
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function escapeLabel(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;").replace(/[\u0000-\u001f\u007f]/g, " ");
  }

  function clip(text, n) { text = String(text); return text.length > n ? text.slice(0, n - 1) + "…" : text; }

  function duration(us) {
    if (us >= 1e6) return (us / 1e6).toFixed(3) + " s";
    if (us >= 1e3) return (us / 1e3).toFixed(3) + " ms";
    return us.toFixed(3) + " µs";
  }

  function count(n) {
    var units = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < units.length; i++) if (n >= units[i][0]) return (n / units[i][0]).toFixed(2) + " " + units[i][1];
    return String(n) + " ";
  }

  // XProf's node colours by opcode group (hlo_proto_to_graph_view.cc GetNodeStyles).
  var STYLE_GROUPS = [
    ["#cfe2ff", "async-start async-update async-done"],
    ["#ead9c8", "all-gather all-gather-start all-gather-done all-reduce reduce-scatter all-reduce-start " +
      "all-reduce-done all-to-all collective-broadcast collective-permute collective-permute-start " +
      "collective-permute-done infeed outfeed partition-id recv recv-done send send-done replica-id"],
    ["#b9cdf5", "convolution dot fft triangular-solve cholesky"],
    ["#bfe5c9", "call conditional custom-call while"],
    ["#e4e7eb", "domain fusion map get-dimension-size set-dimension-size"],
    ["#dcf2d6", "concatenate dynamic-slice reshape dynamic-reshape reverse transpose copy copy-start copy-done"],
    ["#ffdcb8", "parameter"],
    ["#e6d8f6", "batch-norm-grad batch-norm-inference batch-norm-training reduce reduce-window scatter " +
      "select-and-scatter gather"],
    ["#fff0b0", "broadcast dynamic-update-slice"]
  ];
  var FILL = {};
  STYLE_GROUPS.forEach(function (g) { g[1].split(" ").forEach(function (op) { FILL[op] = g[0]; }); });

  function Viewer(root) {
    this.root = root;
    this.maxNodes = Number(root.dataset.gvMaxNodes) || 400;
    this.select = root.querySelector("[data-gv-module]");
    this.search = root.querySelector("[data-gv-search]");
    this.suggestions = root.querySelector(".gv-suggestions");
    this.depthSelect = root.querySelector("[data-gv-depth]");
    this.expandAll = root.querySelector("[data-gv-expand-all]");
    this.status = root.querySelector("[data-gv-status]");
    this.canvas = root.querySelector("[data-gv-canvas]");
    this.details = root.querySelector("[data-gv-details]");
    this.text = root.querySelector("[data-gv-text]");
    this.textNote = root.querySelector("[data-gv-text-note]");
    this.data = null;
    this.center = -1;
    this.selected = -1;
    this.expanded = {};
    this.scale = 1;
    this.drawn = [];
    this.generation = 0;
  }

  Viewer.prototype.setStatus = function (text) { this.status.textContent = text; };

  Viewer.prototype.loadModule = function (name, then) {
    var self = this;
    if (registered[name]) { then(registered[name]); return; }
    var option = Array.prototype.find.call(this.select.options, function (o) { return o.value === name; });
    if (!option) { this.setStatus("This run has no module named " + name + "."); return; }
    this.setStatus("Loading " + name + "…");
    (waiting[name] = waiting[name] || []).push(then);
    if (waiting[name].length > 1) return;
    var script = document.createElement("script");
    script.src = option.dataset.src;
    script.onerror = function () {
      delete waiting[name];
      self.setStatus("The graph data of " + name + " (" + option.dataset.src + ") could not be loaded: open this " +
        "page from the site folder, where that file sits beside it.");
    };
    document.head.appendChild(script);
  };

  Viewer.prototype.showModule = function (name, op) {
    var self = this;
    this.select.value = name;
    this.loadModule(name, function (data) {
      self.data = data;
      self.expanded = {};
      self.center = -1;
      self.selected = -1;
      self.text.textContent = data.text;
      self.lineStarts = null;
      self.textNote.textContent = data.unprinted.length ?
        "Differences from XProf's text: this printer does not reproduce " + data.unprinted.join("; ") + "." :
        "As XProf prints it (its graph viewer's short text), " + data.text.split("\n").length + " lines.";
      self.textNote.classList.toggle("note", data.unprinted.length > 0);
      var target = op !== undefined && op !== null && op !== "" ? self.resolve(op) : -1;
      if (target < 0) {
        var entry = data.computations.filter(function (c) { return c.entry; })[0] || data.computations[0];
        target = entry ? entry.root : -1;
        if (op) self.note = "No op or computation named “" + op + "” in " + name + "; showing the entry root.";
      }
      self.centerOn(target);
    });
  };

  Viewer.prototype.resolve = function (name) {
    var d = this.data;
    if (name in d.byName) return d.byName[name];
    if (name in d.compByName) return d.computations[d.compByName[name]].root;
    return -1;
  };

  Viewer.prototype.depth = function () { return Number(this.depthSelect.value) || 1; };

  Viewer.prototype.updateHash = function () {
    if (!this.data || this.center < 0) return;
    var params = new URLSearchParams();
    params.set("module", this.data.name);
    params.set("op", this.data.nodes[this.center].n);
    params.set("depth", String(this.depth()));
    var hash = "#" + params.toString();
    if (location.hash === hash) return;
    try { history.replaceState(null, "", hash); } catch (e) { location.hash = hash; }
  };

  /* The ops within `depth` steps of the centre (operands and users, in its computation), cut at maxNodes,
     plus the bodies of the open fusions among them. */
  Viewer.prototype.neighbourhood = function (center, depth) {
    var d = this.data, dist = {}, order = [center], truncated = false;
    dist[center] = 0;
    for (var q = 0; q < order.length; q++) {
      var i = order[q];
      if (dist[i] >= depth) continue;
      var next = (d.nodes[i]["in"] || []).concat(d.users[i]);
      for (var k = 0; k < next.length; k++) {
        var j = next[k];
        if (j in dist) continue;
        if (order.length >= this.maxNodes) { truncated = true; break; }
        dist[j] = dist[i] + 1;
        order.push(j);
      }
      if (truncated) break;
    }
    var bodies = [], total = order.length, self = this, opened = {};
    order.forEach(function (i) {
      var node = d.nodes[i];
      if (node.o !== "fusion" || !node.calls || !(self.expandAll.checked || self.expanded[i])) return;
      if (opened[node.calls[0]]) return;  // XLA gives every fusion its own body; draw a shared one once
      opened[node.calls[0]] = true;
      var body = d.computations[node.calls[0]].nodes;
      if (total + body.length > self.maxNodes) { truncated = true; return; }
      total += body.length;
      bodies.push({fusion: i, computation: node.calls[0], nodes: body});
    });
    return {nodes: order, dist: dist, bodies: bodies, truncated: truncated};
  };

  Viewer.prototype.label = function (i, hidden) {
    var node = this.data.nodes[i];
    var rows = ["<B>" + escapeLabel(clip(node.n, 48)) + "</B>",
      escapeLabel(node.o + (node.fk ? " (" + node.fk + ")" : "") + (node.p !== undefined ? " " + node.p : "")),
      '<FONT POINT-SIZE="9">' + escapeLabel(clip(node.s, 64)) + "</FONT>"];
    if (node.m) {
      var numbers = duration(node.m.time_us) + (node.m.flops ? " · " + count(node.m.flops) + "FLOP" : "");
      rows.push('<FONT POINT-SIZE="9" COLOR="#8a3c00">' + escapeLabel(numbers) + "</FONT>");
    }
    if (hidden) rows.push('<FONT POINT-SIZE="9" COLOR="#59636e">' + escapeLabel(hidden) + "</FONT>");
    return "<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"1\">" +
      rows.map(function (r) { return "<TR><TD>" + r + "</TD></TR>"; }).join("") + "</TABLE>>";
  };

  Viewer.prototype.dot = function (hood) {
    var d = this.data, self = this, lines = [], edges = [], shown = {};
    hood.nodes.forEach(function (i) { shown[i] = true; });
    var open = {};
    hood.bodies.forEach(function (b) { open[b.fusion] = b; b.nodes.forEach(function (i) { shown[i] = true; }); });
    lines.push("digraph hlo {");
    // Courier: Graphviz sizes boxes from its own font metrics, and a monospace font's widths (0.6 em)
    // are what the browser's monospace font draws, so labels fit their boxes.
    lines.push('graph [rankdir=TB, nodesep=0.25, ranksep=0.4, bgcolor="transparent", ' +
      'fontname="Courier", fontsize=10];');
    lines.push('node [shape=box, style="rounded,filled", fontname="Courier", fontsize=10, ' +
      'margin="0.1,0.04", color="#57606a", penwidth=1];');
    lines.push('edge [color="#6e7781", arrowsize=0.6];');
    function nodeLine(i, extra) {
      var node = d.nodes[i], hidden = "";
      if (hood.dist[i] !== undefined) {
        var ins = (node["in"] || []).filter(function (j) { return !shown[j]; }).length;
        var outs = d.users[i].filter(function (j) { return !shown[j]; }).length;
        if (ins || outs) hidden = [ins ? "+" + ins + " operand" + (ins > 1 ? "s" : "") : "",
          outs ? "+" + outs + " user" + (outs > 1 ? "s" : "") : ""].filter(Boolean).join(", ") + " not shown";
      }
      var attrs = ['id="gvnode-' + i + '"', "label=" + self.label(i, hidden),
        'fillcolor="' + (FILL[node.o] || "#ffffff") + '"'];
      if (i === self.center) attrs.push('color="#0b57d0"', "penwidth=3");
      if (hidden) attrs.push('style="rounded,filled,dashed"');
      return "n" + i + " [" + attrs.concat(extra || []).join(", ") + "];";
    }
    hood.nodes.forEach(function (i) {
      if (!open[i]) lines.push(nodeLine(i));
    });
    hood.bodies.forEach(function (b) {
      var fusion = d.nodes[b.fusion];
      lines.push("subgraph cluster_" + b.fusion + " {");
      lines.push('id="gvcluster-' + b.fusion + '"; style="rounded,dashed"; color="#8c959f"; ' +
        'label=<<B>' + escapeLabel(clip(fusion.n, 48)) + "</B> " + escapeLabel(fusion.o + " " + (fusion.fk || "")) +
        (b.fusion === self.center ? " (centre)" : "") + '<BR/><FONT POINT-SIZE="9">calls ' +
        escapeLabel(clip(d.computations[b.computation].n, 64)) + "</FONT>>;");
      b.nodes.forEach(function (i) { lines.push(nodeLine(i)); });
      b.nodes.forEach(function (i) {
        (d.nodes[i]["in"] || []).forEach(function (j) { edges.push("n" + j + " -> n" + i + ";"); });
      });
      lines.push("}");
    });
    // An open fusion's operands feed its parameters; its root feeds its users.
    function sources(j) {
      var b = open[j];
      return b ? ["n" + d.computations[b.computation].root] : ["n" + j];
    }
    function targets(i, operandIndex) {
      var b = open[i];
      if (!b) return ["n" + i];
      var params = b.nodes.filter(function (k) { return d.nodes[k].p === operandIndex; });
      return params.length ? params.map(function (k) { return "n" + k; }) : [];
    }
    hood.nodes.forEach(function (i) {
      (d.nodes[i]["in"] || []).forEach(function (j, operandIndex) {
        if (hood.dist[j] === undefined) return;
        sources(j).forEach(function (s) {
          targets(i, operandIndex).forEach(function (t) { edges.push(s + " -> " + t + ";"); });
        });
      });
    });
    return lines.concat(edges).concat(["}"]).join("\n");
  };

  Viewer.prototype.centerOn = function (i) {
    var self = this;
    if (!this.data || i < 0) { this.setStatus("This module has no ops to draw."); return; }
    this.center = i;
    this.selected = i;
    this.search.value = this.data.nodes[i].n;
    this.updateHash();
    this.showDetails(i);
    var generation = ++this.generation;
    var hood = this.neighbourhood(i, this.depth());
    var draw = function () {
      if (generation !== self.generation) return;
      var started = performance.now(), svg;
      try {
        svg = graphviz.layout(self.dot(hood), "svg", "dot");
      } catch (err) {
        self.setStatus("Graphviz could not lay out this neighbourhood: " + err);
        return;
      }
      var elapsed = performance.now() - started;
      self.render(svg, hood);
      var node = self.data.nodes[i], comp = self.data.computations[node.c];
      var opened = hood.bodies.reduce(function (n, b) { return n + b.nodes.length; }, 0);
      self.setStatus((self.note ? self.note + " " : "") + self.data.name + ": " + self.data.nodes.length +
        " ops in " + self.data.computations.length + " computations. Showing " + hood.nodes.length + " ops" +
        (opened ? " and " + opened + " inside open fusions" : "") + " within " + self.depth() + " of " + node.n +
        " (computation " + comp.n + ")" + (hood.truncated ? ", cut at " + self.maxNodes + " ops" : "") +
        "; laid out in " + Math.round(elapsed) + " ms.");
      self.note = "";
    };
    this.setStatus("Laying out the neighbourhood of " + this.data.nodes[i].n + "…");
    if (graphviz) { window.setTimeout(draw, 0); return; }
    var lib = window["@hpcc-js/wasm/graphviz"];
    if (!lib) { this.setStatus("The Graphviz script did not load, so the graph cannot be drawn."); return; }
    lib.Graphviz.load().then(function (gv) { graphviz = gv; draw(); },
      function (err) { self.setStatus("Graphviz could not start: " + err); });
  };

  Viewer.prototype.render = function (svgText, hood) {
    var self = this, d = this.data;
    var doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
    var svg = doc.documentElement;
    if (svg.nodeName !== "svg") { this.setStatus("Graphviz returned no drawing."); return; }
    svg = document.importNode(svg, true);
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    var box = svg.viewBox.baseVal;
    this.natural = {w: box.width, h: box.height};
    this.canvas.textContent = "";
    this.canvas.appendChild(svg);
    this.svg = svg;
    this.drawn = [];
    svg.querySelectorAll("g.node").forEach(function (g) {
      var i = Number(String(g.id).replace("gvnode-", ""));
      var node = d.nodes[i];
      if (!node) return;
      self.drawn.push(i);
      g.setAttribute("data-name", node.n);
      g.setAttribute("tabindex", "0");
      g.setAttribute("role", "button");
      var title = g.querySelector("title");
      if (title) title.textContent = node.n + " = " + node.s + " " + node.o;
      if (i === self.selected) g.classList.add("gv-selected");
      g.addEventListener("click", function () { self.choose(i); });
      g.addEventListener("dblclick", function () { self.centerOn(i); });
      g.addEventListener("keydown", function (e) {
        if (e.key === "Enter") self.centerOn(i);
        if (e.key === " ") { e.preventDefault(); self.choose(i); }
      });
    });
    svg.querySelectorAll("g.cluster").forEach(function (g) {
      var i = Number(String(g.id).replace("gvcluster-", ""));
      if (d.nodes[i]) g.setAttribute("data-fusion", d.nodes[i].n);
      var title = g.querySelector("title");
      if (title && d.nodes[i]) title.textContent = d.nodes[i].n + " (open fusion)";
    });
    this.fit(0.6);
    var centre = svg.querySelector("#gvnode-" + this.center) || svg.querySelector("#gvcluster-" + this.center);
    if (centre) {
      var r = centre.getBoundingClientRect(), c = this.canvas.getBoundingClientRect();
      this.canvas.scrollLeft += r.left + r.width / 2 - c.left - c.width / 2;
      this.canvas.scrollTop += r.top + r.height / 2 - c.top - c.height / 2;
    }
  };

  Viewer.prototype.applyZoom = function (scale) {
    if (!this.svg || !this.natural) return;
    this.scale = Math.max(0.1, Math.min(4, scale));
    this.svg.setAttribute("width", String(this.natural.w * this.scale * 96 / 72));
    this.svg.setAttribute("height", String(this.natural.h * this.scale * 96 / 72));
  };

  /* Fit the drawing to the canvas, never above its natural size nor below `floor` (default: any). */
  Viewer.prototype.fit = function (floor) {
    if (!this.natural) return;
    var c = this.canvas.getBoundingClientRect();
    var scale = Math.min((c.width - 16) / (this.natural.w * 96 / 72), (c.height - 16) / (this.natural.h * 96 / 72));
    this.applyZoom(Math.max(floor || 0.1, Math.min(1, scale)));
  };

  Viewer.prototype.choose = function (i) {
    this.selected = i;
    if (this.svg) {
      this.svg.querySelectorAll(".gv-selected").forEach(function (g) { g.classList.remove("gv-selected"); });
      var g = this.svg.querySelector("#gvnode-" + i);
      if (g) g.classList.add("gv-selected");
    }
    this.showDetails(i);
  };

  Viewer.prototype.opLink = function (i) {
    var self = this, node = this.data.nodes[i];
    var a = el("a", node.n);
    a.href = "#";
    a.addEventListener("click", function (e) { e.preventDefault(); self.centerOn(i); });
    return a;
  };

  Viewer.prototype.showDetails = function (i) {
    var self = this, d = this.data, node = d.nodes[i], comp = d.computations[node.c];
    var box = this.details;
    box.textContent = "";
    box.appendChild(el("h3", node.n));
    var dl = el("dl");
    function item(label, value) {
      if (value === undefined || value === null || value === "") return;
      dl.appendChild(el("dt", label));
      var dd = el("dd");
      if (value instanceof Node) dd.appendChild(value); else dd.textContent = String(value);
      dl.appendChild(dd);
    }
    function code(text) { return el("code", text); }
    item("Opcode", node.o + (node.fk ? " (" + node.fk + ")" : ""));
    item("Category", node.k);
    var where = el("span");
    where.appendChild(code(comp.n));
    if (comp.entry) where.appendChild(document.createTextNode(" (entry)"));
    var caller = d.fusionCaller[node.c];
    if (caller >= 0) {
      where.appendChild(document.createTextNode(", inside "));
      where.appendChild(this.opLink(caller));
    }
    item("Computation", where);
    item("Shape and layout", code(node.s));
    if (node.m) {
      var m = node.m;
      item("Time", duration(m.time_us) + " total, " + duration(m.self_us) + " self (" + m.self_percent.toFixed(2) +
        "% of device time) over " + m.occurrences + " occurrence" + (m.occurrences === 1 ? "" : "s"));
      if (m.flops) item("FLOPs", count(m.flops) + "FLOP total (" + count(m.flops / Math.max(m.occurrences, 1)) +
        "FLOP per occurrence)");
      item("FLOP rate", m.gflops.toFixed(3) + " GFLOP/s");
      item("Bound by", m.bound_by);
    }
    box.appendChild(dl);
    if (node.pad && node.pad.length) {
      box.appendChild(el("h4", "Layout in memory (major to minor, with tile padding)"));
      var table = el("table", null, "op-layout-table"), head = el("tr");
      ["Dimension", "Size", "Padded to"].forEach(function (h) { head.appendChild(el("th", h)); });
      var thead = el("thead");
      thead.appendChild(head);
      table.appendChild(thead);
      var body = el("tbody");
      node.pad.forEach(function (dim) {
        var tr = el("tr");
        tr.appendChild(el("td", dim[0], "num"));
        tr.appendChild(el("td", dim[1], "num"));
        tr.appendChild(el("td", dim[2] + (dim[2] !== dim[1] ? " (+" + (dim[2] - dim[1]) + ")" : ""),
          "num" + (dim[2] !== dim[1] ? " op-padded" : "")));
        body.appendChild(tr);
      });
      table.appendChild(body);
      box.appendChild(table);
    }
    var actions = el("p", null, "gv-actions");
    function button(text, handler, attr) {
      var b = el("button", text);
      b.type = "button";
      if (attr) b.setAttribute(attr, "");
      b.addEventListener("click", handler);
      actions.appendChild(b);
    }
    if (i !== this.center) button("Centre the graph here", function () { self.centerOn(i); }, "data-gv-center");
    if (node.o === "fusion" && node.calls && !this.expandAll.checked) {
      button(this.expanded[i] ? "Close the fusion" : "Open the fusion", function () {
        if (self.expanded[i]) delete self.expanded[i]; else self.expanded[i] = true;
        var keep = self.selected;
        self.centerOn(self.center);
        self.choose(keep);
      }, "data-gv-toggle-fusion");
    }
    if (node.l >= 0) button("Show in the HLO text", function () { self.showLine(node.l); }, "data-gv-show-text");
    box.appendChild(actions);
    function list(title, indices) {
      if (!indices.length) return;
      box.appendChild(el("h4", title + " (" + indices.length + ")"));
      var ul = el("ul", null, "gv-links");
      indices.slice(0, 200).forEach(function (j) {
        var li = el("li");
        li.appendChild(self.opLink(j));
        li.appendChild(el("span", " " + d.nodes[j].o, "muted"));
        ul.appendChild(li);
      });
      if (indices.length > 200) ul.appendChild(el("li", "… and " + (indices.length - 200) + " more", "muted"));
      box.appendChild(ul);
    }
    list("Operands", node["in"] || []);
    list("Users", d.users[i]);
    if (node.calls && node.calls.length) {
      box.appendChild(el("h4", "Calls"));
      var ul = el("ul", null, "gv-links");
      node.calls.forEach(function (c) {
        var li = el("li"), comp2 = d.computations[c];
        if (comp2.root >= 0) {
          var a = el("a", comp2.n);
          a.href = "#";
          a.addEventListener("click", function (e) { e.preventDefault(); self.centerOn(comp2.root); });
          li.appendChild(a);
        } else li.textContent = comp2.n;
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    if (node.l >= 0) {
      box.appendChild(el("h4", "HLO"));
      box.appendChild(el("pre", d.text.split("\n", node.l + 1)[node.l].trim(), "op-expression"));
    }
  };

  Viewer.prototype.showLine = function (line) {
    var text = this.data.text;
    if (!this.lineStarts) {
      var starts = [0];
      for (var p = text.indexOf("\n"); p >= 0; p = text.indexOf("\n", p + 1)) starts.push(p + 1);
      this.lineStarts = starts;
    }
    var wrap = this.root.querySelector(".gv-text-wrap");
    wrap.open = true;
    var textNode = this.text.firstChild;
    if (!textNode) return;
    var start = this.lineStarts[line], end = line + 1 < this.lineStarts.length ? this.lineStarts[line + 1] - 1 : text.length;
    var range = document.createRange();
    range.setStart(textNode, start);
    range.setEnd(textNode, end);
    if (window.CSS && CSS.highlights && window.Highlight) CSS.highlights.set("gv-line", new Highlight(range));
    var r = range.getBoundingClientRect(), box = this.text.getBoundingClientRect();
    this.text.scrollTop += r.top - box.top - box.height / 3;
    this.text.scrollIntoView({block: "nearest"});
  };

  Viewer.prototype.suggest = function () {
    var d = this.data, ul = this.suggestions, self = this;
    ul.textContent = "";
    var needle = this.search.value.trim().toLowerCase();
    if (!d || !needle) { ul.hidden = true; this.search.setAttribute("aria-expanded", "false"); return; }
    var prefix = [], inner = [];
    for (var k = 0; k < d.names.length && prefix.length < 30; k++) {
      var name = d.names[k], at = name.toLowerCase().indexOf(needle);
      if (at === 0) prefix.push(name); else if (at > 0 && inner.length < 30) inner.push(name);
    }
    var found = prefix.concat(inner).slice(0, 30);
    found.forEach(function (name, n) {
      var li = el("li", name);
      li.setAttribute("role", "option");
      li.id = "gv-suggestion-" + n;
      if (!(name in d.byName)) li.appendChild(el("span", " computation", "muted"));
      li.addEventListener("mousedown", function (e) { e.preventDefault(); self.pick(name); });
      ul.appendChild(li);
    });
    ul.hidden = found.length === 0;
    this.search.setAttribute("aria-expanded", found.length ? "true" : "false");
  };

  Viewer.prototype.pick = function (name) {
    this.suggestions.hidden = true;
    this.search.setAttribute("aria-expanded", "false");
    var i = this.resolve(name);
    if (i < 0) { this.setStatus("No op or computation named “" + name + "” in " + this.data.name + "."); return; }
    this.centerOn(i);
  };

  Viewer.prototype.fromHash = function () {
    var params = new URLSearchParams(location.hash.slice(1));
    var module = params.get("module"), program = params.get("program"), op = params.get("op");
    if (params.get("depth")) this.depthSelect.value = params.get("depth");
    if (!module && program) {
      var suffix = "(" + program + ")";
      var match = Array.prototype.find.call(this.select.options, function (o) {
        return o.value.slice(-suffix.length) === suffix;
      });
      if (match) module = match.value;
    }
    if (module && this.data && this.data.name === module && op) {
      var i = this.resolve(op);
      if (i >= 0 && i !== this.center) this.centerOn(i);
      return;
    }
    this.showModule(module || this.select.value, op);
  };

  Viewer.prototype.wire = function () {
    var self = this;
    this.select.addEventListener("change", function () { self.showModule(self.select.value); });
    this.search.addEventListener("input", function () { self.suggest(); });
    this.search.addEventListener("keydown", function (e) {
      if (e.key === "Enter") {
        e.preventDefault();
        var first = self.suggestions.hidden ? null : self.suggestions.querySelector("li");
        var typed = self.search.value.trim();
        self.pick(self.data && self.resolve(typed) >= 0 ? typed : (first ? first.firstChild.textContent : typed));
      } else if (e.key === "Escape") {
        self.suggestions.hidden = true;
      }
    });
    this.search.addEventListener("blur", function () { self.suggestions.hidden = true; });
    this.depthSelect.addEventListener("change", function () { if (self.center >= 0) self.centerOn(self.center); });
    this.expandAll.addEventListener("change", function () { if (self.center >= 0) self.centerOn(self.center); });
    this.root.querySelectorAll("[data-gv-zoom]").forEach(function (b) {
      b.addEventListener("click", function () {
        var how = b.dataset.gvZoom;
        if (how === "fit") self.fit(); else self.applyZoom(self.scale * (how === "in" ? 1.25 : 0.8));
      });
    });
    window.addEventListener("hashchange", function () { self.fromHash(); });
    this.fromHash();
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-graph-viewer]").forEach(function (root) { new Viewer(root).wire(); });
  });
})();
