"""The Redis store's enqueue arguments and replies (codec.py): one job travels as plain arguments
and comes back as an array, a batch as JSON both ways."""

from __future__ import annotations

import json

import pytest

from tinyjobs.errors import JobNotFound
from tinyjobs.stores.base import NewJob
from tinyjobs.stores.redis import codec


def test_one_job_goes_as_its_values_and_a_batch_as_one_json_argument():
    one = NewJob(id="a", task="t", payload='{"x": 1}')
    assert codec.enqueue_args([one], 5.0, None) == ["5.0", *codec.job_args(one)]
    two = codec.enqueue_args([one, NewJob(id="b", task="t")], None, None)
    assert len(two) == 2 and [j[0] for j in json.loads(two[1])] == ["a", "b"]


def test_replies_of_both_shapes_make_the_same_snapshots():
    job = NewJob(id="a", task="t", payload='{"x": 1}')
    result = ["1", "a", "pending", "100", 7, ""]
    [single] = codec.enqueue_reply([job], ["100", *result])
    [batched] = codec.enqueue_reply([job], json.dumps(["100", [result]]))
    assert single == batched and single.created and single.due_at == 100.0
    existing = [
        "0",
        "a",
        ["t", "t", "q", "default", "p", '{"x": 2}', "st", "pending", "pr", "0", "a", "0"]
        + ["ma", "3", "d", "90", "ca", "80"],
    ]
    [old] = codec.enqueue_reply([job], ["100", *existing])
    assert not old.created and old.args == {"x": 2}
    with pytest.raises(JobNotFound):
        codec.enqueue_reply([job], ["!", "p", "a"])
