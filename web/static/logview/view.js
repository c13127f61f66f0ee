/* forge-ci job log viewer: the log area of a job page, enhanced. No dependencies, no build step:
 * plain ES modules, one concept a module, all working on one `view` of one job card.
 *
 *   model.js     the lines in memory and the rule that forms them from log records
 *   lines.js     the line elements: made, read back from the server's HTML, classed
 *   follow.js    Follow, and keeping the reader's place while lines come and go
 *   trim.js      a running job's page keeps its last 5,000 lines
 *   collapse.js  a long completed log hides its middle behind a button
 *   search.js    search with match navigation
 *   errors.js    error navigation
 *   output.js    Copy and Download
 *   filter.js    step links filter without reloading
 *
 * Log text is only ever set with textContent: it is never interpreted as HTML. Nothing is stored
 * in browser storage. pipelines.js creates the view with createLogView(card) and feeds it
 * records as they arrive.
 */

import { collapseMiddle } from "./collapse.js";
import { setUpErrors } from "./errors.js";
import { setUpFilter } from "./filter.js";
import { keepPosition, scrollToEnd, setUpFollow } from "./follow.js";
import { applyLineClasses, lineElement, readRenderedLines, setText } from "./lines.js";
import { addRecord, newLog } from "./model.js";
import { setUpOutput } from "./output.js";
import { refreshSearch, setUpSearch } from "./search.js";
import { trimWindow } from "./trim.js";

function appendRecords(view, records) {
  var log = view.log;
  if (!records.length) {
    return;
  }
  var fresh = [];
  var changed = [];
  for (var i = 0; i < records.length; i++) {
    addRecord(log, records[i], fresh, changed);
  }
  keepPosition(view, function () {
    var fragment = document.createDocumentFragment();
    for (var j = 0; j < fresh.length; j++) {
      fresh[j].el = lineElement(fresh[j]);
      applyLineClasses(log, fresh[j]);
      fragment.appendChild(fresh[j].el);
    }
    for (var k = 0; k < changed.length; k++) {
      setText(changed[k].el.querySelector(".tx"), changed[k].text);
      applyLineClasses(log, changed[k]);
    }
    view.logEl.appendChild(fragment);
    if (!log.jobTerminal) {
      trimWindow(view);
    }
    collapseMiddle(view);
  });
  refreshSearch(view);
  if (log.follow) {
    scrollToEnd();
  }
}

function setUp(view) {
  var card = view.card;
  var log = view.log;
  log.jobTerminal = card.getAttribute("data-job-terminal") === "true";
  log.filter = card.getAttribute("data-step") || "";
  log.open = card.getAttribute("data-open-line") === "true";
  readRenderedLines(log, view.logEl);
  for (var i = 0; i < log.lines.length; i++) {
    applyLineClasses(log, log.lines[i]);
  }
  var more = card.querySelector(".log-more");
  if (more) {
    more.hidden = true;  // the script loads the rest
  }
  collapseMiddle(view);
  card.querySelector(".log-tools").hidden = false;
  setUpSearch(view);
  setUpErrors(view);
  setUpFollow(view);
  setUpOutput(view);
  setUpFilter(view);
}

export function createLogView(card) {
  var view = {
    card: card,
    logEl: card.querySelector(".log"),
    log: newLog(),
    search: { query: "", hits: [], index: -1 },  // search.js
    errors: { index: -1 }                         // errors.js
  };
  setUp(view);
  return {
    appendRecords: function (records) {
      appendRecords(view, records);
    },
    /* The job has ended: from now on its log may collapse, and nothing is trimmed. */
    jobEnded: function () {
      if (!view.log.jobTerminal) {
        view.log.jobTerminal = true;
        collapseMiddle(view);
      }
    },
    state: view.log
  };
}
