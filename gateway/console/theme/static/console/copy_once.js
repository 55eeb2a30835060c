// A secret shown once (a new API key, a new webhook secret): each button with `data-copy` puts the field of
// that id on the clipboard. The clipboard API needs a secure context (https or localhost); elsewhere the
// field is selected for Ctrl+C.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    const field = document.getElementById(button.dataset.copy);
    if (!field) continue;
    const label = button.textContent;
    const said = (text) => { button.textContent = text; setTimeout(() => { button.textContent = label; }, 2000); };
    button.addEventListener("click", () => {
      field.focus();
      field.select();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(field.value).then(() => said(button.dataset.copied), () => said("Press Ctrl+C"));
      } else {
        said(document.execCommand && document.execCommand("copy") ? button.dataset.copied : "Press Ctrl+C");
      }
    });
    field.addEventListener("focus", () => field.select());
  }
});
