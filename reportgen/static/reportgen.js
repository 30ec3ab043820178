/* reportgen page behaviour: number formatting, charts, data tables (sort, filter, count, pages, column chooser,
   expandable rows), host panels and the run switcher. Everything stays inside this function: the Vega bundle owns
   short global names, and page data only ever arrives as JSON, never as code. `window.reportgen.fmt` is the one
   number formatter of the page scripts; it writes numbers as the pages' Jinja filters do
   (reportgen/output/formatting.py): sizes and bandwidths in binary units, FLOP rates in decimal units. */
(function () {
  "use strict";

  var PAGINATE_ABOVE = 200;  // rows; longer tables are shown a page at a time
  var PAGE_SIZE = 100;

  // ---- numbers -------------------------------------------------------------------------------------------------
  function missing(v) { return v === null || v === undefined || (typeof v === "number" && isNaN(v)); }
  // One formatter per number of digits: toLocaleString builds one per call, which made rendering a page of rows
  // from data spend most of its time there.
  var formatters = {};
  function grouped(v, digits) {
    var f = formatters[digits] || (formatters[digits] = new Intl.NumberFormat("en-US", {
      minimumFractionDigits: digits, maximumFractionDigits: digits }));
    return f.format(Number(v));
  }
  function scaled(value, prefixes, base, unit, below) {
    for (var i = 0; i < prefixes.length; i++) {
      if (Math.abs(value) < below || i === prefixes.length - 1) {
        return grouped(value, Math.abs(value) >= 10 || value === 0 ? 1 : 2) + " " + prefixes[i] + unit;
      }
      value /= base;
    }
    return "–";
  }
  var fmt = {
    num: function (v, digits) { return missing(v) ? "–" : grouped(v, digits === undefined ? 2 : digits); },
    int: function (v) { return missing(v) ? "–" : grouped(Math.trunc(v), 0); },
    pct: function (v, digits) { return missing(v) ? "–" : Number(v).toFixed(digits === undefined ? 1 : digits) + "%"; },
    ms: function (v, digits) { return missing(v) ? "–" : grouped(v, digits === undefined ? 1 : digits) + " ms"; },
    us: function (v, digits) { return missing(v) ? "–" : grouped(v, digits === undefined ? 1 : digits) + " µs"; },
    bytes: function (v) {
      if (missing(v)) return "–";
      var units = ["B", "KiB", "MiB", "GiB", "TiB"], x = Number(v);
      for (var i = 0; i < units.length; i++) {
        if (Math.abs(x) < 1024 || i === units.length - 1) return grouped(x, i === 0 ? 0 : 1) + " " + units[i];
        x /= 1024;
      }
      return "–";
    },
    bandwidth: function (bytesPerS) {
      return missing(bytesPerS) ? "–" : scaled(Number(bytesPerS), ["", "Ki", "Mi", "Gi", "Ti", "Pi"], 1024, "B/s", 10240);
    },
    flopRate: function (flopPerS) {
      return missing(flopPerS) ? "–" : scaled(Number(flopPerS), ["", "k", "M", "G", "T", "P", "E"], 1000, "FLOP/s", 1000);
    },
    // A duration in picoseconds, in the unit that reads best (formatting.py's fmt_duration_ps alike).
    durationPs: function (ps, digits) {
      if (missing(ps)) return "–";
      var d = digits === undefined ? 1 : digits, a = Math.abs(ps);
      if (a >= 1e12) return grouped(ps / 1e12, d) + " s";
      if (a >= 1e9) return grouped(ps / 1e9, d) + " ms";
      if (a >= 1e6) return grouped(ps / 1e6, d) + " µs";
      return grouped(ps / 1e3, d) + " ns";
    },
    // A duration in µs (XProf's op tables), in the unit that reads best (formatting.py's fmt_duration_us alike).
    durationUs: function (us, digits) {
      return missing(us) ? "–" : fmt.durationPs(Number(us) * 1e6, digits === undefined ? 2 : digits);
    }
  };

  // ---- charts --------------------------------------------------------------------------------------------------
  // The chart's "…" menu: a named control for keyboards and screen readers.
  function nameChartMenu(el) {
    var summary = el.querySelector("details > summary");
    if (summary) summary.setAttribute("aria-label", "Chart menu: save as SVG or PNG");
  }

  // Whether `el` is in a host panel not shown. Asked before `offsetParent`, which lays the page out: a run of many
  // hosts has a panel per host, and laying out a page of a thousand panels for each took seconds.
  function inHiddenPanel(el) {
    return el.closest("[data-host-panel][hidden]") !== null;
  }

  /* A single-file report holds every page's charts (150 for the shared captures): drawing them all before the
     document could be read took seconds. There each chart is drawn when it comes near the screen
     (IntersectionObserver), and the others one at a time while the page is idle, so that every chart is drawn
     without scrolling to it. A site's page draws its charts at once. */
  var lazyCharts = null, idleQueue = [], idleWaiting = false;
  function drawWhenSeen(el) {
    if (el.dataset.waiting) return;
    el.dataset.waiting = "1";
    if (!lazyCharts) {
      lazyCharts = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) {
          if (entry.isIntersecting) { lazyCharts.unobserve(entry.target); drawChart(entry.target); }
        });
      }, { rootMargin: "400px 0px" });
    }
    lazyCharts.observe(el);
    idleQueue.push(el);
    drawWhenIdle();
  }
  function drawWhenIdle() {
    if (idleWaiting || !idleQueue.length) return;
    idleWaiting = true;
    var later = window.requestIdleCallback || function (fn) { return setTimeout(fn, 50); };
    later(function () {
      idleWaiting = false;
      var el = idleQueue.shift();
      if (el && !el.dataset.embedded) { lazyCharts.unobserve(el); drawChart(el); }
      drawWhenIdle();
    }, { timeout: 1000 });
  }

  function embedCharts(root) {
    var lazy = document.querySelector("main.single-file") !== null && "IntersectionObserver" in window;
    root.querySelectorAll("[data-vega-spec]").forEach(function (el) {
      if (el.dataset.embedded) return;
      if (lazy) drawWhenSeen(el);
      // A chart of a host panel not shown is drawn when its panel is (wireHostSelect): a JAX run's memory viewer
      // drew the 40 charts of every module before it opened.
      else if (!inHiddenPanel(el)) drawChart(el);
    });
  }

  function drawChart(el) {
    if (el.dataset.embedded) return;
    // A chart as wide as its container is drawn when its panel is shown (a hidden one measures 0 wide).
    if (el.classList.contains("wide") && (inHiddenPanel(el) || el.offsetParent === null)) {
      delete el.dataset.waiting;  // drawn when its panel is shown (embedCharts of the panel)
      return;
    }
    var source = document.getElementById(el.dataset.vegaSpec);
    if (!source || !window.vegaEmbed) return;
    el.dataset.embedded = "1";
    var spec = JSON.parse(source.textContent);
    // Vega names the drawing (its svg) after the spec's description, for screen readers.
    if (!spec.description && el.dataset.label) spec.description = el.dataset.label;
    window.vegaEmbed(el, spec, {
      // SVG, unless a chart of thousands of marks asks for a canvas (usermeta.renderer), which draws them faster.
      renderer: (spec.usermeta && spec.usermeta.renderer) || "svg",
      actions: { export: true, source: false, compiled: false, editor: false }
    }).then(function (result) {
      nameChartMenu(el);
      el.vegaView = result.view;  // for page scripts that change a chart's variables (memory_profile.js)
      el.dispatchEvent(new CustomEvent("reportgen:chart", { bubbles: true }));
      return result;
    }).catch(function (err) { console.error("chart " + el.id + ": " + err); });
  }

  // ---- data tables ---------------------------------------------------------------------------------------------
  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) return "";
    var raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    var num = parseFloat(raw.replace(/,/g, ""));
    return raw !== "" && !isNaN(num) && /^[-+]?[\d,.]+(e[-+]?\d+)?\s*(%|ms|µs|s|B|KiB|MiB|GiB|TiB)?$/i.test(raw) ? num : raw.toLowerCase();
  }

  // ---- long names ------------------------------------------------------------------------------------------------
  /* A name cut to its cell keeps its tail, where names differ ("gradient_tape/small_cnn_1/…/conv2d_1_2/convolution"):
     its last path segments (up to TAIL_CHARS) stay whole and the ellipsis goes in the middle, cutting the head. The
     cell's text stays the whole name (filter, sort, copy), and its title shows it whole on hover. */
  var TAIL_CHARS = 24, SHORT_TAIL_CHARS = 14;  // about 60% of a name column (20rem) and of a narrow one (12rem)
  function nameTail(text, most) {
    if (text.length <= most) return -1;
    var start = text.length;
    for (var cut = text.lastIndexOf("/", start - 2); cut > 0; cut = text.lastIndexOf("/", cut - 1)) {
      if (text.length - cut > most) break;
      start = cut;
    }
    if (start === text.length) start = text.length - most;  // one long segment: its last characters
    return start;
  }
  function middleEllipsis(cell) {
    if (cell.firstElementChild || cell.dataset.mid) return;
    var text = cell.textContent, start = nameTail(text, cell.classList.contains("short") ? SHORT_TAIL_CHARS : TAIL_CHARS);
    cell.dataset.mid = "1";
    if (!cell.title) cell.title = text.trim();
    if (start <= 0) return;
    var wrap = document.createElement("span"), head = document.createElement("span"), tail = document.createElement("span");
    wrap.className = "mid";
    wrap.style.setProperty("--tail", (text.length - start + 1) + "ch");
    head.className = "head";
    tail.className = "tail";
    head.textContent = text.slice(0, start);
    tail.textContent = text.slice(start);
    wrap.appendChild(head);
    wrap.appendChild(tail);
    cell.textContent = "";
    cell.appendChild(wrap);
  }

  // Rows shipped as data (output/table_cells.py: table_data): each cell written as table_cell writes it. A text
  // cell's value is its text, or [text, link, title, short]: `link` the attributes of an <a> around the text (as the
  // single-file report rewrote them), `title` the cell's, `short` a shorter text shown until the row is opened. A
  // "code" cell holds its text in <code>; a "timeline" cell is a link to the trace page's timeline (its attributes).
  var NAME_CELLS = { name: "name", label: "name short", text: "", code: "name wide", timeline: "" };
  function shownValue(value, format) {
    if (format === "int") return fmt.int(value);
    if (format.slice(0, 3) === "pct") return fmt.pct(value, format.length > 4 ? +format.slice(4) : 2);
    if (format === "bytes") return fmt.bytes(value);
    if (format === "gflops") return value ? fmt.flopRate(value * 1e9) : "0";
    if (format === "gib_per_s") return value ? fmt.bandwidth(value * 1073741824) : "0";
    if (format === "us") return fmt.durationUs(value);
    if (format === "ms") return missing(value) ? "–" : fmt.durationUs(value * 1e3);
    if (format.slice(0, 3) === "ms:") return fmt.ms(value, +format.slice(3));
    return fmt.num(value, format.slice(0, 4) === "num:" ? +format.slice(4) : 3);
  }
  function cellText(value, format) {
    if (format === "timeline") return "";
    if (format in NAME_CELLS) {
      if (Array.isArray(value)) value = value[0];
      return value === null || value === undefined ? "" : String(value);
    }
    return shownValue(value, format);
  }
  // An element holding `text` (in <code> for a code cell), inside an <a> with `link`'s attributes when it has them.
  function cellContent(text, link, code, className) {
    var inner = document.createElement(code ? "code" : "span");
    inner.textContent = text;
    if (!link) {
      if (className) inner.className = className;
      return inner;
    }
    var a = document.createElement("a");
    Object.keys(link).forEach(function (name) { a.setAttribute(name, link[name]); });
    if (className) a.classList.add(className);
    a.appendChild(inner);
    return a;
  }
  function fillTextCell(td, value, format) {
    if (format === "timeline") {
      if (!value) return;
      var a = document.createElement("a");
      Object.keys(value).forEach(function (name) { a.setAttribute(name, value[name]); });
      a.textContent = "timeline";
      td.appendChild(a);
      return;
    }
    var parts = Array.isArray(value) ? value : [value], text = cellText(value, format);
    var link = parts[1], title = parts[2], short = parts[3], code = format === "code";
    if (title) td.title = title;
    if (code && !td.title) td.title = text;  // cut to one line: whole on hover
    if (short && short !== text) {
      td.title = td.title || text;
      td.appendChild(cellContent(short, link, false, "when-collapsed"));
      td.appendChild(cellContent(text, link, true, "when-expanded"));
    } else if (link || code) {
      td.appendChild(cellContent(text, link, code));
    } else {
      td.textContent = text;
    }
    if (format !== "text") td.tabIndex = 0;
    if ((format === "name" || format === "label") && !link) middleEllipsis(td);
  }
  function DataRow(values, id, formats) {
    this.values = values;
    this.id = id || "";
    this.formats = formats;
    this.el = null;
  }
  // The row's element, made when first shown.
  DataRow.prototype.element = function () {
    if (this.el) return this.el;
    var tr = document.createElement("tr");
    if (this.id) tr.id = this.id;
    for (var i = 0; i < this.formats.length; i++) {
      var format = this.formats[i], value = this.values[i], td = document.createElement("td");
      if (format in NAME_CELLS) {
        if (NAME_CELLS[format]) td.className = NAME_CELLS[format];
        fillTextCell(td, value, format);
      } else {
        td.className = "num";
        if (format !== "int") td.dataset.sort = missing(value) ? "" : String(value);
        td.textContent = cellText(value, format);
      }
      tr.appendChild(td);
    }
    tr.reportgenRow = this;
    this.el = tr;
    return tr;
  };
  DataRow.prototype.text = function () {
    if (this._text === undefined) {
      var parts = [];
      for (var i = 0; i < this.formats.length; i++) parts.push(cellText(this.values[i], this.formats[i]));
      this._text = parts.join(" ").toLowerCase();
    }
    return this._text;
  };
  DataRow.prototype.sortValue = function (index) {
    var v = this.values[index];
    if (typeof v === "number") return v;
    if (missing(v)) return this.formats[index] in NAME_CELLS ? "" : -Infinity;
    return cellText(v, this.formats[index]).toLowerCase();
  };

  // The JSON block of a table whose <tbody data-rows> names one, and its rows' ids (null for a table of <tr>s). The
  // ids get the prefix the block's own id got: the single-file report prefixes every id of a page.
  function rowData(table) {
    var body = table.tBodies[0];
    var source = body && body.dataset.rows ? document.getElementById(body.dataset.rows) : null;
    if (!source) return null;
    var data = JSON.parse(source.textContent);
    var own = data.block || "", prefix = own && source.id.slice(-own.length) === own ? source.id.slice(0, -own.length) : "";
    data.ids = (data.ids || []).map(function (id) { return prefix + id; });
    return data;
  }

  function dataRows(table) {
    var data = rowData(table);
    if (!data) return null;
    return data.rows.map(function (values, i) { return new DataRow(values, data.ids[i], data.formats); });
  }

  // Whether a table of rows as data holds a row with this id, without setting the table up.
  function holdsRow(table, id) {
    if (!table.reportgenIds) {
      var data = rowData(table);
      table.reportgenIds = data ? data.ids : [];
    }
    return table.reportgenIds.indexOf(id) >= 0;
  }

  function rowId(row) { return row.id; }
  function rowText(row) {
    if (row instanceof DataRow) return row.text();
    if (row._text === undefined) row._text = row.textContent.toLowerCase();
    return row._text;
  }
  function rowElement(row) { return row instanceof DataRow ? row.element() : row; }
  function sortValue(row, index) { return row instanceof DataRow ? row.sortValue(index) : cellValue(row, index); }

  var tableCount = 0;

  function DataTable(table) {
    this.table = table;
    table.reportgenTable = this;  // for page scripts: reportgen.tableOf
    if (!table.id) table.id = "data-table-" + (++tableCount);
    this.body = table.tBodies[0];
    this.headers = table.tHead ? Array.prototype.slice.call(table.tHead.rows[0].cells) : [];
    this.rows = dataRows(table) || Array.prototype.slice.call(this.body.rows);
    this.shown = this.rows;
    this.page = 0;
    this.paged = this.rows.length > PAGINATE_ABOVE;
    this.hiddenColumns = {};
    this.style = document.createElement("style");
    document.head.appendChild(this.style);
    this.count = document.querySelector("[data-row-count='" + table.id + "']");
    this.wrap = table.closest(".table-wrap") || table;
  }

  DataTable.prototype.setup = function () {
    var self = this;
    this.headers.forEach(function (th, index) {
      if (th.hasAttribute("data-hidden")) self.hiddenColumns[index] = true;
    });
    if (this.table.classList.contains("sortable")) this.headers.forEach(function (th, index) { self.sortable(th, index); });
    this.table.classList.add("data-table");
    this.wireExpand();
    this.addColumnChooser();
    if (this.paged) this.addPager();
    var filter = document.querySelector("input[data-filter-table='" + this.table.id + "']");
    if (filter) filter.addEventListener("input", function () { self.filter(filter.value); });
    this.applyColumns();
    // A filter typed before the table was set up (while its panel waited, or restored by the browser) applies.
    if (filter && filter.value) this.filter(filter.value);
    else this.render();
  };

  DataTable.prototype.sortable = function (th, index) {
    var self = this;
    var button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    while (th.firstChild) button.appendChild(th.firstChild);
    th.appendChild(button);
    button.addEventListener("click", function () {
      var dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
      self.headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      var keyed = self.rows.map(function (row, i) { return [sortValue(row, index), i, row]; });
      keyed.sort(function (a, b) {
        var x = a[0], y = b[0], c;
        if (typeof x === "number" && typeof y === "number") c = x - y;
        else c = String(x).localeCompare(String(y));
        return c !== 0 ? dir * c : a[1] - b[1];
      });
      self.rows = keyed.map(function (k) { return k[2]; });
      self.filter(self.needle || "");
    });
  };

  // Show the row with this id (a link's target): clear a filter that hides it, turn to its page.
  DataTable.prototype.reveal = function (id) {
    var row = this.rows.filter(function (r) { return rowId(r) === id; })[0];
    if (!row) return;
    if (this.shown.indexOf(row) < 0) {
      var filter = document.querySelector("input[data-filter-table='" + this.table.id + "']");
      if (filter) filter.value = "";
      this.filter("");
    }
    if (this.paged && !this.showAll) this.page = Math.floor(this.shown.indexOf(row) / PAGE_SIZE);
    this.render();
  };

  DataTable.prototype.filter = function (value) {
    var needle = (value || "").toLowerCase();
    var keep = this.keep;
    this.needle = needle;
    this.shown = needle === "" && !keep ? this.rows : this.rows.filter(function (row) {
      if (keep && !keep(rowElement(row))) return false;
      if (needle === "") return true;
      return rowText(row).indexOf(needle) >= 0;
    });
    this.page = 0;
    this.render();
  };

  // The rows a page script shows (those `keep(row)` is true for; null: every row), besides the filter box's: a page
  // script's own filter must go through the table, which holds the rows of its other pages out of the document.
  DataTable.prototype.keepRows = function (keep) {
    this.keep = keep;
    this.filter(this.needle);
  };

  DataTable.prototype.render = function () {
    var rows = this.shown;
    var start = 0, end = rows.length;
    if (this.paged && !this.showAll) {
      var pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
      this.page = Math.min(this.page, pages - 1);
      start = this.page * PAGE_SIZE;
      end = Math.min(rows.length, start + PAGE_SIZE);
    }
    var fragment = document.createDocumentFragment();
    for (var i = start; i < end; i++) fragment.appendChild(rowElement(rows[i]));
    this.body.textContent = "";
    this.body.appendChild(fragment);
    var total = this.rows.length;
    var counted = rows.length === total ? total.toLocaleString("en-US") + " row" + (total === 1 ? "" : "s")
      : rows.length.toLocaleString("en-US") + " of " + total.toLocaleString("en-US") + " rows";
    if (this.count) this.count.textContent = counted;
    if (this.pager) {
      this.pager.hidden = rows.length <= PAGE_SIZE;
      this.pagerText.textContent = this.showAll ? "All " + rows.length.toLocaleString("en-US") + " rows shown"
        : "Rows " + (rows.length ? start + 1 : 0).toLocaleString("en-US") + "–" + end.toLocaleString("en-US") +
          " of " + rows.length.toLocaleString("en-US");
      this.prev.disabled = this.showAll || start === 0;
      this.next.disabled = this.showAll || end >= rows.length;
      this.all.textContent = this.showAll ? "Show pages" : "Show all";
    }
    this.updateSticky();
  };

  DataTable.prototype.addPager = function () {
    var self = this;
    var pager = document.createElement("div");
    pager.className = "pager toolbar";
    function button(text, onClick) {
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = text;
      b.addEventListener("click", onClick);
      pager.appendChild(b);
      return b;
    }
    this.prev = button("‹ Previous", function () { self.page -= 1; self.render(); });
    this.pagerText = document.createElement("span");
    this.pagerText.className = "muted";
    pager.appendChild(this.pagerText);
    this.next = button("Next ›", function () { self.page += 1; self.render(); });
    this.all = button("Show all", function () { self.showAll = !self.showAll; self.render(); });
    this.wrap.parentNode.insertBefore(pager, this.wrap.nextSibling);
    this.pager = pager;
  };

  DataTable.prototype.addColumnChooser = function () {
    var self = this;
    // Offered where some columns start hidden, or the table is wide enough to want fewer.
    var optional = this.headers.filter(function (th) { return !th.hasAttribute("data-key"); });
    var hidden = this.headers.some(function (th) { return th.hasAttribute("data-hidden"); });
    if (!optional.length || (!hidden && this.headers.length < 8)) return;
    var details = document.createElement("details");
    details.className = "columns";
    var summary = document.createElement("summary");
    summary.textContent = "Columns";
    details.appendChild(summary);
    var box = document.createElement("fieldset");
    var legend = document.createElement("legend");
    legend.textContent = "Columns shown";
    box.appendChild(legend);
    this.headers.forEach(function (th, index) {
      var label = document.createElement("label");
      var input = document.createElement("input");
      input.type = "checkbox";
      input.checked = !self.hiddenColumns[index];
      input.disabled = th.hasAttribute("data-key");
      input.addEventListener("change", function () {
        if (input.checked) delete self.hiddenColumns[index]; else self.hiddenColumns[index] = true;
        self.applyColumns();
        self.updateSticky();
      });
      label.appendChild(input);
      label.appendChild(document.createTextNode(" " + th.textContent.trim()));
      box.appendChild(label);
    });
    details.appendChild(box);
    var tools = this.count ? this.count.parentNode : null;
    if (tools) tools.appendChild(details);
    else this.wrap.parentNode.insertBefore(details, this.wrap);
  };

  DataTable.prototype.applyColumns = function () {
    var id = CSS.escape(this.table.id);
    var rules = Object.keys(this.hiddenColumns).map(function (index) {
      var n = Number(index) + 1;
      return "#" + id + " > thead > tr > :nth-child(" + n + "), #" + id + " > tbody > tr > :nth-child(" + n + ")";
    });
    this.style.textContent = rules.length ? rules.join(",\n") + " { display: none; }" : "";
  };

  // Sticky columns (marked data-sticky) stay in view when the table scrolls sideways; each sits right of the ones
  // before it, so their offsets are measured once the table is laid out: in the next frame, for every table that
  // asked, together. Measuring each table as it rendered laid the document out once per table (0.75 s of a
  // single-file report's opening).
  var stickyPending = [];
  DataTable.prototype.updateSticky = function () {
    if (stickyPending.indexOf(this) >= 0) return;
    stickyPending.push(this);
    if (stickyPending.length === 1) requestAnimationFrame(measureSticky);
  };
  function measureSticky() {
    var pending = stickyPending;
    stickyPending = [];
    var measured = pending.map(function (t) { return t.stickyOffsets(); });  // reads first, then writes
    pending.forEach(function (t, i) { t.applySticky(measured[i]); });
  }
  DataTable.prototype.stickyOffsets = function () {
    var self = this;
    var sticky = this.headers.filter(function (th, i) { return th.hasAttribute("data-sticky") && !self.hiddenColumns[i]; });
    if (!sticky.length || !this.table.offsetParent) return null;
    return sticky.map(function (th) { return [self.headers.indexOf(th) + 1, th.getBoundingClientRect().width]; });
  };
  DataTable.prototype.applySticky = function (offsets) {
    if (!offsets) return;
    var left = 0;
    var id = CSS.escape(this.table.id);
    var rules = [];
    offsets.forEach(function (o) {
      var n = o[0];
      rules.push("#" + id + " > * > tr > :nth-child(" + n + ") { position: sticky; left: " + left + "px; z-index: 1; }");
      // its header cell above the rows scrolling under it and the header cells scrolling sideways under it
      rules.push("#" + id + " > thead > tr > :nth-child(" + n + ") { z-index: 3; }");
      left += o[1];
    });
    if (!this.stickyStyle) {
      this.stickyStyle = document.createElement("style");
      document.head.appendChild(this.stickyStyle);
    }
    this.stickyStyle.textContent = rules.join("\n");
    this.table.classList.add("has-sticky");
  };
  // Long names are cut to one line; a click (or Enter) on the cell shows the row whole.
  DataTable.prototype.wireExpand = function () {
    function toggle(cell) {
      var row = cell.parentNode;
      row.classList.toggle("expanded");
    }
    this.body.addEventListener("click", function (e) {
      if (e.target.closest("a, button, input, select, summary")) return;
      var cell = e.target.closest("td.name");
      if (cell) toggle(cell);
    });
    this.body.addEventListener("keydown", function (e) {
      if (e.key !== "Enter" && e.key !== " ") return;
      var cell = e.target.closest("td.name");
      if (cell && e.target === cell) { e.preventDefault(); toggle(cell); }
    });
    // Name cells are reachable by keyboard, so a long name can be opened without a mouse.
    this.rows.forEach(function (row) {
      if (row instanceof DataRow) return;  // made with theirs (DataRow.element)
      Array.prototype.forEach.call(row.cells, function (cell) {
        if (cell.classList.contains("name") && !cell.querySelector("a, button, summary")) {
          cell.tabIndex = 0;
          middleEllipsis(cell);
        }
      });
    });
  };

  var tables = [];
  // Tables of host panels not shown yet, set up when their panel is first shown: each table's setup looks up its
  // controls in the whole page and adds a stylesheet, which on a page of a thousand hosts' panels took seconds.
  var waitingTables = [];
  var wiring = false;  // while the page's host selects are wired: tables are set up once they all are

  function setUpTable(table) {
    var t = new DataTable(table);
    tables.push(t);
    t.setup();
  }

  function setUpShownTables() {
    var waiting = waitingTables;
    waitingTables = [];
    waiting.forEach(function (table) {
      if (inHiddenPanel(table)) {
        waitingTables.push(table);
        return;
      }
      try {
        setUpTable(table);
      } catch (err) {  // said, and the other tables still set up
        console.error("table " + table.id + ": " + err);
      }
    });
  }

  // ---- host panels and the run switcher -----------------------------------------------------------------------
  function wireHostSelect(select) {
    var group = select.dataset.hostSelect;
    function show() {
      var panels = document.querySelectorAll("[data-host-panel='" + group + "']");
      panels.forEach(function (panel) { panel.hidden = panel.dataset.host !== select.value; });
      if (!wiring) setUpShownTables();
      panels.forEach(function (panel) {
        if (!panel.hidden) {
          embedCharts(panel);
          tables.forEach(function (t) { if (panel.contains(t.table)) t.updateSticky(); });
        }
      });
    }
    select.addEventListener("change", show);
    show();
  }

  function wireRunSwitch(slot) {
    var site = window.reportgenRuns;
    if (!site || !site.runs || site.runs.length < 2 || document.querySelector("main.single-file")) return;
    var body = document.body;
    var root = body.dataset.root || "";
    var page = body.dataset.page || "index.html";
    var current = slot.dataset.runSwitch;
    var select = document.createElement("select");
    select.setAttribute("aria-label", "Run");
    site.runs.forEach(function (run) {
      var option = document.createElement("option");
      option.value = run.name;
      option.textContent = run.name;
      option.selected = run.name === current;
      select.appendChild(option);
    });
    select.addEventListener("change", function () {
      var run = site.runs.filter(function (r) { return r.name === select.value; })[0];
      if (!run) return;
      // The same tool in the other run when it has that page; its summary otherwise.
      var target = run.pages.indexOf(page) >= 0 ? page : "index.html";
      window.location.href = root + run.folder + "/" + target;
    });
    slot.textContent = "";
    slot.appendChild(select);
  }

  /* A link to a row (page.html#row-id) may point into a closed <details>, a hidden panel (a host, TF stats with
     IDLE), a row the filter hides or another page of a long table: open and show what holds it, then scroll it
     into view (CSS :target highlights it). */
  function revealTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (!id) return;
    // A row of a long table may be off its current page, out of the document: the table puts it back first.
    tables.forEach(function (t) { t.reveal(id); });
    var target = document.getElementById(id);
    // A row shipped as data in a table still waiting (its panel hidden) has no element yet: its table stands in.
    if (!target) target = waitingTables.filter(function (table) { return holdsRow(table, id); })[0];
    if (!target) return;
    var shownPanel = false;
    for (var el = target; el; el = el.parentElement) {  // the target may be a panel itself (memory pages)
      if (el.tagName === "DETAILS") el.open = true;
      if (el.hidden && el.dataset.hostPanel) {
        var select = document.querySelector("select[data-host-select='" + el.dataset.hostPanel + "']");
        if (select) { select.value = el.dataset.host; select.dispatchEvent(new Event("change")); shownPanel = true; }
      }
    }
    if (shownPanel) {  // its panel's tables were set up as it was shown: the row's page is shown again
      tables.forEach(function (t) { t.reveal(id); });
      target = document.getElementById(id) || target;
    }
    // A row made after the navigation (rows as data) is not the document's :target: marked so instead.
    document.querySelectorAll("tr.row-target").forEach(function (tr) { tr.classList.remove("row-target"); });
    if (target.tagName === "TR") target.classList.add("row-target");
    target.scrollIntoView({ block: "center" });
  }

  /* Run `fn` once the page is parsed, before DOMContentLoaded. A page script that takes the rows of a table does it
     then, while every row is in the document: on DOMContentLoaded this script shows a long table a page at a time,
     taking the rows of its other pages out of the document. */
  function whenParsed(fn) {
    if (document.readyState !== "loading") {
      fn();
      return;
    }
    document.addEventListener("readystatechange", function parsed() {
      document.removeEventListener("readystatechange", parsed);
      fn();
    });
  }

  // The data table of a <table> once it is set up (null before: see setUpShownTables).
  function tableOf(el) {
    return (el && el.reportgenTable) || null;
  }

  window.reportgen = { fmt: fmt, embedCharts: embedCharts, nameChartMenu: nameChartMenu, whenParsed: whenParsed,
                       tableOf: tableOf };

  document.addEventListener("DOMContentLoaded", function () {
    // Every host select first hides the panels it does not show (nested ones too), so that the tables of those
    // panels wait until they are shown.
    waitingTables = Array.prototype.slice.call(document.querySelectorAll("table.sortable, table.data"));
    wiring = true;
    document.querySelectorAll("select[data-host-select]").forEach(wireHostSelect);
    wiring = false;
    setUpShownTables();
    document.querySelectorAll("[data-run-switch]").forEach(wireRunSwitch);
    document.querySelectorAll(".sinks td.name").forEach(middleEllipsis);
    embedCharts(document);
    // Charts inside a <details> that opens later are drawn then.
    document.addEventListener("toggle", function (e) { if (e.target.open) embedCharts(e.target); }, true);
    revealTarget();
  });
  window.addEventListener("hashchange", revealTarget);
  // Charts above the row render after the page loads and push it down: show it again once they have.
  window.addEventListener("load", function () { setTimeout(revealTarget, 300); });
})();
