/* Search in the loaded output: every match of the query (any case) in the lines on the page
 * and in the selected step(s) is marked, one is current, Enter / Shift+Enter and the arrow
 * buttons move between them, and moving reveals a match hidden in a collapsed middle.
 */

import { revealLine } from "./collapse.js";
import { setText } from "./lines.js";
import { inFilter } from "./model.js";

function clearMarks(view) {
  var marks = view.logEl.querySelectorAll("mark");
  for (var i = 0; i < marks.length; i++) {
    var tx = marks[i].parentNode;
    if (tx) {
      tx.textContent = tx.textContent;
    }
  }
}

function markLine(line, query, currentOffset) {
  var tx = line.el.querySelector(".tx");
  var text = line.text;
  var lower = text.toLowerCase();
  tx.textContent = "";
  var at = 0;
  var found = lower.indexOf(query, at);
  while (found >= 0) {
    tx.appendChild(document.createTextNode(text.slice(at, found)));
    var mark = document.createElement("mark");
    mark.textContent = text.slice(found, found + query.length);
    if (found === currentOffset) {
      mark.className = "current";
    }
    tx.appendChild(mark);
    at = found + query.length;
    found = lower.indexOf(query, at);
  }
  tx.appendChild(document.createTextNode(text.slice(at)));
}

/* Find the query's matches again. `move`: make the first match current and scroll to it;
 * otherwise the current match stays current if it is still a match. */
export function runSearch(view, move) {
  var search = view.search;
  var log = view.log;
  var input = view.card.querySelector(".log-search");
  var query = input.value.toLowerCase();
  clearMarks(view);
  search.query = query;
  var previous = search.hits[search.index];
  search.hits = [];
  if (!query) {
    search.index = -1;
    setText(view.card.querySelector(".search-count"), "");
    return;
  }
  for (var i = 0; i < log.lines.length; i++) {
    var line = log.lines[i];
    if (!line.el || !inFilter(log, line)) {
      continue;
    }
    var lower = line.text.toLowerCase();
    var found = lower.indexOf(query);
    while (found >= 0) {
      search.hits.push({ line: line, offset: found });
      found = lower.indexOf(query, found + query.length);
    }
  }
  if (!move && previous) {
    search.index = -1;
    for (var h = 0; h < search.hits.length; h++) {
      if (search.hits[h].line === previous.line && search.hits[h].offset === previous.offset) {
        search.index = h;
      }
    }
  } else {
    search.index = search.hits.length ? 0 : -1;
  }
  highlight(view, move);
}

/* After lines arrived or the filter changed: search again if there is a query. */
export function refreshSearch(view) {
  if (view.search.query) {
    runSearch(view, false);
  }
}

function highlight(view, scroll) {
  var search = view.search;
  var seen = [];
  for (var i = 0; i < search.hits.length; i++) {
    if (seen.indexOf(search.hits[i].line) < 0) {
      seen.push(search.hits[i].line);
    }
  }
  var current = search.hits[search.index];
  for (var j = 0; j < seen.length; j++) {
    var line = seen[j];
    markLine(line, search.query, current && current.line === line ? current.offset : -1);
  }
  var count = search.hits.length
    ? (search.index + 1) + " of " + search.hits.length
    : "no matches";
  if (view.log.trimmed) {
    count += " (in the lines shown)";
  }
  setText(view.card.querySelector(".search-count"), count);
  if (current && scroll) {
    revealLine(view, current.line);
  }
}

function stepSearch(view, delta) {
  var search = view.search;
  if (!search.hits.length) {
    runSearch(view, true);
    return;
  }
  search.index = (search.index + delta + search.hits.length) % search.hits.length;
  highlight(view, true);
}

export function setUpSearch(view) {
  var card = view.card;
  var input = card.querySelector(".log-search");
  input.addEventListener("input", function () {
    runSearch(view, true);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter") {
      event.preventDefault();
      stepSearch(view, event.shiftKey ? -1 : 1);
    }
  });
  card.querySelector(".search-next").addEventListener("click", function () {
    stepSearch(view, 1);
  });
  card.querySelector(".search-prev").addEventListener("click", function () {
    stepSearch(view, -1);
  });
}
