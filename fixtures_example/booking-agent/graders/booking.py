"""Graders of the booking-agent example: plain functions called as check(answer_text, case)."""
import json
import re


def within_opening_hours(answer, case):
    """None when the JSON answer's time is within the opening hours the system prompt states, else why not."""
    system = case["messages"][0]["content"]
    opens, closes = re.search(r"(\d\d:\d\d)-(\d\d:\d\d)", system).groups()
    try:
        time = json.loads(answer)["time"]
    except (ValueError, TypeError, KeyError):
        return "the answer is not a JSON object with a time"
    if not opens <= time < closes:
        return f"time {time!r} is outside the opening hours {opens}-{closes}"
    return None
