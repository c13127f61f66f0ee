/* forge-ci Pipelines page: show the inputs of the workflow file typed in the dispatch form.
 *
 * The server renders one fieldset of inputs per dispatchable file and enables only the one of
 * the file the form names; this keeps that true while the file field changes. Disabled fieldsets
 * send nothing, so only the chosen file's inputs are posted. Without this script the page still
 * works: the inputs shown are those of the file the page was rendered with.
 */
(function () {
  "use strict";

  var field = document.getElementById("dispatch-workflow");
  if (!field) {
    return;
  }
  var sets = document.querySelectorAll("fieldset.dispatch-inputs");

  function show() {
    var chosen = field.value.trim();
    for (var i = 0; i < sets.length; i++) {
      var match = sets[i].getAttribute("data-workflow") === chosen;
      sets[i].disabled = !match;
      sets[i].hidden = !match;
    }
  }

  field.addEventListener("input", show);
  field.addEventListener("change", show);
  show();
})();
