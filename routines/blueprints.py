"""Ready-made routines to start from (GET /api/v1/routines/blueprints). Each is a complete
create request: POST its `routine` to /api/v1/routines, adjusting targets and schedule."""

from __future__ import annotations

BLUEPRINTS: list[dict] = [
    {
        "id": "daily-briefing",
        "name": "Daily briefing",
        "description": "Every weekday morning, a short plan for the day in your inbox.",
        "routine": {
            "name": "Daily briefing",
            "prompt": "Write a short, friendly briefing to start the working day: three priorities to "
                      "think about, one tip for focus, and a reminder to take breaks. At most 120 words.",
            "trigger": "schedule",
            "schedule": "0 8 * * 1-5",
            "timezone": "UTC",
            "delivery_targets": ["inapp"],
            "uses_ai": True,
        },
        "suggested_targets": ["inapp", "email:<you@example.com>", "telegram"],
    },
    {
        "id": "github-push-summary",
        "name": "Summarize GitHub pushes",
        "description": "Point a GitHub repository webhook (push events, JSON, with the secret) at the "
                       "routine's URL; each push is summarized for the team.",
        "routine": {
            "name": "GitHub push summary",
            "prompt": "Summarize this GitHub push for the team in plain language: the branch, who pushed, "
                      "and one line per commit saying what changed. Mention anything that looks risky.",
            "trigger": "webhook",
            "delivery_targets": ["inapp"],
            "uses_ai": True,
        },
        "suggested_targets": ["inapp", "webhook:https://<chat-incoming-webhook>"],
    },
    {
        "id": "alert-triage",
        "name": "Triage monitoring alerts",
        "description": "Send alerts from a monitoring system to the webhook; each one is explained "
                       "with a severity and a first step.",
        "routine": {
            "name": "Alert triage",
            "prompt": "This is an alert from our monitoring. Say in two sentences what is probably wrong, "
                      "rate its severity (low, medium, high) and give the first thing to check.",
            "trigger": "webhook",
            "delivery_targets": ["inapp"],
            "uses_ai": True,
        },
        "suggested_targets": ["inapp", "email:<oncall@example.com>", "whatsapp:<+5511999990000>"],
    },
    {
        "id": "email-digest",
        "name": "Summarize forwarded e-mail",
        "description": "Forward long e-mails to the routine's address and get the gist with any "
                       "deadlines and requested actions.",
        "routine": {
            "name": "E-mail digest",
            "prompt": "Summarize this e-mail in at most five bullet points. List any deadline and any "
                      "action requested of me at the end.",
            "trigger": "email",
            "delivery_targets": ["inapp"],
            "uses_ai": True,
        },
        "suggested_targets": ["inapp", "telegram"],
    },
    {
        "id": "weekly-reminder",
        "name": "Weekly reminder",
        "description": "A fixed message every Friday afternoon, without a model.",
        "routine": {
            "name": "Timesheet reminder",
            "prompt": "Reminder: fill in this week's timesheet before you leave today.",
            "trigger": "schedule",
            "schedule": "0 16 * * 5",
            "timezone": "UTC",
            "delivery_targets": ["inapp"],
            "uses_ai": False,
        },
        "suggested_targets": ["inapp", "email:<team@example.com>"],
    },
]
