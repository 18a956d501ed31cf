// runaii console: progressive enhancement only. Every page and form works without this file; with it,
// destructive forms ask first, a new key's secret can be copied, a running form says so, and live pages
// refresh themselves. Loaded from this origin (the Content-Security-Policy allows nothing else).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // <form data-confirm="question">: ask before submitting.
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }

  // <form data-busy="text">: disable the submit button while the request runs (a playground answer
  // takes seconds).
  for (const form of document.querySelectorAll("form[data-busy]")) {
    form.addEventListener("submit", (event) => {
      if (event.defaultPrevented) return;
      const button = form.querySelector("button[type=submit]");
      if (button) {
        button.disabled = true;
        button.textContent = form.dataset.busy;
      }
    });
  }

  // <button data-copy="#selector">: copy that element's text.
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const source = document.querySelector(button.dataset.copy);
      if (!source || !navigator.clipboard) return;
      try {
        await navigator.clipboard.writeText(source.textContent.trim());
        button.textContent = "Copied";
      } catch {
        button.textContent = "Select and copy it by hand";
      }
    });
  }

  // <section id="…" data-refresh="ms">: reload that section from the same URL every ms, while the tab is
  // visible. A failed fetch (signed out, gateway restarting) leaves the page as it was.
  for (const section of document.querySelectorAll("[data-refresh][id]")) {
    const every = Math.max(2000, Number(section.dataset.refresh) || 5000);
    setInterval(async () => {
      if (document.hidden) return;
      try {
        const response = await fetch(window.location.href, { credentials: "same-origin", redirect: "error" });
        if (!response.ok) return;
        const page = new DOMParser().parseFromString(await response.text(), "text/html");
        const fresh = page.getElementById(section.id);
        if (fresh) section.replaceChildren(...fresh.childNodes);
      } catch {
        // Keep what is shown.
      }
    }, every);
  }
});
