"""An application process that enqueues while the store fails (tests/process/test_store_crash.py):
`python fault_enqueuer.py COUNT ACKED_FILE` with $TINYJOBS_URL set. Enqueues COUNT jobs of
supapp (every tenth one a `hold` that keeps a worker busy a moment, so that jobs are in flight
when the store dies), each with an id of its own. A job is written to ACKED_FILE only once its
enqueue returned; a call that raised tinyjobs' StoreError is tried again with the same id (the
outcome of a call that failed is unknown; the id makes the retry add nothing twice). Any other
exception ends the process with a traceback on stderr, which the test reads."""

from __future__ import annotations

import sys
import time

import supapp

from tinyjobs.errors import StoreError


def main(count: int, acked_path: str) -> None:
    failures = 0
    with open(acked_path, "a") as acked:
        for n in range(count):
            while True:
                try:
                    if n % 10 == 9:
                        supapp.hold.enqueue(seconds=0.3, id=f"e{n}")
                    else:
                        supapp.quick.enqueue(n=n, id=f"e{n}")
                    break
                except StoreError as err:
                    failures += 1
                    print(f"enqueue e{n} failed: {err}", file=sys.stdout, flush=True)
                    time.sleep(0.05)
            acked.write(f"e{n}\n")
            acked.flush()
    print(f"done: {count} acknowledged, {failures} failed calls retried", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
