/* forge-ci run pages: live updates. No dependencies but the log viewer, no inline code.
 *
 * Without this script the page is a static snapshot that can be reloaded. With it, one
 * serialized poll every 2 s: GET .../updates (run, jobs, steps, queue blockers, which buttons
 * apply; sent with the last answer's ETag, so an unchanged run answers 304 without a body and
 * running durations count on here, from the server's clock; and with the last answer's base as
 * `since`, so a changed run sends only the jobs that changed, or all of them with full: true
 * when the server no longer knows that base) and, for the selected job, GET .../attempts/<id>/logs?after=<cursor>, whose records go
 * to the log viewer (logview/view.js). A log backlog (has_more) is drained at once; polling stops
 * when the run is terminal and the log stream complete. Errors back off (capped at 30 s), a
 * revoked access (401/403/404) stops polling, hidden tabs pause, leaving the page aborts the
 * request in flight. Nothing is stored in browser storage.
 *
 * An ES module (loaded with type="module"): it imports the log viewer's modules itself.
 */
import { createLogView } from "./logview/view.js";

(function () {
  "use strict";

  var POLL_MS = 2000;
  var MAX_BACKOFF_MS = 30000;
  var SYMBOLS = {
    success: "\u2713", failure: "\u2717", timed_out: "\u23F1", lost: "?", cancelled: "\u2298",
    skipped: "\u21B7", running: "\u25CF", queued: "\u25CB", waiting: "\u25CC", pending: "\u25CB",
    leased: "\u25CB"
  };

  var page = document.getElementById("run-page");
  if (!page || !window.fetch) {
    return;
  }
  var card = document.getElementById("job");
  var view = null;  // the log viewer (logview/view.js) of the selected job, if any
  var updatesUrl = page.getAttribute("data-updates-url");

  var poll = {
    runTerminal: page.getAttribute("data-terminal") === "true",
    logComplete: true,
    logsUrl: "",
    cursor: "0",
    backoff: POLL_MS,
    timer: null,
    controller: null,
    stopped: false,
    busy: false,
    etag: "",
    base: "",  // the last answer's base: the next poll asks only for what changed since
    deltas: 0,  // answers that carried only what changed (for tests and curious people)
    serverOffset: 0  // server clock minus this one, from the last answer's server_time
  };
  var running = new Map();  // element -> started ms, for what runs now: its duration ticks here

  function label(value) {
    return String(value).replace(/_/g, " ");
  }

  function setStatusClass(element, status) {
    var classes = element.getAttribute("class") || "";
    classes = classes.replace(/\bstatus-[a-z_]+\b/g, "").replace(/\s+/g, " ").trim();
    element.setAttribute("class", classes + " status-" + status);
  }

  function setBadge(badge, status, withText) {
    if (!badge) {
      return;
    }
    setStatusClass(badge, status);
    badge.textContent = (SYMBOLS[status] || "\u2022") + " ";
    if (withText) {
      var text = document.createElement("span");
      text.className = "text";
      text.textContent = label(status);
      badge.appendChild(text);
    }
  }

  function setText(element, text) {
    if (element && element.textContent !== text) {
      element.textContent = text;
    }
  }

  /* ---- Live updates -------------------------------------------------------------------- */

  function parseTime(text) {  // "2026-12-01 12:00:05 UTC", as web/present.py writes it
    var m = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) UTC$/.exec(text || "");
    return m ? Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]) : null;
  }

  function formatDuration(ms) {  // web/present.py format_duration
    var seconds = Math.max(0, Math.floor(ms / 1000));
    if (seconds < 60) {
      return seconds + "s";
    }
    var minutes = Math.floor(seconds / 60);
    seconds = seconds % 60;
    if (minutes < 60) {
      return minutes + "m " + (seconds < 10 ? "0" : "") + seconds + "s";
    }
    var hours = Math.floor(minutes / 60);
    minutes = minutes % 60;
    return hours + "h " + (minutes < 10 ? "0" : "") + minutes + "m";
  }

  /* A running duration keeps counting between answers (an unchanged poll has no body, and a
   * changed one leaves out the jobs that did not change). */
  function showDuration(element, text, started, completed) {
    setText(element, text);
    if (!element) {
      return;
    }
    if (started && !completed && parseTime(started) !== null) {
      running.set(element, parseTime(started));
    } else {
      running.delete(element);
    }
  }

  function tickDurations() {
    var now = Date.now() + poll.serverOffset;
    running.forEach(function (started, element) {
      setText(element, formatDuration(now - started));
    });
  }

  function applyUpdates(data) {
    if (data === null) {
      return;  // 304: nothing shown has changed
    }
    var serverNow = parseTime(data.server_time);
    if (serverNow !== null) {
      poll.serverOffset = serverNow - Date.now();
    }
    poll.base = data.base || "";
    if (data.full === false) {
      poll.deltas += 1;  // the jobs left out are shown as they are
    }
    var run = data.run;
    setBadge(document.getElementById("run-status"), run.status, true);
    setText(document.getElementById("run-started"), run.started_at || "not yet");
    showDuration(document.getElementById("run-duration"), run.duration || "\u2014",
      run.started_at, run.completed_at);
    setText(document.getElementById("run-note"), run.note);
    var controls = data.controls || {};
    var forms = { cancel: ".control-cancel", rerun: ".control-rerun",
      rerun_failed: ".control-rerun-failed" };
    Object.keys(forms).forEach(function (key) {
      var form = page.querySelector(forms[key]);
      if (form) {
        form.hidden = !controls[key];
      }
    });
    for (var i = 0; i < data.jobs.length; i++) {
      var job = data.jobs[i];
      var item = page.querySelector('ul.jobs li[data-job="' + job.id + '"]');
      if (item) {
        setBadge(item.querySelector(".job-status"), job.status, true);
        setText(item.querySelector(".t-queued"), job.queued_at ? "queued " + job.queued_at : "");
        setText(item.querySelector(".t-started"), job.started_at ? "started " + job.started_at : "");
        showDuration(item.querySelector(".t-duration"), job.duration, job.started_at,
          job.completed_at);
        setText(item.querySelector(".job-note"), job.note);
      }
      var node = page.querySelector('svg.graph a[data-job="' + job.id + '"]');
      if (node) {
        setStatusClass(node, job.status);
        setText(node.querySelector(".mark"), SYMBOLS[job.status] || "\u2022");
        setText(node.querySelector("title"), job.name + ": " + label(job.status));
      }
      if (card && card.getAttribute("data-job") === job.id) {
        applySelectedJob(job);
      }
    }
    poll.runTerminal = run.terminal;
  }

  function applySelectedJob(job) {
    var ended = job.state === "completed";
    for (var i = 0; i < job.steps.length; i++) {
      var step = job.steps[i];
      var link = card.querySelector('nav.steps a[data-step="' + cssEscape(step.id) + '"]');
      if (link) {
        setBadge(link.querySelector(".step-status"), step.status, false);
        showDuration(link.querySelector(".step-duration"), step.duration, step.started_at,
          step.completed_at);
      }
    }
    if (job.attempt && job.attempt.id !== card.getAttribute("data-attempt")) {
      // A provider started the job: follow its attempt's log from the beginning.
      card.setAttribute("data-attempt", job.attempt.id);
      poll.logsUrl = updatesUrl.replace(/\/updates$/, "/attempts/" + job.attempt.id + "/logs");
      poll.cursor = "0";
      poll.logComplete = false;
      var empty = card.querySelector(".log-empty");
      if (empty) {
        empty.remove();
      }
    } else if (!job.attempt) {
      // Not started, or ended without ever running: say what happened instead of a log.
      var note = card.querySelector(".log-empty");
      if (note && !note.querySelector("a")) {  // a reused job's note keeps its link
        setText(note, job.log_note);
      }
      if (ended) {
        poll.logComplete = true;  // there is no log to wait for
      }
    }
    if (ended && view) {
      view.jobEnded();
    }
  }

  function cssEscape(value) {
    return window.CSS && CSS.escape ? CSS.escape(value) : value.replace(/["\\]/g, "\\$&");
  }

  function HttpError(status) {
    this.status = status;
  }

  /* GET url as JSON; with etag, null when the server answers 304 (unchanged since then). */
  function getJSON(url, etag) {
    poll.controller = window.AbortController ? new AbortController() : null;
    var headers = { Accept: "application/json" };
    if (etag) {
      headers["If-None-Match"] = etag;
    }
    return fetch(url, {
      credentials: "same-origin",
      cache: "no-store",
      headers: headers,
      signal: poll.controller ? poll.controller.signal : undefined
    }).then(function (response) {
      if (etag && response.status === 304) {
        return null;
      }
      if (!response.ok) {
        throw new HttpError(response.status);
      }
      if (etag !== undefined) {
        poll.etag = response.headers.get("ETag") || "";
      }
      return response.json();
    });
  }

  function setPollStatus(text) {
    var status = card ? card.querySelector(".log-status") : null;
    if (status) {
      setText(status, text);
    }
  }

  function schedule(delay) {
    if (poll.stopped) {
      return;
    }
    window.clearTimeout(poll.timer);
    poll.timer = window.setTimeout(tick, delay);
  }

  function finished() {
    return poll.runTerminal && poll.logComplete;
  }

  function stop(message) {
    poll.stopped = true;
    window.clearTimeout(poll.timer);
    if (message) {
      setPollStatus(message);
    }
  }

  function tick() {
    if (poll.stopped || poll.busy) {
      return;
    }
    if (document.hidden) {
      return;  // resumed by visibilitychange
    }
    poll.busy = true;
    var needUpdates = !poll.runTerminal;
    var url = poll.base ? updatesUrl + "?since=" + encodeURIComponent(poll.base) : updatesUrl;
    var step = needUpdates ? getJSON(url, poll.etag).then(applyUpdates) : Promise.resolve();
    step.then(function () {
      if (poll.logComplete || !poll.logsUrl) {
        return false;
      }
      return getJSON(poll.logsUrl + "?after=" + encodeURIComponent(poll.cursor)).then(
        function (data) {
          if (view) {
            view.appendRecords(data.records);
          }
          poll.cursor = data.next_cursor;
          poll.logComplete = data.complete;
          return data.has_more;
        }
      );
    }).then(function (backlog) {
      poll.busy = false;
      poll.backoff = POLL_MS;
      setPollStatus("");
      if (finished()) {
        stop("");
        return;
      }
      schedule(backlog ? 0 : POLL_MS);
    }, function (error) {
      poll.busy = false;
      if (error && error.name === "AbortError") {
        return;
      }
      if (error instanceof HttpError && (error.status === 401 || error.status === 403 ||
          error.status === 404)) {
        stop("This run is no longer available to you; updates stopped.");
        return;
      }
      poll.backoff = Math.min(poll.backoff * 2, MAX_BACKOFF_MS);
      setPollStatus("Cannot reach the server; trying again in " +
        Math.round(poll.backoff / 1000) + " s.");
      schedule(poll.backoff);
    });
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && !poll.stopped) {
      schedule(0);
    }
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted && !finished()) {
      poll.stopped = false;  // back from the back/forward cache: carry on
      schedule(0);
    }
  });
  window.addEventListener("pagehide", function () {
    poll.stopped = true;
    window.clearTimeout(poll.timer);
    if (poll.controller) {
      poll.controller.abort();
    }
  });

  if (card) {
    view = createLogView(card);
    var attempt = card.getAttribute("data-attempt");
    poll.logsUrl = card.getAttribute("data-logs-url") || "";
    poll.cursor = card.getAttribute("data-next-cursor") || "0";
    poll.logComplete = attempt
      ? card.getAttribute("data-complete") === "true"
      : card.getAttribute("data-job-terminal") === "true";
  }
  if (finished()) {
    poll.stopped = true;  // a finished run with its whole log on the page: nothing to ask
  } else {
    schedule(poll.runTerminal ? 0 : POLL_MS);
    window.setInterval(tickDurations, 1000);
  }

  /* Test hook: lets browser tests see the poller's state without storing anything. */
  page.forgeCi = { poll: poll, log: view ? view.state : null };
})();
