// The annotation workspace. Keys: digits pick a grade, s skips, u undoes the last label, d opens or folds the
// relevance definition, n goes to the note, f finishes the session, ? toggles the help. Keys typed into a text
// field are left alone. The buttons and links do the work, so the page works the same with the mouse, and
// without this script (plain forms).
//
// No wait between items: the page carries the next item, already leased to the expert, in <template
// id="ws-next">. A grade shows that item at once and posts the label in the background, naming the item now
// shown (X-Workspace-Shown); the answer brings the item after it ("advance"), or the whole workspace when
// something went wrong (a refused label, an item lost meanwhile), which then replaces the page's.
//
// Each answer to a label carries its confirmation (<template id="ws-saved">), shown in #ws-toast: fixed over the
// page, so nothing moves, read out politely, gone after a few seconds (kept while the pointer is on it). The
// answer's counters replace the page's, and the project header's count of items waiting follows them.
(function () {
  "use strict";

  const DEFINITION_KEY = "annotator:definition-open:";
  // Each action waits for the one before it: a grade pressed while a label is on its way waits for the item
  // that the answer brings.
  let chain = Promise.resolve();

  function enqueue(action) {
    chain = chain.then(action).catch(function () { /* reported by the action */ });
  }

  function typing(target) {
    if (!target) return false;
    if (target.isContentEditable) return true;
    const tag = target.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    return tag === "INPUT" && !["checkbox", "radio", "button", "submit"].includes(target.type);
  }

  function byId(id) {
    return document.getElementById(id);
  }

  function current(selector) {
    const box = byId("ws-current");
    return box ? box.querySelector(selector) : null;
  }

  // The definition beside the passage shows its first lines, or all of it; the choice is kept per question.
  function definitionSet(aside, open) {
    aside.classList.toggle("collapsed", !open);
    const toggle = aside.querySelector(".ws-definition-toggle");
    if (toggle) toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }

  function definitionRestore() {
    const grid = current(".ws-grid");
    const aside = current(".ws-definition");
    if (!grid || !aside || aside.querySelector(".ws-news")) return; // changes are shown whole, the first time
    let open = null;
    try {
      open = window.localStorage.getItem(DEFINITION_KEY + grid.dataset.query);
    } catch (error) {
      open = null; // storage refused (private mode): folded by default
    }
    definitionSet(aside, open === "1");
  }

  function definitionToggle(aside) {
    const open = aside.classList.contains("collapsed");
    definitionSet(aside, open);
    const grid = aside.closest(".ws-grid");
    try {
      if (grid) window.localStorage.setItem(DEFINITION_KEY + grid.dataset.query, open ? "1" : "0");
    } catch (error) {
      // not remembered, still toggled
    }
  }

  let toastTimer = null;

  function toastHide(region) {
    const body = region.firstElementChild;
    if (!body) return;
    body.classList.add("leaving");
    // Removed after its fade (none where motion is reduced): an empty region shows nothing.
    toastTimer = window.setTimeout(function () { region.replaceChildren(); }, 300);
  }

  function toastShow() {
    const source = byId("ws-saved");
    const region = byId("ws-toast");
    if (!source || !region) return;
    source.remove();
    window.clearTimeout(toastTimer);
    region.replaceChildren(document.importNode(source.content, true));
    const seconds = Number(source.dataset.seconds) || 4;
    const body = region.firstElementChild;
    if (!body) return;
    const later = function () { toastTimer = window.setTimeout(function () { toastHide(region); }, seconds * 1000); };
    body.addEventListener("mouseenter", function () { window.clearTimeout(toastTimer); });
    body.addEventListener("mouseleave", later);
    later();
  }

  // The header is not part of an answer: its count of items waiting is set from the answer's (data-waiting).
  function tabCount() {
    const progress = byId("ws-progress");
    const count = document.querySelector('.project-tab[data-tab="annotate"] .tab-count');
    if (!progress || !count || progress.dataset.waiting === undefined) return;
    const number = Array.from(count.childNodes).find(function (node) {
      return node.nodeType === Node.TEXT_NODE && node.nodeValue.trim();
    });
    if (number) number.nodeValue = progress.dataset.waiting;
  }

  // A label counts from the moment its item leaves the screen: the counters step at once, marked busy, and the
  // answer, which may take seconds on a busy server, replaces them with what the server counted (not busy).
  // Without this they read one label behind while the next item is already shown.
  function counterStep(name, by) {
    const strong = document.querySelector("#ws-progress [data-count=" + name + "]");
    if (!strong || strong.textContent.includes("+")) return null; // a capped count stays as it was
    const value = Number(strong.textContent.replace(/,/g, "")) + by;
    if (!Number.isFinite(value) || value < 0) return null;
    strong.textContent = value.toLocaleString("en-US");
    return value;
  }

  function countersAdvance() {
    counterStep("session-labelled", 1);
    counterStep("done-today", 1);
    counterStep("left", -1);
    const progress = byId("ws-progress");
    if (progress) progress.setAttribute("aria-busy", "true");
    const waiting = progress && progress.dataset.waiting;
    if (waiting && !waiting.includes("+")) {
      const value = Number(waiting.replace(/,/g, "")) - 1;
      if (Number.isFinite(value) && value >= 0) progress.dataset.waiting = value.toLocaleString("en-US");
    }
    tabCount();
  }

  function answered() {
    toastShow();
    tabCount();
  }

  function settled() {
    answered();
    definitionRestore();
    const passage = current(".ws-passage");
    if (passage && (!document.activeElement || document.activeElement === document.body)) {
      passage.focus({ preventScroll: true });
    }
  }

  function csrf(form) {
    const input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function replaceWorkspace(html) {
    const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("workspace");
    const old = byId("workspace");
    if (!fresh || !old) {
      window.location.reload();
      return;
    }
    old.replaceWith(fresh);
    if (window.htmx) window.htmx.process(fresh);
    settled();
  }

  function replaceParts(html) {
    const doc = new DOMParser().parseFromString(html, "text/html");
    ["ws-progress", "ws-messages", "ws-next"].forEach(function (id) {
      const fresh = doc.getElementById(id);
      const old = byId(id);
      if (fresh && old) old.replaceWith(fresh);
    });
    answered();
  }

  // Show the prefetched item and post the label of the one it replaces; false when there is nothing
  // prefetched (the form then posts as usual, and the answer is the whole workspace).
  function advance(form, grade) {
    const next = byId("ws-next");
    const box = byId("ws-current");
    const item = next && next.content.firstElementChild;
    if (!box || !item) return false;
    const data = new FormData(form);
    data.set("grade", grade);
    const shown = item.dataset.pair;
    box.replaceChildren(document.importNode(next.content, true));
    next.replaceChildren();
    if (window.htmx) window.htmx.process(box);
    document.activeElement && document.activeElement.blur && document.activeElement.blur();
    countersAdvance();
    settled();
    return fetch(form.action, {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf(form), "X-Workspace-Shown": shown, "HX-Request": "true" },
    }).then(function (response) {
      return response.text().then(function (html) {
        if (response.headers.get("X-Workspace") === "advance") {
          replaceParts(html);
        } else {
          replaceWorkspace(html);
        }
      });
    }, function () {
      // Not sent (the network): reload, which shows the item the label was for again, still leased.
      window.location.reload();
    });
  }

  // A grade button, clicked or pressed by key: the prefetched item comes at once.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!form || form.id !== "label-form" || !byId("ws-current") || !byId("ws-current").contains(form)) return;
    const button = event.submitter;
    if (!button || button.name !== "grade") return;
    const next = byId("ws-next");
    if (!next || !next.content.firstElementChild) return; // nothing prefetched: htmx posts it
    event.preventDefault();
    event.stopImmediatePropagation();
    const grade = button.value;
    enqueue(function () {
      // The item may have changed while an earlier label was on its way: label what is shown now.
      const shownForm = current("#label-form");
      if (!shownForm) return undefined;
      const sent = advance(shownForm, grade);
      if (sent === false) {
        const again = shownForm.querySelector('button[name="grade"][value="' + grade + '"]');
        if (again) {
          if (window.htmx) window.htmx.process(shownForm);
          again.click();
        }
        return undefined;
      }
      return sent;
    });
  }, true);

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

  document.addEventListener("click", function (event) {
    const toggle = event.target.closest && event.target.closest(".ws-definition-toggle");
    if (toggle) definitionToggle(toggle.closest(".ws-definition"));
  });

  document.addEventListener("keydown", function (event) {
    if (!byId("workspace")) return;
    if (event.key === "Escape" && typing(event.target)) {
      event.target.blur();
      return;
    }
    if (typing(event.target) || event.ctrlKey || event.metaKey || event.altKey) return;
    let handled = true;
    const key = event.key;
    if (/^[0-9]$/.test(key)) {
      handled = Boolean(document.querySelector('#label-form button[name="grade"][value="' + key + '"]'));
      if (handled) enqueue(function () { click('#ws-current #label-form button[name="grade"][value="' + key + '"]'); });
    } else if (key === "s") {
      enqueue(function () { click("#ws-current #skip-button"); });
    } else if (key === "u") {
      enqueue(function () { click("#workspace #undo-button"); });
    } else if (key === "f") {
      enqueue(function () { click("#workspace #finish-link"); });
    } else if (key === "d") {
      const aside = current(".ws-definition");
      if (aside) definitionToggle(aside);
    } else if (key === "n") {
      const note = current("input[name=note]");
      if (note) note.focus();
    } else if (key === "?") {
      const help = byId("shortcut-help");
      if (help) help.hidden = !help.hidden;
    } else {
      handled = false;
    }
    if (handled) event.preventDefault();
  });

  // htmx swaps (skip, undo, a label posted without a prefetched item) bring a new workspace.
  document.addEventListener("htmx:afterSettle", settled);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", settled);
  } else {
    settled();
  }
})();
