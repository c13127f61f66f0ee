/* Error navigation: "Next error" and "Previous error" move through the error lines (see
 * model.js) on the page and in the selected step(s), wrapping at either end, and say where
 * they are ("Error line 2 of 5"); the current one is marked and revealed.
 */

import { revealLine } from "./collapse.js";
import { setText } from "./lines.js";
import { inFilter, isErrorLine } from "./model.js";

function stepError(view, delta) {
  var log = view.log;
  var errors = view.errors;
  var candidates = [];
  for (var i = 0; i < log.lines.length; i++) {
    var line = log.lines[i];
    if (line.el && inFilter(log, line) && isErrorLine(line)) {
      candidates.push(line);
    }
  }
  var status = view.card.querySelector(".log-status");
  if (!candidates.length) {
    setText(status, "No error lines in the loaded output.");
    return;
  }
  var previous = view.logEl.querySelector(".current-error");
  if (previous) {
    previous.classList.remove("current-error");
  }
  errors.index = errors.index < 0 && delta < 0
    ? candidates.length - 1
    : (errors.index + delta + candidates.length) % candidates.length;
  var target = candidates[errors.index];
  target.el.classList.add("current-error");
  setText(status, "Error line " + (errors.index + 1) + " of " + candidates.length);
  revealLine(view, target);
}

export function setUpErrors(view) {
  view.card.querySelector(".error-next").addEventListener("click", function () {
    stepError(view, 1);
  });
  view.card.querySelector(".error-prev").addEventListener("click", function () {
    stepError(view, -1);
  });
}
