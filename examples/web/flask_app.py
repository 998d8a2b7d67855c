"""Flask with tinyjobs, app factory pattern: the tinyjobs App and its tasks are defined at
import (workers import them too), the Flask app is made by `create_app()`, and a view
enqueues.

    TINYJOBS_URL=sqlite:///jobs.db flask --app "examples.web.flask_app:create_app()" run
    TINYJOBS_URL=sqlite:///jobs.db tinyjobs worker --app examples.web.flask_app:jobs"""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, jsonify, request

import tinyjobs

jobs = tinyjobs.App()  # $TINYJOBS_URL, else sqlite:///tinyjobs.db


@jobs.task(queue="email", attempts=5)
def send_receipt(run: tinyjobs.Run, order_id: int) -> dict[str, int]:
    return {"sent": order_id}


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(config or {})
    app.extensions["tinyjobs"] = jobs

    @app.post("/orders/<int:order_id>")
    def place_order(order_id: int) -> Any:
        delay = request.args.get("delay", "0")
        job = send_receipt.enqueue(order_id=order_id, delay=delay, key=f"receipt:{order_id}")
        return jsonify(job_id=job.id, created=job.created, state=job.state)

    @app.get("/jobs/<job_id>")
    def job_status(job_id: str) -> Any:
        job = jobs.get(job_id)
        if job is None:
            abort(404)
        return jsonify(id=job.id, state=job.state, result=job.result)

    @app.get("/health")
    def health() -> Any:
        return jsonify(ok=True)

    return app
