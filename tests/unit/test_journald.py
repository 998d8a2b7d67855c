"""journald's native protocol: what tinyjobs sends to a (fake) journal socket."""

from __future__ import annotations

import os
import socket
import struct

import pytest
import structlog

from tinyjobs import journald, log


def parse(datagram: bytes) -> dict[str, str]:
    """Decode one native-protocol entry, both the `K=v` and the length-prefixed forms."""
    fields, pos = {}, 0
    while pos < len(datagram):
        end = datagram.index(b"\n", pos)
        line = datagram[pos:end]
        if b"=" in line:
            key, _, value = line.partition(b"=")
            fields[key.decode()] = value.decode()
            pos = end + 1
        else:
            (size,) = struct.unpack("<Q", datagram[end + 1 : end + 9])
            fields[line.decode()] = datagram[end + 9 : end + 9 + size].decode()
            pos = end + 9 + size + 1
    return fields


@pytest.fixture
def journal(tmp_path, monkeypatch):
    path = str(tmp_path / "journal.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    monkeypatch.setenv("TINYJOBS_JOURNAL_SOCKET", path)
    yield sock
    sock.close()
    structlog.reset_defaults()


def test_a_job_event_arrives_with_priority_identifier_and_job_fields(journal):
    sender = journald.JournalSender()
    fields = journald.to_fields(
        None,
        "warning",
        {
            "event": "job.retrying",
            "level": "warning",
            "job_id": "j1",
            "task": "send",
            "queue": "mail",
            "attempt": 2,
            "delay": 1.5,
        },
    )
    assert sender.send(fields)
    got = parse(journal.recv(65536))
    assert got["PRIORITY"] == "4"
    assert got["SYSLOG_IDENTIFIER"] == "tinyjobs"
    assert got["TINYJOBS_EVENT"] == "job.retrying"
    assert got["TINYJOBS_JOB_ID"] == "j1"
    assert got["TINYJOBS_TASK"] == "send"
    assert got["TINYJOBS_QUEUE"] == "mail"
    assert got["TINYJOBS_ATTEMPT"] == "2"
    assert got["MESSAGE"].startswith("job.retrying job_id=j1")


def test_a_multi_line_message_is_sent_with_its_length_in_one_field(journal):
    sender = journald.JournalSender()
    assert sender.send({"MESSAGE": "boom\nTraceback (most recent call last):\n  x", "PRIORITY": 3})
    got = parse(journal.recv(65536))
    assert got["MESSAGE"] == "boom\nTraceback (most recent call last):\n  x"
    assert got["PRIORITY"] == "3"


def test_an_entry_too_large_for_a_datagram_goes_in_a_sealed_memfd(journal):
    sender = journald.JournalSender()
    big = "x" * (24 << 20)  # larger than any datagram the socket buffer allows
    assert sender.send({"MESSAGE": big})
    msg, ancdata, _, _ = journal.recvmsg(16, socket.CMSG_SPACE(4))
    assert msg == b""
    (fd,) = struct.unpack("i", ancdata[0][2][:4])
    try:
        data = os.pread(fd, (24 << 20) + 64, 0)
    finally:
        os.close(fd)
    assert parse(data)["MESSAGE"] == big


def test_field_names_are_made_safe_for_the_journal():
    assert journald.field_name("tinyjobs_job-id") == "TINYJOBS_JOB_ID"
    assert journald.field_name("_secret") == "SECRET"
    assert journald.field_name("1x") == "X1X"


def test_configure_chooses_journald_when_journal_stream_names_stdout(journal, tmp_path, monkeypatch, capsys):
    with open(tmp_path / "out", "w") as out:
        info = os.fstat(out.fileno())
        monkeypatch.setattr("sys.stdout", out)
        monkeypatch.setenv("JOURNAL_STREAM", f"{info.st_dev}:{info.st_ino}")
        log.configure()
        log.get_logger(pid=7).info("worker.started", slots=8)
    got = parse(journal.recv(65536))
    assert got["TINYJOBS_EVENT"] == "worker.started"
    assert got["TINYJOBS_SLOTS"] == "8" and got["PRIORITY"] == "6"
    assert (tmp_path / "out").read_text() == ""  # nothing printed on the stream itself


def test_configure_keeps_json_lines_when_journal_stream_names_another_file(journal, tmp_path, monkeypatch):
    monkeypatch.setenv("JOURNAL_STREAM", "1:2")
    with open(tmp_path / "out", "w") as out:
        monkeypatch.setattr("sys.stdout", out)
        log.configure()
        log.get_logger().info("worker.started")
    assert '"event": "worker.started"' in (tmp_path / "out").read_text()


def test_when_the_journal_is_gone_the_entry_is_printed_instead(tmp_path, capsys):
    sender = journald.JournalSender(str(tmp_path / "missing.sock"))
    logger = journald.JournalLogger(sender)
    logger.info(MESSAGE="hello", PRIORITY=6)
    assert '"MESSAGE": "hello"' in capsys.readouterr().err
