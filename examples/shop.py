"""A shop's jobs module, as an application has it: the App's production URL is fixed when the
module is imported. examples/test_shop.py tests it with tinyjobs.testing (README: "Testing
your own tasks"); nothing there reaches this URL."""

from __future__ import annotations

import tinyjobs

app = tinyjobs.App("postgresql://shop@db.internal/shop")  # production; never opened by the tests


@app.task(queue="email", attempts=5)
def send_receipt(run: tinyjobs.Run, order_id: int, email: str) -> dict[str, int] | tinyjobs.Outcome:
    if email.endswith(".invalid"):
        return run.fail(f"undeliverable address {email}")
    body = run.step("render", render_receipt, order_id)  # kept: a retry does not render again
    if not mail_server_up():
        return run.snooze("1m")  # not counted as an attempt
    return {"chars": len(body)}


def render_receipt(order_id: int) -> str:
    return f"Thank you for order {order_id}."


def mail_server_up() -> bool:
    return True


def place_order(order_id: int, email: str) -> tinyjobs.Job:
    """The application code under test: it enqueues the receipt for five minutes later."""
    return send_receipt.enqueue(order_id=order_id, email=email, delay="5m", key=f"receipt:{order_id}")
