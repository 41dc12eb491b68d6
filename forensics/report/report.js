// gpu-forensics report: one page per hash (#fleet, #incident-KEY), charts drawn when their page is shown.
// Every text the page shows is already escaped HTML or set with textContent; nothing here builds markup.
(function () {
  "use strict";
  var drawn = {};

  function spec(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function draw(page) {
    var charts = page.querySelectorAll("div.chart[data-spec]");
    for (var i = 0; i < charts.length; i++) {
      var div = charts[i], id = div.getAttribute("data-spec");
      if (drawn[id]) continue;
      var s = spec(id);
      if (!s) continue;
      drawn[id] = true;
      if (!s.data.length) {
        div.classList.add("empty");
        div.textContent = "Nothing to draw: " + ((s.layout.title || {}).text || "no data").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
        continue;
      }
      Plotly.newPlot(div, s.data, s.layout, {responsive: true, displaylogo: false});
    }
  }

  function show() {
    var want = (location.hash || "#fleet").slice(1);
    var pages = document.querySelectorAll("section.page");
    var found = null;
    for (var i = 0; i < pages.length; i++) {
      if (pages[i].id === want) found = pages[i];
    }
    if (!found) found = document.getElementById("fleet") || pages[0];
    for (var j = 0; j < pages.length; j++) pages[j].hidden = pages[j] !== found;
    if (found) {
      draw(found);
      document.title = found.getAttribute("data-title") || document.title;
    }
    window.scrollTo(0, 0);
  }

  function filter() {
    var box = document.getElementById("filter");
    if (!box) return;
    box.addEventListener("input", function () {
      var q = box.value.toLowerCase();
      var rows = document.querySelectorAll("#incident-index tbody tr");
      var shown = 0;
      for (var i = 0; i < rows.length; i++) {
        var hit = rows[i].textContent.toLowerCase().indexOf(q) >= 0;
        rows[i].hidden = !hit;
        if (hit) shown++;
      }
      document.getElementById("filter-count").textContent = shown + " shown";
    });
  }

  window.addEventListener("hashchange", show);
  filter();
  show();
  document.body.setAttribute("data-ready", "1");
})();
