"""FastAPI with tinyjobs: a signup writes the user and enqueues its welcome job in one database
transaction on an async psycopg connection, so a rolled-back request leaves no job; the
lifespan opens the App (off the event loop) and closes it. No blocking call on the loop.

    DATABASE_URL=postgresql://app@db/app uvicorn examples.web.fastapi_app:api
    tinyjobs worker --app examples.web.fastapi_app:jobs      # runs the welcome jobs

The jobs live in the same database (schema `tinyjobs` unless TINYJOBS_URL says otherwise)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from fastapi import FastAPI, HTTPException

import tinyjobs

DATABASE_URL = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
jobs = tinyjobs.App(os.environ.get("TINYJOBS_URL", DATABASE_URL))


@jobs.task(queue="email")
def welcome(run: tinyjobs.Run, user_id: int) -> dict[str, int]:
    return {"welcomed": user_id}


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS users (id serial PRIMARY KEY, name text UNIQUE)")
    await jobs.astore()  # opens the store (connect, migrate) in a thread, before the first request
    yield
    await jobs.aclose()


api = FastAPI(lifespan=lifespan)


@api.post("/signup")
async def signup(name: str) -> dict[str, object]:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
        async with conn.transaction():  # the user and the job commit together, or neither
            cur = await conn.execute(
                "INSERT INTO users (name) VALUES (%s) ON CONFLICT DO NOTHING RETURNING id", (name,)
            )
            row = await cur.fetchone()
            if row is None:
                raise HTTPException(409, f"{name} is taken")
            job = await welcome.aenqueue(user_id=row[0], conn=conn)
            if name.startswith("rollback-"):  # a failure after the enqueue: all rolled back
                raise HTTPException(500, "rolled back after enqueue")
    return {"user_id": row[0], "job_id": job.id}


@api.get("/jobs/{job_id}")
async def job_status(job_id: str) -> dict[str, object]:
    job = await jobs.aget(job_id)
    if job is None:
        raise HTTPException(404, "no such job")
    return {"id": job.id, "state": job.state, "result": job.result}
