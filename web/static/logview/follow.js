/* Where the page is scrolled. Follow keeps the end of the log in view until the reader moves up
 * through the page; without Follow, what the reader looks at stays where it is while lines come
 * and go above it.
 */

export function scrollToEnd() {
  window.scrollTo(0, document.documentElement.scrollHeight);
}

export function setFollow(view, on) {
  view.log.follow = on;
  var button = view.card && view.card.querySelector(".follow");
  if (button) {
    button.setAttribute("aria-pressed", on ? "true" : "false");
  }
  if (on) {
    scrollToEnd();
  }
}

/* Run `change` (which adds, removes, hides or shows lines) without moving the reader's place. */
export function keepPosition(view, change) {
  if (view.log.follow) {
    change();
    return;
  }
  var anchor = null;
  var before = 0;
  var rendered = view.logEl.querySelectorAll(".line");
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

export function setUpFollow(view) {
  view.card.querySelector(".follow").addEventListener("click", function () {
    setFollow(view, !view.log.follow);
  });
  // Follow ends when the reader moves up through the page (wheel, touch, keys); a scroll the
  // browser makes on its own (resizing, content arriving) does not count.
  function readerScrolled() {
    if (view.log.follow) {
      setFollow(view, false);
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
