(function(){
  "use strict";
  var O = {{ status_names }};
  var loaded = {}, failed = {}, requested = {};
  var panel = document.getElementById("detail");
  var pinned = null, current = null;
  function el(tag, text){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
  window.harnessCells = function(slug, data){ loaded[slug] = data; if (current && slugOf(current) === slug) show(current); };
  function slugOf(td){ return td.closest("section.entry").getAttribute("data-slug"); }
  function load(src){
    if (requested[src]) return;
    requested[src] = true;
    var s = document.createElement("script");
    s.src = src;
    s.onerror = function(){ failed[src] = true; if (current) show(current); };
    document.head.appendChild(s);
  }
  function show(td){
    current = td;
    var section = td.closest("section.entry"), slug = section.getAttribute("data-slug");
    var table = td.closest("table"), row = td.parentNode;
    var col = Array.prototype.indexOf.call(row.children, td);
    var head = table.tHead.rows[0].children[col];
    panel.textContent = "";
    panel.appendChild(el("h3", table.getAttribute("data-entry")));
    var dl = el("dl");
    function item(k, v){ if (v === "" || v === undefined || v === null) return; dl.appendChild(el("dt", k)); dl.appendChild(el("dd", String(v))); }
    item("Variant", row.children[0].textContent);
    item("Environment", head.getAttribute("data-env"));
    item("Device / precision", table.getAttribute("data-slice"));
    panel.appendChild(dl);
    var data = loaded[slug], src = section.getAttribute("data-cells");
    if (!data) {
      if (failed[src]) { panel.appendChild(el("p", "The details are missing: " + src + " could not be loaded.")); }
      else { panel.appendChild(el("p", "Loading the details…")); load(src); }
      return;
    }
    var si = Array.prototype.indexOf.call(section.querySelectorAll("table.heatmap"), table);
    var c = (si * data.shape[1] + row.sectionRowIndex) * data.shape[2] + (col - 1);
    var status = data.cells.status[c], count = data.cells.trials[c];
    if (status === null || status === undefined) return;
    if (!data.first) {  // where each cell's trials start: a running sum of the counts
      data.first = [];
      for (var k = 0, sum = 0; k < data.cells.trials.length; k++) { data.first.push(sum); sum += data.cells.trials[k]; }
    }
    var S = data.strings, X = data.exceptions, T = data.trials;
    item("Cell", O[status] + " (" + count + " trial" + (count === 1 ? "" : "s") + ")");
    for (var n = data.first[c]; n < data.first[c] + count; n++) {
      var x = X[T.exception[n]];
      dl.appendChild(el("dt", "Trial " + T.trial[n]));
      item("Outcome", O[T.outcome[n]]);
      item("Exception", S[x[0]] ? S[x[0]] + ": " + S[x[1]] : "");
      item("Frame", S[x[2]]);
      item("Reason", S[T.reason[n]]);
      item("Duration", (T.duration[n] / 1000) + " s");
      item("Machine", S[T.machine[n]]);
      item("Versions", S[T.versions[n]]);
      item("Started", S[T.started[n]]);
    }
  }
  function cellOf(ev){ var t = ev.target; return t && t.closest ? t.closest("td.c") : null; }
  document.addEventListener("mouseover", function(ev){ var td = cellOf(ev); if (td && !pinned) show(td); });
  document.addEventListener("click", function(ev){
    var td = cellOf(ev); if (!td) return;
    if (pinned) pinned.classList.remove("sel");
    pinned = (pinned === td) ? null : td;
    if (pinned) { pinned.classList.add("sel"); }
    show(td);
  });
  document.addEventListener("keydown", function(ev){ var td = cellOf(ev); if (td && ev.key === "Enter") td.click(); });
  function applyFilters(){
    var on = {};
    document.querySelectorAll("input.slice-filter").forEach(function(b){ on[b.value] = b.checked; });
    document.querySelectorAll("div.slice").forEach(function(d){ d.classList.toggle("hidden", !on[d.getAttribute("data-slice")]); });
    var q = document.getElementById("entry-filter").value.toLowerCase();
    document.querySelectorAll("section.entry").forEach(function(s){ s.classList.toggle("hidden", q !== "" && s.getAttribute("data-id").toLowerCase().indexOf(q) < 0); });
  }
  document.querySelectorAll("input.slice-filter").forEach(function(b){ b.addEventListener("change", applyFilters); });
  document.getElementById("entry-filter").addEventListener("input", applyFilters);
  function versionKey(v){ return v.split(/[.+]/).map(function(x){ var n = parseInt(x, 10); return isNaN(n) ? x : n; }); }
  function byVersion(a, b){ var x = versionKey(a), y = versionKey(b); for (var i = 0; i < Math.max(x.length, y.length); i++) { if (x[i] === undefined) return -1; if (y[i] === undefined) return 1; if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1; } return 0; }
  function fill(select, attr){
    var seen = {};
    document.querySelectorAll("table.heatmap th[" + attr + "]").forEach(function(th){ seen[th.getAttribute(attr)] = true; });
    Object.keys(seen).sort(byVersion).forEach(function(v){ var o = el("option", v); o.value = v; select.appendChild(o); });
  }
  var lt = document.getElementById("lookup-torch"), ll = document.getElementById("lookup-lightning");
  fill(lt, "data-torch"); fill(ll, "data-lightning");
  function lookup(){
    var torch = lt.value, lightning = ll.value, out = document.getElementById("lookup-out");
    out.textContent = "";
    var found = 0, missing = [];
    document.querySelectorAll("section.entry").forEach(function(section){
      var rows = [], slices = [];
      section.querySelectorAll("table.heatmap").forEach(function(table){
        var heads = table.tHead.rows[0].children, cols = [];
        for (var i = 1; i < heads.length; i++) {
          if (heads[i].getAttribute("data-torch") === torch && heads[i].getAttribute("data-lightning") === lightning) cols.push(i);
        }
        if (!cols.length) return;
        var sid = table.getAttribute("data-slice");
        slices.push(sid);
        Array.prototype.forEach.call(table.tBodies[0].rows, function(tr, r){
          if (!rows[r]) rows[r] = {name: tr.children[0].textContent, kind: tr.children[0].title, cells: {}};
          rows[r].cells[sid] = cols.map(function(i){ return tr.children[i]; }).filter(function(td){ return td.className; });
        });
      });
      if (!slices.length) { missing.push(section.getAttribute("data-id")); return; }
      found++;
      out.appendChild(el("h3", section.getAttribute("data-id")));
      var t = el("table"), head = el("tr");
      ["Variant", "Kind"].concat(slices).forEach(function(h){ head.appendChild(el("th", h)); });
      t.appendChild(head);
      rows.forEach(function(row){
        var tr = el("tr");
        tr.appendChild(el("td", row.name)); tr.appendChild(el("td", row.kind));
        slices.forEach(function(sid){
          var td = el("td"), cells = row.cells[sid] || [];
          td.className = cells.length === 1 ? cells[0].className : "";
          td.textContent = cells.length ? cells.map(function(c){ return c.textContent; }).join(" ") : "not run";
          td.title = cells.length ? cells.map(function(c){ return O[parseInt(c.className.replace(/.*\bs(\d+).*/, "$1"), 10)]; }).join(", ") : "";
          tr.appendChild(td);
        });
        t.appendChild(tr);
      });
      out.appendChild(t);
    });
    out.insertBefore(el("p", found + " entr" + (found === 1 ? "y was" : "ies were") + " measured on torch " + torch + " with lightning " + lightning + (missing.length ? "; not measured for this pair: " + missing.join(", ") : "") + "."), out.firstChild);
  }
  document.getElementById("lookup-go").addEventListener("click", lookup);
  document.body.setAttribute("data-ready", "1");
})();
