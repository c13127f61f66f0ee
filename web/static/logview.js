/* forge-ci job log viewer: the log area of a job page, enhanced. No dependencies.
 *
 * Lines are formed from log records by the rule of web/logs.py (join in cursor order until a
 * newline; a new step ends a line). Long logs of completed jobs show their first 20 and last 80
 * lines with the middle behind a button (batches of 1,000); search with match navigation
 * reveals hidden matches; error navigation; Follow keeps the end in view; Copy and Download
 * take all loaded output of the selected step(s); step links filter without reloading. While a
 * job runs the page keeps its last 5,000 lines. Log text is only ever set with textContent: it
 * is never interpreted as HTML. Nothing is stored in browser storage.
 *
 * pipelines.js creates the view with ForgeCiLogView(card) and feeds it records as they arrive.
 */
(function () {
  "use strict";

  var COLLAPSE_OVER = 200;
  var KEEP_HEAD = 20;
  var KEEP_TAIL = 80;
  var EXPAND_BATCH = 1000;
  var WINDOW = 5000;
  var ERROR_RE = /\b(error|errors|failed|failure|fatal|exception|traceback|panic)\b/i;

  function setText(element, text) {
    if (element && element.textContent !== text) {
      element.textContent = text;
    }
  }

  window.ForgeCiLogView = function (card) {
    var logEl = card.querySelector(".log");
    var tools = card.querySelector(".log-tools");

    /* ---- The log model ------------------------------------------------------------------ */

    var log = {
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

    function lineElement(line) {
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

    function readRenderedLines() {
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

    function newLine(step, stream, text, fresh) {
      var line = { step: step, stream: stream, text: text, el: null, hidden: false,
        number: log.lines.length + 1 };
      log.lines.push(line);
      fresh.push(line);
      return line;
    }

    /* The same rule as web/logs.py: join in cursor order until a newline; a new step ends a line. */
    function addRecord(record, fresh, changed) {
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
          newLine(record.step_id, record.stream, piece, fresh);
        } else {
          continue;
        }
        log.open = last;
      }
    }

    function visibleForFilter(line) {
      return !log.filter || line.step === log.filter;
    }

    function applyLineClasses(line) {
      if (!line.el) {
        return;
      }
      line.el.classList.toggle("filtered", !visibleForFilter(line));
      line.el.classList.toggle("hidden", line.hidden);
      line.el.classList.toggle("error-hit", ERROR_RE.test(line.text));
    }

    /* Keep what the reader looks at where it is while lines come and go above it. */
    function keepPosition(change) {
      if (log.follow) {
        change();
        return;
      }
      var anchor = null;
      var before = 0;
      var rendered = logEl.querySelectorAll(".line");
      for (var i = 0; i < rendered.length; i++) {
        var box = rendered[i].getBoundingClientRect();
        if (box.height > 0 && box.bottom > 0) {
          anchor = rendered[i];
          before = box.top;
          break;
        }
      }
      change();
      if (anchor && anchor.isConnected) {
        var delta = anchor.getBoundingClientRect().top - before;
        if (Math.abs(delta) >= 1) {
          window.scrollBy(0, delta);
        }
      }
    }

    function trimWindow() {
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
        logEl.insertBefore(log.trimNote, logEl.firstChild);
      }
      log.trimNote.textContent = log.trimmed.toLocaleString() + " earlier lines are not shown " +
        "(the page keeps the last " + WINDOW.toLocaleString() + "); Copy and Download include them.";
    }

    function hiddenCount() {
      var count = 0;
      for (var i = 0; i < log.lines.length; i++) {
        if (log.lines[i].hidden) {
          count += 1;
        }
      }
      return count;
    }

    function placeExpandButton() {
      var hidden = hiddenCount();
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
        log.expandButton.addEventListener("click", expandMiddle);
      }
      var first = null;
      for (var i = 0; i < log.lines.length; i++) {
        if (log.lines[i].hidden && log.lines[i].el) {
          first = log.lines[i].el;
          break;
        }
      }
      if (first) {
        logEl.insertBefore(log.expandButton, first);
      }
      var batch = Math.min(EXPAND_BATCH, hidden);
      log.expandButton.textContent = "Show " + batch.toLocaleString() + " more lines (" +
        hidden.toLocaleString() + " hidden)";
    }

    function expandMiddle() {
      keepPosition(function () {
        var shown = 0;
        for (var i = 0; i < log.lines.length && shown < EXPAND_BATCH; i++) {
          if (log.lines[i].hidden) {
            log.lines[i].hidden = false;
            applyLineClasses(log.lines[i]);
            shown += 1;
          }
        }
        placeExpandButton();
      });
    }

    /* Long logs of completed jobs show their first 20 and last 80 lines; the middle waits behind
     * a button. While a backlog drains, lines that leave the tail join the hidden middle; what the
     * reader expanded stays expanded. */
    function collapseMiddle() {
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
        applyLineClasses(log.lines[i]);
      }
      log.tailStart = Math.max(log.tailStart, tailStart);
      placeExpandButton();
    }

    function appendRecords(records) {
      if (!records.length) {
        return;
      }
      var fresh = [];
      var changed = [];
      for (var i = 0; i < records.length; i++) {
        addRecord(records[i], fresh, changed);
      }
      keepPosition(function () {
        var fragment = document.createDocumentFragment();
        for (var j = 0; j < fresh.length; j++) {
          fresh[j].el = lineElement(fresh[j]);
          applyLineClasses(fresh[j]);
          fragment.appendChild(fresh[j].el);
        }
        for (var k = 0; k < changed.length; k++) {
          setText(changed[k].el.querySelector(".tx"), changed[k].text);
          applyLineClasses(changed[k]);
        }
        logEl.appendChild(fragment);
        if (!log.jobTerminal) {
          trimWindow();
        }
        collapseMiddle();
      });
      if (search.query) {
        runSearch(false);
      }
      if (log.follow) {
        scrollToEnd();
      }
    }

    /* ---- Search and error navigation ---------------------------------------------------- */

    var search = { query: "", hits: [], index: -1 };
    var errors = { index: -1 };

    function clearMarks() {
      var marks = logEl.querySelectorAll("mark");
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

    function runSearch(move) {
      var input = card.querySelector(".log-search");
      var query = input.value.toLowerCase();
      clearMarks();
      search.query = query;
      var previous = search.hits[search.index];
      search.hits = [];
      if (!query) {
        search.index = -1;
        setText(card.querySelector(".search-count"), "");
        return;
      }
      for (var i = 0; i < log.lines.length; i++) {
        var line = log.lines[i];
        if (!line.el || !visibleForFilter(line)) {
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
      highlight(move);
    }

    function highlight(scroll) {
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
      if (log.trimmed) {
        count += " (in the lines shown)";
      }
      setText(card.querySelector(".search-count"), count);
      if (current && scroll) {
        reveal(current.line);
      }
    }

    function reveal(line) {
      if (line.hidden) {
        keepPosition(function () {
          line.hidden = false;
          applyLineClasses(line);
          placeExpandButton();
        });
      }
      setFollow(false);
      line.el.scrollIntoView({ block: "center" });
    }

    function stepSearch(delta) {
      if (!search.hits.length) {
        runSearch(true);
        return;
      }
      search.index = (search.index + delta + search.hits.length) % search.hits.length;
      highlight(true);
    }

    function stepError(delta) {
      var candidates = [];
      for (var i = 0; i < log.lines.length; i++) {
        var line = log.lines[i];
        if (line.el && visibleForFilter(line) && ERROR_RE.test(line.text)) {
          candidates.push(line);
        }
      }
      var status = card.querySelector(".log-status");
      if (!candidates.length) {
        setText(status, "No error lines in the loaded output.");
        return;
      }
      var previous = logEl.querySelector(".current-error");
      if (previous) {
        previous.classList.remove("current-error");
      }
      errors.index = errors.index < 0 && delta < 0
        ? candidates.length - 1
        : (errors.index + delta + candidates.length) % candidates.length;
      var target = candidates[errors.index];
      target.el.classList.add("current-error");
      setText(status, "Error line " + (errors.index + 1) + " of " + candidates.length);
      reveal(target);
    }

    /* ---- Follow, copy, download, steps --------------------------------------------------- */

    function scrollToEnd() {
      window.scrollTo(0, document.documentElement.scrollHeight);
    }

    function setFollow(on) {
      log.follow = on;
      var button = card && card.querySelector(".follow");
      if (button) {
        button.setAttribute("aria-pressed", on ? "true" : "false");
      }
      if (on) {
        scrollToEnd();
      }
    }

    function loadedText() {
      var parts = [];
      for (var i = 0; i < log.lines.length; i++) {
        if (visibleForFilter(log.lines[i])) {
          parts.push(log.lines[i].text);
        }
      }
      return parts.join("\n") + (parts.length ? "\n" : "");
    }

    function copyOutput() {
      var text = loadedText();
      var status = card.querySelector(".log-status");
      var lines = text ? text.split("\n").length - 1 : 0;
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
        try {
          document.execCommand("copy");
          done();
        } catch (e) {
          setText(status, "Copying is not available here; use Download.");
        }
        area.remove();
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, fallback);
      } else {
        fallback();
      }
    }

    function downloadOutput() {
      var blob = new Blob([loadedText()], { type: "text/plain;charset=utf-8" });
      var url = URL.createObjectURL(blob);
      var link = document.createElement("a");
      var name = card.getAttribute("data-download-name") || "job.log";
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

    function setFilter(step, link) {
      log.filter = step;
      var links = card.querySelectorAll("nav.steps a");
      for (var i = 0; i < links.length; i++) {
        if (links[i] === link) {
          links[i].setAttribute("aria-current", "true");
        } else {
          links[i].removeAttribute("aria-current");
        }
      }
      keepPosition(function () {
        for (var j = 0; j < log.lines.length; j++) {
          applyLineClasses(log.lines[j]);
        }
      });
      if (search.query) {
        runSearch(false);
      }
      if (window.history && window.history.replaceState) {
        window.history.replaceState(null, "", link.getAttribute("href"));
      }
    }

    function setUp() {
      log.jobTerminal = card.getAttribute("data-job-terminal") === "true";
      log.filter = card.getAttribute("data-step") || "";
      log.open = card.getAttribute("data-open-line") === "true";
      readRenderedLines();
      for (var i = 0; i < log.lines.length; i++) {
        applyLineClasses(log.lines[i]);
      }
      var more = card.querySelector(".log-more");
      if (more) {
        more.hidden = true;  // the script loads the rest
      }
      collapseMiddle();
      tools.hidden = false;
      var input = card.querySelector(".log-search");
      input.addEventListener("input", function () {
        runSearch(true);
      });
      input.addEventListener("keydown", function (event) {
        if (event.key === "Enter") {
          event.preventDefault();
          stepSearch(event.shiftKey ? -1 : 1);
        }
      });
      card.querySelector(".search-next").addEventListener("click", function () {
        stepSearch(1);
      });
      card.querySelector(".search-prev").addEventListener("click", function () {
        stepSearch(-1);
      });
      card.querySelector(".error-next").addEventListener("click", function () {
        stepError(1);
      });
      card.querySelector(".error-prev").addEventListener("click", function () {
        stepError(-1);
      });
      card.querySelector(".follow").addEventListener("click", function () {
        setFollow(!log.follow);
      });
      card.querySelector(".copy").addEventListener("click", copyOutput);
      card.querySelector(".download").addEventListener("click", downloadOutput);
      var links = card.querySelectorAll("nav.steps a");
      for (var j = 0; j < links.length; j++) {
        links[j].addEventListener("click", function (event) {
          if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) {
            return;
          }
          event.preventDefault();
          setFilter(this.getAttribute("data-step") || "", this);
        });
      }
      // Follow ends when the reader moves up through the page (wheel, touch, keys); a scroll the
      // browser makes on its own (resizing, content arriving) does not count.
      function readerScrolled() {
        if (log.follow) {
          setFollow(false);
        }
      }
      window.addEventListener("wheel", function (event) {
        if (event.deltaY < 0) {
          readerScrolled();
        }
      }, { passive: true });
      window.addEventListener("touchmove", readerScrolled, { passive: true });
      window.addEventListener("keydown", function (event) {
        if (["ArrowUp", "PageUp", "Home"].indexOf(event.key) >= 0 &&
            !/^(INPUT|TEXTAREA)$/.test(event.target.tagName)) {
          readerScrolled();
        }
      });
    }

    setUp();

    return {
      appendRecords: appendRecords,
      /* The job has ended: from now on its log may collapse, and nothing is trimmed. */
      jobEnded: function () {
        if (!log.jobTerminal) {
          log.jobTerminal = true;
          collapseMiddle();
        }
      },
      state: log
    };
  };
})();
