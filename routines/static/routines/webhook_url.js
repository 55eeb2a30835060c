// The routine page's webhook URL: masked on the page; "Copy" and "Show" fetch it whole with a
// POST carrying the form's CSRF token, and never keep it anywhere but the clipboard or the page.
"use strict";
(() => {
  const said = (button, text) => {
    const label = button.dataset.label || (button.dataset.label = button.textContent);
    button.textContent = text;
    setTimeout(() => { button.textContent = label; }, 2000);
  };

  const toClipboard = async (text) => {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    const area = document.createElement("textarea");  // plain http: the old way
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    const copied = document.execCommand("copy");
    area.remove();
    if (!copied) throw new Error("copy refused");
  };

  const setUp = (box) => {
    const text = box.querySelector(".webhook-url-text");
    const copy = box.querySelector(".webhook-url-copy");
    const show = box.querySelector(".webhook-url-show");
    const masked = text.textContent;
    let whole = null;
    const fetchWhole = async () => {
      if (whole) return whole;
      const token = document.querySelector("input[name=csrfmiddlewaretoken]");
      const answer = await fetch(box.dataset.webhookUrl, {
        method: "POST", credentials: "same-origin", cache: "no-store",
        headers: {"X-CSRFToken": token ? token.value : "", "Accept": "application/json"},
      });
      if (!answer.ok) throw new Error(`answered ${answer.status}`);
      whole = (await answer.json()).url;
      return whole;
    };
    copy.addEventListener("click", async () => {
      try {
        await toClipboard(await fetchWhole());
        said(copy, "Copied");
      } catch (error) {
        said(copy, "Could not copy");
      }
    });
    show.addEventListener("click", async () => {
      if (text.textContent !== masked) {
        text.textContent = masked;
        show.textContent = show.dataset.label || "Show";
        return;
      }
      try {
        text.textContent = await fetchWhole();
        show.dataset.label = show.dataset.label || "Show";
        show.textContent = "Hide";
      } catch (error) {
        said(show, "Could not fetch");
      }
    });
  };

  document.addEventListener("DOMContentLoaded", () => document.querySelectorAll("[data-webhook-url]").forEach(setUp));
})();
