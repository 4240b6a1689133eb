(function(){
  "use strict";
  var O = {{ status_names }};
  var loaded = {}, failed = {}, requested = {};
  var panel = document.getElementById("detail");
  var pinned = null, current = null;
  function el(tag, text){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
  // cells' states across nights (results/nightly/states.js, written by `harness nightly`)
  var states = null, STATES = "nightly/states.js";
  window.harnessStates = function(data){ states = data; if (current) show(current); };
  window.harnessCells = function(slug, data){ loaded[slug] = data; if (current && slugOf(current) === slug) show(current); };
  function slugOf(td){ return td.closest("section.entry").getAttribute("data-slug"); }
  function load(src, onerror){
    if (requested[src]) return;
    requested[src] = true;
    var s = document.createElement("script");
    s.src = src;
    s.onerror = function(){ failed[src] = true; if (onerror) onerror(); if (current) show(current); };
    document.head.appendChild(s);
  }
  // the column head of a cell: the heads with data-envs are one per column, in order
  function headOf(table, col){ return table.tHead.querySelectorAll("th[data-envs]")[col - 1]; }
  function place(td){
    // the panel floats over the page, on the side away from the cell, below the header
    panel.hidden = false;
    var r = td.getBoundingClientRect();
    panel.classList.toggle("left", r.left + r.width / 2 > window.innerWidth / 2);
    panel.style.top = (document.querySelector("header").getBoundingClientRect().bottom + 8) + "px";
  }
  function hide(){ if (pinned) { pinned.classList.remove("sel"); pinned = null; } current = null; panel.hidden = true; }
  function show(td){
    current = td;
    place(td);
    var section = td.closest("section.entry"), slug = section.getAttribute("data-slug");
    var table = td.closest("table"), row = td.parentNode;
    var col = Array.prototype.indexOf.call(row.children, td);
    var head = headOf(table, col);
    panel.textContent = "";
    var close = el("button", "×"); close.className = "close"; close.type = "button"; close.title = "Close (Esc)";
    close.addEventListener("click", hide);
    panel.appendChild(close);
    panel.appendChild(el("h3", table.getAttribute("data-entry")));
    if (!pinned) panel.appendChild(el("p", "Click the cell to keep this open."));
    var dl = el("dl");
    function item(list, k, v){ if (v === "" || v === undefined || v === null) return; list.appendChild(el("dt", k)); list.appendChild(el("dd", String(v))); }
    item(dl, "Variant", row.children[0].textContent);
    item(dl, "What it is", row.children[0].title);
    item(dl, "Versions", head.title);
    item(dl, "Device / precision", table.getAttribute("data-slice"));
    if (td.title) item(dl, "Seen", td.title);
    panel.appendChild(dl);
    var data = loaded[slug], src = fileOf("cells", CELL_ENTRIES, slug);
    if (!data) {
      if (failed[src]) { panel.appendChild(el("p", "The details are missing: " + src + " could not be loaded.")); }
      else { panel.appendChild(el("p", "Loading the details…")); load(src); }
      return;
    }
    if (!data.first) {  // where each cell's trials start: a running sum of the counts
      data.first = [];
      for (var k = 0, sum = 0; k < data.cells.trials.length; k++) { data.first.push(sum); sum += data.cells.trials[k]; }
    }
    var S = data.strings, X = data.exceptions, T = data.trials;
    var si = parseInt(table.getAttribute("data-si"), 10), vi = parseInt(row.children[0].getAttribute("data-v"), 10);
    head.getAttribute("data-envs").split(" ").forEach(function(e){
      var c = (si * data.shape[1] + vi) * data.shape[2] + parseInt(e, 10);
      var status = data.cells.status[c], count = data.cells.trials[c];
      if (status === null || status === undefined) return;
      var list = el("dl");
      panel.appendChild(list);
      item(list, "Cell", O[status] + " (" + count + " trial" + (count === 1 ? "" : "s") + ")");
      if (!states && !failed[STATES]) load(STATES);
      var across = states && states[table.getAttribute("data-entry")];
      across = across && across[row.children[0].textContent];
      across = across && across[data.envs[parseInt(e, 10)] + "-" + table.getAttribute("data-slice")];
      if (across) item(list, "Across nights", across[0] + " since " + across[1] + " (" + across[3] + " of " + across[2] + " runs failed; nightly " + states[""] + ")");
      for (var n = data.first[c]; n < data.first[c] + count; n++) {
        var x = X[T.exception[n]];
        list.appendChild(el("h4", "Trial " + T.trial[n]));
        item(list, "Outcome", O[T.outcome[n]]);
        item(list, "Exception", S[x[0]] ? S[x[0]] + ": " + S[x[1]] : "");
        item(list, "Frame", S[x[2]]);
        item(list, "Reason", S[T.reason[n]]);
        item(list, "Duration", (T.duration[n] / 1000) + " s");
        item(list, "Machine", S[T.machine[n]]);
        item(list, "Versions", S[T.versions[n]]);
        item(list, "Started", S[T.started[n]]);
      }
    });
  }
  function cellOf(ev){ var t = ev.target; return t && t.closest ? t.closest("td.c") : null; }
  document.addEventListener("mouseover", function(ev){
    var td = cellOf(ev);
    if (pinned) return;
    if (td && td.closest("table.heatmap")) show(td);
    else if (current && !panel.contains(ev.target) && !(ev.target.closest && ev.target.closest("table.heatmap"))) hide();
  });
  document.addEventListener("click", function(ev){
    var td = cellOf(ev); if (!td || !td.closest("table.heatmap")) return;
    if (pinned) pinned.classList.remove("sel");
    pinned = (pinned === td) ? null : td;
    if (pinned) { pinned.classList.add("sel"); }
    show(td);
  });
  document.addEventListener("keydown", function(ev){
    if (ev.key === "Escape") { hide(); return; }
    var td = cellOf(ev); if (td && ev.key === "Enter") td.click();
  });
  // -- the entries' sections: each is in its section file (sections/NNNN.js, a line an
  // entry: harnessSection(slug, markup)), loaded when the entry is opened from its row, a
  // #e-<slug> link or "Open all shown". The markup is the report's own templates'
  // output, every run-derived text in it escaped; it is parsed inert (DOMParser runs no
  // script) and only then moved into the page.
  var markups = {}, waiting = {}, entriesDiv = document.getElementById("entries");
  function rowOf(slug){
    var a = document.querySelector("#summary a[href=\"#e-" + slug.replace(/["\\]/g, "") + "\"]");
    return a ? a.closest("tr") : null;
  }
  function slugOfRow(row){ return row.querySelector("a").getAttribute("href").slice(3); }
  // slug -> its row's place (the entries in id order): the sections opened are kept in that
  // order, and it names the entry's files. An entry's section is in sections/NNNN.js and its
  // cells' details in cells/NNNN.js, NNNN its place over the entries a file holds: nothing
  // in an entry's own markup names them, so an entry added before it changes none of it
  var order = null, SECTION_ENTRIES = {{ section_entries }}, CELL_ENTRIES = {{ cell_entries }};
  function placeOf(slug){
    if (!order) { order = {}; document.querySelectorAll("#summary tbody tr[data-id]").forEach(function(r, k){ order[slugOfRow(r)] = k; }); }
    return order[slug];
  }
  function fileOf(folder, per, slug){
    var n = String(Math.floor(placeOf(slug) / per));
    while (n.length < 4) n = "0" + n;
    return folder + "/" + n + ".js";
  }
  function insertSection(slug){
    var doc = new DOMParser().parseFromString(markups[slug], "text/html");
    var section = document.adoptNode(doc.body.firstElementChild), after = null;
    Array.prototype.some.call(entriesDiv.children, function(s){ if (placeOf(s.getAttribute("data-slug")) > placeOf(slug)) { after = s; return true; } return false; });
    entriesDiv.insertBefore(section, after);
    applyFilters(section);
    return section;
  }
  function opened(slug){
    var section = document.getElementById("e-" + slug) || insertSection(slug), calls = waiting[slug] || [];
    delete waiting[slug];
    calls.forEach(function(f){ f(section); });
  }
  window.harnessSection = function(slug, markup){ markups[slug] = markup; if (waiting[slug]) opened(slug); };
  // open the entry of ``row``, then f(its section) (null where its file could not be loaded)
  function openEntry(row, f){
    var slug = slugOfRow(row), src = fileOf("sections", SECTION_ENTRIES, slug);
    (waiting[slug] = waiting[slug] || []).push(f || function(){});
    if (document.getElementById("e-" + slug) || markups[slug]) { opened(slug); return; }
    if (failed[src]) { delete waiting[slug]; row.classList.add("missing"); row.title = src + " could not be loaded"; (f || function(){})(null); return; }
    load(src, function(){ var calls = waiting[slug] || []; delete waiting[slug]; row.classList.add("missing"); row.title = src + " could not be loaded"; calls.forEach(function(g){ g(null); }); });
  }
  // the section's top just below the header (which stays at the top of the window)
  function reveal(section){ if (section) window.scrollBy(0, section.getBoundingClientRect().top - document.querySelector("header").getBoundingClientRect().bottom - 4); }
  function openHash(){
    var h;
    try { h = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
    if (h.indexOf("e-") !== 0) return;
    var row = rowOf(h.slice(2));
    if (row) openEntry(row, reveal);
  }
  window.addEventListener("hashchange", openHash);
  document.getElementById("summary").addEventListener("click", function(ev){
    var row = ev.target.closest ? ev.target.closest("tr[data-id]") : null;
    if (!row) return;
    ev.preventDefault();
    var slug = slugOfRow(row);
    if (location.hash !== "#e-" + slug) history.pushState(null, "", "#e-" + slug);
    openEntry(row, reveal);
  });
  // open the entries with these ids (every entry the filter shows where ids is null), then done()
  window.harnessOpen = function(ids, done){
    var rows = Array.prototype.filter.call(document.querySelectorAll("#summary tbody tr[data-id]"), function(r){
      return ids ? ids.indexOf(r.getAttribute("data-id")) >= 0 : !r.classList.contains("hidden");
    });
    var left = rows.length + 1;
    function one(){ if (--left === 0 && done) done(); }
    rows.forEach(function(r){ openEntry(r, one); });
    one();
  };
  document.getElementById("open-shown").addEventListener("click", function(){ window.harnessOpen(null); });
  // the filters over the page, or (``section``: one just opened) over that section alone
  function applyFilters(section){
    var on = {}, root = section && section.nodeType === 1 ? section : null;
    document.querySelectorAll("input.slice-filter").forEach(function(b){ on[b.value] = b.checked; });
    (root || document).querySelectorAll("div.slice").forEach(function(d){ d.classList.toggle("hidden", !on[d.getAttribute("data-slice")]); });
    var q = document.getElementById("entry-filter").value.toLowerCase();
    function off(node){ return q !== "" && node.getAttribute("data-id").toLowerCase().indexOf(q) < 0; }
    if (root) { root.classList.toggle("hidden", off(root)); return; }
    document.querySelectorAll("section.entry").forEach(function(s){ s.classList.toggle("hidden", off(s)); });
    document.querySelectorAll("#summary tbody tr[data-id]").forEach(function(r){ r.classList.toggle("hidden", off(r)); });
  }
  document.querySelectorAll("input.slice-filter").forEach(function(b){ b.addEventListener("change", function(){ applyFilters(); }); });
  document.getElementById("entry-filter").addEventListener("input", function(){ applyFilters(); });
  openHash();
})();
