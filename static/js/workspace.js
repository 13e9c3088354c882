// Keyboard for the annotation workspace: digits pick a grade, s skips, u undoes the last label, ? toggles the
// help. Keys typed into the note (or any text field) are left alone. The buttons do the work, so the page works
// the same with the mouse and without this script.
(function () {
  "use strict";

  function typing(target) {
    if (!target) return false;
    if (target.isContentEditable) return true;
    const tag = target.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    return tag === "INPUT" && !["checkbox", "radio", "button", "submit"].includes(target.type);
  }

  function click(selector) {
    const element = document.querySelector(selector);
    if (element && !element.disabled) {
      // htmx wires up swapped-in forms when the swap settles (about 20 ms later): a key pressed before that
      // would submit the form as a plain page load. Wiring it now is harmless (htmx does it once per element).
      if (window.htmx && element.form) window.htmx.process(element.form);
      element.click();
      return true;
    }
    return false;
  }

  document.addEventListener("keydown", function (event) {
    if (!document.getElementById("workspace") || typing(event.target)) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    let handled = false;
    if (/^[0-9]$/.test(event.key)) {
      handled = click('#label-form button[name="grade"][value="' + event.key + '"]');
    } else if (event.key === "s") {
      handled = click("#skip-button");
    } else if (event.key === "u") {
      handled = click("#undo-button");
    } else if (event.key === "?") {
      const help = document.getElementById("shortcut-help");
      if (help) {
        help.hidden = !help.hidden;
        handled = true;
      }
    }
    if (handled) event.preventDefault();
  });
})();
