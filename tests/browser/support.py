"""What the browser tests share: the browser, the window, the measure of a sideways scroll, and where
their screenshots go. SCREENSHOT_DIR names the folder
(.ci/run points it at ci-artifacts/screenshots, which CI keeps); without it, var/screenshots in the
repository (ignored by git). The folder is made when missing."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"  # Debian's, driven by Playwright (executable_path)
VIEWPORT = {"width": 1366, "height": 768}  # the console's promise: usable at 1366 px
OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"  # > 0: sideways


def screenshot_path(name: str) -> Path:
    """The file a screenshot (or another artifact of a browser test) named `name` is saved to: a bare
    name gets `.png`."""
    folder = Path(os.environ.get("SCREENSHOT_DIR") or REPO / "var" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / (name if Path(name).suffix else f"{name}.png")
