/* The collapsed middle of a long log: once a job has ended, a log of more than 200 lines shows
 * its first 20 and last 80 and keeps the middle behind a button that shows it in batches of
 * 1,000. revealLine brings one line into view, out of the middle if it is hidden there.
 */

import { keepPosition, setFollow } from "./follow.js";
import { applyLineClasses } from "./lines.js";
import { hiddenCount } from "./model.js";

var COLLAPSE_OVER = 200;
var KEEP_HEAD = 20;
var KEEP_TAIL = 80;
var EXPAND_BATCH = 1000;

function placeExpandButton(view) {
  var log = view.log;
  var hidden = hiddenCount(log);
  if (!hidden) {
    if (log.expandButton) {
      log.expandButton.remove();
      log.expandButton = null;
    }
    return;
  }
  if (!log.expandButton) {
    log.expandButton = document.createElement("button");
    log.expandButton.type = "button";
    log.expandButton.className = "expand";
    log.expandButton.addEventListener("click", function () {
      expandMiddle(view);
    });
  }
  var first = null;
  for (var i = 0; i < log.lines.length; i++) {
    if (log.lines[i].hidden && log.lines[i].el) {
      first = log.lines[i].el;
      break;
    }
  }
  if (first) {
    view.logEl.insertBefore(log.expandButton, first);
  }
  var batch = Math.min(EXPAND_BATCH, hidden);
  log.expandButton.textContent = "Show " + batch.toLocaleString() + " more lines (" +
    hidden.toLocaleString() + " hidden)";
}

function expandMiddle(view) {
  var log = view.log;
  keepPosition(view, function () {
    var shown = 0;
    for (var i = 0; i < log.lines.length && shown < EXPAND_BATCH; i++) {
      if (log.lines[i].hidden) {
        log.lines[i].hidden = false;
        applyLineClasses(log, log.lines[i]);
        shown += 1;
      }
    }
    placeExpandButton(view);
  });
}

/* While a backlog drains, lines that leave the tail join the hidden middle; what the reader
 * expanded stays expanded. Nothing collapses while the job runs. */
export function collapseMiddle(view) {
  var log = view.log;
  if (!log.jobTerminal || log.lines.length <= COLLAPSE_OVER) {
    return;
  }
  var tailStart = log.lines.length - KEEP_TAIL;
  if (!log.collapsed) {
    log.collapsed = true;
    log.tailStart = KEEP_HEAD;
  }
  for (var i = log.tailStart; i < tailStart; i++) {
    log.lines[i].hidden = true;
    applyLineClasses(log, log.lines[i]);
  }
  log.tailStart = Math.max(log.tailStart, tailStart);
  placeExpandButton(view);
}

/* Show `line` (a search match, an error line) in the middle of the window; Follow ends. */
export function revealLine(view, line) {
  if (line.hidden) {
    keepPosition(view, function () {
      line.hidden = false;
      applyLineClasses(view.log, line);
      placeExpandButton(view);
    });
  }
  setFollow(view, false);
  line.el.scrollIntoView({ block: "center" });
}
