"""The figures a multi-host run prints: each proof and fault prints what it
made, answered, refused and recorded, so a CI log shows the counts the assertions held."""

from __future__ import annotations


def figures(title: str, lines: list[str]) -> None:
    print(f"\n[scale] {title}")
    for line in lines:
        print(f"[scale]   {line}")
