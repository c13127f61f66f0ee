/* Copy and Download: all loaded output of the selected step(s), lines trimmed from the page
 * included, to the clipboard (a hidden textarea where the Clipboard API is unavailable, refuses,
 * or has not answered within COPY_WAIT_MS) or to a file named after the run, the job and the
 * selected step. Either way the status line says what happened. Nothing is stored in browser
 * storage.
 */

import { setText } from "./lines.js";
import { loadedText } from "./model.js";

// A Clipboard API write that has not answered by then (seen in headless Chromium on a loaded
// machine) is given up for the textarea, while the click still counts as the user's gesture.
var COPY_WAIT_MS = 1500;

function copyOutput(view) {
  var text = loadedText(view.log);
  var status = view.card.querySelector(".log-status");
  var lines = text ? text.split("\n").length - 1 : 0;
  var answered = false;
  function once(then) {
    return function () {
      if (!answered) {
        answered = true;
        then();
      }
    };
  }
  function done() {
    setText(status, "Copied " + lines.toLocaleString() + " lines.");
  }
  function fallback() {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (e) {
      // refused: not copied
    }
    area.remove();
    if (copied) {
      done();
    } else {
      setText(status, "Copying is not available here; use Download.");
    }
  }
  if (navigator.clipboard && window.isSecureContext) {
    var timer = window.setTimeout(once(fallback), COPY_WAIT_MS);
    navigator.clipboard.writeText(text).then(function () {
      // Also after a late answer: the text is on the clipboard, whatever the textarea did.
      window.clearTimeout(timer);
      done();
    }, once(fallback));
  } else {
    fallback();
  }
}

function downloadOutput(view) {
  var log = view.log;
  var blob = new Blob([loadedText(log)], { type: "text/plain;charset=utf-8" });
  var url = URL.createObjectURL(blob);
  var link = document.createElement("a");
  var name = view.card.getAttribute("data-download-name") || "job.log";
  if (log.filter) {
    name = name.replace(/\.log$/, "-" + log.filter.replace(/[^A-Za-z0-9_.-]/g, "_") + ".log");
  }
  link.href = url;
  link.download = name;
  document.body.appendChild(link);
  link.click();
  link.remove();
  window.setTimeout(function () {
    URL.revokeObjectURL(url);
  }, 1000);
}

export function setUpOutput(view) {
  view.card.querySelector(".copy").addEventListener("click", function () {
    copyOutput(view);
  });
  view.card.querySelector(".download").addEventListener("click", function () {
    downloadOutput(view);
  });
}
