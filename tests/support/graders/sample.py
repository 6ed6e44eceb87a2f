"""The grader tests/grading/test_assertions.py names: an answer must mention a refund."""


def mentions_refund(answer: str, case: dict) -> str | None:
    return None if "refund" in answer.lower() else f"case {case['id']}: no refund mentioned"
