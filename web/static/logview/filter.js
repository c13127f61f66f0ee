/* The step filter: a step link shows only that step's lines ("All steps" shows every line)
 * without reloading, and puts the step in the address as the server would have. A click with a
 * modifier key or another button is left to the browser (a new tab, a new window).
 */

import { keepPosition } from "./follow.js";
import { applyLineClasses } from "./lines.js";
import { refreshSearch } from "./search.js";

function setFilter(view, step, link) {
  var log = view.log;
  log.filter = step;
  var links = view.card.querySelectorAll("nav.steps a");
  for (var i = 0; i < links.length; i++) {
    if (links[i] === link) {
      links[i].setAttribute("aria-current", "true");
    } else {
      links[i].removeAttribute("aria-current");
    }
  }
  keepPosition(view, function () {
    for (var j = 0; j < log.lines.length; j++) {
      applyLineClasses(log, log.lines[j]);
    }
  });
  refreshSearch(view);
  if (window.history && window.history.replaceState) {
    window.history.replaceState(null, "", link.getAttribute("href"));
  }
}

export function setUpFilter(view) {
  var links = view.card.querySelectorAll("nav.steps a");
  for (var j = 0; j < links.length; j++) {
    links[j].addEventListener("click", function (event) {
      if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) {
        return;
      }
      event.preventDefault();
      setFilter(view, this.getAttribute("data-step") || "", this);
    });
  }
}
