/* The log in memory: a job's output as lines, formed from log records by the rule of
 * web/logs.py, and the questions asked of them (in the step filter? an error line?). No DOM
 * work here: a line's element is only carried along.
 *
 * A line is {step, stream, text, el, hidden, number}: `el` is its element while it is on the
 * page (null once trimmed away), `hidden` is true while it waits in a collapsed middle.
 */

var ERROR_RE = /\b(error|errors|failed|failure|fatal|exception|traceback|panic)\b/i;

/* The viewer's state; pipelines.js's test hook exposes it as forgeCi.log. */
export function newLog() {
  return {
    lines: [],          // {step, stream, text, el, hidden, number}
    open: false,        // the last line may continue with the next record
    trimmed: 0,         // lines dropped from the page (still in `lines`)
    collapsed: false,
    expandButton: null,
    trimNote: null,
    filter: "",
    jobTerminal: false,
    follow: false
  };
}

export function newLine(log, step, stream, text) {
  var line = { step: step, stream: stream, text: text, el: null, hidden: false,
    number: log.lines.length + 1 };
  log.lines.push(line);
  return line;
}

/* The same rule as web/logs.py: join in cursor order until a newline; a new step ends a line.
 * New lines go to `fresh`, lines on the page whose text grew to `changed`. */
export function addRecord(log, record, fresh, changed) {
  var pieces = String(record.text).split("\n");
  for (var i = 0; i < pieces.length; i++) {
    var piece = pieces[i].replace(/\r$/, "");
    var last = i === pieces.length - 1;
    var previous = log.lines.length ? log.lines[log.lines.length - 1] : null;
    if (i === 0 && log.open && previous && previous.step === record.step_id) {
      previous.text += piece;
      if (previous.el && changed.indexOf(previous) < 0) {
        changed.push(previous);
      }
    } else if (i > 0 && last && piece === "") {
      log.open = false;
      continue;
    } else if (piece !== "" || !last) {
      fresh.push(newLine(log, record.step_id, record.stream, piece));
    } else {
      continue;
    }
    log.open = last;
  }
}

/* Whether the selected step (all steps when none) includes the line. */
export function inFilter(log, line) {
  return !log.filter || line.step === log.filter;
}

export function isErrorLine(line) {
  return ERROR_RE.test(line.text);
}

export function hiddenCount(log) {
  var count = 0;
  for (var i = 0; i < log.lines.length; i++) {
    if (log.lines[i].hidden) {
      count += 1;
    }
  }
  return count;
}

/* All loaded output of the selected step(s), trimmed lines included, one line a line. */
export function loadedText(log) {
  var parts = [];
  for (var i = 0; i < log.lines.length; i++) {
    if (inFilter(log, log.lines[i])) {
      parts.push(log.lines[i].text);
    }
  }
  return parts.join("\n") + (parts.length ? "\n" : "");
}
