/* The line elements of the log area: made for new lines, read back from the lines the server
 * rendered, and classed by the state of their line (filtered out, hidden, an error line).
 * Log text is only ever set with textContent: it is never interpreted as HTML.
 */

import { inFilter, isErrorLine } from "./model.js";

export function setText(element, text) {
  if (element && element.textContent !== text) {
    element.textContent = text;
  }
}

export function lineElement(line) {
  var el = document.createElement("div");
  el.className = "line" + (line.stream !== "stdout" ? " stream-" + line.stream : "");
  el.setAttribute("data-step", line.step);
  var number = document.createElement("span");
  number.className = "ln";
  number.setAttribute("aria-hidden", "true");
  number.textContent = String(line.number);
  var text = document.createElement("span");
  text.className = "tx";
  text.textContent = line.text;
  el.appendChild(number);
  el.appendChild(text);
  return el;
}

/* The lines of the server's first pages become the model's first lines. */
export function readRenderedLines(log, logEl) {
  var elements = logEl.querySelectorAll(".line");
  for (var i = 0; i < elements.length; i++) {
    var el = elements[i];
    var stream = "stdout";
    var match = /stream-([a-z]+)/.exec(el.className);
    if (match) {
      stream = match[1];
    }
    var tx = el.querySelector(".tx");
    log.lines.push({
      step: el.getAttribute("data-step") || "",
      stream: stream,
      text: tx ? tx.textContent : "",
      el: el,
      hidden: false,
      number: log.lines.length + 1
    });
    el.classList.remove("filtered");
  }
}

export function applyLineClasses(log, line) {
  if (!line.el) {
    return;
  }
  line.el.classList.toggle("filtered", !inFilter(log, line));
  line.el.classList.toggle("hidden", line.hidden);
  line.el.classList.toggle("error-hit", isErrorLine(line));
}
