/* The window of a running job's page: it keeps the last 5,000 lines; earlier ones leave the page
 * (a note says how many) but stay in the model, so Copy and Download still include them.
 */

var WINDOW = 5000;

export function trimWindow(view) {
  var log = view.log;
  var rendered = [];
  for (var i = 0; i < log.lines.length; i++) {
    if (log.lines[i].el) {
      rendered.push(log.lines[i]);
    }
  }
  var excess = rendered.length - WINDOW;
  if (excess <= 0) {
    return;
  }
  for (var j = 0; j < excess; j++) {
    rendered[j].el.remove();
    rendered[j].el = null;
    log.trimmed += 1;
  }
  if (!log.trimNote) {
    log.trimNote = document.createElement("div");
    log.trimNote.className = "trimmed";
    view.logEl.insertBefore(log.trimNote, view.logEl.firstChild);
  }
  log.trimNote.textContent = log.trimmed.toLocaleString() + " earlier lines are not shown " +
    "(the page keeps the last " + WINDOW.toLocaleString() + "); Copy and Download include them.";
}
