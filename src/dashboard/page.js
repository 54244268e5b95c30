(function () {
  var grid = document.getElementById('grid');
  var filter = document.getElementById('filter');
  var shown = document.getElementById('shown');
  var onlyBad = document.getElementById('only-bad');
  var details = document.getElementById('details');
  var rows = Array.prototype.slice.call(grid.querySelectorAll('tr.case-row'));
  function apply() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(function (w) { return w; });
    var n = 0;
    rows.forEach(function (row) {
      var hay = (row.getAttribute('data-name') + ' ' + row.getAttribute('data-tags')).toLowerCase();
      var ok = words.every(function (w) {
        if (w.charAt(0) === '-') { return w.length === 1 || hay.indexOf(w.slice(1)) === -1; }
        return hay.indexOf(w) !== -1;
      });
      if (ok) { if (onlyBad.checked) { ok = !!row.querySelector('td.fail, td.flaky'); } }
      row.classList.toggle('hidden', !ok);
      if (ok) { n++; }
    });
    shown.textContent = n + ' of ' + rows.length + ' cases shown';
  }
  function open(cell) {
    var prev = grid.querySelector('td.selected');
    if (prev) { prev.classList.remove('selected'); }
    if (!cell || cell.classList.contains('none')) { details.hidden = true; return; }
    cell.classList.add('selected');
    var row = cell.parentNode;
    var run = grid.querySelectorAll('th.run-col')[Number(cell.getAttribute('data-col'))];
    document.getElementById('details-title').textContent = row.getAttribute('data-name');
    document.getElementById('details-meta').textContent =
      cell.getAttribute('data-status') + ' in run ' + run.getAttribute('data-run');
    document.getElementById('details-text').textContent =
      cell.getAttribute('data-message') || '(no message)';
    details.hidden = false;
  }
  grid.addEventListener('click', function (e) {
    var cell = e.target.closest ? e.target.closest('td.cell') : null;
    if (cell) { open(cell); }
  });
  filter.addEventListener('input', apply);
  onlyBad.addEventListener('change', apply);
  var params = {};
  location.hash.replace(/^#/, '').split(/[\u0026]/).forEach(function (kv) {
    var i = kv.indexOf('=');
    if (i > 0) { params[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1).replace(/\+/g, ' ')); }
  });
  if (params.filter) { filter.value = params.filter; }
  apply();
  if (params.open) { open(document.getElementById(params.open)); }
  document.body.setAttribute('data-ready', 'true');
})();
