// A routine's new webhook secret page: "Copy" puts the secret on the clipboard. The clipboard API needs a
// secure context (https or localhost); elsewhere the secret is selected for Ctrl+C.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const field = document.getElementById("webhook-secret");
  const button = document.getElementById("webhook-secret-copy");
  if (!field || !button) return;
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
});
