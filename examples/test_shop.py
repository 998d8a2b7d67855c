# examples/test_shop.py: run with `pytest examples/test_shop.py`
from examples import shop
from tinyjobs.testing import swapped


def test_an_order_enqueues_its_receipt_for_five_minutes_later():
    with swapped(shop.app) as jobs:  # memory:// and a FakeClock, for this test only
        shop.place_order(7, "ann@example.com")
        job = jobs.assert_enqueued(shop.send_receipt, order_id=7)
        assert job.state == "scheduled"
        assert jobs.drain() == 0  # not due yet
        jobs.advance("5m")
        assert jobs.drain() == 1
        assert shop.app.get(job.id).result == {"chars": 22}


def test_the_receipt_task_in_line(tinyjobs_swap, monkeypatch):
    jobs = tinyjobs_swap(shop.app)  # the pytest plugin's fixture: swapped until the test ends
    assert jobs.run(shop.send_receipt, order_id=8, email="bob@example.com").result == {"chars": 22}

    failed = jobs.run(shop.send_receipt, order_id=9, email="eve@example.invalid")
    assert (failed.state, failed.error) == ("failed", "undeliverable address eve@example.invalid")

    monkeypatch.setattr(shop, "mail_server_up", lambda: False)
    snoozed = jobs.run(shop.send_receipt, order_id=10, email="cy@example.com")
    assert (snoozed.state, snoozed.attempts) == ("scheduled", 0)  # a snooze gives the attempt back
    monkeypatch.setattr(shop, "mail_server_up", lambda: True)
    jobs.advance("1m")
    assert jobs.run_job(snoozed.id).state == "done"
